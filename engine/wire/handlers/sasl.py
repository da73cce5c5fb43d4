"""SaslHandshake and SaslAuthenticate: a connection logs in as a console user (PLAIN), and
from then on acts as that user's principal (engine.wire.auth, docs/WIRE.md Security).

The connection's SASL state lives in its `Session` (`sasl_mechanisms`, `authenticated`,
`sasl_stage`); the connection lets nothing but ApiVersions, SaslHandshake and
SaslAuthenticate through before the login. A refused login is answered, then the
connection is closed (`session.close_after`), as Kafka does.
"""

from __future__ import annotations

import logging
import struct

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from engine.wire import auth, codec, codes
from engine.wire.connection import Session
from engine.wire.registry import api

log = logging.getLogger(__name__)

# Session.sasl_stage after a handshake: the token comes in a SaslAuthenticate request
# (handshake v1), or as a bare length-prefixed frame (v0, Kafka before 1.0).
FRAMED = "framed"
RAW = "raw"


@api(SaslHandshakeRequest, SaslHandshakeResponse, (0, 1))
def sasl_handshake(
    session: Session, request: SaslHandshakeRequest, version: int
) -> SaslHandshakeResponse:
    offered = list(session.sasl_mechanisms)
    if not offered or session.authenticated or session.sasl_stage is not None:
        # a listener without SASL, or a second handshake: Kafka's answer past the SASL stage
        session.close_after = bool(offered)
        return SaslHandshakeResponse(error_code=codes.ILLEGAL_SASL_STATE, mechanisms=offered)
    if request.mechanism not in offered:
        session.close_after = True
        return SaslHandshakeResponse(
            error_code=codes.UNSUPPORTED_SASL_MECHANISM, mechanisms=offered
        )
    session.sasl_stage = FRAMED if version >= 1 else RAW
    return SaslHandshakeResponse(error_code=codes.NONE, mechanisms=offered)


@api(SaslAuthenticateRequest, SaslAuthenticateResponse, (0, 2))
def sasl_authenticate(
    session: Session, request: SaslAuthenticateRequest, version: int
) -> SaslAuthenticateResponse:
    if session.sasl_stage != FRAMED:
        session.close_after = bool(session.sasl_mechanisms)
        return _response(codes.ILLEGAL_SASL_STATE, "SaslAuthenticate needs SaslHandshake v1 first")
    error = login(session, codec.decoded_bytes(request.auth_bytes) or b"")
    if error is not None:
        session.close_after = True
        return _response(codes.SASL_AUTHENTICATION_FAILED, error)
    return _response(codes.NONE, None)


def raw_token(session: Session, frame: bytes) -> bytes | None:
    """The answer to the bare token that follows SaslHandshake v0: an empty token (framed)
    when the login succeeds, None (close the connection) when it fails, as Kafka does."""
    if login(session, frame) is not None:
        return None
    return struct.pack(">i", 0)


def login(session: Session, token: bytes) -> str | None:
    """Log the session in with a PLAIN token: None when it succeeded, else the message."""
    session.sasl_stage = None
    try:
        user = auth.login_plain(
            session.broker.cluster, bytes(token), session.address, session.limits.logins
        )
    except auth.AuthenticationFailed as exc:
        log.info("SASL/PLAIN login from %s refused: %s", session.peer, exc)
        return str(exc)
    if not session.limits.add_user(user.name):
        limit = session.limits.max_connections_per_user
        log.info(
            "SASL/PLAIN login from %s refused: %s has %d connections",
            session.peer,
            user.name,
            limit,
        )
        return f"{user.name} has {limit} connections already (max_connections_per_user)"
    session.broker = session.broker.as_principal(user.principal)
    session.user = user
    session.authenticated = True
    log.info("SASL/PLAIN login from %s as %s", session.peer, user.name)
    return None


def _response(error: int, message: str | None) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=error, error_message=message, auth_bytes=b"", session_lifetime_ms=0
    )
