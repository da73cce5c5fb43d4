"""Who a wire client is: SASL/PLAIN and SCRAM logins against the console's users and API
tokens, the TLS context of the listener, and which addresses it may listen on (docs/WIRE.md,
Security).

A PLAIN login is either a console user's name and password (`cluster.authenticate`, so the
web console's login throttle and scrypt gate apply to the wire too), or an API token as the
password with, as the user name, the token owner's name or `TOKEN_USER`. Tokens are checked
as the web API checks its bearer tokens (`cluster.user_for_token`): a token carries 256
random bits, so it is not throttled, and a name that does not match its owner is refused.

A SCRAM login (SCRAM-SHA-256, SCRAM-SHA-512) is a console user's name and password, proved
against the credentials stored with the password (engine.auth.scram, engine.auth.logins'
`ScramLogin`); API tokens have none (Kafka's delegation tokens are not served).
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine import errors
from engine.auth import logins, scram

if TYPE_CHECKING:
    from engine.auth.users import UserInfo
    from engine.cluster import Cluster

log = logging.getLogger(__name__)

SCRAM_MECHANISMS = tuple(scram.MECHANISMS)
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
# The user name that says "the password is an API token, whoever owns it". A console user
# of this name logs in over the wire with a token only: a wrong token with it is not
# counted against the name, so nobody can lock every token login out by guessing.
TOKEN_USER = "token"
# What every API token starts with (engine.auth.users.create_api_token).
_TOKEN_PREFIX = "plet_"
# Kafka's own words for a wrong name or password: they tell nothing of which one was wrong.
_FAILED = "Authentication failed: Invalid username or password"


class AuthenticationFailed(Exception):
    """A login was refused; the message is what the client is told."""


def mechanisms(sasl: bool, sasl_mechanisms: Iterable[str] | None) -> tuple[str, ...]:
    """The mechanisms a listener offers: `sasl_mechanisms` when given, every supported one
    for `sasl=True`, none otherwise (no authentication)."""
    if sasl_mechanisms is None:
        return SUPPORTED_MECHANISMS if sasl else ()
    if isinstance(sasl_mechanisms, str):
        sasl_mechanisms = (sasl_mechanisms,)
    chosen = tuple(dict.fromkeys(m.upper() for m in sasl_mechanisms))
    for mechanism in chosen:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise errors.InvalidArgument(
                f"SASL mechanism {mechanism!r} is not supported; supported: "
                f"{', '.join(SUPPORTED_MECHANISMS)}"
            )
    return chosen


def parse_plain(token: bytes) -> tuple[str, str, str]:
    """(authorization id, user name, password) of a PLAIN token (RFC 4616:
    `[authzid] NUL authcid NUL passwd`); ValueError when it is not one."""
    parts = bytes(token).split(b"\x00")
    if len(parts) != 3:
        raise ValueError("a PLAIN token has three parts separated by NUL")
    authzid, name, password = (p.decode("utf-8") for p in parts)
    if not name or not password:
        raise ValueError("a PLAIN token needs a user name and a password")
    return authzid, name, password


def login_plain(
    cluster: Cluster, token: bytes, address: str, limiter: logins.LoginLimiter = logins.LIMITER
) -> UserInfo:
    """The user a PLAIN token logs in (see the module's docstring) from the client address
    `address`; AuthenticationFailed otherwise. Every attempt goes through `limiter`
    (engine.auth.logins: per address). Hashes a password: call it from a worker thread,
    never the event loop."""
    try:
        authzid, name, password = parse_plain(token)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AuthenticationFailed(f"Authentication failed: {exc}") from None
    if authzid and authzid != name:
        # Kafka's PLAIN server refuses acting for another identity too
        raise AuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different "
            "from username"
        )
    if password.startswith(_TOKEN_PREFIX):
        try:
            owner = logins.token_user(cluster, password, address, limiter)
        except (errors.TokenExpired, errors.LoginThrottled) as exc:
            raise AuthenticationFailed(f"Authentication failed: {exc}") from None
        if owner is not None:
            if name not in (owner.name, TOKEN_USER):
                raise AuthenticationFailed(_FAILED)
            return owner
    if name == TOKEN_USER:
        raise AuthenticationFailed(_FAILED)
    try:
        user = logins.login(cluster, name, password, address, limiter)
    except (errors.LoginThrottled, errors.Busy) as exc:
        raise AuthenticationFailed(f"Authentication failed: {exc}") from None
    if user is None:
        raise AuthenticationFailed(_FAILED)
    return user


def server_ssl_context(cert: str, key: str | None = None) -> ssl.SSLContext:
    """A server-side TLS context from a PEM certificate (chain) and its private key (in
    the same file when `key` is None); TLS 1.2 at least, no client certificates asked."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), None if key is None else str(key))
    except (OSError, ssl.SSLError) as exc:
        raise errors.InvalidArgument(
            f"cannot load the TLS certificate {cert} and key {key}: {exc}"
        ) from None
    return context


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, *, sasl: bool, tls: bool, insecure: bool) -> None:
    """Refuse a non-loopback address unless clients authenticate (SASL) over TLS, or the
    caller says `insecure`: without SASL every client would act as the cluster's principal,
    and PLAIN without TLS sends passwords and tokens in the clear."""
    if insecure or is_loopback(host) or (sasl and tls):
        return
    if sasl:
        why = "SASL/PLAIN without TLS sends passwords and tokens in the clear"
        fix = "give a TLS certificate and key (plet serve --tls-cert, --tls-key)"
    else:
        why = "without authentication every client acts as the cluster's principal"
        fix = "turn SASL on (plet serve --sasl)" + ("" if tls else " with TLS")
    raise errors.InvalidArgument(
        f"refusing to listen on {host}: {why}; listen on a loopback address, {fix}, or "
        "pass insecure=True (plet serve --insecure)"
    )
