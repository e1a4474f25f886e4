"""Log compaction on a running Odradek (issue #8, must-shows 2 and 3).

A compacted topic gets many updates per key and some tombstones from a real client. Once the
cleaner has run, a consumer reading from offset 0 sees exactly the last value of each live key,
at its original offset, offsets increasing; after `delete.retention.ms` (and a later cleaning) the
tombstones are gone too. Then the broker is SIGKILLed at random moments while it cleans: each
restart recovers the log with every live key at its latest value, nothing duplicated once the
cleaner has finished.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import NewTopic as CKNewTopic

OVERRIDES = {
    "log.cleaner.backoff.ms": 200,
    "log.retention.check.interval.ms": 300,
    "log.initial.task.delay.ms": 300,  # (30 s by default, as on Kafka)
    "log.segment.delete.delay.ms": 200,
}

Record = tuple[int, bytes | None, bytes | None]


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = CKAdmin({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([CKNewTopic(topic, 1, 1, config=configs)]).values():
        fut.result(30)


def _lift_compaction_lag(bootstrap: str, topic: str) -> None:
    """Set the topic's min.compaction.lag.ms to 0: the whole log becomes cleanable at once."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    admin = CKAdmin({"bootstrap.servers": bootstrap})  # held until the answer: a freed handle fails its futures
    admin.incremental_alter_configs([res])[res].result(30)


