"""kafka-python's error names for the Kafka facade (`engine.kafka`), and the translation of
engine errors into them.

A program written for kafka-python catches `kafka.errors.KafkaError` and its subclasses;
through the facade it catches the classes of this module under the same names
(`from engine.kafka import errors`, or `from engine.kafka.errors import KafkaError`). Each
translated error keeps the engine's error as `__cause__`, so nothing of the original
message or traceback is lost.

The classes that stand for a Kafka protocol error carry its error code (`errno`), so code
that compares codes or calls `for_code()` keeps working. Only the classes a program may
meet through the facade, or commonly names in an `except` clause, are defined.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from engine import errors as engine_errors


class KafkaError(RuntimeError):
    """Base class of every error raised by the Kafka facade."""

    retriable = False
    # Kafka clients refresh their metadata after such an error; the facade has no cache
    # to refresh, but the attribute is part of the classes' public face.
    invalid_metadata = False
    # the broker's answer an admin call failed in (engine.kafka.admin), as kafka-python's
    response: Any = None

    def __str__(self) -> str:
        if not self.args:
            return self.__class__.__name__
        return f"{self.__class__.__name__}: {super().__str__()}"


# --- client-side errors (no Kafka error code) --------------------------------------------


class IllegalStateError(KafkaError):
    pass


class IllegalArgumentError(KafkaError):
    pass


class NoBrokersAvailable(KafkaError):
    """No cluster could be found or opened for `bootstrap_servers`."""

    retriable = True
    invalid_metadata = True


class NodeNotReadyError(KafkaError):
    retriable = True


class KafkaProtocolError(KafkaError):
    retriable = True


class Cancelled(KafkaError):
    retriable = True


class TooManyInFlightRequests(KafkaError):
    retriable = True


class StaleMetadata(KafkaError):
    retriable = True
    invalid_metadata = True


class CommitFailedError(KafkaError):
    """A commit was refused because the group rebalanced in the meantime."""


class AuthenticationMethodNotSupported(KafkaError):
    pass


class AuthenticationFailedError(KafkaError):
    retriable = False


class NoOffsetForPartitionError(KafkaError):
    """`auto_offset_reset='none'` and there is no committed offset to start from."""


class KafkaTimeoutError(KafkaError):
    retriable = True


class KafkaUnavailableError(KafkaError):
    pass


class KafkaConnectionError(KafkaError):
    retriable = True
    invalid_metadata = True


class KafkaConfigurationError(KafkaError):
    """A configuration keyword that is unknown, or a value that cannot be used."""


class UnsupportedCodecError(KafkaError):
    pass


class UnrecognizedBrokerVersion(KafkaError):
    pass


class IncompatibleBrokerVersion(KafkaError):
    pass


# --- errors with a Kafka protocol error code ---------------------------------------------


class BrokerResponseError(KafkaError):
    """An error that a Kafka broker would have answered with; `errno` is its code."""

    errno: int | None = None
    message: str | None = None
    description: str | None = None

    def __str__(self) -> str:
        text = f"[Error {self.errno}] {self.__class__.__name__}"
        return f"{text}: {self.args[0]}" if self.args else text


def _code(
    name: str,
    errno: int,
    *,
    retriable: bool = False,
    invalid_metadata: bool = False,
    description: str = "",
) -> type[BrokerResponseError]:
    """A BrokerResponseError subclass for one protocol error code."""
    cls = type(
        name,
        (BrokerResponseError,),
        {
            "errno": errno,
            "message": _protocol_name(name),
            "description": description,
            "retriable": retriable,
            "invalid_metadata": invalid_metadata,
            "__module__": __name__,
            "__qualname__": name,
            "__doc__": description or None,
        },
    )
    return cls


def _protocol_name(class_name: str) -> str:
    """'UnknownTopicOrPartitionError' -> 'UNKNOWN_TOPIC_OR_PARTITION' (Kafka's spelling)."""
    base = class_name.removesuffix("Error")
    out = []
    for i, ch in enumerate(base):
        if ch.isupper() and i and not base[i - 1].isupper():
            out.append("_")
        out.append(ch.upper())
    return "".join(out)


class NoError(BrokerResponseError):
    errno = 0
    message = "NO_ERROR"
    description = "No error."


UnknownError = _code("UnknownError", -1, description="An unexpected error.")
OffsetOutOfRangeError = _code(
    "OffsetOutOfRangeError", 1, description="The offset is outside the partition's log."
)
CorruptRecordException = _code("CorruptRecordException", 2, description="A record is corrupt.")
UnknownTopicOrPartitionError = _code(
    "UnknownTopicOrPartitionError",
    3,
    retriable=True,
    invalid_metadata=True,
    description="The topic or partition does not exist.",
)
InvalidFetchRequestError = _code("InvalidFetchRequestError", 4)
LeaderNotAvailableError = _code("LeaderNotAvailableError", 5, retriable=True, invalid_metadata=True)
NotLeaderForPartitionError = _code(
    "NotLeaderForPartitionError", 6, retriable=True, invalid_metadata=True
)
RequestTimedOutError = _code("RequestTimedOutError", 7, retriable=True)
BrokerNotAvailableError = _code("BrokerNotAvailableError", 8)
ReplicaNotAvailableError = _code("ReplicaNotAvailableError", 9)
MessageSizeTooLargeError = _code(
    "MessageSizeTooLargeError",
    10,
    description="The message is larger than the largest message the topic accepts.",
)
StaleControllerEpochError = _code("StaleControllerEpochError", 11)
OffsetMetadataTooLargeError = _code("OffsetMetadataTooLargeError", 12)
StaleLeaderEpochCodeError = _code("StaleLeaderEpochCodeError", 13)
GroupLoadInProgressError = _code("GroupLoadInProgressError", 14, retriable=True)
GroupCoordinatorNotAvailableError = _code("GroupCoordinatorNotAvailableError", 15, retriable=True)
NotCoordinatorForGroupError = _code("NotCoordinatorForGroupError", 16, retriable=True)
InvalidTopicError = _code(
    "InvalidTopicError", 17, description="The topic name is not a valid name."
)
RecordListTooLargeError = _code("RecordListTooLargeError", 18)
NotEnoughReplicasError = _code("NotEnoughReplicasError", 19, retriable=True)
NotEnoughReplicasAfterAppendError = _code("NotEnoughReplicasAfterAppendError", 20, retriable=True)
InvalidRequiredAcksError = _code("InvalidRequiredAcksError", 21)
IllegalGenerationError = _code("IllegalGenerationError", 22)
InconsistentGroupProtocolError = _code("InconsistentGroupProtocolError", 23)
InvalidGroupIdError = _code("InvalidGroupIdError", 24)
UnknownMemberIdError = _code("UnknownMemberIdError", 25)
InvalidSessionTimeoutError = _code("InvalidSessionTimeoutError", 26)
RebalanceInProgressError = _code("RebalanceInProgressError", 27)
InvalidCommitOffsetSizeError = _code("InvalidCommitOffsetSizeError", 28)
TopicAuthorizationFailedError = _code(
    "TopicAuthorizationFailedError",
    29,
    description="The principal may not perform this operation on the topic.",
)
GroupAuthorizationFailedError = _code(
    "GroupAuthorizationFailedError",
    30,
    description="The principal may not perform this operation on the group.",
)
ClusterAuthorizationFailedError = _code("ClusterAuthorizationFailedError", 31)
InvalidTimestampError = _code("InvalidTimestampError", 32)
UnsupportedSaslMechanismError = _code("UnsupportedSaslMechanismError", 33)
IllegalSaslStateError = _code("IllegalSaslStateError", 34)
UnsupportedVersionError = _code("UnsupportedVersionError", 35)
TopicAlreadyExistsError = _code(
    "TopicAlreadyExistsError", 36, description="A topic of this name exists already."
)
InvalidPartitionsError = _code(
    "InvalidPartitionsError", 37, description="The number of partitions is not valid."
)
InvalidReplicationFactorError = _code("InvalidReplicationFactorError", 38)
InvalidReplicationAssignmentError = _code("InvalidReplicationAssignmentError", 39)
InvalidConfigurationError = _code("InvalidConfigurationError", 40)
NotControllerError = _code("NotControllerError", 41, retriable=True)
InvalidRequestError = _code("InvalidRequestError", 42)
UnsupportedForMessageFormatError = _code("UnsupportedForMessageFormatError", 43)
PolicyViolationError = _code("PolicyViolationError", 44)
OutOfOrderSequenceNumberError = _code("OutOfOrderSequenceNumberError", 45)
InvalidProducerEpochError = _code(
    "InvalidProducerEpochError", 47, description="A newer producer of the id fenced this one."
)
InvalidTxnStateError = _code("InvalidTxnStateError", 48)
InvalidTransactionTimeoutError = _code("InvalidTransactionTimeoutError", 50)
TransactionalIdAuthorizationFailedError = _code("TransactionalIdAuthorizationFailedError", 53)
SecurityDisabledError = _code("SecurityDisabledError", 54)
KafkaStorageError = _code(
    "KafkaStorageError",
    56,
    retriable=True,
    description="The disk of a log file is full or failed; nothing was written.",
)
UnknownProducerIdError = _code("UnknownProducerIdError", 59)
NonEmptyGroupError = _code(
    "NonEmptyGroupError", 68, description="The group has members, so it cannot be changed."
)
GroupIdNotFoundError = _code(
    "GroupIdNotFoundError", 69, description="The consumer group does not exist."
)
ProducerFencedError = _code(
    "ProducerFencedError",
    90,
    description="A newer producer with the same transactional id fenced this one.",
)

_BY_CODE: dict[int, type[BrokerResponseError]] = {
    cls.errno: cls
    for cls in [NoError, *(v for v in list(globals().values()) if isinstance(v, type))]
    if issubclass(cls, BrokerResponseError) and cls.errno is not None
}
kafka_errors = _BY_CODE  # kafka-python's name for this table

# What `from engine.kafka.errors import *` (and so `engine.kafka` itself) exports: the
# error classes and kafka-python's two lookups, not this module's helpers.
__all__ = [
    name
    for name, value in list(globals().items())
    if isinstance(value, type) and issubclass(value, KafkaError)
] + ["for_code", "kafka_errors"]


def for_code(error_code: int) -> type[BrokerResponseError]:
    """The class of a Kafka protocol error code (UnknownError for a code not listed)."""
    return _BY_CODE.get(error_code, UnknownError)


# --- translation of engine errors --------------------------------------------------------

# Engine error class name -> facade class. Looked up along the engine error's MRO by name,
# so that engine classes added later (by the group membership work, for instance) map to
# the kafka-python class of the same meaning as soon as they exist.
_BY_ENGINE_NAME: dict[str, type[KafkaError]] = {
    "InvalidName": InvalidTopicError,
    "InvalidPolicy": InvalidConfigurationError,
    "InvalidPartition": UnknownTopicOrPartitionError,
    "InvalidOffset": IllegalArgumentError,
    "InvalidArgument": IllegalArgumentError,
    "MessageTooLarge": MessageSizeTooLargeError,
    "UnknownStream": UnknownTopicOrPartitionError,
    "UnknownTopic": UnknownTopicOrPartitionError,
    "UnknownGroup": GroupIdNotFoundError,
    "NotFound": UnknownTopicOrPartitionError,
    "TopicExists": TopicAlreadyExistsError,
    "StreamExists": TopicAlreadyExistsError,
    "AlreadyExists": TopicAlreadyExistsError,
    "GroupAccessDenied": GroupAuthorizationFailedError,
    "AccessDenied": TopicAuthorizationFailedError,
    "Timeout": KafkaTimeoutError,
    "FileLocked": KafkaTimeoutError,
    "DiskFull": KafkaStorageError,
    "Closed": IllegalStateError,
    "NoOffsetForPartition": NoOffsetForPartitionError,
    "ProducerFenced": ProducerFencedError,
    "InvalidProducerEpoch": InvalidProducerEpochError,
    "OutOfOrderSequence": OutOfOrderSequenceNumberError,
    "UnknownProducerId": UnknownProducerIdError,
    "IllegalState": IllegalStateError,
    "NotACluster": NoBrokersAvailable,
    "CorruptBatch": CorruptRecordException,  # a stored batch failed its checksum
    # names the group membership work may introduce
    "CommitFailed": CommitFailedError,
    "RebalanceInProgress": RebalanceInProgressError,
    "UnknownMember": UnknownMemberIdError,
    "UnknownMemberId": UnknownMemberIdError,
    "IllegalGeneration": IllegalGenerationError,
    "GroupNotEmpty": NonEmptyGroupError,
    "NonEmptyGroup": NonEmptyGroupError,
    "InvalidGroupId": InvalidGroupIdError,
}


def translate(exc: BaseException, **overrides: type[KafkaError]) -> BaseException:
    """The facade error for an engine error, with the engine error as its `__cause__`.

    `overrides` maps engine class names to facade classes where the meaning depends on the
    call (an `InvalidPartition` is `InvalidPartitionsError` in `create_partitions`). Errors
    that are not engine errors, and facade errors, come back unchanged.
    """
    if isinstance(exc, KafkaError) or not isinstance(exc, engine_errors.PartitionletError):
        return exc
    target: type[KafkaError] = KafkaError
    for cls in type(exc).__mro__:
        found = overrides.get(cls.__name__) or _BY_ENGINE_NAME.get(cls.__name__)
        if found is not None:
            target = found
            break
    error = target(str(exc))
    error.__cause__ = exc
    return error


@contextlib.contextmanager
def translated(**overrides: type[KafkaError]) -> Iterator[None]:
    """Raise engine errors met inside the block as the facade's classes (see `translate`)."""
    try:
        yield
    except engine_errors.PartitionletError as exc:
        raise translate(exc, **overrides) from exc
