"""The console's own events (Textual `Message` classes; named events here so they are not
mistaken for the Kafka messages the console browses).

Selections travel up from the stream tree to the app; results travel from worker threads
to the widget that asked for them (`post_message` is thread-safe and never blocks, unlike
`call_from_thread`, which would hang a worker whose app is shutting down). Results carry
the request's sequence number so that a widget can drop answers to older requests.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message


class StreamSelected(Message):
    """The user picked a stream in the tree."""

    def __init__(self, stream: str) -> None:
        super().__init__()
        self.stream = stream


class TopicSelected(Message):
    """The user picked a topic (a full name) in the tree, the palette or --topic."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic


class ClusterReady(Message):
    """The app's cluster is open (or failed to open: `error` is set)."""

    def __init__(self, cluster: Any = None, error: BaseException | None = None) -> None:
        super().__init__()
        self.cluster = cluster
        self.error = error


class Loaded(Message):
    """A worker's answer to a widget's request number `seq`: `data`, or `error`."""

    bubble = False

    def __init__(self, seq: int, data: Any = None, error: BaseException | None = None) -> None:
        super().__init__()
        self.seq = seq
        self.data = data
        self.error = error


class GatesLoaded(Message):
    """A worker's answer with what the user may do in a tab (`data`: action name ->
    `engine.auth.actions.Verdict`) to the tab's request number `seq`."""

    bubble = False

    def __init__(self, seq: int, data: dict[str, Any], where: str | None) -> None:
        super().__init__()
        self.seq = seq
        self.data = data
        self.where = where  # the stream, topic or group they are about


class GroupPermsLoaded(Message):
    """A worker's answer with the chosen consumer group's permissions (`data`, a
    `GroupPermissions`), or `error`, to the Groups tab's request number `seq`."""

    bubble = False

    def __init__(self, seq: int, data: Any = None, error: BaseException | None = None) -> None:
        super().__init__()
        self.seq = seq
        self.data = data
        self.error = error


class RecordsArrived(Message):
    """New messages seen while following a topic's tail."""

    bubble = False

    def __init__(self, seq: int, records: list[Any], marks: Any = None) -> None:
        super().__init__()
        self.seq = seq
        self.records = records
        self.marks = marks  # their TransactionMarks (None with an error)


class ActionDone(Message):
    """A change made by a worker (edit, pause, cancel ...): `text` to show, or `error`."""

    bubble = False

    def __init__(self, text: str = "", error: BaseException | None = None) -> None:
        super().__init__()
        self.text = text
        self.error = error