def _produce(bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]],
             batch_size: int = 4000) -> list[Record]:
    """Send and return what was written, (offset, key, value) in offset order, from the delivery
    reports (the cleaner may already be at work while the feed goes on)."""
    # batches must stay below the topic's small segment.bytes (else RECORD_LIST_TOO_LARGE)
    producer = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                           "batch.size": batch_size})
    errors: list[object] = []
    written: list[Record] = []

    def report(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            written.append((msg.offset(), msg.key(), msg.value()))

    for i, (k, v) in enumerate(items):
        producer.produce(topic, key=k, value=v, on_delivery=report)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return sorted(written, key=lambda r: r[0])


def _read_all(bootstrap: str, topic: str) -> list[Record]:
    consumer = CKConsumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    out: list[Record] = []
    try:
        _low, high = consumer.get_watermark_offsets(CKTopicPartition(topic, 0), timeout=10)
        consumer.assign([CKTopicPartition(topic, 0, 0)])
        idle = 0
        while (not out or out[-1][0] < high - 1) and idle < 15:
            msgs = consumer.consume(5000, timeout=1.0)
            idle = 0 if msgs else idle + 1
            for m in msgs:
                assert m.error() is None, m.error()
                out.append((m.offset(), m.key(), m.value()))
    finally:
        consumer.close()
    return out


def _latest(records: list[Record]) -> dict[bytes, bytes]:
    view: dict[bytes, bytes] = {}
    for _o, k, v in records:
        assert k is not None
        if v is None:
            view.pop(k, None)
        else:
            view[k] = v
    return view


def _feed(n_keys: int, updates: int, value_size: int, seed: int) -> list[tuple[bytes, bytes | None]]:
    """`updates` rounds over all keys; in the last round every 7th key gets a tombstone."""
    rng = random.Random(seed)
    items: list[tuple[bytes, bytes | None]] = []
    for u in range(updates):
        keys = list(range(n_keys))
        rng.shuffle(keys)
        for k in keys:
            deleted = u == updates - 1 and k % 7 == 0
            value = None if deleted else (f"{k}:{u}:".encode() + bytes(rng.randrange(256) for _ in range(8))).ljust(
                value_size, b".")
            items.append((f"key-{k:05d}".encode(), value))
    return items


def _wait(pred: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.3)
    raise AssertionError(f"{what}: not reached in {timeout} s")


def _partition_files(broker, topic: str) -> list[str]:
    d = Path(broker.log_dirs[0]) / f"{topic}-0"
    return sorted(p.name for p in d.iterdir())


def _cleaner_files_older_than(broker, topic: str, when: float) -> list[str]:
    """The partition's .cleaned / .swap files last written before `when` (leftovers, not new work)."""
    d = Path(broker.log_dirs[0]) / f"{topic}-0"
    out = []
    for p in d.iterdir():
        try:
            if p.name.endswith((".cleaned", ".swap")) and p.stat().st_mtime < when:
                out.append(p.name)
        except FileNotFoundError:  # finished (renamed) meanwhile
            continue
    return sorted(out)


@pytest.fixture
def broker(odradek_broker_factory):
    return odradek_broker_factory(overrides=OVERRIDES)


def test_compacted_topic_keeps_last_value_per_key_then_drops_tombstones(broker) -> None:
    bootstrap = broker.bootstrap
    topic = f"cmp-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, {"cleanup.policy": "compact", "segment.bytes": "8192", "segment.ms": "1000",
                               "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3000"})
    items = _feed(n_keys=150, updates=12, value_size=40, seed=7)
    written = _produce(bootstrap, topic, items)
    assert [o for o, _k, _v in written] == list(range(len(items)))
    original = {o: (k, v) for o, k, v in written}
    want = _latest(written)
    last_offset_of_key = {k: o for o, k, _v in written}
    # a record after segment.ms rolls the active segment, so all the feed becomes cleanable
    time.sleep(1.2)
    _produce(bootstrap, topic, [(b"zz-roll-1", b"x")])

    def compacted() -> bool:
        recs = _read_all(bootstrap, topic)
        return sorted(o for o, _k, _v in recs[:-1]) == sorted(last_offset_of_key.values())

    _wait(compacted, 60, "one record per key")
    recs = _read_all(bootstrap, topic)
    offsets = [o for o, _k, _v in recs]
    assert offsets == sorted(set(offsets)), "offsets increase"
    assert all(original[o] == (k, v) for o, k, v in recs[:-1]), "records unchanged at their offsets"
    assert _latest(recs[:-1]) == want
    tombstones = [k for _o, k, v in recs if v is None]
    assert tombstones, "tombstones stay until delete.retention.ms"
    checkpoint = (Path(broker.log_dirs[0]) / "cleaner-offset-checkpoint").read_text().splitlines()
    assert f"{topic} 0 {len(items)}" in checkpoint

    # after delete.retention.ms, new dirty data triggers a cleaning that removes the tombstones
    time.sleep(3.5)
    _produce(bootstrap, topic, [(b"zz-roll-2", b"y")])
    time.sleep(1.2)
    _produce(bootstrap, topic, [(b"zz-roll-3", b"z")])
    _wait(lambda: not any(v is None for _o, _k, v in _read_all(bootstrap, topic)), 60, "tombstones removed")
    recs = _read_all(bootstrap, topic)
    live = [(k, v) for _o, k, v in recs if not k.startswith(b"zz-")]
    assert dict(live) == want and len(live) == len(want)
    assert not [f for f in _partition_files(broker, topic) if f.endswith((".cleaned", ".swap"))]


