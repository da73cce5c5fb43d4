"""SASL/SCRAM-SHA-256 and -512 on the wire listener, with real clients (confluent-kafka,
kafka-python, kafkajs) and raw frames: credentials stored with the password, users from
before SCRAM given theirs at a PLAIN login, wrong proofs refused and counted, malformed
messages answered with a clear error and the connection closed."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer as CKProducer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from engine import Cluster, Consumer, Principal, TopicPartition, errors
from engine.auth import users
from engine.auth.logins import LoginLimiter
from engine.wire import KafkaServer
from tests.timing import scaled

ALICE = ("alice", "correct horse battery")  # may produce to and consume from /secure
ERIN = ("erin", "erin's long password")  # confluent's wrong passwords (throttled) name
IVAN = ("ivan", "ivan's long password")  # kafkajs's wrong password's
OLD = ("olga", "a password from before scram")  # made as an older engine made users
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ROOT = Path(__file__).resolve().parents[3]


def _add_user_as_before_scram(cluster, name, password):
    """A user as an engine without SCRAM credentials wrote it: a scrypt hash only."""
    cluster.catalog.accounts.add_user(
        name, users.hash_password(password), (), False, cluster.clock.now_ms()
    )


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    path = tmp_path_factory.mktemp("scram") / "cluster"
    with Cluster.open(path, name="scram") as cluster:
        for name, password in (ALICE, ERIN, IVAN):
            cluster.add_user(name, password)
        _add_user_as_before_scram(cluster, *OLD)
        cluster.create_stream(
            "/secure",
            produce_perm="u:alice | u:olga",
            consume_perm="u:alice",
            auto_create=False,
        )
        cluster.create_topic("/secure:t", 1)
        # a limiter of its own: the wrong passwords here leave the process's one alone
        server = KafkaServer(
            cluster,
            listen=("127.0.0.1", 0),
            sasl=True,
            default_stream="/secure",
            login_limiter=LoginLimiter(),
        ).start()
        try:
            yield cluster, server, "{}:{}".format(*server.address)
        finally:
            server.close()


def _values(cluster, full="/secure:t"):
    reader = cluster.as_principal(Principal("reader", superuser=True))
    consumer = Consumer(reader, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(full, 0)
    consumer.assign([tp])
    end = consumer.end_offsets([tp])[tp]
    got = []
    deadline = time.monotonic() + scaled(5)
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=300).values():
            got.extend(r.value for r in records)
    consumer.close()
    return got


def _ck_produce(bootstrap, mechanism, user, password, value, **extra):
    """(delivery errors, client errors) of one confluent-kafka produce with SCRAM."""
    reports, client_errors = [], []
    producer = CKProducer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "message.timeout.ms": int(scaled(4000)),
            "error_cb": client_errors.append,
            "log_level": 0,
            **extra,
        }
    )
    producer.produce("t", value, on_delivery=lambda err, msg: reports.append(err))
    producer.flush(scaled(10))
    return reports, client_errors


# --- raw frames -------------------------------------------------------------------------------


def _connect(bootstrap):
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


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
        try:
            chunk = sock.recv(n - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def _decode(response_class, frame, version):
    """(correlation id, the decoded response) of a response frame."""
    correlation_id = struct.unpack_from(">i", frame)[0]
    return correlation_id, response_class.decode(frame[4:], version=version)


def _handshake(sock, mechanism, version=1):
    _send(sock, SaslHandshakeRequest(mechanism=mechanism), version, 1)
    return _decode(SaslHandshakeResponse, _recv_frame(sock), version)[1]


def _authenticate(sock, token, correlation_id):
    _send(sock, SaslAuthenticateRequest(auth_bytes=token), 1, correlation_id)
    frame = _recv_frame(sock)
    assert frame is not None
    return _decode(SaslAuthenticateResponse, frame, 1)[1]


def _scram_login(bootstrap, mechanism, name, password):
    """(error code, error message) of a SCRAM login over raw frames, driven by
    kafka-python's SCRAM client; the connection is closed."""
    client = ScramClient(name, password, mechanism)
    with _connect(bootstrap) as sock:
        assert _handshake(sock, mechanism).error_code == 0
        first = _authenticate(sock, client.first_message(), 2)
        if first.error_code:
            return first.error_code, first.error_message
        client.process_server_first_message(bytes(first.auth_bytes))
        final = _authenticate(sock, client.final_message(), 3)
        if not final.error_code:
            client.process_server_final_message(bytes(final.auth_bytes))  # the server's proof
        return final.error_code, final.error_message


