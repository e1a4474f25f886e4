"""Client telemetry (KIP-714, #23): client-metrics config resources with Kafka 4.4.0's own
kafka-client-metrics.sh and kafka-configs.sh --entity-type client-metrics, raw
IncrementalAlterConfigs / DescribeConfigs / ListConfigResources, the same against Odradek and a
live Kafka 4.4.0; then a Java 4.4 producer with metrics push enabled pushes its metrics to Odradek
and they appear on the Prometheus endpoint.

A default Kafka 4.4.0 node has no telemetry exporter plugin, so it answers the config APIs but does
not advertise GetTelemetrySubscriptions / PushTelemetry; Odradek's exporter is its Prometheus
endpoint (``odradek.metrics.port``), which is why the push half runs against Odradek only.
"""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka_oracle import BrokerProcess, free_port, require_tool, run_java_tool

from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

KAFKA = "4.4.0"
CLIENT_METRICS = 16
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class connect:  # noqa: N801 - used as a context manager, like open()
    def __init__(self, broker: BrokerProcess) -> None:
        host, port = broker.bootstrap.rsplit(":", 1)
        self.conn = BrokerConnection(host, int(port))

    def __enter__(self) -> BrokerConnection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


@pytest.fixture(scope="module")
def brokers(_module_factory) -> dict[str, BrokerProcess]:
    require_tool(f"kafka-{KAFKA}")
    kafka = _module_factory("kafka", version=KAFKA)
    odradek = _module_factory("odradek", overrides={"odradek.metrics.port": str(free_port())})
    return {"kafka": kafka, "odradek": odradek}


def _alter(conn: BrokerConnection, name: str, *changes: tuple[str, int, str | None], version: int = 1,
           validate_only: bool = False) -> list[tuple[int, str | None]]:
    cls = request_class(44)
    body = cls(resources=[cls.AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name=name, configs=[
        cls.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in changes])],
        validate_only=validate_only)
    resp = conn.send(44, body, version)
    return [(r.error_code, r.error_message) for r in resp.responses]


def _describe(conn: BrokerConnection, *names: str, version: int = 4, keys: list[str] | None = None) -> list[Any]:
    cls = request_class(32)
    body = cls(resources=[cls.DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name=n,
                                                      configuration_keys=keys) for n in names],
               include_synonyms=version >= 1, include_documentation=version >= 3)
    resp = conn.send(32, body, version)
    return [(r.error_code, r.error_message, r.resource_name, sorted(
        (c.name, c.value, c.read_only, c.config_source, c.is_sensitive, c.config_type, c.documentation,
         [(s.name, s.value, s.source) for s in c.synonyms]) for c in r.configs)) for r in resp.results]


def _list(conn: BrokerConnection, version: int, types: list[int] | None = None) -> Any:
    cls = request_class(74)
    resp = conn.send(74, cls(resource_types=types or []), version)
    return resp.error_code, sorted((r.resource_name, r.resource_type) for r in resp.config_resources
                                   if r.resource_type == CLIENT_METRICS)


def _raw_scenario(broker: BrokerProcess) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    with connect(broker) as conn:
        out.append(("set", _alter(conn, "raw1", ("metrics", SET, "org.apache.kafka.producer."),
                                  ("interval.ms", SET, "1000"), ("match", SET, "client_id=abc.*"))))
        out.append(("describe", _describe(conn, "raw1")))
        out.append(("describe v1", _describe(conn, "raw1", version=1)))
        out.append(("describe one key", _describe(conn, "raw1", keys=["interval.ms"])))
        out.append(("describe missing", _describe(conn, "missing")))
        out.append(("describe empty name", _describe(conn, "")))
        out.append(("append", _alter(conn, "raw1", ("metrics", APPEND, "org.apache.kafka.consumer."))))
        out.append(("subtract", _alter(conn, "raw1", ("metrics", SUBTRACT, "org.apache.kafka.producer."))))
        out.append(("after append/subtract", _describe(conn, "raw1")))
        out.append(("interval too small", _alter(conn, "raw1", ("interval.ms", SET, "50"))))
        out.append(("interval not a number", _alter(conn, "raw1", ("interval.ms", SET, "soon"))))
        out.append(("bad match key", _alter(conn, "raw1", ("match", SET, "colour=red"))))
        out.append(("match without =", _alter(conn, "raw1", ("match", SET, "client_id"))))
        out.append(("bad match regex", _alter(conn, "raw1", ("match", SET, "client_id=[abc"))))
        out.append(("unknown config", _alter(conn, "raw1", ("colour", SET, "red"))))
        out.append(("empty name", _alter(conn, "", ("interval.ms", SET, "1000"))))
        out.append(("validate only", _alter(conn, "raw2", ("interval.ms", SET, "2000"), validate_only=True)))
        out.append(("list v1", _list(conn, 1, [CLIENT_METRICS])))
        out.append(("list v0", _list(conn, 0)))
        out.append(("delete one", _alter(conn, "raw1", ("match", DELETE, None))))
        out.append(("after delete one", _describe(conn, "raw1")))
        out.append(("delete all", _alter(conn, "raw1", ("metrics", DELETE, None), ("interval.ms", DELETE, None))))
        out.append(("after delete all", _describe(conn, "raw1")))
        out.append(("list after delete all", _list(conn, 1, [CLIENT_METRICS])))
    return out


