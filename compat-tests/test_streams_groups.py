"""Kafka Streams 4.4 on Odradek (issue #27 must-show 1 and 2).

A stateful word count (re-keyed by word: a repartition topic; counted in a store: a changelog
topic), exactly_once_v2, two instances in their own JVMs with their own state dirs:

* ``group.protocol=streams`` (KIP-1071), one standby replica: exact counts; one instance killed
  with SIGKILL while records keep coming: its active tasks move to the other instance, the counts
  stay exact; restarted: tasks come back; kafka-streams-groups.sh (StreamsGroupCommand 4.4) shows
  the same group on Odradek as on Kafka 4.4.0 for the same steps (member ids, process ids, hosts
  masked).
* ``group.protocol=classic``: the same application gives the same output on both brokers.

Every count the application writes is read read_committed: for each word the counts must be
exactly 1, 2, ..., n in order (a duplicate or a gap fails), n its number of input lines.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from kafka_oracle import KAFKA_4_4, dump_log_segments, java_bin, kafka_classpath, require_tool, run_java_tool

SOURCE = Path(__file__).resolve().parent / "java-streams" / "WordCountApp.java"
TOOL = "org.apache.kafka.tools.streams.StreamsGroupCommand"
INPUT, OUTPUT = "wc-in", "wc-out"
PARTITIONS = 3
WORDS = [f"w{i:02d}" for i in range(12)]
BATCH = 240
#: Both brokers run the streams group with one standby replica and short sessions, so a killed
#: instance's tasks move within seconds (the defaults are 45 s sessions).
STREAMS_BROKER_CONFIGS = {
    "group.streams.num.standby.replicas": "1",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "1000",
    "group.streams.heartbeat.interval.ms": "1000",
    "group.streams.initial.rebalance.delay.ms": "1000",
}


@pytest.fixture(scope="module")
def streams_app() -> Path:
    """WordCountApp compiled against Kafka Streams 4.4.0."""
    require_tool(f"kafka-{KAFKA_4_4}")
    out = Path(tempfile.mkdtemp(prefix="streams-java-"))
    proc = subprocess.run([java_bin("javac"), "-nowarn", "--release", "17", "-cp", kafka_classpath(KAFKA_4_4),
                           "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


class Instance:
    """One WordCountApp JVM; its JSON lines collected as they come."""

    def __init__(self, classes: Path, bootstrap: str, app_id: str, protocol: str, state_dir: Path,
                 log: Path) -> None:
        self.args = [java_bin("java"), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp",
                     f"{classes}:{kafka_classpath(KAFKA_4_4)}", "WordCountApp", bootstrap, app_id, protocol,
                     str(state_dir), INPUT, OUTPUT]
        self.log = log
        self.lines: list[dict] = []
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.lines = []
        err = open(self.log, "a")  # noqa: SIM115 - the JVM's stderr for as long as it runs
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def tasks(self) -> tuple[list[str], list[str]]:
        """(active, standby) tasks of the last report."""
        for line in reversed(self.lines):
            if "active" in line:
                return line["active"], line["standby"]
        return [], []

    def running(self) -> bool:
        """The newest state is RUNNING and tasks were reported. The state listener's line may come
        after the watcher's last task line: a rebalance the watcher did not see (tasks unchanged)
        prints no new task line, so the newest line need not carry tasks."""
        states = [line["state"] for line in self.lines if "state" in line]
        return bool(states) and states[-1] == "RUNNING" and any("active" in line for line in self.lines)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def errors(self) -> list[dict]:
        return [line for line in self.lines if "error" in line]


class Output:
    """Every (word, count) the application committed, in order per partition (read_committed)."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wc-reader",
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
        self.consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(PARTITIONS)])
        self.counts: dict[str, list[int]] = {}

    def poll(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for msg in self.consumer.consume(500, 0.2):
                if msg.error() is None:
                    self.counts.setdefault(msg.key().decode(), []).append(int(msg.value().decode()))

    def wait_for(self, expected: dict[str, int], timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.poll(0.5)
            if all(self.counts.get(w, [0])[-1] >= n for w, n in expected.items()):
                return
        raise AssertionError(f"counts never reached {expected}: {self.last()}")

    def last(self) -> dict[str, int]:
        return {w: c[-1] for w, c in sorted(self.counts.items())}

    def close(self) -> None:
        self.consumer.close()


def _produce(bootstrap: str, batch: int, expected: dict[str, int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(BATCH):
        word = WORDS[i % len(WORDS)]
        producer.produce(INPUT, key=f"b{batch}-{i}".encode(), value=f"b{batch}-{i} {word}".encode(),
                         partition=i % PARTITIONS)
        expected[word] = expected.get(word, 0) + 1
    assert producer.flush(60) == 0


def _wait(cond, timeout: float, what: str, instances: list[Instance]) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        for inst in instances:
            assert not inst.errors(), inst.errors()
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}: " + "; ".join(
        f"{inst.log.name}: {inst.lines[-3:]}" for inst in instances))


def _tool(bootstrap: str, *args: str) -> str:
    proc = run_java_tool(TOOL, ["--bootstrap-server", bootstrap, *args], version=KAFKA_4_4, timeout=120)
    return proc.stdout + proc.stderr


def _ours(bootstrap: str, *args: str) -> str:
    """`odradek streams-groups` with the same arguments."""
    proc = subprocess.run([sys.executable, "-m", "odradek", "streams-groups", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr


def _both(seen: dict, bootstrap: str, name: str, *args: str) -> None:
    """The Kafka tool's output; on Odradek also `odradek streams-groups`' for the same state."""
    seen["tools"][name] = _tool(bootstrap, *args)
    if seen["odradek"]:
        seen["ours"][name] = _ours(bootstrap, *args)


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(INPUT, PARTITIONS, 1), NewTopic(OUTPUT, PARTITIONS, 1)]).values():
        f.result(30)


def _all_tasks(instances: list[Instance]) -> list[str]:
    return sorted(t for inst in instances for t in inst.tasks()[0])


def _scenario(classes: Path, bootstrap: str, protocol: str, tmp: Path, kill: bool = True,
              odradek: bool = False) -> dict:
    """Run the word count (through a kill and a restart of one instance); what was seen at each step."""
    tmp.mkdir(parents=True, exist_ok=True)
    app_id = f"wc-{protocol}"
    _create_topics(bootstrap)
    a = Instance(classes, bootstrap, app_id, protocol, tmp / "state-a", tmp / "a.log")
    b = Instance(classes, bootstrap, app_id, protocol, tmp / "state-b", tmp / "b.log")
    both = [a, b]
    out = Output(bootstrap)
    expected: dict[str, int] = {}
    seen: dict = {"tools": {}, "ours": {}, "odradek": odradek}
    tasks = [f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS)]
    try:
        a.start()
        b.start()
        # both instances run, each with active tasks, every task active once
        _wait(lambda: a.running() and b.running() and a.tasks()[0] and b.tasks()[0]
              and _all_tasks(both) == tasks, 120, "both instances running", both)
        if protocol == "streams":
            _wait(lambda: all(inst.tasks()[1] for inst in both), 60, "standby tasks on both instances", both)
        _produce(bootstrap, 1, expected)
        out.wait_for(expected, 90)
        seen["before"] = {"a": a.tasks(), "b": b.tasks()}
        if protocol == "streams":
            time.sleep(2)
            for name, args in {"list": ["--list"], "list-state": ["--list", "--state"],
                               "state": ["--describe", "--group", app_id, "--state"],
                               "state-verbose": ["--describe", "--group", app_id, "--state", "--verbose"],
                               "members": ["--describe", "--group", app_id, "--members"],
                               "offsets": ["--describe", "--group", app_id, "--offsets"]}.items():
                _both(seen, bootstrap, name, *args)
        if not kill:
            _produce(bootstrap, 2, expected)
            _produce(bootstrap, 3, expected)
            out.wait_for(expected, 90)
            return _finish(a, b, out, seen, expected, app_id, bootstrap, protocol)
        b.kill()
        _produce(bootstrap, 2, expected)
        # b's active tasks move to a
        _wait(lambda: sorted(a.tasks()[0]) == tasks, 120, "every task active on the survivor", [a])
        out.wait_for(expected, 90)
        seen["alone"] = a.tasks()
        b.start()
        _wait(lambda: b.running() and b.tasks()[0] and a.tasks()[0] and _all_tasks(both) == tasks, 120,
              "tasks back on the restarted instance", both)
        _produce(bootstrap, 3, expected)
        out.wait_for(expected, 90)
        seen["after"] = {"a": a.tasks(), "b": b.tasks()}
        if protocol == "streams":
            _both(seen, bootstrap, "members-after", "--describe", "--group", app_id, "--members")
        return _finish(a, b, out, seen, expected, app_id, bootstrap, protocol)
    finally:
        for inst in both:
            inst.stop()
        out.close()


