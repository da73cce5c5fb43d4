"""Every stream through one listener (docs/WIRE.md, "Topic names"): real clients name a topic
of another stream by its short name (`apps.sensors..car-17`), which strict clients accept,
or by its full name; Metadata for all topics lists every stream's; answers name topics as
the client did."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic, OffsetSpec

from engine import Cluster, Consumer, TopicPartition, errors
from tests.engine.wire.conftest import ALICE
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[3]


def _engine_values(cluster, full, count, partitions=(0,)):
    consumer = Consumer(cluster, enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(full, p) for p in partitions])
    got = []
    deadline = time.monotonic() + scaled(20)
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    return [r.value for r in sorted(got, key=lambda r: (r.partition, r.offset))]


def _kcat_topics(bootstrap):
    done = subprocess.run(
        ["kcat", "-b", bootstrap, "-L", "-J"],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=True,
    )
    return {t["topic"]: len(t["partitions"]) for t in json.loads(done.stdout)["topics"]}


def test_kafka_python_produces_and_consumes_another_stream_by_its_short_name(wire):
    wire.cluster.create_stream("/apps/sensors")
    wire.cluster.create_topic("/apps/sensors:car-17", partitions=2)
    name = "apps.sensors..car-17"
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap)
    metas = [
        producer.send(name, value=b"m%d" % i, partition=i % 2).get(timeout=scaled(30))
        for i in range(10)
    ]
    producer.close()
    assert {m.topic for m in metas} == {name}
    assert sorted(_engine_values(wire.cluster, "/apps/sensors:car-17", 10, (0, 1))) == sorted(
        b"m%d" % i for i in range(10)
    )

    consumer = KafkaConsumer(
        bootstrap_servers=wire.bootstrap,
        group_id="kp-streams",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    consumer.subscribe([name])
    got = []
    deadline = time.monotonic() + scaled(30)
    while len(got) < 10 and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=500).items():
            assert tp.topic == name
            got.extend(r.value for r in records)
    assert sorted(got) == sorted(b"m%d" % i for i in range(10))
    consumer.commit()
    assert consumer.committed(KTP(name, 0)) == 5
    consumer.close()

    # one truth: the engine's group has the full names, the wire shows the short ones
    group = wire.cluster.group("kp-streams")
    assert {(p.topic, p.partition, p.committed) for p in group.partitions} == {
        ("/apps/sensors:car-17", 0, 5),
        ("/apps/sensors:car-17", 1, 5),
    }
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    offsets = admin.list_group_offsets("kp-streams")["kp-streams"]  # OffsetFetch, all topics
    assert {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()} == {
        (name, 0): 5,
        (name, 1): 5,
    }
    admin.close()


def test_kafka_python_admin_reaches_another_stream_by_short_names(wire):
    wire.cluster.create_stream("/adm/s", default_partitions=3)
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    name = "adm.s..orders"
    admin.create_topics([NewTopic(name, -1, -1)])
    assert len(wire.cluster.topic("/adm/s:orders").partitions) == 3
    found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    assert name in found["topic"]
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap)
    for i in range(4):
        producer.send(name, value=b"v%d" % i, partition=0).get(timeout=scaled(30))
    producer.close()
    latest = admin.list_partition_offsets({KTP(name, 0): OffsetSpec.LATEST})
    assert {tp.topic: o.offset for tp, o in latest.items()} == {name: 4}
    admin.delete_records({KTP(name, 0): 0})  # at the log start: nothing to do, no error
    admin.delete_topics([name])
    with pytest.raises(errors.UnknownTopic):
        wire.cluster.topic("/adm/s:orders")
    admin.close()


def test_kcat_lists_every_stream_with_short_names(wire):
    wire.cluster.create_topic("/kafka:kl-default", partitions=1)
    wire.cluster.create_stream("/metrics")
    wire.cluster.create_topic("/metrics:kl-other", partitions=3)
    wire.cluster.create_stream("/v1.2")  # a segment with '.': no short names
    wire.cluster.create_topic("/v1.2:kl-hidden", partitions=1)
    listed = _kcat_topics(wire.bootstrap)
    assert listed["kl-default"] == 1
    assert listed["metrics..kl-other"] == 3
    assert not [t for t in listed if "kl-hidden" in t]
    # every listed name is one kafka-python accepts
    assert all(re.fullmatch(r"[A-Za-z0-9._-]{1,249}", t) for t in listed)


def test_metadata_for_all_topics_stops_at_max_listed_topics(make_server):
    server = make_server(max_listed_topics=2)  # with /kafka:t
    server.cluster.create_stream("/s")
    for topic in ("a", "b", "c"):
        server.cluster.create_topic(f"/s:{topic}", partitions=1)
    host, port = server.address
    assert _kcat_topics(f"{host}:{port}") == {"t": 1, "s..a": 1}


def test_without_a_separator_only_full_names_reach_other_streams(make_server):
    server = make_server(stream_separator=None)
    server.cluster.create_stream("/s")
    server.cluster.create_topic("/s:x", partitions=1)
    server.cluster.create_topic("/kafka:a..b", partitions=1)
    host, port = server.address
    assert _kcat_topics(f"{host}:{port}") == {"t": 1, "a..b": 1}


def test_confluent_produces_and_consumes_by_short_and_full_names(wire):
    wire.cluster.create_stream("/ck/streams")
    wire.cluster.create_topic("/ck/streams:short", partitions=1)
    wire.cluster.create_topic("/ck/streams:full", partitions=1)
    failures = []
    for name, full in (
        ("ck.streams..short", "/ck/streams:short"),
        ("/ck/streams:full", "/ck/streams:full"),
    ):
        producer = CKProducer({"bootstrap.servers": wire.bootstrap})
        for i in range(5):
            producer.produce(
                name,
                value=b"%s %d" % (name.encode(), i),
                partition=0,
                on_delivery=lambda err, msg: failures.append(err) if err else None,
            )
        assert producer.flush(scaled(30)) == 0
        assert failures == []
        assert _engine_values(wire.cluster, full, 5) == [
            b"%s %d" % (name.encode(), i) for i in range(5)
        ]
        consumer = CKConsumer(
            {
                "bootstrap.servers": wire.bootstrap,
                "group.id": f"ck-streams-{full}".replace("/", "-").replace(":", "-"),
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([name])
        got = []
        deadline = time.monotonic() + scaled(30)
        while len(got) < 5 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.topic(), msg.value()))
        consumer.close()
        assert got == [(name, b"%s %d" % (name.encode(), i)) for i in range(5)]


def test_a_name_of_a_missing_or_invalid_stream_gets_kafkas_error(wire):
    admin = AdminClient({"bootstrap.servers": wire.bootstrap})
    for name, code in (
        ("nosuch.stream..t", KafkaError.UNKNOWN_TOPIC_OR_PART),  # no such stream
        (".bad..t", KafkaError.TOPIC_EXCEPTION),  # an empty segment: no stream path
    ):
        found = admin.list_topics(topic=name, timeout=scaled(30))
        assert found.topics[name].error.code() == code
    # no stream is made by a name
    with pytest.raises(errors.UnknownStream):
        wire.cluster.stream("/nosuch/stream")


def test_kafkajs_produces_and_consumes_another_stream_by_its_short_name(wire):
    # `make setup-test` installs both; a missing one is a set-up bug, never a skip
    assert shutil.which("node"), "node is not installed: run make setup-test"
    assert (ROOT / "node_modules" / "kafkajs").is_dir(), "kafkajs is missing: run npm ci"
    wire.cluster.create_stream("/js/stream")
    wire.cluster.create_topic("/js/stream:orders", partitions=1)
    name = "js.stream..orders"
    done = subprocess.run(
        ["node", str(Path(__file__).with_name("kafkajs_streams.js")), wire.bootstrap, name,
         "js-streams", "6"],
        capture_output=True,
        text=True,
        timeout=scaled(90),
        env={**os.environ, "NODE_PATH": str(ROOT / "node_modules"),
             "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    values = [f"m{i}" for i in range(6)]
    assert got == {
        "sentTopics": [name],
        "values": values,
        "topics": [name],
        "committed": [[name, [[0, "6"]]]],
    }
    assert _engine_values(wire.cluster, "/js/stream:orders", 6) == [v.encode() for v in values]
    assert [p.committed for p in wire.cluster.group("js-streams").partitions] == [6]


def test_plet_serve_takes_a_separator_and_a_listing_bound_and_refuses_a_bad_separator(tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path, name="cli") as cluster:
        cluster.create_stream("/apps/sensors")
        cluster.create_topic("/apps/sensors:t", partitions=1)
        cluster.create_topic("/apps/sensors:u", partitions=1)
    plet = [sys.executable, "-m", "engine.cli", "serve", "--cluster", str(path)]
    bad = subprocess.run(
        [*plet, "--listen", "127.0.0.1:0", "--stream-separator", "::"],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert bad.returncode == 1
    assert "stream separator must be" in bad.stderr
    proc = subprocess.Popen(
        [*plet, "--listen", "127.0.0.1:0", "--stream-separator", "__", "--max-listed-topics", "1"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        match = re.search(r"on 127\.0\.0\.1:(\d+) ", line)
        assert match, line
        assert "other streams' as path.of.stream__topic" in line
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{match.group(1)}")
        producer.send("apps.sensors__t", value=b"by __").get(timeout=scaled(30))
        producer.close()
        assert _kcat_topics(f"127.0.0.1:{match.group(1)}") == {"apps.sensors__t": 1}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=scaled(30)) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Cluster.open(path) as cluster:
        assert _engine_values(cluster, "/apps/sensors:t", 1) == [b"by __"]


def test_with_sasl_a_user_sees_every_stream_and_writes_where_its_aces_allow(make_server):
    server = make_server(sasl=True)
    cluster = server.cluster
    me = f"u:{cluster.principal.user}"  # the test reads what alice wrote
    cluster.create_stream("/team/a", produce_perm="u:alice", consume_perm=f"u:alice | {me}")
    cluster.create_stream("/team/b")  # its creator's only
    cluster.create_topic("/team/a:t", partitions=1)
    cluster.create_topic("/team/b:t", partitions=1)
    host, port = server.address
    login = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": ALICE[0],
        "sasl.password": ALICE[1],
    }
    done = subprocess.run(
        ["kcat", "-b", f"{host}:{port}", "-L", "-J"]
        + [arg for key, value in login.items() for arg in ("-X", f"{key}={value}")],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=True,
    )
    listed = {t["topic"] for t in json.loads(done.stdout)["topics"]}
    assert listed == {"t", "team.a..t", "team.b..t"}  # names are not secret
    reports = []
    producer = CKProducer(
        {
            "bootstrap.servers": f"{host}:{port}",
            "message.timeout.ms": int(scaled(4000)),
            "log_level": 0,
            **login,
        }
    )
    for name in ("team.a..t", "team.b..t"):
        producer.produce(name, b"to " + name.encode(), on_delivery=lambda e, m: reports.append(e))
    producer.flush(scaled(10))
    assert [None if e is None else e.name() for e in reports] == [
        None,
        "TOPIC_AUTHORIZATION_FAILED",
    ]
    assert _engine_values(cluster, "/team/a:t", 1) == [b"to team.a..t"]
    # the refused message's report is in (flushed): nothing was written (a read for it
    # would wait its whole timeout)
    assert cluster.topic("/team/b:t").partitions[0].log_end_offset == 0


def test_describe_log_dirs_without_topics_names_every_streams_by_short_names(wire):
    wire.cluster.create_stream("/logs/s")
    wire.cluster.create_topic("/logs/s:t", partitions=1)
    producer = KafkaProducer(bootstrap_servers=wire.bootstrap)
    producer.send("logs.s..t", value=b"x" * 100, partition=0).get(timeout=scaled(30))
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=wire.bootstrap)
    [answer] = admin.describe_log_dirs()
    admin.close()
    sizes = {
        t["name"]: sum(p["partition_size"] for p in t["partitions"])
        for d in answer["log_dirs"]
        for t in d["topics"]
    }
    assert sizes["logs.s..t"] > 100
