"""Partitionlet's own cases, through the public API of `engine`, in this one process.

Per value size: produce N messages to a fresh one-partition topic for each `acks` level
(0 and 1 with linger_ms=0, "all" with linger_ms=5), timed from the first `send` to the end
of `flush()`; then consume them all back with one `Consumer` assigned to the partition,
`poll(timeout_ms=100, max_records=...)` in a loop until all N are read.

`engine` is imported lazily, so the peers and the report work while it cannot be imported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from bench.cases import MACHINE, NONE, PROCESS, Case, Context, Measurement, payload, stopwatch

SYSTEM = "partitionlet"
STREAM = "/bench"
RESOURCE = "partitionlet-cluster"
IDLE_POLLS = 50  # a consumer that reads nothing for this many polls (~5 s) gives up

DURABILITY = {0: NONE, 1: PROCESS, "all": MACHINE}


def parse_acks(value: int | str) -> int | str:
    """'0' -> 0, '1' -> 1, 'all' / '-1' -> 'all'."""
    text = str(value).strip().lower()
    if text in ("all", "-1"):
        return "all"
    if text in ("0", "1"):
        return int(text)
    raise ValueError(f"acks must be 0, 1 or 'all', not {value!r}")


def linger_for(acks: int | str, ctx: Context) -> int:
    return ctx.settings.linger_ms_all if acks == "all" else 0


def topic_name(size: int, acks: int | str | None) -> str:
    suffix = "consume" if acks is None else f"acks{acks}"
    return f"{STREAM}:t{size}-{suffix}"


@contextlib.contextmanager
def open_cluster(ctx: Context) -> Iterator[Any]:
    """The run's cluster, in `<workdir>/partitionlet`, with the stream `/bench` (ttl=0)."""
    from engine import Cluster

    with Cluster.open(str(ctx.path("partitionlet")), name="bench") as cluster:
        cluster.create_stream(STREAM, ttl=0, default_partitions=1)
        yield cluster


def cluster_of(ctx: Context) -> Any:
    return ctx.resource(RESOURCE, open_cluster)


def log_end_offset(cluster: Any, topic: str, partition: int = 0) -> int:
    info = cluster.topic(topic)
    for part in info.partitions:
        if part.partition == partition:
            return part.log_end_offset
    raise LookupError(f"{topic} has no partition {partition}")


def produce(
    cluster: Any, topic: str, messages: int, value: bytes, *, acks: int | str, linger_ms: int
) -> Measurement:
    """Send `messages` copies of `value` to partition 0 of a new topic; time sends + flush."""
    from engine import Producer

    cluster.create_topic(topic, partitions=1)
    producer = Producer(cluster, acks=acks, linger_ms=linger_ms)
    last = None
    try:
        send = producer.send
        with stopwatch() as elapsed:
            for _ in range(messages):
                last = send(topic, value=value)
            producer.flush()
        if last is not None:
            last.get(timeout=60)  # a failed write shows up here (its future fails)
    finally:
        producer.close()
    measured = Measurement(
        messages,
        elapsed[0],
        messages * len(value),
        extra={"acks": acks, "linger_ms": linger_ms, "topic": topic},
    )
    end = log_end_offset(cluster, topic)
    measured.extra["log_end_offset"] = end
    if end != messages:
        measured.error = f"{topic} holds {end:,} messages after flush, expected {messages:,}"
    return measured


def consume(
    cluster: Any, topic: str, messages: int, *, max_records: int = 100_000, timeout_ms: int = 100
) -> Measurement:
    """Read partition 0 of `topic` from the beginning until `messages` records have come."""
    from engine import Consumer, TopicPartition

    consumer = Consumer(cluster, group_id=None, auto_offset_reset="earliest")
    count = nbytes = polls = idle = 0
    try:
        consumer.assign([TopicPartition(topic, 0)])
        poll = consumer.poll
        with stopwatch() as elapsed:
            while count < messages:
                batch = poll(timeout_ms=timeout_ms, max_records=max_records)
                polls += 1
                got = 0
                for records in batch.values():
                    got += len(records)
                    for record in records:
                        nbytes += len(record.value)
                if got:
                    count += got
                    idle = 0
                else:
                    idle += 1
                    if idle >= IDLE_POLLS:
                        break
    finally:
        consumer.close()
    measured = Measurement(
        count,
        elapsed[0],
        nbytes,
        extra={"polls": polls, "max_records": max_records, "topic": topic},
    )
    if count < messages:
        measured.error = f"read {count:,} of {messages:,} messages, then nothing for {idle} polls"
    return measured


def _produce_case(size: int, acks: int | str):
    def run(ctx: Context) -> Measurement:
        cluster = cluster_of(ctx)
        topic = topic_name(size, acks)
        n = ctx.settings.messages_for(size)
        measured = produce(
            cluster, topic, n, payload(size), acks=acks, linger_ms=linger_for(acks, ctx)
        )
        if measured.error is None:
            ctx.state.setdefault((SYSTEM, size), {})[acks] = topic
        return measured

    return run


def _consume_case(size: int):
    def run(ctx: Context) -> Measurement:
        cluster = cluster_of(ctx)
        n = ctx.settings.messages_for(size)
        written = ctx.state.get((SYSTEM, size), {})
        topic = written.get(1) or next(iter(written.values()), None)
        if topic is None:  # no produce case ran for this size: fill a topic, untimed
            topic = topic_name(size, None)
            produce(cluster, topic, n, payload(size), acks=1, linger_ms=0)
        return consume(cluster, topic, n, max_records=ctx.settings.consume_max_records)

    return run


def variant(acks: int | str, ctx: Context) -> str:
    linger = linger_for(acks, ctx)
    return f"acks={acks}" + (f" linger_ms={linger}" if linger else "")


def cases(ctx: Context) -> list[Case]:
    """Partitionlet produce (per acks) then consume, per value size."""
    try:
        import engine  # noqa: F401
        from engine import Cluster, Consumer, Producer, TopicPartition  # noqa: F401
    except Exception as exc:
        ctx.note(f"Partitionlet cases skipped: the engine cannot be imported ({exc}).")
        return []
    s = ctx.settings
    out = []
    for size in s.sizes:
        n = s.messages_for(size)
        for acks in s.acks:
            out.append(
                Case(
                    SYSTEM,
                    "produce",
                    size,
                    variant(acks, ctx),
                    DURABILITY[acks],
                    n,
                    _produce_case(size, acks),
                    params={"acks": acks, "linger_ms": linger_for(acks, ctx)},
                )
            )
        out.append(
            Case(
                SYSTEM,
                "consume",
                size,
                f"poll max_records={s.consume_max_records:,}",
                "",
                n,
                _consume_case(size),
                params={"max_records": s.consume_max_records},
            )
        )
    return out