def test_sigkill_during_cleaning_recovers_without_lost_or_duplicated_keys(broker) -> None:
    bootstrap = broker.bootstrap
    topic = f"kill-{uuid.uuid4().hex[:6]}"
    # a throttled cleaner over ~3 MB: each cleaning takes seconds, so kills land inside it
    broker.stop()
    broker.overrides["log.cleaner.io.max.bytes.per.second"] = "1500000"
    broker.start()
    # min.compaction.lag.ms holds the cleaner back while the feed goes in (on a slow machine it
    # would otherwise compact the log bit by bit, each round too short to be caught); lifted below
    _create(bootstrap, topic, {"cleanup.policy": "compact", "segment.bytes": "65536", "segment.ms": "1000",
                               "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "600000",
                               "min.compaction.lag.ms": "3600000"})
    rng = random.Random(11)
    # values big enough (~15 MB in all) that a round outlasts the throttle's first check (every 300 ms):
    # the cleaner now goes through 3 MB before that check
    items = _feed(n_keys=400, updates=25, value_size=1500, seed=11)
    written = _produce(bootstrap, topic, items, batch_size=30000)
    assert [o for o, _k, _v in written] == list(range(len(items)))
    original = {o: (k, v) for o, k, v in written}
    want = _latest(written)
    time.sleep(1.2)
    _produce(bootstrap, topic, [(b"zz-roll", b"x")])
    want[b"zz-roll"] = b"x"
    _lift_compaction_lag(bootstrap, topic)
    kills = 0
    saw_cleaner_files = 0
    for run in range(5):
        if run == 0:
            # wait for the cleaner's own files, then kill at once
            end = time.monotonic() + 30
            while time.monotonic() < end:
                if any(f.endswith(".cleaned") for f in _partition_files(broker, topic)):
                    saw_cleaner_files += 1
                    break
                time.sleep(0.02)
        else:
            time.sleep(rng.uniform(0.2, 3.0))
        broker.kill()
        kills += 1
        killed_at = time.time()
        broker.start()
        recs = _read_all(bootstrap, topic)
        offsets = [o for o, _k, _v in recs]
        assert offsets == sorted(set(offsets))
        assert all(original.get(o, (k, v)) == (k, v) for o, k, v in recs)
        assert _latest(recs) == want, f"run {run}: live keys differ after SIGKILL"
        # the killed cleaning's files are gone; the restarted cleaner may already be writing new ones
        assert not _cleaner_files_older_than(broker, topic, killed_at), f"run {run}"
    assert kills == 5 and saw_cleaner_files == 1

    # a clean stop in the middle of a (throttled) cleaning does not wait for it to finish
    end = time.monotonic() + 30
    while time.monotonic() < end and not any(f.endswith(".cleaned") for f in _partition_files(broker, topic)):
        time.sleep(0.02)
    t0 = time.monotonic()
    assert broker.stop() == 0
    assert time.monotonic() - t0 < 10
    broker.start()
    assert _latest(_read_all(bootstrap, topic)) == want

    # then let it finish: exactly one record per key
    def done() -> bool:
        recs = _read_all(bootstrap, topic)
        keys = [k for _o, k, _v in recs]
        return len(keys) == len(set(keys))

    _wait(done, 120, "cleaning finished after the kills")
    recs = _read_all(bootstrap, topic)
    assert _latest(recs) == want


# ---------------------------------------------------------------------------------------------
# live oracle: the real Kafka 3.9.1 cleans the same batches with the same settings


def _oracle_batches(now: int, n_batches: int = 120, value_mult: int = 1) -> list[bytes]:
    """Keyed batches with many updates per key, tombstones, and an idempotent producer whose last
    batch is entirely superseded (Kafka keeps it as an empty batch). The last batch is
    `segment.ms` later than the others, so it rolls the active segment."""
    from odradek.wire.records import SimpleRecord, build_batch

    rng = random.Random(5)
    out: list[bytes] = []
    seq = 0
    for i in range(n_batches):
        recs = []
        for j in range(1 + i % 6):
            k = rng.randrange(30 if i % 10 == 3 else 40)
            value = None if (i * 7 + j) % 23 == 0 else f"v{i}-{j}-".encode() * (1 + rng.randrange(5)) * value_mult
            headers = [("h", b"%d" % j)] if j % 3 == 0 else []
            recs.append(SimpleRecord(value, f"key-{k}".encode(), headers, now + i * 10 + j))
        if i % 10 == 3:
            out.append(build_batch(recs, producer_id=777, producer_epoch=0, base_sequence=seq))
            seq += len(recs)
        else:
            out.append(build_batch(recs))
    # supersede every key of the idempotent producer's batches (0-29), delete keys 30-34
    out.append(build_batch([SimpleRecord(b"final" if k < 30 else None, f"key-{k}".encode(), (), now + 5000 + k)
                            for k in range(35)]))
    out.append(build_batch([SimpleRecord(b"roll", b"roll", (), now + 700_000)]))
    return out


