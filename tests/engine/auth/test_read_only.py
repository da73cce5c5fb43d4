"""Read-only users (engine/auth/users.py, `Cluster.check_may_change`) and what a console
may offer its user (engine/auth/actions.py): a read-only user reads what their ACEs allow
and is refused every change by the engine itself, even as an administrator; the consoles'
mapping from actions to permissions, with the reason of each refusal."""

from __future__ import annotations

import sqlite3

import pytest

from engine import Consumer, OffsetAndMetadata, TopicPartition, errors
from engine.auth import effective
from engine.auth.actions import ACTIONS, ADMINISTRATORS, READ_ONLY_CONSOLE, Allowed
from engine.client.producer import produce_one

PASSWORD = "a-long-password-1"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """One cluster for the module (a user costs a scrypt hash); tests change nothing of
    it but what they make themselves."""
    from engine import Cluster

    with Cluster.open(tmp_path_factory.mktemp("ro") / "cluster", name="test") as c:
        c.create_stream(
            "/apps",
            consume_perm="p",
            produce_perm="u:<creator> | g:dev",
            topic_perm="u:<creator> | g:dev",
        )
        c.create_topic("/apps:t", 2)
        produce_one(c, "/apps:t", value=b"hello", partition=0)
        c.add_user("viewer", PASSWORD)
        c.add_user("dev", PASSWORD, groups=("dev",))
        c.add_user("auditor", PASSWORD, groups=("dev",), admin=True, read_only=True)
        consumer = Consumer(c, group_id="g", enable_auto_commit=False)
        consumer.assign([TopicPartition("/apps:t", 0)])
        consumer.commit({TopicPartition("/apps:t", 0): OffsetAndMetadata(1)})
        consumer.close()
        yield c


def view(cluster, name):
    return cluster.as_principal(cluster.user(name).principal)


def test_the_flag_is_kept_set_and_cleared(setup):
    assert setup.user("auditor").read_only and setup.user("auditor").principal.read_only
    assert not setup.user("viewer").read_only
    setup.edit_user("viewer", read_only=True)
    assert setup.user("viewer").principal.read_only
    setup.edit_user("viewer", groups=("x",))  # None: the flag stays
    assert setup.user("viewer").read_only
    setup.edit_user("viewer", groups=(), read_only=False)
    assert not setup.user("viewer").read_only
    assert [u.read_only for u in setup.users() if u.name == "auditor"] == [True]


def test_a_read_only_admin_reads_everything_and_changes_nothing(setup):
    auditor = view(setup, "auditor")
    assert auditor.is_administrator  # sees what an administrator sees
    assert auditor.stream("/apps").path == "/apps"
    consumer = Consumer(auditor, enable_auto_commit=False)
    consumer.assign([TopicPartition("/apps:t", 0)])
    consumer.seek(TopicPartition("/apps:t", 0), 0)
    records = consumer.poll(timeout_ms=5000)
    consumer.close()
    assert [r.value for batch in records.values() for r in batch] == [b"hello"]
    refusals = [
        ("create streams", lambda: auditor.create_stream("/new")),
        ("administer stream /apps", lambda: auditor.edit_stream("/apps", ttl=5)),
        ("administer stream /apps", lambda: auditor.delete_stream("/apps")),
        ("create or delete topics of stream /apps", lambda: auditor.create_topic("/apps:new", 1)),
        ("delete records of stream /apps", lambda: auditor.delete_records("/apps:t", 0, 1)),
        ("produce", lambda: produce_one(auditor, "/apps:t", value=b"x")),
        ("add users", lambda: auditor.add_user("eve", PASSWORD)),
        ("edit users", lambda: auditor.edit_user("viewer", admin=True)),
        ("delete users", lambda: auditor.delete_user("viewer")),
        ("set the password of other users", lambda: auditor.set_password("viewer", PASSWORD)),
        (
            "reset the offsets of consumer group 'g'",
            lambda: auditor.reset_offsets("g", "/apps:t", "earliest"),
        ),
        ("delete consumer group 'g'", lambda: auditor.delete_group("g")),
        ("set group permissions", lambda: auditor.set_group_permissions("g", join_perm="p")),
        ("register schemas", lambda: auditor.schemas.register("/apps:t-value", '"string"')),
    ]
    for what, change in refusals:
        with pytest.raises(errors.AccessDenied, match="'auditor' is read-only") as refused:
            change()
        assert what in str(refused.value)
    assert setup.stream("/apps").policies["ttl"] != 5
    assert [t.name for t in setup.topics("/apps")] == ["/apps:t"]
    assert setup.topic("/apps:t").partitions[0].log_end_offset == 1  # nothing produced
    assert {u.name for u in setup.users()} == {"viewer", "dev", "auditor"}
    assert setup.group("g").partitions[0].committed == 1


