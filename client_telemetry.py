"""Client telemetry (KIP-714): client-metrics subscriptions, client instances, pushed metrics.

* **Subscriptions** are client-metrics config resources (ConfigResource type 16): ``metrics``
  (metric name prefixes, ``*`` = all), ``interval.ms`` (push interval, 100 ms .. 1 h, default
  5 min) and ``match`` (``<selector>=<regex>`` pairs over client_instance_id, client_id,
  client_software_name, client_software_version, client_source_address, client_source_port).
  They are ConfigRecords in the metadata log, validated and described as Kafka 4.4 does
  (:func:`alter_client_metrics`, :func:`describe_client_metrics`).
* **Client instances** (Kafka's ClientMetricsManager): GetTelemetrySubscriptions gives a client
  its instance id, the union of the metrics of the subscriptions it matches, the smallest of their
  intervals and a subscription id (CRC32C of the metric set and interval, xor the instance id's
  hash, as Kafka computes it); PushTelemetry checks the timing, subscription id, compression and
  size with Kafka's errors.
* **Pushed metrics** are OTLP ``MetricsData`` protobufs (maybe compressed with the record-batch
  codecs). They are decoded with the OpenTelemetry project's own generated classes
  (``opentelemetry-proto``) rather than a hand-written protobuf reader, and kept per client
  instance until it terminates or expires. :class:`TelemetryCollector` shows them on the
  Prometheus endpoint: the OTLP name with ``.`` as ``_`` (counters get ``_total``), labelled
  with ``client_instance_id``, ``client_id`` and the data point's attributes.

A client's software name and version come from its ApiVersions request (v3+) on the same
connection; without one a ``match`` on them compares with an empty string.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .logstore.java_hash import hashmap_order, string_hash
from .wire.errors import ErrorCode
from .wire.primitives import Uuid

log = logging.getLogger(__name__)

CLIENT_METRICS = 16
SOURCE_CLIENT_METRICS_CONFIG = 7
SOURCE_DEFAULT = 5
TYPE_INT, TYPE_LIST = 3, 7
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

DEFAULT_INTERVAL_MS = 300000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3600000
ALL_METRICS = "*"
MATCH_SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                   "client_source_address", "client_source_port")
#: Kafka's ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES: zstd, lz4, gzip, snappy
SUPPORTED_COMPRESSION_TYPES = [4, 3, 1, 2]
#: how long an instance is kept at least (Kafka's DEFAULT_CACHE_EXPIRY_MS)
CACHE_EXPIRY_MS = 60000


@dataclass(frozen=True)
class ConfigSpec:
    """One client-metrics config: Kafka's type id, default and doc."""

    config_type: int
    default: str
    doc: str


#: Kafka 4.4's ClientMetricsConfigs, in name order (how DescribeConfigs lists them)
CONFIGS: dict[str, ConfigSpec] = {
    "interval.ms": ConfigSpec(TYPE_INT, str(DEFAULT_INTERVAL_MS), "Metrics push interval in milliseconds"),
    "match": ConfigSpec(TYPE_LIST, "", "Client match criteria"),
    "metrics": ConfigSpec(TYPE_LIST, "", "Telemetry metric name prefix list"),
}


class ClientMetricsConfigError(Exception):
    """A client-metrics change Kafka refuses: its error code and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value.strip() else []


def _java_split(text: str, sep: str) -> list[str]:
    """String.split(sep) of Java: trailing empty strings are dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_match(values: list[str]) -> dict[str, re.Pattern[str]]:
    """``selector=regex`` pairs -> compiled patterns; Kafka's error for a bad one."""
    out: dict[str, re.Pattern[str]] = {}
    for entry in values:
        parts = _java_split(entry, "=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {entry}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG,
                                           f"Illegal client matching pattern: {entry}") from None
    return out


