"""Cleaned partitions are byte-identical to Kafka 4.4.0's (issue #28, must show 3), for
`test_compaction.py`'s oracle log and for the shapes of the compaction benchmark's rows: 100 B and
1 KiB values, 10 updates per key and all-unique keys, tombstones, lz4 batches. One Kafka 4.4.0 and
one Odradek (which cleans in its worker process) get the same batches in one topic per shape; once
both have cleaned, every file of every partition must match (delete-horizon batches compared
decoded, as the brokers' clocks differ)."""

from __future__ import annotations

import os
import random
import time

from test_compaction import (
    _cleaned_files,
    _create,
    _describe_difference,
    _lift_compaction_lag,
    _oracle_batches,
    _partition_files,
    _wait,
)

from odradek.wire.records import CompressionType, SimpleRecord, build_batch, iter_batches

KAFKA = "4.4.0"
ROLL_MS = 700_000  # past segment.ms: the last batch rolls the active segment


def _shape(now: int, records: int, keys: int, value_bytes: int, per_batch: int = 10,
           compression: CompressionType = CompressionType.NONE, tombstones: float = 0.0) -> list[bytes]:
    """Producer-style batches as `benchmarks/bench_cleaner.py` writes them (fixed-size records,
    one value for all), then one batch that rolls the segment."""
    rng = random.Random(records + keys + value_bytes)
    value = os.urandom(value_bytes)
    out = []
    for start in range(0, records, per_batch):
        recs = [SimpleRecord(None if tombstones and rng.random() < tombstones else value,
                             b"key-%08d" % rng.randrange(keys), (), now + i)
                for i in range(start, min(start + per_batch, records))]
        out.append(build_batch(recs, compression=compression))
    out.append(build_batch([SimpleRecord(b"roll", b"roll", (), now + ROLL_MS)]))
    return out


def test_cleaned_partitions_match_kafka_44(kafka_broker_factory, odradek_broker_factory) -> None:
    from test_oracle_logdir import send_all

    overrides = {"num.partitions": "1", "auto.create.topics.enable": "false", "log.cleaner.backoff.ms": "200",
                 "log.segment.delete.delay.ms": "200"}
    kafka = kafka_broker_factory(version=KAFKA, overrides=overrides)
    odradek = odradek_broker_factory(overrides={**overrides, "odradek.log.cleaner.index.per.batch": "true"})
    now = int(time.time() * 1000)
    topics = {
        "oracle": _oracle_batches(now, 1500, 40),
        "b100-updates": _shape(now, 11_000, 1_100, 100),
        "b100-unique": _shape(now, 11_000, 110_000, 100),
        "kib-updates": _shape(now, 1_500, 150, 1024),
        "b100-tombstones": _shape(now, 11_000, 1_100, 100, tombstones=0.1),
        "b100-lz4": _shape(now, 11_000, 1_100, 100, per_batch=50, compression=CompressionType.LZ4),
    }
    configs = {"cleanup.policy": "compact", "segment.bytes": "1048576", "segment.ms": "600000",
               "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400000",
               "min.compaction.lag.ms": "3600000", "index.interval.bytes": "4096"}
    for b in (kafka, odradek):
        for topic in topics:
            _create(b.bootstrap, topic, configs)
    for topic, batches in topics.items():
        assert send_all(kafka, [(topic, 0, x) for x in batches]) == send_all(odradek, [(topic, 0, x) for x in batches])
    for b in (kafka, odradek):
        for topic in topics:
            _lift_compaction_lag(b.bootstrap, topic)
    for b in (kafka, odradek):
        for topic in topics:
            _wait(lambda b=b, t=topic: any(line.startswith(t + " ") for line in
                                           (b.log_dirs[0] / "cleaner-offset-checkpoint").read_text().splitlines())
                  if (b.log_dirs[0] / "cleaner-offset-checkpoint").exists() else False,
                  120, f"{b.name} cleaned {topic}")
            _wait(lambda b=b, t=topic: not [f for f in _partition_files(b, t)
                                            if f.endswith((".deleted", ".cleaned", ".swap"))],
                  30, f"{b.name} removed the old segments of {topic}")
    for b in (kafka, odradek):
        b.stop()
    failures = {}
    for topic in topics:
        theirs = _cleaned_files(kafka, topic)
        ours = _cleaned_files(odradek, topic)
        if sorted(ours) != sorted(theirs):
            failures[topic] = (sorted(theirs), sorted(ours))
            continue
        different = [name for name in theirs if theirs[name] != ours[name]]
        if different:
            failures[topic] = [(n, _describe_difference(theirs[n], ours[n])) for n in different]
        # the comparison covered real work: records removed (all-unique keys: the few repeats)
        kept = sum(b.header().record_count for f in sorted((odradek.log_dirs[0] / f"{topic}-0").glob("*.log"))
                   for b in iter_batches(f.read_bytes()))
        sent = sum(b.header().record_count for x in topics[topic] for b in iter_batches(x))
        assert kept < sent, topic
    assert failures == {}, failures
