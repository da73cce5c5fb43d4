"""`plet serve`'s allocator settings (engine/wire/memory.py): set on glibc, and left alone
when the user set them in the environment. Each case in a fresh interpreter: the settings
are the process's."""

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
