"""Kafka's error codes the listener answers with, and the engine errors they stand for."""

from __future__ import annotations

import logging

from engine import errors
from engine.log_once import LogOnce

log = logging.getLogger(__name__)
# Storage trouble (a full disk fails every produce) is logged here, where every handler's
# engine error turns into a code: one line per minute per cause, with a count of the rest.
STORAGE_LOG_INTERVAL_S = 60.0
_storage_log = LogOnce(log, STORAGE_LOG_INTERVAL_S)

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_FETCH_SIZE = 4
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
COORDINATOR_NOT_AVAILABLE = 15
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
NOT_ENOUGH_REPLICAS = 19
INVALID_REQUIRED_ACKS = 21
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SASL_AUTHENTICATION_FAILED = 58
UNKNOWN_PRODUCER_ID = 59
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
OPERATION_NOT_ATTEMPTED = 55
KAFKA_STORAGE_ERROR = 56
MEMBER_ID_REQUIRED = 79
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
UNKNOWN_SERVER_ERROR = -1


def of(exc: BaseException) -> int:
    """The Kafka error code of an engine error met while serving a request; a storage
    error (a full disk, a damaged or locked file) is logged, once a minute per cause."""
    if isinstance(exc, errors.CorruptBatch):
        # not retriable: a damaged batch stays damaged until it is restored
        cause = f"{type(exc).__name__}: {exc}"
        _storage_log(logging.ERROR, cause, "answering CORRUPT_MESSAGE: %s", cause)
        return CORRUPT_MESSAGE
    if isinstance(exc, errors.InvalidRecordBatch):
        return CORRUPT_MESSAGE
    if isinstance(exc, errors.InvalidName):
        return INVALID_TOPIC_EXCEPTION
    if isinstance(exc, errors.UnknownTopic | errors.UnknownStream | errors.InvalidPartition):
        return UNKNOWN_TOPIC_OR_PARTITION
    if isinstance(exc, errors.GroupAccessDenied):
        return GROUP_AUTHORIZATION_FAILED
    if isinstance(exc, errors.AccessDenied):
        return TOPIC_AUTHORIZATION_FAILED
    if isinstance(exc, errors.ProducerFenced):
        return PRODUCER_FENCED
    if isinstance(exc, errors.InvalidProducerEpoch):
        return INVALID_PRODUCER_EPOCH
    if isinstance(exc, errors.OutOfOrderSequence):
        return OUT_OF_ORDER_SEQUENCE_NUMBER
    if isinstance(exc, errors.UnknownProducerId):
        return UNKNOWN_PRODUCER_ID
    if isinstance(exc, errors.MessageTooLarge):
        return MESSAGE_TOO_LARGE
    if isinstance(exc, errors.InvalidOffset):
        return OFFSET_OUT_OF_RANGE
    if isinstance(exc, errors.Timeout):
        return REQUEST_TIMED_OUT
    if isinstance(exc, errors.TryLater):
        return NOT_ENOUGH_REPLICAS  # retriable in every client: they back off and resend
    if isinstance(exc, errors.StorageError):
        cause = f"{type(exc).__name__}: {exc}"
        _storage_log(logging.ERROR, cause, "answering KAFKA_STORAGE_ERROR: %s", cause)
        return KAFKA_STORAGE_ERROR  # retriable: clients resend once the disk has room
    return UNKNOWN_SERVER_ERROR
