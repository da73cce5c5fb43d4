"""One local SparkSession for every Spark test (starting one takes seconds)."""

from __future__ import annotations

import os
import sys

import pytest

from spark_tasks import session

# Spark's Python workers (and those of the replay jobs the tests start): this Python, with
# pyspark imported from its installed package, as a runner's are (spark_tasks.session says
# why; from the zip a busy machine can miss the 10 s Spark gives a stream reader's Python
# process to connect back)
os.environ["PLET_WORKER_PYTHON"] = sys.executable
os.environ["PYSPARK_PYTHON"] = str(session.worker_python())
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
# Fake credentials for the local S3 server (moto) of the s3:// archive tests, set before
# Spark starts: its Python workers get the environment the JVM started with.
for _name, _value in (
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_DEFAULT_REGION", "us-east-1"),
    ("AWS_EC2_METADATA_DISABLED", "true"),
    ("SPARK_LOCAL_IP", "127.0.0.1"),
):
    os.environ.setdefault(_name, _value)


@pytest.fixture(scope="session")
def spark():
    """Started as a replay runner starts a short job's (spark_tasks.session: the
    class-data archive, the JIT stopped at C1), the data source registered."""
    import spark_tasks

    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "1g",
    }
    # the UI serves the status REST API replays read their rows/s from (run.Monitor):
    # loopback only (SPARK_LOCAL_IP above), any free port
    spark, archive = session.start("local[2]", conf, "partitionlet-tests", short=True)
    spark_tasks.register(spark)  # twice is harmless
    yield spark
    session.stop(spark, archive)
