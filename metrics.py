"""Prometheus metrics named after Kafka's JMX MBeans, served over HTTP when configured.

Enable with ``odradek.metrics.port`` (off by default; ``0`` picks a free port, see
``BrokerMetrics.port``) and optionally ``odradek.metrics.host`` (default ``127.0.0.1``; use
``0.0.0.0`` in a container). The endpoint is ``http://host:port/metrics``.

Names follow the usual JMX-exporter spelling of Kafka's MBeans, lower-cased with the type in
the middle, so dashboards built for Kafka find the same series:

* ``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T`` ->
  ``kafka_server_brokertopicmetrics_bytesin_total{topic="T"}`` (also ``bytesout``, ``messagesin``);
* ``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=R`` ->
  ``kafka_network_requestmetrics_requests_total{request="R",version="V"}``; ``TotalTimeMs`` ->
  the histogram ``kafka_network_requestmetrics_totaltime_seconds{request="R"}``;
* ``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions`` (always 0: one replica),
  ``PartitionCount``, ``LeaderCount``;
* ``kafka.log:type=Log,name=Size|LogStartOffset|LogEndOffset|NumLogSegments,topic,partition``;
* ``kafka.server:type=socket-server-metrics,name=connection-count,listener=L``;
* ``kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups`` and ``NumGroups<State>``
  as one gauge with a ``state`` label; the consumer lag per group and partition as
  ``kafka_consumergroup_lag`` (the name kafka-exporter uses; Kafka itself has no broker MBean).

Counters are updated by hooks in the server (connections), the request dispatch (requests,
latency) and the Produce/Fetch handlers (bytes and messages); gauges are computed when scraped.
Each broker has its own registry, so several in-process brokers (tests) do not mix counts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .config import BROKER_CONFIGS, ConfigKey
from .wire.protocol import API_NAMES

if TYPE_CHECKING:
    from prometheus_client.core import GaugeMetricFamily

    from .broker import Broker

log = logging.getLogger(__name__)

#: Config keys of the metrics endpoint (registered with the broker's known configs below).
METRICS_CONFIGS = {
    "odradek.metrics.port": ConfigKey(
        "odradek.metrics.port",
        lambda v: int(v.strip()),
        None,
        "Port of the Prometheus /metrics HTTP endpoint; unset = no endpoint, 0 = any free port.",
        "INT",
    ),
    "odradek.metrics.host": ConfigKey(
        "odradek.metrics.host",
        lambda v: v.strip(),
        "127.0.0.1",
        "Address the /metrics endpoint binds to (0.0.0.0 to expose it outside a container).",
        "STRING",
    ),
}
# The config module owns the key table; optional subsystems add their own keys to it so that
# server.properties files and --override accept them like any other Kafka key.
for _key, _spec in METRICS_CONFIGS.items():
    BROKER_CONFIGS.setdefault(_key, _spec)

# Request latencies from 0.1 ms to 10 s (long-polling fetches wait up to max.wait.ms).
_LATENCY_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class BrokerMetrics:
    """One broker's metrics: counters fed by hooks, gauges read from the broker at scrape time."""

    def __init__(self, broker: Broker) -> None:
        # Imported here: the server imports this module for the config keys, and brokers
        # without metrics should not pay for prometheus_client at start-up.
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.broker = broker
        self.registry = CollectorRegistry(auto_describe=True)
        self.port: int | None = None
        self._server: Any = None
        r = self.registry
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Record bytes produced (Kafka BytesInPerSec).",
            ["topic"], registry=r,
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Record bytes fetched (Kafka BytesOutPerSec).",
            ["topic"], registry=r,
        )
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin", "Records produced (Kafka MessagesInPerSec).",
            ["topic"], registry=r,
        )
        self.requests = Counter(
            "kafka_network_requestmetrics_requests", "Requests handled (Kafka RequestsPerSec).",
            ["request", "version"], registry=r,
        )
        self.request_time = Histogram(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from request decode to encoded response (Kafka TotalTimeMs, in seconds).",
            ["request"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.connections = Gauge(
            "kafka_server_socketservermetrics_connection_count",
            "Open client connections (Kafka socket-server-metrics connection-count).",
            ["listener"], registry=r,
        )
        r.register(_StateCollector(broker))

    # ------------------------------------------------------------------ hooks

    def request_done(self, api_key: int, version: int, seconds: float) -> None:
        name = API_NAMES.get(api_key, str(api_key))
        self.requests.labels(name, str(version)).inc()
        self.request_time.labels(name).observe(seconds)

    def produced(self, topic: str, records: int, size: int) -> None:
        self.messages_in.labels(topic).inc(records)
        self.bytes_in.labels(topic).inc(size)

    def fetched(self, sizes: dict[Any, int], by_id: bool) -> None:
        """Bytes sent per topic (keys are names, or topic ids for Fetch v13+)."""
        meta = self.broker.metadata
        for ref, size in sizes.items():
            if not size:
                continue
            topic = meta.by_id(ref) if by_id and meta is not None else None
            self.bytes_out.labels(topic.name if topic is not None else str(ref)).inc(size)

    def fetched_reads(self, reads: Iterable[Any], by_id: bool) -> None:
        """Fetch handler hook: `reads` have `.key` = (topic name or id, partition) and `.size`."""
        sizes: dict[Any, int] = {}
        for r in reads:
            if r.size:
                sizes[r.key[0]] = sizes.get(r.key[0], 0) + r.size
        self.fetched(sizes, by_id)

    def connection_opened(self, listener: str) -> None:
        self.connections.labels(listener).inc()

    def connection_closed(self, listener: str) -> None:
        self.connections.labels(listener).dec()

    # ------------------------------------------------------------------ endpoint

    def start_endpoint(self, host: str, port: int) -> int:
        """Serve /metrics on host:port in a daemon thread; returns the bound port."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        self.port = server.server_address[1]
        log.info("Prometheus metrics on http://%s:%s/metrics", host, self.port)
        return self.port

    def stop_endpoint(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def start_metrics(broker: Broker) -> BrokerMetrics | None:
    """Create the broker's metrics and start the endpoint when odradek.metrics.port is set."""
    port = broker.config.get("odradek.metrics.port")
    if port is None:
        return None
    metrics = BrokerMetrics(broker)
    metrics.start_endpoint(broker.config.get("odradek.metrics.host"), int(port))
    return metrics


def _group_state(group: Any) -> str:
    state = getattr(group, "state", None)
    if hasattr(state, "value"):
        return str(state.value)  # classic groups: GroupState enum
    state_name = getattr(group, "state_name", None)
    return str(state_name()) if callable(state_name) else str(state)


class _StateCollector:
    """Gauges read from the broker's state on each scrape (no bookkeeping on the hot path)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def describe(self) -> Iterable[Any]:
        return []  # computed per scrape; nothing to describe up front

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from prometheus_client.core import GaugeMetricFamily

        logs = list(self.broker.log_manager.all_logs()) if self.broker.log_manager is not None else []
        manager = getattr(self.broker, "replica_manager", None)
        if manager is None:
            yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                         "Partitions led here with fewer in-sync replicas than replicas.", 0)
            yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions on this broker.", len(logs))
            yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", len(logs))
        else:
            yield from _replication(manager)
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log segments (Kafka Log Size).",
                                 labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.", labels=["topic", "partition"])
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=["topic", "partition"])
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the log.", labels=["topic", "partition"])
        ends: dict[tuple[str, int], int] = {}
        for plog in logs:
            labels = [str(plog.topic), str(plog.partition)]
            size.add_metric(labels, plog.size_in_bytes())
            start.add_metric(labels, plog.log_start_offset)
            end.add_metric(labels, plog.log_end_offset)
            segments.add_metric(labels, len(plog.segments))
            ends[(plog.topic, plog.partition)] = plog.high_watermark
        yield from (size, start, end, segments)
        yield from self._groups(ends)
        yield from _share_groups(self.broker)

    def _groups(self, ends: dict[tuple[str, int], int]) -> Iterator[GaugeMetricFamily]:
        from prometheus_client.core import GaugeMetricFamily

        coordinator = self.broker.coordinators.get("groups")
        groups = dict(getattr(coordinator, "groups", {}) or {})
        by_state: dict[str, int] = {}
        for group in groups.values():
            state = _group_state(group)
            by_state[state] = by_state.get(state, 0) + 1
        yield _gauge("kafka_coordinator_group_groupmetadatamanager_numgroups", "Groups on this coordinator.",
                     len(groups))
        per_state = GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups_by_state",
                                      "Groups per state (Kafka NumGroupsStable, NumGroupsEmpty, ...).",
                                      labels=["state"])
        for state, count in sorted(by_state.items()):
            per_state.add_metric([state], count)
        yield per_state
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the group's committed offset.",
                                labels=["consumergroup", "topic", "partition"])
        for group_id, offsets in dict(getattr(coordinator, "offsets", {}) or {}).items():
            for (topic, partition), committed in dict(offsets).items():
                end = ends.get((topic, partition))
                if end is not None:
                    lag.add_metric([group_id, topic, str(partition)], max(0, end - committed.offset))
        yield lag


def _share_groups(broker: Broker) -> Iterator[Any]:
    """Share groups' metrics under Kafka 4.4's names: group-coordinator-metrics share-group-count
    (per state), ShareGroupMetrics RecordAcknowledgementsPerSec (per group and ackType),
    SharePartitionMetrics InFlightMessageCount and AcquisitionLockTimeoutPerSec (per
    share-partition), share-coordinator-metrics write-total."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from .group_coordinator.share import ShareGroup

    coordinator = broker.coordinators.get("groups")
    groups = [g for g in dict(getattr(coordinator, "groups", {}) or {}).values() if isinstance(g, ShareGroup)]
    total = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                              "Groups by protocol (Kafka group-count); here the share groups.", labels=["protocol"])
    total.add_metric(["share"], len(groups))
    yield total
    by_state = GaugeMetricFamily("kafka_server_group_coordinator_metrics_share_group_count",
                                 "Share groups per state (Kafka share-group-count).", labels=["state"])
    counts: dict[str, int] = {}
    for group in groups:
        state = group.state_name().lower()
        counts[state] = counts.get(state, 0) + 1
    for state in ("empty", "stable", "dead"):
        by_state.add_metric([state], counts.get(state, 0))
    yield by_state
    manager = broker.coordinators.get("share_partitions")
    acks = CounterMetricFamily("kafka_server_sharegroupmetrics_recordacknowledgements",
                               "Records acknowledged (Kafka ShareGroupMetrics RecordAcknowledgementsPerSec).",
                               labels=["group", "ackType"])
    in_flight = GaugeMetricFamily("kafka_server_sharepartitionmetrics_inflightmessagecount",
                                  "Records between a share-partition's start and end offsets "
                                  "(Kafka SharePartitionMetrics InFlightMessageCount).",
                                  labels=["group", "topic", "partition"])
    timeouts = CounterMetricFamily("kafka_server_sharepartitionmetrics_acquisitionlocktimeout",
                                   "Acquisitions whose locks ran out (Kafka AcquisitionLockTimeoutPerSec).",
                                   labels=["group", "topic", "partition"])
    if manager is not None:
        for (group_id, ack_type), count in sorted(dict(manager.acknowledged).items()):
            acks.add_metric([group_id, ack_type], count)
        for (group_id, _tid, index), sp in list(manager.partitions.items()):
            in_flight.add_metric([group_id, sp.topic, str(index)], sp.in_flight())
        for (group_id, topic, index), count in sorted(dict(manager.lock_timeouts).items()):
            timeouts.add_metric([group_id, topic, str(index)], count)
    yield from (acks, in_flight, timeouts)
    state = broker.coordinators.get("share")
    writes = CounterMetricFamily("kafka_server_share_coordinator_metrics_write",
                                 "Share coordinator writes (Kafka share-coordinator-metrics write-total).")
    writes.add_metric([], getattr(state, "writes", 0))
    yield writes


def _replication(manager: Any) -> Iterator[GaugeMetricFamily]:
    """A cluster broker's ReplicaManager gauges and its replication throttles (Kafka's
    LeaderReplication / FollowerReplication byte-rate)."""
    from prometheus_client.core import CounterMetricFamily

    led = [p for p in manager.partitions.values() if p.leader == manager.node_id]
    yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                 "Partitions led here with fewer in-sync replicas than replicas.",
                 sum(1 for p in led if len(p.isr) < len(p.replicas)))
    yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions on this broker.",
                 sum(1 for p in manager.partitions.values() if manager.node_id in p.replicas))
    yield _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", len(led))
    held = CounterMetricFamily("odradek_replication_throttled_fetches",
                               "Times a replication throttle held back a partition's replica fetch.", labels=["side"])
    for name, quota in (("leader", manager.leader_quota), ("follower", manager.follower_quota)):
        yield _gauge(f"kafka_server_{name}replication_byte_rate",
                     f"Bytes/s of throttled {name}-side replication (Kafka's {name.title()}Replication byte-rate).",
                     quota.rate.measure(int(time.monotonic() * 1000)))
        held.add_metric([name], quota.held_back)
    yield held


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(name, doc, value=value)
