"""A local S3 server (moto_server on a free loopback port) for the s3:// archive tests."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.timing import scaled

BUCKET = "archive"


@contextmanager
def local_s3() -> Iterator[tuple[int, Any]]:
    """(port, a pyarrow S3FileSystem on it) with the bucket `archive` made; the caller sets
    the AWS_* credentials (any values do) before pyarrow reads them."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + scaled(30)
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.1)
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(
            endpoint_override=f"127.0.0.1:{port}",
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=True,
        )
        fs.create_dir(BUCKET)
        yield port, fs
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)
