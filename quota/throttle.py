"""Where requests meet the quota managers: record, work out the throttle time, put it in the response.

:func:`after_request` runs for every handled request (``handlers.registry.dispatch``); the Fetch
handler records its own usage first with :func:`fetch_throttle_ms` (a throttled fetch is answered
empty) and caps what it reads with :func:`fetch_max_bytes`. The throttle time a request earned is
left in ``ctx.extra["throttle_ms"]``: the connection reads nothing more for that long after the
response (``server.Connection``, Kafka's muted channel).
"""

from __future__ import annotations

import math
from typing import Any

from . import EXEMPT_APIS, QuotaManagers, client_of, now_ms, quota_managers
from .task_time import sync_instrument

PRODUCE_KEY = 0
FETCH_KEY = 1


def _from_follower(request: Any) -> bool:
    state = getattr(request, "replica_state", None)
    replica = getattr(state, "replica_id", None) if state is not None else None
    if replica is None or replica < 0:
        replica = getattr(request, "replica_id", -1)
    return replica is not None and replica >= 0


def _set_throttle(body: Any, throttle_ms: int) -> None:
    if body is not None and "throttle_time_ms" in getattr(type(body), "__slots__", ()):
        body.throttle_time_ms = max(getattr(body, "throttle_time_ms", 0) or 0, throttle_ms)


def _handling_seconds(managers: QuotaManagers, ctx: Any, elapsed_s: float) -> float:
    """What the request cost the broker: the loop's time in this connection's task since its last
    request while request quotas are on (odradek.quota.task_time), else the handler's wall time
    less its long-poll wait."""
    times = sync_instrument(managers, managers.request.enabled)
    if times is not None:
        return times.charge()
    return max(elapsed_s - ctx.extra.get("waited_s", 0.0), 0.0)


def after_request(ctx: Any, header: Any, request: Any, body: Any, request_size: int, elapsed_s: float) -> Any:
    """Record a handled request against its client's quotas; the response, with the throttle time."""
    api = header.api_key
    if api in EXEMPT_APIS or ctx.extra.get("quota_recorded"):
        return body
    managers = quota_managers(ctx.broker)
    if managers is None or not managers.enabled:
        return body
    if api == FETCH_KEY and _from_follower(request):
        return body
    user, client_id = client_of(ctx, header.client_id)
    now = now_ms()
    seconds = _handling_seconds(managers, ctx, elapsed_s)
    if api == PRODUCE_KEY:
        bandwidth = managers.produce.record_and_get_throttle_time_ms(user, client_id, request_size, now)
        # acks=0 is exempt from the request quota; its bandwidth still mutes the channel
        spent = 0 if request.acks == 0 else managers.request_throttle_ms(user, client_id, seconds, now)
        throttle = max(bandwidth, spent)
    else:
        throttle = managers.request_throttle_ms(user, client_id, seconds, now)
    if throttle > 0:
        # a controller mutation throttle the handler set stays if it is the longer one
        ctx.extra["throttle_ms"] = max(throttle, ctx.extra.get("throttle_ms") or 0)
        _set_throttle(body, throttle)
    return body


def fetch_max_bytes(ctx: Any, header: Any, request: Any) -> float:
    """The most bytes a consumer's fetch may carry: one quota span's worth of its consumer_byte_rate."""
    managers = quota_managers(ctx.broker)
    if managers is None or not managers.fetch.enabled or _from_follower(request):
        return math.inf
    user, client_id = client_of(ctx, header.client_id)
    return managers.fetch.max_value_in_quota_window(user, client_id)


def fetch_throttle_ms(ctx: Any, header: Any, request: Any, response_size: int, elapsed_s: float) -> int:
    """Record a consumer fetch (its time and response size) before it is answered; the throttle time.

    When throttled, the fetch is answered empty and its size is taken back from the byte rate."""
    managers = quota_managers(ctx.broker)
    if managers is None or not managers.enabled or _from_follower(request):
        return 0
    ctx.extra["quota_recorded"] = True
    user, client_id = client_of(ctx, header.client_id)
    now = now_ms()
    spent = managers.request_throttle_ms(user, client_id, _handling_seconds(managers, ctx, elapsed_s), now)
    bandwidth = managers.fetch.record_and_get_throttle_time_ms(user, client_id, response_size, now)
    throttle = max(spent, bandwidth)
    if throttle > 0:
        managers.fetch.unrecord(user, client_id, response_size, now)
        ctx.extra["throttle_ms"] = throttle
    return throttle
