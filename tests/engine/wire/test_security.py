"""Security of the wire listener: SASL/PLAIN against the console's users and API tokens
(ACEs apply to the logged-in user), TLS, the address rules, `plet serve --sasl` and
`plet web --kafka`, with real clients over real sockets."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka import Producer as CKProducer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from engine import Cluster, Consumer, Principal, TopicPartition, errors
from engine.wire import KafkaServer
from tests.timing import scaled

ALICE = ("alice", "correct horse battery")  # may produce to and consume from /secure
BOB = ("bob", "another long secret")  # may do neither
CAROL = ("carol", "third quite long secret")  # the wrong-password tests' (throttled) name


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    path = tmp_path_factory.mktemp("secure") / "cluster"
    with Cluster.open(path, name="secure") as cluster:
        for name, password in (ALICE, BOB, CAROL):
            cluster.add_user(name, password)
        cluster.create_stream(
            "/secure", produce_perm="u:alice", consume_perm="u:alice", auto_create=False
        )
        cluster.create_topic("/secure:t", 1)
        server = KafkaServer(
            cluster, listen=("127.0.0.1", 0), sasl=True, default_stream="/secure"
        ).start()
        try:
            yield cluster, server, "{}:{}".format(*server.address)
        finally:
            server.close()


def _values(cluster, full):
    """The values of `full`'s partition 0, read by an administrator (past every ACE)."""
    reader = cluster.as_principal(Principal("reader", superuser=True))
    consumer = Consumer(reader, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(full, 0)
    consumer.assign([tp])
    end = consumer.end_offsets([tp])[tp]  # every write under test has been acknowledged
    got = []
    deadline = time.monotonic() + scaled(5)
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=300).values():
            got.extend(r.value for r in records)
    consumer.close()
    return got


def _ck_produce(bootstrap, user, password, value, topic="t", **extra):
    """(delivery error, client errors) of one confluent-kafka produce as `user`."""
    reports, client_errors = [], []
    producer = CKProducer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": password,
            "message.timeout.ms": int(scaled(4000)),
            "error_cb": client_errors.append,
            "log_level": 0,
            **extra,
        }
    )
    producer.produce(topic, value, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(scaled(10))
    return reports, client_errors


def test_describe_producers_answers_only_a_user_who_may_read_the_topic(secure):
    """Kafka asks for READ on the topic: producer ids, epochs and sequences of a topic are
    not shown to a user who may not consume it."""
    from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

    from tests.engine.wire.group_client import GroupClient

    _, server, bootstrap = secure
    assert _ck_produce(bootstrap, *ALICE, b"idempotent", **{"enable.idempotence": True}) == (
        [None],
        [],
    )
    request = DescribeProducersRequest(
        topics=[DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[0])]
    )
    answers = {}
    for user, password in (ALICE, BOB):
        client = GroupClient(server.address, user, password)
        try:
            answers[user] = client.call(request, DescribeProducersResponse, 0)
        finally:
            client.close()
    allowed = answers["alice"].topics[0].partitions[0]
    assert allowed.error_code == 0 and len(allowed.active_producers) >= 1
    refused = answers["bob"].topics[0].partitions[0]
    assert refused.error_code == 29  # TOPIC_AUTHORIZATION_FAILED
    assert refused.active_producers == []


# --- SASL/PLAIN -------------------------------------------------------------------------------


def test_confluent_produces_as_an_allowed_user_and_is_refused_as_another(secure):
    cluster, _, bootstrap = secure
    assert _ck_produce(bootstrap, *ALICE, b"from alice") == ([None], [])
    reports, _ = _ck_produce(bootstrap, *BOB, b"from bob")
    assert [e.name() for e in reports] == ["TOPIC_AUTHORIZATION_FAILED"]
    values = _values(cluster, "/secure:t")
    assert b"from alice" in values
    assert b"from bob" not in values


