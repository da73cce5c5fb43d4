"""The handler registry: one entry per Kafka API the listener serves, keyed by api key, with
the version range it answers (what ApiVersions advertises)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from kafka.protocol.api_message import ApiMessage

if TYPE_CHECKING:  # connection.py imports this module
    from engine.wire.codec import Spliced
    from engine.wire.connection import Session
    from engine.wire.park import Deferred, Park

# bounds as strings: ApiMessage's metaclass makes the class itself fail a truth test
Req = TypeVar("Req", bound="ApiMessage", contravariant=True)
Resp = TypeVar("Resp", bound="ApiMessage", covariant=True)
R = TypeVar("R", bound="ApiMessage")
S = TypeVar("S", bound="ApiMessage")


class Handler(Protocol[Req, Resp]):
    """handler(session, request, version) -> the response, None when none is sent (acks=0),
    a `Park` when the answer waits (engine.wire.park: a long poll, a pending join), or a
    `Deferred` when it comes once engine work it queued is done (a produce request), or a
    `Spliced` response whose records are joined in after it is encoded (a fetch).

    `request` is an instance of the request class the handler is registered for (its
    kafka-python protocol class, decoded at `version`), the response one of its response
    class."""

    def __call__(
        self, session: Session, request: Req, version: int, /
    ) -> Resp | Park | Deferred | Spliced | None: ...


@dataclass(frozen=True)
class Api:
    key: int
    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int
    # the registered handler, behind a check that the request is of `request`'s class
    handler: Handler[ApiMessage, ApiMessage]

    @property
    def name(self) -> str:
        return self.request.__name__.removesuffix("Request")


APIS: dict[int, Api] = {}


def api(
    request: type[R], response: type[S], versions: tuple[int, int]
) -> Callable[[Handler[R, S]], Handler[R, S]]:
    """Register the decorated function as the handler of `request`'s api key."""

    def register(handler: Handler[R, S]) -> Handler[R, S]:
        key = request.API_KEY
        if key in APIS:
            raise RuntimeError(f"api key {key} registered twice")

        def checked(
            session: Session, message: ApiMessage, version: int, /
        ) -> S | Park | Deferred | Spliced | None:
            # the connection decodes with this entry's request class, so this never fails:
            # it narrows the registry's ApiMessage to what the handler takes
            if not isinstance(message, request):
                raise TypeError(f"{key}: {type(message).__name__} is not a {request.__name__}")
            return handler(session, message, version)

        APIS[key] = Api(key, request, response, versions[0], versions[1], checked)
        return handler

    return register


def load() -> dict[int, Api]:
    """Every API, its handler module imported (each registers itself on import)."""
    from engine.wire.handlers import (  # noqa: F401
        admin,
        fetch,
        groups,
        logdirs,
        meta,
        offsets,
        produce,
        replicas,
        sasl,
        transactions,
    )

    return APIS
