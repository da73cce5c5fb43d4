"""The help screen: the tabs and the keys."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Markdown

HELP = """\
# Partitionlet terminal console

The tree on the left lists streams and, when a stream is opened, its topics, a page at a
time (**… more** loads the next page). The search box above it narrows the tree:
`/apps` (streams whose path starts so), `/apps/sensors:car` (topics of that stream),
`car` (topics starting so, in every stream); Enter on a full name `/stream:topic` opens it.

| key | where | does |
| --- | --- | --- |
| `/` | anywhere | search the tree |
| `1`-`8` | anywhere | Messages, Partitions, Policies, Groups, Replication, Heat, Replays, Transactions |
| `ctrl+p` | anywhere | command palette (open a topic by name, any action) |
| `r` / `F5` / `ctrl+r` | anywhere | refresh now (the shown tab also refreshes every few seconds) |
| `?` / `F1` | anywhere | this help |
| `q` | anywhere | quit |
| `s` | anywhere | seek: an offset, an ISO time (UTC when it has no zone), `earliest` or `latest` |
| `f` | anywhere | follow the tail (new messages appear as they arrive, newest first) |
| `p` | anywhere | produce a message to the open topic (key, value, headers, partition) |
| `v` | anywhere | show the value as text, JSON or hex |
| `c` | anywhere | switch to another cluster (when `plet tui` lists several) |
| `ctrl+s` | Policies | save the form (checked by the engine and the admin ACE) |
| `o` | anywhere | reset the offsets of the group chosen in the Groups tab |
| `delete` | Groups | delete the chosen group (asks first; not while it has live members) |
| `a` | Groups | edit the chosen group's permissions (its creator and administrators) |
| `space` | Replication | pause or resume the chosen link |
| `enter` | Replication | follow the chosen link to its target cluster (when listed) |
| `n` / `x` | Replays | start a replay job / cancel the chosen one |
| `x` | Transactions | abort the chosen open transaction (asks first) |

In a text box letters and digits are text, not keys, also after Enter (`tab` or the down
arrow leaves it).

**Tabs.** *Messages*: a page of messages with partition, offset, time, key, headers and value, the
whole value below. *Partitions*: each partition's partitionlet chain with volumes, offsets
and sizes, and the volumes. *Policies*: the stream's policies in a form. *Groups*:
consumer groups, their members, committed offsets, lag and permissions. *Replication*: links out and
in with state and lag, and the replication graph with its cycles. *Heat*: load per
partition or volume over time. *Replays*: Spark replay jobs with progress and results.
*Transactions*: open transactions with their age. Messages of aborted transactions are
marked `aborted`; COMMIT and ABORT markers are rows of their own.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        Binding("question_mark", "close", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog", classes="dialog"):
            yield Markdown(HELP, id="help-text")
            yield Button("Close", id="help-close", variant="primary")

    def on_button_pressed(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
