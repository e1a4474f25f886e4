"""GetTelemetrySubscriptions (71) and PushTelemetry (72), KIP-714, as Kafka 4.4's ClientMetricsManager
answers them (:mod:`odradek.client_telemetry` keeps the subscriptions, instances and metrics).

* GetTelemetrySubscriptions: a zero instance id gets a new one; the answer carries the instance's
  subscription id, the metric prefixes it is asked for (empty: none, ``*``: all), the push
  interval, the accepted codecs (zstd, lz4, gzip, snappy), ``telemetry.max.bytes`` and delta
  temporality. Asking again before the push interval has passed is THROTTLING_QUOTA_EXCEEDED.
* PushTelemetry: INVALID_REQUEST for a reserved instance id or after a terminating push;
  THROTTLING_QUOTA_EXCEEDED before the interval (a terminating push is always accepted);
  UNKNOWN_SUBSCRIPTION_ID when the subscriptions changed; UNSUPPORTED_COMPRESSION_TYPE;
  TELEMETRY_TOO_LARGE; INVALID_RECORD for a payload that cannot be decompressed or decoded.

Kafka 4.4 advertises these two APIs only when a telemetry exporter plugin is configured; Odradek's
exporter is its Prometheus endpoint, so it always serves them (docs/metrics.md).
"""

from __future__ import annotations

import logging
from typing import Any

from ..client_telemetry import SUPPORTED_COMPRESSION_TYPES, telemetry_manager
from ..wire.compression import CompressionType, CorruptRecordError, decompress
from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import response_class
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

GET_TELEMETRY_SUBSCRIPTIONS_KEY = 71
PUSH_TELEMETRY_KEY = 72
GetResponse = response_class(GET_TELEMETRY_SUBSCRIPTIONS_KEY)
PushResponse = response_class(PUSH_TELEMETRY_KEY)

_ZERO = Uuid(b"\0" * 16)
_ONE = Uuid(b"\0" * 15 + b"\x01")  # Kafka's Uuid.METADATA_TOPIC_ID, reserved like ZERO_UUID


def _attributes(ctx: RequestContext, header: Any, instance_id: Uuid) -> dict[str, str]:
    address, _, port = ctx.peer.rpartition(":")
    # what the client's ApiVersions request said it is (handlers/api_versions.py keeps it)
    software, software_version = getattr(ctx.session, "client_software", None) or ("", "")
    return {"client_instance_id": instance_id.to_base64(), "client_id": getattr(header, "client_id", None) or "",
            "client_software_name": software or "", "client_software_version": software_version or "",
            "client_source_address": address.strip("[]"), "client_source_port": port}


@handles(GET_TELEMETRY_SUBSCRIPTIONS_KEY, 0, 0)
async def handle_get_telemetry_subscriptions(ctx: RequestContext, header, request) -> object:
    from ..cluster_metadata import random_uuid  # noqa: PLC0415 - Kafka's Uuid.randomUuid

    manager = telemetry_manager(ctx.broker)
    manager.expire()
    instance_id = request.client_instance_id
    if instance_id is None or instance_id == _ZERO:
        instance_id = random_uuid()
        while instance_id in manager.instances:
            instance_id = random_uuid()
    inst = manager.instance(instance_id, _attributes(ctx, header, instance_id))
    now = manager.now_ms()
    if not inst.maybe_get(now):
        return GetResponse(throttle_time_ms=0, error_code=int(ErrorCode.THROTTLING_QUOTA_EXCEEDED),
                           client_instance_id=_ZERO, subscription_id=0, accepted_compression_types=[],
                           push_interval_ms=0, telemetry_max_bytes=0, delta_temporality=False, requested_metrics=[])
    inst.last_error = ErrorCode.NONE
    return GetResponse(throttle_time_ms=0, error_code=0, client_instance_id=instance_id,
                       subscription_id=inst.subscription_id, accepted_compression_types=list(SUPPORTED_COMPRESSION_TYPES),
                       push_interval_ms=inst.push_interval_ms, telemetry_max_bytes=manager.max_bytes,
                       delta_temporality=True, requested_metrics=list(inst.metrics))


def _push_error(request: Any, inst: Any, manager: Any, now: int) -> ErrorCode | None:
    if inst.terminating:
        return ErrorCode.INVALID_REQUEST
    if not inst.maybe_push(now) and not request.terminating:
        return ErrorCode.THROTTLING_QUOTA_EXCEEDED
    if request.subscription_id != inst.subscription_id:
        return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    if request.compression_type not in [int(c) for c in CompressionType]:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    if request.metrics is not None and len(request.metrics) > manager.max_bytes:
        return ErrorCode.TELEMETRY_TOO_LARGE
    return None


@handles(PUSH_TELEMETRY_KEY, 0, 0)
async def handle_push_telemetry(ctx: RequestContext, header, request) -> object:
    instance_id = request.client_instance_id
    if instance_id is None or instance_id in (_ZERO, _ONE):
        return PushResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST))
    manager = telemetry_manager(ctx.broker)
    inst = manager.instance(instance_id, _attributes(ctx, header, instance_id))
    now = manager.now_ms()
    try:
        error = _push_error(request, inst, manager, now)
    finally:
        inst.terminating = bool(request.terminating)
    if error is not None:
        inst.last_error = error
        return PushResponse(throttle_time_ms=0, error_code=int(error))
    payload = bytes(request.metrics or b"")
    if payload:
        try:
            raw = decompress(request.compression_type, payload, max_size=64 * manager.max_bytes)
            manager.record(inst, raw)
        except (CorruptRecordError, ValueError) as exc:
            log.warning("Bad telemetry payload from client instance %s: %s", instance_id.to_base64(), exc)
            inst.last_error = ErrorCode.INVALID_RECORD
            return PushResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_RECORD))
    inst.last_error = ErrorCode.NONE
    return PushResponse(throttle_time_ms=0, error_code=0)
