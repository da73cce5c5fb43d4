"""How a replay runner starts Spark fast (spark_tasks.session): the class-data archive made
once and then mapped, and the workers' Python without pyspark.zip. With real processes;
the jobs of test_jobs.py start their Spark this way."""

from __future__ import annotations

import os
import subprocess
import sys

from spark_tasks import session


def test_the_first_jvm_writes_the_archive_the_next_ones_map_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = session.archive_path()
    assert path is not None and path.parent == tmp_path / "partitionlet"
    first = session.Archive(path)
    assert first.writing == path.with_name(f"{path.name}.{os.getpid()}.tmp")
    assert f"-XX:ArchiveClassesAtExit={first.writing} " in first.java_options()
    # a stand-in for the driver JVM: it writes the archive as it exits, at the end of stdin
    writes = f"import sys; sys.stdin.read(); open({str(first.writing)!r}, 'w').write('jsa')"
    jvm = subprocess.Popen([sys.executable, "-c", writes], stdin=subprocess.PIPE)
    first.process = jvm
    assert not path.exists()
    first.finish()
    assert jvm.returncode == 0 and path.read_text() == "jsa" and not first.writing.exists()
    later = session.Archive(path)
    assert later.writing is None
    assert later.java_options().startswith(f"-XX:SharedArchiveFile={path} ")


def test_an_archive_abandoned_half_written_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = session.archive_path()
    path.parent.mkdir(parents=True)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dead = path.with_name(f"{path.name}.{ended.pid}.tmp")
    live = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    dead.write_text("half")
    live.write_text("being written")
    session.Archive(path)
    assert not dead.exists() and live.exists()


def test_the_workers_python_leaves_pyspark_zip_out(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    script = session.worker_python()
    assert os.access(script, os.X_OK) and session.worker_python() == script
    env = dict(os.environ, PLET_WORKER_PYTHON=sys.executable)
    env["PYTHONPATH"] = "/spark/python/lib/pyspark.zip:/spark/python/lib/py4j-src.zip:/mine"
    shown = subprocess.run(
        [script, "-c", "import os, sys; print(os.environ['PYTHONPATH'], sys.executable)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.split() == ["/spark/python/lib/py4j-src.zip:/mine", sys.executable]


def test_the_fast_start_settings_and_a_cache_that_cannot_be_written(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PYSPARK_PYTHON", "/their/python")  # theirs: kept
    mine = {session.JVM_OPTIONS: "-XX:TieredStopAtLevel=4", "spark.driver.memory": "1g"}
    given, archive = session.settings("local[1]", mine)
    assert archive is not None and given["spark.driver.memory"] == "1g"
    # the job's own options last, so that they win
    assert given[session.JVM_OPTIONS] == f"{archive.java_options()} -XX:TieredStopAtLevel=4"
    assert os.environ["PYSPARK_PYTHON"] == "/their/python"
    # a short job's JIT stops at C1, unless its own options say otherwise (they come last)
    given, archive = session.settings("local[1]", {}, short=True)
    assert given[session.JVM_OPTIONS] == f"{archive.java_options()} {session.C1_ONLY}"
    given, archive = session.settings("local[1]", mine, short=True)
    assert given[session.JVM_OPTIONS].endswith(f"{session.C1_ONLY} -XX:TieredStopAtLevel=4")
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    given, archive = session.settings("local[1]", {})
    assert archive is None and given == {}
    monkeypatch.setenv(session.FAST_ENV, "0")
    assert session.settings("local[1]", {"a": 1}) == ({"a": "1"}, None)
    assert session.settings("local[1]", {"a": 1}, short=True) == ({"a": "1"}, None)
