"""kafka-python's `ConsumerRebalanceListener` (`kafka.consumer.subscription_state`), and
the adapter that hands it the engine's rebalance events with the program's topic names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.client.consumer import ConsumerRebalanceListener as _EngineListener
from engine.kafka.names import TopicNames
from engine.records import TopicPartition

__all__ = ["ConsumerRebalanceListener"]


class ConsumerRebalanceListener(_EngineListener):
    """Subclass it and pass it to `subscribe(listener=...)`; both methods receive a list of
    `TopicPartition`s named as the program wrote them."""


class ListenerAdapter:
    """Calls the program's listener with its own names for the engine's partitions."""

    def __init__(self, listener: Any, names: TopicNames) -> None:
        self._listener = listener
        self._names = names

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        self._listener.on_partitions_revoked(sorted(self._names.show_tp(tp) for tp in revoked))

    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self._listener.on_partitions_assigned(sorted(self._names.show_tp(tp) for tp in assigned))
