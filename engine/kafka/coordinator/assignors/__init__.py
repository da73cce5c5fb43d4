"""The partition assignors a program names in `partition_assignment_strategy`, by
kafka-python's module paths (`.range`, `.roundrobin`, `.sticky.sticky_assignor`).

They are names only: the engine's group coordinator assigns, by range or round-robin.
"""

from __future__ import annotations

from typing import Any

from engine.groups.assignors import first_implemented
from engine.kafka.errors import KafkaConfigurationError


def engine_strategy(value: Any) -> str:
    """The engine's strategy for kafka-python's `partition_assignment_strategy` (a list of
    assignor classes, instances or names): the first of the list that the engine
    implements (engine.groups.assignors holds the names)."""
    found = first_implemented(value)
    if found is None:
        raise KafkaConfigurationError(
            f"partition_assignment_strategy {value!r} names no strategy this engine implements "
            "(RangePartitionAssignor, RoundRobinPartitionAssignor)"
        )
    return found
