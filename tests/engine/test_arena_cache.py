"""The cache of freed pymalloc arenas (engine/_arena_cache.pyx) and its use by bulk reads
(engine.bulk): a large poll reuses the memory of the one before instead of having the
kernel map and zero it again (issue 28).

Each case runs in a fresh interpreter: the cache is process-wide, and page faults are
counted for the whole process, so they are only meaningful where nothing else runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine import Cluster, Producer

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
T0 = 1_700_000_000_000


def _run(script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_arena_cache_is_built_from_its_source():
    """`pip install -e .` builds it (setup.py), and again when its source changes (the
    Makefile's stamps)."""
    from engine import _arena_cache

    built = Path(_arena_cache.__file__)
    assert built.suffix == ".so", built
    source = ROOT / "engine" / "_arena_cache.pyx"
    assert built.stat().st_mtime >= source.stat().st_mtime, f"{built} is older than {source}"


_CHURN = """
    import json, resource, sys
    from engine import _arena_cache

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def churn():
        # some 29 MB of 100-byte bytes objects, all freed together, as a poll's values
        before = faults()
        objects = [b"%0100d" % i for i in range(200_000)]
        made = faults() - before
        del objects
        return made

    _arena_cache.install(int(sys.argv[1]))
    churn()  # the first time maps fresh arenas, whatever the limit
    held = _arena_cache.held()
    taken, mapped = _arena_cache.taken(), _arena_cache.mapped()
    again = churn()
    taken, mapped = _arena_cache.taken() - taken, _arena_cache.mapped() - mapped
    _arena_cache.install(0)
    print(json.dumps({"held": held, "again": again, "taken": taken, "mapped": mapped,
                      "held_after_0": _arena_cache.held(), "limit": _arena_cache.limit()}))
"""


def test_freed_arenas_are_handed_out_again_without_page_faults():
    kept = _run(_CHURN, str(64 * MIB))
    plain = _run(_CHURN, "0")  # a limit of 0 keeps nothing: CPython's own behaviour
    # 29 MB in 4 KiB pages is some 7,000 page faults each time, without the cache
    assert plain["held"] == 0
    assert plain["again"] > 5_000
    # kept: nearly all of it is held after the first churn, and the second faults almost
    # nothing in
    assert 25 * MIB <= kept["held"] <= 64 * MIB
    assert kept["again"] < plain["again"] / 10
    # taken counts every arena handed out, held ones as new ones; mapped the new ones
    assert kept["taken"] >= 25 * MIB
    assert kept["mapped"] == 0
    assert plain["taken"] >= 25 * MIB
    assert plain["mapped"] == plain["taken"]
    # a lowered limit releases what lies above it at once
    assert kept["held_after_0"] == 0
    assert kept["limit"] == 0


_POLL = """
    import hashlib, json, pickle, resource, sys
    from array import array
    from engine import Cluster, Consumer, TopicPartition, bulk

    path, mode = sys.argv[1:]
    if mode == "fallback":
        bulk._arena_cache = None  # as where the module is not built
    elif mode == "uncached":
        bulk.ARENA_CACHE_BYTES = bulk.ARENA_CACHE_MAX_BYTES = 0  # keeps nothing, counts
    elif mode == "need":
        bulk.ARENA_CACHE_BYTES = 0  # no floor: the limit is what the last bulk read took
    elif mode == "capped":
        bulk.ARENA_CACHE_BYTES = 0
        bulk.ARENA_CACHE_MAX_BYTES = 2 << 20
    cache = bulk._arena_cache

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    # what is kept of each poll is kept outside pymalloc's arenas (arrays, large bytes), so
    # that only the records occupy them, as in a consumer's loop
    polls = 4
    seen = {name: array("q", [0] * polls) for name in ("faults", "took", "mapped", "limits")}
    pickled: list = [None] * polls
    out = {}
    with Cluster.open(path) as cluster:
        consumer = Consumer(cluster, group_id=None, auto_offset_reset="earliest")
        tp = TopicPartition("/s:t", 0)
        consumer.assign([tp])
        for i in range(polls):
            consumer.seek_to_beginning()
            taken = cache.taken() if cache else 0
            mapped = cache.mapped() if cache else 0
            before = faults()
            got = consumer.poll(timeout_ms=5000, max_records=100_000)
            seen["faults"][i] = faults() - before
            if cache:
                seen["took"][i] = cache.taken() - taken
                seen["mapped"][i] = cache.mapped() - mapped
                seen["limits"][i] = cache.limit()
            records = got[tp]
            pickled[i] = pickle.dumps(records)
            if i == polls - 1:
                out["count"] = len(records)
                out["first"] = [*records[0][:7], list(map(list, records[0].headers))]
            del got, records  # as a caller that drops a poll before the next one
        consumer.close()
        out["held"] = cache.held() if cache else None
    out.update((name, list(values)) for name, values in seen.items())
    out["digests"] = [hashlib.sha256(p).hexdigest() for p in pickled]
    print(json.dumps(out, default=bytes.decode))
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> str:
    """A cluster with 100,000 records of 100 B in one partition (a header on every third),
    written by this process and closed: each case reads it in a process of its own."""
    path = str(tmp_path_factory.mktemp("arenas") / "cluster")
    with Cluster.open(path, name="arenas") as cluster:
        cluster.create_stream("/s", ttl=0)
        cluster.create_topic("/s:t", partitions=1)
        with Producer(cluster, acks=1, linger_ms=0) as producer:
            for i in range(100_000):
                producer.send(
                    "/s:t",
                    value=b"%0100d" % i,
                    key=b"k%d" % (i % 7),
                    headers=[("n", b"%d" % i)] if i % 3 == 0 else None,
                    timestamp_ms=T0 + i,
                )
            producer.flush()
    return path


def test_a_poll_reuses_the_arenas_of_the_one_before_and_the_fallback_reads_the_same(written):
    kept = _run(_POLL, written, "kept")
    uncached = _run(_POLL, written, "uncached")
    fallback = _run(_POLL, written, "fallback")
    # the same records with the cache, with a cache that keeps nothing and without the
    # module (pickled alike: every field, the headers included), four times each
    assert kept["count"] == uncached["count"] == fallback["count"] == 100_000
    assert len(set(kept["digests"] + uncached["digests"] + fallback["digests"])) == 1
    assert kept["first"] == ["/s:t", 0, 0, T0, 0, "k0", "0" * 100, [["n", "0"]]]
    assert fallback["first"] == kept["first"]
    # the first poll maps its arenas; with the cache, the next ones take them again and
    # map none; keeping nothing, the next poll maps tens of megabytes afresh
    assert kept["mapped"][0] > 16 * MIB
    assert kept["mapped"][1:] == [0, 0, 0]
    assert kept["took"][1] > 16 * MIB
    assert uncached["mapped"][1] > 16 * MIB
    # and that is what page faults measure (the rest of them: buffers outside the arenas)
    assert kept["faults"][1] < uncached["faults"][1] / 2
    assert kept["limits"] == [64 * MIB] * 4
    assert 0 < kept["held"] <= 64 * MIB
    assert uncached["limits"] == [0] * 4
    assert uncached["held"] == 0


def test_the_cache_keeps_what_the_last_bulk_read_took_within_the_maximum(written):
    need = _run(_POLL, written, "need")
    capped = _run(_POLL, written, "capped")
    # without a floor, each poll leaves the limit at what it took, which is enough for
    # the next poll of the same size
    assert need["took"][0] > 16 * MIB
    assert need["limits"] == need["took"]
    assert need["mapped"][1:] == [0, 0, 0]
    assert need["held"] <= need["limits"][-1]
    # and never above the maximum: the next poll then maps what lies beyond it afresh
    assert capped["limits"] == [min(took, 2 * MIB) for took in capped["took"]]
    assert capped["limits"][0] == 2 * MIB
    assert capped["held"] <= 2 * MIB
    assert capped["mapped"][1] > 16 * MIB
    assert len(set(need["digests"] + capped["digests"])) == 1
