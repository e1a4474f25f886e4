"""Issue #27, must show 5: MirrorMaker 2 (dedicated mode, ``org.apache.kafka.connect.mirror.MirrorMaker``)
with Odradek as the target cluster, compared with a live Kafka 4.4.0 as the target in the same run.

One MirrorMaker process replicates an Odradek source cluster ``src`` to two targets at once:
``odr`` (an Odradek broker) and ``kfk`` (Kafka 4.4.0). Both flows see the same source and the same
steps, so everything MirrorMaker writes must come out the same on both targets: the mirrored
records (partition, offset, key, value, headers, timestamp), the mirrored topic's configs, the
checkpoints, and the consumer groups' translated offsets that MirrorMaker commits on the target.

It runs twice: at least once (MirrorMaker's default), and exactly once
(``<target>.exactly.once.source.support=enabled``, KIP-618: each task writes its records and
source offsets in transactions on the target, after fencing older task generations). Exactly once,
each flow's transaction markers take offsets wherever its own commits fell, so the downstream
offsets may differ between the targets: then the records are compared without their offsets, and
the translated offsets and checkpoints against each target's own offset syncs.

MirrorMaker is connect-mirror 4.3.1 running on Kafka 4.4.0's clients and Connect runtime (see
``compat-tests/mirror-pom.xml``: 4.4.0 is not on the reachable Maven Central, and 4.3.1 needs only
two relocated class references to run on the 4.4.0 jars).

Why the steps are what they are (MirrorMaker's rules, read from connect-mirror 4.3.1):

* The source task writes an offset sync (upstream offset -> downstream offset) to
  ``mm2-offset-syncs.<target>.internal`` on the source; with ``offset.lag.max=0`` it wants one
  for every record, but keeps at most ten in flight and replaces a waiting one, so which
  intermediate syncs exist depends on timing. The sync of a partition's last record always comes
  (at the latest when the task commits, every ``offset.flush.interval.ms``).
* The checkpoint task translates a committed upstream offset ``c`` from the newest sync it kept
  with upstream offset <= ``c``: exactly (``downstream + 1``) only when that sync is for ``c - 1``.
  Its store thins older syncs, and a task (re)started over an existing sync topic may keep only the
  newest one. It never moves a checkpoint or a target group offset backwards.

So the groups commit only where the newest sync is exactly the record before the commit: group
``mm-readers`` after the first batch (partition 0 at 60 of what will be 100, partition 1 at its
end), then a second batch fills partition 0 and group ``mm-late`` commits partition 0 at its new
end. The test waits on conditions (the syncs in the sync topic, the translated offsets on the
targets), never on sleeps, and the expected translations come from the syncs MirrorMaker wrote.
That ``mm-late`` arrives after the second batch also shows ``mm-readers``' mid-partition offset did
not move once the partition grew.
"""

from __future__ import annotations

import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka_oracle import (
    CACHE_DIR,
    FAST_JVM_OPTS,
    KAFKA_4_4,
    _log_config_args,
    free_port,
    in_ci,
    java_bin,
    require_tool,
)

TOPIC = "mm-orders"
MIRRORED = f"src.{TOPIC}"
PARTITIONS = 2
TARGETS = ("odr", "kfk")
#: records produced per partition before and after the first group's commit
FIRST_BATCH = {0: 60, 1: 100}
SECOND_BATCH = {0: 40, 1: 0}
EARLY_GROUP = "mm-readers"  # commits after the first batch: partition 0 mid-way, partition 1 at its end
LATE_GROUP = "mm-late"  # commits partition 0 at its end after the second batch
SOURCE_TOPIC_CONFIGS = {"retention.ms": "86400000", "max.message.bytes": "2000000"}
WAIT = 120.0


def _mirror_classpath() -> str:
    require_tool(f"kafka-{KAFKA_4_4}")
    path = CACHE_DIR / "connect-mirror.classpath"
    if not path.exists():
        message = "ORACLE TOOL MISSING: connect-mirror: run .ci/fetch-tools.sh (compat-tests/mirror-pom.xml)"
        pytest.fail(message) if in_ci() else pytest.skip(message)
    return path.read_text().strip()


