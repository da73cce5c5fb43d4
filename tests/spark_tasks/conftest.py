"""One local SparkSession for every Spark test (starting one takes seconds)."""

from __future__ import annotations

import os
import sys

import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    import spark_tasks

    session = (
        SparkSession.builder.master("local[2]")
        .appName("partitionlet-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark_tasks.register(session)
    spark_tasks.register(session)  # twice is harmless
    yield session
    session.stop()
