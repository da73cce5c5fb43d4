"""Attacks on another user's consumer group over a live SASL listener (issue 23, finding 1):
raw frames built with kafka-python's protocol classes over real sockets, each logged in as
a user. alice owns /alice and the group `victim` (a live, Stable member); mallory may read
nothing of /alice (she has /mallory); eve may consume /alice but the group is not hers.
Then a normal owner's group works end to end with kafka-python's consumer and admin client.
"""

from __future__ import annotations

import logging
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KTP

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.auth.principal import Principal
from engine.wire import KafkaServer
from tests.engine.wire.group_client import MEMBER_ID_REQUIRED, GroupClient, assignment
from tests.timing import scaled, wait_until

USERS = {
    "alice": "alice's long secret",
    "mallory": "mallory's long secret",
    "eve": "eve's long secret",
    "nobody": "nobody's long secret",
}
GROUP_AUTHORIZATION_FAILED, UNKNOWN_MEMBER_ID = 30, 25
ALICE = Principal("alice")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("gattack") / "cluster"
    with Cluster.open(path, name="gattack") as cluster:
        for name, password in USERS.items():
            cluster.add_user(name, password)
        cluster.create_stream(
            "/alice",
            produce_perm="u:<creator> | u:alice",
            consume_perm="u:alice | u:eve",
            auto_create=False,
        )
        cluster.create_stream("/mallory", produce_perm="u:mallory", consume_perm="u:mallory")
        cluster.create_topic("/alice:t", 2)
        cluster.create_topic("/alice:e2e", 1)
        cluster.create_topic("/mallory:m", 2)
        producer = Producer(cluster)
        for i in range(1000):
            producer.send("/alice:t", value=b"%d" % i, partition=i % 2)
        for i in range(10):
            producer.send("/alice:e2e", value=b"%d" % i, partition=0)
        producer.flush()
        producer.close()
        listener = KafkaServer(
            cluster, listen=("127.0.0.1", 0), sasl=True, default_stream="/alice"
        ).start()
        try:
            yield cluster, listener
        finally:
            listener.close()


def login(address, user):
    """One connection logged in as `user`."""
    return GroupClient(address, user, USERS[user])


def committed(cluster, group):
    return {p.partition: p.committed for p in cluster.group(group).partitions}


@pytest.fixture
def victim(server):
    """alice's group `victim`: one live, Stable member (alice's) that committed 498/502."""
    cluster, listener = server
    alice = login(listener.address, "alice")
    first = alice.join("victim", ["t"])
    assert first.error_code == 79  # MEMBER_ID_REQUIRED
    joined = alice.join("victim", ["t"], member_id=first.member_id)
    assert joined.error_code == 0 and joined.leader == first.member_id
    me, generation = first.member_id, joined.generation_id
    synced = alice.sync("victim", generation, me, [(me, assignment("t", [0, 1]))])
    assert synced.error_code == 0
    assert alice.commit("victim", "t", {0: 498, 1: 502}, generation, me) == {0: 0, 1: 0}
    try:
        yield cluster, listener, alice, me, generation
    finally:
        alice.leave("victim", me)
        alice.close()
        cluster.delete_group("victim")


def test_another_user_can_neither_see_nor_touch_a_live_group(victim):
    cluster, listener, alice, me, generation = victim
    mallory = login(listener.address, "mallory")
    try:
        # DescribeGroups: refused, no member ids, hosts or assignment
        described = mallory.describe("victim")
        assert described.error_code == GROUP_AUTHORIZATION_FAILED
        assert described.members == []
        assert "victim" not in mallory.list()
        assert "victim" in alice.list()
        assert [m.member_id for m in alice.describe("victim").members] == [me]
        # her member id is hers alone: LeaveGroup, Heartbeat, SyncGroup, OffsetCommit (the
        # group's join_perm is checked first: mallory may not be a member at all)
        assert mallory.leave("victim", me) == UNKNOWN_MEMBER_ID
        assert mallory.heartbeat("victim", generation, me) == GROUP_AUTHORIZATION_FAILED
        assert mallory.sync("victim", generation, me).error_code == GROUP_AUTHORIZATION_FAILED
        assert mallory.commit("victim", "t", {0: 0}, generation, me) == {
            0: GROUP_AUTHORIZATION_FAILED
        }
        # JoinGroup with her own topic, to lead and assign herself everything: refused
        assert mallory.join("victim", ["/mallory:m"]).error_code == GROUP_AUTHORIZATION_FAILED
        # a simple commit, OffsetFetch and DeleteGroups: refused
        assert mallory.commit("victim", "t", {0: 0, 1: 0}) == dict.fromkeys(
            (0, 1), GROUP_AUTHORIZATION_FAILED
        )
        assert mallory.fetch("victim").error_code == GROUP_AUTHORIZATION_FAILED
        assert mallory.delete("victim") == GROUP_AUTHORIZATION_FAILED
        # alice's member is still there, Stable, with her offsets
        assert alice.heartbeat("victim", generation, me) == 0
        assert alice.describe("victim").group_state == "Stable"
        assert committed(cluster, "victim") == {0: 498, 1: 502}
    finally:
        mallory.close()


