"""kafka-python's `StickyPartitionAssignor`, accepted by name in a list of strategies.
The engine does not assign stickily, so the list's next strategy (range or round-robin)
is used; one naming sticky alone is refused."""


class StickyPartitionAssignor:
    name = "sticky"
    version = 0
