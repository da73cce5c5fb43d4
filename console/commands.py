"""Command-palette entries: the console's actions by name, and "open topic" for a typed
stream path or topic name, or for any part of a name in any stream (3 characters or more,
`Cluster.search`); looked up in a thread: the palette must stay responsive."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.remote import readable

if TYPE_CHECKING:
    from console.app import ConsoleApp

_SUGGESTIONS = 10


class ConsoleCommands(Provider):
    @property
    def console(self) -> ConsoleApp:
        return self.app  # type: ignore[return-value]  # the palette of ConsoleApp only

    def _actions(self) -> list[tuple[str, str, Callable[[], object]]]:
        app = self.console
        actions: list[tuple[str, str, Callable[[], object]]] = [
            (f"Show tab: {title}", f"switch to the {title} tab", partial(app.show_tab, tab))
            for tab, title in app.TABS
        ]
        actions += [
            ("Produce a message", "to the current topic", app.action_produce),
            (
                "Register a schema",
                "for the current topic's values or keys",
                # #messages is the MessagesPane, which query_one cannot name without its class
                lambda: app.query_one("#messages").action_register_schema(),  # type: ignore[attr-defined]  # see above
            ),
            ("Follow the tail", "turn following on or off", app.action_follow),
            ("Seek", "by offset or time in the Messages tab", app.action_seek),
            ("Reset group offsets", "of the chosen group", app.action_reset_group),
            (
                "Start a replay job",
                "copy, materialize, window-counts or custom",
                app.action_new_replay,
            ),
            ("Search the tree", "streams and topics", app.action_search),
            (
                "Effective permissions",
                "what each stream lets a console user do",
                app.action_permissions,
            ),
            *[
                (
                    f"Switch cluster: {c.name}",
                    c.path or f"{c.url} (another console, read-only)",
                    partial(app.action_switch_cluster, c.name),
                )
                for c in app.clusters
                if (c.local or readable(c)) and c.name != app.current_cluster()
            ],
            ("Refresh", "read everything shown again", app.action_refresh),
            ("Help", "keys and tabs", app.action_help),
        ]
        return actions

    async def discover(self) -> Hits:
        for name, help_text, command in self._actions():
            yield DiscoveryHit(name, command, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, command in self._actions():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), command, help=help_text)
        cluster = self.console.cluster
        text = query.strip()
        if cluster is None:
            return
        if not text.startswith("/"):
            # any part of a name, in any stream: the catalog's trigram index (engine/name_search.py)
            if len(text) < 3:
                return
            try:
                result = await asyncio.to_thread(cluster.search, text, limit=_SUGGESTIONS)
            except Exception:  # a half-typed name is not worth an error
                return
            for hit in result.hits:
                label = f"Open {hit.kind} {hit.name}"
                yield Hit(0.8, label, partial(self.console.open_path, hit.name), text=label)
            return
        try:
            found = await asyncio.to_thread(_lookup, cluster, text)
        except Exception:  # a half-typed name is not worth an error
            return
        for kind, name in found:
            label = f"Open {kind} {name}"
            yield Hit(0.9, label, partial(self.console.open_path, name), text=label)


def _lookup(cluster, text: str) -> list[tuple[str, str]]:
    """Topics (for `/stream:prefix`) or streams (for `/prefix`) matching what was typed."""
    stream, sep, topic = text.partition(":")
    if sep:
        return [
            ("topic", n)
            for n in cluster.topic_names(stream, prefix=topic or None, limit=_SUGGESTIONS)
        ]
    return [("stream", s.path) for s in cluster.streams(prefix=stream, limit=_SUGGESTIONS)]