def test_a_consume_only_user_cannot_commit_into_a_live_group(victim):
    cluster, listener, alice, me, generation = victim
    eve = login(listener.address, "eve")
    try:
        assert eve.commit("victim", "t", {0: 0, 1: 0}) == dict.fromkeys(
            (0, 1), GROUP_AUTHORIZATION_FAILED
        )
        # even one allowed to commit may not commit from outside while members are live
        cluster.set_group_permissions("victim", commit_perm="u:<creator> | u:eve")
        assert eve.commit("victim", "t", {0: 0, 1: 0}) == dict.fromkeys((0, 1), UNKNOWN_MEMBER_ID)
        # nor with alice's member id: she may not be a member, and if she may, the id is
        # alice's alone
        assert eve.commit("victim", "t", {0: 0}, generation, me) == {0: GROUP_AUTHORIZATION_FAILED}
        cluster.set_group_permissions("victim", join_perm="u:<creator> | u:eve")
        assert eve.commit("victim", "t", {0: 0}, generation, me) == {0: UNKNOWN_MEMBER_ID}
        assert eve.heartbeat("victim", generation, me) == UNKNOWN_MEMBER_ID
        assert alice.commit("victim", "t", {0: 0}) == {0: UNKNOWN_MEMBER_ID}
        assert committed(cluster, "victim") == {0: 498, 1: 502}
        assert alice.describe("victim").group_state == "Stable"
    finally:
        cluster.set_group_permissions("victim", commit_perm="", join_perm="")
        eve.close()


def test_no_simple_commit_from_the_engine_into_a_live_wire_group(victim, caplog):
    """alice's own engine consumer (alice passes commit_perm) outside the group, whose live
    member is a Kafka client of the listener: refused, as a wire simple commit is."""
    cluster, listener, alice, me, generation = victim
    assert cluster.group_kinds("victim") == frozenset({"wire"})
    tp = TopicPartition("/alice:t", 0)
    outsider = Consumer(cluster, group_id="victim", enable_auto_commit=True, principal=ALICE)
    try:
        outsider.assign([tp])
        outsider.seek(tp, 0)
        with pytest.raises(errors.CommitFailed, match="live members .*plet serve"):
            outsider.commit({tp: 0})
        with pytest.raises(errors.CommitFailed, match="live members"):
            outsider.commit()  # its positions
        with caplog.at_level(logging.WARNING, logger="engine.client.consumer"):
            outsider.close()  # its auto-commit is refused too, and logged
        assert "auto-commit of consumer" in caplog.text
        assert committed(cluster, "victim") == {0: 498, 1: 502}
        assert alice.heartbeat("victim", generation, me) == 0
    finally:
        outsider.close()
    # once the member left, the group is free to commit into from outside
    assert alice.leave("victim", me) == 0
    with Consumer(cluster, group_id="victim", enable_auto_commit=False, principal=ALICE) as c:
        c.commit({tp: 7})
    assert committed(cluster, "victim") == {0: 7, 1: 502}


def test_no_simple_commit_over_the_wire_into_a_group_engine_consumers_hold(server):
    cluster, listener = server
    member = Consumer(cluster, group_id="engine-held", principal=ALICE, enable_auto_commit=False)
    alice = login(listener.address, "alice")
    try:
        member.subscribe(["/alice:t"])
        member.poll(timeout_ms=100)
        assert cluster.group_kinds("engine-held") == frozenset({"engine"})
        assert alice.commit("engine-held", "t", {0: 1}) == {0: UNKNOWN_MEMBER_ID}
        assert committed(cluster, "engine-held") == {0: None, 1: None}
    finally:
        member.close()
        alice.close()
    cluster.delete_group("engine-held")


def test_a_revoked_member_is_refused_and_removed_at_once(server):
    """eve joined alice's group `shared` while alice let her; alice takes join_perm back:
    eve's next OffsetCommit, Heartbeat or SyncGroup is refused, and her member is gone
    (no waiting for her session to end or for her next JoinGroup)."""
    cluster, listener = server
    alice, eve = login(listener.address, "alice"), login(listener.address, "eve")
    try:
        assert alice.commit("shared", "t", {0: 1}) == {0: 0}  # alice creates it
        shared = "u:<creator> | u:eve"
        cluster.set_group_permissions("shared", join_perm=shared, commit_perm=shared)
        joined = eve.join_new("shared", ["t"])
        her, generation = joined.member_id, joined.generation_id
        assert eve.sync("shared", generation, her, [(her, assignment("t", [0, 1]))]).error_code == 0
        assert eve.heartbeat("shared", generation, her) == 0
        assert eve.commit("shared", "t", {0: 2}, generation, her) == {0: 0}
        assert cluster.group_kinds("shared") == frozenset({"wire"})

        cluster.set_group_permissions("shared", join_perm="")  # alice's alone again
        assert eve.commit("shared", "t", {0: 3}, generation, her) == {0: GROUP_AUTHORIZATION_FAILED}
        assert alice.describe("shared").members == []  # removed, not left to expire
        assert cluster.group_kinds("shared") == frozenset()
        assert eve.heartbeat("shared", generation, her) == GROUP_AUTHORIZATION_FAILED
        assert eve.sync("shared", generation, her).error_code == GROUP_AUTHORIZATION_FAILED
        assert eve.join("shared", ["t"]).error_code == GROUP_AUTHORIZATION_FAILED
        assert committed(cluster, "shared") == {0: 2}
    finally:
        alice.close()
        eve.close()
        cluster.delete_group("shared")


