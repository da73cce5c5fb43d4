"""A writer whose partitionlet other writers keep sealing under it (tiny partitionlets,
competing writers) tries again and waits its turn rather than give up after a few tries
(issue 26: "kept rolling under this writer (8 tries)" reached a caller)."""

from __future__ import annotations

from engine import Cluster, Consumer
from engine.storage import batch as codec
from engine.storage.volume import BatchWrite, Volume

# Times another writer cuts in, each time sealing the partitionlet this one was about to
# append to; more than the 8 tries after which a writer used to give up.
CUTS_IN = 12


def _write(cluster: Cluster, value: bytes) -> BatchWrite:
    row = cluster.catalog.topic("/s", "t")
    now = cluster.clock.now_ms()
    payload = codec.encode([value], [now])
    return BatchWrite(row.stream_id, row.id, 0, payload, 1, now, now, 0, cluster.id)


def test_a_writer_others_keep_rolling_under_waits_its_turn(tmp_path, monkeypatch):
    # One byte per partitionlet: every batch fills its own and seals it.
    with Cluster.open(tmp_path / "c", partitionlet_bytes=1) as cluster:
        cluster.create_stream("/s", default_partitions=1)
        cluster.create_topic("/s:t")
        mine, theirs = cluster.appender(), cluster.appender()
        real_append = Volume.append
        cuts = {"left": CUTS_IN, "mine": False}

        def append(self, writes, **kwargs):
            # Just before each of my appends, the other writer appends (and seals).
            if cuts["mine"] and cuts["left"]:
                cuts["left"] -= 1
                cuts["mine"] = False
                theirs.write([_write(cluster, b"theirs")], sync=False)
                cuts["mine"] = True
            return real_append(self, writes, **kwargs)

        monkeypatch.setattr(Volume, "append", append)
        w = _write(cluster, b"mine")
        cuts["mine"] = True
        mine.write([w], sync=False)
        cuts["mine"] = False
        assert w.error is None
        assert w.offset == CUTS_IN
        assert cuts["left"] == 0
        consumer = Consumer(cluster, "/s:t", auto_offset_reset="earliest", consumer_timeout_ms=500)
        values = [(r.offset, r.value) for r in consumer]
        consumer.close()
        assert values == [(i, b"theirs") for i in range(CUTS_IN)] + [(CUTS_IN, b"mine")]
