"""The streams and group of the group-permission tests (tests/engine/groups/test_perms.py
on a cluster, tests/web/test_group_attacks.py through a live console): /a, alice's, and
/m, mallory's, one partition of 10 messages each; a committed offset makes a group, whose
first committer is its creator (engine.groups.perms)."""

from __future__ import annotations

from engine import Cluster, Consumer, OffsetAndMetadata, Principal, Producer, TopicPartition


def two_streams(cluster: Cluster, consumers_of_a: str = "u:alice") -> Cluster:
    """/a (consumed by `consumers_of_a`) and /m (mallory's), anyone may produce; one
    partition of 10 messages each."""
    cluster.create_stream("/a", consume_perm=consumers_of_a, produce_perm="p")
    cluster.create_stream("/m", consume_perm="u:mallory", produce_perm="p")
    cluster.create_topic("/a:t", 1)
    cluster.create_topic("/m:x", 1)
    producer = Producer(cluster)
    for topic in ("/a:t", "/m:x"):
        for _ in range(10):
            producer.send(topic, value=b"v", partition=0)
    producer.flush()
    producer.close()
    return cluster


def commit(
    cluster: Cluster, who: Principal | str, group: str, offset: int, topic: str = "/a:t"
) -> None:
    """Commit `offset` of partition 0 of `topic` into `group` as `who` (a principal or a
    user name)."""
    principal = who if isinstance(who, Principal) else Principal(who)
    consumer = Consumer(cluster.as_principal(principal), group_id=group, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(offset)})
    finally:
        consumer.close()