# --- the source ------------------------------------------------------------------------------------


def _produce(bootstrap: str, batch: dict[int, int], start: dict[int, int], base_ts: int) -> None:
    """Keyed records with headers (an empty and a null header value, some tombstones) to each partition.
    The timestamps are recent: an old one would fall to the topic's retention.ms on the targets."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for p, count in batch.items():
        for n in range(start[p], start[p] + count):
            i = n * PARTITIONS + p
            headers: list[tuple[str, bytes | None]] = [("seq", str(i).encode()), ("kind", b"even" if n % 2 == 0 else b"odd")]
            if n % 7 == 0:
                headers += [("empty", b""), ("null", None)]
            value = None if n % 13 == 5 else f"order-{i}".encode()
            producer.produce(TOPIC, key=f"k{i % 10}".encode(), value=value, partition=p, headers=headers,
                             timestamp=base_ts + i)
    assert producer.flush(30) == 0


def _commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def _read_all(bootstrap: str, topic: str, partitions: range) -> list:
    """Every record of ``topic``'s ``partitions`` up to their current ends (read_committed, librdkafka's
    default). A partition is done at its end-of-partition event: a transaction marker may be its last
    offset, so the last record's offset does not tell."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm-test-reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    out = []
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, 0) for p in pending])
        deadline = time.monotonic() + 30
        errors = []
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() and msg.error().code() == KafkaError._PARTITION_EOF:
                pending.discard(msg.partition())
            elif msg.error():
                errors.append(msg.error())
            else:
                out.append(msg)
        assert not pending, f"{bootstrap} {topic}: could not read to {ends}, read {len(out)}, errors {errors[-5:]}"
    finally:
        consumer.close()
    return out


def _offset_syncs(source: str, target: str) -> dict[int, dict[int, int]]:
    """The offset syncs MirrorMaker wrote for ``target`` so far: partition -> {upstream: downstream}."""
    from confluent_kafka import KafkaException

    syncs: dict[int, dict[int, int]] = {}
    try:
        msgs = _read_all(source, f"mm2-offset-syncs.{target}.internal", range(1))
    except KafkaException:
        return syncs  # not created yet
    for msg in msgs:
        key, value = msg.key(), msg.value()
        (n,) = struct.unpack_from(">h", key)
        topic = key[2:2 + n].decode()
        (partition,) = struct.unpack_from(">i", key, 2 + n)
        upstream, downstream = struct.unpack(">qq", value)
        if topic == TOPIC:
            syncs.setdefault(partition, {})[upstream] = downstream
    return syncs


# --- the targets -----------------------------------------------------------------------------------


def _group_offsets(bootstrap: str, group: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    except Exception:
        return {}
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == MIRRORED and tp.offset >= 0}


def _records(bootstrap: str, topic: str = MIRRORED) -> list[tuple]:
    """(partition, offset, key, value, headers, timestamp) of every record of ``topic``."""
    return sorted(
        (m.partition(), m.offset(), m.key(), m.value(),
         tuple((k, None if v is None else bytes(v)) for k, v in (m.headers() or [])), m.timestamp())
        for m in _read_all(bootstrap, topic, range(PARTITIONS))
    )


def _checkpoints(bootstrap: str) -> dict[tuple[str, str, int], tuple[int, int, str]]:
    """The newest checkpoint per (group, topic, partition) in ``src.checkpoints.internal``."""
    def string(buf: bytes, pos: int) -> tuple[str, int]:
        (n,) = struct.unpack_from(">h", buf, pos)
        return buf[pos + 2:pos + 2 + n].decode(), pos + 2 + n

    out = {}
    for msg in _read_all(bootstrap, "src.checkpoints.internal", range(1)):
        key, value = msg.key(), msg.value()
        group, pos = string(key, 0)
        topic, pos = string(key, pos)
        (partition,) = struct.unpack_from(">i", key, pos)
        version, upstream, downstream = struct.unpack_from(">hqq", value)
        assert version == 0
        metadata, _ = string(value, 18)
        out[(group, topic, partition)] = (upstream, downstream, metadata)
    return out


