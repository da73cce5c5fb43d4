"""Stream policies: one table of their names, types, defaults, bounds, labels and help
(DESIGN, "Stream policies"), and their validation, which reads its bounds from that table.

`POLICIES` is the table every frontend builds its form or options from (the web and
terminal consoles' policy forms, `plet stream create/edit`), so a label, a help text or a
bound is written once: `policy(name)` looks one up, `cli_help(name)` is its command-line
help. A stream stores all of them; `validate(...)` returns a complete, checked dict or
raises `InvalidPolicy` naming the policy and the accepted values. ACE policies are stored
as text here; their grammar is checked by `engine.auth.acl`, the `mask` policy's by
`engine.masking` (stored in its normal form).

A topic may override the policies marked `topic` (`TOPIC_POLICIES`): `validate_overrides`
checks a topic's own set, `effective` puts it over its stream's, and `check_stored` with
`overrides` gives a topic's effective set as stored.

The catalog runs `validate` on every policy set it stores (engine.storage.catalog), whoever sends
it (the API, the consoles, a replicating cluster). A catalog written before that may hold
bad values: `problem(stored)` says what is wrong with a stored set, so that maintenance
can skip such a stream and say so, and an edit can replace the bad values.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine import masking
from engine.auth import acl
from engine.errors import InvalidPolicy
from engine.storage.batch import CODECS, MAX_TIMESTAMP_MS
from engine.times import NotADuration, format_duration_ms, parse_duration

# Upper bounds keep a typo (an extra zero or two) from becoming a policy nobody meant.
MAX_PARTITIONS = 10_000
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_RETENTION_BYTES = 2**60
# Times: a span in milliseconds may be as long as the range of a stored timestamp (1970 to
# the year 9999), so `now - span` stays a number every reader and SQLite can use.
MAX_SPAN_MS = MAX_TIMESTAMP_MS
MAX_TTL_S = MAX_SPAN_MS // 1000
TIMESTAMP_TYPES = ("create", "log_append")
_YEAR_9999 = "the year 9999"
DURATION_EXAMPLES = "2d, 12h, 90m, 1h30m, 45s or 500ms"


@dataclass(frozen=True)
class Policy:
    """One stream policy. `type` is int, bool or str; an int has `min` and `max` (`far`,
    when set, says why `max` is a bound no one should meet, so forms and errors state the
    usual bound first); a str has `choices`, or is an ACE (`ace`)."""

    name: str
    type: type
    default: Any
    label: str
    help: str
    min: int | None = None
    max: int | None = None
    far: str = ""
    choices: tuple[str, ...] = ()
    ace: bool = False
    uri: bool = False  # a str checked as an archive URI (engine.storage.archive)
    mask: bool = False  # a str checked as a data mask (engine.masking)
    metavar: str = ""  # the value's name on the command line: SECONDS, MS, N, BYTES, ACE
    topic: bool = False  # a topic may override it (DESIGN, "Stream policies")
    # a duration: its unit in milliseconds (1,000: seconds; 1: ms), and text with units
    # ("2d", "90m", "500ms", engine.times.parse_duration) is taken too; 0: not a duration
    unit_ms: int = 0

    @property
    def kind(self) -> str:
        """Which control a form shows: "bool", "int", "choice", "ace" or "text" (a URI)."""
        if self.ace:
            return "ace"
        if self.uri or self.mask:
            return "text"
        if self.choices:
            return "choice"
        return self.type.__name__

    @property
    def option(self) -> str:
        """The command-line option: `--default-partitions` (a bool's is `--x/--no-x`)."""
        return "--" + self.name.replace("_", "-")

    @property
    def bounds(self) -> str:
        """The accepted values in words ("A whole number from 1 to 10,000."), '' when a
        control shows them itself (a checkbox, a list of choices) or a grammar states them
        (ACEs)."""
        if self.type is not int:
            return ""
        if self.far:
            text = f"A whole number, {self.min:,} or more."
        else:
            text = f"A whole number from {self.min:,} to {self.max:,}."
        if self.unit_ms:
            text += f" Or a duration: {DURATION_EXAMPLES}."
        return text

    @property
    def hint(self) -> str:
        """The help with the accepted values, as every form shows it next to the field."""
        return f"{self.help} {self.bounds}" if self.bounds else self.help

    def text(self, value: Any) -> str:
        """`value` as every form shows it, text that `validate` reads back to the same
        value: a duration as the lists show one, in the largest unit that holds it whole
        ("7 d", "90 min", "1,500 ms"; 0 is "0"), a bool "true" or "false", else as it is."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if self.unit_ms and isinstance(value, int):
            return format_duration_ms(value * self.unit_ms, zero="0")
        return str(value)

    @property
    def default_text(self) -> str:
        if self.type is bool:
            return "on" if self.default else "off"
        return str(self.default)


def _ace(name: str, label: str, who_may: str) -> Policy:
    return Policy(
        name, str, "u:<creator>", label, f"ACE: who may {who_may}.", ace=True, metavar="ACE"
    )


# The table, in the order forms show it.
POLICIES: tuple[Policy, ...] = (
    Policy(
        "ttl",
        int,
        604800,
        "TTL (seconds)",
        "Seconds a message is kept, counted from its timestamp; 0 keeps forever.",
        min=0,
        max=MAX_TTL_S,
        far=_YEAR_9999,
        metavar="SECONDS",
        topic=True,
        unit_ms=1000,
    ),
    Policy(
        "default_partitions",
        int,
        1,
        "Default partitions",
        "Partitions of a topic created on its first produce.",
        min=1,
        max=MAX_PARTITIONS,
        metavar="N",
    ),
    Policy("auto_create", bool, True, "Auto-create topics", "Create a topic on its first produce."),
    Policy(
        "compact",
        bool,
        False,
        "Compact",
        "Keep only the latest message per key when compacting.",
        topic=True,
    ),
    Policy(
        "min_compaction_lag_ms",
        int,
        0,
        "Min compaction lag (ms)",
        "Milliseconds after its timestamp before compaction may drop a message.",
        min=0,
        max=MAX_SPAN_MS,
        far=_YEAR_9999,
        metavar="MS",
        topic=True,
        unit_ms=1,
    ),
    Policy(
        "delete_retention_ms",
        int,
        86400000,
        "Delete retention (ms)",
        "Milliseconds a tombstone (a null value) is kept after compaction.",
        min=0,
        max=MAX_SPAN_MS,
        far=_YEAR_9999,
        metavar="MS",
        topic=True,
        unit_ms=1,
    ),
    Policy(
        "timestamp_type",
        str,
        "create",
        "Timestamp type",
        "Whose clock stamps a message: create, the producer's; log_append, the log's.",
        choices=TIMESTAMP_TYPES,
        metavar="|".join(TIMESTAMP_TYPES),
        topic=True,
    ),
    Policy(
        "max_message_bytes",
        int,
        1048576,
        "Max message bytes",
        "Largest record in bytes: key, value and headers together.",
        min=1,
        max=MAX_MESSAGE_BYTES,
        metavar="BYTES",
        topic=True,
    ),
    Policy(
        "retention_bytes",
        int,
        0,
        "Retention bytes",
        "Bytes a partition keeps (Kafka's retention.bytes): its oldest sealed "
        "partitionlets are removed while the rest would still hold this much; 0 keeps "
        "all.",
        min=0,
        max=MAX_RETENTION_BYTES,
        far="an exabyte",
        metavar="BYTES",
        topic=True,
    ),
    Policy(
        "compression",
        str,
        "none",
        "Compression",
        "How new batches are stored: none; zstd, smallest; lz4, fastest. Batches already "
        "stored keep theirs; every reader reads every batch.",
        choices=CODECS,
        metavar="|".join(CODECS),
        topic=True,
    ),
    Policy(
        "archive_after",
        int,
        0,
        "Archive after (seconds)",
        "Seconds after its newest message before a sealed partitionlet moves to the archive "
        "tier (one Parquet file, read like the rest); 0 never archives.",
        min=0,
        max=MAX_TTL_S,
        far=_YEAR_9999,
        metavar="SECONDS",
        topic=True,
        unit_ms=1000,
    ),
    Policy(
        "archive_uri",
        str,
        "",
        "Archive URI",
        "Where archived partitionlets go: empty, the cluster's archive/ folder; or a "
        "file://, s3://, gs:// or hdfs:// URI. Only a cluster administrator may set one.",
        uri=True,
        metavar="URI",
    ),
    Policy(
        "mask",
        str,
        "",
        "Masked fields",
        "What the consoles, the API, downloads and searches show as **** to a user without "
        "the unmask permission, comma-separated: key, value, value.FIELD (value.card.number; "
        "a value that is not JSON is masked whole) or headers.NAME; empty masks nothing.",
        mask=True,
        metavar="FIELDS",
    ),
    _ace("produce_perm", "Produce permission", "produce to the stream's topics"),
    _ace("consume_perm", "Consume permission", "consume from the stream's topics"),
    _ace(
        "unmask_perm",
        "Unmask permission",
        "see the fields of the mask policy unmasked in the consoles, the API, downloads and "
        "searches",
    ),
    _ace("topic_perm", "Topic permission", "create and delete the stream's topics"),
    _ace("copy_perm", "Copy permission", "replicate (copy) the whole stream to another cluster"),
    # What the engine checks admin_perm for (Cluster.edit_stream, delete_stream,
    # reset_offsets; replication's pause/resume/remove and tokens), said the same everywhere.
    _ace(
        "admin_perm",
        "Admin permission",
        "edit these policies, delete the stream, reset its groups' offsets and manage its "
        "replication links and tokens",
    ),
)
_BY_NAME = {p.name: p for p in POLICIES}

DEFAULTS: dict[str, Any] = {p.name: p.default for p in POLICIES}
ACE_POLICIES = tuple(p.name for p in POLICIES if p.ace)
# The policies a topic may override; ACEs, replication and what acts on a whole stream
# (its auto-created topics, where its archive goes) stay the stream's, as in MapR.
TOPIC_POLICIES = tuple(p.name for p in POLICIES if p.topic)


def policy(name: str) -> Policy:
    """The table's row of policy `name`; `InvalidPolicy` listing the known ones if none."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise InvalidPolicy(
            f"unknown policy {shown(name)}; known policies: {', '.join(sorted(DEFAULTS))}"
        ) from None


