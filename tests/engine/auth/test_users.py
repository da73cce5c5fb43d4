"""Console users (engine/users.py): passwords, groups, API tokens, the first administrator,
admins as super users, and `Cluster.as_principal` views."""

from __future__ import annotations

import json
import sqlite3

import pytest

from engine import Cluster, Consumer, Principal, Producer, TopicPartition, errors
from engine.auth import users as user_store
from engine.clock import FakeClock

PASSWORD = "correct-horse-1"


def test_add_and_authenticate(cluster):
    info = cluster.add_user("alice", PASSWORD, groups=("analysts", "ops"))
    assert (info.name, info.groups, info.admin) == ("alice", ("analysts", "ops"), False)
    assert info.created_ms > 0
    assert info.principal == Principal("alice", ("analysts", "ops"), superuser=False)
    assert cluster.authenticate("alice", PASSWORD) == info
    assert cluster.authenticate("alice", "wrong-password") is None
    assert cluster.authenticate("nobody", PASSWORD) is None
    assert cluster.authenticate("alice", "") is None
    assert cluster.authenticate("alice", "x" * 5000) is None
    assert cluster.user("alice") == info
    assert [u.name for u in cluster.users()] == ["alice"]
    with pytest.raises(errors.UnknownUser):
        cluster.user("nobody")


def test_only_a_salted_hash_is_stored(cluster):
    cluster.add_user("alice", PASSWORD)
    cluster.add_user("bob", PASSWORD)
    conn = sqlite3.connect(cluster.path / "catalog.db")
    hashes = [h for (h,) in conn.execute("SELECT password_hash FROM users")]
    conn.close()
    assert all(h.startswith("scrypt$") and PASSWORD not in h for h in hashes)
    assert hashes[0] != hashes[1]  # salted


def test_passwords_are_hashed_at_the_real_cost(cluster, cheap_password_hashes, monkeypatch):
    from engine.auth import users

    # the suite hashes cheaply (tests/conftest.py); the engine's own cost is this
    assert cheap_password_hashes == 2**15
    monkeypatch.setattr(users, "_SCRYPT_N", cheap_password_hashes)
    cluster.add_user("carol", PASSWORD)
    conn = sqlite3.connect(cluster.path / "catalog.db")
    (stored,) = conn.execute("SELECT password_hash FROM users WHERE name = 'carol'").fetchone()
    conn.close()
    assert stored.startswith("scrypt$32768$8$1$")  # OWASP's minimum: N=2^15, r=8, p=1
    assert cluster.authenticate("carol", PASSWORD) is not None
    assert cluster.authenticate("carol", PASSWORD + "x") is None


def test_a_user_is_added_once(cluster):
    cluster.add_user("alice", PASSWORD)
    with pytest.raises(errors.AlreadyExists):
        cluster.add_user("alice", "another-password")
    assert cluster.authenticate("alice", PASSWORD) is not None


def test_set_password(cluster):
    cluster.add_user("alice", PASSWORD)
    cluster.set_password("alice", "new-password-1")
    assert cluster.authenticate("alice", PASSWORD) is None
    assert cluster.authenticate("alice", "new-password-1") is not None
    with pytest.raises(errors.UnknownUser):
        cluster.set_password("nobody", "new-password-1")
    with pytest.raises(errors.InvalidArgument):
        cluster.set_password("alice", "short")
    assert cluster.authenticate("alice", "new-password-1") is not None


@pytest.mark.parametrize("password", ["", "seven77", "x" * 1025, "\ud800" * 8, None, 12345678])
def test_bad_passwords_are_refused(cluster, password):
    with pytest.raises(errors.InvalidArgument):
        cluster.add_user("alice", password)
    assert cluster.users() == []


@pytest.mark.parametrize("name", ["", "a b", "a/b", "<script>", "x" * 65, "é", None, "a\n"])
def test_bad_user_names_are_refused(cluster, name):
    with pytest.raises(errors.InvalidName):
        cluster.add_user(name, PASSWORD)
    assert cluster.users() == []


