"""Which handler serves which API and versions, and the dispatch of one request frame.

Every handler module registers its functions with :func:`handles`. ApiVersions answers
from this registry, so the broker advertises exactly what is implemented.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..cluster.forwarding import FORWARDED_APIS
from ..quota.throttle import after_request
from ..wire.errors import ErrorCode, ProtocolError
from ..wire.protocol import (
    RequestHeader,
    decode_request,
    decode_request_header,
    encode_response,
    response_class,
)

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18

HandlerFunc = Callable[["RequestContext", RequestHeader, Any], Awaitable[Any]]


@dataclass
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Broker
    peer: str
    listener_name: str
    extra: dict[str, Any] = field(default_factory=dict)
    # the connection's security state (odradek.security.Session): principal, SASL exchange
    session: Any = None

    @property
    def principal(self) -> str:
        """Kafka's principal of the connection, e.g. ``User:alice`` (``User:ANONYMOUS`` if none)."""
        return self.session.principal if self.session is not None else "User:ANONYMOUS"


@dataclass(frozen=True)
class ApiHandler:
    """A handler function and the versions it serves (and advertises)."""

    api_key: int
    min_version: int
    max_version: int
    func: HandlerFunc
    advertised_min: int

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


REGISTRY: dict[int, ApiHandler] = {}

# Modules that register handlers; imported once by load_handlers().
_HANDLER_MODULES = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "topics",
    "configs",
    "logs",
    "groups",
    "producer_ids",
    "transactions",
    "security",
    "scram_credentials",
    "client_quotas",
    "reassignments",
    "quorum",
    "replica_log_dirs",
    "config_resources",
    "txn_markers",
    "controller_apis",
    "delegation_tokens",
    "telemetry",
    "share_groups",
    "share_fetch",
    "share_state",
    "streams_groups",
)


def handles(
    api_key: int, min_version: int, max_version: int, *, advertised_min: int | None = None
) -> Callable[[HandlerFunc], HandlerFunc]:
    """Register the decorated coroutine as the handler of `api_key` for the given versions."""

    def register(func: HandlerFunc) -> HandlerFunc:
        REGISTRY[api_key] = ApiHandler(
            api_key,
            min_version,
            max_version,
            func,
            min_version if advertised_min is None else advertised_min,
        )
        return func

    return register


def load_handlers() -> None:
    """Import every handler module so that it registers itself."""
    for name in _HANDLER_MODULES:
        try:
            importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise


#: APIs only a controller listener advertises (Kafka's ListenerType.CONTROLLER-only APIs).
CONTROLLER_ONLY_APIS = frozenset({56, 58, 59, 62, 63, 67, 73})


def advertised_versions(controller_listener: bool = False) -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every API served on a client listener (`controller_listener`:
    on a controller listener, with the APIs brokers send their controller), in key order."""
    return [(h.api_key, h.advertised_min, h.max_version) for _, h in sorted(REGISTRY.items())
            if controller_listener or h.api_key not in CONTROLLER_ONLY_APIS]


def is_controller_listener(ctx: RequestContext) -> bool:
    """Whether the request came in on a listener named in controller.listener.names."""
    names = {str(n).upper() for n in ctx.broker.config.get("controller.listener.names") or []}
    return ctx.listener_name.upper() in names


async def dispatch(ctx: RequestContext, frame: memoryview) -> list | None:
    """Decode one request frame, run its handler and encode the answer.

    Returns the response buffers, or None when no response is due (acks=0).
    Raises ProtocolError when the connection must be closed.
    """
    header, _ = decode_request_header(frame)
    forwarding = getattr(ctx.broker, "forwarding", None)
    if forwarding is not None and header.api_key in FORWARDED_APIS:
        # a broker of a KRaft cluster: metadata changes are the controller's (KIP-590)
        return await forwarding.forward(frame, header.api_key, header.api_version, ctx.principal, ctx.peer)
    handler = REGISTRY.get(header.api_key)
    if handler is None or not handler.serves(header.api_version):
        return _unsupported(ctx, header, handler)
    request = decode_request(frame)
    started = time.perf_counter()
    post = None
    if _acls_enabled(ctx.broker):
        # authorizer.class.name: refuse or narrow the request before its handler (odradek.security.acl)
        from ..security.acl import Denied, enforce  # noqa: PLC0415 - only with ACLs on

        try:
            post = enforce(ctx, request.header, request.body)
        except Denied as denied:
            return encode_response(header.api_key, header.api_version, header.correlation_id, denied.body)
    try:
        body = await handler.func(ctx, request.header, request.body)
        if post is not None:
            body = post(body)
        # client quotas (odradek.quota): record the request, put its throttle time in the answer
        body = after_request(ctx, request.header, request.body, body, len(frame), time.perf_counter() - started)
    except ProtocolError:
        raise
    except Exception:
        log.exception(
            "Error handling api_key=%s v%s from %s; closing the connection",
            header.api_key,
            header.api_version,
            ctx.peer,
        )
        raise ProtocolError("handler failed") from None
    response = (
        None if body is None else encode_response(header.api_key, header.api_version, header.correlation_id, body)
    )
    metrics = getattr(ctx.broker, "metrics", None)
    if metrics is not None:  # Prometheus RequestsPerSec / TotalTimeMs (odradek.metrics)
        metrics.request_done(header.api_key, header.api_version, time.perf_counter() - started)
    return response


def _acls_enabled(broker: Broker) -> bool:
    enabled = getattr(broker, "_acls_enabled", None)
    if enabled is None:
        enabled = bool((broker.config.get("authorizer.class.name") or "").strip())
        try:
            broker._acls_enabled = enabled
        except AttributeError:
            pass
    return enabled


def _unsupported(ctx: RequestContext, header: RequestHeader, handler: ApiHandler | None) -> list:
    if header.api_key == API_VERSIONS_KEY:
        # Kafka answers a too-new ApiVersions request in a v0 body that still lists its
        # ranges, so the client can retry with a version both sides know.
        from .api_versions import api_versions_body

        body = api_versions_body(0, ErrorCode.UNSUPPORTED_VERSION)
        return encode_response(header.api_key, 0, header.correlation_id, body)
    if handler is not None:
        try:
            cls = response_class(header.api_key)
        except (KeyError, ProtocolError):
            cls = None
        if cls is not None and "error_code" in getattr(cls, "__slots__", ()):
            body = cls(error_code=int(ErrorCode.UNSUPPORTED_VERSION))
            log.info(
                "Unsupported version %s of api_key %s from %s",
                header.api_version,
                header.api_key,
                ctx.peer,
            )
            try:
                return encode_response(header.api_key, header.api_version, header.correlation_id, body)
            except (KeyError, ValueError):
                # a version no schema knows (the fuzzer sends e.g. Heartbeat v8707): nothing to
                # answer in, so the connection is closed like any other malformed request
                pass
    raise ProtocolError(
        f"unsupported api_key {header.api_key} version {header.api_version} from {ctx.peer}"
    )
