"""Data masking: the stream policy `mask` names parts of a message (the whole key or value,
fields of a JSON value, headers) that the consoles, the JSON API, downloads and message
search show masked to a user who does not pass the stream's `unmask_perm` ACE (docs/WEB.md,
"Data masking").

Grammar of the policy's text (empty: nothing is masked)::

    mask   := item ( "," item )*
    item   := "key" | "value" | "value." path | "headers." name
    path   := segment ( "." segment )*
    segment:= one or more of A-Z a-z 0-9 _ - $ @  |  a JSON string ("first name")

- `key`, `value`: the whole key or value.
- `value.card.number`: that field of a JSON value, at any depth of arrays on the way
  (`value.items.price` masks the price of every item of the list `items`). A value that is
  not JSON (text, binary, Avro in the Confluent wire format) cannot show which part is
  which, so it is masked whole when the policy names any field of it.
- `headers.authorization`: that header's value; its name stays. Header names are matched
  ignoring case (a mask errs on the side of hiding); a name runs to the next comma.

A masked part is replaced by `MARKER` ("****"): the whole key or value by those bytes, a
JSON field by the JSON string "****" (its key stays, so the JSON keeps its shape), a header
by those bytes. A null key, value or header stays null: there is nothing to hide.

`for_reader(cluster, info)` is the one decision: the `Mask` that applies to the cluster's
principal on a topic, or None when nothing is masked for them (the policy is empty, or they
are an administrator or pass `unmask_perm`). The engine's browse service
(engine.client.browse.Browser) and message search (engine.client.message_search) apply it to
every record they read, before any filter or query sees it, so a filter cannot find what it
hides. The embedded `Consumer`, the Kafka wire listener, Spark and replication read the data
itself: they need `consume_perm` (or `copy_perm`), which is about reading the data.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, NoReturn

from engine.errors import InvalidPolicy
from engine.records import ConsumerRecord, TopicInfo

__all__ = ["MARKER", "Mask", "for_reader", "parse"]

MARKER = "****"
"""What a masked part shows: the same whatever it hid, so it tells nothing of its length."""
_MARKER_BYTES = MARKER.encode()
MAX_LENGTH = 4096
"""Most characters the policy may have (as an ACE: it is shown with every stream)."""
POLICY = "mask"

_SEGMENT = re.compile(r'[A-Za-z0-9_$@-]+|"(?:[^"\\]|\\.)*"')
_FORMS = "write key, value, value.FIELD (value.card.number) or headers.NAME"


@dataclass(frozen=True)
class Mask:
    """A parsed mask policy: whether the whole `key` and `value` are masked, the JSON
    `paths` masked in a value, and the `headers` (lower case) masked. `text` is its normal
    form (items joined by ", "), as the policy stores it."""

    text: str = ""
    key: bool = False
    value: bool = False
    paths: tuple[tuple[str, ...], ...] = ()
    headers: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.key or self.value or self.paths or self.headers)

    @property
    def note(self) -> str:
        """What a reader is told when this mask applies to them."""
        return (
            f"Shown as {MARKER}: {self.text} (the stream's mask policy; you do not have its "
            "unmask permission)."
        )

    def record(self, record: ConsumerRecord) -> ConsumerRecord:
        """`record` with the parts this mask names masked (the same object when it holds
        none of them)."""
        key = _MARKER_BYTES if self.key and record.key is not None else record.key
        value = self.value_bytes(record.value)
        headers = record.headers
        if self.headers and headers:
            headers = [
                (n, _MARKER_BYTES if v is not None and n.lower() in self.headers else v)
                for n, v in headers
            ]
        if key is record.key and value is record.value and headers == record.headers:
            return record
        return record._replace(key=key, value=value, headers=headers)

    def value_bytes(self, value: Any) -> Any:
        """A value (bytes, or str from a deserializer) with this mask applied."""
        if value is None or not (self.value or self.paths):
            return value
        if self.value:
            return _MARKER_BYTES
        raw = value.encode() if isinstance(value, str) else bytes(value)
        try:
            doc = json.loads(raw, object_pairs_hook=_unique)
        except (ValueError, RecursionError):  # not JSON: nothing says which part is which
            return _MARKER_BYTES  # (nor JSON that names a field twice: _unique)
        try:
            hit = False
            for path in self.paths:
                hit = _mask_path(doc, path) or hit
            if not hit:
                return value  # as stored, spacing and all
            return json.dumps(doc, ensure_ascii=False).encode()
        except RecursionError:
            return _MARKER_BYTES


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose names are unique: a value returned as stored must not keep a copy of
    a masked field that parsing dropped (`{"n": "4111", "n": 1}` parses as `{"n": 1}`)."""
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a name given twice")
    return found


