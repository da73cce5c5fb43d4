"""PySpark side of Partitionlet: the `partitionlet` data source and replay jobs.

Importing this package (or `spark_tasks.jobs`) never imports pyspark: the consoles use the
job API, and a job runs Spark in its own process. `register(spark)` imports the data
source, which does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the `partitionlet` data source with `spark` (harmless to repeat)."""
    from spark_tasks.source import PartitionletDataSource, WarmUpDataSource

    spark.dataSource.register(PartitionletDataSource)
    spark.dataSource.register(WarmUpDataSource)