def test_groups_validation(cluster):
    assert cluster.add_user("a", PASSWORD, groups="ops, analysts ,ops").groups == (
        "analysts",
        "ops",
    )
    assert cluster.add_user("b", PASSWORD, groups=["x"]).groups == ("x",)
    assert cluster.add_user("c", PASSWORD, groups="").groups == ()
    for bad in (["ok", "not ok"], "a,<b>", [""], [5]):
        with pytest.raises(errors.InvalidName):
            cluster.add_user("d", PASSWORD, groups=bad)
    with pytest.raises(errors.InvalidArgument):
        cluster.add_user("d", PASSWORD, groups=5)
    assert [u.name for u in cluster.users()] == ["a", "b", "c"]


def test_edit_user(cluster):
    cluster.add_user("alice", PASSWORD, groups=("a",))
    info = cluster.edit_user("alice", groups="b,c", admin=True)
    assert info.groups == ("b", "c") and info.admin
    assert cluster.edit_user("alice").groups == ("b", "c")  # nothing given, nothing changed
    assert cluster.edit_user("alice", admin=False).admin is False
    with pytest.raises(errors.InvalidName):
        cluster.edit_user("alice", groups=["bad group"])
    assert cluster.user("alice").groups == ("b", "c")
    with pytest.raises(errors.UnknownUser):
        cluster.edit_user("nobody", admin=True)


def test_delete_takes_the_tokens_along(cluster):
    cluster.add_user("alice", PASSWORD)
    cluster.add_user("bob", PASSWORD)
    token = cluster.create_api_token("alice", "ci")
    kept = cluster.create_api_token("bob")
    cluster.delete_user("alice")
    assert [u.name for u in cluster.users()] == ["bob"]
    assert cluster.authenticate("alice", PASSWORD) is None
    assert cluster.user_for_token(token) is None
    assert cluster.api_tokens() == cluster.api_tokens("bob")
    assert cluster.user_for_token(kept).name == "bob"
    with pytest.raises(errors.UnknownUser):
        cluster.delete_user("alice")
    # a user of the same name later does not inherit anything
    cluster.add_user("alice", "other-password")
    assert cluster.api_tokens("alice") == [] and cluster.user_for_token(token) is None


def test_api_tokens_create_lookup_list_revoke(cluster):
    cluster.add_user("alice", PASSWORD)
    cluster.add_user("bob", PASSWORD)
    first = cluster.create_api_token("alice", "laptop")
    second = cluster.create_api_token("alice")
    assert first != second and first.startswith("plet_") and len(first) > 40
    assert cluster.user_for_token(first).name == "alice"
    for bad in ("", "plet_nope", None, "x" * 500, first + "x"):
        assert cluster.user_for_token(bad) is None
    listed = cluster.api_tokens("alice")
    assert sorted(t.label for t in listed) == ["", "laptop"]
    listed = [t for t in listed if t.label == "laptop"] + [t for t in listed if not t.label]
    assert all(len(t.id) == 12 and t.user == "alice" for t in listed)
    assert first not in repr(listed)  # only the hash is known
    with pytest.raises(errors.NotFound):
        cluster.revoke_api_token("bob", listed[0].id)  # not bob's
    with pytest.raises(errors.InvalidArgument):
        cluster.revoke_api_token("alice", "not-an-id")
    cluster.revoke_api_token("alice", listed[0].id)
    assert cluster.user_for_token(first) is None
    assert cluster.user_for_token(second).name == "alice"
    with pytest.raises(errors.UnknownUser):
        cluster.create_api_token("nobody")
    with pytest.raises(errors.InvalidArgument):
        cluster.create_api_token("alice", "x" * 201)


