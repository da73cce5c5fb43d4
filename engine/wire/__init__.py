"""The Kafka wire protocol listener: unchanged Kafka clients produce to and fetch from a
cluster (docs/WIRE.md).

Layout: `server` (the listener and its threads), `connection` (framing, dispatch, order),
`codec` (kafka-python's protocol and record modules, used server-side), `registry` (api key
-> handler and versions), `broker` (state the connections share), `codes` (Kafka error
codes), and `handlers/` with one module per API family.
"""

from __future__ import annotations

from engine.wire.server import DEFAULT_MAX_FRAME_BYTES, KafkaServer

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "KafkaServer"]