def test_a_read_only_user_is_refused_what_their_acls_allow(secure):
    """The flag is the engine's: the listener refuses a read-only user's produce although
    produce_perm lets them in (docs/WEB.md, "Read-only")."""
    cluster, _, bootstrap = secure
    cluster.edit_user("alice", read_only=True)
    try:
        reports, _ = _ck_produce(bootstrap, *ALICE, b"read-only alice")
    finally:
        cluster.edit_user("alice", read_only=False)
    assert [e.name() for e in reports] == ["TOPIC_AUTHORIZATION_FAILED"]
    assert b"read-only alice" not in _values(cluster, "/secure:t")


def test_an_api_token_logs_in_with_its_owner_or_the_token_name(secure):
    cluster, _, bootstrap = secure
    token = cluster.create_api_token("alice", "wire")
    assert _ck_produce(bootstrap, "token", token, b"token as token") == ([None], [])
    assert _ck_produce(bootstrap, "alice", token, b"token as alice") == ([None], [])
    # someone else's name with alice's token is refused: a token speaks for its owner only
    reports, client_errors = _ck_produce(bootstrap, "bob", token, b"token as bob")
    assert [e.name() for e in reports] == ["_MSG_TIMED_OUT"]
    assert any(e.name() == "_AUTHENTICATION" for e in client_errors)
    values = _values(cluster, "/secure:t")
    assert b"token as token" in values and b"token as alice" in values
    assert b"token as bob" not in values


def test_confluent_with_a_wrong_password_is_refused(secure):
    cluster, _, bootstrap = secure
    reports, client_errors = _ck_produce(bootstrap, CAROL[0], "not the password", b"nope")
    assert [e.name() for e in reports] == ["_MSG_TIMED_OUT"]
    auth = [e for e in client_errors if e.name() == "_AUTHENTICATION"]
    assert auth and "Invalid username or password" in auth[0].str()


def test_kafka_python_logs_in_with_plain_produces_and_consumes(secure):
    cluster, _, bootstrap = secure
    settings = dict(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=ALICE[0],
        sasl_plain_password=ALICE[1],
    )
    producer = KafkaProducer(**settings)
    meta = producer.send("t", value=b"kafka-python as alice").get(timeout=scaled(30))
    producer.close()
    consumer = KafkaConsumer(
        **settings,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(scaled(5000)),
        group_id=None,
    )
    consumer.assign([KTP("t", 0)])
    consumer.seek(KTP("t", 0), meta.offset)
    got = [next(consumer).value]
    consumer.close()
    assert got == [b"kafka-python as alice"]


# --- the protocol, byte by byte ---------------------------------------------------------------


def _send(sock, request, version, correlation_id):
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id="raw")
    sock.sendall(bytes(request.encode(header=True, framed=True)))


def _recv_frame(sock):
    head = _recv_exactly(sock, 4)
    if head is None:
        return None
    return _recv_exactly(sock, struct.unpack(">i", head)[0])


def _recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _connect(bootstrap):
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def test_a_request_before_the_login_closes_the_connection(secure):
    _, _, bootstrap = secure
    with _connect(bootstrap) as sock:
        _send(sock, ApiVersionsRequest(), 0, 1)  # allowed before the login
        assert _recv_frame(sock)[:4] == struct.pack(">i", 1)
        _send(sock, MetadataRequest(topics=None), 1, 2)
        assert _recv_frame(sock) is None  # closed, no answer


def test_a_big_frame_before_the_login_closes_the_connection(secure):
    """Before the login a frame may have 512 KiB at most (Kafka's
    sasl.server.max.receive.size): the size alone closes the connection."""
    _, _, bootstrap = secure
    with _connect(bootstrap) as sock:
        sock.sendall(struct.pack(">i", 1024 * 1024))
        assert _recv_frame(sock) is None


def test_a_wrong_password_gets_error_58_then_the_connection_closes(secure):
    _, _, bootstrap = secure
    with _connect(bootstrap) as sock:
        _send(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1, 1)
        response = _recv_frame(sock)
        assert struct.unpack_from(">ih", response) == (1, 0)
        _send(sock, SaslAuthenticateRequest(auth_bytes=b"\0carol\0wrong password"), 1, 2)
        response = _recv_frame(sock)
        assert struct.unpack_from(">ih", response) == (2, 58)  # SASL_AUTHENTICATION_FAILED
        assert _recv_frame(sock) is None


