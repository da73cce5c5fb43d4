"""DescribeLogDirs: where the partitions' bytes are. A cluster's volumes (one SQLite file
each) are its log dirs, and the archive tier (Parquet files, docs/ARCHIVE.md) is one more,
so tools that show a broker's disks (kafka-ui, AKHQ, Redpanda Console) show the volumes
and the archive with the size of each partition in each."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from engine import errors
from engine.wire import codes
from engine.wire.connection import Session
from engine.wire.registry import api

_ARCHIVE = "archive"  # a partitionlet's tier once archived (PartitionletInfo.tier)


# v1 to v4 (flexible from v2; v4 adds the sizes of the disk under each log dir)
@api(DescribeLogDirsRequest, DescribeLogDirsResponse, (1, 4))
def describe_log_dirs(
    session: Session, request: DescribeLogDirsRequest, version: int
) -> DescribeLogDirsResponse:
    """Each volume's file and each archive location (a stream's `archive_uri`, the
    cluster's archive folder by default) with the bytes of every partition asked for (those
    Metadata for all topics lists when none is named) stored there. A cluster's layout is an
    administrator's to see, as Kafka's DESCRIBE on the cluster."""
    broker = session.broker
    cluster = broker.cluster
    R = DescribeLogDirsResponse.DescribeLogDirsResult
    if not cluster.is_administrator:
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=codes.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    wanted: list[tuple[str, set[int] | None]]  # (topic, its partitions asked; None: all)
    if request.topics is None:
        wanted = [(name, None) for name, _, _ in broker.listing()]  # Metadata's all topics
    else:
        wanted = [(t.topic, set(t.partitions)) for t in request.topics]
    listed = cluster.volumes()
    volumes = {v.id: v.path for v in listed}
    # a volume that could not be opened is Kafka's offline log dir: its error, no topics
    offline = {v.path for v in listed if v.damage is not None}
    archive_root = str(Path(cluster.path) / "archive")
    # log dir -> topic name -> partition -> bytes
    sizes: dict[str, dict[str, dict[int, int]]] = {path: {} for path in volumes.values()}
    for name, partitions in wanted:
        try:
            info = broker.topic(name)
            archived_in = cluster.stream(info.stream).policies.get("archive_uri") or archive_root
        except errors.PartitionletError:
            continue  # Kafka leaves out what it does not host
        for part in info.partitions:
            if partitions is not None and part.partition not in partitions:
                continue
            for pl in part.partitionlets:
                where = archived_in if pl.tier == _ARCHIVE else volumes.get(pl.volume)
                if where is None or where in offline:
                    continue
                by_partition = sizes.setdefault(where, {}).setdefault(name, defaultdict(int))
                by_partition[part.partition] += pl.bytes
    results = []
    for path, topics in sizes.items():
        total, usable = _disk(path)
        results.append(
            R(
                error_code=codes.KAFKA_STORAGE_ERROR if path in offline else codes.NONE,
                log_dir=path,
                topics=[
                    R.DescribeLogDirsTopic(
                        name=name,
                        partitions=[
                            R.DescribeLogDirsTopic.DescribeLogDirsPartition(
                                partition_index=p,
                                partition_size=size,
                                offset_lag=0,
                                is_future_key=False,
                            )
                            for p, size in sorted(by_partition.items())
                        ],
                    )
                    for name, by_partition in topics.items()
                ],
                total_bytes=total,
                usable_bytes=usable,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=codes.NONE, results=results)


def _disk(path: str) -> tuple[int, int]:
    """(total, free) bytes of the disk under a local log dir; -1s for a remote one."""
    place = Path(path)
    while not place.exists() and place != place.parent:
        place = place.parent
    if "://" in path or not place.exists():
        return -1, -1
    usage = shutil.disk_usage(place)
    return usage.total, usage.free
