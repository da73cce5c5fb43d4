"""A Quix Streams application against the listener, as its users run it: a stateful count per
key (a State store, so Quix creates its changelog topic with cleanup.policy=compact), run
twice; the second run has an empty state directory and restores its counts from the
changelog. Quix pins confluent-kafka below the version of .venv, so it runs from a virtual
environment of its own, .venv-quix (`make setup-test` makes it)."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

from engine import Consumer, Producer, TopicPartition
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[3]
QUIX_PYTHON = ROOT / ".venv-quix" / "bin" / "python"

# The application: counts the messages of each key of `words` in its state and sends the
# running count to `counts`. It stops after `count` outputs, or when no message came for
# `timeout` seconds (a bound, should the listener lose one), and prints what it sent.
APP = """
import json
import sys

from quixstreams import Application

bootstrap, state_dir, count, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
app = Application(
    broker_address=bootstrap,
    consumer_group="quix-count",
    auto_offset_reset="earliest",
    state_dir=state_dir,
)
words = app.topic("words", key_deserializer="str", value_deserializer="str")
counts = app.topic("counts", key_serializer="str", value_serializer="json")


def count_key(value, key, timestamp, headers, state):
    total = state.get("total", 0) + 1
    state.set("total", total)
    return {"key": key, "total": total}


sdf = app.dataframe(words).apply(count_key, stateful=True, metadata=True)
sdf.to_topic(counts)
sent = app.run(count=count, timeout=timeout)
print(json.dumps(sent))
"""


def _run_app(tmp_path: Path, bootstrap: str, state_dir: Path, count: int) -> list[dict]:
    script = tmp_path / "count_app.py"
    script.write_text(APP)
    done = subprocess.run(
        [str(QUIX_PYTHON), str(script), bootstrap, str(state_dir), str(count), str(scaled(30))],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# the partition of each key: Quix keeps a store (and a changelog partition) per input
# partition, and the two runs use both
PARTITION = {"a": 0, "b": 0, "c": 1, "d": 1}


def _produce(cluster, words: list[str]) -> None:
    producer = Producer(cluster)
    for word in words:
        producer.send(
            "/kafka:words", key=word.encode(), value=word.encode(), partition=PARTITION[word]
        )
    producer.flush()
    producer.close()


def _last_totals(cluster, expected: int) -> dict[str, int]:
    """The last count of each key in `counts`, read once it holds `expected` messages."""
    topic = cluster.topic("/kafka:counts")
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("/kafka:counts", p.partition) for p in topic.partitions])
    got = []
    deadline = time.monotonic() + scaled(20)
    while len(got) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    assert len(got) == expected
    totals: dict[str, int] = {}
    for record in sorted(got, key=lambda r: (r.partition, r.offset)):
        value = json.loads(record.value)
        assert record.key.decode() == value["key"]
        totals[value["key"]] = value["total"]
    return totals


def test_a_stateful_count_restores_its_state_from_the_changelog(wire, tmp_path):
    assert QUIX_PYTHON.exists(), "quixstreams is missing: run make setup-test"
    wire.cluster.create_topic("/kafka:words", partitions=2)
    first = ["a", "b", "a", "c", "a", "b"]
    _produce(wire.cluster, first)
    sent = _run_app(tmp_path, wire.bootstrap, tmp_path / "state-1", len(first))
    assert Counter(first) == Counter(v["key"] for v in sent)
    assert _last_totals(wire.cluster, len(first)) == {"a": 3, "b": 2, "c": 1}

    # the changelog: a topic of its own in /kafka, compacted although /kafka is not
    changelogs = [t for t in wire.cluster.topics("/kafka") if t.topic.startswith("changelog__")]
    assert len(changelogs) == 1
    assert changelogs[0].overrides["compact"] is True
    assert wire.cluster.stream("/kafka").policies["compact"] is False

    # a second run on an empty state directory: its counts start from the changelog's
    second = ["a", "c", "d", "c"]
    _produce(wire.cluster, second)
    sent = _run_app(tmp_path, wire.bootstrap, tmp_path / "state-2", len(second))
    assert Counter(second) == Counter(v["key"] for v in sent)
    assert _last_totals(wire.cluster, len(first) + len(second)) == {
        "a": 4,
        "b": 2,
        "c": 3,
        "d": 1,
    }


# The same count with processing_guarantee="exactly-once": each checkpoint commits the
# outputs, the changelog and the input offsets in one Kafka transaction (issue 25). A
# transactional id of its own, as Kafka advises, so a restarted instance fences the one
# killed and aborts its open transaction at once. It sleeps `delay` s per message, so that
# a kill lands between checkpoints, and stops after `timeout` s without a message.
EOS_APP = """
import sys
import time

from quixstreams import Application