def _finish(a: Instance, b: Instance, out: Output, seen: dict, expected: dict, app_id: str, bootstrap: str,
            protocol: str) -> dict:
    """Stop both instances, read what is left of the output, the group after the stop."""
    for inst in (a, b):
        inst.stop()
    out.poll(2)
    if protocol == "streams":
        _both(seen, bootstrap, "state-closed", "--describe", "--group", app_id, "--state")
        _both(seen, bootstrap, "list-closed", "--list", "--state")
    seen["counts"] = {w: list(c) for w, c in out.counts.items()}
    seen["expected"] = expected
    seen["errors"] = a.errors() + b.errors()
    return seen


def _check_exact(seen: dict) -> None:
    assert not seen["errors"], seen["errors"]
    for word, n in seen["expected"].items():
        assert seen["counts"].get(word) == list(range(1, n + 1)), (word, seen["counts"].get(word))
    assert set(seen["counts"]) == set(seen["expected"])


_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b[A-Za-z0-9_-]{22}\b")


def _normalized(text: str) -> list[str]:
    """The tool's lines without what differs run to run: member and process ids, client ids
    (they embed the process id), the coordinator's address and node id."""
    out = []
    for line in text.splitlines():
        if "WARN" in line or "SLF4J" in line or not line.strip():
            continue
        line = _ID.sub("<id>", line)
        line = re.sub(r"wc-streams-<id>-StreamThread-\d+-consumer", "<client>", line)
        line = re.sub(r"/?(127\.0\.0\.1|localhost):\d+ \(\d+\)", "<coordinator>", line)
        out.append(" ".join(line.split()))
    return out


