"""How a target is named (the same way in every call and in the catalog) and which
transport reaches it: a directory (`DirectoryTarget`) or the http(s) address of the
target's `plet web` (`HttpTarget`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from engine.auth.principal import Principal
from engine.errors import InvalidArgument
from engine.replication.directory import DirectoryTarget
from engine.replication.http import HttpTarget
from engine.replication.protocol import Target

_URL = re.compile(r"^https?://", re.IGNORECASE)


def is_url(target: str) -> bool:
    """Whether a target is an http(s) address (else it is a directory)."""
    return bool(_URL.match(target))


def normalize_target(target: str | os.PathLike[str]) -> str:
    """How a target is named in the catalog and in every call: an absolute directory path,
    or an http(s) address without a trailing slash and without a token (userinfo)."""
    return split_target(target)[0]


def split_target(target: str | os.PathLike[str]) -> tuple[str, str | None]:
    """(normalized target, token): an http(s) target may carry its link token as userinfo,
    `https://TOKEN@host:port`; the token is kept apart, never in the target's name."""
    text = os.fspath(target)
    if not isinstance(text, str) or not text:
        raise InvalidArgument(f"a replica target is a directory or an http(s) address: {target!r}")
    if "\x00" in text:  # no path or address holds one (and the OS refuses it)
        raise InvalidArgument(f"a replica target has no NUL character: {text!r}")
    if is_url(text):
        parts = urlsplit(text)
        if not parts.hostname:
            raise InvalidArgument(f"no host in replica target {text!r}")
        token = unquote(parts.username) if parts.username else None
        if parts.password:
            raise InvalidArgument("give a replica token as https://TOKEN@host, not user:password")
        netloc = parts.netloc.rpartition("@")[2]
        plain = urlunsplit((parts.scheme.lower(), netloc, parts.path, parts.query, ""))
        return plain.rstrip("/"), token
    return str(Path(text).expanduser().resolve()), None


def open_target(
    target: str,
    principal: Principal | None = None,
    *,
    sync: bool = False,
    token: str | None = None,
    retries: int | None = None,
) -> Target:
    """The transport for a normalized target: a directory, or an http(s) address served by
    the target's `plet web` (engine.replication.http), authenticated with `token` (each
    request retried up to `retries` times, default DEFAULT_RETRIES)."""
    if is_url(target):
        if not token:
            raise InvalidArgument(
                f"replication over HTTP to {target} needs a token: create one on the target "
                "(plet replica token STREAM) and give the target as http(s)://TOKEN@host:port"
            )
        if retries is None:
            return HttpTarget(target, token)
        return HttpTarget(target, token, retries=retries)
    return DirectoryTarget(target, principal, sync=sync)
