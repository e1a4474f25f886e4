"""The oracle harness works against the real Apache Kafka (and the Odradek wrapper's mechanics).

One Kafka broker is started for the whole module (module-scoped ``kafka_broker``); the tests
share it, each on its own topic, so the module costs one JVM start plus a few client JVMs.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import kafka_oracle
import pytest
from kafka_oracle import (
    CLUSTER_ID,
    KAFKA_VERSIONS,
    JavaClient,
    JavaClientError,
    KafkaBroker,
    metadata_broker_count,
    require_tool,
)
from odradek_broker import OdradekBroker

N_RECORDS = 100
JAVA_TOPIC = "java-driver-round-trip"


@pytest.fixture(scope="module")
def java_topic(kafka_broker: KafkaBroker, java_client) -> tuple[JavaClient, dict[str, object]]:
    """A 1-partition topic holding 100 records with keys and two headers, written by the Java client.

    Record i has timestamp ``ts_base + i``. ``ts_base`` is a minute ago: an old fixed timestamp
    would let time-based retention delete the segment under the tests' feet.
    """
    client: JavaClient = java_client(kafka_broker)
    created = client.create_topic(JAVA_TOPIC, partitions=1, config={"segment.bytes": 1 << 20})
    ts_base = (int(time.time()) - 60) * 1000
    summary = client.produce(JAVA_TOPIC, N_RECORDS, headers={"h1": "one-%d", "h2": "two"}, timestamp=ts_base)
    return client, {"created": created, "summary": summary, "ts_base": ts_base}


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
@pytest.mark.oracle
def test_java_driver_produce_consume(java_topic) -> None:
    client, info = java_topic
    assert info["created"]["partitions"] == 1 and len(str(info["created"]["topic_id"])) == 22
    summary = info["summary"]
    assert summary["produced"] == N_RECORDS
    assert [a["offset"] for a in summary["acks"]] == list(range(N_RECORDS))

    records = client.consume(JAVA_TOPIC, max_records=N_RECORDS)
    assert [r.offset for r in records] == list(range(N_RECORDS))
    assert [r.key for r in records] == [f"key-{i}".encode() for i in range(N_RECORDS)]
    assert [r.value for r in records] == [f"value-{i}".encode() for i in range(N_RECORDS)]
    assert [r.headers for r in records] == [
        [("h1", f"one-{i}".encode()), ("h2", b"two")] for i in range(N_RECORDS)
    ]
    ts_base = info["ts_base"]
    assert [r.timestamp for r in records] == [ts_base + i for i in range(N_RECORDS)]
    assert {r.timestamp_type for r in records} == {"CreateTime"}

    # Seeking by timestamp and from latest go through ListOffsets on the broker.
    tail = client.consume(JAVA_TOPIC, start=f"timestamp:{ts_base + 90}", idle_timeout_ms=1000)
    assert [r.offset for r in tail] == list(range(90, N_RECORDS))
    assert client.consume(JAVA_TOPIC, start="latest", idle_timeout_ms=500) == []


@pytest.mark.oracle
def test_java_driver_admin(java_topic) -> None:
    client, info = java_topic
    ts_base = info["ts_base"]
    assert JAVA_TOPIC in client.list_topics()
    desc = client.describe_topic(JAVA_TOPIC)
    assert desc["partitions"] == [{"partition": 0, "leader": 1, "replicas": [1], "isr": [1]}]
    configs = client.describe_configs(JAVA_TOPIC)
    assert configs["segment.bytes"]["value"] == str(1 << 20)
    assert configs["segment.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"] == {
        "value": "delete",
        "source": "DEFAULT_CONFIG",
        "default": True,
        "read_only": False,
        "sensitive": False,
    }
    assert client.list_offsets(JAVA_TOPIC, "earliest")[0]["offset"] == 0
    assert client.list_offsets(JAVA_TOPIC, "latest")[0]["offset"] == N_RECORDS
    max_ts = client.list_offsets(JAVA_TOPIC, "max-timestamp")[0]
    assert (max_ts["offset"], max_ts["timestamp"]) == (N_RECORDS - 1, ts_base + N_RECORDS - 1)
    assert client.list_offsets(JAVA_TOPIC, f"timestamp:{ts_base + 42}")[0]["offset"] == 42

    client.create_topic("to-delete")
    client.delete_topic("to-delete")
    assert "to-delete" not in client.list_topics()

    # A failing command reports the Java exception and leaves the driver JVM usable.
    with pytest.raises(JavaClientError) as err:
        client.describe_topic("no-such-topic")
    assert err.value.result is not None
    assert err.value.result["error"] == "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
    assert JAVA_TOPIC in client.list_topics()
    # One JVM per call works too (what a test needing a fresh client process would use).
    with JavaClient(client.bootstrap, persistent=False) as one_shot:
        assert JAVA_TOPIC in one_shot.list_topics()


@pytest.mark.oracle
@pytest.mark.parametrize("version", KAFKA_VERSIONS)
def test_dump_log_segments(
    java_topic, kafka_broker: KafkaBroker, dump_log_segments_tool, version: str
) -> None:
    """DumpLogSegments (4.1.1 and 3.9.1 alike) reads the segment the broker wrote."""
    segment = kafka_broker.log_dir / f"{JAVA_TOPIC}-0" / "00000000000000000000.log"
    out, err, rc = dump_log_segments_tool(segment, "--deep-iteration", "--print-data-log", version=version)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert lines[1] == "Log starting offset: 0"
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert batches, out
    counts = [int(re.search(r" count: (\d+)", b).group(1)) for b in batches]  # type: ignore[union-attr]
    assert sum(counts) == N_RECORDS
    assert all("producerId: " in b and "isvalid: true" in b for b in batches)
    records = [line for line in lines if line.startswith("| offset:")]
    assert len(records) == N_RECORDS
    assert records[7].startswith(f"| offset: 7 CreateTime: {java_topic[1]['ts_base'] + 7} ")
    assert records[7].endswith("headerKeys: [h1,h2] key: key-7 payload: value-7")


@pytest.mark.oracle
def test_kcat_lists_metadata(kafka_broker: KafkaBroker, java_topic, kcat: str) -> None:
    proc = subprocess.run(
        [kcat, "-b", kafka_broker.bootstrap, "-L", "-J", "-m", "20"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    meta = json.loads(proc.stdout)
    assert [b["id"] for b in meta["brokers"]] == [1]
    assert JAVA_TOPIC in [t["topic"] for t in meta["topics"]]


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
@pytest.mark.parametrize("version", KAFKA_VERSIONS)
def test_kafka_clean_stop_and_restart(kafka_broker_factory, version: str) -> None:
    broker: KafkaBroker = kafka_broker_factory(version=version)
    assert broker.last_format_seconds is not None
    first_start = broker.last_start_seconds
    rc = broker.stop()
    assert rc in (0, 143), broker.log_tail()  # 143: the JVM's exit code after SIGTERM
    assert (broker.log_dir / ".kafka_cleanshutdown").is_file()
    if version != KAFKA_VERSIONS[0]:
        return  # restart/crash mechanics are version-independent; test them once
    broker.start()  # same ports, same (already formatted) log dir: no second format
    assert metadata_broker_count(broker.host, broker.port) == 1
    # The marker is consumed at start-up; a crash leaves none behind.
    assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
    broker.kill()
    assert not broker.running
    assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
    print(f"kafka {version}: start {first_start:.1f}s, restart {broker.last_start_seconds:.1f}s")


def test_same_scenario_on_both_brokers(any_broker, java_client) -> None:
    """``any_broker`` runs this once on Kafka, once on Odradek: the Java client sees the same thing."""
    client: JavaClient = java_client(any_broker)
    topic = "both-brokers"
    client.create_topic(topic, partitions=2)
    summary = client.produce(topic, 10, partition=1, headers={"n": "%d"})
    assert [a["offset"] for a in summary["acks"]] == list(range(10))
    records = client.consume(topic, partitions=[1], max_records=10)
    assert [(r.offset, r.key, r.headers) for r in records] == [
        (i, f"key-{i}".encode(), [("n", str(i).encode())]) for i in range(10)
    ]
    assert client.list_offsets(topic, "latest") == {
        0: {"offset": 0, "timestamp": -1, "leader_epoch": 0},
        1: {"offset": 10, "timestamp": -1, "leader_epoch": 0},
    }


def test_require_tool_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A missing oracle tool skips a test on a laptop but fails it under CI=true."""
    monkeypatch.setattr(kafka_oracle, "CACHE_DIR", tmp_path)  # an empty cache: no classpath files
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="ORACLE TOOL MISSING: kafka-9.9.9"):
        require_tool("kafka-9.9.9")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="ORACLE TOOL MISSING: kafka-9.9.9"):
        require_tool("kafka-9.9.9")


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


def test_first_start_retries_when_port_was_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """free_port() can race; a first start that hits "Address already in use" moves to new ports."""
    # Bound but not listening: the broker's bind fails, yet nothing answers a readiness probe.
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    taken = blocker.getsockname()[1]
    real_free_port = kafka_oracle.free_port
    picks = iter([taken])
    monkeypatch.setattr(
        kafka_oracle, "free_port", lambda host="127.0.0.1": next(picks, None) or real_free_port(host)
    )
    broker = OdradekBroker(tmp_path / "b", command=_fake_server_command(tmp_path))
    try:
        assert broker.port == taken
        broker.start(timeout=20)
        assert broker.port != taken and broker.running
        assert "Address already in use" in broker.console_log.read_text()
    finally:
        broker.kill()
        blocker.close()
