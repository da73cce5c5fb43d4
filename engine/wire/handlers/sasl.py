"""SaslHandshake and SaslAuthenticate: a connection logs in as a console user (PLAIN, or
SCRAM-SHA-256/512 in two round trips), and from then on acts as that user's principal
(engine.wire.auth, docs/WIRE.md Security).

The connection's SASL state lives in its `Session` (`sasl_mechanisms`, `authenticated`,
`sasl_stage`, `sasl_mechanism`, `scram`); the connection lets nothing but ApiVersions,
SaslHandshake and SaslAuthenticate through before the login. A refused login (a wrong
password or proof, a malformed message) is answered, then the connection is closed
(`session.close_after`), as Kafka does.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from engine.auth import logins
from engine.wire import auth, codec, codes
from engine.wire.connection import Session
from engine.wire.registry import api

if TYPE_CHECKING:
    from engine.auth.users import UserInfo

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
    session.sasl_mechanism = request.mechanism
    return SaslHandshakeResponse(error_code=codes.NONE, mechanisms=offered)


@api(SaslAuthenticateRequest, SaslAuthenticateResponse, (0, 2))
def sasl_authenticate(
    session: Session, request: SaslAuthenticateRequest, version: int
) -> SaslAuthenticateResponse:
    if session.sasl_stage != FRAMED:
        session.close_after = bool(session.sasl_mechanisms)
        return _response(codes.ILLEGAL_SASL_STATE, "SaslAuthenticate needs SaslHandshake v1 first")
    answer, error = step(session, codec.decoded_bytes(request.auth_bytes) or b"")
    if error is not None:
        session.close_after = True
        return _response(codes.SASL_AUTHENTICATION_FAILED, error)
    return _response(codes.NONE, None, answer)


def raw_token(session: Session, frame: bytes) -> bytes | None:
    """The answer to a bare token after SaslHandshake v0, framed (an empty one when a
    PLAIN login succeeds; SCRAM's messages), None (close the connection) when the login
    fails, as Kafka does."""
    answer, error = step(session, frame)
    if error is not None:
        return None
    return struct.pack(">i", len(answer)) + answer


def step(session: Session, token: bytes) -> tuple[bytes, str | None]:
    """One client token of the chosen mechanism: (the server's token, None) while the login
    goes on or once it succeeded, (b"", the message) when it is refused."""
    mechanism = session.sasl_mechanism
    if mechanism is not None and mechanism in auth.SCRAM_MECHANISMS:
        return _scram_step(session, mechanism, bytes(token))
    return b"", login(session, token)


def _scram_step(session: Session, mechanism: str, token: bytes) -> tuple[bytes, str | None]:
    exchange = session.scram
    try:
        if exchange is None:
            exchange = logins.ScramLogin(
                session.broker.cluster, mechanism, session.address, session.limits.logins
            )
            answer = exchange.first(token)
            session.scram = exchange  # the next token is the client's proof
            return answer, None
        session.scram = None
        session.sasl_stage = None
        answer, user = exchange.final(token)
    except logins.ScramFailed as exc:
        session.scram = None
        session.sasl_stage = None
        log.info("SASL/%s login from %s refused: %s", mechanism, session.peer, exc)
        return b"", str(exc)
    error = _logged_in(session, user, mechanism)
    return (b"", error) if error is not None else (answer, None)


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
    return _logged_in(session, user, "PLAIN")


def _logged_in(session: Session, user: UserInfo, mechanism: str) -> str | None:
    """Make the session act as `user`: None, or the message when the user has all the
    connections they may have."""
    if not session.limits.add_user(user.name):
        limit = session.limits.max_connections_per_user
        log.info(
            "SASL/%s login from %s refused: %s has %d connections",
            mechanism,
            session.peer,
            user.name,
            limit,
        )
        return f"{user.name} has {limit} connections already (max_connections_per_user)"
    session.broker = session.broker.as_principal(user.principal)
    session.user = user
    session.authenticated = True
    log.info("SASL/%s login from %s as %s", mechanism, session.peer, user.name)
    return None


def _response(error: int, message: str | None, answer: bytes = b"") -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=error, error_message=message, auth_bytes=answer, session_lifetime_ms=0
    )