def test_an_unknown_mechanism_is_refused_with_the_offered_ones(secure):
    _, _, bootstrap = secure
    with _connect(bootstrap) as sock:
        _send(sock, SaslHandshakeRequest(mechanism="GSSAPI"), 1, 1)
        response = _recv_frame(sock)
        assert struct.unpack_from(">ih", response) == (1, 33)  # UNSUPPORTED_SASL_MECHANISM
        assert b"PLAIN" in response and b"SCRAM-SHA-256" in response
        assert _recv_frame(sock) is None


def test_handshake_v0_then_a_bare_token_logs_in(secure):
    """Kafka before 1.0: after SaslHandshake v0 the token is a bare length-prefixed frame,
    answered by a bare (empty) token; then the connection serves requests."""
    _, _, bootstrap = secure
    with _connect(bootstrap) as sock:
        _send(sock, SaslHandshakeRequest(mechanism="PLAIN"), 0, 1)
        assert struct.unpack_from(">ih", _recv_frame(sock)) == (1, 0)
        token = b"\0alice\0" + ALICE[1].encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _recv_frame(sock) == b""
        _send(sock, MetadataRequest(topics=None), 1, 2)
        response = _recv_frame(sock)
        assert response[:4] == struct.pack(">i", 2)
        assert b"t" in response[4:]


def test_without_sasl_a_handshake_is_answered_illegal_state(tmp_path):
    with Cluster.open(tmp_path / "c") as cluster:
        with KafkaServer(cluster, listen=("127.0.0.1", 0)) as server:
            with _connect("{}:{}".format(*server.address)) as sock:
                _send(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1, 7)
                assert struct.unpack_from(">ih", _recv_frame(sock)) == (7, 34)
                _send(sock, ApiVersionsRequest(), 0, 8)  # the connection stays
                assert _recv_frame(sock)[:4] == struct.pack(">i", 8)


def test_an_unsupported_mechanism_is_refused_when_asked_for(tmp_path):
    with Cluster.open(tmp_path / "c") as cluster:
        with pytest.raises(errors.InvalidArgument, match="OAUTHBEARER"):
            KafkaServer(cluster, listen=("127.0.0.1", 0), sasl_mechanisms=["OAUTHBEARER"])


# --- TLS and the address rules ----------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 and localhost, made by openssl."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


def test_confluent_over_tls_with_the_ca_location(tmp_path, certificate):
    cert, key = certificate
    with Cluster.open(tmp_path / "c") as cluster:
        with KafkaServer(cluster, listen=("127.0.0.1", 0), tls_cert=cert, tls_key=key) as server:
            bootstrap = "{}:{}".format(*server.address)
            reports = []
            producer = CKProducer(
                {
                    "bootstrap.servers": bootstrap,
                    "security.protocol": "SSL",
                    "ssl.ca.location": cert,
                    "message.timeout.ms": 10000,
                    "log_level": 0,
                }
            )
            producer.produce("tls-topic", b"over tls", on_delivery=lambda e, m: reports.append(e))
            producer.flush(15)
            assert reports == [None]
            # a client that does not trust the certificate gets nowhere
            refused = []
            untrusting = CKProducer(
                {
                    "bootstrap.servers": bootstrap,
                    "security.protocol": "SSL",
                    "message.timeout.ms": 3000,
                    "error_cb": refused.append,
                    "log_level": 0,
                }
            )
            untrusting.produce("tls-topic", b"untrusted")
            untrusting.flush(6)
            assert any(e.name() == "_SSL" for e in refused)
        assert _values(cluster, "/kafka:tls-topic") == [b"over tls"]