def _mask_horizon_batches(data: bytes) -> tuple[bytes, list[tuple]]:
    """Blank baseTimestamp and CRC of batches with a delete horizon (the brokers' clocks differ)
    and return their decoded records (offset, timestamp, key, value, headers) to compare instead."""
    from odradek.wire.records import iter_batches

    out = bytearray(data)
    decoded: list[tuple] = []
    for batch in iter_batches(data):
        h = batch.header()
        if h.attributes & 0x40:
            pos = batch.position
            out[pos + 17:pos + 21] = bytes(4)
            out[pos + 27:pos + 35] = bytes(8)
            # record timestamp deltas are relative to the horizon: blank the records, compare decoded
            out[pos + 61:pos + h.batch_length + 12] = bytes(h.batch_length + 12 - 61)
            decoded += [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]
    return bytes(out), decoded


def _cleaned_files(broker, topic: str) -> dict[str, object]:
    d = Path(broker.log_dirs[0]) / f"{topic}-0"
    out: dict[str, object] = {}
    for f in sorted(d.iterdir()):
        if f.name == "partition.metadata":
            continue
        data = f.read_bytes()
        out[f.name] = _mask_horizon_batches(data) if f.suffix == ".log" else data
    lines = (Path(broker.log_dirs[0]) / "cleaner-offset-checkpoint").read_text().splitlines()
    out["cleaner-offset-checkpoint"] = [line for line in lines if line.startswith(topic)]
    return out


def _describe_difference(theirs: object, ours: object) -> str:
    if isinstance(theirs, bytes) and isinstance(ours, bytes):
        first = next((i for i, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b),
                     min(len(theirs), len(ours)))
        return (f"kafka {len(theirs)} bytes, odradek {len(ours)} bytes, first difference at {first}: "
                f"kafka {theirs[first:first + 24].hex()} odradek {ours[first:first + 24].hex()}")
    return f"kafka {theirs!r:.300} odradek {ours!r:.300}"


def _checkpoint_line(broker, topic: str) -> str | None:
    path = Path(broker.log_dirs[0]) / "cleaner-offset-checkpoint"
    if not path.exists():
        return None
    return next((line for line in path.read_text().splitlines() if line.startswith(topic + " ")), None)


