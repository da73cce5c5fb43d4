"""Every error the engine raises, one class per thing a caller may want to catch.

All derive from `PartitionletError`. Where a built-in exception means the same thing
(`ValueError` for bad input, `LookupError` for what does not exist, `TimeoutError`,
`PermissionError`), the class derives from it too, so generic handlers keep working.
Messages say what was wrong and what to do about it.
"""

from __future__ import annotations


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


class FileLocked(StorageError):
    """Another process held a file's write lock for longer than the busy timeout."""


class DamagedPartition(StorageError):
    """A partition's stored data disagrees with what its catalog or volume promises (a
    damaged index, row or file, or a log cut short): the message names the topic, the
    partition and the volume. Writes to it are refused and reads stop there instead of
    skipping; the other partitions keep working. `plet check` says what to repair."""
