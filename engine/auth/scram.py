"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them: the
credentials stored when a password is set, and the messages of the server's side.

Nothing here touches the catalog: engine.auth.users stores and finds the credentials,
engine.auth.logins runs one login (its limits, its throttle) as a `ScramLogin`.

Kafka's dialect of SCRAM, which every Kafka client follows:

- the password is used as its UTF-8 bytes, without SASLprep (Kafka's ScramFormatter, and
  librdkafka, kafka-python and kafkajs with it), so credentials are derived the same way;
- no channel binding (a gs2 flag `n` or `y`; `p=...` is refused);
- an extension `tokenauth=true` asks for a delegation token login, which is not served;
  other extensions are ignored, as Kafka ignores the ones it does not know.

Written with hashlib and hmac rather than a SCRAM library: the one maintained Python
library (scramp) applies SASLprep to passwords (so a non-ASCII password would derive other
keys than Kafka's clients do) and brings asn1crypto for channel binding, which Kafka does
not use; the RFC's arithmetic is a few lines.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from typing import NamedTuple

# The mechanisms and their hash (RFC 7677 for SHA-256; SHA-512 as Kafka defines it).
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# PBKDF2 rounds of a stored credential: above RFC 7677's and Kafka's minimum of 4096 and
# within the 16384 Kafka's tools accept. A client pays them once per login.
ITERATIONS = 8192
MIN_ITERATIONS = 4096
SALT_BYTES = 16
# A client's message is a few hundred bytes; anything past this is not a SCRAM message.
MAX_MESSAGE_BYTES = 4096
# saslname: any UTF-8 but ',' and '=', which are written =2C and =3D
_SASLNAME = re.compile(r"(?:[^,=]|=2C|=3D)+")
# a nonce: printable ASCII but ','
_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")


class ScramError(ValueError):
    """A message that breaks the protocol; the text says what, for the client."""


class Credential(NamedTuple):
    """What the server keeps of a password for one mechanism (RFC 5802, 3): never enough
    to log in with, only to check a proof."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, name).digest()


def derive(
    mechanism: str, password: str, salt: bytes | None = None, iterations: int = ITERATIONS
) -> Credential:
    """The credential of `password` for `mechanism` (a new random salt when None)."""
    name = MECHANISMS[mechanism]
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"SCRAM needs at least {MIN_ITERATIONS} iterations, not {iterations}")
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
    client_key = _hmac(name, salted, b"Client Key")
    stored_key = hashlib.new(name, client_key).digest()
    server_key = _hmac(name, salted, b"Server Key")
    return Credential(mechanism, salt, iterations, stored_key, server_key)


def credentials(password: str) -> tuple[Credential, ...]:
    """The credentials of `password` for every mechanism, each with its own salt."""
    return tuple(derive(m, password) for m in MECHANISMS)


def decoy(mechanism: str, name: str, secret: bytes) -> Credential:
    """A credential for a name that has none (unknown, or no SCRAM credential yet): its salt
    is the same at every try (an HMAC of the name under `secret`), so the server's first
    message does not tell whether the name exists; no proof matches its keys."""
    salt = hmac.new(secret, f"{mechanism}\0{name}".encode(), hashlib.sha256).digest()
    size = hashlib.new(MECHANISMS[mechanism]).digest_size
    keys = secrets.token_bytes(2 * size)
    return Credential(mechanism, salt[:SALT_BYTES], ITERATIONS, keys[:size], keys[size:])


@dataclass(frozen=True)
class ClientFirst:
    """The parsed client-first message."""

    gs2_header: str  # "n,," or "n,a=name," ...: the client-final's `c=` carries it back
    name: str  # the user name, =2C and =3D decoded
    authzid: str  # "" unless the client asked to act as someone (must be `name`)
    nonce: str
    bare: str  # the message without its gs2 header, part of the AuthMessage
    token_auth: bool  # Kafka's `tokenauth=true` extension: a delegation token login


def _text(message: bytes, what: str) -> str:
    if len(message) > MAX_MESSAGE_BYTES:
        raise ScramError(f"the {what} message has more than {MAX_MESSAGE_BYTES} bytes")
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"the {what} message is not UTF-8") from None


def _saslname(value: str, what: str) -> str:
    if not _SASLNAME.fullmatch(value):
        raise ScramError(f"the {what} is empty or has a '=' that is not =2C or =3D")
    return value.replace("=2C", ",").replace("=3D", "=")


def parse_client_first(message: bytes) -> ClientFirst:
    """The client-first message (RFC 5802, 7), or ScramError saying what is wrong."""
    text = _text(message, "client-first")
    parts = text.split(",")
    if len(parts) < 4:
        raise ScramError("the client-first message is not 'n,,n=NAME,r=NONCE'")
    flag, authzid_part = parts[0], parts[1]
    if flag.startswith("p="):
        raise ScramError("channel binding is not supported (use the gs2 flag 'n')")
    if flag not in ("n", "y"):
        raise ScramError(f"unknown gs2 flag {flag[:20]!r} (expected 'n')")
    authzid = ""
    if authzid_part:
        if not authzid_part.startswith("a="):
            raise ScramError("the authorization id is not 'a=NAME'")
        authzid = _saslname(authzid_part[2:], "authorization id")
    bare_parts = parts[2:]
    if bare_parts[0].startswith("m="):
        raise ScramError("mandatory extensions (m=) are not supported")
    if not bare_parts[0].startswith("n="):
        raise ScramError("the client-first message has no user name (n=)")
    name = _saslname(bare_parts[0][2:], "user name")
    if not bare_parts[1].startswith("r=") or not _NONCE.fullmatch(bare_parts[1][2:]):
        raise ScramError("the client-first message has no valid nonce (r=)")
    extensions = {}
    for ext in bare_parts[2:]:
        key, sep, value = ext.partition("=")
        if not sep or not key:
            raise ScramError("an extension of the client-first message is not KEY=VALUE")
        extensions[key] = value
    return ClientFirst(
        gs2_header=f"{flag},{authzid_part},",
        name=name,
        authzid=authzid,
        nonce=bare_parts[1][2:],
        bare=",".join(bare_parts),
        token_auth=extensions.get("tokenauth", "").lower() == "true",
    )


def server_first(client: ClientFirst, credential: Credential) -> str:
    """The server-first message: the nonce (the client's and the server's), salt, count."""
    nonce = client.nonce + secrets.token_urlsafe(24)
    salt = base64.b64encode(credential.salt).decode("ascii")
    return f"r={nonce},s={salt},i={credential.iterations}"


def _nonce_of(server_first_message: str) -> str:
    return server_first_message.split(",", 1)[0][2:]


def check_client_final(
    message: bytes, client: ClientFirst, server_first_message: str, credential: Credential
) -> str | None:
    """The server-final message (`v=` the server's signature) when the client's proof is
    right, None when it is not; ScramError for a message that breaks the protocol."""
    text = _text(message, "client-final")
    parts = text.split(",")
    if len(parts) < 3 or not parts[-1].startswith("p="):
        raise ScramError("the client-final message is not 'c=...,r=...,p=PROOF'")
    binding, nonce = parts[0], parts[1]
    expected = base64.b64encode(client.gs2_header.encode("utf-8")).decode("ascii")
    # neither is a secret (the client sent one, the server the other): a plain comparison
    if binding != "c=" + expected:
        raise ScramError("the channel binding (c=) does not match the client-first message")
    # The server's nonce, or (librdkafka before 2.6.1, Debian's kcat among them, puts the
    # client's nonce in front once more: librdkafka#4895; Kafka 3.8.1-3.9 accept it too)
    # the client's nonce and the server's: the proof covers the nonce as sent, and the
    # server's fresh part is in it, so an old proof is no use in another exchange.
    server_nonce = _nonce_of(server_first_message)
    if nonce not in ("r=" + server_nonce, "r=" + client.nonce + server_nonce):
        raise ScramError("the nonce (r=) is not the one the server sent")
    name = MECHANISMS[credential.mechanism]
    size = hashlib.new(name).digest_size
    try:
        proof = base64.b64decode(parts[-1][2:], validate=True)
    except (binascii.Error, ValueError):
        raise ScramError("the proof (p=) is not base64") from None
    if len(proof) != size:
        raise ScramError(f"the proof (p=) has {len(proof)} bytes, not {size}")
    without_proof = text[: text.rindex(",p=")]
    auth_message = f"{client.bare},{server_first_message},{without_proof}".encode()
    signature = _hmac(name, credential.stored_key, auth_message)
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    if not hmac.compare_digest(hashlib.new(name, client_key).digest(), credential.stored_key):
        return None
    server_signature = _hmac(name, credential.server_key, auth_message)
    return "v=" + base64.b64encode(server_signature).decode("ascii")
