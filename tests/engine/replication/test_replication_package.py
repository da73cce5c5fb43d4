"""The replication package's shape: link states as an Enum, one graph walk in the engine,
no private field of another engine object, and no import cycle with engine.cluster."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from engine import Cluster, Producer, Replicator
from engine.replication import LinkState, walk
from engine.replication.graph import UPSTREAM

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "engine" / "replication"
STREAM = "/ring"


def _produce(cluster: Cluster, count: int) -> None:
    producer = Producer(cluster)
    for i in range(count):
        producer.send(f"{STREAM}:t", value=f"m{i}".encode())
    producer.flush()
    producer.close()


@pytest.fixture
def ring(cluster, tmp_path):
    """`cluster` (test) -> dc2 -> dc3 -> test on /ring, settled."""
    dc2 = Cluster.open(tmp_path / "dc2", name="dc2")
    dc3 = Cluster.open(tmp_path / "dc3", name="dc3")
    cluster.create_stream(STREAM, ttl=0)
    _produce(cluster, 5)
    cluster.add_replica(STREAM, dc2.path)
    dc2.add_replica(STREAM, dc3.path)
    dc3.add_replica(STREAM, cluster.path)
    for c in (cluster, dc2, dc3, cluster):
        with Replicator(c) as r:
            r.run_once()
    yield cluster, dc2, dc3
    dc2.close()
    dc3.close()


def test_link_states_are_an_enum_that_reads_as_the_old_strings(ring):
    test, dc2, _ = ring
    [info] = test.replicas(STREAM)
    assert info.state is LinkState.IN_SYNC
    assert info.state == "in_sync" and f"{info.state}" == "in_sync"
    assert json.dumps({"state": info.state}) == '{"state": "in_sync"}'
    test.pause_replica(STREAM, dc2.path)
    assert test.replicas(STREAM)[0].state is LinkState.PAUSED
    assert [s.value for s in LinkState] == ["in_sync", "pending", "paused", "broken", "conflict"]


def test_the_walk_finds_the_ring_from_any_cluster(ring):
    test, dc2, dc3 = ring
    graph = walk(dc2)
    assert [n.name for n in graph.nodes] == ["dc2", "dc3", "test"]
    assert graph.this.key == dc2.id
    edges = {(lk.source, lk.target): lk for lk in graph.links}
    assert set(edges) == {(dc2.id, dc3.id), (dc3.id, test.id), (test.id, dc2.id)}
    assert all(lk.state is LinkState.IN_SYNC for lk in graph.links)
    # only this cluster's own links are measured; the others are as recorded
    assert [lk.measured for lk in graph.links if lk.source == dc2.id] == [True]
    assert not any(lk.measured for lk in graph.links if lk.source != dc2.id)
    [cycle] = graph.cycles()  # begins at its least node (walk(dc2, STREAM) begins at dc2)
    i = cycle.index((dc2.id, STREAM))
    assert cycle[i:] + cycle[:i] == [(dc2.id, STREAM), (dc3.id, STREAM), (test.id, STREAM)]


def test_a_walk_from_a_stream_begins_its_cycles_there_and_skips_other_streams(ring):
    test, dc2, dc3 = ring
    test.create_stream("/other", ttl=0)
    test.add_replica("/other", dc3.path, paused=True)
    whole = walk(test)
    assert {(lk.stream, lk.target) for lk in whole.links if lk.source == test.id} == {
        (STREAM, dc2.id),
        ("/other", dc3.id),
    }
    graph = walk(test, STREAM)
    assert [(lk.source, lk.stream) for lk in graph.links] == [
        (test.id, STREAM),
        (dc2.id, STREAM),
        (dc3.id, STREAM),
    ]
    assert [i.stream for i in graph.own] == [STREAM]
    [cycle] = graph.cycles()
    assert cycle[0] == (test.id, STREAM)


def test_a_walk_without_measuring_finds_the_same_graph_as_recorded(ring, monkeypatch):
    """measure=False (engine.served_clusters' look at which clusters are linked): nothing
    is measured, so no target is opened to measure a lag."""
    from engine.replication import status

    test, dc2, dc3 = ring
    test.create_stream("/other", ttl=0)
    test.add_replica("/other", dc3.path, paused=True)
    monkeypatch.setattr(status, "measured", lambda *a: pytest.fail("measured a link"))
    graph = walk(test, measure=False)
    assert [n.name for n in graph.nodes] == ["test", "dc2", "dc3"]
    assert {(lk.source, lk.stream, lk.target) for lk in graph.links} == {
        (test.id, STREAM, dc2.id),
        (test.id, "/other", dc3.id),
        (dc2.id, STREAM, dc3.id),
        (dc3.id, STREAM, test.id),
    }
    assert not any(lk.measured for lk in graph.links)
    assert {(i.stream, i.state) for i in graph.own} == {
        (STREAM, LinkState.IN_SYNC),
        ("/other", LinkState.PAUSED),
    }
    one = walk(test, STREAM, measure=False)
    assert [i.stream for i in one.own] == [STREAM]
    assert len(one.links) == 3


def test_upstreams_are_shown_not_opened_unless_asked(cluster, tmp_path):
    source = Cluster.open(tmp_path / "src", name="src")
    try:
        source.create_stream(STREAM, ttl=0)
        source.add_replica(STREAM, cluster.path)
        # From the target: the source is known by its upstream record only.
        graph = walk(cluster)
        [link] = graph.links
        assert (link.source, link.target, link.state) == (source.id, cluster.id, UPSTREAM)
        assert graph.node(source.id).name == "src"
        # A local user may follow it: the source's own link, as it recorded it.
        followed = walk(cluster, STREAM, follow_upstreams=True)
        [link] = followed.links
        assert (link.source, link.state, link.measured) == (source.id, LinkState.IN_SYNC, False)
    finally:
        source.close()


def test_a_missing_directory_is_a_broken_node_and_nothing_is_created(ring, tmp_path):
    test, dc2, _ = ring
    dc2.close()
    (tmp_path / "dc2").rename(tmp_path / "gone")
    graph = walk(test)
    node = graph.node(dc2.id)
    assert not node.reachable and "no cluster at" in (node.reason or "")
    assert [lk.state for lk in graph.links if lk.source == test.id] == [LinkState.BROKEN]
    assert not (tmp_path / "dc2").exists()


def _sources() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(PACKAGE.glob("*.py"))}


def test_replication_touches_no_private_field_of_another_engine_object():
    private = re.compile(r"\b(?!self\b)\w+\._(?!_)\w+")
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path, text in _sources().items()
        for number, line in enumerate(text.splitlines(), 1)
        if private.search(line.split("#")[0])
    ]
    assert found == []


def _runtime_imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """(module, inside a function) of every import not under `if TYPE_CHECKING:`."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other, in_function)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                found.extend((f"{child.module}.{alias.name}", in_function) for alias in child.names)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(tree, False)
    return found


def test_no_import_cycle_between_cluster_and_replication():
    cluster = ast.parse((ROOT / "engine" / "cluster.py").read_text())
    assert [m for m, _ in _runtime_imports(cluster) if m.startswith("engine.replication")] == []
    for path, text in _sources().items():
        late = [m for m, inside in _runtime_imports(ast.parse(text)) if inside]
        assert late == [], f"{path.name} imports inside a function: {late}"
