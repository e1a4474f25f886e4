"""The embedding API (``odradek.testing``) as a user's test suite would use it.

The fixtures come from the ``pytest11`` entry point, not from this folder's conftest, so these
tests also prove the plugin is registered by the package's metadata.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

from odradek.testing import RunningBroker, running_broker
from odradek.tools.client import KafkaClient


def test_plugin_fixture_serves_kafka_python(odradek_bootstrap: str) -> None:
    topic = f"fixture-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=odradek_bootstrap)
    for i in range(5):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=odradek_bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    got = [(m.key, m.value) for m in consumer]
    consumer.close()
    assert got == [(b"k%d" % i, b"v%d" % i) for i in range(5)]


def test_fresh_broker_is_empty_and_serves_confluent_kafka(odradek_fresh_broker: RunningBroker) -> None:
    bootstrap = odradek_fresh_broker.bootstrap_servers
    with KafkaClient(bootstrap) as client:
        assert [n for n in client.metadata(None) if not n.startswith("__")] == []
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("fresh", key=b"a", value=b"1")
    assert producer.flush(10) == 0
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "fresh-group", "auto.offset.reset": "earliest",
    })
    consumer.subscribe(["fresh"])
    message = None
    deadline = time.monotonic() + 20
    while message is None and time.monotonic() < deadline:
        candidate = consumer.poll(0.5)
        if candidate is not None and candidate.error() is None:
            message = candidate
    consumer.close()
    assert message is not None and (message.key(), message.value()) == (b"a", b"1")


def test_fixture_names_do_not_clash_with_the_compat_subprocess_fixture(request: pytest.FixtureRequest) -> None:
    # compat-tests' conftest defines odradek_broker (a subprocess); the plugin must not shadow it.
    defs = request._fixturemanager.getfixturedefs("odradek_broker", request.node)
    assert defs and all(d.func.__module__ != "odradek.testing" for d in defs)


@pytest.mark.parametrize("in_process", [True, False], ids=["thread", "subprocess"])
def test_running_broker_both_modes_keep_data_in_their_log_dir(tmp_path, in_process: bool) -> None:
    with running_broker(in_process=in_process, log_dir=tmp_path / "data", num_partitions=2) as broker:
        assert broker.in_process is in_process
        with KafkaClient(broker.bootstrap_servers) as client:
            assert len(client.topic("two", auto_create=True).partitions) == 2
    # The broker is gone (port closed) and its data stays where we asked.
    assert (tmp_path / "data" / "two-0").is_dir() and (tmp_path / "data" / "two-1").is_dir()
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


def test_in_process_broker_exposes_its_metrics_url() -> None:
    import urllib.request

    with running_broker(odradek_metrics_port=0) as broker:
        assert broker.metrics_url is not None
        with KafkaClient(broker.bootstrap_servers) as client:
            client.metadata(None)
        text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
        assert 'kafka_network_requestmetrics_requests_total{request="Metadata"' in text
    with running_broker() as broker:
        assert broker.metrics_url is None