def form_text(name: str, value: Any) -> str:
    """Policy `name`'s `value` as a form shows it (`Policy.text`); a name this engine does
    not know, as it is."""
    row = _BY_NAME.get(name)
    return row.text(value) if row is not None else str(value)


def cli_help(name: str) -> str:
    """The help of policy `name`'s command-line option, with its default."""
    row = policy(name)
    return f"{row.hint} [default: {row.default_text}]"


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
    return int(value)  # an int already (not a bool): typed as one


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidPolicy(f"policy {name!r} must be true or false, got {value!r}")


def _check(name: str, value: Any) -> Any:
    row = policy(name)
    if row.type is bool:
        return _bool(name, value)
    if row.type is int:
        assert row.min is not None and row.max is not None
        if row.unit_ms and isinstance(value, str) and not _DIGITS.match(value.strip()):
            try:
                value = parse_duration(value, row.unit_ms)
            except NotADuration:
                units = "seconds" if row.unit_ms == 1_000 else "milliseconds"
                raise InvalidPolicy(
                    f"policy {name!r} must be an integer, got {shown(value)}: a number of "
                    f"{units}, or a duration ({DURATION_EXAMPLES})"
                ) from None
            except ValueError as exc:  # a unit it does not know, a fraction of its unit
                raise InvalidPolicy(f"policy {name!r}: {exc}") from None
        return _int(name, value, row.min, row.max, row.far)
    if row.choices:
        if not isinstance(value, str) or value not in row.choices:
            accepted = " or ".join(repr(c) for c in row.choices)
            raise InvalidPolicy(f"policy {name!r} must be {accepted}, got {shown(value)}")
        return value
    if row.uri:
        return _uri(name, value)
    if row.mask:
        return masking.normal(value)
    if not isinstance(value, str) or not value.strip():
        raise InvalidPolicy(f"policy {name!r} must be a non-empty ACE, got {shown(value)}")
    acl.parse(value, policy=name)
    return value