def test_a_read_only_user_commits_no_offsets_and_keeps_their_own_account(setup):
    auditor = view(setup, "auditor")
    consumer = Consumer(auditor, group_id="mine", enable_auto_commit=False)
    consumer.assign([TopicPartition("/apps:t", 0)])
    with pytest.raises(errors.AccessDenied, match="read-only"):
        consumer.commit({TopicPartition("/apps:t", 0): OffsetAndMetadata(1)})
    consumer.close()
    assert "mine" not in {g.group_id for g in setup.groups()}
    token = auditor.create_api_token("auditor", "reading")  # their own account: allowed
    assert setup.user_for_token(token).name == "auditor"
    with pytest.raises(errors.AccessDenied, match="read-only"):
        auditor.create_api_token("viewer")


def test_effective_permissions_say_read_only(setup):
    found = setup.effective_permissions("auditor", prefix="/apps", limit=1)
    assert found.read_only
    (apps,) = found.streams
    assert apps.allowed == {p: p in effective.READS for p in effective.PERMISSION_POLICIES}
    assert effective.READS == {"consume_perm", "unmask_perm"}  # seeing is no change
    assert apps.reasons["consume_perm"] == effective.ADMINISTRATOR
    assert apps.reasons["admin_perm"] == effective.READ_ONLY
    assert not setup.effective_permissions("dev", prefix="/apps", limit=1).read_only


def test_actions_follow_the_acls_with_the_reason(setup):
    viewer, dev = Allowed(view(setup, "viewer")), Allowed(view(setup, "dev"))
    assert viewer("delete_stream", "/apps").reason == "needs admin_perm on /apps"
    assert viewer("delete_topic", "/apps:t").reason == "needs topic_perm on /apps"
    assert viewer("produce", "/apps:t").reason == "needs produce_perm on /apps"
    assert not viewer("reset_offsets", "g") and not viewer("delete_group", "g")
    assert viewer("reset_offsets", "g").reason == "needs reset_perm on group g"
    assert viewer("manage_users").reason == ADMINISTRATORS
    assert viewer("create_stream") and viewer.changes  # anyone may make a stream
    assert dev("produce", "/apps:t") and dev("create_topic", "/apps")
    assert not dev("delete_stream", "/apps")  # admin_perm: the creator's
    assert viewer("delete_stream", "/none").reason == "no stream /none"
    everything = Allowed(setup)  # the library's own principal, the creator of /apps
    assert all(
        everything(name, "/apps" if a.scope == "stream" else "g" if a.scope == "group" else None)
        for name, a in ACTIONS.items()
    )
    with pytest.raises(errors.InvalidArgument, match="unknown action"):
        everything("fly")


def test_a_read_only_console_or_user_is_offered_no_change(setup):
    console = Allowed(setup, read_only=True)
    user = Allowed(view(setup, "auditor"))
    for name, action in ACTIONS.items():
        where = {"stream": "/apps:t", "group": "g"}.get(action.scope)
        assert console(name, where).reason == READ_ONLY_CONSOLE
        if name == "own_account":  # their password and tokens stay theirs
            assert user(name, where)
        else:
            assert user(name, where).reason == effective.READ_ONLY
    assert console.changes.reason == READ_ONLY_CONSOLE
    assert not user.changes


def test_an_older_catalog_gets_the_column(tmp_path):
    from engine import Cluster

    with Cluster.open(tmp_path / "c", name="old") as c:
        c.add_user("old", PASSWORD)
    conn = sqlite3.connect(tmp_path / "c" / "catalog.db")
    conn.execute("ALTER TABLE users DROP COLUMN read_only")  # as an engine before it wrote it
    conn.commit()
    conn.close()
    with Cluster.open(tmp_path / "c") as c:
        assert c.user("old").read_only is False
        c.edit_user("old", read_only=True)
        assert c.user("old").read_only is True


def test_an_idempotent_producer_id_is_refused(setup):
    with pytest.raises(errors.AccessDenied, match="read-only"):
        view(setup, "auditor").init_producer_id()
    assert view(setup, "dev").init_producer_id()[1] == 0


def test_plet_user_sets_and_lists_the_flag(cluster_path):
    import json

    from click.testing import CliRunner

    from engine import Cluster
    from engine.cli import cli

    def plet(*args: str):
        env = {"PLET_CLUSTER": None, "PLET_ADMIN_PASSWORD": None}
        return CliRunner().invoke(cli, [*args, "--cluster", str(cluster_path)], env=env)

    Cluster.open(cluster_path).close()
    got = plet("user", "add", "ann", "--password", PASSWORD, "--read-only")
    assert got.exit_code == 0 and "added user ann, read-only" in got.stdout
    listed = json.loads(plet("user", "list", "--json").stdout)
    assert [(u["name"], u["read_only"]) for u in listed] == [("ann", True)]
    table = plet("user", "list").stdout.splitlines()
    assert table[0].split() == ["USER", "GROUPS", "ADMIN", "READ-ONLY"]
    assert table[1].split() == ["ann", "-", "no", "yes"]
    got = plet("user", "edit", "ann", "--no-read-only")
    assert got.exit_code == 0 and got.stdout.strip() == "user ann: groups -"
    with Cluster.open(cluster_path) as c:
        assert not c.user("ann").read_only
    got = plet("user", "edit", "ann", "--read-only", "--admin")
    assert got.stdout.strip() == "user ann: groups -, administrator, read-only"
