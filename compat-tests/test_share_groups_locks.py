"""Issue #26, must show 1 (the lock-timeout case with Java consumers): a Java 4.4
``KafkaShareConsumer`` that holds records and never acknowledges them loses its locks after
``group.share.record.lock.duration.ms``; another Java member then gets them with delivery
count 2 -- on Odradek as on a live Kafka 4.4.0 (compat-tests/java-share/LockDriver.java)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from kafka_oracle import KAFKA_4_4, _clients_jar, java_bin, kafka_classpath, require_tool
from test_share_groups_state import create_topic, group_configs, produce

from odradek.tools.client import KafkaClient

SOURCE = Path(__file__).resolve().parent / "java-share" / "LockDriver.java"
LOCK_MS = 3000
RECORDS = 20
#: both brokers: 3 s locks (Kafka's broker bound group.share.min.record.lock.duration.ms allows it)
OVERRIDES = {"group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": str(LOCK_MS)}


@pytest.fixture(scope="module")
def lock_driver() -> Path:
    require_tool(f"kafka-{KAFKA_4_4}")
    out = Path(tempfile.mkdtemp(prefix="share-lock-java-"))
    proc = subprocess.run([java_bin("javac"), "-nowarn", "--release", "17", "-cp", _clients_jar(KAFKA_4_4),
                           "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


def _run(bootstrap: str, classes: Path) -> list[dict]:
    with KafkaClient(bootstrap) as client:
        create_topic(client, "locks")
        group_configs(client, "lockers", {"share.auto.offset.reset": "earliest"})
        produce(client, "locks", [f"l-{i}" for i in range(RECORDS)])
    proc = subprocess.run([java_bin("java"), "-Xmx256m", "-cp", f"{classes}:{kafka_classpath(KAFKA_4_4)}",
                           "LockDriver", bootstrap, "lockers", "locks", "90000", str(RECORDS)],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines and lines[-1] == {"done": True}, proc.stdout[-2000:]
    return lines[:-1]


def _check(events: list[dict]) -> tuple[set[int], dict[int, int]]:
    held = {e["o"] for e in events if e["c"] == "stalled"}
    other = {e["o"]: e["dc"] for e in events if e["c"] == "other"}
    assert held and all(e["dc"] == 1 for e in events if e["c"] == "stalled")
    assert set(other) == set(range(RECORDS)), other  # every record reached the member that acknowledges
    for e in events:
        if e["c"] == "other" and e["o"] in held:
            # a held record comes back only after the lock ran out, counted once more
            assert e["dc"] == 2 and e["ms"] >= LOCK_MS - 500, e
    return held, other


def test_a_stalled_java_members_locks_run_out_as_on_kafka(lock_driver, kafka_broker_factory, odradek_broker_factory):
    kafka = kafka_broker_factory(version=KAFKA_4_4, overrides=OVERRIDES)
    k_held, k_other = _check(_run(kafka.bootstrap, lock_driver))
    kafka.stop()
    odradek = odradek_broker_factory(overrides=OVERRIDES)
    o_held, o_other = _check(_run(odradek.bootstrap, lock_driver))
    odradek.stop()
    assert (o_held, o_other) == (k_held, k_other)
