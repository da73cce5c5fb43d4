"""The partition assignors a program names in `partition_assignment_strategy`, by
kafka-python's module paths (`.range`, `.roundrobin`, `.sticky.sticky_assignor`).

They are names only: the engine's group coordinator assigns, by range or round-robin.
"""

from __future__ import annotations

from typing import Any

from engine.kafka.errors import KafkaConfigurationError

_ENGINE_STRATEGIES = {
    "range": "range",
    "RangePartitionAssignor": "range",
    "roundrobin": "roundrobin",
    "round_robin": "roundrobin",
    "RoundRobinPartitionAssignor": "roundrobin",
}


def engine_strategy(value: Any) -> str:
    """The engine's strategy for kafka-python's `partition_assignment_strategy` (a list of
    assignor classes, instances or names): the first of the list that the engine
    implements."""
    items = value if isinstance(value, list | tuple) else [value]
    for item in items:
        name = getattr(item, "name", None) or getattr(item, "__name__", None) or item
        if isinstance(name, str) and name in _ENGINE_STRATEGIES:
            return _ENGINE_STRATEGIES[name]
    raise KafkaConfigurationError(
        f"partition_assignment_strategy {value!r} names no strategy this engine implements "
        "(RangePartitionAssignor, RoundRobinPartitionAssignor)"
    )
