"""The SparkSession of a replay runner, started as fast as the numbers allow.

Most of a cold replay's wait before its first task is Spark starting (docs/BENCHMARKS.md,
"Replay start-up"): the driver JVM loading and verifying some 15,000 classes from 280 jars,
its JIT compilers busy meanwhile, then Python processes for the data source's planning and
for the tasks, each importing pyspark. `start` cuts two of them:

- a JVM class-data-sharing archive (CDS) of the classes a replay loads, made once by the
  first runner that finds none (`-XX:ArchiveClassesAtExit`, written as its JVM exits) and
  mapped by every later driver JVM (`-XX:SharedArchiveFile`): no parsing, no verifying.
  One file per Spark version and Java (`archive_path`), some 150 MB, in
  `$XDG_CACHE_HOME/partitionlet` (`~/.cache/partitionlet`). A JVM that finds the archive
  does not match ignores it (-Xshare:auto), so a stale file costs speed, never a job;
- for a short job only (`short`), the driver JVM's JIT stopped at C1
  (`-XX:TieredStopAtLevel=1`): Spark starts 5-8 s sooner, but reads 1,000,000 rows at
  440,000 rows/s against 670,000 with C2 (local[2], measured side by side), about 0.8 us a
  row more, so C1 pays only where the job reads fewer than some 7,000,000 rows
  (jobs.SHORT_ROWS; a runner counts them before it starts Spark);
- on a local master, Spark's Python workers import pyspark from its installed package, with
  its cached bytecode, not from the `pyspark.zip` that Spark puts first on their path, which
  every worker compiles again (`worker_python`).

`PLET_SPARK_FAST_START=0` starts Spark as it was before (none of them). A job's
`spark.driver.extraJavaOptions` (its `conf`) come after these, so they win: a job may ask
for C2 back (`-XX:TieredStopAtLevel=4`) or for C1 itself.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

FAST_ENV = "PLET_SPARK_FAST_START"
JVM_OPTIONS = "spark.driver.extraJavaOptions"
# Quiet: a JVM that cannot use the archive (another Java, other jars) says so on stderr,
# and the dump lists the classes it skips (several hundred lines of a job's log).
_CDS_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
C1_ONLY = "-XX:TieredStopAtLevel=1"  # a short job's driver JVM (the module's doc)
# Spark's status store takes a running stage's task counts at most this often (default
# 100ms): at the default, two tasks that start together are not counted until one ends,
# so the status tracker the runner watches showed a job's first task a whole task late
# (1.2 s of a small copy). Every event is cheap beside a task.
LIVE_UPDATE = {"spark.ui.liveUpdate.period": "0ms"}


def fast() -> bool:
    """Whether runners start Spark the fast way (`PLET_SPARK_FAST_START`, on by default)."""
    return os.environ.get(FAST_ENV, "1") != "0"


def cache_dir() -> Path:
    """Where the class-data archive and the workers' Python script live."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "partitionlet"


def _java() -> Path | None:
    """The java Spark's launcher runs (bin/spark-class: $JAVA_HOME/bin/java, else PATH's)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """The class-data archive of this Spark and this Java (None: no java found). Named
    after pyspark's version and the java binary (its path and time), so that another
    Spark or an upgraded Java makes a new one."""
    import pyspark

    java = _java()
    if java is None:
        return None
    key = f"{pyspark.__version__}|{java}|{java.stat().st_mtime_ns}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return cache_dir() / f"spark-{pyspark.__version__}-{digest}.jsa"


class Archive:
    """The class-data archive as one driver JVM uses it: mapped when it exists, else
    written by this JVM as it exits (to a file of its own, renamed into place by
    `finish`, so that no JVM maps a half-written archive)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writing: Path | None = None
        self.process: Any = None  # the driver JVM that writes it (`start`)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            _remove_abandoned(path)
            self.writing = path.with_name(f"{path.name}.{os.getpid()}.tmp")

    def java_options(self) -> str:
        if self.writing is not None:
            return f"-XX:ArchiveClassesAtExit={self.writing} {_CDS_QUIET}"
        return f"-XX:SharedArchiveFile={self.path} {_CDS_QUIET}"

    def finish(self, timeout_s: float = 120) -> None:
        """After `spark.stop()`: end the driver JVM (it exits at the end of its stdin) and,
        if it wrote the archive, put the archive in place."""
        if self.writing is None or self.process is None:
            return
        try:
            self.process.stdin.close()
            self.process.wait(timeout_s)
        except Exception:  # no archive this time; the next runner tries again
            return
        if self.writing.exists() and self.writing.stat().st_size:
            self.writing.replace(self.path)


