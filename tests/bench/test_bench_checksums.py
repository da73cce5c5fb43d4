"""`python -m bench.checksums N`: the checksums' share of produce and consume CPU time."""

from __future__ import annotations

from bench import checksums
from engine.storage import batch


def test_the_checksum_code_is_timed_inside_produce_and_consume():
    real = (batch.payload_crc, batch.checksum, batch.intact)
    share = checksums.run(100, 2_000)
    assert share.messages == 2_000
    assert 0 < share.produce_checksum_s < share.produce_s
    assert 0 < share.consume_checksum_s < share.consume_s
    assert "checksums" in share.text()
    assert (batch.payload_crc, batch.checksum, batch.intact) == real  # put back


def test_off_is_the_engine_before_checksums(tmp_path):
    """With the checksums off nothing is computed or verified, and the rows carry no CRC
    (as those written before checksums); on, every row carries one."""
    from engine import Cluster, Producer

    real = (batch.payload_crc, batch.checksum, batch.intact)
    for on in (False, True):
        with Cluster.open(tmp_path / f"c-{on}", volumes=1) as cluster:
            cluster.create_stream("/s", ttl=0)
            cluster.create_topic("/s:t", partitions=1)
            producer = Producer(cluster, acks=1)
            if on:
                producer.send("/s:t", b"v", partition=0).get(timeout=10)
            else:
                with checksums.checksums_off():
                    producer.send("/s:t", b"v", partition=0).get(timeout=10)
            producer.close()
            (volume,) = cluster.open_volumes().values()
            crcs = [row[0] for row in volume.conn.execute("SELECT crc FROM batches")]
            assert len(crcs) == 1 and (crcs[0] is not None) is on
    assert (batch.payload_crc, batch.checksum, batch.intact) == real  # put back


def test_compare_alternates_on_and_off_in_one_run(tmp_path):
    results = checksums.compare(tmp_path, 100, 500, rounds=2)
    assert {c.case for c in results} == {
        "embedded produce",
        "embedded consume",
        "Spark scan (task reads)",
        "wire produce (server)",
        "wire consume (server)",
    }
    for c in results:
        assert len(c.on) == len(c.off) == 2
        assert all(s >= 0 for s in c.on + c.off)
    assert "| embedded consume, 100 B | 500 |" in checksums.markdown(results)


def test_a_call_inside_a_recorded_call_is_not_recorded_again():
    """`intact` calls `checksum`: a reader's check is one recorded call, so the replay
    makes it once (recording both counted a consume's checksums twice)."""
    with checksums.recorded_checksums() as calls:
        crc = batch.checksum(0, 0, 0, 1, 1, b"payload")
        assert batch.intact(0, 0, 0, 1, 1, b"payload", crc)
    assert [f.__name__ for f, _args in calls.made] == ["checksum", "intact"]
    assert calls.replay() >= 0 and calls.made == []


def test_the_replay_times_fresh_copies_of_the_bytes():
    seen = []
    calls = checksums.Calls()
    payload = b"x" * 1000
    calls.made.append((lambda p: seen.append(p), (payload,)))
    calls.replay()
    assert seen == [payload] and seen[0] is not payload
