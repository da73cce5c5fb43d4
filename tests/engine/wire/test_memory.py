"""`plet serve`'s allocator settings (engine/wire/memory.py): set on glibc, and left alone
when the user set them in the environment. Each case in a fresh interpreter: the settings
are the process's."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = "from engine.wire.memory import keep_freed_memory; print(keep_freed_memory())"


def _probe(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUN"))}
    run = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_the_listener_keeps_freed_memory_on_glibc():
    assert _probe() == "True"


def test_a_users_own_allocator_settings_win():
    assert _probe(MALLOC_TRIM_THRESHOLD_="1000000") == "False"
    assert _probe(GLIBC_TUNABLES="glibc.malloc.trim_threshold=1000000") == "False"
