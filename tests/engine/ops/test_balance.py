"""Rebalancing (engine.ops.balance): sealed partitionlets move between volumes, on real files,
while others read and write, and a move that dies half-way leaves nothing that confuses
a later run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.cli import cli
from engine.ops import balance
from engine.ops.balance import Candidate, plan
from engine.storage import chain_lock as chain_locks
from engine.storage.volume import DELETED, SEALED
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[3]
T = "/s:t"
PL_BYTES = 2000


# --- helpers -----------------------------------------------------------------------------


def open_small(path: Path) -> Cluster:
    return Cluster.open(path, name="balance", partitionlet_bytes=PL_BYTES, volumes=4)


def setup_topic(cluster: Cluster, partitions: int = 1, **policies) -> None:
    cluster.create_stream("/s", ttl=0, **policies)
    cluster.create_topic(T, partitions=partitions)


def pile_on(cluster: Cluster, monkeypatch: pytest.MonkeyPatch, volume: int = 1) -> None:
    """Place every new partitionlet on one volume: the uneven cluster rebalance fixes."""
    monkeypatch.setattr(cluster.placement, "choose", lambda: volume)
    monkeypatch.setattr(cluster.placement, "choose_many", lambda count: [volume] * count)


def produce(
    cluster: Cluster,
    count: int,
    partitions: int = 1,
    start: int = 0,
    flush_every: int = 1,
    keys: int | None = None,
) -> list[tuple[int, int, bytes]]:
    """Send `count` messages of about 60 bytes, round-robin over partitions; returns
    (partition, offset, value) of each, from its metadata."""
    producer = Producer(cluster, acks=1, linger_ms=0)
    futures = []
    try:
        for i in range(start, start + count):
            value = f"message-{i:06d}-".encode() + b"x" * 40
            key = None if keys is None else f"k{i % keys}".encode()
            futures.append(
                (producer.send(T, value=value, key=key, partition=i % partitions), value)
            )
            if (i + 1) % flush_every == 0:
                producer.flush()
        producer.flush()
    finally:
        producer.close()
    out = []
    for future, value in futures:
        meta = future.get(timeout=scaled(30))
        out.append((meta.partition, meta.offset, value))
    return out


def read_all(cluster: Cluster, partitions: int = 1) -> dict[int, list[tuple[int, bytes]]]:
    """Every message of every partition, in the order a consumer gets it."""
    consumer = Consumer(cluster, enable_auto_commit=False)
    tps = [TopicPartition(T, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + scaled(60)
    try:
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "reading stalled"
            for tp, records in consumer.poll(timeout_ms=100).items():
                got[tp.partition].extend((r.offset, r.value) for r in records)
    finally:
        consumer.close()
    return got


def expected(sent: list[tuple[int, int, bytes]], partitions: int = 1):
    want: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    for partition, offset, value in sorted(sent):
        want[partition].append((offset, value))
    return want


def live_rows(cluster: Cluster) -> dict[int, dict[int, tuple[int, int]]]:
    return {vid: vol.live_partitionlets() for vid, vol in cluster.open_volumes().items()}


def assert_consistent(cluster: Cluster) -> None:
    """Every live volume row is where the catalog places it (no orphan), and every
    partitionlet that took appends has its live row in its volume."""
    placed = cluster.catalog.partitionlet_volumes()
    rows = live_rows(cluster)
    for vid, ids in rows.items():
        for pl_id in ids:
            assert placed.get(pl_id) == vid, f"orphan: partitionlet {pl_id} in volume {vid}"
    for info in cluster.partitionlets():
        if info.messages:
            assert info.id in rows[info.volume], f"partitionlet {info.id} lost its data"
    total = sum(cluster.stream(s.path).bytes for s in cluster.streams())
    assert total == sum(info.bytes for info in cluster.partitionlets())


def sealed(cluster: Cluster):
    return [p for p in cluster.partitionlets(T) if not p.active]


def volume_bytes(cluster: Cluster) -> dict[int, int]:
    return {v.id: v.data_bytes for v in cluster.volumes()}


# --- the planner ---------------------------------------------------------------------------


def test_plan_evens_bytes_and_moves_each_partitionlet_once():
    cands = [Candidate(i, 1, 100) for i in range(1, 13)]
    moves = plan({1: 1200, 2: 0, 3: 0, 4: 0}, cands)
    loads = {1: 1200, 2: 0, 3: 0, 4: 0}
    for cand, target in moves:
        assert cand.volume == 1 and target != 1
        loads[1] -= cand.weight
        loads[target] += cand.weight
    assert loads == {1: 300, 2: 300, 3: 300, 4: 300}
    assert len({c.id for c, _ in moves}) == len(moves) == 9


def test_plan_balanced_or_unhelpful_moves_nothing():
    assert plan({1: 500, 2: 500}, [Candidate(1, 1, 100)]) == []
    # 300 over a gap of 200 would only swap which volume is fuller
    assert plan({1: 400, 2: 200}, [Candidate(1, 1, 300)]) == []
    assert plan({1: 400}, [Candidate(1, 1, 100)]) == []
    assert plan({1: 400, 2: 0}, [Candidate(1, 1, 0)]) == []  # emptied by compaction


def test_plan_picks_the_weight_nearest_half_the_gap_and_honours_max_moves():
    cands = [Candidate(1, 1, 50), Candidate(2, 1, 480), Candidate(3, 1, 900)]
    moves = plan({1: 1430, 2: 470}, cands)
    assert [(c.id, t) for c, t in moves] == [(2, 2)]  # 950 and 950
    capped = plan({1: 1200, 2: 0, 3: 0}, [Candidate(i, 1, 100) for i in range(12)], max_moves=3)
    assert len(capped) == 3
    assert plan({1: 1200, 2: 0}, [Candidate(i, 1, 100) for i in range(12)], max_moves=0) == []


def test_plan_heat_pushes_bytes_away_from_a_hot_volume():
    # equal bytes, but volume 1 takes the writes: its score includes them
    cands = [Candidate(i, 1 + i % 2, 100) for i in range(20)]
    moves = plan({1: 1000 + 600, 2: 1000}, cands)
    assert moves and all(c.volume == 1 and t == 2 for c, t in moves)
    assert len(moves) == 3  # 1300 + 300 vs 1300: within one partitionlet


# --- rebalancing a real cluster ------------------------------------------------------------


def test_uneven_volumes_get_evened(cluster_path, monkeypatch):
    monkeypatch.setattr(balance, "HEAT_WEIGHT", 0.0)  # bytes alone: evenness is exact
    with open_small(cluster_path) as cluster:
        setup_topic(cluster, partitions=2)
        pile_on(cluster, monkeypatch)
        sent = produce(cluster, 600, partitions=2)
        before = volume_bytes(cluster)
        assert before[2] == before[3] == before[4] == 0 and before[1] > 8 * PL_BYTES

        report = balance.rebalance(cluster)

        assert not report.dry_run and report.moves
        assert report.bytes_before == before
        after = volume_bytes(cluster)
        assert report.bytes_after == after
        assert sum(after.values()) == sum(before.values())
        largest = max(p.bytes for p in cluster.partitionlets(T))
        active_bytes = sum(p.bytes for p in cluster.partitionlets(T) if p.active)
        assert max(after.values()) - min(after.values()) <= largest + active_bytes
        on_volume = {p.volume for p in sealed(cluster)}
        assert on_volume == {1, 2, 3, 4}
        for m in report.moves:
            assert m.topic == T and m.from_volume == 1 and m.to_volume in (2, 3, 4)
            assert m.bytes > 0
            info = next(p for p in cluster.partitionlets(T) if p.id == m.partitionlet)
            assert info.volume == m.to_volume and not info.active
        assert_consistent(cluster)
        assert read_all(cluster, 2) == expected(sent, 2)

        again = balance.rebalance(cluster)  # a balanced cluster stays as it is
        assert again.moves == () and again.orphans == ()


def test_heat_is_the_second_term(cluster_path, monkeypatch):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster, partitions=2)
        pile_on(cluster, monkeypatch)
        sent = produce(cluster, 600, partitions=2)
        report = balance.rebalance(cluster)
        hot = {v.volume: v for v in report.volumes}
        assert hot[1].heat > 0 and hot[2].heat == hot[3].heat == hot[4].heat == 0
        # volume 1 took every recent write: it keeps fewer stored bytes than the others
        assert hot[1].bytes_after < min(hot[v].bytes_after for v in (2, 3, 4))
        spread_before = max(v.score_before for v in report.volumes) - min(
            v.score_before for v in report.volumes
        )
        spread_after = max(v.score_after for v in report.volumes) - min(
            v.score_after for v in report.volumes
        )
        assert spread_after < spread_before
        assert all(v.score_after == v.bytes_after + v.heat for v in report.volumes)
        assert_consistent(cluster)
        assert read_all(cluster, 2) == expected(sent, 2)


def test_active_partitionlets_stay(cluster_path, monkeypatch):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster, partitions=3)
        pile_on(cluster, monkeypatch)
        sent = produce(cluster, 450, partitions=3)
        active = {p.id: p.volume for p in cluster.partitionlets(T) if p.active}
        assert len(active) == 3 and set(active.values()) == {1}

        report = balance.rebalance(cluster)

        assert report.moves
        assert not {m.partitionlet for m in report.moves} & set(active)
        assert {p.id: p.volume for p in cluster.partitionlets(T) if p.active} == active
        # the active ones still take appends where they are
        sent += produce(cluster, 30, partitions=3, start=450)
        assert read_all(cluster, 3) == expected(sent, 3)
        with pytest.raises(errors.InvalidPartition):
            balance.move(cluster, next(iter(active)), 2)
        assert_consistent(cluster)


def test_dry_run_changes_nothing(cluster_path, monkeypatch):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster, partitions=2)
        pile_on(cluster, monkeypatch)
        sent = produce(cluster, 400, partitions=2)
        listing = cluster.partitionlets()
        rows = live_rows(cluster)
        version = cluster.catalog.topology_version()
        usage = cluster.stream("/s").bytes

        report = balance.rebalance(cluster, dry_run=True)

        assert report.dry_run and report.moves
        assert sum(report.bytes_after.values()) == sum(report.bytes_before.values())
        assert report.bytes_after != report.bytes_before  # projected
        assert cluster.partitionlets() == listing
        assert live_rows(cluster) == rows
        assert cluster.catalog.topology_version() == version
        assert cluster.stream("/s").bytes == usage
        # the real run does what the dry run announced
        real = balance.rebalance(cluster)
        assert [(m.partitionlet, m.to_volume) for m in real.moves] == [
            (m.partitionlet, m.to_volume) for m in report.moves
        ]
        assert real.bytes_after == report.bytes_after
        assert read_all(cluster, 2) == expected(sent, 2)


def test_max_moves(cluster_path, monkeypatch):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster)
        pile_on(cluster, monkeypatch)
        produce(cluster, 300)
        assert len(balance.rebalance(cluster, max_moves=2).moves) == 2
        assert balance.rebalance(cluster, max_moves=0).moves == ()
        with pytest.raises(errors.InvalidArgument):
            balance.rebalance(cluster, max_moves=-1)
        assert cluster.rebalance().moves  # the Cluster method: no limit
        assert_consistent(cluster)


def test_move_back_over_the_tombstone(cluster_path):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster)
        sent = produce(cluster, 200)
        pl = sealed(cluster)[0]
        home = pl.volume
        away = home % 4 + 1
        assert balance.move(cluster, pl.id, away).to_volume == away
        assert cluster.volume(home).state(pl.id).state == DELETED  # tombstone
        assert balance.move(cluster, pl.id, home).to_volume == home  # replaces it
        state = cluster.volume(home).state(pl.id)
        assert state.state == SEALED and state.bytes == pl.bytes
        assert balance.move(cluster, pl.id, home) is None  # already there
        assert_consistent(cluster)
        assert read_all(cluster) == expected(sent)


# --- readers and writers during moves --------------------------------------------------------


def test_reader_with_a_stale_chain_skips_nothing(cluster_path):
    """A reader that cached the chain before the switch reads the purged source: it must
    re-read the chain instead of jumping over the partitionlet."""
    with open_small(cluster_path) as cluster:
        setup_topic(cluster)
        sent = produce(cluster, 300)
        topic_id = cluster.catalog.topic("/s", "t").id
        log = cluster.partition_log(topic_id, 0, T)
        records, position = log.read(0, 5, None)  # chain cached, batches read ahead
        for p in sealed(cluster):
            assert balance.move(cluster, p.id, p.volume % 4 + 1) is not None
        while True:
            more, position = log.read(position, 7, None)
            if not more:
                break
            records.extend(more)
        assert [(r.offset, r.value) for r in records] == expected(sent)[0]


def test_concurrent_readers_read_everything_once_in_order(cluster_path):
    """Two readers start at offset 0 while rebalance moves the sealed partitionlets under
    them, round after round: a consumer (which re-reads chains when the topology version
    moves) and a bare PartitionLog that never looks at that version, so that every move
    under it is read through a stale chain."""
    with open_small(cluster_path) as cluster:
        setup_topic(cluster)
        sent = produce(cluster, 500)
        want = expected(sent)[0]
        got: dict[str, list[tuple[int, bytes]]] = {"consumer": [], "log": []}
        failure: list[BaseException] = []

        def consumer_reader() -> None:
            try:
                with Cluster.open(cluster_path) as other:  # its own caches, like a process
                    consumer = Consumer(other, enable_auto_commit=False, max_poll_records=3)
                    tp = TopicPartition(T, 0)
                    consumer.assign([tp])
                    consumer.seek_to_beginning(tp)
                    deadline = time.monotonic() + scaled(120)
                    while consumer.position(tp) < len(want) and time.monotonic() < deadline:
                        for records in consumer.poll(timeout_ms=50).values():
                            got["consumer"].extend((r.offset, r.value) for r in records)
                    consumer.close()
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)

        def log_reader() -> None:
            try:
                with Cluster.open(cluster_path) as other:
                    log = other.partition_log(other.catalog.topic("/s", "t").id, 0, T)
                    position = 0
                    deadline = time.monotonic() + scaled(120)
                    while position < len(want) and time.monotonic() < deadline:
                        records, position = log.read(position, 3, None)
                        got["log"].extend((r.offset, r.value) for r in records)
                        time.sleep(0.001)
            except BaseException as exc:
                failure.append(exc)

        threads = [threading.Thread(target=consumer_reader), threading.Thread(target=log_reader)]
        for thread in threads:
            thread.start()
        moves = rounds = 0
        while any(thread.is_alive() for thread in threads):
            rounds += 1
            for p in sealed(cluster):  # pile them up on one volume ...
                if balance.move(cluster, p.id, rounds % 4 + 1) is not None:
                    moves += 1
            moves += len(balance.rebalance(cluster).moves)  # ... and spread them again
        for thread in threads:
            thread.join()
        assert not failure, failure
        assert moves > 0
        assert got["consumer"] == want
        assert got["log"] == want
        assert_consistent(cluster)


def test_producer_during_rebalance_loses_nothing(cluster_path, monkeypatch):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster, partitions=3)
        pile_on(cluster, monkeypatch)  # rebalance has new sealed partitionlets to move
        stop = threading.Event()
        sent: list[tuple[int, int, bytes]] = []
        failure: list[BaseException] = []

        def writer() -> None:
            try:
                start = 0
                while not stop.is_set():
                    sent.extend(produce(cluster, 30, partitions=3, start=start, flush_every=3))
                    start += 30
            except BaseException as exc:
                failure.append(exc)

        thread = threading.Thread(target=writer)
        thread.start()
        moves = rounds = 0
        deadline = time.monotonic() + scaled(120)
        try:
            while (moves < 20 or rounds < 5) and time.monotonic() < deadline:
                moves += len(balance.rebalance(cluster).moves)
                rounds += 1
        finally:
            stop.set()
            thread.join()
        assert not failure, failure
        assert moves > 0
        balance.rebalance(cluster)
        got = read_all(cluster, 3)
        assert got == expected(sent, 3)
        for partition, records in got.items():
            assert [o for o, _ in records] == list(range(len(records))), partition
        assert_consistent(cluster)


def test_compaction_waits_for_a_move(cluster_path, monkeypatch):
    """Compaction and moves take the same chain lock: a compaction that starts while a
    partitionlet is being moved waits (here: gives up after a short timeout) instead of
    rewriting the source behind the copy."""
    from engine.storage.catalog import Catalog

    with open_small(cluster_path) as cluster:
        setup_topic(cluster, compact=True, min_compaction_lag_ms=0)
        produce(cluster, 300, keys=5)
        pl = sealed(cluster)[0]
        switch = Catalog.move_partitionlet
        refused = []

        def compact_then_switch(self, *args, **kwargs):
            if not refused:
                monkeypatch.setattr(chain_locks, "CHAIN_LOCK_TIMEOUT_S", 0.2)
                with pytest.raises(errors.FileLocked):
                    cluster.compact()
                refused.append(True)
            return switch(self, *args, **kwargs)

        monkeypatch.setattr(Catalog, "move_partitionlet", compact_then_switch)
        target = pl.volume % 4 + 1
        assert balance.move(cluster, pl.id, target) is not None
        assert refused
        monkeypatch.undo()
        moved = next(p for p in cluster.partitionlets(T) if p.id == pl.id)
        assert moved.volume == target
        assert moved.messages == pl.messages  # the move copied it whole
        assert cluster.compact().messages_removed > 0  # and compaction runs after it
        got = read_all(cluster)[0]
        keys_at = {}
        for offset, value in got:
            keys_at.setdefault(int(value.split(b"-")[1]) % 5, []).append(offset)
        # in the moved partitionlet no key is older than a later message of that key
        for offset, value in got:
            if pl.base_offset <= offset <= pl.last_offset:
                later = [o for o in keys_at[int(value.split(b"-")[1]) % 5] if o > offset]
                assert not later, (offset, value)
        assert_consistent(cluster)


def test_volume_copy_and_conditional_purge(cluster_path):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster)
        produce(cluster, 200)
        pl = sealed(cluster)[0]
        src = cluster.volume(pl.volume)
        dst = cluster.volume(pl.volume % 4 + 1)
        copy = dst.copy_partitionlet_from(src, pl.id)
        assert copy == src.state(pl.id) and copy.state == SEALED
        assert dst.read(pl.id, 0, 1000) == src.read(pl.id, 0, 1000)
        # a refresh only replaces the copy it expects
        other = dataclasses.replace(copy, messages=copy.messages - 1)
        assert dst.copy_partitionlet_from(src, pl.id, expect_here=other) is None
        assert dst.copy_partitionlet_from(src, pl.id, expect_here=copy) == copy
        assert not src.purge_if_unchanged(pl.id, other)
        assert src.state(pl.id).state == SEALED
        assert src.purge_if_unchanged(pl.id, copy)
        assert src.state(pl.id).state == DELETED
        assert dst.copy_partitionlet_from(src, pl.id) is None  # nothing sealed to copy
        active = next(p for p in cluster.partitionlets(T) if p.active)
        elsewhere = cluster.volume(active.volume % 4 + 1)
        assert elsewhere.copy_partitionlet_from(cluster.volume(active.volume), active.id) is None
        with pytest.raises(errors.InvalidArgument):
            src.copy_partitionlet_from(src, pl.id)


# --- a move that dies half-way ----------------------------------------------------------------

CRASH = """
import os, sys
from engine import Cluster
from engine.ops import balance
from engine.storage.catalog import Catalog
from engine.storage.volume import Volume