def validate(name: str, configs: dict[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate over the whole new set of a subscription's configs."""
    if not name:
        raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CONFIGS:
            raise ClientMetricsConfigError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    interval = configs.get("interval.ms")
    if interval is not None:
        try:
            number = int(interval.strip())
            if not -(2**31) <= number < 2**31:
                raise ValueError
        except ValueError:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {interval} for configuration interval.ms: Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= number <= MAX_INTERVAL_MS:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, f"Invalid value {number} for interval.ms, interval must be between "
                                           f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    if "match" in configs:
        parse_match(_list(configs["match"]))


# ------------------------------------------------------------------------------------------------
# config resources: IncrementalAlterConfigs / AlterConfigs / DescribeConfigs of type 16
# ------------------------------------------------------------------------------------------------

def _store(broker: Any) -> Any:
    store = getattr(broker, "metadata_store", None)
    return store if store is not None and getattr(store, "log", None) is not None else None


def subscription_configs(broker: Any) -> dict[str, dict[str, str]]:
    """Every client-metrics resource with configs: name -> its configs (from the metadata image)."""
    store = getattr(broker, "metadata_store", None)
    configs = store.image.configs if store is not None else {}
    return {name: dict(values) for (rtype, name), values in configs.items() if rtype == CLIENT_METRICS}


def alter_client_metrics(broker: Any, resource: Any, validate_only: bool,
                         compute: Callable[[dict[str, str]], dict[str, str]]) -> tuple[ErrorCode, str | None]:
    """Apply an (incremental) alteration of one client-metrics resource: checked as Kafka's
    controller checks it, then written as ConfigRecords (one batch) unless `validate_only`."""
    from .kraft.records import new_record  # noqa: PLC0415 - metadata records only on a change

    name = resource.resource_name
    for change in resource.configs:
        op = getattr(change, "config_operation", OP_SET)
        if op in _OP_NAMES:  # Kafka finds no LIST type for client-metrics keys here
            return ErrorCode.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {change.name} because its type is not LIST."
    current = subscription_configs(broker).get(name, {})
    try:
        new = {k: v for k, v in compute(dict(current)).items() if v is not None}
    except ValueError as exc:  # an operation the config APIs do not know
        return ErrorCode.INVALID_REQUEST, str(exc)
    try:
        validate(name, new)
    except ClientMetricsConfigError as exc:
        return exc.code, exc.message
    if validate_only:
        return ErrorCode.NONE, None
    records = [("ConfigRecord", new_record("ConfigRecord", resource_type=CLIENT_METRICS, resource_name=name,
                                           name=key, value=new.get(key)))
               for key in sorted(set(current) | set(new)) if current.get(key) != new.get(key)]
    if records:
        store = _store(broker)
        if store is None:
            return ErrorCode.UNKNOWN_SERVER_ERROR, "no metadata log to store client-metrics configs in"
        store.append_records(records)
        manager = getattr(broker, "client_telemetry", None)
        if manager is not None:
            manager.subscriptions_changed()
        log.info("Client metrics subscription %s: %s", name, new or "removed")
    return ErrorCode.NONE, None


def describe_client_metrics(broker: Any, resource: Any, version: int, include_synonyms: bool,
                            include_docs: bool, result_cls: Any) -> Any:
    """The DescribeConfigsResult of one client-metrics resource (every config, with defaults)."""
    Entry = result_cls.DescribeConfigsResourceResult
    Synonym = result_cls.DescribeConfigsSynonym
    name = resource.resource_name
    if not name:
        return result_cls.DescribeConfigsResult(
            error_code=int(ErrorCode.INVALID_REQUEST), error_message="Client metrics subscription name must not be empty",
            resource_type=CLIENT_METRICS, resource_name=name, configs=[])
    values = subscription_configs(broker).get(name, {})
    wanted = set(resource.configuration_keys) if resource.configuration_keys else None
    entries = []
    for key, spec in CONFIGS.items():
        if wanted is not None and key not in wanted:
            continue
        dynamic = key in values
        value = values[key] if dynamic else spec.default
        source = SOURCE_CLIENT_METRICS_CONFIG if dynamic else SOURCE_DEFAULT
        entries.append(Entry(
            name=key, value=value, read_only=False, is_default=False, config_source=source, is_sensitive=False,
            synonyms=[Synonym(name=key, value=value, source=source)] if dynamic and include_synonyms else [],
            config_type=spec.config_type if version >= 3 else 0,
            documentation=spec.doc if include_docs and version >= 3 else None))
    return result_cls.DescribeConfigsResult(error_code=0, error_message="", resource_type=CLIENT_METRICS,
                                            resource_name=name, configs=entries)


def list_client_metrics(broker: Any) -> list[str]:
    """The client-metrics resources, in the order of Kafka's subscription map (a hash map)."""
    return hashmap_order(sorted(subscription_configs(broker)), string_hash)


# ------------------------------------------------------------------------------------------------
# subscriptions and client instances (Kafka's ClientMetricsManager)
# ------------------------------------------------------------------------------------------------

@dataclass
class Subscription:
    """One client-metrics resource as a subscription."""

    name: str
    metrics: list[str]
    interval_ms: int
    match: dict[str, re.Pattern[str]]

    def matches(self, attributes: dict[str, str]) -> bool:
        return all(p.fullmatch(attributes.get(k) or "") for k, p in self.match.items())


@dataclass
class ClientInstance:
    """A client instance (Kafka's ClientMetricsInstance) and the metrics it last pushed."""

    instance_id: Uuid
    attributes: dict[str, str]
    subscription_id: int
    subscription_version: int
    metrics: list[str]
    push_interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE
    #: (name, kind, labels) -> value, for the Prometheus endpoint
    samples: dict[tuple[str, str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    def maybe_get(self, now: int) -> bool:
        if now - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now
            return True
        return False

    def maybe_push(self, now: int) -> bool:
        # a push right after a GetTelemetrySubscriptions is accepted early: clients add jitter
        accept = self.last_get_ms > self.last_push_ms or now - self.last_push_ms >= self.push_interval_ms
        if accept:
            self.last_push_ms = now
        return accept


def _java_set_string(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def _uuid_hash(value: Uuid) -> int:
    raw = value.bytes
    most, least = int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True)
    h = (most ^ least) & 0xFFFFFFFFFFFFFFFF
    return ((h >> 32) ^ h) & 0xFFFFFFFF


def subscription_id(metrics: list[str], interval_ms: int, instance_id: Uuid) -> int:
    """Kafka's computeSubscriptionId: CRC32C of "<metric set>" + interval, xor the id's hashCode."""
    import crc32c  # noqa: PLC0415

    crc = crc32c.crc32c((_java_set_string(metrics) + str(interval_ms)).encode("utf-8"))
    value = (crc ^ _uuid_hash(instance_id)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class ClientMetricsManager:
    """The broker's client instances and their pushed metrics (created on first use)."""

    def __init__(self, broker: Any, now_ms: Callable[[], int] | None = None) -> None:
        self.broker = broker
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.max_bytes = int(broker.config.get("telemetry.max.bytes"))
        self.instances: dict[Uuid, ClientInstance] = {}
        self.version = 0
        self.lock = threading.Lock()  # the Prometheus endpoint reads from its own thread

    def subscriptions_changed(self) -> None:
        self.version += 1

    def subscriptions(self) -> list[Subscription]:
        out = []
        for name, configs in subscription_configs(self.broker).items():
            try:
                match = parse_match(_list(configs.get("match", "")))
                interval = int(configs.get("interval.ms", DEFAULT_INTERVAL_MS))
            except (ClientMetricsConfigError, ValueError):
                continue
            out.append(Subscription(name, _list(configs.get("metrics", "")), interval, match))
        return out

    def _new_instance(self, instance_id: Uuid, attributes: dict[str, str]) -> ClientInstance:
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        everything = False
        for sub in self.subscriptions():
            if sub.matches(attributes):
                everything = everything or ALL_METRICS in sub.metrics
                metrics.update(sub.metrics)
                interval = min(interval, sub.interval_ms)
        ordered = [ALL_METRICS] if everything else hashmap_order(sorted(metrics), string_hash)
        return ClientInstance(instance_id, attributes, subscription_id(ordered, interval, instance_id), self.version,
                              ordered, interval)

    def instance(self, instance_id: Uuid, attributes: dict[str, str]) -> ClientInstance:
        """The client instance, made (again) when it is new or the subscriptions changed since."""
        inst = self.instances.get(instance_id)
        if inst is None or inst.subscription_version < self.version:
            fresh = self._new_instance(instance_id, inst.attributes if inst is not None else attributes)
            if inst is not None:
                # Kafka makes a new instance (request times and state start afresh); the metrics
                # it pushed stay on the endpoint
                fresh.samples = inst.samples
            with self.lock:
                self.instances[instance_id] = fresh
            inst = fresh
        inst.last_seen_ms = self.now_ms()
        return inst

    def expire(self) -> None:
        """Forget the instances that have not been heard of for 3 push intervals (at least a minute)."""
        now = self.now_ms()
        with self.lock:
            for key in [k for k, i in self.instances.items()
                        if now - i.last_seen_ms > max(CACHE_EXPIRY_MS, 3 * i.push_interval_ms)]:
                del self.instances[key]

    def record(self, inst: ClientInstance, payload: bytes) -> None:
        """Keep the metrics of a decoded OTLP MetricsData payload for the Prometheus endpoint."""
        samples = decode_metrics(payload)
        with self.lock:
            for (name, kind, labels), value in samples.items():
                key = (name, kind, labels)
                if kind == "counter_delta":
                    inst.samples[key] = inst.samples.get(key, 0.0) + value
                else:
                    inst.samples[key] = value


def telemetry_manager(broker: Any) -> ClientMetricsManager:
    """The broker's ClientMetricsManager (created on first use)."""
    manager = getattr(broker, "client_telemetry", None)
    if manager is None:
        manager = broker.client_telemetry = ClientMetricsManager(broker)
        metrics = getattr(broker, "metrics", None)
        if metrics is not None:
            metrics.registry.register(TelemetryCollector(manager))
    return manager


# ------------------------------------------------------------------------------------------------
# OTLP payloads and the Prometheus endpoint
# ------------------------------------------------------------------------------------------------

_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_]")
_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(otlp_name: str) -> str:
    """An OTLP metric name as a Prometheus one: anything but [a-zA-Z0-9_] becomes ``_``."""
    name = _NAME_CHARS.sub("_", otlp_name)
    return "_" + name if name[:1].isdigit() else name


def _attribute_value(value: Any) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    got = getattr(value, kind)
    if kind == "bool_value":
        return "true" if got else "false"
    return str(got)


def _labels(attributes: Iterable[Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((_LABEL_CHARS.sub("_", a.key), _attribute_value(a.value)) for a in attributes))


def decode_metrics(payload: bytes) -> dict[tuple[str, str, tuple[tuple[str, str], ...]], float]:
    """(name, kind, labels) -> value for the number data points of an OTLP MetricsData message.

    Kinds: ``gauge``, ``counter`` (a cumulative monotonic sum), ``counter_delta`` (a delta sum,
    added up by the caller). Histograms and summaries are left out. Raises ValueError on a
    payload that is no MetricsData.
    """
    from google.protobuf.message import DecodeError  # noqa: PLC0415 - only brokers that get pushes
    from opentelemetry.proto.metrics.v1 import metrics_pb2  # noqa: PLC0415

    try:
        data = metrics_pb2.MetricsData.FromString(payload)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"not an OTLP MetricsData payload: {exc}") from None
    out: dict[tuple[str, str, tuple[tuple[str, str], ...]], float] = {}
    delta = metrics_pb2.AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                which = metric.WhichOneof("data")
                if which == "gauge":
                    points, kind = metric.gauge.data_points, "gauge"
                elif which == "sum":
                    points = metric.sum.data_points
                    if not metric.sum.is_monotonic:
                        kind = "gauge"
                    else:
                        kind = "counter_delta" if metric.sum.aggregation_temporality == delta else "counter"
                else:
                    continue
                name = prometheus_name(metric.name)
                for point in points:
                    value = point.as_double if point.WhichOneof("value") == "as_double" else float(point.as_int)
                    out[(name, kind, _labels(point.attributes))] = value
    return out


class TelemetryCollector:
    """Prometheus collector of the metrics client instances pushed (read at scrape time)."""

    def __init__(self, manager: ClientMetricsManager) -> None:
        self.manager = manager

    def describe(self) -> Iterable[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # noqa: PLC0415

        self.manager.expire()
        with self.manager.lock:
            rows = [(inst, key, value) for inst in self.manager.instances.values()
                    for key, value in inst.samples.items()]
        # one family per name and kind, its label names the union over its samples
        shapes: dict[tuple[str, bool], set[str]] = {}
        samples = []
        for inst, (name, kind, labels), value in rows:
            base = {"client_instance_id": inst.instance_id.to_base64(), "client_id": inst.attributes.get("client_id") or ""}
            label_map = {**{k: v for k, v in labels if k not in base}, **base}
            counter = kind != "gauge"
            shapes.setdefault((name, counter), set()).update(label_map)
            samples.append((name, counter, label_map, value))
        doc = "Client telemetry pushed by client instances (KIP-714)"
        families = {(name, counter): (CounterMetricFamily if counter else GaugeMetricFamily)(
            name, doc, labels=sorted(names)) for (name, counter), names in shapes.items()}
        for name, counter, label_map, value in samples:
            keys = sorted(shapes[(name, counter)])
            families[(name, counter)].add_metric([label_map.get(k, "") for k in keys], value)
        yield from families.values()
