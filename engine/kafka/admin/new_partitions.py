"""kafka-python's `NewPartitions` (`kafka.admin.new_partitions`)."""

from __future__ import annotations

__all__ = ["NewPartitions"]


class NewPartitions:
    """The new total partition count of a topic, for `create_partitions`."""

    def __init__(self, total_count: int, new_assignments: list[list[int]] | None = None):
        self.total_count = total_count
        self.new_assignments = new_assignments

    def __repr__(self) -> str:
        return f"NewPartitions(total_count={self.total_count})"
