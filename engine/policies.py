"""Stream policies: their names, defaults and validation (DESIGN, "Stream policies").

A stream stores all of them; `validate(...)` returns a complete, checked dict or raises
`InvalidPolicy` naming the policy and the accepted values. ACE policies are stored as
text here; their grammar is checked by `engine.acl` when it is present.
"""

from __future__ import annotations

from typing import Any

from engine.errors import InvalidPolicy

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


def _int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        else:
            raise InvalidPolicy(f"policy {name!r} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise InvalidPolicy(f"policy {name!r} must be {bound}, got {value}")
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
        return _int(name, value, 0)
    if name == "default_partitions":
        return _int(name, value, 1, MAX_PARTITIONS)
    if name in ("auto_create", "compact"):
        return _bool(name, value)
    if name in ("min_compaction_lag_ms", "delete_retention_ms"):
        return _int(name, value, 0)
    if name == "timestamp_type":
        if value not in TIMESTAMP_TYPES:
            raise InvalidPolicy(
                f"policy 'timestamp_type' must be 'create' or 'log_append', got {value!r}"
            )
        return value
    if name == "max_message_bytes":
        return _int(name, value, 1, MAX_MESSAGE_BYTES)
    if name in ACE_POLICIES:
        if not isinstance(value, str) or not value.strip():
            raise InvalidPolicy(f"policy {name!r} must be a non-empty ACE, got {value!r}")
        try:
            from engine import acl  # the grammar lives with the checks
        except ImportError:  # pragma: no cover - acl arrives with the ACE issue
            return value
        acl.parse(value, policy=name)
        return value
    raise InvalidPolicy(f"unknown policy {name!r}; known policies: {', '.join(sorted(DEFAULTS))}")


def validate(policies: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """`base` (defaults when None) updated with `policies`, every value checked."""
    result = dict(DEFAULTS if base is None else base)
    for name, value in policies.items():
        result[name] = _check(name, value)
    return result
