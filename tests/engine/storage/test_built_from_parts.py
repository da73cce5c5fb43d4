"""Storage is built from its parts (the catalog, the volumes, a Clock, settings), never from
the `Cluster` above it: no module of engine/storage imports engine.cluster, not even for
its annotations, and the storage classes work without one."""

from __future__ import annotations

import ast
from pathlib import Path

import engine.storage
from engine.clock import FakeClock
from engine.storage import batch
from engine.storage.appender import Appender
from engine.storage.catalog import Catalog
from engine.storage.chain_lock import chain_lock
from engine.storage.log import PartitionLog
from engine.storage.placement import Placement
from engine.storage.volume import BatchWrite, Volume

STORAGE = Path(engine.storage.__file__).parent


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_storage_module_imports_the_cluster():
    modules = sorted(STORAGE.glob("*.py"))
    assert len(modules) > 10
    users = [p.name for p in modules if "engine.cluster" in imported_modules(p)]
    assert users == []


def test_the_old_segments_module_still_names_what_moved():
    from engine.storage import segments

    assert (segments.Placement, segments.Appender, segments.chain_lock) == (
        Placement,
        Appender,
        chain_lock,
    )


def test_a_partition_is_written_and_read_with_no_cluster(tmp_path):
    clock = FakeClock(now_ms=1_800_000_000_000)
    catalog = Catalog(tmp_path / "catalog.db", clock)
    catalog.initialize({"cluster_id": "c-1", "name": "parts"})
    catalog.add_volumes(["vol-1.db", "vol-2.db"])
    volumes = {vid: Volume(vid, tmp_path / path, clock) for vid, path in catalog.volumes()}
    for volume in volumes.values():
        volume.initialize("c-1")
    try:
        stream = catalog.create_stream("/p", {}, "tester")
        catalog.create_topics(stream.id, [("t", 1)], exist_ok=False)
        topic = catalog.topic("/p", "t")
        appender = Appender(
            catalog, volumes, Placement(volumes, clock), roll_bytes=1 << 20, roll_ms=1_000
        )
        for value in (b"a", b"b"):
            payload = batch.encode([value], [clock.now_ms()])
            write = BatchWrite(
                stream.id, topic.id, 0, payload, 1, clock.now_ms(), clock.now_ms(), 0, "c-1"
            )
            appender.write([write], sync=False)
            assert write.error is None
            clock.advance(1)  # the second finds the first partitionlet a second old: it rolls
        log = PartitionLog(catalog, lambda pl: volumes[pl.volume_id], topic.id, 0, "/p:t")
        records, position = log.read(0, 10, None)
        assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b")]
        assert position == log.end_offset() == 2
        assert len(catalog.chain(topic.id, 0)) == 2
    finally:
        catalog.close()
        for volume in volumes.values():
            volume.close()