def _shape(text: str) -> list:
    """--members: the header and, per member, how many active and standby tasks it runs (which
    process gets which tasks depends on the random process ids, on Kafka as on Odradek)."""
    lines = _normalized(text)
    rows = []
    for line in lines[1:]:
        active = re.search(r"ACTIVE: (.*?)(?: STANDBY:|$)", line)
        standby = re.search(r"STANDBY: (.*?)(?: WARMUP:|$)", line)
        rows.append(tuple(len(re.findall(r"\d+(?=[,\]])", m.group(1))) if m else 0 for m in (active, standby)))
    return [lines[0], sorted(rows)]


def _rows_sorted(text: str) -> list:
    """--offsets: the header and the rows as a set (the tool prints them in the order of a HashMap
    filled from the answers it gets, which varies from run to run on either broker)."""
    lines = _normalized(text)
    return [lines[:1], sorted(lines[1:])]


def _masked_epochs(text: str) -> list[str]:
    """--state --verbose with the two epoch columns masked (their numbers depend on how many
    heartbeats found the group changed, which is timing)."""
    lines = _normalized(text)
    return [lines[0], *(" ".join(c if i not in (4, 5) else "*" for i, c in enumerate(line.split()))
                        for line in lines[1:])]


COMPARE = {"list": _normalized, "list-state": _normalized, "state": _normalized, "state-verbose": _masked_epochs,
           "members": _shape, "offsets": _rows_sorted, "members-after": _shape, "state-closed": _normalized,
           "list-closed": _normalized}


