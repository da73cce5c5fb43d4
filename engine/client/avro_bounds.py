"""Bounds on the work Avro costs the registry (issue 23): decoding a payload and checking
a new schema's compatibility must not cost more than a small multiple of its size.

Decoding: a payload's arrays and maps say how many items follow. Where an item takes at
least one byte, the payload's length bounds them; where it takes none (`null`, a `fixed`
of size 0, a record of such fields), ten bytes could claim 2^63 items (`array<null>`
decoded to 150 MB). `check_items` walks such payloads before fastavro decodes them and
refuses more than MAX_DECODED_ITEMS items; `needs_item_check` says which schemas need it.

Compatibility: fastavro's `generate_many` makes arrays and maps of ten items at every
level and a `fixed` at its full size (arrays six deep made a million values a sample;
a `fixed` of 50,000,000 a gigabyte). `samples` makes small ones (zero to two items; the
smallest value past half the depth or half the budget) within SAMPLE_BUDGET values and
bytes, else raises TooLarge."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

MAX_DECODED_ITEMS = 1_000_000  # array items and map entries one decoded value may have
SAMPLE_BUDGET = 100_000  # values and bytes one compatibility sample may hold
_SAMPLE_DEPTH = 24  # past half of it, arrays and maps are empty and unions pick a leaf
_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))


class TooLarge(ValueError):
    """More items, values or depth than the bound allows."""


def _kind(schema: Any) -> str:
    from fastavro.schema import extract_record_type

    return str(extract_record_type(schema))


def named_types(parsed: Any, extra: dict[str, Any]) -> dict[str, Any]:
    """Every named type a parsed schema may refer to by name."""
    found = dict(extra)
    if isinstance(parsed, dict):
        found.update(parsed.get("__named_schemas") or {})
    return found


def _zero_width(schema: Any, named: dict[str, Any], seen: frozenset[str] = frozenset()) -> bool:
    """Whether a value of `schema` takes no bytes at all."""
    kind = _kind(schema)
    if kind == "null":
        return True
    if kind == "fixed":
        return bool(schema["size"] == 0)
    if kind in ("record", "error"):
        return all(_zero_width(f["type"], named, seen) for f in schema["fields"])
    if kind in named and kind not in seen:
        return _zero_width(named[kind], named, seen | {kind})
    return False


def needs_item_check(schema: Any, named: dict[str, Any]) -> bool:
    """Whether some array or map of `schema` has items that take no bytes."""
    stack, seen = [schema], set()
    while stack:
        node = stack.pop()
        kind = _kind(node)
        if kind == "array":
            if _zero_width(node["items"], named):
                return True
            stack.append(node["items"])
        elif kind == "map":
            if _zero_width(node["values"], named):
                return True
            stack.append(node["values"])
        elif kind in ("union", "error_union"):
            stack.extend(node)
        elif kind in ("record", "error"):
            stack.extend(f["type"] for f in node["fields"])
        elif kind in named and kind not in seen:
            seen.add(kind)
            stack.append(named[kind])
    return False


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at, self.items = data, 0, 0

    def skip(self, n: int) -> None:
        if n < 0 or self.at + n > len(self.data):
            raise ValueError("the payload ends inside a value")
        self.at += n

    def long(self) -> int:
        value = shift = 0
        while True:
            if self.at >= len(self.data) or shift > 63:
                raise ValueError("a damaged varint")
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (value >> 1) ^ -(value & 1)
            shift += 7

    def count(self, n: int) -> None:
        self.items += n
        if self.items > MAX_DECODED_ITEMS:
            raise TooLarge(
                f"the value has more than {MAX_DECODED_ITEMS:,} array items or map entries"
            )


def check_items(schema: Any, named: dict[str, Any], payload: bytes) -> None:
    """TooLarge when decoding `payload` with `schema` would make more than
    MAX_DECODED_ITEMS array items and map entries; ValueError when it is damaged."""
    _walk(schema, named, _Reader(payload), 0)


def _walk(schema: Any, named: dict[str, Any], r: _Reader, depth: int) -> None:
    if depth > 200:
        raise TooLarge("the value nests too deep")
    kind = _kind(schema)
    if kind == "null":
        return
    if kind == "boolean":
        r.skip(1)
    elif kind in ("int", "long", "enum"):
        r.long()
    elif kind == "float":
        r.skip(4)
    elif kind == "double":
        r.skip(8)
    elif kind in ("bytes", "string"):
        r.skip(r.long())
    elif kind == "fixed":
        r.skip(schema["size"])
    elif kind in ("array", "map"):
        items = schema["items"] if kind == "array" else schema["values"]
        zero = _zero_width(items, named)
        while n := r.long():
            if n < 0:
                n = -n
                r.long()  # the block's size in bytes
            r.count(n)
            if zero and kind == "array":
                continue  # nothing to read for these items
            for _ in range(n):
                if kind == "map":
                    r.skip(r.long())
                _walk(items, named, r, depth + 1)
    elif kind in ("union", "error_union"):
        index = r.long()
        if not 0 <= index < len(schema):
            raise ValueError(f"union index {index} out of range")
        _walk(schema[index], named, r, depth + 1)
    elif kind in ("record", "error"):
        for field in schema["fields"]:
            _walk(field["type"], named, r, depth + 1)
    elif kind in named:
        _walk(named[kind], named, r, depth + 1)
    else:
        raise ValueError(f"unknown Avro type {kind!r}")


def samples(schema: Any, named: dict[str, Any], count: int) -> Iterator[Any]:
    """`count` random values of `schema`, each within SAMPLE_BUDGET; TooLarge when a
    value cannot be made that small."""
    for _ in range(count):
        yield _sample(schema, named, [SAMPLE_BUDGET], 0)


def _sample(schema: Any, named: dict[str, Any], budget: list[int], depth: int) -> Any:
    from fastavro.utils import gen_data

    budget[0] -= 1
    if budget[0] < 0 or depth > _SAMPLE_DEPTH:
        raise TooLarge(
            f"its sample records would pass {SAMPLE_BUDGET:,} values and bytes or nest "
            f"past {_SAMPLE_DEPTH} levels"
        )
    # deep down, or once half the budget is spent, make the smallest value that fits
    shallow = depth < _SAMPLE_DEPTH // 2 and budget[0] > SAMPLE_BUDGET // 2
    kind = _kind(schema)
    if kind == "array":
        n = random.randint(0, 2) if shallow else 0
        return [_sample(schema["items"], named, budget, depth + 1) for _ in range(n)]
    if kind == "map":
        n = random.randint(0, 2) if shallow else 0
        return {f"k{i}": _sample(schema["values"], named, budget, depth + 1) for i in range(n)}
    if kind in ("union", "error_union"):
        leaves = [s for s in schema if _kind(s) in _PRIMITIVES]
        branch = random.choice(schema if shallow or not leaves else leaves)
        return _sample(branch, named, budget, depth + 1)
    if kind in ("record", "error"):
        return {f["name"]: _sample(f["type"], named, budget, depth + 1) for f in schema["fields"]}
    if kind == "fixed":
        budget[0] -= schema["size"]
        if budget[0] < 0:
            raise TooLarge(f"a fixed of {schema['size']:,} bytes is past {SAMPLE_BUDGET:,} bytes")
    elif kind not in _PRIMITIVES and kind != "enum" and kind in named:
        return _sample(named[kind], named, budget, depth + 1)
    return gen_data(schema, named)
