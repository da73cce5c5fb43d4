"""Damaged files, broken for real (tests/damage.py): what the user sees is an error naming
the partition, `plet check` naming the problem, the other partitions served, and no offset
handed out twice (issue 26)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine import Cluster, Consumer, Producer, TopicPartition, errors
from engine.cli import cli
from engine.storage import scan
from tests import damage

T = "/s:t"
PARTITIONS = 4
BATCHES = 50  # per partition, of BATCH messages each
BATCH = 10


def make_cluster(path: Path, **kwargs: object) -> None:
    """Two volumes, one topic of four partitions, 500 messages each in 50 batches."""
    with Cluster.open(path, volumes=2, **kwargs) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=PARTITIONS)
        producer = Producer(cluster, acks=1)
        for b in range(BATCHES):
            for p in range(PARTITIONS):
                values = [b"p%d-%d" % (p, b * BATCH + i) for i in range(BATCH)]
                producer.send_batch(T, p, values)
            producer.flush()
        producer.close()


def placement(path: Path) -> dict[int, set[int]]:
    """{partition: the volumes its partitionlets are on}."""
    with Cluster.open(path) as cluster:
        found: dict[int, set[int]] = {}
        for pl in cluster.partitionlets(T):
            found.setdefault(pl.partition, set()).add(pl.volume)
        return found


def volume_file(path: Path, volume_id: int) -> Path:
    return path / "volumes" / f"vol-{volume_id}.db"


def read(cluster: Cluster, partition: int) -> list[tuple[int, bytes]]:
    consumer = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(T, partition)])
        got: list[tuple[int, bytes]] = []
        while True:
            batch = consumer.poll(timeout_ms=50)
            records = [(r.offset, r.value) for rs in batch.values() for r in rs]
            if not records:
                return got
            got += records
    finally:
        consumer.close()


def produce(cluster: Cluster, partition: int, value: bytes) -> int:
    producer = Producer(cluster, acks=1)
    try:
        future = producer.send(T, value=value, partition=partition)
        producer.flush()
        return future.get(timeout=10).offset
    finally:
        producer.close()


def plet_check(path: Path, *options: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["check", "--cluster", str(path), *options])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def expected(partition: int) -> list[tuple[int, bytes]]:
    return [(i, b"p%d-%d" % (partition, i)) for i in range(BATCHES * BATCH)]


@pytest.fixture
def damaged(cluster_path: Path):
    """A cluster made by `make_cluster`, checkpointed so its pages are in the files."""
    make_cluster(cluster_path)
    for f in [cluster_path / "catalog.db", *sorted((cluster_path / "volumes").glob("*.db"))]:
        damage.checkpoint(f)
    return cluster_path


def victim_and_others(path: Path) -> tuple[int, int, list[int]]:
    """A partition, its volume, and the partitions that live on the other volume."""
    where = placement(path)
    victim = 0
    (volume,) = where[victim]
    others = [p for p, vols in where.items() if volume not in vols]
    assert others, where
    return victim, volume, others


# --- the clean case ----------------------------------------------------------------------


def test_a_sound_cluster_checks_clean_and_remembers_it(damaged):
    code, out = plet_check(damaged)
    assert code == 0, out
    assert "no problems found" in out
    assert "2 volumes, 4 partitionlets" in out
    code, out = plet_check(damaged, "--quick", "--json")
    data = json.loads(out)
    assert (code, data["ok"], data["quick"], data["problems"]) == (0, True, True, [])
    from engine.ops import check as checking

    with Cluster.open(damaged) as cluster:
        last = checking.last_check(cluster)
    assert last is not None and last.ok and last.quick


# --- an index page -----------------------------------------------------------------------


def test_flipped_index_page_stops_readers_and_is_repaired(damaged):
    victim, volume, others = victim_and_others(damaged)
    vol = volume_file(damaged, volume)
    with Cluster.open(damaged) as cluster:
        pl_id = next(pl.id for pl in cluster.partitionlets(T) if pl.partition == victim)
    # The index's first entries of the victim's partitionlet get a bit of their offset
    # flipped: a seek for offset 0 lands in the middle, as a bad sector would make it.
    (page,) = damage.pages_of(vol, "batches_by_offset")
    flipped = 0
    for cell in damage.values(vol, page):
        (_, _, partitionlet), (at, size, last) = cell[0], cell[1]
        if partitionlet == pl_id and isinstance(last, int) and last < 200 and size == 1:
            damage.flip(vol, at, 1, 0x80 if last < 128 else 0x00)
            flipped += 1
    assert flipped >= 10

    with Cluster.open(damaged) as cluster:
        with pytest.raises(errors.DamagedPartition) as info:
            read(cluster, victim)
        message = str(info.value)
        assert f"partition {victim} of topic {T}" in message
        assert "plet check" in message
        for p in others:  # the other volume's partitions are served whole
            assert read(cluster, p) == expected(p)
        # Spark's scan reads the volume through the same index: it stops as well
        end = BATCHES * BATCH
        (task,) = cluster.scan_plan({TopicPartition(T, victim): (0, end)})
        with pytest.raises(errors.DamagedPartition) as info:
            scan.read(task)
        assert f"partition {victim} of topic {T}" in str(info.value)
        for p in others:
            tasks = cluster.scan_plan({TopicPartition(T, p): (0, end)})
            assert (
                sum(b.last_offset - b.base_offset + 1 for t in tasks for b in scan.read(t)) == end
            )

    code, out = plet_check(damaged)
    assert code == 1
    assert f"{T} partition {victim} (volume {volume})" in out and "batches_by_offset" in out
    assert "plet check --repair" in out

    code, out = plet_check(damaged, "--repair")
    assert code == 0, out
    assert "repaired 1 problem" in out and "no problems found" in out
    with Cluster.open(damaged) as cluster:
        assert read(cluster, victim) == expected(victim)


def test_malformed_index_page_names_the_partition_and_is_rebuilt(damaged):
    victim, volume, others = victim_and_others(damaged)
    vol = volume_file(damaged, volume)
    # Flipped bits in the page's cell pointers: today a reader skips the first 320
    # messages without a word; REINDEX cannot walk the page to free it.
    (page,) = damage.pages_of(vol, "batches_by_offset")
    damage.flip(vol, damage.page_offset(vol, page) + 8, 64, 0x04)

    with Cluster.open(damaged) as cluster:
        with pytest.raises(errors.DamagedPartition) as info:
            read(cluster, victim)
        assert f"partition {victim} of topic {T}" in str(info.value)
        assert f"volume {volume}" in str(info.value)
        for p in others:
            assert read(cluster, p) == expected(p)

    code, out = plet_check(damaged)
    assert code == 1
    assert f"[integrity] {T} partition {victim} (volume {volume})" in out
    code, out = plet_check(damaged, "--repair")
    assert code == 0, out
    with Cluster.open(damaged) as cluster:
        for p in range(PARTITIONS):
            assert read(cluster, p) == expected(p)


# --- a volume's partitionlets page -------------------------------------------------------


def test_flipped_partitionlets_row_refuses_writes_instead_of_reusing_offsets(damaged):
    victim, volume, others = victim_and_others(damaged)
    vol = volume_file(damaged, volume)
    # The victim's row: its next offset (500 = 0x01f4) loses a bit and reads 244.
    (page,) = damage.pages_of(vol, "partitionlets")
    for cell in damage.values(vol, page):
        if cell[3][2] == victim:  # partition
            at, _, next_offset = cell[5]
            assert next_offset == BATCHES * BATCH
            damage.flip(vol, at, 1, 0x01)
            break
    else:
        raise AssertionError("no row of the victim")

    with Cluster.open(damaged) as cluster:
        with pytest.raises(errors.DamagedPartition) as info:
            produce(cluster, victim, b"new")
        message = str(info.value)
        assert f"partition {victim} of topic {T}" in message
        assert "next offset is 244" in message and "up to 499" in message
        # no offset was handed out twice: the partition holds what it held
        assert read(cluster, victim) == expected(victim)
        for p in others:
            assert produce(cluster, p, b"more") == BATCHES * BATCH

    code, out = plet_check(damaged)
    assert code == 1
    assert f"{T} partition {victim} (volume {volume})" in out
    assert "next offset is 244" in out
    # the batches still reach the catalog's mark: a damaged row, not lost commits
    assert "lost commits" not in out
    code, out = plet_check(damaged, "--quick")  # asks the index what the batches reach
    assert code == 1 and "lost commits" not in out, out
    assert "next offset is 244, it holds offsets up to 499" in out

    code, out = plet_check(damaged, "--repair")
    assert code == 0, out
    with Cluster.open(damaged) as cluster:
        assert produce(cluster, victim, b"after") == BATCHES * BATCH


# --- a catalog page ----------------------------------------------------------------------


def test_flipped_catalog_row_stops_readers_instead_of_skipping(cluster_path):
    make_cluster(cluster_path, partitionlet_bytes=2048)  # several partitionlets each
    catalog = cluster_path / "catalog.db"
    damage.checkpoint(catalog)
    with Cluster.open(cluster_path) as cluster:
        chain = [pl for pl in cluster.partitionlets(T) if pl.partition == 0]
        first = chain[0]
    assert len(chain) > 2 and not first.active
    true_end = first.last_offset + 1
    # The first partitionlet's end offset in the catalog gains a bit: it now claims
    # offsets its volume never held.
    hit = 0
    for page in damage.pages_of(catalog, "partitionlets"):
        for cell in damage.values(catalog, page):
            partition, base, (at, size, end) = cell[2][2], cell[4][2], cell[5]
            if (partition, base, end) == (0, 0, true_end) and size >= 2:
                damage.flip(catalog, at, 1, 0x01)  # + 256 (its high byte was 0)
                hit += 1
    assert hit == 1

    with Cluster.open(cluster_path) as cluster:
        with pytest.raises(errors.DamagedPartition) as info:
            read(cluster, 0)
        assert f"partition 0 of topic {T}" in str(info.value)
        assert f"its volume {first.volume} holds 0..{true_end - 1}" in str(info.value)
        for p in range(1, PARTITIONS):
            assert read(cluster, p) == expected(p)

    code, out = plet_check(cluster_path)
    assert code == 1
    assert f"{T} partition 0" in out and "a hole in the chain" in out
    code, out = plet_check(cluster_path, "--repair")
    assert code == 0, out
    with Cluster.open(cluster_path) as cluster:
        assert read(cluster, 0) == expected(0)


# --- a missing volume, a zeroed header ---------------------------------------------------


def _served_without(path: Path, volume: int, others: list[int], victim: int) -> None:
    with Cluster.open(path) as cluster:
        assert list(cluster.damaged_volumes()) == [volume]
        listed = {v.id: v for v in cluster.volumes()}
        assert [v for v in listed if listed[v].damage is None] == [v for v in (1, 2) if v != volume]
        assert listed[volume].damage == cluster.damaged_volumes()[volume]
        assert listed[volume].partitionlets == len(
            [pl for pl in cluster.partitionlets(T) if pl.volume == volume]
        )
        # what the catalog knows of the victim's partition: its range, marked damaged
        (part,) = [p for p in cluster.topic(T).partitions if p.partition == victim]
        assert part.log_end_offset == BATCHES * BATCH
        assert all(pl.damage for pl in part.partitionlets if pl.volume == volume)
        for p in others:
            assert read(cluster, p) == expected(p)
            assert produce(cluster, p, b"more") == BATCHES * BATCH
        with pytest.raises(errors.DamagedPartition) as info:
            read(cluster, victim)
        assert f"partition {victim} of topic {T}" in str(info.value)
        assert f"vol-{volume}.db" in str(info.value)
        with pytest.raises(errors.DamagedPartition) as info:
            produce(cluster, victim, b"lost?")
        assert f"partition {victim} of topic {T}" in str(info.value)
    result = CliRunner().invoke(
        cli, ["consume", T, "--cluster", str(path), "--from-beginning", "--partition", str(victim)]
    )
    assert result.exit_code == 1
    assert f"partition {victim} of topic {T}" in result.output
    code, out = plet_check(path)
    assert code == 1
    assert f"vol-{volume}.db" in out
    assert f"{T} partition {victim} (volume {volume}): cannot be read or written" in out
    assert "replica" in out
    result = CliRunner().invoke(cli, ["topic", "info", T, "--cluster", str(path)])
    assert result.exit_code == 0, result.output
    assert f"volume {volume} is damaged" in result.output
    assert f"{volume} (damaged)" in result.output
    assert f"0..{BATCHES * BATCH:,}" in result.output  # the catalog's range, not "empty"
    result = CliRunner().invoke(cli, ["volume", "list", "--cluster", str(path)])
    assert result.exit_code == 0, result.output
    assert f"volume {volume} is damaged" in result.output


def test_missing_volume_leaves_the_others_served(damaged):
    victim, volume, others = victim_and_others(damaged)
    saved = volume_file(damaged, volume).read_bytes()
    for suffix in ("", "-wal", "-shm"):
        Path(str(volume_file(damaged, volume)) + suffix).unlink(missing_ok=True)
    _served_without(damaged, volume, others, victim)
    assert not volume_file(damaged, volume).exists()  # never made again, empty
    # the topic can still be deleted: its space on the missing volume waits for the file,
    # and is freed by the first open that finds it back
    with Cluster.open(damaged) as cluster:
        cluster.delete_topic(T)
        assert cluster.pending_purges() > 0
    volume_file(damaged, volume).write_bytes(saved)
    with Cluster.open(damaged) as cluster:
        assert cluster.pending_purges() == 0
    code, out = plet_check(damaged)
    assert code == 0, out


def test_unreadable_catalog_is_the_one_problem(damaged):
    (damaged / "catalog.db").write_bytes(b"\x00garbage" * 1000)
    code, out = plet_check(damaged)
    assert code == 1
    assert "catalog" in out and "not a readable SQLite database" in out
    assert "replica" in out or "backup" in out


def test_zeroed_volume_header_leaves_the_others_served(damaged):
    victim, volume, others = victim_and_others(damaged)
    vol = volume_file(damaged, volume)
    with open(vol, "r+b") as f:
        f.write(bytes(100))
    _served_without(damaged, volume, others, victim)


# --- a WAL cut short after kill -9 -------------------------------------------------------

PRODUCER = textwrap.dedent(
    """
    import sys
    from engine import Cluster, Consumer, Producer, TopicPartition
    from engine.storage import appender, connection, volume
    # every append stays in the WAL, never checkpointed: neither by the writer nor by the
    # writeback thread (which copies the log into the database every 50 ms, and once the
    # file is quiet). A machine crash loses only log that no checkpoint copied (SQLite
    # fsyncs the log first), so the cut below stands for one only without checkpoints.
    connection.WAL_CHECKPOINT_BYTES = connection.WAL_AHEAD_BYTES = 1 << 30
    volume.Volume._checkpoint_ahead = lambda self, quiet: None
    appender.MARK_INTERVAL_S = 0.0  # the offsets reached saved at every append
    path, partitionlet_bytes = sys.argv[1], int(sys.argv[2])
    with Cluster.open(path, volumes=1, partitionlet_bytes=partitionlet_bytes) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic("/s:t", partitions=2)
    cluster = Cluster.open(path)
    producer = Producer(cluster, acks=1)
    for b in range(100):
        for p in range(2):
            producer.send_batch("/s:t", p, [b"p%d-%d" % (p, b * 10 + i) for i in range(10)])
        producer.flush()
    consumer = Consumer(cluster, group_id="g", auto_offset_reset="earliest")
    consumer.assign([TopicPartition("/s:t", 0), TopicPartition("/s:t", 1)])
    got = 0
    while got < 2000:
        got += sum(len(r) for r in consumer.poll(timeout_ms=100).values())
    consumer.commit()
    print("ready", flush=True)
    sys.stdin.read()  # killed here, before any checkpoint or close
    """
)


def cut_wal_after_kill(cluster_path: Path, tmp_path: Path, partitionlet_bytes: int) -> None:
    """Run PRODUCER in its own process, kill -9 it, then cut the volume's WAL in half."""
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(cluster_path), str(partitionlet_bytes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    wal = cluster_path / "volumes" / "vol-1.db-wal"
    ends = damage.commit_ends(wal)
    assert len(ends) > 40, len(ends)
    with open(wal, "r+b") as f:
        f.truncate(ends[len(ends) // 2])  # the second half of the appends is gone
    for shm in cluster_path.glob("**/*-shm"):
        shm.unlink()  # what a reboot would leave: SQLite rebuilds it from the WAL


def accept_the_loss_and_go_on(cluster_path: Path) -> None:
    """No replica or backup: `plet check --repair --accept-loss` gives the lost offsets up.
    Each partition is served again, what its volume kept in order and then what is written
    after, from offset 1000 on (up to 999 were handed out: none is again)."""
    code, out = plet_check(cluster_path, "--accept-loss")
    assert code == 2 and "--accept-loss is a repair" in out  # a usage error
    code, out = plet_check(cluster_path, "--repair", "--accept-loss")
    assert code == 0, out
    assert re.search(r"offsets \d+\.\.999 given up", out), out
    with Cluster.open(cluster_path) as cluster:
        for p in range(2):
            kept = read(cluster, p)
            assert kept == [(i, b"p%d-%d" % (p, i)) for i in range(len(kept))]
            assert len(kept) < 1000
            assert produce(cluster, p, b"after") == 1000
            assert read(cluster, p) == [*kept, (1000, b"after")]
        # the group committed 1000 before the cut: it reads on from there
        consumer = Consumer(cluster, group_id="g", enable_auto_commit=False)
        consumer.assign([TopicPartition(T, 0)])
        polled = consumer.poll(timeout_ms=2000)
        consumer.close()
        assert [(r.offset, r.value) for rs in polled.values() for r in rs] == [(1000, b"after")]
    code, out = plet_check(cluster_path)
    assert code == 0 and "no problems found" in out, out


def test_truncated_wal_after_kill_is_reported_never_skipped(cluster_path, tmp_path):
    cut_wal_after_kill(cluster_path, tmp_path, partitionlet_bytes=4096)  # rolls many times

    code, out = plet_check(cluster_path)
    assert code == 1
    assert f"{T} partition 0" in out and f"{T} partition 1" in out
    assert "its messages are gone" in out or "not sealed there" in out
    assert "group 'g' committed offset 1000, beyond the log end" in out

    with Cluster.open(cluster_path) as cluster:
        for p in range(2):
            with pytest.raises(errors.DamagedPartition) as info:
                read(cluster, p)
            assert f"partition {p} of topic {T}" in str(info.value)
            # offsets up to 999 were handed out (and read by the group): none is again
            with pytest.raises(errors.DamagedPartition) as info:
                produce(cluster, p, b"after the cut")
            assert f"partition {p} of topic {T}" in str(info.value)
            assert "lost commits" in str(info.value)
    accept_the_loss_and_go_on(cluster_path)


def test_truncated_wal_of_an_active_partitionlet_hands_out_no_offset_twice(cluster_path, tmp_path):
    """The cut falls inside one partitionlet per partition (none rolled): the volume is
    consistent with itself, only the catalog's mark of the offsets reached says that
    offsets up to 999 were handed out."""
    cut_wal_after_kill(cluster_path, tmp_path, partitionlet_bytes=64 << 20)

    code, out = plet_check(cluster_path)
    assert code == 1
    for p in range(2):
        assert re.search(
            rf"{re.escape(T)} partition {p} \(volume 1\): partitionlet \d+ reached offset 999 "
            r"\(the catalog's mark\), volume 1 holds 0\.\.\d+: the volume lost commits",
            out,
        ), out

    with Cluster.open(cluster_path) as cluster:
        for p in range(2):
            got = read(cluster, p)  # what the volume kept is served, in order
            assert 0 < len(got) < 1000
            assert got == [(i, b"p%d-%d" % (p, i)) for i in range(len(got))]
            with pytest.raises(errors.DamagedPartition) as info:
                produce(cluster, p, b"after the cut")
            text = str(info.value)
            assert f"partition {p} of topic {T}" in text
            assert "it reached offset 999: the volume lost commits" in text
            assert cluster.topic(T).partitions[p].log_end_offset == len(got)
    assert "plet check --repair --accept-loss" in out
    accept_the_loss_and_go_on(cluster_path)


def test_a_running_producer_writes_again_once_the_loss_is_accepted(cluster_path, tmp_path):
    """The repair bumps the catalog's topology: a producer that was refused learns the
    partition's new active partitionlet at its next send, without a restart."""
    cut_wal_after_kill(cluster_path, tmp_path, partitionlet_bytes=64 << 20)
    with Cluster.open(cluster_path) as cluster:
        producer = Producer(cluster, acks=1)
        with pytest.raises(errors.DamagedPartition):
            producer.send(T, b"refused", partition=0).get(timeout=10)
        code, out = plet_check(cluster_path, "--repair", "--accept-loss")
        assert code == 0, out
        assert producer.send(T, b"after", partition=0).get(timeout=10).offset == 1000
        producer.close()


def test_a_live_cluster_checks_clean_while_it_is_written_and_read(cluster_path):
    """Writers roll partitionlets and a group commits between the files the check reads:
    no false alarm (what one pass finds counts only if a second pass finds it too)."""
    import threading
    import time

    from engine.ops import check as checking

    make_cluster(cluster_path, partitionlet_bytes=4096)
    stop = threading.Event()
    with Cluster.open(cluster_path) as cluster:

        def write() -> None:
            producer = Producer(cluster, acks=1)
            consumer = Consumer(cluster, group_id="live", auto_offset_reset="earliest")
            consumer.assign([TopicPartition(T, p) for p in range(PARTITIONS)])
            while not stop.is_set():
                for p in range(PARTITIONS):
                    producer.send_batch(T, p, [b"m" * 100] * 20)  # a roll each two batches
                producer.flush()
                consumer.poll(timeout_ms=10)
                consumer.commit()
            producer.close()
            consumer.close()

        writer = threading.Thread(target=write)
        writer.start()
        reports = [checking.run(cluster)]
        deadline = time.monotonic() + 60
        try:  # until the writer rolled every partition a few times under the checks
            while reports[-1].checked["partitionlets"] < reports[0].checked["partitionlets"] + 16:
                assert time.monotonic() < deadline
                reports.append(checking.run(cluster))
        finally:
            stop.set()
            writer.join()
    assert len(reports) > 1
    assert [r.problems for r in reports] == [()] * len(reports)


def test_opening_again_beside_a_writer_process_neither_damages_nor_false_alarms(cluster_path):
    """A process that holds the volumes open opens the cluster again and again while another
    process opens, writes and closes it (closing its last connection checkpoints). The
    open's checks must read through SQLite: a descriptor of their own, once closed, drops
    this process's locks (the other process then deleted the WAL under us: "disk I/O
    error", "malformed"); a read around SQLite's locks sees a checkpoint half-way and calls
    a sound volume cut short."""
    import sqlite3

    with Cluster.open(cluster_path) as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic(T, partitions=4)
    script = textwrap.dedent(
        f"""
        import time
        from engine import Cluster, Producer
        end = time.monotonic() + 6
        while time.monotonic() < end:
            with Cluster.open({str(cluster_path)!r}) as c:
                p = Producer(c, acks=1)
                for k in range(20):
                    p.send({T!r}, b"w", partition=k % 4)
                p.close()
        """
    )
    writer = subprocess.Popen([sys.executable, "-c", script])
    damaged: list[dict] = []
    opens = 0
    try:
        with Cluster.open(cluster_path) as held:
            producer = Producer(held, acks=1)
            while writer.poll() is None:
                for k in range(10):
                    producer.send(T, b"a", partition=k % 4)
                producer.flush()
                with Cluster.open(cluster_path) as again:
                    opens += 1
                    if again.damaged_volumes():
                        damaged.append(again.damaged_volumes())
            producer.close()
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0 and opens > 10
    assert damaged == []
    for f in sorted((cluster_path / "volumes").glob("*.db")):
        conn = sqlite3.connect(f)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f
        conn.close()
    code, out = plet_check(cluster_path)
    assert code == 0, out