path, where, pl_id, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cluster = Cluster.open(path)
if where == "before-switch":
    Catalog.move_partitionlet = lambda *a, **k: os._exit(17)
else:
    Volume.purge_if_unchanged = lambda *a, **k: os._exit(17)
balance.move(cluster, pl_id, target)
sys.exit("the move finished")
"""


def die_during_move(
    tmp_path: Path, cluster_path: Path, where: str, pl_id: int, target: int
) -> None:
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(CRASH))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(script), str(cluster_path), where, str(pl_id), str(target)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=scaled(120),
    )
    assert proc.returncode == 17, proc.stderr


@pytest.mark.parametrize("then", ["rebalance", "move"])
def test_crash_between_copy_and_switch(tmp_path, cluster_path, then):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster)
        sent = produce(cluster, 300)
        pl = sealed(cluster)[0]
    target = pl.volume % 4 + 1
    die_during_move(tmp_path, cluster_path, "before-switch", pl.id, target)

    with Cluster.open(cluster_path) as cluster:  # opening is not confused by the orphan
        assert cluster.catalog.partitionlet(pl.id).volume_id == pl.volume
        orphan = cluster.volume(target).state(pl.id)
        assert orphan.state == SEALED and orphan.bytes == pl.bytes  # the copy, unreferenced
        assert read_all(cluster) == expected(sent)  # readers go by the catalog
        if then == "rebalance":
            report = balance.rebalance(cluster)
            assert balance.Orphan(pl.id, target, pl.bytes) in report.orphans
            assert cluster.volume(target).state(pl.id).state in (DELETED, SEALED)
            if cluster.catalog.partitionlet(pl.id).volume_id != target:
                assert cluster.volume(target).state(pl.id).state == DELETED
        # moving it there again copies over whatever the crash left
        if cluster.catalog.partitionlet(pl.id).volume_id != target:
            assert balance.move(cluster, pl.id, target) is not None
        assert cluster.catalog.partitionlet(pl.id).volume_id == target
        assert cluster.volume(pl.volume).state(pl.id).state == DELETED
        assert_consistent(cluster)
        assert read_all(cluster) == expected(sent)


def test_crash_between_switch_and_delete(tmp_path, cluster_path):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster)
        sent = produce(cluster, 300)
        pl = sealed(cluster)[0]
        usage = cluster.stream("/s").bytes
    target = pl.volume % 4 + 1
    die_during_move(tmp_path, cluster_path, "after-switch", pl.id, target)

    with Cluster.open(cluster_path) as cluster:
        assert cluster.catalog.partitionlet(pl.id).volume_id == target
        assert cluster.volume(pl.volume).state(pl.id).state == SEALED  # the orphan
        assert cluster.stream("/s").bytes == usage + pl.bytes  # counted twice until cleaned
        assert read_all(cluster) == expected(sent)

        report = balance.rebalance(cluster, dry_run=True)  # reports, keeps
        assert balance.Orphan(pl.id, pl.volume, pl.bytes) in report.orphans
        assert cluster.volume(pl.volume).state(pl.id).state == SEALED

        assert balance.Orphan(pl.id, pl.volume, pl.bytes) in balance.clean_orphans(cluster)
        assert cluster.volume(pl.volume).state(pl.id).state == DELETED
        assert cluster.stream("/s").bytes == usage
        assert balance.rebalance(cluster).orphans == ()
        assert_consistent(cluster)
        assert read_all(cluster) == expected(sent)


def test_rebalances_are_serialized(cluster_path, monkeypatch):
    monkeypatch.setattr(chain_locks, "CHAIN_LOCK_TIMEOUT_S", 0.2)
    with open_small(cluster_path) as cluster:
        setup_topic(cluster)
        with chain_locks.chain_lock(cluster.path):
            result: list[BaseException] = []

            def other() -> None:
                try:
                    balance.rebalance(cluster)
                except BaseException as exc:
                    result.append(exc)

            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        assert len(result) == 1 and isinstance(result[0], errors.FileLocked)
        assert balance.rebalance(cluster).moves == ()


# --- the command line ---------------------------------------------------------------------------


def plet(*args: object) -> str:
    result = CliRunner().invoke(
        cli, [str(a) for a in args], env={"PLET_CLUSTER": None}, catch_exceptions=False
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def test_cli_volume_and_partitionlet_list(cluster_path, monkeypatch):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster, partitions=2)
        pile_on(cluster, monkeypatch)
        produce(cluster, 200, partitions=2)
        cluster.create_topic("/s:other")
        count = len(cluster.partitionlets())
    volumes = json.loads(plet("--cluster", cluster_path, "volume", "list", "--json"))
    assert [v["id"] for v in volumes] == [1, 2, 3, 4]
    assert volumes[0]["data_bytes"] > 0 and volumes[1]["data_bytes"] == 0
    assert volumes[0]["partitionlets"] == count
    text = plet("volume", "list", "--cluster", cluster_path)
    assert text.splitlines()[0].split()[:2] == ["VOLUME", "PATH"]
    assert len(text.splitlines()) == 5

    lets = json.loads(plet("--cluster", cluster_path, "partitionlet", "list", T, "--json"))
    assert len(lets) == count and {p["topic"] for p in lets} == {T}
    assert sum(p["active"] for p in lets) == 2
    assert json.loads(plet("--cluster", cluster_path, "partitionlet", "list", "--json")) == lets
    text = plet("--cluster", cluster_path, "partitionlet", "list")
    assert text.splitlines()[0].startswith("PARTITIONLET") and T in text
    result = CliRunner().invoke(
        cli,
        ["--cluster", str(cluster_path), "partitionlet", "list", "/s:nope"],
        env={"PLET_CLUSTER": None},
    )
    assert result.exit_code == 1 and result.stderr.startswith("error: ")


def test_cli_rebalance(cluster_path, monkeypatch):
    with open_small(cluster_path) as cluster:
        setup_topic(cluster, partitions=2)
        pile_on(cluster, monkeypatch)
        sent = produce(cluster, 400, partitions=2)
        listing = cluster.partitionlets()

    dry = json.loads(plet("--cluster", cluster_path, "rebalance", "--dry-run", "--json"))
    assert dry["dry_run"] is True and len(dry["moves"]) > 2
    assert dry["bytes_moved"] == sum(m["bytes"] for m in dry["moves"])
    assert {"partitionlet", "topic", "partition", "from_volume", "to_volume", "bytes"} == set(
        dry["moves"][0]
    )
    text = plet("--cluster", cluster_path, "rebalance", "--dry-run")
    assert text.startswith("would move") and "AFTER (projected)" in text
    with Cluster.open(cluster_path) as cluster:
        assert cluster.partitionlets() == listing

    one = json.loads(plet("--cluster", cluster_path, "rebalance", "--max-moves", "1", "--json"))
    assert one["dry_run"] is False and len(one["moves"]) == 1
    text = plet("--cluster", cluster_path, "rebalance")
    assert text.startswith("moved ")
    assert "volumes are balanced" in plet("--cluster", cluster_path, "rebalance")
    bad = CliRunner().invoke(
        cli,
        ["--cluster", str(cluster_path), "rebalance", "--max-moves", "-1"],
        env={"PLET_CLUSTER": None},
    )
    assert bad.exit_code == 2
    with Cluster.open(cluster_path) as cluster:
        # volume 1 took every write: the others hold the sealed data now
        assert {p.volume for p in cluster.partitionlets() if not p.active} >= {2, 3, 4}
        assert_consistent(cluster)
        assert read_all(cluster, 2) == expected(sent, 2)
