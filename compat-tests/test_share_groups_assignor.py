"""Issue #26, must show 4 (its assignment half): Odradek's share-group target assignments are
Kafka 4.4's, choice for choice.

Random scripts of members joining (one or several topics, the same or different subscriptions,
some partitions not yet initialized), leaving and heartbeating run twice: through Odradek's
ShareGroup heartbeat path, and through Kafka 4.4.0's own SimpleAssignor fed as Kafka's group
coordinator feeds it (compat-tests/java-share/AssignorDriver.java, compiled against the 4.4.0
jars). After every step each member's target assignment, as its record lists it (topic ids and
partitions in order), must be equal. The ids are random, so each run covers other hash orders;
``ODRADEK_SHARE_ASSIGNOR_CASES`` sets how many scripts run (default 300).
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from kafka_oracle import KAFKA_4_4, java_bin, kafka_classpath, require_tool

from odradek.group_coordinator.share import ShareGroup
from odradek.wire.primitives import Uuid

SOURCE = Path(__file__).resolve().parent / "java-share" / "AssignorDriver.java"
CASES = int(os.environ.get("ODRADEK_SHARE_ASSIGNOR_CASES", "300"))


@pytest.fixture(scope="module")
def assignor_driver() -> Path:
    require_tool(f"kafka-{KAFKA_4_4}")
    out = Path(tempfile.mkdtemp(prefix="share-assignor-java-"))
    proc = subprocess.run([java_bin("javac"), "-nowarn", "--release", "17", "-cp", kafka_classpath(KAFKA_4_4),
                           "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


class _Topics:
    """The topic lookups ShareGroup.heartbeat makes of its group coordinator."""

    config = None
    broker = None

    def __init__(self, topics: dict[str, tuple[Uuid, int]]) -> None:
        self.topics = topics

    def monotonic(self) -> float:
        return 0.0

    def topic_partition_count(self, name: str) -> int | None:
        return self.topics[name][1] if name in self.topics else None

    def _topic_id(self, name: str) -> Uuid | None:
        return self.topics[name][0] if name in self.topics else None


def _script(rng: random.Random) -> tuple[dict[str, tuple[Uuid, int, list[int]]], list[tuple[str, ...]]]:
    topics = {}
    for i in range(rng.choice((1, 1, 2, 3))):
        count = rng.randint(1, 7)
        init = sorted(rng.sample(range(count), rng.randint(1, count))) if rng.random() < 0.3 else list(range(count))
        topics[f"t{i}"] = (Uuid(rng.randbytes(16)), count, init)
    names = list(topics)
    same = rng.random() < 0.6
    events: list[tuple[str, ...]] = []
    live: list[str] = []
    for _ in range(rng.randint(3, 14) if rng.random() < 0.8 else rng.randint(15, 45)):
        if live and rng.random() < 0.25:
            gone = live.pop(rng.randrange(len(live)))
            events.append(("leave", gone))
            if live:
                events.append(("beat", rng.choice(live)))
            continue
        member = str(uuid.UUID(bytes=rng.randbytes(16))) if rng.random() < 0.7 else f"m{rng.randint(0, 40)}"
        if member in live:
            continue
        subs = names if same else sorted(rng.sample(names, rng.randint(1, len(names))))
        events.append(("join", member, ",".join(subs)))
        live.append(member)
    return topics, events


def _odradek(topics: dict[str, tuple[Uuid, int, list[int]]], events: list[tuple[str, ...]]) -> list[list[str]]:
    coord = _Topics({n: (tid, count) for n, (tid, count, _) in topics.items()})
    group = ShareGroup("g")
    group.initialized = {n: set(init) for n, (_, _, init) in topics.items() if init}
    epochs: dict[str, int] = {}
    steps = []
    for event in events:
        kind, member = event[0], event[1]
        epoch = {"join": 0, "leave": -1}.get(kind, epochs.get(member, 0))
        r = group.heartbeat(coord, member_id=member, member_epoch=epoch, rack_id=None,
                            subscribed_topic_names=event[2].split(",") if kind == "join" else None,
                            client_id="c", client_host="/127.0.0.1", topic_partitions=coord.topic_partition_count)
        epochs[member] = r.member_epoch
        if kind == "leave":
            continue
        lines = []
        for m in sorted(group.target):
            text = ";".join(f"{topics[t][0]}:{','.join(map(str, ps))}" for t, ps in group.target[m].items())
            lines.append(f"target {m} {text}".rstrip())
        steps.append(lines)
    return steps


def _kafka(classes: Path, scripts: list) -> list[list[list[str]]]:
    lines = []
    for topics, events in scripts:
        for name, (tid, count, init) in topics.items():
            lines.append(f"topic {name} {tid} {count} {','.join(map(str, init)) or '-'}")
        lines.extend(" ".join(e) for e in events)
        lines.append("end")
    proc = subprocess.run([java_bin("java"), "-Xmx256m", "-cp", f"{classes}:{kafka_classpath(KAFKA_4_4)}",
                           "AssignorDriver"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases: list[list[list[str]]] = [[]]
    step: list[str] = []
    for line in proc.stdout.splitlines():
        if line.startswith("target"):
            step.append(line.rstrip())
        elif line == "step":
            cases[-1].append(step)
            step = []
        elif line == "end":
            cases.append([])
    return cases[:-1]


def test_share_target_assignments_match_kafkas_simple_assignor(assignor_driver):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    scripts = [_script(rng) for _ in range(CASES)]
    kafka = _kafka(assignor_driver, scripts)
    assert len(kafka) == len(scripts)
    sharing = 0
    for (topics, events), k_steps in zip(scripts, kafka, strict=True):
        o_steps = _odradek(topics, events)
        assert o_steps == k_steps, (seed, topics, events, o_steps, k_steps)
        sharing += any(len([line for line in step]) > sum(c for _, c, _ in topics.values()) for step in k_steps)
    # the scripts reach the shared case (more members than partitions), not only the split one
    assert sharing > 0, seed
