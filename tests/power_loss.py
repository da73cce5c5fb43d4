"""A machine crash, for tests: a child process runs with every `fsync` and `fdatasync` of
its files noted (an LD_PRELOAD library, compiled here with the C compiler every install
needs), then dies; each SQLite log of the cluster is cut back to what its last sync had
made durable, as a power loss leaves it, and the logs' shared-memory indexes go (the
kernel's copy of them is gone too).

That holds only while no checkpoint runs in the child: a checkpoint writes the database
files, and the next commit starts its log over from the beginning, over frames a sync had
made durable, which a cut by size cannot undo. So the child runs with checkpoints off
(SQLite's own and the writeback thread's, as tests/engine/test_integrity.py's producer
does), and a database file synced in the child fails the run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* One line per sync: the file's size then, and its path. */
static void noted(int fd) {
    const char *log = getenv("POWER_LOSS_LOG");
    char link[64], path[PATH_MAX];
    struct stat st;
    ssize_t n;
    int out;
    if (log == NULL) return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof path - 1);
    if (n < 0 || fstat(fd, &st) != 0) return;
    path[n] = 0;
    out = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (out < 0) return;
    dprintf(out, "%lld %s\n", (long long)st.st_size, path);
    close(out);
}

int fsync(int fd) {
    static int (*real)(int);
    int rc;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    rc = real(fd);
    if (rc == 0) noted(fd);
    return rc;
}

int fdatasync(int fd) {
    static int (*real)(int);
    int rc;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    rc = real(fd);
    if (rc == 0) noted(fd);
    return rc;
}
"""


def _shim(workdir: Path) -> Path:
    source = workdir / "power_loss.c"
    library = workdir / "libpower_loss.so"
    if not library.exists():
        source.write_text(_SHIM)
        compiler = shutil.which("cc") or shutil.which("gcc")
        assert compiler is not None, "a C compiler (the install needs one for Cython)"
        subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"],
            check=True,
        )
    return library


# Run before the child's script: no log of its cluster is checkpointed (see above).
_NO_CHECKPOINTS = """
from engine.storage import connection as _connection, volume as _volume
_connection.WAL_CHECKPOINT_BYTES = _connection.WAL_AHEAD_BYTES = 1 << 30
_volume.Volume._checkpoint_ahead = lambda self, quiet: None
"""


def run_then_lose_power(script: str, cluster: Path, workdir: Path) -> subprocess.CompletedProcess:
    """Run `script` (Python, in a child process) against the cluster at `cluster`, then
    leave its files as a power loss after the child's end would: each `-wal` file as its
    last sync left it (none synced: as before the child ran), no `-shm` file. The cluster
    must be closed cleanly before (its logs checkpointed and gone)."""
    before = {p: p.stat().st_size for p in cluster.rglob("*") if p.is_file()}
    log = workdir / "syncs.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "LD_PRELOAD": str(_shim(workdir)), "POWER_LOSS_LOG": str(log)}
    done = subprocess.run(
        [sys.executable, "-c", _NO_CHECKPOINTS + script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    synced: dict[Path, int] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            size, _, path = line.partition(" ")
            synced[Path(path)] = int(size)
    checkpointed = [p for p in synced if p.name.endswith(".db")]
    assert not checkpointed, f"a checkpoint ran in the child: {checkpointed}"
    for path in list(cluster.rglob("*")):
        if path.name.endswith("-shm"):
            path.unlink()
        elif path.name.endswith("-wal"):
            durable = synced.get(path.resolve(), before.get(path, 0))
            if durable == 0:
                path.unlink()
            else:
                os.truncate(path, durable)
    return done