def test_a_pending_member_id_is_usable_only_by_the_user_it_was_given_to(server):
    """KIP-394: alice's first JoinGroup hands her a member id to join with; eve, who may join
    the group too, cannot join with it (to lead in alice's place or to lock her out)."""
    cluster, listener = server
    alice, eve = login(listener.address, "alice"), login(listener.address, "eve")
    try:
        first = alice.join("pending", ["t"])
        assert first.error_code == MEMBER_ID_REQUIRED
        cluster.set_group_permissions("pending", join_perm="u:<creator> | u:eve")
        stolen = eve.join("pending", ["t"], member_id=first.member_id)
        assert stolen.error_code == UNKNOWN_MEMBER_ID
        assert alice.describe("pending").members == []
        joined = alice.join("pending", ["t"], member_id=first.member_id)
        assert (joined.error_code, joined.leader) == (0, first.member_id)
        assert alice.leave("pending", first.member_id) == 0
    finally:
        alice.close()
        eve.close()
        cluster.delete_group("pending")


def test_a_user_without_rights_cannot_create_groups(server):
    cluster, listener = server
    nobody = login(listener.address, "nobody")
    mallory = login(listener.address, "mallory")
    try:
        before = {g.group_id for g in cluster.groups()}
        for n in range(20):
            assert nobody.join(f"flood-{n}", ["t"]).error_code == GROUP_AUTHORIZATION_FAILED
            assert nobody.commit(f"flood-c{n}", "t", {0: 1}) == {0: GROUP_AUTHORIZATION_FAILED}
        # mallory may create groups on her own topic, up to the limit
        cluster.set_group_limit(3)
        for n in range(3):
            assert mallory.commit(f"mine-{n}", "/mallory:m", {0: 1}) == {0: 0}
        assert mallory.commit("mine-3", "/mallory:m", {0: 1}) == {0: GROUP_AUTHORIZATION_FAILED}
        assert mallory.join("mine-4", ["/mallory:m"]).error_code == GROUP_AUTHORIZATION_FAILED
        created = {g.group_id for g in cluster.groups()} - before
        assert created == {"mine-0", "mine-1", "mine-2"}
        for n in range(3):
            assert mallory.delete(f"mine-{n}") == 0
    finally:
        cluster.set_group_limit(1000)
        nobody.close()
        mallory.close()


def test_an_owners_group_works_end_to_end(server):
    cluster, listener = server
    bootstrap = "{}:{}".format(*listener.address)
    sasl = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": USERS["alice"],
    }
    consumer = KafkaConsumer(
        "e2e",
        group_id="alice-e2e",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **sasl,
    )
    got = []
    deadline = time.monotonic() + scaled(30)
    while len(got) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    assert sorted(got, key=int) == [b"%d" % i for i in range(10)]
    consumer.commit()
    admin = KafkaAdminClient(**sasl)
    try:
        described = admin.describe_groups(["alice-e2e"])["alice-e2e"]
        assert described["error"] is None and described["group_state"] == "Stable"
        assert len(described["members"]) == 1
        assert consumer.committed(KTP("e2e", 0)) == 10  # OffsetFetch
        consumer.close()
        wait_until(lambda: not cluster.group_kinds("alice-e2e"), message="alice's member to leave")
        assert cluster.group_permissions("alice-e2e").creator == "alice"
        assert admin.delete_groups(["alice-e2e"]) == {"alice-e2e": "OK"}
        assert "alice-e2e" not in {g.group_id for g in cluster.groups()}
    finally:
        admin.close()


def test_a_confluent_consumer_creates_and_commits_its_own_group(server):
    """librdkafka's subscription metadata names its topics too: the group becomes its
    user's on the first JoinGroup."""
    from confluent_kafka import Consumer as CKConsumer

    cluster, listener = server
    consumer = CKConsumer(
        {
            "bootstrap.servers": "{}:{}".format(*listener.address),
            "group.id": "alice-ck",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": USERS["alice"],
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["e2e"])
        got = 0
        deadline = time.monotonic() + scaled(30)
        while got < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        assert got == 10
        consumer.commit(asynchronous=False)
        assert cluster.group_permissions("alice-ck").creator == "alice"
        assert committed(cluster, "alice-ck") == {0: 10}
    finally:
        consumer.close()