def test_a_tokens_last_use_is_written_at_most_once_a_minute(cluster_path):
    clock = FakeClock(now_ms=1_000_000_000_000)
    with Cluster.open(cluster_path, clock=clock) as cluster:
        cluster.add_user("alice", PASSWORD)
        token = cluster.create_api_token("alice")
        assert cluster.api_tokens("alice")[0].last_used_ms is None
        cluster.user_for_token(token)
        assert cluster.api_tokens("alice")[0].last_used_ms == clock.now_ms()
        first = clock.now_ms()
        clock.advance(30)
        cluster.user_for_token(token)
        assert cluster.api_tokens("alice")[0].last_used_ms == first
        clock.advance(30)
        cluster.user_for_token(token)
        assert cluster.api_tokens("alice")[0].last_used_ms == clock.now_ms()


def test_ensure_admin_generated(cluster, monkeypatch, capsys):
    monkeypatch.delenv(user_store.ADMIN_PASSWORD_ENV, raising=False)
    name, generated = user_store.ensure_admin(cluster)
    assert name == "admin" and generated and len(generated) >= 12
    assert cluster.authenticate("admin", generated).admin
    assert user_store.ensure_admin(cluster) == ("admin", None)  # once only
    assert capsys.readouterr().out == ""  # the caller prints it, once


def test_ensure_admin_from_the_environment_or_argument(cluster_path, monkeypatch):
    monkeypatch.setenv(user_store.ADMIN_PASSWORD_ENV, "from-the-env-1")
    with Cluster.open(cluster_path) as c:
        assert user_store.ensure_admin(c) == ("admin", None)
        assert c.authenticate("admin", "from-the-env-1").admin
    with Cluster.open(cluster_path.parent / "other") as c:
        assert user_store.ensure_admin(c, "given-password-1") == ("admin", None)
        assert c.authenticate("admin", "given-password-1") is not None


def test_ensure_admin_refuses_a_short_password_and_leaves_existing_users(cluster, monkeypatch):
    monkeypatch.setenv(user_store.ADMIN_PASSWORD_ENV, "short")
    with pytest.raises(errors.InvalidArgument, match=user_store.ADMIN_PASSWORD_ENV):
        user_store.ensure_admin(cluster)
    assert cluster.users() == []
    cluster.add_user("alice", PASSWORD)
    assert user_store.ensure_admin(cluster) == ("admin", None)
    assert [u.name for u in cluster.users()] == ["alice"]


# --- admins pass every ACE, plain users are checked by each --------------------------------


@pytest.fixture
def owned(cluster):
    """A stream of `owner` with the default ACEs (u:owner), a topic and a message."""
    owner = cluster.as_principal(Principal("owner"))
    owner.create_stream("/s", default_partitions=1)
    owner.create_topic("/s:t")
    producer = Producer(owner, acks=1)
    producer.send("/s:t", value=b"v").get(timeout=10)
    producer.close()
    return cluster


def _operations(tmp_path):
    def produce(c):
        producer = Producer(c, acks=1)
        try:
            producer.send("/s:t", value=b"x").get(timeout=10)
        finally:
            producer.close()

    def consume(c):
        consumer = Consumer(c, enable_auto_commit=False)
        try:
            consumer.assign([TopicPartition("/s:t", 0)])
        finally:
            consumer.close()

    def topic(c):
        c.create_topic(f"/s:new-{c.principal.user}")

    def admin(c):
        c.edit_stream("/s", ttl=3600)

    def copy(c):
        target = tmp_path / f"copy-{c.principal.user}"
        Cluster.open(target).close()
        c.add_replica("/s", target, paused=True)

    return {
        "produce_perm": produce,
        "consume_perm": consume,
        "topic_perm": topic,
        "admin_perm": admin,
        "copy_perm": copy,
    }


@pytest.mark.parametrize(
    "perm", ["produce_perm", "consume_perm", "topic_perm", "admin_perm", "copy_perm"]
)
def test_an_admin_passes_every_ace_a_plain_user_is_denied(owned, tmp_path, perm):
    root = owned.add_user("root-admin", PASSWORD, admin=True)
    plain = owned.add_user("plain", PASSWORD, groups=("analysts",))
    operation = _operations(tmp_path)[perm]
    with pytest.raises(errors.AccessDenied, match=perm):
        operation(owned.as_principal(plain.principal))
    operation(owned.as_principal(root.principal))
    # and the ACE decides for the plain user once it names her group
    owned.as_principal(Principal("owner")).edit_stream("/s", **{perm: "g:analysts"})
    if perm == "copy_perm":
        # ... except that adding a replica link reaches outside the cluster: a cluster
        # administrator's act whatever the ACE (issue 12, test_replication_security.py)
        with pytest.raises(errors.AccessDenied, match="cluster administrator"):
            operation(owned.as_principal(plain.principal))
        return
    operation(owned.as_principal(plain.principal))