def _topic_state(bootstrap: str) -> tuple[int, dict[str, str]]:
    """The mirrored topic's partition count and the configs set on it (not defaults)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = len(admin.list_topics(MIRRORED, timeout=10).topics[MIRRORED].partitions)
    resource = ConfigResource(ConfigResource.Type.TOPIC, MIRRORED)
    entries = admin.describe_configs([resource])[resource].result(10)
    dynamic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    return partitions, {name: e.value for name, e in entries.items() if e.source == dynamic}


# --- MirrorMaker -----------------------------------------------------------------------------------


def _start_mirror_maker(source: str, targets: dict[str, str], workdir: Path, exactly_once: bool) -> subprocess.Popen:
    props = {
        "clusters": ", ".join(["src", *targets]),
        "src.bootstrap.servers": source,
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "sync.topic.acls.enabled": "false",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "refresh.topics.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        # an offset sync for every mirrored record (see the module docstring)
        "offset.lag.max": "0",
    }
    for alias, bootstrap in targets.items():
        props |= {
            f"{alias}.bootstrap.servers": bootstrap,
            f"src->{alias}.enabled": "true",
            f"{alias}->src.enabled": "false",
            f"src->{alias}.topics": TOPIC,
            f"src->{alias}.groups": f"{EARLY_GROUP}, {LATE_GROUP}",
            # the worker commits its tasks (and so sends a waiting offset sync) every second
            f"{alias}.offset.flush.interval.ms": "1000",
        }
        if exactly_once:
            # KIP-618 source tasks: the mirrored records and the source offsets in one transaction
            props[f"{alias}.exactly.once.source.support"] = "enabled"
    if exactly_once:
        # exactly-once in dedicated mode needs MirrorMaker's internal REST server (KIP-710)
        props |= {"dedicated.mode.enable.internal.rest": "true", "listeners": f"http://127.0.0.1:{free_port()}"}
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "mm2.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cmd = [java_bin("java"), *FAST_JVM_OPTS, "-Xmx512m", *_log_config_args(KAFKA_4_4, workdir / "mm2.log"),
           "-cp", _mirror_classpath(), "org.apache.kafka.connect.mirror.MirrorMaker", str(config)]
    with open(workdir / "mm2.out", "w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


def _wait_for(what: str, check: Callable[[], object], proc: subprocess.Popen, workdir: Path) -> None:
    deadline = time.monotonic() + WAIT
    while True:
        state = check()
        if state is True:
            return
        if proc.poll() is not None:
            log = (workdir / "mm2.out").read_text()[-3000:] + (workdir / "mm2.log").read_text()[-3000:]
            pytest.fail(f"MirrorMaker exited ({proc.returncode}) waiting for {what}:\n{log}")
        if time.monotonic() > deadline:
            pytest.fail(f"MirrorMaker did not get to {what} in {WAIT:.0f} s; last state: {state}")
        time.sleep(0.5)


def _translated(syncs: dict[int, dict[int, int]], committed: dict[int, int]) -> dict[int, int] | None:
    """What MirrorMaker translates ``committed`` to, given that the newest sync is for the record before
    each committed offset (None while such a sync is missing)."""
    out = {}
    for p, c in committed.items():
        if c - 1 not in syncs.get(p, {}):
            return None
        out[p] = syncs[p][c - 1] + 1
    return out


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_mirror_maker_to_odradek_as_to_kafka(odradek_broker_factory, kafka_broker_factory, tmp_path, exactly_once):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    _mirror_classpath()  # skip (or fail in CI) before starting anything
    source = odradek_broker_factory()
    targets = {"odr": odradek_broker_factory().bootstrap, "kfk": kafka_broker_factory(version=KAFKA_4_4).bootstrap}
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=SOURCE_TOPIC_CONFIGS)]).values():
        f.result(30)
    base_ts = int(time.time() * 1000) - 60_000
    _produce(source.bootstrap, FIRST_BATCH, {p: 0 for p in FIRST_BATCH}, base_ts)
    ends = dict(FIRST_BATCH)
    committed: dict[str, dict[int, int]] = {}
    #: per target and group, the translation MirrorMaker's own offset syncs call for
    want: dict[str, dict[str, dict[int, int] | None]] = {t: {} for t in TARGETS}

    workdir = tmp_path / "mm2"
    proc = _start_mirror_maker(source.bootstrap, targets, workdir, exactly_once)
    try:
        def syncs_at(offsets: dict[int, int]) -> Callable[[], object]:
            def check() -> object:
                found = {t: _translated(_offset_syncs(source.bootstrap, t), offsets) for t in TARGETS}
                return True if all(found.values()) else found
            return check

        def translated_on_targets(group: str) -> Callable[[], object]:
            def check() -> object:
                for t in TARGETS:
                    want[t][group] = _translated(_offset_syncs(source.bootstrap, t), committed[group])
                have = {t: _group_offsets(targets[t], group) for t in TARGETS}
                return True if all(have[t] == want[t][group] for t in TARGETS) else {"want": want, "have": have}
            return check

        # 1. the first batch mirrored, up to the sync of each partition's last record; then the early commit
        _wait_for(f"the offset syncs at {ends}", syncs_at(ends), proc, workdir)
        committed[EARLY_GROUP] = dict(ends)
        _commit(source.bootstrap, EARLY_GROUP, committed[EARLY_GROUP])
        _wait_for(f"{EARLY_GROUP}'s translated offsets", translated_on_targets(EARLY_GROUP), proc, workdir)

        # 2. the second batch grows partition 0 past the early commit; then the late commit at its new end
        _produce(source.bootstrap, SECOND_BATCH, ends, base_ts)
        ends = {p: ends[p] + SECOND_BATCH[p] for p in ends}
        _wait_for(f"the offset syncs at {ends}", syncs_at(ends), proc, workdir)
        committed[LATE_GROUP] = {0: ends[0]}
        _commit(source.bootstrap, LATE_GROUP, committed[LATE_GROUP])
        _wait_for(f"{LATE_GROUP}'s translated offsets", translated_on_targets(LATE_GROUP), proc, workdir)
    finally:
        _stop(proc)

    # the translated offsets and the checkpoints: as the syncs call for (the mid-partition offset did
    # not move when the partition grew) and, at least once, the same on both targets
    for t in TARGETS:
        assert {g: _group_offsets(targets[t], g) for g in committed} == want[t]
        assert _checkpoints(targets[t]) == {
            (g, MIRRORED, p): (c, want[t][g][p], "") for g in committed for p, c in committed[g].items()}
    assert 0 < want["odr"][EARLY_GROUP][0] < want["odr"][LATE_GROUP][0]
    if not exactly_once:
        assert want["odr"] == want["kfk"]

    # the records: the source's, in order per partition, with their headers and timestamps, on both
    # targets; at least once also at the same offsets (exactly once, each flow's transaction markers
    # take offsets where its own commits fell)
    records = {t: _records(targets[t]) for t in TARGETS}
    assert len(records["odr"]) == sum(ends.values())
    if exactly_once:
        for t in TARGETS:
            assert all(_end_offsets(targets[t])[p] > sum(r[0] == p for r in records[t]) for p in ends), t
    else:
        assert records["odr"] == records["kfk"]
    source_records = [(r[0], *r[2:]) for r in _records(source.bootstrap, TOPIC)]
    for t in TARGETS:
        assert [(r[0], *r[2:]) for r in records[t]] == source_records, t

    topic_state = {t: _topic_state(targets[t]) for t in TARGETS}
    assert topic_state["odr"] == topic_state["kfk"]
    assert topic_state["odr"][0] == PARTITIONS
    assert {k: topic_state["odr"][1].get(k) for k in SOURCE_TOPIC_CONFIGS} == SOURCE_TOPIC_CONFIGS


def _end_offsets(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm-test-reader"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(MIRRORED, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()
