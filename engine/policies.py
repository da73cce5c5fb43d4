"""Stream policies: their names, defaults and validation (DESIGN, "Stream policies").

A stream stores all of them; `validate(...)` returns a complete, checked dict or raises
`InvalidPolicy` naming the policy and the accepted values. ACE policies are stored as
text here; their grammar is checked by `engine.auth.acl`.

The catalog runs `validate` on every policy set it stores (engine.storage.catalog), whoever sends
it (the API, the consoles, a replicating cluster). A catalog written before that may hold
bad values: `problem(stored)` says what is wrong with a stored set, so that maintenance
can skip such a stream and say so, and an edit can replace the bad values.
"""

from __future__ import annotations

import re
from typing import Any

from engine.auth import acl
from engine.errors import InvalidPolicy
from engine.storage.batch import MAX_TIMESTAMP_MS

ACE_POLICIES = ("produce_perm", "consume_perm", "topic_perm", "copy_perm", "admin_perm")
TIMESTAMP_TYPES = ("create", "log_append")

DEFAULTS: dict[str, Any] = {
    "ttl": 604800,
    "default_partitions": 1,
    "auto_create": True,
    "compact": False,
    "min_compaction_lag_ms": 0,
    "delete_retention_ms": 86400000,
    "timestamp_type": "create",
    "max_message_bytes": 1048576,
    **{name: "u:<creator>" for name in ACE_POLICIES},
}

# Upper bounds keep a typo (an extra zero or two) from becoming a policy nobody meant.
MAX_PARTITIONS = 10_000
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Times: a span in milliseconds may be as long as the range of a stored timestamp (1970 to
# the year 9999), so `now - span` stays a number every reader and SQLite can use.
MAX_SPAN_MS = MAX_TIMESTAMP_MS
MAX_TTL_S = MAX_SPAN_MS // 1000

# ASCII digits only (str.isdigit() also takes "²", which int() refuses), with room for the
# largest bound: a longer number is out of range without being converted at all.
_INT_TEXT = re.compile(r"[+-]?[0-9]{1,20}\Z")
_DIGITS = re.compile(r"[+-]?[0-9]+\Z")


def shown(value: Any) -> str:
    """`value` for a message: its repr, shortened (a value may be megabytes long)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a number of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _int(name: str, value: Any, low: int, high: int, far: str = "") -> int:
    """`value` as an int from `low` to `high` (a whole-number string is taken too); `far`
    names a bound no one should meet, stated apart so the usual one reads first."""
    bound = f"at least {low} (and at most {high:,}: {far})" if far else f"from {low} to {high}"
    if isinstance(value, bool) or not isinstance(value, int):
        text = value.strip() if isinstance(value, str) else None
        if text is not None and _INT_TEXT.match(text):
            value = int(text)
        elif text is not None and _DIGITS.match(text):
            raise InvalidPolicy(f"policy {name!r} must be {bound}, got {len(text):,} digits")
        else:
            raise InvalidPolicy(f"policy {name!r} must be an integer, got {shown(value)}")
    if not low <= value <= high:
        raise InvalidPolicy(f"policy {name!r} must be {bound}, got {shown(value)}")
    return value


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidPolicy(f"policy {name!r} must be true or false, got {value!r}")


def _check(name: str, value: Any) -> Any:
    if name == "ttl":
        return _int(name, value, 0, MAX_TTL_S, "the year 9999")
    if name == "default_partitions":
        return _int(name, value, 1, MAX_PARTITIONS)
    if name in ("auto_create", "compact"):
        return _bool(name, value)
    if name in ("min_compaction_lag_ms", "delete_retention_ms"):
        return _int(name, value, 0, MAX_SPAN_MS, "the year 9999")
    if name == "timestamp_type":
        if not isinstance(value, str) or value not in TIMESTAMP_TYPES:
            raise InvalidPolicy(
                f"policy 'timestamp_type' must be 'create' or 'log_append', got {shown(value)}"
            )
        return value
    if name == "max_message_bytes":
        return _int(name, value, 1, MAX_MESSAGE_BYTES)
    if name in ACE_POLICIES:
        if not isinstance(value, str) or not value.strip():
            raise InvalidPolicy(f"policy {name!r} must be a non-empty ACE, got {shown(value)}")
        acl.parse(value, policy=name)
        return value
    raise InvalidPolicy(
        f"unknown policy {shown(name)}; known policies: {', '.join(sorted(DEFAULTS))}"
    )


def validate(policies: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """`base` (defaults when None) updated with `policies`, every value of `policies`
    checked. `base`, a stored set, is taken as it is, but for names this engine does not
    know (dropped: nothing here could honour them) and names it lacks (their defaults);
    the catalog checks the whole result before storing it."""
    if not isinstance(policies, dict):
        raise InvalidPolicy(f"policies must be a mapping of names to values, not {shown(policies)}")
    result = dict(DEFAULTS)
    if base is not None:
        result.update((k, v) for k, v in base.items() if k in DEFAULTS)
    for name, value in policies.items():
        result[name] = _check(name, value)
    return result


def _stored(stored: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(the complete checked set, None) of a stored policy set, or (None, what is wrong).
    Names this engine does not know are ignored, as `validate` ignores them in `base`."""
    if not isinstance(stored, dict):
        return None, f"the stored policies are {shown(stored)}, not a mapping"
    result = dict(DEFAULTS)
    found = []
    for name, value in stored.items():
        if name in DEFAULTS:
            try:
                result[name] = _check(name, value)
            except InvalidPolicy as exc:
                found.append(str(exc))
    if found:
        return None, "; ".join(found)
    return result, None


def problem(stored: Any) -> str | None:
    """What is wrong with a stored policy set (every bad value), or None if nothing."""
    return _stored(stored)[1]


def check_stored(path: str, stored: Any) -> dict[str, Any]:
    """The policies of stream `path` as the catalog holds them, complete and checked (as
    `validate` returns them); `InvalidPolicy` saying which is bad and what to do when one
    is (a catalog written before policies were checked on every write may hold anything)."""
    checked, found = _stored(stored)
    if checked is None:
        raise InvalidPolicy(
            f"stream {path} has an invalid stored policy ({found}); an administrator of "
            "the stream must edit it to a valid value"
        )
    return checked
