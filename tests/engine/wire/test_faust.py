"""A Faust application against the listener, as its users run it (`app.py worker`): a word
count in a Table, whose changelog topic Faust creates with cleanup.policy=compact, and a
custom group assignor ("faust") that the listener passes through. Run twice, stopped
with SIGTERM as a service manager would; the table lives in memory, so the second run
restores it from the changelog. With processing_guarantee="exactly_once" the changelog
and the input offsets go through Kafka transactions, one transactional producer per input
partition. Faust pins click below the version of .venv, so it runs from a virtual
environment of its own, .venv-faust (`make setup-test` makes it).

Faust's exactly-once covers its changelogs and offsets, not sends to other topics (it
picks a transactional producer by the destination's partition, and `counts` is not an
input), so this test stops it gracefully; the kill -9 case is Quix's
(test_quixstreams.py)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from engine import Consumer, Producer, TopicPartition
from engine.client.transactions import Transactions
from tests.timing import scaled, wait_until

ROOT = Path(__file__).resolve().parents[3]
FAUST_PYTHON = ROOT / ".venv-faust" / "bin" / "python"

# The application: counts each word of WORDS in a table and sends the running count to
# COUNTS. Its settings come from the environment: Faust's command line is its own.
APP = """
import os

import faust

app = faust.App(
    os.environ["APP_ID"],
    broker="kafka://" + os.environ["BOOTSTRAP"],
    datadir=os.environ["DATA_DIR"],
    store="memory://",
    processing_guarantee=os.environ["GUARANTEE"],
    web_enabled=False,
    topic_partitions=2,
)
RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
words = app.topic(os.environ["WORDS"], partitions=2, **RAW)
counts = app.topic(os.environ["COUNTS"], **RAW)
totals = app.Table("totals", default=int, partitions=2)


@app.agent(words)
async def count(stream):
    async for word in stream:
        key = word.decode()
        totals[key] += 1
        await counts.send(key=word, value=b"%d" % totals[key])


app.main()
"""

# the partition of each word, so that both runs use both partitions
PARTITION = {"a": 0, "b": 0, "c": 1, "d": 1}


class Faust:
    """One `worker` of APP, its log in a file (nobody reads a pipe while it runs)."""

    def __init__(self, tmp_path: Path, env: dict[str, str], name: str) -> None:
        script = tmp_path / "faust_app.py"
        script.write_text(APP)
        self.log = tmp_path / f"{name}.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [str(FAUST_PYTHON), str(script), "worker", "-l", "info"],
                env={**os.environ, **env, "DATA_DIR": str(tmp_path / name)},
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self) -> None:
        # "Worker ready" comes once recovery has restored the table and the inputs are
        # sought to their committed offsets: what is produced from then on is read once
        def ready() -> bool:
            assert self.process.poll() is None, self.text()[-4000:]
            return "Worker ready" in self.text()

        wait_until(ready, timeout=scaled(60))

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=scaled(60)) == 0, self.text()[-4000:]


def _produce(cluster, topic: str, words: list[str]) -> None:
    producer = Producer(cluster)
    for word in words:
        producer.send(topic, key=word.encode(), value=word.encode(), partition=PARTITION[word])
    producer.flush()
    producer.close()


def _read(cluster, topic: str) -> list[tuple[bytes, bytes]]:
    """Every committed record of `topic`, partition by partition, as (key, value)."""
    tps = [TopicPartition(topic, p.partition) for p in cluster.topic(topic).partitions]
    consumer = Consumer(
        cluster,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    consumer.assign(tps)
    ends = consumer.end_offsets(tps)
    got = []
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    return [(r.key, r.value) for r in sorted(got, key=lambda r: (r.partition, r.offset))]


def _run(tmp_path, env, cluster, name: str, words: list[str], expected: int) -> None:
    """A worker started, `words` produced once it is ready, stopped once `expected`
    counts are in COUNTS."""
    worker = Faust(tmp_path, env, name)
    worker.wait_ready()
    _produce(cluster, "/kafka:" + env["WORDS"], words)
    counts = "/kafka:" + env["COUNTS"]

    def all_counted() -> bool:
        assert worker.process.poll() is None, worker.text()[-4000:]
        known = {t.topic for t in cluster.topics("/kafka")}
        return env["COUNTS"] in known and len(_read(cluster, counts)) >= expected

    wait_until(all_counted, timeout=scaled(60))
    worker.stop()


def _totals(pairs: list[tuple[bytes, bytes]]) -> dict[str, list[int]]:
    totals: dict[str, list[int]] = {}
    for key, value in pairs:
        totals.setdefault(key.decode(), []).append(int(value))
    return totals


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_table_restores_from_its_compacted_changelog(wire, tmp_path, guarantee):
    assert FAUST_PYTHON.exists(), "faust-streaming is missing: run make setup-test"
    cluster = wire.cluster
    app_id = f"faust-{guarantee.replace('_', '-')}"
    env = {
        "APP_ID": app_id,
        "BOOTSTRAP": wire.bootstrap,
        "GUARANTEE": guarantee,
        "WORDS": f"{app_id}-words",
        "COUNTS": f"{app_id}-counts",
    }
    cluster.create_topic(f"/kafka:{env['WORDS']}", partitions=2)
    first = ["a", "b", "a", "c", "a", "b"]
    _run(tmp_path, env, cluster, "run-1", first, len(first))

    # each count once, in order; the table's changelog a topic of its own in /kafka,
    # compacted although /kafka is not
    assert _totals(_read(cluster, f"/kafka:{env['COUNTS']}")) == {
        "a": [1, 2, 3],
        "b": [1, 2],
        "c": [1],
    }
    changelog = cluster.topic(f"/kafka:{app_id}-totals-changelog")
    assert changelog.overrides["compact"] is True
    assert len(changelog.partitions) == 2
    assert cluster.stream("/kafka").policies["compact"] is False

    # a second run, its table empty at start: its counts go on from the changelog's
    second = ["a", "c", "d", "c"]
    _run(tmp_path, env, cluster, "run-2", second, len(first) + len(second))
    assert _totals(_read(cluster, f"/kafka:{env['COUNTS']}")) == {
        "a": [1, 2, 3, 4],
        "b": [1, 2],
        "c": [1, 2, 3],
        "d": [1],
    }
    # the changelog holds the last count of each word (as JSON keys), committed
    last = {key: int(value) for key, value in _read(cluster, changelog.name)}
    assert last == {b'"a"': 4, b'"b"': 2, b'"c"': 3, b'"d"': 1}
    # every input is committed for the group (the app's id)
    group = cluster.group(app_id)
    committed = {p.partition: p.committed for p in group.partitions if p.topic.endswith("-words")}
    assert committed == Counter(PARTITION[word] for word in first + second)

    if guarantee == "exactly_once":
        # one transactional producer per input partition (and one for Faust's leader
        # topic), each transaction ended: the changelog and the offsets went through them
        ours = [t for t in Transactions(cluster).list() if t.transactional_id.startswith(app_id)]
        assert len(ours) >= 2
        assert not [t for t in ours if t.is_open]
        assert sum(t.state == "complete_commit" for t in ours) >= 2
