"""Issue #27, must show 3: a group of stock Java 4.4 consumers is upgraded member by member from the
classic protocol to the consumer protocol (KIP-848) and back, under a steady acks=all load, on
Odradek and on a live Kafka 4.4.0 (``group.consumer.migration.policy`` at its default,
bidirectional).

Three consumers (``compat-tests/java-migration/MigrationDriver.java``, one JVM) commit what they
consumed after each poll and when partitions are revoked. One at a time, a consumer leaves and
comes back on the other protocol; after each leave and each join the test waits until the group
has settled and records ``Admin.describeConsumerGroups``. Then:

* the group type, state, assignor, epochs and members (client, partitions, upgraded flag) after
  every step are the same on Odradek as on Kafka 4.4.0 (classic -> consumer with classic members
  -> consumer -> consumer with classic members -> classic);
* consumption never stops: records are consumed during every step;
* nothing acknowledged is lost, and a record is consumed again only if no commit covering it had
  succeeded before (Kafka's at-least-once): the commits survive the protocol changes;
* at the end the committed offsets are the log end offsets.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka_oracle import KAFKA_4_4, _clients_jar, java_bin, kafka_classpath, require_tool

SOURCE = Path(__file__).resolve().parent / "java-migration" / "MigrationDriver.java"
TOPIC = "migrating"
GROUP = "migrating-group"
PARTITIONS = 6
SLOTS = (0, 1, 2)
# quick heartbeats so each step settles in seconds on both brokers (Kafka checks the interval
# against its minimum, so both are lowered there)
# the initial delay lets the three first members join one generation, on both brokers
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "3000", "group.consumer.heartbeat.interval.ms": "500",
                   "group.consumer.min.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def migration_driver() -> Path:
    """MigrationDriver compiled against kafka-clients 4.4.0 (a directory for the classpath)."""
    require_tool(f"kafka-{KAFKA_4_4}")
    out = Path(tempfile.mkdtemp(prefix="migration-java-"))
    proc = subprocess.run([java_bin("javac"), "-nowarn", "--release", "17", "-cp", _clients_jar(KAFKA_4_4),
                           "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


class Driver:
    """The driver JVM: commands on stdin, events (JSON lines) collected by a reader thread."""

    def __init__(self, classes: Path, bootstrap: str, workdir: Path) -> None:
        self.events: list[dict] = []
        self._cond = threading.Condition()
        self._err = open(workdir / "driver.err", "w")  # noqa: SIM115 (closed in close())
        self.err_path = workdir / "driver.err"
        self.proc = subprocess.Popen(
            [java_bin("java"), "-Xmx384m", "-cp", f"{classes}:{kafka_classpath(KAFKA_4_4)}", "MigrationDriver",
             bootstrap, GROUP, TOPIC],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self._cond:
                    self.events.append(json.loads(line))
                    self._cond.notify_all()

    def call(self, command: str, timeout: float = 120.0) -> list[dict]:
        """Send a command; the events it answered (its own lines up to its "ok")."""
        word = command.split()[0]
        with self._cond:
            start = len(self.events)
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(e.get("ok") == word for e in self.events[start:]):
                assert self.proc.poll() is None, self.err_path.read_text()[-3000:]
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"no answer to {command!r}: {self.err_path.read_text()[-3000:]}"
                self._cond.wait(min(remaining, 1.0))
            return [e for e in self.events[start:] if "describe" in e or "offsets" in e or "produced" in e]

    def consumed(self) -> int:
        with self._cond:
            return sum(1 for e in self.events if "c" in e)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("exit", timeout=60)
            except AssertionError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._err.close()


def _settled(describe: dict, protocols: dict[int, str]) -> bool:
    members = describe["members"]
    return (describe["state"].upper() == "STABLE" and len(members) == len(protocols)
            and sum(m["partitions"] for m in members) == PARTITIONS
            and all(m["target"] in (-1, m["partitions"]) for m in members)
            and sorted(m["client"] for m in members) == sorted(f"slot{s}-{p}" for s, p in protocols.items()))


def _wait_settled(driver: Driver, protocols: dict[int, str], timeout: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        described = driver.call("describe")[-1]["describe"]
        if described is not None and _settled(described, protocols):
            return described
        assert time.monotonic() < deadline, f"the group did not settle: {described}"
        time.sleep(0.5)


def _scenario(classes: Path, bootstrap: str, workdir: Path) -> tuple[list[dict], list[dict], dict, dict]:
    """(the describe after each step, every event, the producer's totals, the committed offsets)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        f.result(30)
    workdir.mkdir(parents=True, exist_ok=True)
    driver = Driver(classes, bootstrap, workdir)
    steps: list[dict] = []
    try:
        driver.call("load on")
        protocols = {}
        for slot in SLOTS:
            driver.call(f"start {slot} classic")
            protocols[slot] = "classic"
        steps.append(_wait_settled(driver, protocols))
        progress = [driver.consumed()]
        for target in ("consumer", "classic"):
            for slot in SLOTS:
                # a rolling restart: the member leaves, the group settles without it, it comes back
                # on the other protocol and the group settles again
                driver.call(f"stop {slot}")
                del protocols[slot]
                steps.append(_wait_settled(driver, protocols))
                driver.call(f"start {slot} {target}")
                protocols[slot] = target
                steps.append(_wait_settled(driver, protocols))
                time.sleep(1)  # the load goes on a moment with the settled group
                progress.append(driver.consumed())
        produced = driver.call("load off")[-1]
        deadline = time.monotonic() + 60
        while len({e["v"] for e in driver.events if "c" in e}) < produced["acked"]:
            assert time.monotonic() < deadline, "the consumers did not catch up with the load"
            time.sleep(0.5)
        time.sleep(1)  # the last commits
        offsets = driver.call("offsets")[-1]["offsets"]
    finally:
        driver.close()
    increases = [b - a for a, b in zip(progress, progress[1:], strict=False)]
    assert all(n > 0 for n in increases), f"consumption stalled in a step: {increases}"
    return steps, list(driver.events), produced, offsets


def _check_delivery(events: list[dict], produced: dict, offsets: dict) -> Counter:
    """Nothing lost; a record consumed again only if no successful commit covered it before; the
    committed offsets are the log ends. Returns how often each record was consumed."""
    assert produced["failed"] == 0 and produced["acked"] == produced["produced"]
    committed: dict[int, int] = {}
    seen: Counter = Counter()
    for e in events:
        if "commit" in e:
            committed[e["p"]] = max(committed.get(e["p"], 0), e["o"])
        elif "c" in e:
            if seen[(e["p"], e["o"])]:
                assert e["o"] >= committed.get(e["p"], 0), f"consumed again after a commit covered it: {e}"
            seen[(e["p"], e["o"])] += 1
    assert not [e for e in events if "memberFailed" in e], [e for e in events if "memberFailed" in e]
    values = {e["v"] for e in events if "c" in e}
    assert values == {f"m-{i}" for i in range(produced["acked"])}, "records were lost"
    per_partition = Counter(i % PARTITIONS for i in range(produced["acked"]))
    assert {int(p): o for p, o in offsets.items()} == dict(per_partition)
    return seen


def _comparable(step: dict) -> dict:
    return {**step, "members": sorted((m["client"], m["partitions"], m["upgraded"]) for m in step["members"])}


def test_java_consumers_move_between_protocols_member_by_member_under_load(
        migration_driver, odradek_broker_factory, kafka_broker_factory, tmp_path):
    pytest.importorskip("confluent_kafka")
    odradek = odradek_broker_factory(overrides=GROUP_OVERRIDES)
    o_steps, o_events, o_produced, o_offsets = _scenario(migration_driver, odradek.bootstrap, tmp_path / "odradek")
    odradek.stop()
    o_seen = _check_delivery(o_events, o_produced, o_offsets)
    kafka = kafka_broker_factory(version=KAFKA_4_4, overrides=GROUP_OVERRIDES)
    k_steps, k_events, k_produced, k_offsets = _scenario(migration_driver, kafka.bootstrap, tmp_path / "kafka")
    kafka.stop()
    k_seen = _check_delivery(k_events, k_produced, k_offsets)
    o_types = [(s["type"].upper(), s["state"].upper()) for s in o_steps]
    assert o_types[0] == ("CLASSIC", "STABLE") and o_types[6] == ("CONSUMER", "STABLE")
    assert o_types[-1] == ("CLASSIC", "STABLE")
    for n, (o, k) in enumerate(zip(o_steps, k_steps, strict=True)):
        assert _comparable(o) == _comparable(k), f"step {n}: Odradek {o} Kafka {k}"
    duplicates = sum(n - 1 for n in o_seen.values()), sum(n - 1 for n in k_seen.values())
    print(f"records consumed twice (at-least-once redeliveries): Odradek {duplicates[0]}, Kafka {duplicates[1]}")
