"""Serializers as kafka-python takes them (`kafka.serializer`), and the sizes it reports.

A producer's `key_serializer`/`value_serializer` (a consumer's `*_deserializer`) is one of:

- an object whose `serialize(topic, headers, data)` (`deserialize(topic, headers, data)`)
  takes the record's headers too, as kafka-python 3.0 calls it (`DefaultSerializer`,
  `JsonSerializer`, subclasses of `Serializer`/`Deserializer` written for 3.0);
- an object whose `serialize(topic, data)` (`deserialize(topic, data)`) has no headers
  argument, as kafka-python 2.0 called it;
- a plain function of the value.

Which of the two method forms an object has is read once from its signature, when the
client is made, rather than by retrying a call that raised TypeError: a serializer's own
TypeError must reach the program.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

__all__ = [
    "DefaultSerializer",
    "DeserializeWrapper",
    "Deserializer",
    "JsonSerializer",
    "SerializeWrapper",
    "Serializer",
]

# (topic, headers, data) -> data
Codec = Callable[[str, Any, Any], Any]


class Serializer:
    """Turns a key or value into bytes, per topic; subclasses define
    `serialize(topic, headers, data)` (or 2.0's `serialize(topic, data)`)."""

    def __init__(self, **config: Any) -> None:
        """Takes the serializer's settings, as kafka-python 2.0's base class did."""

    def serialize(self, topic: str, headers: Any, data: Any) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        """Called when the client is done with it; nothing to release here."""


class Deserializer:
    """Turns the bytes of a key or value back into an object, per topic; subclasses define
    `deserialize(topic, headers, data)` (or 2.0's `deserialize(topic, data)`)."""

    def __init__(self, **config: Any) -> None:
        """Takes the deserializer's settings, as kafka-python 2.0's base class did."""

    def deserialize(self, topic: str, headers: Any, data: Any) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        """Called when the client is done with it; nothing to release here."""


class DefaultSerializer(Serializer, Deserializer):
    """Text in `encoding` (UTF-8 unless given) to bytes and back; bytes and None pass
    through unchanged on the way in."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def serialize(self, topic: str, headers: Any, data: Any) -> Any:
        if data is None or isinstance(data, bytes | bytearray | memoryview):
            return data
        return data.encode(self.encoding)

    def deserialize(self, topic: str, headers: Any, data: Any) -> Any:
        return None if data is None else bytes(data).decode(self.encoding)


class JsonSerializer(DefaultSerializer):
    """Any JSON-encodable object as JSON text in `encoding`, and back."""

    def serialize(self, topic: str, headers: Any, data: Any) -> Any:
        if data is None:
            return None
        return super().serialize(topic, headers, json.dumps(data))

    def deserialize(self, topic: str, headers: Any, data: Any) -> Any:
        if data is None:
            return None
        return json.loads(super().deserialize(topic, headers, data))


class SerializeWrapper(Serializer):
    """A function of the value, seen as a `Serializer` (None: bytes pass through)."""

    def __init__(self, fn: Callable[[Any], Any] | None) -> None:
        self.fn = fn

    def serialize(self, topic: str, headers: Any, data: Any) -> Any:
        return data if self.fn is None else self.fn(data)


class DeserializeWrapper(Deserializer):
    """A function of the bytes, seen as a `Deserializer` (None: bytes pass through)."""

    def __init__(self, fn: Callable[[Any], Any] | None) -> None:
        self.fn = fn

    def deserialize(self, topic: str, headers: Any, data: Any) -> Any:
        return data if self.fn is None else self.fn(data)


def _takes_headers(method: Callable[..., Any]) -> bool:
    """Whether a bound `serialize`/`deserialize` takes (topic, headers, data), 3.0's form,
    rather than 2.0's (topic, data)."""
    try:
        params = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return True  # a builtin without a signature: assume the current form
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3


def codec(f: Any, method: str) -> Codec | None:
    """`f` (None, a function, or an object with `method`) as one (topic, headers, data)
    function; None when there is nothing to call."""
    if f is None:
        return None
    bound = getattr(f, method, None)
    if bound is None:
        if not callable(f):
            raise TypeError(f"a {method[:-1]}r must be callable or have .{method}(), got {f!r}")
        return lambda topic, headers, data: f(data)
    if _takes_headers(bound):
        three: Codec = bound  # (topic, headers, data) already
        return three
    return lambda topic, headers, data: bound(topic, data)


def close_codec(f: Any) -> None:
    """Close a serializer object when the client closes, as kafka-python does."""
    close = getattr(f, "close", None)
    if callable(close) and not inspect.isfunction(f):
        close()


def header_size(headers: Any) -> int:
    """kafka-python's `serialized_header_size`: the bytes of header names and values, -1
    when there are no headers."""
    if not headers:
        return -1
    total = 0
    for name, value in headers:
        total += len(name.encode()) if isinstance(name, str) else 0
        total += len(value) if isinstance(value, bytes | bytearray) else 0
    return total
