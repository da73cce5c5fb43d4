"""Who may add a replica link (a cluster administrator: DESIGN's security model), and the
replication tokens of a target: listed, revoked, their use recorded (issue 12)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine import Cluster, Principal, errors
from engine.cli import cli
from engine.replication.http import ReplicationService, Unauthorized, hash_token

ADMIN_ONLY = "only a cluster administrator may add a replica link"


@pytest.fixture
def other(tmp_path):
    with Cluster.open(tmp_path / "other", name="other") as c:
        yield c


def test_a_plain_principal_may_not_add_a_link_whatever_the_target(cluster, other, tmp_path):
    cluster.create_stream("/s", copy_perm="p", admin_perm="p")
    bob = cluster.as_principal(Principal("bob"))
    assert not bob.is_administrator
    plain = tmp_path / "plain"
    plain.mkdir()
    messages = set()
    for target in (
        other.path,
        tmp_path / "missing",
        plain,
        "/etc",
        "http://plr_x@127.0.0.1:9/",
        "http://127.0.0.1:9/",
        cluster.path,
    ):
        with pytest.raises(errors.AccessDenied) as info:
            bob.add_replica("/s", target, "/injected")
        messages.add(str(info.value))
    assert len(messages) == 1 and ADMIN_ONLY in messages.pop()
    assert cluster.replicas("/s") == []
    assert other.streams() == []
    assert not (tmp_path / "missing").exists()
    # A cluster opened with an explicit plain principal is no administrator either.
    with Cluster.open(cluster.path, principal=Principal("carol")) as carol:
        assert not carol.is_administrator
        with pytest.raises(errors.AccessDenied, match=ADMIN_ONLY):
            carol.add_replica("/s", other.path)


def test_a_superuser_and_the_library_itself_may_add_links(cluster, other, tmp_path):
    assert cluster.is_administrator  # opened without principal=: the files' owner
    cluster.create_stream("/s", ttl=0)
    root = cluster.as_principal(Principal("root-admin", superuser=True))
    assert root.is_administrator
    info = root.add_replica("/s", other.path)
    assert info.state == "in_sync"
    assert [s.path for s in other.streams()] == ["/s"]
    with Cluster.open(tmp_path / "third", name="third") as third:
        assert cluster.add_replica("/s", third.path).state == "in_sync"
    # a view of an administrator's cluster as a plain user is not one
    assert not root.as_principal(Principal("bob")).is_administrator


def test_stream_owners_still_pause_resume_and_remove_links_an_admin_added(cluster, other):
    cluster.create_stream("/s", ttl=0, admin_perm="u:bob", copy_perm="u:bob")
    cluster.as_principal(Principal("ops", superuser=True)).add_replica("/s", other.path)
    bob = cluster.as_principal(Principal("bob"))
    bob.pause_replica("/s", other.path)
    bob.resume_replica("/s", other.path)
    bob.remove_replica("/s", other.path)
    assert cluster.replicas("/s") == []


def test_tokens_are_listed_without_their_secret_and_revoked(cluster):
    cluster.create_stream("/s")
    cluster.create_stream("/bobs", admin_perm="u:bob")
    first = cluster.create_replication_token("/s")
    second = cluster.create_replication_token("/s")
    bobs = cluster.as_principal(Principal("bob")).create_replication_token("/bobs")
    listed = cluster.replication_tokens()
    assert sorted(t.stream for t in listed) == ["/bobs", "/s", "/s"]  # oldest first
    text = json.dumps([asdict(t) for t in listed])
    assert first not in text and second not in text and bobs not in text
    assert {t.id for t in listed} == {hash_token(x)[:12] for x in (first, second, bobs)}
    by_id = {t.id: t for t in listed}
    assert by_id[hash_token(bobs)[:12]].created_by == "bob"
    assert by_id[hash_token(first)[:12]].created_by == cluster.principal.user
    assert [t.id for t in cluster.replication_tokens("/bobs")] == [hash_token(bobs)[:12]]
    # bob administers /bobs only: he sees and revokes its token, not the others
    bob = cluster.as_principal(Principal("bob"))
    assert [t.stream for t in bob.replication_tokens()] == ["/bobs"]
    with pytest.raises(errors.AccessDenied):
        bob.revoke_replication_token(hash_token(first)[:12])
    service = ReplicationService(str(cluster.path))
    try:
        assert service.authenticate(first) == "/s"
        cluster.revoke_replication_token(hash_token(first)[:12])
        with pytest.raises(Unauthorized):
            service.authenticate(first)
        assert service.authenticate(second) == "/s"
        bob.revoke_replication_token(hash_token(bobs)[:12])
        with pytest.raises(Unauthorized):
            service.authenticate(bobs)
    finally:
        service.close()
    assert [t.id for t in cluster.replication_tokens()] == [hash_token(second)[:12]]
    with pytest.raises(errors.NotFound):
        cluster.revoke_replication_token(hash_token(first)[:12])
    with pytest.raises(errors.InvalidArgument, match="12 hex digits"):
        cluster.revoke_replication_token("' OR 1=1 --")


def test_a_token_for_a_stream_that_does_not_exist_yet_is_an_administrators_act(cluster):
    # It lets another cluster create the stream here.
    with pytest.raises(errors.AccessDenied):
        cluster.as_principal(Principal("bob")).create_replication_token("/new")
    assert cluster.replication_tokens() == []
    assert cluster.create_replication_token("/new").startswith("plr_")


def test_an_older_catalog_gets_the_token_columns(cluster_path):
    with Cluster.open(cluster_path) as c:
        c.create_replication_token("/s")
    conn = sqlite3.connect(cluster_path / "catalog.db")
    with conn:
        conn.executescript(
            "CREATE TABLE old AS SELECT token_hash, stream, created_ms FROM replication_tokens;"
            "DROP TABLE replication_tokens;"
            "CREATE TABLE replication_tokens (token_hash TEXT PRIMARY KEY, stream TEXT NOT NULL,"
            " created_ms INTEGER NOT NULL) WITHOUT ROWID;"
            "INSERT INTO replication_tokens SELECT * FROM old; DROP TABLE old;"
        )
    conn.close()
    with Cluster.open(cluster_path) as c:
        [token] = c.replication_tokens()
        assert (token.stream, token.created_by, token.last_used_ms) == ("/s", "", None)


def test_cli_lists_and_revokes_tokens(cluster_path):
    with Cluster.open(cluster_path) as c:
        c.create_stream("/s")

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(cli, [*args])
        assert result.exit_code == code, result.output
        return result.output

    first = run("replica", "token", "--cluster", str(cluster_path), "/s").strip()
    second = run("replica", "token", "--cluster", str(cluster_path), "/s").strip()
    table = run("replica", "tokens", "--cluster", str(cluster_path))
    assert hash_token(first)[:12] in table and hash_token(second)[:12] in table
    assert first not in table and second not in table
    listed = json.loads(run("replica", "tokens", "--cluster", str(cluster_path), "--json"))
    assert {t["id"] for t in listed} == {hash_token(first)[:12], hash_token(second)[:12]}
    out = run("replica", "revoke", "--cluster", str(cluster_path), hash_token(first)[:12])
    assert "revoked" in out
    listed = json.loads(run("replica", "tokens", "--cluster", str(cluster_path), "--json"))
    assert [t["id"] for t in listed] == [hash_token(second)[:12]]
    run("replica", "revoke", "--cluster", str(cluster_path), "nope", code=1)


def test_a_missing_link_is_named_as_given_not_as_resolved_on_the_server(cluster, tmp_path):
    cluster.create_stream("/s", admin_perm="p")
    (tmp_path / "lead").symlink_to(tmp_path / "secret-place")
    bob = cluster.as_principal(Principal("bob"))
    for target, hidden in (("~/x", str(Path.home())), (str(tmp_path / "lead"), "secret-place")):
        with pytest.raises(errors.InvalidArgument) as info:
            bob.pause_replica("/s", target)
        assert target in str(info.value) and hidden not in str(info.value)