def _remove_abandoned(path: Path) -> None:
    """Archives left half-written by a JVM that was killed while dumping."""
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        try:
            pid = int(tmp.name.rsplit(".", 2)[1])
            os.kill(pid, 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except (ValueError, PermissionError, OSError):
            pass


# Spark's Python workers without the pyspark.zip that Spark puts first on their PYTHONPATH:
# pyspark comes from the installed package (the same pyspark, the zip ships in its wheel),
# whose bytecode is cached, instead of being compiled again by every worker (0.5 s of CPU
# against 1.5 s, for each planning step of the data source and each task's worker).
_WORKER_SCRIPT = """#!/bin/sh
# Made by spark_tasks/session.py: Spark's Python workers, pyspark from its installed package.
set -f
old_ifs=$IFS
IFS=:
path=
for entry in $PYTHONPATH; do
    case $entry in
        */pyspark.zip) ;;
        *) path=${path:+$path:}$entry ;;
    esac
done
IFS=$old_ifs
PYTHONPATH=$path exec "$PLET_WORKER_PYTHON" "$@"
"""


def worker_python() -> Path:
    """The workers' Python: a script that runs $PLET_WORKER_PYTHON without pyspark.zip."""
    path = cache_dir() / "worker_python.sh"
    if not path.exists() or path.read_text() != _WORKER_SCRIPT:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(_WORKER_SCRIPT)
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        tmp.replace(path)
    return path


def settings(
    master: str, conf: dict[str, Any], *, short: bool = False
) -> tuple[dict[str, str], Archive | None]:
    """A job's Spark settings (`conf`) with the fast start's JVM options (C1 for a `short`
    job), and the archive its driver JVM uses (None when not started the fast way, or
    when the cache cannot be written: that costs the archive, never the job). On a local
    master, it also points this process's PYSPARK_PYTHON at `worker_python` (unless set
    to another Python)."""
    out = {key: str(value) for key, value in conf.items()}
    if not fast():
        return out, None
    options: list[str] = []
    path = archive_path()
    try:
        archive = Archive(path) if path is not None else None
    except OSError:
        archive = None
    if archive is not None:
        options.append(archive.java_options())
    if short:
        options.append(C1_ONLY)
    # the job's own last: the JVM takes the last of a repeated option
    options.append(out.get(JVM_OPTIONS, ""))
    if any(options):
        out[JVM_OPTIONS] = " ".join(o for o in options if o)
    # on a local master the workers run here, with this Python (a remote executor's Python
    # is its cluster's business)
    if master.startswith("local") and os.environ.get("PYSPARK_PYTHON", sys.executable) == (
        sys.executable
    ):
        try:
            script = worker_python()
        except OSError:
            return out, archive
        os.environ["PLET_WORKER_PYTHON"] = sys.executable
        os.environ["PYSPARK_PYTHON"] = str(script)
    return out, archive


def start(
    master: str, conf: dict[str, Any], name: str, *, short: bool = False
) -> tuple[Any, Archive | None]:
    """A SparkSession on `master` with `conf` (its JIT at C1 for a `short` job), the
    `partitionlet` data source registered (which sets up Spark SQL's session state: seconds
    of the start-up), and the class-data archive it uses (None when not started the fast
    way), whose `finish` the runner calls after stopping the session (`stop`)."""
    from pyspark.sql import SparkSession

    import spark_tasks

    builder = SparkSession.builder.master(master).appName(name)
    if master.startswith("local"):
        # The UI serves the status REST API the monitor reads rows from: on loopback
        # only, on any free port, read-only.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.ui.port", "0").config("spark.ui.killEnabled", "false")
    given, archive = settings(master, LIVE_UPDATE | conf, short=short)
    for key, value in given.items():
        builder = builder.config(key, value)
    if archive is not None and archive.writing is not None:
        # The JVM that writes the archive is ended by `stop` (Archive.finish), so it is
        # started here, by pyspark's own launcher, to keep its process; the builder then
        # takes the context it made.
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway

        spark_conf = SparkConf().setMaster(master).setAppName(name)
        for key, value in given.items():
            spark_conf.set(key, value)
        gateway = launch_gateway(spark_conf)
        archive.process = gateway.proc
        SparkContext(conf=spark_conf, gateway=gateway)
    spark = builder.getOrCreate()
    spark_tasks.register(spark)
    return spark, archive


def stop(spark: Any, archive: Archive | None) -> None:
    """Stop the session, and put the class-data archive in place if its JVM wrote one."""
    spark.stop()
    if archive is not None:
        archive.finish()