def _mask_path(doc: Any, path: tuple[str, ...]) -> bool:
    """Replace the field at `path` in `doc` (in place), through arrays; whether any was."""
    if isinstance(doc, list):
        hit = False
        for item in doc:
            hit = _mask_path(item, path) or hit
        return hit
    if not isinstance(doc, dict) or path[0] not in doc:
        return False
    if len(path) == 1:
        doc[path[0]] = MARKER
        return True
    return _mask_path(doc[path[0]], path[1:])


def _fail(text: str, problem: str, index: int | None, detail: str = "") -> NoReturn:
    """InvalidPolicy as an ACE's (engine.auth.acl): the problem, its column in the quoted
    text, a detail, and the text again with a caret under the column."""
    if index is None:
        exc = InvalidPolicy(f"{POLICY}: {problem}")
    else:
        quoted = repr(text)
        message = f"{POLICY}: {problem} at column {index + 1} in {quoted}"
        if detail:
            message += f"; {detail}"
        caret = 1 + len(repr(text[:index])) - 2
        message += f"\n    {quoted}\n    {' ' * caret}^"
        exc = InvalidPolicy(message)
    exc.policy = POLICY
    exc.expression = text
    exc.column = None if index is None else index + 1
    raise exc


def _path(text: str, start: int, end: int) -> tuple[str, ...]:
    """The segments of `text[start:end]`, a path after `value.`."""
    segments = []
    i = start
    while True:
        found = _SEGMENT.match(text, i, end)
        if found is None:
            what = "a field name is missing" if i >= end or text[i] == "." else "bad field name"
            _fail(text, what, i, 'a name is letters, digits, _ - $ @, or quoted: "a b"')
        token = found.group()
        if token.startswith('"'):
            try:
                token = json.loads(token)
            except ValueError:
                _fail(text, "a quoted field name is not a JSON string", i)
            if not token:
                _fail(text, "a field name is empty", i)
        segments.append(token)
        i = found.end()
        if i == end:
            return tuple(segments)
        if text[i] != ".":
            _fail(text, "expected '.' or ',' after a field name", i)
        i += 1


def parse(text: Any) -> Mask:
    """The `Mask` that `text` writes; `InvalidPolicy` naming the column of the first
    mistake (the policy, its text and `column` set, as for an ACE)."""
    if not isinstance(text, str):
        raise InvalidPolicy(f"policy {POLICY!r} must be text, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        _fail(text, f"at most {MAX_LENGTH:,} characters, not {len(text):,}", None)
    key = value = False
    paths: list[tuple[str, ...]] = []
    headers: list[str] = []
    items: list[str] = []
    at = 0
    for piece in text.split(",") if text.strip() else ():
        lead = len(piece) - len(piece.lstrip())
        item = piece.strip()
        start, end = at + lead, at + lead + len(item)
        at += len(piece) + 1
        if not item:
            _fail(text, "an empty item", start, _FORMS)
        if item == "key":
            key = True
        elif item == "value":
            value = True
        elif item.startswith("value."):
            path = _path(text, start + len("value."), end)
            paths.append(path)
            item = "value." + ".".join(_segment_text(s) for s in path)
        elif item.startswith("headers."):
            name = item[len("headers.") :].strip()
            if not name:
                _fail(text, "a header name is missing", start + len("headers."))
            if any(ord(c) < 32 or ord(c) == 127 for c in name):
                _fail(text, "a header name holds a control character", start)
            headers.append(name.lower())
            item = "headers." + name
        else:
            _fail(text, f"unknown item {item[:40]!r}", start, _FORMS)
        if item not in items:
            items.append(item)
    return Mask(", ".join(items), key, value, tuple(dict.fromkeys(paths)), frozenset(headers))


def _segment_text(segment: str) -> str:
    plain = _SEGMENT.fullmatch(segment) is not None and not segment.startswith('"')
    return segment if plain else json.dumps(segment, ensure_ascii=False)


def normal(text: Any) -> str:
    """The policy's text as stored: checked (`parse`), in its normal form."""
    return parse(text).text


def for_reader(cluster: Any, info: TopicInfo) -> Mask | None:
    """The mask that applies to `cluster`'s principal reading topic `info`, or None when
    nothing is masked for them: the stream's `mask` is empty, or they may unmask
    (`Cluster.may_unmask`: an administrator, or whoever passes `unmask_perm`)."""
    mask = parse(info.policies.get(POLICY) or "")
    if not mask or cluster.may_unmask(info.stream):
        return None
    return mask
