"""`plet serve`'s allocator settings (engine/wire/memory.py): set on glibc, and left alone
when the user set them in the environment; and a connection that keeps nothing of a fetch's
answer once written. Each case in a fresh interpreter: the settings are the process's."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = "from engine.wire.memory import keep_freed_memory; print(keep_freed_memory())"
# threads that allocate after the settings, then glibc's own count of its heaps ("Arena N:"
# lines of malloc_stats, on stderr)
HEAPS = """
import ctypes, threading
from engine.wire.memory import keep_freed_memory
print(keep_freed_memory())
def work():
    held = [bytearray(100_000) for _ in range(20)]
    together.wait()  # all four alive at once: none hands its heap on to the next
together = threading.Barrier(4)
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL(None).malloc_stats()
"""


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUN"))}
    run = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return run


def _probe(**env: str) -> str:
    return _run(PROBE, **env).stdout.strip()


def _heaps(**env: str) -> int:
    return sum(line.startswith("Arena ") for line in _run(HEAPS, **env).stderr.splitlines())


def test_the_listener_keeps_freed_memory_on_glibc():
    assert _probe() == "True"


def test_a_users_own_allocator_settings_win():
    assert _probe(MALLOC_TRIM_THRESHOLD_="1000000") == "False"
    assert _probe(GLIBC_TUNABLES="glibc.malloc.trim_threshold=1000000") == "False"


def test_the_listeners_threads_share_one_heap():
    # four threads that allocate at once, each holding 2 MB until all have: glibc would
    # give each a heap of its own (as a user's MALLOC_ARENA_MAX=8 still lets it)
    assert _heaps() == 1
    assert _heaps(MALLOC_ARENA_MAX="8") > 1
    assert _probe(MALLOC_ARENA_MAX="8") == "False"


# A listener with Python's allocations traced, a raw client that fetches 8 MiB in one
# answer and then sends nothing: what the listener still holds of that answer.
ANSWER_KEPT = """
import gc, sys, tempfile, tracemalloc
tracemalloc.start()
from engine import Cluster, Producer
from engine.wire import KafkaServer
from tests.engine.wire.test_bad_input import Raw
from tests.engine.wire.test_verbatim_batches import _builder_batch, _raw_fetch
MIB = 1 << 20
with tempfile.TemporaryDirectory() as tmp, Cluster.open(tmp + "/c", name="m") as cluster:
    cluster.create_stream("/kafka")
    cluster.create_topic("/kafka:big", partitions=1)
    # Kafka batches stored as they came: a fetch serves their bytes (Python's, traced)
    with Producer(cluster, acks=1) as producer:
        for i in range(8):
            batch = _builder_batch([bytes([i]) * (MIB // 8)] * 8)
            producer.send_record_batch("/kafka:big", 0, batch).get(timeout=30)
    server = KafkaServer(cluster, listen=("127.0.0.1", 0)).start()
    raw = Raw(server.address)
    before = tracemalloc.get_traced_memory()[0]
    got = len(_raw_fetch(raw, "big", 0, 16 * MIB))
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    print(got, held)
    raw.close()
    server.close()
"""


def test_a_connection_keeps_nothing_of_an_answer_it_has_written():
    # it held the last answer while waiting for the next request (and the parts of one
    # until all were written): tens of megabytes per connection under large fetches
    got, held = map(int, _run(ANSWER_KEPT).stdout.split())
    assert got > 8 << 20  # the 8 MiB of records in one answer
    assert held < 3 << 20, f"the listener still holds {held:,} bytes after the answer"
