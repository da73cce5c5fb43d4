"""The keyword arguments of the facade's clients: which are used, which are accepted and
ignored, and their checks.

As kafka-python does, a keyword no client knows raises `KafkaConfigurationError`, so a
typo is not silently dropped; settings that only a networked broker needs (security,
sockets, retries, ...) are accepted and ignored (docs/KAFKA.md lists them).
"""

from __future__ import annotations

import itertools
from typing import Any

from engine.kafka.errors import KafkaConfigurationError

# Settings of every kafka-python client that only a networked broker needs.
IGNORED_COMMON = frozenset(
    {
        "client_id",
        "request_timeout_ms",
        "connections_max_idle_ms",
        "reconnect_backoff_ms",
        "reconnect_backoff_max_ms",
        "max_in_flight_requests_per_connection",
        "receive_buffer_bytes",
        "send_buffer_bytes",
        "socket_options",
        "sock_chunk_bytes",
        "sock_chunk_buffer_count",
        "retry_backoff_ms",
        "retry_backoff_max_ms",
        "metadata_max_age_ms",
        "security_protocol",
        "ssl_context",
        "ssl_check_hostname",
        "ssl_cafile",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_crlfile",
        "ssl_password",
        "ssl_ciphers",
        "api_version",
        "api_version_auto_timeout_ms",
        "selector",
        "sasl_mechanism",
        "sasl_plain_username",
        "sasl_plain_password",
        "sasl_kerberos_name",
        "sasl_kerberos_service_name",
        "sasl_kerberos_domain_name",
        "sasl_oauth_token_provider",
        "socks5_proxy",
        "metric_reporters",
        "metrics_enabled",
        "metrics_num_samples",
        "metrics_sample_window_ms",
        "kafka_client",
        "bootstrap_topics_filter",
        # kafka-python 3.0's
        "bootstrap_timeout_ms",
        "client_dns_lookup",
        "proxy_url",
        "receive_message_max_bytes",
    }
)
# The facade's own keywords, for every client.
EXTENSIONS = frozenset({"bootstrap_servers", "default_stream"})

PRODUCER_USED = frozenset(
    {
        "key_serializer",
        "value_serializer",
        "acks",
        "batch_size",
        "linger_ms",
        "partitioner",
        "buffer_memory",
        "max_block_ms",
        "max_request_size",
        "enable_idempotence",
        "retries",
        "transactional_id",
        "transaction_timeout_ms",
    }
)
PRODUCER_IGNORED = frozenset(
    {
        "compression_type",
        "delivery_timeout_ms",
        "allow_auto_create_topics",
    }
)
CONSUMER_USED = frozenset(
    {
        "group_id",
        "key_deserializer",
        "value_deserializer",
        "auto_offset_reset",
        "enable_auto_commit",
        "auto_commit_interval_ms",
        "default_offset_commit_callback",
        "max_poll_records",
        "max_poll_interval_ms",
        "consumer_timeout_ms",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "partition_assignment_strategy",
        "isolation_level",
    }
)
CONSUMER_IGNORED = frozenset(
    {
        "fetch_min_bytes",
        "fetch_max_wait_ms",
        "fetch_max_bytes",
        "max_partition_fetch_bytes",
        "check_crcs",
        "exclude_internal_topics",
        "metric_group_prefix",
        "legacy_iterator",
        "allow_auto_create_topics",
        "group_instance_id",
        "enable_incremental_fetch_sessions",
        "leave_group_on_close",
        "client_rack",
    }
)

# Engine errors raised while a client is built come from its settings.
CONFIG_ERRORS = {
    "InvalidArgument": KafkaConfigurationError,
    "InvalidName": KafkaConfigurationError,
    "InvalidOffset": KafkaConfigurationError,
}

_client_ids = itertools.count(1)


class UnrecognizedConfigs(KafkaConfigurationError, ValueError):
    """An unknown keyword: kafka-python 2.0 and 3.0's consumer raise
    `KafkaConfigurationError`, 3.0's producer `ValueError`; this is both."""


def configure(
    kind: str,
    configs: dict[str, Any],
    used: frozenset[str] = frozenset(),
    ignored: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The settings of a `kind` client ('KafkaProducer', ...), with the common defaults;
    raises `KafkaConfigurationError` for a keyword it does not know."""
    unknown = set(configs) - used - ignored - IGNORED_COMMON - EXTENSIONS
    if unknown:
        raise UnrecognizedConfigs(f"Unrecognized configs for {kind}: {', '.join(sorted(unknown))}")
    config = dict(configs)
    config.setdefault("bootstrap_servers", "localhost")
    config.setdefault("client_id", f"partitionlet-{kind.lower()}-{next(_client_ids)}")
    return config


def int_setting(config: dict[str, Any], name: str) -> int | None:
    """The setting `name` as an int (None when unset); a float must be a whole number."""
    value = config.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise KafkaConfigurationError(f"{name} must be an integer, got {value!r}")
    return int(value)