def _uri(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidPolicy(f"policy {name!r} must be a URI or empty, got {shown(value)}")
    if value.strip() == "":
        return ""
    problem = _uri_problem(value.strip())
    if problem is not None:
        raise InvalidPolicy(f"policy {name!r}: {problem}")
    return value.strip()


@functools.lru_cache(maxsize=256)
def _uri_problem(uri: str) -> str | None:
    """What is wrong with an archive URI, or None (stored sets are checked often, and
    pyarrow builds a file system to parse one: once per URI is enough)."""
    from engine.errors import InvalidArgument
    from engine.storage.archive import check_uri  # pyarrow: loaded when a URI is checked

    try:
        check_uri(uri)
    except InvalidArgument as exc:
        return str(exc)
    return None


def reaches_outside(name: str, old: Any, new: Any) -> bool:
    """Whether changing policy `name` from `old` to `new` makes the cluster write outside
    its directory (an archive URI): a cluster administrator's act (DESIGN, security)."""
    return policy(name).uri and bool(new) and new != old


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


def validate_overrides(
    changes: Mapping[str, Any], base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A topic's overrides: `base` (its stored ones) updated with `changes`, where None
    removes an override; each value checked as a stream's would be. `InvalidPolicy` for
    an unknown name or one a topic cannot override (saying where it is set instead)."""
    if not isinstance(changes, Mapping):
        raise InvalidPolicy(f"policies must be a mapping of names to values, not {shown(changes)}")
    result = {k: v for k, v in (base or {}).items() if k in TOPIC_POLICIES}
    for name, value in changes.items():
        row = policy(name)  # InvalidPolicy naming the known ones
        if not row.topic:
            kind = "an ACE" if row.ace else "a policy of the whole stream"
            raise InvalidPolicy(
                f"policy {name!r} is {kind}: set it on the stream, not on a topic (a topic "
                f"may override {', '.join(TOPIC_POLICIES)})"
            )
        if value is None:
            result.pop(name, None)
        else:
            result[name] = _check(name, value)
    return result


def effective(
    stream_policies: Mapping[str, Any], overrides: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A topic's policies: its stream's, with the topic's own overrides on top."""
    result = dict(stream_policies)
    if overrides:
        result.update((k, v) for k, v in overrides.items() if k in TOPIC_POLICIES)
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


def check_stored(
    path: str, stored: Any, overrides: Mapping[str, Any] | None = None, topic: str = ""
) -> dict[str, Any]:
    """The policies of stream `path` as the catalog holds them, complete and checked (as
    `validate` returns them), with a topic's stored `overrides` on top when given (the
    topic's effective policies; `topic` names it in errors); `InvalidPolicy` saying which
    is bad and what to do when one is (a catalog written before policies were checked on
    every write may hold anything)."""
    checked, found = _stored(stored)
    if checked is None:
        raise InvalidPolicy(
            f"stream {path} has an invalid stored policy ({found}); an administrator of "
            "the stream must edit it to a valid value"
        )
    if overrides:
        mine, found = stored_overrides(overrides)
        if mine is None:
            raise InvalidPolicy(
                f"topic {path}:{topic} has an invalid stored policy ({found}); edit the "
                "topic's override to a valid value"
            )
        checked.update(mine)
    return checked


def stored_overrides(stored: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(a topic's stored overrides, checked, None), or (None, what is wrong with them).
    Names a topic cannot override are ignored, as unknown names are in a stream's set."""
    if not isinstance(stored, Mapping):
        return None, f"the topic's stored policies are {shown(stored)}, not a mapping"
    mine, found = _stored(effective({}, stored))
    if mine is None:
        return None, found
    return {k: mine[k] for k in stored if k in TOPIC_POLICIES}, None


# Where a topic's policy comes from (`sources`), as the consoles and DescribeConfigs show it.
TOPIC, STREAM, DEFAULT = "topic", "stream", "default"


def sources(stream_policies: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, str]:
    """Where each of a topic's `TOPIC_POLICIES` comes from: TOPIC (its own override),
    STREAM (its stream's value, set away from the default) or DEFAULT."""
    out = {}
    for name in TOPIC_POLICIES:
        if name in overrides:
            out[name] = TOPIC
        elif stream_policies.get(name, DEFAULTS[name]) != DEFAULTS[name]:
            out[name] = STREAM
        else:
            out[name] = DEFAULT
    return out