def test_the_handshake_lists_plain_and_both_scram_mechanisms(secure):
    _, _, bootstrap = secure
    with _connect(bootstrap) as sock:
        response = _handshake(sock, "SCRAM-SHA-512")
    assert response.error_code == 0
    assert list(response.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_raw_scram_login_verifies_the_servers_signature(secure, mechanism):
    _, _, bootstrap = secure
    assert _scram_login(bootstrap, mechanism, *ALICE) == (0, None)


# --- real clients -----------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_produces_with_scram(secure, mechanism):
    cluster, _, bootstrap = secure
    value = f"confluent {mechanism}".encode()
    assert _ck_produce(bootstrap, mechanism, *ALICE, value) == ([None], [])
    assert value in _values(cluster)


def test_confluent_with_a_wrong_password_is_refused_with_scram(secure):
    cluster, _, bootstrap = secure
    reports, client_errors = _ck_produce(bootstrap, "SCRAM-SHA-256", ERIN[0], "wrong!", b"no")
    assert [e.name() for e in reports] == ["_MSG_TIMED_OUT"]
    auth = [e for e in client_errors if e.name() == "_AUTHENTICATION"]
    assert auth and "Invalid username or password" in auth[0].str()
    assert b"no" not in _values(cluster)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produces_and_consumes_with_scram(secure, mechanism):
    cluster, _, bootstrap = secure
    settings = dict(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=ALICE[0],
        sasl_plain_password=ALICE[1],
    )
    value = f"kafka-python {mechanism}".encode()
    producer = KafkaProducer(**settings)
    meta = producer.send("t", value=value).get(timeout=scaled(30))
    producer.close()
    consumer = KafkaConsumer(**settings, consumer_timeout_ms=int(scaled(5000)))
    tp = KTP("t", 0)
    consumer.assign([tp])
    consumer.seek(tp, meta.offset)
    got = [m.value for m in consumer]
    consumer.close()
    assert got[:1] == [value]


_KAFKAJS = r"""
const { Kafka, logLevel } = require('kafkajs');
const [bootstrap, mechanism, username, password, value] = process.argv.slice(1);  // node -e: no script name
const kafka = new Kafka({
  clientId: 'scram-test', brokers: [bootstrap], logLevel: logLevel.NOTHING,
  sasl: { mechanism, username, password }, retry: { retries: 0 }, connectionTimeout: 10000,
});
(async () => {
  const producer = kafka.producer();
  try {
    await producer.connect();
    const [meta] = await producer.send({ topic: 't', messages: [{ value }] });
    console.log(JSON.stringify({ ok: true, offset: meta.baseOffset }));
  } catch (e) {
    console.log(JSON.stringify({ ok: false, type: e.type || null, name: e.name, message: e.message }));
  } finally {
    await producer.disconnect();
  }
})();
"""


def _kafkajs(bootstrap, mechanism, user, password, value):
    node = shutil.which("node")
    assert node is not None, "Node.js runs the kafkajs tests"
    assert (ROOT / "node_modules" / "kafkajs").is_dir(), "kafkajs: run make (npm ci)"
    out = subprocess.run(
        [node, "-e", _KAFKAJS, bootstrap, mechanism, user, password, value],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        cwd=ROOT,
        env={**os.environ, "NODE_PATH": str(ROOT / "node_modules")},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mechanism", ["scram-sha-256", "scram-sha-512"])
def test_kafkajs_produces_with_scram(secure, mechanism):
    cluster, _, bootstrap = secure
    value = f"kafkajs {mechanism}"
    result = _kafkajs(bootstrap, mechanism, *ALICE, value)
    assert result["ok"], result
    assert value.encode() in _values(cluster)


def test_kafkajs_with_a_wrong_password_is_refused(secure):
    _, _, bootstrap = secure
    result = _kafkajs(bootstrap, "scram-sha-256", IVAN[0], "not ivan's", "no")
    assert not result["ok"]
    assert result["name"] == "KafkaJSSASLAuthenticationError", result
    assert "Invalid username or password" in result["message"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_produces_and_consumes_with_scram(secure, mechanism):
    """Debian's kcat (its own librdkafka, older than confluent-kafka's)."""
    cluster, _, bootstrap = secure
    sasl = [
        "-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mechanism}",
        "-X", f"sasl.username={ALICE[0]}", "-X", f"sasl.password={ALICE[1]}",
    ]  # fmt: skip
    value = f"kcat {mechanism}"
    subprocess.run(
        ["kcat", "-b", bootstrap, *sasl, "-P", "-t", "t", "-p", "0"],
        input=value.encode() + b"\n",
        check=True,
        capture_output=True,
        timeout=scaled(60),
    )
    assert value.encode() in _values(cluster)
    out = subprocess.run(
        ["kcat", "-b", bootstrap, *sasl, "-C", "-t", "t", "-e", "-o", "beginning", "-f", "%s\n"],
        capture_output=True,
        check=True,
        timeout=scaled(60),
    )
    assert value in out.stdout.decode().splitlines()


# --- users from before SCRAM ------------------------------------------------------------------


def test_a_user_from_before_scram_gets_credentials_at_a_plain_login(secure):
    cluster, _, bootstrap = secure
    assert cluster.catalog.accounts.scram_mechanisms(OLD[0]) == set()
    code, message = _scram_login(bootstrap, "SCRAM-SHA-256", *OLD)
    assert code == 58
    assert "logs in once with PLAIN" in message
    # a PLAIN login with the password (a real client) derives the credentials
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=OLD[0],
        sasl_plain_password=OLD[1],
    )
    producer.send("t", value=b"olga with plain").get(timeout=scaled(30))
    producer.close()
    assert cluster.catalog.accounts.scram_mechanisms(OLD[0]) == set(MECHANISMS)
    assert _ck_produce(bootstrap, "SCRAM-SHA-512", *OLD, b"olga with scram") == ([None], [])
    assert b"olga with scram" in _values(cluster)


def test_a_password_change_replaces_the_credentials(tmp_path):
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.add_user("frank", "frank's first password")
        with KafkaServer(
            cluster, listen=("127.0.0.1", 0), sasl=True, login_limiter=LoginLimiter()
        ) as server:
            bootstrap = "{}:{}".format(*server.address)
            assert (
                _scram_login(bootstrap, "SCRAM-SHA-256", "frank", "frank's first password")[0] == 0
            )
            cluster.set_password("frank", "frank's second password")
            assert (
                _scram_login(bootstrap, "SCRAM-SHA-256", "frank", "frank's first password")[0] == 58
            )
            assert (
                _scram_login(bootstrap, "SCRAM-SHA-256", "frank", "frank's second password")[0] == 0
            )
            cluster.delete_user("frank")
            assert cluster.catalog.accounts.scram_mechanisms("frank") == set()
            assert (
                _scram_login(bootstrap, "SCRAM-SHA-256", "frank", "frank's second password")[0]
                == 58
            )


# --- wrong proofs and attacks -----------------------------------------------------------------


def test_wrong_proofs_count_against_the_address_like_wrong_passwords(tmp_path):
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.add_user("gina", "gina's long password")
        limiter = LoginLimiter(failures=2, window_s=60)
        with KafkaServer(
            cluster, listen=("127.0.0.1", 0), sasl=True, login_limiter=limiter
        ) as server:
            bootstrap = "{}:{}".format(*server.address)
            for _ in range(2):
                code, message = _scram_login(bootstrap, "SCRAM-SHA-512", "nobody", "guess one")
                assert (code, message.split(" (")[0]) == (
                    58,
                    "Authentication failed: Invalid username or password",
                )
            code, message = _scram_login(bootstrap, "SCRAM-SHA-512", "gina", "gina's long password")
            assert code == 58
            assert "too many failed logins from 127.0.0.1" in message


def test_wrong_proofs_lock_the_name_for_plain_too(tmp_path):
    """Five wrong SCRAM proofs in a row make the name wait, as five wrong PLAIN passwords
    do (one throttle per name for every login path): then even the right password waits."""
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.add_user("hugo", "hugo's long password")
        with KafkaServer(
            cluster, listen=("127.0.0.1", 0), sasl=True, login_limiter=LoginLimiter()
        ) as server:
            bootstrap = "{}:{}".format(*server.address)
            for _ in range(users.LOGIN_FAILURES):
                assert _scram_login(bootstrap, "SCRAM-SHA-256", "hugo", "a wrong guess")[0] == 58
            code, message = _scram_login(bootstrap, "SCRAM-SHA-512", "hugo", "hugo's long password")
            assert code == 58 and "too many wrong passwords for 'hugo'" in message
            assert users.login_wait(cluster, "hugo") > 0
            with pytest.raises(errors.LoginThrottled):
                cluster.authenticate("hugo", "hugo's long password")


def test_confluent_with_scram_over_tls(tmp_path):
    folder = tmp_path / "tls"
    folder.mkdir()
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.add_user(*ALICE)
        cluster.create_stream("/kafka", produce_perm="u:alice")
        cluster.create_topic("/kafka:t", 1)
        with KafkaServer(
            cluster, listen=("127.0.0.1", 0), sasl=True, tls_cert=str(cert), tls_key=str(key)
        ) as server:
            bootstrap = "{}:{}".format(*server.address)
            tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(cert)}
            result = _ck_produce(bootstrap, "SCRAM-SHA-512", *ALICE, b"over tls", **tls)
            assert result == ([None], [])
            assert _values(cluster, "/kafka:t") == [b"over tls"]


def test_an_unknown_name_gets_the_same_salt_every_time(secure):
    """The server-first message of a name with no credential looks like a real one and
    does not change from one try to the next (else its randomness would tell)."""
    _, _, bootstrap = secure

    def salt_and_count(name):
        with _connect(bootstrap) as sock:
            _handshake(sock, "SCRAM-SHA-256")
            answer = _authenticate(sock, f"n,,n={name},r=abc".encode(), 2)
        assert answer.error_code == 0
        fields = dict(p.split("=", 1) for p in bytes(answer.auth_bytes).decode().split(","))
        return fields["s"], fields["i"]

    unknown = salt_and_count("nobody-here")
    assert unknown == salt_and_count("nobody-here")
    real = salt_and_count(ALICE[0])
    assert unknown[1] == real[1] == "8192"
    assert len(unknown[0]) == len(real[0])


_BAD_FIRST = [
    (b"", "client-first"),
    (b"garbage", "client-first"),
    (b"n,,n=alice", "client-first"),
    (b"n,,n=alice,x=nonce", "nonce"),
    (b"p=tls-unique,,n=alice,r=abc", "channel binding"),
    (b"q,,n=alice,r=abc", "gs2 flag"),
    (b"n,,m=ext,n=alice,r=abc", "mandatory extensions"),
    (b"n,,n=al=ice,r=abc", "user name"),
    (b"n,a=bob,n=alice,r=abc", "authorization id"),
    (b"n,,n=alice,r=abc,tokenauth=true", "delegation tokens"),
    (b"n,,n=\xff\xfe,r=abc", "UTF-8"),
    (b"n,,n=alice,r=" + b"x" * 5000, "4096 bytes"),
]


@pytest.mark.parametrize(("token", "said"), _BAD_FIRST, ids=[s for _, s in _BAD_FIRST])
def test_a_malformed_client_first_message_is_refused_and_closed(secure, caplog, token, said):
    _, _, bootstrap = secure
    caplog.set_level(logging.INFO, logger="engine.wire")
    with _connect(bootstrap) as sock:
        assert _handshake(sock, "SCRAM-SHA-256").error_code == 0
        answer = _authenticate(sock, token, 2)
        assert answer.error_code == 58
        assert answer.error_message.startswith("Authentication failed")
        assert said in answer.error_message
        assert _recv_frame(sock) is None  # closed
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def _bad_finals(nonce):
    good_c = "c=biws"
    return [
        (b"", "client-final"),
        (b"c=biws,r=" + nonce, "client-final"),
        (f"c=eSws,r={nonce.decode()},p=AAAA".encode(), "channel binding"),
        (f"{good_c},r=other,p=AAAA".encode(), "nonce"),
        (f"{good_c},r={nonce.decode()},p=***".encode(), "base64"),
        (f"{good_c},r={nonce.decode()},p=AAAA".encode(), "has 3 bytes"),
        (f"{good_c},r={nonce.decode()},p=".encode() + b"\xff", "UTF-8"),
        (f"c=é,r={nonce.decode()},p=AAAA".encode(), "channel binding"),
        (f"{good_c},r=é,p=AAAA".encode(), "nonce"),
        (f"{good_c},r={nonce.decode()},p=é".encode(), "base64"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_a_malformed_client_final_message_is_refused_and_closed(secure, caplog, case):
    _, _, bootstrap = secure
    caplog.set_level(logging.INFO, logger="engine.wire")
    with _connect(bootstrap) as sock:
        assert _handshake(sock, "SCRAM-SHA-256").error_code == 0
        first = _authenticate(sock, b"n,,n=alice,r=abc", 2)
        nonce = bytes(first.auth_bytes).split(b",")[0][2:]
        token, said = _bad_finals(nonce)[case]
        answer = _authenticate(sock, token, 3)
        assert answer.error_code == 58
        assert answer.error_message.startswith("Authentication failed")
        assert said in answer.error_message
        assert _recv_frame(sock) is None
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_scram_after_handshake_v0_uses_bare_tokens(secure):
    """Kafka before 1.0: after SaslHandshake v0 each SCRAM message is a bare frame."""
    _, _, bootstrap = secure
    client = ScramClient(*ALICE, "SCRAM-SHA-256")
    with _connect(bootstrap) as sock:
        assert _handshake(sock, "SCRAM-SHA-256", version=0).error_code == 0
        token = client.first_message()
        sock.sendall(struct.pack(">i", len(token)) + token)
        client.process_server_first_message(_recv_frame(sock))
        token = client.final_message()
        sock.sendall(struct.pack(">i", len(token)) + token)
        client.process_server_final_message(_recv_frame(sock))  # raises on a bad signature
