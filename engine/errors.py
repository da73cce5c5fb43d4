"""Every error the engine raises, one class per thing a caller may want to catch.

All derive from `PartitionletError`. Where a built-in exception means the same thing
(`ValueError` for bad input, `LookupError` for what does not exist, `TimeoutError`,
`PermissionError`), the class derives from it too, so generic handlers keep working.
Messages say what was wrong and what to do about it.
"""

from __future__ import annotations

from typing import Any


class PartitionletError(Exception):
    """Base class of every engine error."""


# --- bad input ---------------------------------------------------------------------------


class InvalidName(PartitionletError, ValueError):
    """A stream path or topic name breaks the naming rules; it is refused, never rewritten."""


class InvalidPolicy(PartitionletError, ValueError):
    """A stream policy has an unknown name or a value out of its range."""

    # set for an ACE that does not parse (engine.auth.acl): the policy, its text and the
    # 1-based column of the error (None when the error has no place)
    policy: str | None = None
    expression: str | None = None
    column: int | None = None


class InvalidPartition(PartitionletError, ValueError):
    """A partition number that the topic does not have, or a bad partition count."""


class InvalidOffset(PartitionletError, ValueError):
    """An offset or offset-reset setting that cannot be used."""


class InvalidArgument(PartitionletError, ValueError):
    """Any other argument of the wrong type or out of range."""


class InvalidRecordBatch(InvalidArgument):
    """A Kafka record batch that is not sound (its CRC, its layout, its records)."""


class MessageTooLarge(PartitionletError, ValueError):
    """A record whose key, value and headers together exceed the stream's `max_message_bytes`."""


# --- things that do not exist or already do ----------------------------------------------


class NotFound(PartitionletError, LookupError):
    """Base class of lookups of something that does not exist."""


class UnknownStream(NotFound):
    pass


class UnknownTopic(NotFound):
    pass


class UnknownGroup(NotFound):
    pass


class UnknownUser(NotFound):
    pass


class UnknownJob(NotFound):
    pass


class UnknownToken(NotFound):
    """No token with that id (a replication token, as `replication_tokens` lists it)."""


class AlreadyExists(PartitionletError):
    """Base class of creations of something that exists already."""


class StreamExists(AlreadyExists):
    pass


class TopicExists(AlreadyExists):
    pass


# --- access ------------------------------------------------------------------------------


class AccessDenied(PartitionletError, PermissionError):
    """The principal's identity does not satisfy the ACE of the operation; nothing changed."""


class GroupAccessDenied(AccessDenied):
    """A consumer group's permission (join, commit, describe, reset, delete) or its
    creation was refused (Kafka's GROUP_AUTHORIZATION_FAILED); nothing changed."""


class WeakPassword(InvalidArgument):
    """A password that is too short, too long, too common or the user's own name."""


class TokenExpired(PartitionletError):
    """An API token whose expiry has passed: make a new one (engine.auth.users)."""


class TryLater(PartitionletError):
    """Refused for now, nothing done: try again after `retry_after` whole seconds."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = max(1, int(retry_after))


class LoginThrottled(TryLater):
    """Too many wrong passwords for one user name: its logins wait (engine.auth.users)."""


class Busy(TryLater):
    """Too much of one costly kind of work running at once in this process: password
    hashes (engine.auth.users), protoc runs (engine.client.schemas)."""


# --- state and time ----------------------------------------------------------------------


class Timeout(PartitionletError, TimeoutError):
    """An operation did not finish within its timeout (a future's `get`, `flush`, a lock)."""


class Closed(PartitionletError):
    """The cluster, producer or consumer has been closed."""


class IllegalState(PartitionletError):
    """A call that the object's state does not allow (for example `poll` with no topic)."""


class NoOffsetForPartition(IllegalState):
    """`auto_offset_reset="none"` and the group has no committed offset for a partition."""


class CommitFailed(IllegalState):
    """A group member committed a partition that the group has given to another member."""


# --- idempotent and transactional producers (Kafka's names) --------------------------------


class UnknownProducerId(IllegalState):
    """A batch names a producer id the cluster did not issue to this principal, or one that
    expired: the producer asks for a new id."""


class InvalidProducerEpoch(IllegalState):
    """A batch's producer epoch is older than one already written to the partition: a newer
    producer with the same id (or transactional id) fenced this one."""


class ProducerFenced(InvalidProducerEpoch):
    """A newer `init_transactions()` of the same transactional id fenced this producer."""


class OutOfOrderSequence(IllegalState):
    """A batch's sequence number does not follow the last one the partition holds from its
    producer: a batch in between was lost, so writing this one would reorder the log."""


# --- files -------------------------------------------------------------------------------


class StorageError(PartitionletError):
    """A data file could not be used."""


class NotACluster(StorageError):
    """The directory exists but is not a Partitionlet cluster (no catalog, or a foreign one)."""


class CorruptFile(StorageError):
    """A catalog or volume file is not a readable SQLite database."""


class CorruptBatch(StorageError):
    """A stored record batch whose bytes do not match the CRC32C written with it (damaged
    on disk or on its way from another cluster): none of it is handed out. Says where:
    `cluster`, `volume` (its id, or a file), `topic`, `partition`, the offsets
    `base_offset`..`last_offset` and the `partitionlet` (None where not known). Other
    partitions are not affected; a reader may seek past `last_offset`."""

    def __init__(
        self,
        problem: str,
        *,
        cluster: str | None = None,
        volume: int | str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        base_offset: int | None = None,
        last_offset: int | None = None,
        partitionlet: int | None = None,
    ) -> None:
        self.problem = problem
        self.cluster = cluster
        self.volume = volume
        self.topic = topic
        self.partition = partition
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.partitionlet = partitionlet
        where = []
        if cluster is not None:
            where.append(f"cluster {cluster}")
        if volume is not None:
            where.append(f"volume {volume}")
        if topic is not None:
            where.append(f"topic {topic}")
        if partition is not None:
            where.append(f"partition {partition}")
        if base_offset is not None:
            where.append(f"offsets {base_offset}..{last_offset}")
        if partitionlet is not None:
            where.append(f"partitionlet {partitionlet}")
        if not where:  # a message as it came (an error answered by another process)
            super().__init__(problem)
            return
        super().__init__(
            f"damaged record batch ({', '.join(where)}): {problem}; these offsets are not "
            "served (other partitions are). Restore the partition from a replica or a "
            "backup; `plet check` lists every damaged batch"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword arguments, so that it pickles (a Spark task's error crosses processes)
        where = {k: getattr(self, k) for k in _CORRUPT_BATCH_WHERE}
        return (_corrupt_batch, (self.problem, where))


_CORRUPT_BATCH_WHERE = (
    "cluster", "volume", "topic", "partition", "base_offset", "last_offset", "partitionlet",
)  # fmt: skip


def _corrupt_batch(problem: str, where: dict[str, Any]) -> CorruptBatch:
    return CorruptBatch(problem, **where)


class FileLocked(StorageError):
    """Another process held a file's write lock for longer than the busy timeout."""


class DiskFull(StorageError):
    """A write found no free space on the disk of a data file; nothing of it was stored.
    It may succeed once space is freed (Kafka's KAFKA_STORAGE_ERROR over the wire)."""


class DamagedPartition(StorageError):
    """A partition's stored data disagrees with what its catalog or volume promises (a
    damaged index, row or file, or a log cut short): the message names the topic, the
    partition and the volume. Writes to it are refused and reads stop there instead of
    skipping; the other partitions keep working. `plet check` says what to repair."""
