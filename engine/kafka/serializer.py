"""Serializers as kafka-python takes them (`kafka.serializer`), and the sizes it reports.

A producer's `key_serializer`/`value_serializer` (a consumer's `*_deserializer`) is either
a plain function of the value, or an object with `serialize(topic, value)`
(`deserialize(topic, data)`), such as a subclass of `Serializer` (`Deserializer`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Deserializer", "Serializer"]


class Serializer:
    """Turns a key or value into bytes, per topic; subclasses define `serialize`."""

    def __init__(self, **config: Any) -> None:
        """Takes the serializer's settings, as kafka-python's base class does."""

    def serialize(self, topic: str, value: Any) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        """Called when the client is done with it; nothing to release here."""


class Deserializer:
    """Turns the bytes of a key or value back into an object, per topic; subclasses define
    `deserialize`."""

    def __init__(self, **config: Any) -> None:
        """Takes the deserializer's settings, as kafka-python's base class does."""

    def deserialize(self, topic: str, data: bytes) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        """Called when the client is done with it; nothing to release here."""


def serialize(f: Any, topic: str, data: Any) -> Any:
    """`data` through the serializer `f` (None, a function or an object); None stays None."""
    if f is None or data is None:
        return data
    if hasattr(f, "serialize"):
        return f.serialize(topic, data)
    return f(data)


def deserialize(f: Any, topic: str, data: Any) -> Any:
    if f is None or data is None:
        return data
    if hasattr(f, "deserialize"):
        return f.deserialize(topic, data)
    return f(data)


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
