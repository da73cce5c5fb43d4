"""The Kafka wire protocol listener: unchanged Kafka clients produce to and fetch from a
cluster (docs/WIRE.md).

Layout: `server` (the listener and its threads), `connection` (framing, dispatch, order),
`codec` (kafka-python's protocol and record modules, used server-side), `registry` (api key
-> handler and versions), `broker` (state the connections share), `codes` (Kafka error
codes), `limits` (what one client may hold) and `handlers/` with one module per API family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.wire.server import DEFAULT_MAX_FRAME_BYTES, KafkaServer

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "KafkaServer"]


def __getattr__(name: str) -> Any:
    # imported on first use: the CLI reads the defaults of engine.wire.limits at start-up,
    # and the codec's libraries take most of a second to load
    if name in __all__:
        from engine.wire import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