def test_an_admin_cannot_store_an_invalid_ace(owned):
    root = owned.add_user("root-admin", PASSWORD, admin=True)
    with pytest.raises(errors.InvalidPolicy):
        owned.as_principal(root.principal).edit_stream("/s", consume_perm="u:")


# --- Cluster.as_principal ------------------------------------------------------------------


def test_a_view_checks_its_own_principal(owned):
    alice = owned.as_principal(Principal("alice"))
    owner = owned.as_principal(Principal("owner"))
    assert alice.principal.user == "alice" and owner.principal.user == "owner"
    assert owned.principal != alice.principal  # the cluster keeps its own
    with pytest.raises(errors.AccessDenied, match="alice"):
        alice.edit_stream("/s", ttl=60)
    owner.edit_stream("/s", ttl=60)
    assert owned.stream("/s").policies["ttl"] == 60
    assert alice.stream("/s").policies["ttl"] == 60  # one truth, shared connections
    # producers and consumers made on a view act as its principal
    producer = Producer(alice, acks=1)
    with pytest.raises(errors.AccessDenied):
        producer.send("/s:t", value=b"x").get(timeout=10)
    producer.close()
    consumer = Consumer(alice)
    assert consumer.principal.user == "alice"
    with pytest.raises(errors.AccessDenied):
        consumer.assign([TopicPartition("/s:t", 0)])
    consumer.close()
    # a view of a view acts as the newest principal
    assert alice.as_principal(Principal("owner")).edit_stream("/s", ttl=61).policies["ttl"] == 61


def test_closing_a_view_leaves_the_cluster_open(cluster):
    view = cluster.as_principal(Principal("alice"))
    view.close()
    assert view.closed and not cluster.closed
    with pytest.raises(errors.Closed):
        view.streams()
    cluster.create_stream("/still-open")
    other = cluster.as_principal(Principal("bob"))
    assert [s.path for s in other.streams()] == ["/still-open"]


def test_closing_the_cluster_closes_its_views(cluster_path):
    c = Cluster.open(cluster_path)
    view = c.as_principal(Principal("alice"))
    c.close()
    with pytest.raises(errors.Closed):
        view.streams()
    with pytest.raises(errors.Closed):
        c.as_principal(Principal("alice"))


def test_as_principal_needs_a_principal(cluster):
    with pytest.raises(TypeError):
        cluster.as_principal("alice")


# --- plet user -----------------------------------------------------------------------------


def plet(*args: object, input: str | None = None):
    from click.testing import CliRunner

    from engine.cli import cli

    env = {"PLET_CLUSTER": None, user_store.ADMIN_PASSWORD_ENV: None}
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, env=env)


