"""Client telemetry (KIP-714, #23): client-metrics config resources through the config APIs, the
subscription a client gets, PushTelemetry's checks, OTLP payloads shown on the Prometheus endpoint."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client import CollectorRegistry, generate_latest

from odradek.client_telemetry import ClientMetricsManager, TelemetryCollector, subscription_id
from odradek.config import BrokerConfig
from odradek.handlers.registry import RequestContext, dispatch, load_handlers
from odradek.kraft.store import MetadataStore
from odradek.security import Session
from odradek.wire.compression import CompressionType, compress
from odradek.wire.errors import ErrorCode
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class

load_handlers()

DIR_ID = Uuid.from_base64("yYuMrFRVQVSX0VVQPcMSrA")
ZERO = Uuid(b"\0" * 16)
CM = 16


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def _broker(path: Path, clock: Clock) -> Any:
    store = MetadataStore(path, 1, {path: DIR_ID}, clock)
    store.listeners = [("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    store.start()
    broker = SimpleNamespace(config=BrokerConfig({}), metadata_store=store, forwarding=None, metrics=None, node_id=1)
    broker.client_telemetry = ClientMetricsManager(broker, clock)
    return broker


def call(broker: Any, api_key: int, version: int, client_id: str = "cm-test", session: Session | None = None,
         **fields: Any) -> Any:
    async def run() -> Any:
        body = request_class(api_key)(**fields)
        frame = join_pieces(encode_request(version, 7, body, client_id=client_id))[4:]
        nonlocal session
        session = session or Session("PLAINTEXT", "PLAINTEXT", peer="127.0.0.1:5555")
        ctx = RequestContext(broker=broker, peer="127.0.0.1:5555", listener_name="PLAINTEXT", session=session)
        pieces = await dispatch(ctx, memoryview(bytearray(frame)))
        return decode_response(join_pieces(pieces)[4:], api_key, version)[1]

    return trio.run(run)


def alter(broker: Any, name: str, *changes: tuple[str, int, str | None]) -> tuple[int, str | None]:
    cls = request_class(44)
    r = call(broker, 44, 1, resources=[cls.AlterConfigsResource(resource_type=CM, resource_name=name, configs=[
        cls.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in changes])], validate_only=False)
    return r.responses[0].error_code, r.responses[0].error_message


def describe(broker: Any, name: str) -> Any:
    cls = request_class(32)
    return call(broker, 32, 4, resources=[cls.DescribeConfigsResource(resource_type=CM, resource_name=name,
                                                                      configuration_keys=None)],
                include_synonyms=True, include_documentation=True).results[0]


def test_client_metrics_resources_like_kafka(tmp_path: Path) -> None:
    broker = _broker(tmp_path, Clock())
    assert alter(broker, "sub", ("metrics", 0, "org.apache.kafka.producer."), ("interval.ms", 0, "1000"),
                 ("match", 0, "client_id=cm-.*")) == (0, None)
    r = describe(broker, "sub")
    assert [(c.name, c.value, c.config_source, c.config_type, [s.source for s in c.synonyms]) for c in r.configs] == [
        ("interval.ms", "1000", 7, 3, [7]), ("match", "client_id=cm-.*", 7, 7, [7]),
        ("metrics", "org.apache.kafka.producer.", 7, 7, [7])]
    # a resource without configs describes Kafka's defaults
    assert [(c.name, c.value, c.config_source) for c in describe(broker, "other").configs] == [
        ("interval.ms", "300000", 5), ("match", "", 5), ("metrics", "", 5)]
    assert (describe(broker, "").error_code, describe(broker, "").error_message) == (
        42, "Client metrics subscription name must not be empty")
    # Kafka's refusals, checked over the whole new set of configs
    assert alter(broker, "sub", ("interval.ms", 0, "50")) == (
        42, "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)")
    assert alter(broker, "sub", ("interval.ms", 0, "soon")) == (
        40, "Invalid value soon for configuration interval.ms: Not a number of type INT")
    assert alter(broker, "sub", ("match", 0, "client_id=a=b")) == (40, "Illegal client matching pattern: client_id=a=b")
    assert alter(broker, "sub", ("colour", 0, "red")) == (42, "Unknown client metrics configuration: colour")
    assert alter(broker, "sub", ("metrics", 2, "x")) == (40, "Can't APPEND to key metrics because its type is not LIST.")
    assert alter(broker, "", ("interval.ms", 0, "1000")) == (42, "Subscription name can't be empty")
    listed = call(broker, 74, 1, resource_types=[CM])
    assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [("sub", CM)]
    # the ConfigRecords survive a restart
    broker.metadata_store.close()
    again = _broker(tmp_path, Clock())
    assert [c.value for c in describe(again, "sub").configs] == ["1000", "client_id=cm-.*", "org.apache.kafka.producer."]
    assert alter(again, "sub", ("metrics", 1, None), ("interval.ms", 1, None), ("match", 1, None)) == (0, None)
    assert call(again, 74, 1, resource_types=[CM]).config_resources == []
    again.metadata_store.close()


def _payload(value: float, delta: int) -> bytes:
    data = metrics_pb2.MetricsData(resource_metrics=[metrics_pb2.ResourceMetrics(scope_metrics=[
        metrics_pb2.ScopeMetrics(metrics=[
            metrics_pb2.Metric(name="org.apache.kafka.producer.record.queue.time.avg", gauge=metrics_pb2.Gauge(
                data_points=[metrics_pb2.NumberDataPoint(as_double=value, attributes=[
                    common_pb2.KeyValue(key="node.id", value=common_pb2.AnyValue(string_value="1"))])])),
            metrics_pb2.Metric(name="org.apache.kafka.producer.record.send.total", sum=metrics_pb2.Sum(
                is_monotonic=True, aggregation_temporality=metrics_pb2.AGGREGATION_TEMPORALITY_DELTA,
                data_points=[metrics_pb2.NumberDataPoint(as_int=delta)])),
            metrics_pb2.Metric(name="org.apache.kafka.other.not.asked", gauge=metrics_pb2.Gauge(
                data_points=[metrics_pb2.NumberDataPoint(as_double=1.0)]))])])])
    return data.SerializeToString()


def test_subscription_push_and_prometheus(tmp_path: Path) -> None:
    clock = Clock()
    broker = _broker(tmp_path, clock)
    # no subscription: nothing asked for, the default interval
    r = call(broker, 71, 0, client_instance_id=ZERO)
    assert (r.error_code, r.requested_metrics, r.push_interval_ms, r.accepted_compression_types, r.telemetry_max_bytes,
            r.delta_temporality) == (0, [], 300000, [4, 3, 1, 2], 1048576, True)
    assert alter(broker, "sub", ("metrics", 0, "org.apache.kafka.producer."), ("interval.ms", 0, "1000"),
                 ("match", 0, "client_id=cm-.*")) == (0, None)
    assert alter(broker, "other", ("metrics", 0, "org.apache.kafka.consumer."), ("interval.ms", 0, "500"),
                 ("match", 0, "client_id=nobody")) == (0, None)
    r = call(broker, 71, 0, client_instance_id=ZERO)
    instance = r.client_instance_id
    assert (r.requested_metrics, r.push_interval_ms) == (["org.apache.kafka.producer."], 1000)
    assert r.subscription_id == subscription_id(["org.apache.kafka.producer."], 1000, instance)
    # asking again within the interval is throttled
    assert call(broker, 71, 0, client_instance_id=instance).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    push = {"client_instance_id": instance, "subscription_id": r.subscription_id, "terminating": False}
    assert call(broker, 72, 0, compression_type=int(CompressionType.ZSTD),
                metrics=compress(CompressionType.ZSTD, _payload(2.5, 3)), **push).error_code == 0
    assert call(broker, 72, 0, compression_type=0, metrics=_payload(1, 1), **push).error_code == \
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.now += 1000
    assert call(broker, 72, 0, compression_type=7, metrics=b"", **push).error_code == \
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    clock.now += 1000
    assert call(broker, 72, 0, compression_type=0, metrics=b"\xff\xff", **push).error_code == ErrorCode.INVALID_RECORD
    clock.now += 1000
    assert call(broker, 72, 0, compression_type=int(CompressionType.LZ4),
                metrics=compress(CompressionType.LZ4, _payload(4.0, 2)), **push).error_code == 0
    bad = dict(push, subscription_id=push["subscription_id"] + 1)
    clock.now += 1000
    assert call(broker, 72, 0, compression_type=0, metrics=b"", **bad).error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert call(broker, 72, 0, compression_type=0, metrics=b"", client_instance_id=ZERO, subscription_id=0,
                terminating=False).error_code == ErrorCode.INVALID_REQUEST

    registry = CollectorRegistry()
    registry.register(TelemetryCollector(broker.client_telemetry))
    text = generate_latest(registry).decode()
    who = f'client_id="cm-test",client_instance_id="{instance.to_base64()}"'
    assert f'org_apache_kafka_producer_record_queue_time_avg{{{who},node_id="1"}} 4.0' in text
    # delta counters add up
    assert f"org_apache_kafka_producer_record_send_total{{{who}}} 5.0" in text
    # a terminating push is accepted at once; after it, nothing more is
    clock.now += 10
    assert call(broker, 72, 0, compression_type=0, metrics=b"", **dict(push, terminating=True)).error_code == 0
    assert call(broker, 72, 0, compression_type=0, metrics=b"", **push).error_code == ErrorCode.INVALID_REQUEST
    # forgotten after 3 push intervals (at least a minute)
    clock.now += 61000
    assert "org_apache_kafka_producer" not in generate_latest(registry).decode()
    broker.metadata_store.close()


def test_a_changed_subscription_is_a_new_one(tmp_path: Path) -> None:
    clock = Clock()
    broker = _broker(tmp_path, clock)
    assert alter(broker, "all", ("metrics", 0, "*"), ("interval.ms", 0, "1000")) == (0, None)
    r = call(broker, 71, 0, client_instance_id=ZERO)
    assert (r.requested_metrics, r.push_interval_ms) == (["*"], 1000)
    instance, first = r.client_instance_id, r.subscription_id
    assert alter(broker, "all", ("interval.ms", 0, "2000")) == (0, None)
    # the next push learns that its subscription is gone; asking again gives the new one
    clock.now += 10
    assert call(broker, 72, 0, client_instance_id=instance, subscription_id=first, terminating=False,
                compression_type=0, metrics=b"").error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    clock.now += 2000
    r = call(broker, 71, 0, client_instance_id=instance)
    assert (r.error_code, r.client_instance_id, r.push_interval_ms) == (0, instance, 2000)
    assert r.subscription_id == subscription_id(["*"], 2000, instance) != first
    broker.metadata_store.close()


def test_match_on_the_client_software_of_the_connection(tmp_path: Path) -> None:
    broker = _broker(tmp_path, Clock())
    broker.cluster_id = "c"
    assert alter(broker, "java", ("metrics", 0, "org.apache.kafka."), ("interval.ms", 0, "1000"),
                 ("match", 0, "client_software_name=apache-kafka-java,client_software_version=4\\..*")) == (0, None)
    java = Session("PLAINTEXT", "PLAINTEXT", peer="127.0.0.1:5555")
    assert call(broker, 18, 3, session=java, client_software_name="apache-kafka-java",
                client_software_version="4.4.0").error_code == 0
    assert call(broker, 71, 0, session=java, client_instance_id=ZERO).requested_metrics == ["org.apache.kafka."]
    other = Session("PLAINTEXT", "PLAINTEXT", peer="127.0.0.1:5556")
    assert call(broker, 18, 3, session=other, client_software_name="librdkafka",
                client_software_version="2.5.0").error_code == 0
    assert call(broker, 71, 0, session=other, client_instance_id=ZERO).requested_metrics == []
    broker.metadata_store.close()