def test_raw_requests_same_as_kafka(brokers) -> None:
    theirs = _raw_scenario(brokers["kafka"])
    ours = _raw_scenario(brokers["odradek"])
    for (label, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, label
    printed = dict(theirs)
    assert printed["set"] == [(0, None)]
    assert printed["interval too small"][0][0] != 0


# ------------------------------------------------------------------ Kafka's own tools


def _clean(stderr: str) -> str:
    text = "\n".join(line for line in stderr.splitlines()
                     if "log4j" not in line.lower() and "SLF4J" not in line and not line.startswith("WARNING"))
    return re.sub(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ", "[<time>] ", text, flags=re.MULTILINE)


def _tool_runs(broker: BrokerProcess) -> list[tuple[str, tuple[int, str, str]]]:
    b = ["--bootstrap-server", broker.bootstrap]
    runs: list[tuple[str, tuple[int, str, str]]] = []

    def run(label: str, main_class: str, *args: str) -> None:
        proc = run_java_tool(main_class, [*b, *args], version=KAFKA)
        text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", proc.stdout)
        runs.append((label, (proc.returncode, text, re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>",
                                                            _clean(proc.stderr)))))

    cm = "org.apache.kafka.tools.ClientMetricsCommand"
    run("cm alter", cm, "--alter", "--name", "sub1", "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
        "--interval", "1000", "--match", "client_software_name=apache-kafka-java")
    run("cm describe one", cm, "--describe", "--name", "sub1")
    run("cm alter interval", cm, "--alter", "--name", "sub1", "--interval", "2000")
    run("cm describe all", cm, "--describe")
    run("cm list", cm, "--list")
    run("cm bad interval", cm, "--alter", "--name", "sub1", "--interval", "5")
    run("cm bad match", cm, "--alter", "--name", "sub1", "--match", "colour=red")
    cfg = "org.apache.kafka.tools.ConfigCommand"
    run("configs alter", cfg, "--entity-type", "client-metrics", "--entity-name", "sub2", "--alter", "--add-config",
        "interval.ms=5000,metrics=[org.apache.kafka.,kafka.]")
    run("configs describe one", cfg, "--entity-type", "client-metrics", "--entity-name", "sub2", "--describe")
    run("configs describe all", cfg, "--entity-type", "client-metrics", "--describe")
    run("configs delete config", cfg, "--entity-type", "client-metrics", "--entity-name", "sub2", "--alter",
        "--delete-config", "interval.ms")
    run("configs describe after delete", cfg, "--entity-type", "client-metrics", "--entity-name", "sub2",
        "--describe")
    run("configs bad", cfg, "--entity-type", "client-metrics", "--entity-name", "sub2", "--alter", "--add-config",
        "interval.ms=1")
    run("configs unknown", cfg, "--entity-type", "client-metrics", "--entity-name", "sub2", "--alter",
        "--add-config", "colour=red")
    run("cm delete", cm, "--delete", "--name", "sub1")
    run("cm list after delete", cm, "--list")
    run("configs describe deleted", cfg, "--entity-type", "client-metrics", "--entity-name", "sub1", "--describe")
    return runs


def test_kafka_tools_print_the_same(brokers) -> None:
    theirs = _tool_runs(brokers["kafka"])
    ours = _tool_runs(brokers["odradek"])
    assert [label for label, _ in ours] == [label for label, _ in theirs]
    for (label, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        assert mine == kafkas, label
    printed = dict(theirs)
    assert printed["cm alter"][0] == 0 and "sub1" in printed["cm list"][1]
    assert "sub1" not in printed["cm list after delete"][1]


def dump(path: Path, broker: BrokerProcess) -> None:  # pragma: no cover - exploration helper
    import pprint  # noqa: PLC0415

    path.write_text(pprint.pformat(_raw_scenario(broker), width=150) + "\n" +
                    pprint.pformat(_tool_runs(broker), width=150))


def _prometheus(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def test_java_client_pushes_metrics_to_prometheus(brokers, tmp_path: Path) -> None:
    odradek = brokers["odradek"]
    metrics_port = int(odradek.overrides["odradek.metrics.port"])
    with connect(odradek) as conn:
        # only this subscription (the other tests' ones removed), matched on what the Java client's
        # ApiVersions request says it is, as Kafka's docs suggest
        for name, _ in _list(conn, 1, [CLIENT_METRICS])[1]:
            assert _alter(conn, name, *((key, DELETE, None) for key in ("metrics", "interval.ms", "match"))) == [
                (0, None)]
        assert _alter(conn, "push-java", ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000"),
                      ("match", SET, "client_software_name=apache-kafka-java")) == [(0, None)]
    config = tmp_path / "producer.properties"
    config.write_text("enable.metrics.push=true\nclient.id=telemetry-test\n")
    values = "\n".join(f"v{i}" for i in range(20)) + "\n"
    from test_delegation_tokens_44 import run_java_tool_input  # noqa: PLC0415 - the console producer with stdin

    deadline = time.time() + 60
    seen = ""
    while time.time() < deadline:
        proc = run_java_tool_input("org.apache.kafka.tools.ConsoleProducer",
                                   ["--bootstrap-server", odradek.bootstrap, "--topic", "telemetry-topic",
                                    "--command-config", str(config)], values)
        assert proc.returncode == 0, proc.stderr
        seen = _prometheus(metrics_port)
        if "org_apache_kafka_producer" in seen:
            break
    pushed = [line for line in seen.splitlines() if line.startswith("org_apache_kafka_producer")]
    assert pushed, seen[-3000:]
    assert any('client_id="telemetry-test"' in line for line in pushed), pushed[:5]