def test_plet_user_add_list_passwd_delete(cluster_path):
    Cluster.open(cluster_path).close()
    got = plet(
        "user",
        "add",
        "alice",
        "--password",
        PASSWORD,
        "--group",
        "ops",
        "--group",
        "analysts",
        "--cluster",
        cluster_path,
    )
    assert got.exit_code == 0, got.output
    assert "added user alice (groups analysts, ops)" in got.stdout
    got = plet(
        "user",
        "add",
        "root",
        "--admin",
        "--cluster",
        cluster_path,
        input="admin-password-1\nadmin-password-1\n",
    )
    assert got.exit_code == 0, got.output
    assert "as an administrator" in got.stdout
    got = plet("user", "list", "--json", "--cluster", cluster_path)
    listed = json.loads(got.stdout)
    assert [(u["name"], u["groups"], u["admin"]) for u in listed] == [
        ("alice", ["analysts", "ops"], False),
        ("root", [], True),
    ]
    table = plet("user", "list", "--cluster", cluster_path).stdout
    assert "alice" in table and "analysts,ops" in table and "yes" in table
    got = plet(
        "user",
        "passwd",
        "alice",
        "--cluster",
        cluster_path,
        input="new-password-1\nnew-password-1\n",
    )
    assert got.exit_code == 0 and "password of alice changed" in got.stdout
    got = plet("user", "edit", "alice", "--no-groups", "--admin", "--cluster", cluster_path)
    assert got.exit_code == 0 and "groups -, administrator" in got.stdout
    with Cluster.open(cluster_path) as c:
        assert c.authenticate("alice", "new-password-1").admin
        assert c.user("alice").groups == ()
    got = plet("user", "delete", "alice", "--cluster", cluster_path)
    assert got.exit_code == 0 and "deleted user alice" in got.stdout
    with Cluster.open(cluster_path) as c:
        assert [u.name for u in c.users()] == ["root"]


def test_plet_user_token_tokens_revoke(cluster_path):
    Cluster.open(cluster_path).close()
    assert (
        plet("user", "add", "alice", "--password", PASSWORD, "--cluster", cluster_path).exit_code
        == 0
    )
    got = plet("user", "token", "alice", "--label", "ci", "--cluster", cluster_path)
    assert got.exit_code == 0
    token = got.stdout.strip()
    assert token.startswith("plet_") and "\n" not in token
    with Cluster.open(cluster_path) as c:
        assert c.user_for_token(token).name == "alice"
    listed = json.loads(plet("user", "tokens", "alice", "--json", "--cluster", cluster_path).stdout)
    assert [t["label"] for t in listed] == ["ci"] and token not in json.dumps(listed)
    assert listed[0]["id"] in plet("user", "tokens", "alice", "--cluster", cluster_path).stdout
    got = plet("user", "revoke", "alice", listed[0]["id"], "--cluster", cluster_path)
    assert got.exit_code == 0 and "revoked" in got.stdout
    with Cluster.open(cluster_path) as c:
        assert c.user_for_token(token) is None


@pytest.mark.parametrize(
    "args, message",
    [
        (("user", "add", "bad name", "--password", PASSWORD), "invalid user name"),
        (("user", "add", "bob", "--password", "short"), "8 to"),
        (("user", "add", "bob", "--password", PASSWORD, "--group", "a b"), "invalid group"),
        (("user", "add", "alice", "--password", PASSWORD), "exists already"),
        (("user", "passwd", "nobody", "--password", PASSWORD), "no user"),
        (("user", "passwd", "alice", "--password", "short"), "8 to"),
        (("user", "delete", "nobody"), "no user"),
        (("user", "token", "nobody"), "no user"),
        (("user", "tokens", "nobody"), "no user"),
        (("user", "revoke", "alice", "0123456789ab"), "no token"),
        (("user", "revoke", "alice", "nope"), "invalid token id"),
        (("user", "edit", "nobody", "--admin"), "no user"),
    ],
)
def test_plet_user_errors(cluster_path, args, message):
    with Cluster.open(cluster_path) as c:
        c.add_user("alice", PASSWORD)
    got = plet(*args, "--cluster", cluster_path)
    assert got.exit_code == 1, got.output
    assert got.stderr.startswith("error: ") and message in got.stderr, got.stderr
    assert "Traceback" not in got.output
    with Cluster.open(cluster_path) as c:
        assert [u.name for u in c.users()] == ["alice"]
        assert c.authenticate("alice", PASSWORD) is not None


def test_plet_user_usage_errors(cluster_path):
    Cluster.open(cluster_path).close()
    got = plet("user", "edit", "alice", "--group", "a", "--no-groups", "--cluster", cluster_path)
    assert got.exit_code == 2
    got = plet("user", "add", "x", "--cluster", cluster_path, input="password-one\npassword-two\n")
    assert got.exit_code != 0  # the confirmation differs: asked again, then input runs out
    with Cluster.open(cluster_path) as c:
        assert c.users() == []
