"""The oracle harness works against the real Apache Kafka (and the Odradek wrapper's mechanics).

One Kafka broker is started for the whole module (module-scoped ``kafka_broker``); the tests
share it, each on its own topic, so the module costs one JVM start plus a few client JVMs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kafka_oracle import CLUSTER_ID, KafkaBroker, metadata_broker_count
from odradek_broker import OdradekBroker


@pytest.mark.oracle
def test_kafka_starts_and_answers_metadata(kafka_broker: KafkaBroker) -> None:
    assert kafka_broker.running
    assert metadata_broker_count(kafka_broker.host, kafka_broker.port) == 1
    meta = (kafka_broker.log_dir / "meta.properties").read_text()
    assert f"cluster.id={CLUSTER_ID}" in meta
    assert "node.id=1" in meta
    # Measured start time is part of the report: show it with `pytest -rP` / in failures.
    print(
        f"kafka {kafka_broker.version} started in {kafka_broker.last_start_seconds:.1f}s "
        f"(storage format {kafka_broker.last_format_seconds or 0:.1f}s)"
    )


@pytest.mark.oracle
def test_kafka_python_round_trip(kafka_broker: KafkaBroker) -> None:
    kafka = pytest.importorskip("kafka")
    topic = "kafka-python-round-trip"
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    try:
        for i in range(20):
            producer.send(
                topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", str(i).encode())]
            )
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=kafka_broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        got = []
        for msg in consumer:
            got.append(msg)
            if len(got) == 20:
                break
    finally:
        consumer.close()
    assert [m.offset for m in got] == list(range(20))
    assert [(m.key, m.value) for m in got] == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    assert [m.headers for m in got] == [[("h", str(i).encode())] for i in range(20)]


@pytest.mark.oracle
def test_kafka_clean_stop_and_restart(kafka_broker_factory) -> None:
    broker: KafkaBroker = kafka_broker_factory()
    rc = broker.stop()
    assert rc in (0, 143), broker.log_tail()  # 143: the JVM's exit code after SIGTERM
    assert (broker.log_dir / ".kafka_cleanshutdown").is_file()
    broker.start()  # same ports, same (already formatted) log dir
    assert broker.last_format_seconds is not None  # formatted once, at the first start
    assert metadata_broker_count(broker.host, broker.port) == 1
    broker.kill()
    assert not broker.running


def _fake_server_command(tmp_path: Path) -> list[str]:
    """A stand-in for `odradek serve`: parses the --override listeners=... the wrapper passes."""
    script = tmp_path / "fake_serve.py"
    script.write_text(
        "import signal, socket, sys\n"
        "opts = dict(a.split('=', 1) for a in sys.argv[1:] if '=' in a)\n"
        "host, port = opts['listeners'].rsplit('//', 1)[1].rsplit(':', 1)\n"
        "open(opts['log.dirs'] + '/started', 'a').write('x')\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "s = socket.create_server((host, int(port)))\n"
        "while True:\n"
        "    s.accept()[0].close()\n"
    )
    return [sys.executable, str(script)]


def test_odradek_wrapper_lifecycle(tmp_path: Path) -> None:
    """Start/stop/kill/restart mechanics of OdradekBroker, with a fake server in place of Odradek."""
    broker = OdradekBroker(tmp_path / "b", command=_fake_server_command(tmp_path), overrides={"x.y": 1})
    try:
        broker.start(timeout=20)
        assert "--override" in broker._command() and "x.y=1" in broker._command()
        assert broker.stop() == 0
        broker.start(timeout=20)
        broker.kill()
        assert not broker.running
        broker.restart(timeout=20)
        assert (broker.log_dir / "started").read_text() == "xxx"
    finally:
        broker.kill()
