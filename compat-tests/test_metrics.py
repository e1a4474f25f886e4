"""The Prometheus endpoint (odradek.metrics.port) scraped while clients produce and consume,
and the logging configs (odradek.log.levels / odradek.log.format).

Counters are checked against exactly what the test sent: record counts, batch bytes,
request counts; gauges against the log and the committed offsets.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request

from kafka import KafkaConsumer, KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from odradek.tools.client import KafkaClient
from odradek.tools.group_client import commit_offsets
from odradek.wire.records import SimpleRecord, build_batch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of one scrape."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_counters_match_what_was_produced_and_fetched(odradek_broker_factory) -> None:
    port = _free_port()
    broker = odradek_broker_factory(overrides={"odradek.metrics.port": port, "num.partitions": 1})
    before = scrape(port)
    assert value(before, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    batches = [
        build_batch([SimpleRecord(b"value-%d-%d" % (b, i), b"key-%d" % i, (), 1_700_000_000_000 + i) for i in range(4)])
        for b in range(3)
    ]
    with KafkaClient(broker.bootstrap) as client:
        topic = client.topic("metered", auto_create=True)
        for batch in batches:
            client.produce("metered", {0: batch}, leaders={0: topic.partitions[0].leader})
        positions = {0: 0}
        fetched = []
        while positions[0] < 12:
            fetched.extend(client.fetch(topic, positions))
        during = scrape(port)
        assert value(during, "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT") >= 1
        commit_offsets(client, "metered-group", {("metered", 0): 5})
    assert len(fetched) == 12
    sent = sum(len(b) for b in batches)
    after = scrape(port)
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic="metered") == 12
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic="metered") == sent
    # One fetch returned all three batches whole, so bytes out is exactly the bytes in.
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic="metered") == sent
    produce_requests = sum(
        v for (name, labels), v in after.items()
        if name == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in labels
    )
    assert produce_requests == 3
    assert value(after, "kafka_network_requestmetrics_totaltime_seconds_count", request="Produce") == 3
    assert value(after, "kafka_network_requestmetrics_totaltime_seconds_sum", request="Produce") > 0
    assert value(after, "kafka_log_log_size", topic="metered", partition="0") == sent
    assert value(after, "kafka_log_log_logendoffset", topic="metered", partition="0") == 12
    assert value(after, "kafka_consumergroup_lag", consumergroup="metered-group", topic="metered", partition="0") == 7
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1


def test_stock_client_traffic_is_counted(odradek_broker_factory) -> None:
    port = _free_port()
    broker = odradek_broker_factory(overrides={"odradek.metrics.port": port})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    for i in range(10):
        producer.send("stock", value=b"m%d" % i).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        "stock", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    received = [m.value for m in consumer]
    consumer.close()
    assert received == [b"m%d" % i for i in range(10)]
    samples = scrape(port)
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic="stock") == 10
    bytes_in = value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic="stock")
    assert bytes_in > 0
    assert value(samples, "kafka_log_log_size", topic="stock", partition="0") == bytes_in
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic="stock") >= bytes_in


def test_metrics_endpoint_is_off_by_default(odradek_broker_factory) -> None:
    broker = odradek_broker_factory()
    time.sleep(0.2)
    assert "Prometheus metrics on" not in broker.log_tail(200)


def test_json_logs_and_per_logger_levels(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides={
        "odradek.log.format": "json",
        # The server logs "Listening on ..." at INFO; WARN for its logger must drop that line
        # while other INFO lines (broker start) stay.
        "odradek.log.levels": "odradek.server=WARN",
    })
    with KafkaClient(broker.bootstrap) as client:
        client.metadata(None)
    lines = [ln for ln in broker.console_log.read_text().splitlines() if ln.startswith("{")]
    entries = [json.loads(ln) for ln in lines]
    assert entries and all({"ts", "level", "logger", "message"} <= e.keys() for e in entries)
    assert not [e for e in entries if e["logger"] == "odradek.server" and e["level"] == "INFO"]
    assert [e for e in entries if e["level"] == "INFO" and e["logger"] != "odradek.server"]
