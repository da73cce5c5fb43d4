"""A thread's SQLite connections close when the thread ends (web servers start a thread per
request), and the cluster still closes the live ones."""

from __future__ import annotations

import gc
import sqlite3
import threading

import pytest


def _run_in_threads(fn, n):
    for _ in range(n):
        t = threading.Thread(target=fn)
        t.start()
        t.join()


def test_connections_of_ended_threads_are_closed(cluster):
    cluster.create_stream("/s")
    conns = cluster.catalog._conns
    _run_in_threads(lambda: cluster.streams(), 50)
    gc.collect()
    assert len(conns._all) <= 1  # at most this thread's own
    seen = []
    ready, done = threading.Event(), threading.Event()

    def hold():
        cluster.streams()
        seen.append(conns.get())
        ready.set()
        done.wait()

    t = threading.Thread(target=hold)
    t.start()
    assert ready.wait(10)
    cluster.close()  # closes the live thread's connection too
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        seen[0].execute("SELECT 1")
    done.set()
    t.join()
