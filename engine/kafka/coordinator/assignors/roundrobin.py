"""kafka-python's `RoundRobinPartitionAssignor`: the partitions of all subscribed topics
dealt to the members in turn (the engine's "roundrobin" strategy)."""


class RoundRobinPartitionAssignor:
    name = "roundrobin"
    version = 0
