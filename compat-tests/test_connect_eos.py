"""Issue #27, must show 4: Kafka Connect 4.4 in distributed mode with
``exactly.once.source.support=enabled`` (KIP-618) on Odradek.

A worker (``org.apache.kafka.connect.cli.ConnectDistributed`` from the 4.4.0 jars) runs
``SequenceSourceConnector`` (``compat-tests/java-connect/``: one task writing ``s-0, s-1, ...``,
each record's source offset its sequence number). With exactly-once support the task's
records and its offsets go into one transaction per boundary (here every two seconds, so a
transaction is nearly always open). The worker is killed with SIGKILL while the task writes;
a new worker (same REST address, so the same worker id) takes the task back: fences the
zombie's transactional producer (InitProducerId for ``<group>-<connector>-<task>``, Admin's
fenceProducers), reads the committed offsets (read_committed) and goes on. Then the output
read with read_committed is exactly ``s-0 .. s-N`` once each, while read_uncommitted also shows
the aborted records of the killed transaction.
"""

from __future__ import annotations

import json
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from kafka_oracle import (
    FAST_JVM_OPTS,
    KAFKA_4_4,
    _log_config_args,
    free_port,
    java_bin,
    kafka_classpath,
    require_tool,
)

SOURCE = Path(__file__).resolve().parent / "java-connect" / "SequenceSourceConnector.java"
OUT_TOPIC = "sequence"
CONNECTOR = "sequence-source"
GROUP = "connect-eos"


@pytest.fixture(scope="module")
def connector_classes() -> Path:
    """SequenceSourceConnector compiled against the 4.4.0 Connect API, registered for the
    worker's service-loader plugin discovery."""
    require_tool(f"kafka-{KAFKA_4_4}")
    out = Path(tempfile.mkdtemp(prefix="connect-java-"))
    proc = subprocess.run([java_bin("javac"), "-nowarn", "--release", "17", "-cp", kafka_classpath(KAFKA_4_4),
                           "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    services = out / "META-INF" / "services"
    services.mkdir(parents=True)
    (services / "org.apache.kafka.connect.source.SourceConnector").write_text("SequenceSourceConnector\n")
    return out


class Worker:
    """One Connect distributed worker process."""

    def __init__(self, classes: Path, bootstrap: str, workdir: Path, rest_port: int, name: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.url = f"http://127.0.0.1:{rest_port}"
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "config.storage.topic": "connect-eos-configs",
            "offset.storage.topic": "connect-eos-offsets",
            "status.storage.topic": "connect-eos-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "exactly.once.source.support": "enabled",
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(rest_port),
            "plugin.discovery": "hybrid_warn",
            "scheduled.rebalance.max.delay.ms": "5000",
            "offset.flush.interval.ms": "1000",
        }
        config = workdir / f"{name}.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log = workdir / f"{name}.log"
        cmd = [java_bin("java"), *FAST_JVM_OPTS, "-Xmx512m", *_log_config_args(KAFKA_4_4, self.log),
               "-cp", f"{classes}:{kafka_classpath(KAFKA_4_4)}", "org.apache.kafka.connect.cli.ConnectDistributed",
               str(config)]
        self._out = open(workdir / f"{name}.out", "w")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                text = resp.read().decode()
                return resp.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, self.log.read_text()[-5000:] if self.log.exists() else "worker died"
            try:
                if self.request("GET", "/connectors")[0] == 200:
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, "the Connect worker never answered"
            time.sleep(0.5)

    def task_state(self) -> str | None:
        try:
            code, body = self.request("GET", f"/connectors/{CONNECTOR}/status")
        except OSError:
            return None
        if code != 200 or not isinstance(body, dict) or not body.get("tasks"):
            return None
        return body["tasks"][0]["state"]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._out.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._out.close()


def _read_all(bootstrap: str, isolation: str) -> list[str]:
    """Every value of the output topic, read with the given isolation level."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{isolation}-{time.monotonic_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(OUT_TOPIC, 0), timeout=30)
        consumer.assign([TopicPartition(OUT_TOPIC, 0, low)])
        values: list[str] = []
        idle = time.monotonic()
        while time.monotonic() - idle < 5:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                continue
            values.append(msg.value().decode())
            idle = time.monotonic()
            if msg.offset() >= high - 1 and isolation == "read_uncommitted":
                break
        return values
    finally:
        consumer.close()


def _wait_for_records(bootstrap: str, at_least: int, timeout: float = 120.0) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                high = consumer.get_watermark_offsets(TopicPartition(OUT_TOPIC, 0), timeout=10)[1]
            except Exception:
                high = 0
            if high >= at_least:
                return high
            assert time.monotonic() < deadline, f"only {high} records were written"
            time.sleep(0.5)
    finally:
        consumer.close()


def test_a_worker_killed_mid_transaction_leaves_no_duplicate_in_read_committed_output(
        connector_classes, odradek_broker_factory, tmp_path):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = odradek_broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(OUT_TOPIC, 1, 1)]).values():
        f.result(30)
    port = free_port()
    worker = Worker(connector_classes, broker.bootstrap, tmp_path, port, "worker-1")
    second = None
    try:
        worker.wait_ready()
        code, body = worker.request("PUT", f"/connectors/{CONNECTOR}/config", {
            "connector.class": "SequenceSourceConnector", "tasks.max": "1", "topic": OUT_TOPIC,
            "exactly.once.support": "required", "transaction.boundary": "interval",
            "transaction.boundary.interval.ms": "2000", "batch.size": "20", "poll.interval.ms": "20",
        })
        assert code in (200, 201), body
        _wait_for_records(broker.bootstrap, 3000)
        worker.kill()
        second = Worker(connector_classes, broker.bootstrap, tmp_path, port, "worker-2")
        second.wait_ready()
        before = _wait_for_records(broker.bootstrap, 0)
        _wait_for_records(broker.bootstrap, before + 3000, timeout=180)
        assert second.task_state() == "RUNNING"
        second.stop()
    finally:
        for w in (worker, second):
            if w is not None and w.proc.poll() is None:
                w.stop()
    committed = _read_all(broker.bootstrap, "read_committed")
    uncommitted = _read_all(broker.bootstrap, "read_uncommitted")
    numbers = [int(v.split("-")[1]) for v in committed]
    assert len(numbers) > 3000
    assert numbers == list(range(len(numbers))), "read_committed output has a gap or a duplicate"
    # the killed worker's open transaction was aborted: its records are in the log, not in the output
    assert len(uncommitted) > len(committed)
    assert len(set(uncommitted)) < len(uncommitted), "the kill did not land in a transaction"
    print(f"read_committed: {len(committed)} records s-0..s-{len(committed) - 1}; "
          f"read_uncommitted: {len(uncommitted)} ({len(uncommitted) - len(committed)} aborted)")
