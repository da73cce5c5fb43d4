"""The partition assignment strategies of engine consumer groups, and the one table of
the names programs give them (the engine's own, kafka-python's class and assignor names).

Engine consumers (`engine.Consumer(partition_assignment_strategy=...)`) and the facade
(`engine.kafka.KafkaConsumer`) read a strategy here. Kafka clients of a wire listener bring
their own client-side assignors (sticky, cooperative-sticky, ...): the wire coordinator
never reads their names.
"""

from __future__ import annotations

from engine.errors import InvalidArgument

TopicPart = tuple[int, int]  # (topic_id, partition)

STRATEGIES = ("range", "roundrobin")
# Every name a program may give a strategy: the union of what engine consumers and the
# facade accepted before they shared this table, so no program breaks.
ALIASES = {
    "range": "range",
    "RangeAssignor": "range",
    "RangePartitionAssignor": "range",
    "roundrobin": "roundrobin",
    "round_robin": "roundrobin",
    "RoundRobinAssignor": "roundrobin",
    "RoundRobinPartitionAssignor": "roundrobin",
}


def alias(item: object) -> str | None:
    """The strategy one assignor (a name, a class or an instance with `name`) stands for,
    or None when the engine implements no such strategy."""
    name = getattr(item, "name", None) or getattr(item, "__name__", None) or item
    return ALIASES.get(name) if isinstance(name, str) else None


def first_implemented(value: object) -> str | None:
    """The strategy of the first assignor of `value` (one, or a list) that the engine
    implements, as kafka-python's `partition_assignment_strategy` is read; None if none."""
    items = value if isinstance(value, list | tuple) else [value]
    for item in items:
        if (found := alias(item)) is not None:
            return found
    return None


def strategy_name(value: object) -> str:
    """'range' or 'roundrobin' from a name (or kafka-python assignor class/name); of a list,
    the first item, which must name one."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise InvalidArgument("partition_assignment_strategy must name a strategy")
        value = value[0]
    found = alias(value)
    if found is None:
        raise InvalidArgument(
            f"partition_assignment_strategy must be 'range' or 'roundrobin', got {value!r}"
        )
    return found


def assign(
    strategy: str, members: dict[str, list[int]], partitions: dict[int, int]
) -> dict[str, list[TopicPart]]:
    """Target assignment: member id -> [(topic_id, partition)].

    `members` maps each member to the topic ids it subscribes to; `partitions` gives each
    topic's partition count. Range splits each topic's partitions into contiguous runs
    over its subscribers (sorted by member id); round-robin deals all partitions, sorted,
    to the members that subscribe to each, in turn.
    """
    result: dict[str, list[TopicPart]] = {m: [] for m in members}
    if strategy == "range":
        for topic_id in sorted(partitions):
            subs = sorted(m for m, topics in members.items() if topic_id in topics)
            if not subs:
                continue
            count = partitions[topic_id]
            per, extra = divmod(count, len(subs))
            start = 0
            for i, member in enumerate(subs):
                n = per + (1 if i < extra else 0)
                result[member].extend((topic_id, p) for p in range(start, start + n))
                start += n
    else:
        order = sorted(members)
        turn = 0
        for topic_id in sorted(partitions):
            for p in range(partitions[topic_id]):
                for _ in range(len(order)):
                    member = order[turn % len(order)]
                    turn += 1
                    if topic_id in members[member]:
                        result[member].append((topic_id, p))
                        break
    return result
