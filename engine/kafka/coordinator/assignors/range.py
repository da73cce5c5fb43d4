"""kafka-python's `RangePartitionAssignor`: each member gets a contiguous range of each
topic's partitions (the engine's "range" strategy)."""


class RangePartitionAssignor:
    name = "range"
    version = 0
