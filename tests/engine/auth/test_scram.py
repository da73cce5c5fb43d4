"""SCRAM credentials (engine.auth.scram): RFC 7677's example, what is stored with a
password, and catalogs from before SCRAM."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random

import pytest

from engine import Cluster
from engine.auth import scram, users
from tests.old_catalog import drop_scram_credentials

# RFC 7677, section 3: user "user", password "pencil"
_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
_SERVER_FIRST = (
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)


def _rfc_credential(password="pencil"):
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    return scram.derive("SCRAM-SHA-256", password, salt, 4096)


def test_rfc_7677_example():
    client = scram.parse_client_first(_CLIENT_FIRST)
    assert (client.name, client.nonce, client.gs2_header) == ("user", "rOprNGfwEbeRWgbNEkqO", "n,,")
    answer = scram.check_client_final(_CLIENT_FINAL, client, _SERVER_FIRST, _rfc_credential())
    assert answer == "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_a_wrong_password_gives_no_answer():
    client = scram.parse_client_first(_CLIENT_FIRST)
    wrong = _rfc_credential("pencils")
    assert scram.check_client_final(_CLIENT_FINAL, client, _SERVER_FIRST, wrong) is None


def test_fewer_than_4096_iterations_are_refused():
    with pytest.raises(ValueError, match="4096"):
        scram.derive("SCRAM-SHA-256", "pencil", iterations=1000)


def test_escaped_names_are_decoded():
    client = scram.parse_client_first(b"n,,n=a=2Cb=3Dc,r=x")
    assert client.name == "a,b=c"


def test_a_password_stores_credentials_for_both_mechanisms(tmp_path):
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.add_user("alice", "correct horse battery")
        found = users.scram_credential(cluster, "alice", "SCRAM-SHA-512")
        assert found is not None
        credential, user = found
        assert user.name == "alice"
        assert credential.iterations == scram.ITERATIONS
        again = scram.derive(
            "SCRAM-SHA-512", "correct horse battery", credential.salt, credential.iterations
        )
        assert again == credential
        other = users.scram_credential(cluster, "alice", "SCRAM-SHA-256")
        assert other is not None and other[0].salt != credential.salt


def test_an_older_catalog_gets_the_table_and_users_their_credentials_at_login(tmp_path):
    path = tmp_path / "c"
    with Cluster.open(path) as cluster:
        cluster.add_user("olga", "a password from before")
    drop_scram_credentials(path / "catalog.db")  # as an engine without SCRAM left it
    with Cluster.open(path) as cluster:
        assert users.scram_credential(cluster, "olga", "SCRAM-SHA-256") is None
        assert cluster.authenticate("olga", "not the password") is None
        assert users.scram_credential(cluster, "olga", "SCRAM-SHA-256") is None
        assert cluster.authenticate("olga", "a password from before") is not None
        found = users.scram_credential(cluster, "olga", "SCRAM-SHA-256")
        assert found is not None
        assert found[0] == scram.derive(
            "SCRAM-SHA-256", "a password from before", found[0].salt, found[0].iterations
        )


def test_credentials_of_a_password_changed_meanwhile_are_not_stored(tmp_path):
    with Cluster.open(tmp_path / "c") as cluster:
        cluster.add_user("olga", "a password from before")
        accounts = cluster.catalog.accounts
        old_hash = accounts.password_hash("olga")[0]
        cluster.set_password("olga", "the password of now")
        rows = [scram.derive(m, "a password from before") for m in ("SCRAM-SHA-256",)]
        assert accounts.add_scram("olga", old_hash, rows) is False
        credential = users.scram_credential(cluster, "olga", "SCRAM-SHA-256")[0]
        assert credential == scram.derive(
            "SCRAM-SHA-256", "the password of now", credential.salt, credential.iterations
        )


def test_any_bytes_give_a_parse_or_a_scram_error():
    """Whatever a client sends, the parsers answer a message or ScramError, never
    another exception (which would reach the listener as a server bug)."""
    rng = random.Random(7)
    pieces = [b"n", b"y", b"p=", b",", b"=", b"a=", b"n=", b"r=", b"c=", b"p=", b"m=",
              b"=2C", b"=3D", b"biws", b"AAAA", b"\xff", b"\xc3\xa9", b"\x00", b"x"]  # fmt: skip
    client = scram.parse_client_first(_CLIENT_FIRST)
    credential = _rfc_credential()
    for _ in range(3000):
        message = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        try:
            scram.parse_client_first(message)
        except scram.ScramError:
            pass
        if rng.random() < 0.5:  # past the binding and the nonce, to the proof
            message = _CLIENT_FINAL[: _CLIENT_FINAL.rindex(b",p=") + 3] + message
        try:
            scram.check_client_final(message, client, _SERVER_FIRST, credential)
        except scram.ScramError:
            pass


def _client_final(without_proof: str, password: str = "pencil") -> bytes:
    """A client-final message with the proof of `password` over `without_proof` (RFC 5802)."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    auth = f"n=user,r=rOprNGfwEbeRWgbNEkqO,{_SERVER_FIRST},{without_proof}".encode()
    signature = hmac.new(stored_key, auth, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_librdkafkas_doubled_client_nonce_is_accepted_and_no_other_prefix():
    """librdkafka before 2.6.1 sends r=<client nonce><server's nonce> (librdkafka#4895)."""
    client = scram.parse_client_first(_CLIENT_FIRST)
    server_nonce = _SERVER_FIRST.split(",")[0][2:]
    doubled = _client_final(f"c=biws,r=rOprNGfwEbeRWgbNEkqO{server_nonce}")
    answer = scram.check_client_final(doubled, client, _SERVER_FIRST, _rfc_credential())
    assert answer is not None and answer.startswith("v=")
    other = _client_final(f"c=biws,r=x{server_nonce}")
    with pytest.raises(scram.ScramError, match="nonce"):
        scram.check_client_final(other, client, _SERVER_FIRST, _rfc_credential())
    # the RFC's own message, through the same helper
    assert _client_final(f"c=biws,r={server_nonce}") == _CLIENT_FINAL
