"""`Cluster.delete_records`: whole partitionlets below an offset dropped, as retention drops
them, with the stream's topic_perm; bad arguments refused before anything is dropped."""

from __future__ import annotations

import pytest

from engine import Cluster, Principal, Producer, errors


@pytest.fixture
def rolled(tmp_path):
    with Cluster.open(tmp_path / "c", partitionlet_bytes=250) as cluster:
        cluster.create_stream("/s")
        cluster.create_topic("/s:t")
        with Producer(cluster, acks=1) as producer:
            for _ in range(3):  # three partitionlets of two 150-byte messages
                producer.send("/s:t", value=bytes(150), partition=0)
                producer.send("/s:t", value=bytes(150), partition=0)
                producer.flush()
        yield cluster


def test_whole_partitionlets_below_the_offset_go(rolled):
    assert rolled.delete_records("/s:t", 0, 3) == 2  # 2 shares a partitionlet with 3
    assert rolled.delete_records("/s:t", 0, 4) == 4
    part = rolled.topic("/s:t").partitions[0]
    assert (part.log_start_offset, part.log_end_offset) == (4, 6)
    assert rolled.delete_records("/s:t", 0, 0) == 4  # below the start: nothing to do


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("/s:t", 1, 2), errors.InvalidPartition),
        (("/s:t", True, 2), errors.InvalidPartition),
        (("/s:t", 0, -1), errors.InvalidOffset),
        (("/s:nope", 0, 2), errors.UnknownTopic),
    ],
)
def test_bad_arguments_drop_nothing(rolled, args, error):
    with pytest.raises(error):
        rolled.delete_records(*args)
    assert rolled.topic("/s:t").partitions[0].log_start_offset == 0


def test_topic_perm_is_needed(rolled):
    rolled.edit_stream("/s", topic_perm="u:alice")
    with Cluster.open(rolled.path, principal=Principal("mallory")) as as_mallory:
        with pytest.raises(errors.AccessDenied, match="delete records of"):
            as_mallory.delete_records("/s:t", 0, 4)
    assert rolled.topic("/s:t").partitions[0].log_start_offset == 0