@pytest.mark.parametrize(("version", "n_batches", "value_mult", "segment_bytes", "index_interval"), [
    ("3.9.1", 120, 1, "3000", "600"),
    # Kafka 4 refuses segments below 1 MiB: more and larger records
    ("4.1.1", 1500, 40, "1048576", "4096"),
])
def test_cleaned_segments_match_kafka(kafka_broker_factory, odradek_broker_factory, version: str, n_batches: int,
                                      value_mult: int, segment_bytes: str, index_interval: str) -> None:
    from test_oracle_logdir import send_all

    overrides = {"num.partitions": "1", "auto.create.topics.enable": "false", "log.cleaner.backoff.ms": "200",
                 "log.segment.delete.delay.ms": "200"}
    kafka = kafka_broker_factory(version=version, overrides=overrides)
    # Odradek formats its cluster as 4.1; against 3.9 it is told to index cleaned segments like 3.x
    odradek = odradek_broker_factory(overrides={
        **overrides, "odradek.log.cleaner.index.per.batch": "true" if version.startswith("4") else "false"})
    topic = "cmp-oracle"
    # min.compaction.lag.ms holds the cleaner back while the batches go in, so both brokers clean
    # the same whole log in one round once it is lifted
    configs = {"cleanup.policy": "compact", "segment.bytes": segment_bytes, "segment.ms": "600000",
               "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000",
               "min.compaction.lag.ms": "3600000", "index.interval.bytes": index_interval}
    now = int(time.time() * 1000)
    batches = _oracle_batches(now, n_batches, value_mult)
    for b in (kafka, odradek):
        _create(b.bootstrap, topic, configs)
    assert send_all(kafka, [(topic, 0, x) for x in batches]) == send_all(odradek, [(topic, 0, x) for x in batches])
    for b in (kafka, odradek):
        _lift_compaction_lag(b.bootstrap, topic)
    for b in (kafka, odradek):
        _wait(lambda b=b: _checkpoint_line(b, topic) is not None, 90, f"{b.name} cleaned")
        _wait(lambda b=b: not [f for f in _partition_files(b, topic) if f.endswith((".deleted", ".cleaned", ".swap"))],
              30, f"{b.name} removed the old segments")
    for b in (kafka, odradek):
        b.stop()
    theirs = _cleaned_files(kafka, topic)
    ours = _cleaned_files(odradek, topic)
    assert sorted(ours) == sorted(theirs)
    different = [name for name in theirs if theirs[name] != ours[name]]
    assert different == [], [(n, _describe_difference(theirs[n], ours[n])) for n in different]
    # the comparison covered real work: records removed, horizons set, an empty batch kept for the
    # idempotent producer, both copied and rebuilt batches
    from odradek.wire.records import iter_batches

    headers = []
    for f in sorted((Path(odradek.log_dirs[0]) / f"{topic}-0").glob("*.log")):
        headers += [b.header() for b in iter_batches(f.read_bytes())]
    n_records = sum(h.record_count for h in headers)
    assert n_records < sum(1 + i % 6 for i in range(n_batches)) // 2
    assert any(h.attributes & 0x40 for h in headers), "tombstone batches with a delete horizon"
    assert any(h.record_count == 0 and h.producer_id == 777 for h in headers), "empty batch of the producer"
    assert any(h.record_count < h.last_offset_delta + 1 for h in headers), "rebuilt batches"
    assert len([n for n in ours if n.endswith(".log")]) >= 2


def test_compacted_consumer_offsets_reload_after_restart(odradek_broker_factory) -> None:
    """The cleaner also compacts __consumer_offsets; the group coordinator reloads the cleaned log
    (gaps, delete horizons) to the same committed offsets after a restart."""
    broker = odradek_broker_factory(overrides={
        **OVERRIDES, "offsets.topic.num.partitions": 1, "offsets.topic.segment.bytes": 2048,
        "log.cleaner.min.cleanable.ratio": "0.01"})
    bootstrap = broker.bootstrap
    topic = f"src-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, {})
    groups = [f"g{i}" for i in range(4)]
    consumers = {g: CKConsumer({"bootstrap.servers": bootstrap, "group.id": g, "enable.auto.commit": False})
                 for g in groups}
    for n in range(1, 121):
        for i, g in enumerate(groups):
            consumers[g].commit(offsets=[CKTopicPartition(topic, 0, n * 10 + i)], asynchronous=False)
    for c in consumers.values():
        c.close()
    _wait(lambda: _checkpoint_line(broker, "__consumer_offsets") is not None, 60, "__consumer_offsets cleaned")
    offsets_dir = Path(broker.log_dirs[0]) / "__consumer_offsets-0"
    _wait(lambda: not any(p.name.endswith(".deleted") for p in offsets_dir.iterdir()), 30, "old segments gone")
    cleaned_size = sum(p.stat().st_size for p in offsets_dir.glob("*.log"))
    assert cleaned_size < 120 * 4 * 100 / 2, cleaned_size  # far less than the commits written
    broker.restart()
    for i, g in enumerate(groups):
        c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": g, "enable.auto.commit": False})
        (tp,) = c.committed([CKTopicPartition(topic, 0)], timeout=30)
        c.close()
        assert tp.offset == 1200 + i, (g, tp.offset)