def test_requests_of_a_megabyte_over_tls_are_read_whole(tmp_path, certificate):
    """TLS writes a large request into its own buffer as the socket does
    (engine.wire.reader): a megabyte at a time, every value stored as sent, in order."""
    cert, key = certificate
    values = [os.urandom(1024) for _ in range(3000)]
    with Cluster.open(tmp_path / "c") as cluster:
        with KafkaServer(cluster, listen=("127.0.0.1", 0), tls_cert=cert, tls_key=key) as server:
            reports = []
            producer = CKProducer(
                {
                    "bootstrap.servers": "{}:{}".format(*server.address),
                    "security.protocol": "SSL",
                    "ssl.ca.location": cert,
                    "linger.ms": 50,
                    "batch.size": 1_048_576,
                    "message.timeout.ms": 30000,
                    "log_level": 0,
                }
            )
            for value in values:
                producer.produce(
                    "big-over-tls", value, partition=0, on_delivery=lambda e, m: reports.append(e)
                )
            producer.flush(scaled(30))
            assert reports == [None] * len(values)
        assert _values(cluster, "/kafka:big-over-tls") == values


def test_non_loopback_needs_sasl_and_tls_or_insecure(tmp_path, certificate):
    cert, key = certificate
    with Cluster.open(tmp_path / "c") as cluster:
        public = ("0.0.0.0", 0)
        with pytest.raises(errors.InvalidArgument, match="without authentication"):
            KafkaServer(cluster, listen=public, tls_cert=cert, tls_key=key)
        with pytest.raises(errors.InvalidArgument, match="in the clear"):
            KafkaServer(cluster, listen=public, sasl=True)
        KafkaServer(cluster, listen=public, sasl=True, tls_cert=cert, tls_key=key).close()
        KafkaServer(cluster, listen=public, tls_cert=cert, tls_key=key, insecure=True).close()


# --- the commands -----------------------------------------------------------------------------


def _plet(*args):
    return [sys.executable, "-m", "engine.cli", *args]


def test_plet_serve_sasl_over_tls_and_the_no_users_warning(tmp_path, certificate):
    """With SASL and no users the listener starts (a user added later logs in at once) and
    warns that every login fails until then."""
    cert, key = certificate
    path = tmp_path / "c"
    with Cluster.open(path, name="cli") as cluster:
        cluster.create_stream("/kafka", produce_perm="p", topic_perm="p")
    proc = subprocess.Popen(
        _plet(
            "serve", "--cluster", str(path), "--listen", "127.0.0.1:0", "--sasl",
            "--tls-cert", cert, "--tls-key", key,
        ),
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        line = proc.stderr.readline()
        match = re.search(r"on 127\.0\.0\.1:(\d+) ", line)
        assert match and "SASL_SSL with PLAIN" in line, line
        assert "no users yet" in proc.stderr.readline()
        bootstrap = f"127.0.0.1:{match.group(1)}"
        tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": cert}
        reports, client_errors = _ck_produce(bootstrap, "early", "a password of early", b"x", **tls)
        assert any(e.name() == "_AUTHENTICATION" for e in client_errors)
        with Cluster.open(path) as cluster:
            cluster.add_user("dave", "a password of dave")
        assert _ck_produce(bootstrap, "dave", "a password of dave", b"by dave", **tls) == (
            [None],
            [],
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=scaled(30)) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with Cluster.open(path) as cluster:
        assert _values(cluster, "/kafka:t") == [b"by dave"]


def test_plet_web_kafka_serves_beside_the_console(tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path, name="web") as cluster:
        cluster.add_user("alice", ALICE[1], admin=True)
        token = cluster.create_api_token("alice", "test")
    proc = subprocess.Popen(
        _plet(
            "web", "--cluster", str(path), "--port", "0", "--no-replicate",
            "--kafka", "127.0.0.1:0", "--kafka-sasl",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        web = kafka = None
        deadline = time.monotonic() + scaled(60)
        while (web is None or kafka is None) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "plet web ended early"
            if found := re.search(r"Web console: (http://\S+)", line):
                web = found.group(1)
            if found := re.search(r"Kafka protocol: (127\.0\.0\.1:\d+)", line):
                kafka = found.group(1)
        assert web and kafka
        assert _ck_produce(kafka, "token", token, b"through plet web", topic="web-t") == (
            [None],
            [],
        )
        request = urllib.request.Request(
            web + "api/v1/topics/%2Fkafka%3Aweb-t/messages",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            body = json.load(answer)
        assert "through plet web" in json.dumps(body)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=scaled(60)) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
