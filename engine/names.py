"""Stream paths and topic names: validation and resolution of full names.

Rules (DESIGN, "Topic names"): a stream path is `/` followed by one or more segments of
`[A-Za-z0-9._-]`, none of them `.` or `..`, at most 1,024 characters in all; a topic name
is 1 to 249 characters of `[A-Za-z0-9._-]`, not `.` or `..`; a full name is
`/stream/path:topic`. The whole string must match. Anything else raises `InvalidName`;
nothing is ever silently changed.
"""

from __future__ import annotations

import re

from engine.errors import InvalidName

MAX_TOPIC_NAME = 249
# A stream path is shown on every listing and carried in every full topic name: a bound
# keeps one hostile name from making every page of the console megabytes long.
MAX_STREAM_PATH = 1024

# \Z, not $: `$` would accept a trailing newline.
_SEGMENT = r"[A-Za-z0-9._-]+"
_STREAM_RE = re.compile(rf"(?:/{_SEGMENT})+\Z")
_TOPIC_RE = re.compile(r"[A-Za-z0-9._-]{1,249}\Z")


def validate_stream_path(path: object) -> str:
    if not isinstance(path, str):
        raise InvalidName(f"stream path must be a string, not {type(path).__name__}")
    if len(path) > MAX_STREAM_PATH:  # before the regex: no scan of a huge string
        raise InvalidName(
            f"invalid stream path {path[:40]!r}...: {len(path):,} characters, at most "
            f"{MAX_STREAM_PATH:,} are allowed"
        )
    if not _STREAM_RE.match(path):
        raise InvalidName(
            f"invalid stream path {path!r}: expected '/' followed by segments of "
            "letters, digits, '.', '_' or '-' separated by '/', such as '/apps/sensors'"
        )
    for segment in path.split("/")[1:]:
        if segment in (".", ".."):
            raise InvalidName(f"invalid stream path {path!r}: a segment may not be '.' or '..'")
    return path


def validate_topic_name(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidName(f"topic name must be a string, not {type(name).__name__}")
    if not _TOPIC_RE.match(name) or name in (".", ".."):
        if len(name) > MAX_TOPIC_NAME:
            raise InvalidName(
                f"invalid topic name {name[:40]!r}...: {len(name)} characters, "
                f"at most {MAX_TOPIC_NAME} are allowed"
            )
        raise InvalidName(
            f"invalid topic name {name!r}: use 1 to {MAX_TOPIC_NAME} letters, digits, "
            "'.', '_' or '-' (not '.' or '..')"
        )
    return name


def split_full_name(full: object) -> tuple[str, str]:
    """`'/apps/sensors:car-17'` -> `('/apps/sensors', 'car-17')`, validated."""
    if not isinstance(full, str):
        raise InvalidName(f"topic name must be a string, not {type(full).__name__}")
    # at the first ':': neither part may hold one, so '/a:b:c' is refused for its topic
    # name 'b:c', not for a stream path '/a:b'
    stream, sep, topic = full.partition(":")
    if not sep or not full.startswith("/"):
        raise InvalidName(
            f"invalid full topic name {full!r}: expected '/stream/path:topic', "
            "such as '/apps/sensors:car-17'"
        )
    return validate_stream_path(stream), validate_topic_name(topic)


def resolve(name: object, default_stream: str | None = None) -> str:
    """The full name of `name`: itself if it starts with '/', else joined to `default_stream`."""
    if not isinstance(name, str):
        raise InvalidName(f"topic name must be a string, not {type(name).__name__}")
    if name.startswith("/"):
        split_full_name(name)
        return name
    if default_stream is None:
        raise InvalidName(
            f"topic {name!r} is not a full name ('/stream:topic') and no default stream is set"
        )
    validate_topic_name(name)
    return f"{validate_stream_path(default_stream)}:{name}"


def full_name(stream: str, topic: str) -> str:
    return f"{stream}:{topic}"