def _streams_record_types(log_dir: Path) -> set[str]:
    """The streams group record types (key versions 17-23) Kafka's DumpLogSegments decodes in
    ``__consumer_offsets`` (it fails on a record it cannot read)."""
    files = [str(f) for f in sorted(log_dir.glob("__consumer_offsets-*/*.log")) if f.stat().st_size]
    out, err, rc = dump_log_segments(files, "--offsets-decoder", version=KAFKA_4_4)
    assert rc == 0 and "Exception" not in out + err, err[-3000:]
    return {t for t in re.findall(r'key: \{"type":"(\d+)"', out) if 17 <= int(t) <= 23}


def test_streams_protocol_word_count_through_a_kill(streams_app, odradek_broker_factory, kafka_broker_factory,
                                                    tmp_path):
    odradek = odradek_broker_factory(overrides=STREAMS_BROKER_CONFIGS)
    o_seen = _scenario(streams_app, odradek.bootstrap, "streams", tmp_path / "odradek", odradek=True)
    odradek.stop()
    _check_exact(o_seen)
    o_types = _streams_record_types(odradek.log_dir)
    kafka = kafka_broker_factory(version=KAFKA_4_4, overrides=STREAMS_BROKER_CONFIGS)
    k_seen = _scenario(streams_app, kafka.bootstrap, "streams", tmp_path / "kafka")
    kafka.stop()
    _check_exact(k_seen)
    # Kafka reads the streams group records Odradek wrote, and they are of the kinds Kafka writes
    assert o_types == _streams_record_types(kafka.log_dir) and {"17", "19", "21", "22", "23"} <= o_types
    assert o_seen["counts"] == k_seen["counts"]
    for seen in (o_seen, k_seen):
        # with one standby each instance runs half the tasks and stands by for the other half's state
        for name in ("a", "b"):
            active, standby = seen["before"][name]
            assert active and standby and not set(active) & set(standby), seen["before"]
        assert len(seen["alone"][0]) == 2 * PARTITIONS
    differences = []
    # `odradek streams-groups` prints what kafka-streams-groups.sh prints for the same group
    for name in o_seen["tools"]:
        normalize = _rows_sorted if name == "offsets" else _normalized
        if normalize(o_seen["ours"][name]) != normalize(o_seen["tools"][name]):
            differences.append(("odradek streams-groups", name, o_seen["ours"][name], o_seen["tools"][name]))
    assert set(o_seen["tools"]) == set(COMPARE)
    # kafka-streams-groups.sh shows the same group on Odradek as on Kafka
    for name, normalize in COMPARE.items():
        if normalize(o_seen["tools"][name]) != normalize(k_seen["tools"][name]):
            differences.append(("odradek vs kafka", name, o_seen["tools"][name], k_seen["tools"][name]))
    assert not differences, differences


def test_classic_protocol_word_count_same_output(streams_app, odradek_broker_factory, kafka_broker_factory,
                                                 tmp_path):
    odradek = odradek_broker_factory()
    o_seen = _scenario(streams_app, odradek.bootstrap, "classic", tmp_path / "odradek", kill=False)
    odradek.stop()
    _check_exact(o_seen)
    kafka = kafka_broker_factory(version=KAFKA_4_4)
    k_seen = _scenario(streams_app, kafka.bootstrap, "classic", tmp_path / "kafka", kill=False)
    kafka.stop()
    _check_exact(k_seen)
    assert o_seen["counts"] == k_seen["counts"]