bootstrap, state_dir, timeout, delay = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
app = Application(
    broker_address=bootstrap,
    consumer_group="quix-eos",
    auto_offset_reset="earliest",
    state_dir=state_dir,
    processing_guarantee="exactly-once",
    commit_interval=2.0,
    producer_extra_config={"transactional.id": "quix-eos-count"},
    # the killed member leaves the group at its session's end, the second waits for that
    consumer_extra_config={"session.timeout.ms": 3000, "heartbeat.interval.ms": 500},
)
words = app.topic("eos-words", key_deserializer="str", value_deserializer="str")
counts = app.topic("eos-counts", key_serializer="str", value_serializer="json")


def count_key(value, key, timestamp, headers, state):
    time.sleep(delay)
    total = state.get("total", 0) + 1
    state.set("total", total)
    return {"key": key, "total": total}


app.dataframe(words).apply(count_key, stateful=True, metadata=True).to_topic(counts)
app.run(timeout=timeout)
"""


def _eos_app(tmp_path: Path, bootstrap: str, name: str, delay: float) -> subprocess.Popen:
    """An instance of EOS_APP with its state in tmp_path/`name`, its log in `name`.log (a
    file, not a pipe nobody reads while it runs)."""
    script = tmp_path / "eos_app.py"
    script.write_text(EOS_APP)
    with open(tmp_path / f"{name}.log", "w") as log:
        return subprocess.Popen(
            [str(QUIX_PYTHON), str(script), bootstrap, str(tmp_path / name), str(scaled(3)),
             str(delay)],
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=tmp_path,
        )  # fmt: skip


def _log(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.log").read_text()[-4000:]


def _eos_outputs(cluster, isolation: str) -> list[dict]:
    """Every record of eos-counts readable at `isolation`, partition by partition."""
    topic = cluster.topic("/kafka:eos-counts")
    consumer = Consumer(
        cluster,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    )
    tps = [TopicPartition("/kafka:eos-counts", p.partition) for p in topic.partitions]
    consumer.assign(tps)
    ends = consumer.end_offsets(tps)
    got = []
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(json.loads(r.value) for r in records)
    consumer.close()
    return got


def _unstable(cluster) -> bool:
    """Whether eos-counts holds outputs past its last stable offset (an open transaction's)."""
    if "eos-counts" not in {t.topic for t in cluster.topics("/kafka")}:
        return False
    topic = cluster.topic("/kafka:eos-counts")
    tps = [TopicPartition("/kafka:eos-counts", p.partition) for p in topic.partitions]
    ends = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(cluster, enable_auto_commit=False, isolation_level=isolation)
        ends[isolation] = consumer.end_offsets(tps)
        consumer.close()
    return ends["read_uncommitted"] != ends["read_committed"]


def test_exactly_once_outputs_each_count_once_across_a_kill_9(wire, tmp_path):
    """Quix's exactly-once checkpoints are Kafka transactions through the listener. The
    application is killed with kill -9 after some checkpoints, with a transaction open; a
    second instance (an empty state directory: it restores from the changelog, read
    committed) finishes the input. read_committed readers of the output then see each
    key's running count exactly once, 1, 2, 3, ...; the killed transaction's outputs are
    in the log, aborted."""
    assert QUIX_PYTHON.exists(), "quixstreams is missing: run make setup-test"
    from engine.client.transactions import Transactions

    cluster = wire.cluster
    cluster.create_topic("/kafka:eos-words", partitions=2)
    keys = ["a", "b", "c", "d"]
    words = [keys[i % 4] for i in range(240)]
    producer = Producer(cluster)
    for i, word in enumerate(words):
        producer.send("/kafka:eos-words", key=word.encode(), value=word.encode(), partition=i % 2)
    producer.flush()
    producer.close()

    def committed() -> int:
        info = cluster.group("quix-eos")
        return sum(max(p.committed or 0, 0) for p in info.partitions if p.topic.endswith("words"))

    first = _eos_app(tmp_path, wire.bootstrap, "state-1", delay=0.02)
    coordinator = Transactions(cluster)
    deadline = time.monotonic() + scaled(60)
    while True:
        assert first.poll() is None, _log(tmp_path, "state-1")
        assert time.monotonic() < deadline, "no checkpoint of the first instance"
        done = committed() if "quix-eos" in {g.group_id for g in cluster.groups()} else 0
        if done >= 40 and _unstable(cluster):
            first.kill()  # SIGKILL, with outputs of its open transaction written
            break
        time.sleep(0.005)
    first.wait(timeout=scaled(10))
    assert committed() < len(words)  # killed part-way

    second = _eos_app(tmp_path, wire.bootstrap, "state-2", delay=0)
    assert second.wait(timeout=scaled(120)) == 0, _log(tmp_path, "state-2")
    assert committed() == len(words)

    outputs = _eos_outputs(cluster, "read_committed")
    for key in keys:
        totals = [o["total"] for o in outputs if o["key"] == key]
        assert totals == list(range(1, words.count(key) + 1)), (key, totals)
    # what the killed instance wrote after its last checkpoint is stored, and aborted
    assert len(_eos_outputs(cluster, "read_uncommitted")) > len(outputs) == len(words)
    assert coordinator.describe("quix-eos-count").state == "complete_commit"
