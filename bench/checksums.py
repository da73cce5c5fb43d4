"""The checksums' cost (issue 26): what share of produce's and consume's CPU time goes to
the batch checksums (docs/ARCHITECTURE.md, "Checksums").

On a loaded machine two runs of the same code differ by more than the checksums cost, so
this does not compare two builds: it times the checksum code itself, inside one build, and
sets it against the whole. In a fresh one-volume cluster, N messages of `size` bytes are
produced (acks=1) to a one-partition topic and read back by one `Consumer` with `poll`;
every call of `engine.storage.batch.payload_crc` and `checksum` (writing) and `intact`
(reading) is timed with the CPU clock of the thread that makes it (the producer's sender
thread writes), and the produce's and consume's CPU time is this process's
(`time.process_time`). Each size is run `rounds` times; the report gives each round.

Run it with `python -m bench.checksums N` (sizes 100 and 1024).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

SIZES = (100, 1024)
ROUNDS = 3


@dataclass
class ChecksumShare:
    size: int
    messages: int
    produce_s: float  # process CPU seconds
    produce_checksum_s: float  # of which in the checksum code
    consume_s: float
    consume_checksum_s: float

    def text(self) -> str:
        return (
            f"{self.size} B x {self.messages:,}: produce {self.produce_s:.3f} s CPU, "
            f"checksums {self.produce_checksum_s * 1000:.1f} ms "
            f"({100 * self.produce_checksum_s / self.produce_s:.1f}%); consume "
            f"{self.consume_s:.3f} s CPU, checksums {self.consume_checksum_s * 1000:.1f} ms "
            f"({100 * self.consume_checksum_s / self.consume_s:.1f}%)"
        )


@contextmanager
def timed_checksums() -> Iterator[list[float]]:
    """The batch module's checksum functions, each call timed (thread CPU time) into the
    one-item list given; put back afterwards."""
    from engine.storage import batch

    spent = [0.0]
    names = ("payload_crc", "checksum", "intact")
    real = {name: getattr(batch, name) for name in names}

    def timing(f: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            start = time.thread_time()
            try:
                return f(*args)
            finally:
                spent[0] += time.thread_time() - start

        return call

    for name in names:
        setattr(batch, name, timing(real[name]))
    try:
        yield spent
    finally:
        for name in names:
            setattr(batch, name, real[name])


def run(size: int, messages: int) -> ChecksumShare:
    from engine import Cluster, Consumer, Producer, TopicPartition

    value = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    with (
        tempfile.TemporaryDirectory(prefix="plet-bench-crc-") as d,
        Cluster.open(f"{d}/c", name="checksums", volumes=1) as cluster,
        timed_checksums() as spent,
    ):
        cluster.create_stream("/crc", ttl=0)
        cluster.create_topic("/crc:t", partitions=1)
        producer = Producer(cluster, acks=1)
        start = time.process_time()
        for _ in range(messages):
            producer.send("/crc:t", value=value, partition=0)
        producer.flush()
        produce_s, produce_crc = time.process_time() - start, spent[0]
        producer.close()
        spent[0] = 0.0
        consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("/crc:t", 0)])
        got = 0
        start = time.process_time()
        while got < messages:
            for records in consumer.poll(timeout_ms=100).values():
                got += len(records)
        consume_s, consume_crc = time.process_time() - start, spent[0]
        consumer.close()
    return ChecksumShare(size, messages, produce_s, produce_crc, consume_s, consume_crc)


def main(argv: list[str]) -> None:
    messages = int(argv[1]) if len(argv) > 1 else 300_000
    for size in SIZES:
        count = messages if size <= 100 else max(1, messages // 3)
        for _ in range(ROUNDS):
            print(run(size, count).text(), flush=True)


if __name__ == "__main__":
    main(sys.argv)
