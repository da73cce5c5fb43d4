"""The handler registry: one entry per Kafka API the listener serves, keyed by api key, with
the version range it answers (what ApiVersions advertises)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_message import ApiMessage

# handler(session, request, version) -> the response, or None when none is sent (acks=0)
Handler = Callable[[Any, Any, int], Any]


@dataclass(frozen=True)
class Api:
    key: int
    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int
    handler: Handler

    @property
    def name(self) -> str:
        return self.request.__name__.removesuffix("Request")


APIS: dict[int, Api] = {}


def api(
    request: type[ApiMessage], response: type[ApiMessage], versions: tuple[int, int]
) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of `request`'s api key."""

    def register(handler: Handler) -> Handler:
        key = request.API_KEY
        if key in APIS:
            raise RuntimeError(f"api key {key} registered twice")
        APIS[key] = Api(key, request, response, versions[0], versions[1], handler)
        return handler

    return register


def load() -> dict[int, Api]:
    """Every API, its handler module imported (each registers itself on import)."""
    from engine.wire.handlers import admin, fetch, groups, meta, offsets, produce, sasl  # noqa: F401

    return APIS
