"""The cleaner's batch-level paths (keys mapped straight from batch bytes, batches decided by the
offsets the map holds) write exactly the files the per-record path writes, on logs that mix
everything the cleaner distinguishes: short and digested keys, keyless records, tombstones,
compressed batches, multi-byte varints, idempotent and transactional producers, LogAppendTime,
maps too small for one round, delete horizons that pass."""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import pytest

from odradek.logstore import LogConfig, LogManager, PartitionLog
from odradek.logstore.cleaner import CleanerConfig, LogCleaner, rebuild_located
from odradek.logstore.cleaner_scan import kept_records, map_records
from odradek.logstore.offset_map import OffsetMap
from odradek.wire.records import (
    BATCH_OVERHEAD,
    CompressionType,
    ControlRecordType,
    CorruptRecordError,
    RecordBatch,
    SimpleRecord,
    build_batch,
    build_end_txn_marker_batch,
    iter_batches,
    parse_batch_header,
)

TOPIC_ID = bytes(range(1, 17))
T0 = 1_700_000_000_000
PROPS = {
    "cleanup.policy": "compact",
    "segment.bytes": "6000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "5000",
    "file.delete.delay.ms": "0",
    "index.interval.bytes": "700",
}


class Writer:
    """Appends a seeded random mix of batches to one log; the same seed writes the same bytes."""

    def __init__(self, lg: PartitionLog, seed: int) -> None:
        self.lg = lg
        self.rng = random.Random(seed)
        self.seq = {7: 0, 8: 0}
        self.now = T0

    def key(self) -> bytes | None:
        rng = self.rng
        k = rng.randrange(30)
        if rng.random() < 0.02:
            return None
        # short keys are their own map key, long ones (>= 16 bytes) go through MD5
        return (b"k%d" % k) if k % 3 else (b"a-long-key-that-is-digested-%04d" % k)

    def records(self, n: int) -> list[SimpleRecord]:
        rng = self.rng
        out = []
        for _ in range(n):
            self.now += rng.choice((1, 1, 3, 200, 70_000))  # one- and multi-byte timestamp deltas
            value = None if rng.random() < 0.12 else bytes(rng.randrange(256) for _ in range(rng.choice((3, 90))))
            headers = (("h", b"x"),) if rng.random() < 0.2 else ()
            out.append(SimpleRecord(value, self.key(), headers, self.now))
        return out

    def append(self, records: list[SimpleRecord], **kw: object) -> None:
        lg = self.lg
        keyless = any(r.key is None for r in records)
        if keyless:
            # compacted topics refuse keyless records today, but a topic compacted later holds
            # them: written as a delete topic, they reach the cleaner
            lg.config = dataclasses.replace(lg.config, cleanup_policy="delete")
        lg.append_as_leader(bytearray(build_batch(records, **kw)), 0, self.now)  # type: ignore[arg-type]
        if keyless:
            lg.config = dataclasses.replace(lg.config, cleanup_policy="compact")

    def batch(self) -> None:
        rng, lg = self.rng, self.lg
        n = rng.randrange(1, 12)
        codec = rng.choice((CompressionType.NONE, CompressionType.NONE, CompressionType.LZ4, CompressionType.GZIP))
        kind = rng.random()
        if kind < 0.3:
            pid = 7 if kind < 0.15 else 8
            self.append(self.records(n), compression=codec, producer_id=pid, producer_epoch=0,
                        base_sequence=self.seq[pid], is_transactional=pid == 8)
            self.seq[pid] += n
            if pid == 8:
                marker = ControlRecordType.ABORT if rng.random() < 0.4 else ControlRecordType.COMMIT
                lg.append_as_coordinator(bytearray(build_end_txn_marker_batch(
                    marker, producer_id=pid, producer_epoch=0, coordinator_epoch=1, timestamp=self.now)),
                    0, self.now)
        elif kind < 0.55:
            self.append(self.uniform_records(n), compression=codec)
        else:
            self.append(self.records(n), compression=codec)

    def uniform_records(self, n: int) -> list[SimpleRecord]:
        """A batch of records of one length (what the strided paths read): one key length,
        one value size (or all tombstones), timestamps a few ms apart, not always in order."""
        rng = self.rng
        long_keys = rng.random() < 0.3
        value = None if rng.random() < 0.1 else bytes(rng.randrange(256) for _ in range(rng.choice((5, 70))))
        out = []
        for _ in range(n):
            self.now += rng.choice((0, 1, 2, 30))
            k = rng.randrange(30)
            key = (b"a-long-key-that-is-digested-%04d" % k) if long_keys else b"u%03d" % k
            # now and then a timestamp before the batch's first one: a negative delta
            out.append(SimpleRecord(value, key, (), self.now - rng.choice((0, 0, 0, 40)) + 40 * (not out)))
        return out

    def write(self, batches: int) -> None:
        for _ in range(batches):
            self.batch()
        self.lg.roll()


def snapshot(path: Path) -> dict[str, bytes]:
    files = {}
    for p in sorted(path.rglob("*")):
        if p.is_file() and p.name != ".lock":
            files[str(p.relative_to(path))] = p.read_bytes()
    return files


def run(path: Path, seed: int, batch_paths: bool, props: dict[str, str], dedupe: int,
        worker: bool = False) -> list[dict[str, bytes]]:
    cfg = LogConfig.from_props({**PROPS, **props})
    mgr = LogManager([path], LogConfig(), topic_config=lambda _t: cfg)
    mgr.startup()
    lg = mgr.create_log("t", 0, TOPIC_ID, cfg)
    lg.become_leader(0)
    cleaner = LogCleaner(mgr, CleanerConfig(dedupe_buffer_size=dedupe))
    cleaner.cleaner.batch_paths = batch_paths
    if worker:
        cleaner.use_worker_process()
    writer = Writer(lg, seed)
    states = []
    for rnd in range(4):
        writer.write(60)
        if rnd == 2:
            # a lost checkpoint: the next round takes cleaned data (empty producer batches,
            # rebuilt batches) for dirty again
            (path / "cleaner-offset-checkpoint").unlink()
        # several cleanings per round: a small map covers part of the dirty section each time,
        # and later ones pass the delete horizons of earlier ones
        for i in range(3):
            cleaner.clean_filthiest(writer.now + 1 + i * 3000 + rnd)
            states.append(snapshot(path))
    if worker:
        # the cleanings ran in the worker process, not here
        assert cleaner.worker is not None and cleaner.worker.last_pid not in (None, os.getpid())
        cleaner.close()
    mgr.shutdown()
    return states


def assert_same_states(fast: list[dict[str, bytes]], slow: list[dict[str, bytes]]) -> None:
    assert len(fast) == len(slow)
    for i, (a, b) in enumerate(zip(fast, slow, strict=True)):
        assert sorted(a) == sorted(b), f"cleaning {i}: different files"
        different = [name for name in a if a[name] != b[name]]
        assert different == [], f"cleaning {i}: {different}"
    # the comparison covered cleanings that changed something
    assert len({tuple(sorted(s.items())) for s in fast}) >= 4


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("props", "dedupe"), [
    ({}, 128 * 1024 * 1024),
    ({}, 20 * 24),  # 18 of the 30 keys a round: maps fill up mid-batch, rounds start mid-batch
    ({"message.timestamp.type": "LogAppendTime"}, 128 * 1024 * 1024),
])
def test_batch_paths_write_the_files_of_the_per_record_path(tmp_path: Path, seed: int, props: dict[str, str],
                                                            dedupe: int) -> None:
    fast = run(tmp_path / "fast", seed, True, props, dedupe)
    slow = run(tmp_path / "slow", seed, False, props, dedupe)
    assert_same_states(fast, slow)


@pytest.mark.parametrize(("props", "dedupe"), [
    ({}, 128 * 1024 * 1024),
    ({}, 20 * 24),
])
def test_worker_process_writes_the_files_of_in_thread_cleaning(tmp_path: Path, props: dict[str, str],
                                                               dedupe: int) -> None:
    """The broker's cleaner runs in a worker process (`cleaner_worker`): same files, every cleaning."""
    remote = run(tmp_path / "worker", 4, True, props, dedupe, worker=True)
    local = run(tmp_path / "thread", 4, True, props, dedupe)
    assert_same_states(remote, local)


def _records_block(records: list[SimpleRecord]) -> tuple[bytes, int]:
    raw = build_batch(records, base_offset=100)
    return raw[BATCH_OVERHEAD:], len(records)


def test_map_records_puts_digested_keys_and_tombstones() -> None:
    block, n = _records_block([SimpleRecord(b"v", b"short", (), T0), SimpleRecord(None, b"x" * 20, (), T0 + 300),
                               SimpleRecord(b"v", None, (), T0 + 1), SimpleRecord(b"w", b"short", (), T0 + 2)])
    m = OffsetMap(24 * 100)
    tombs: list[int] = []
    last = map_records(block, 0, len(block), n, 100, m.entries, tombs)
    assert last == 103 and tombs == [101]
    # staged under the digest of the long key and the short key itself, until a flush
    assert m.entries == {OffsetMap._digest(b"x" * 20): 101, b"short": 103}
    assert (m.get(b"short"), m.get(b"x" * 20), m.size) == (103, 101, 2)
    assert m.entries == {}
    m.tombstones.extend(tombs)
    m.latest_offset = last
    assert m.latest_marks(100) == bytearray([0, 2, 0, 1])


def test_kept_records_locates_the_kept_ones() -> None:
    recs = [SimpleRecord(b"a", b"k1", (), T0), SimpleRecord(b"b", b"k2", (), T0 + 70_000),
            SimpleRecord(b"c", b"k3", (), T0 + 5)]
    block, n = _records_block(recs)
    got = kept_records(block, n, 100, T0, None, {101, 102})
    assert [(o, ts) for o, ts, _t, _e in got] == [(101, T0 + 70_000), (102, T0 + 5)]
    assert [block[t:e][1:3] for _o, _ts, t, e in got] == [b"k2", b"k3"]
    assert [ts for _o, ts, _t, _e in kept_records(block, n, 100, T0, 42, {100})] == [42]


def test_walkers_refuse_truncated_and_overlong_blocks() -> None:
    block, n = _records_block([SimpleRecord(b"a", b"k1", (), T0), SimpleRecord(b"b", b"k2", (), T0)])
    for bad, count in ((block[:-3], n), (block + b"\0", n), (block, n + 1)):
        with pytest.raises(CorruptRecordError):
            map_records(bad, 0, len(bad), count, 0, {}, [])
        with pytest.raises(CorruptRecordError):
            kept_records(bad, count, 0, T0, None, set())


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_rebuilt_batch_is_what_a_fresh_build_of_the_kept_records_gives(codec: CompressionType) -> None:
    """One-byte deltas (negative ones too), multi-byte ones and long records: the rebuilt batch
    is the batch MemoryRecordsBuilder would write for the kept records at their offsets."""
    recs = [SimpleRecord(b"a", b"k0", (), T0 + 10), SimpleRecord(b"b" * 200, b"k1", (("h", b"v"),), T0 + 3),
            SimpleRecord(b"c", b"k2", (), T0 + 70_000), SimpleRecord(b"d" * 9000, b"k3", (), T0 - 5),
            SimpleRecord(None, b"k4", (), T0 + 11)]
    raw = build_batch(recs, base_offset=500, compression=codec)
    h = parse_batch_header(raw)
    block = RecordBatch(raw).inflated_block()
    for keep in ({0, 1, 3, 4}, {1, 4}, {0, 2, 4}):
        located = kept_records(block, len(recs), 500, h.base_timestamp, None, {500 + i for i in keep})
        expected = build_batch([recs[i] for i in sorted(keep)], base_offset=500, compression=codec,
                               offset_deltas=sorted(keep))
        assert rebuild_located(h, block, located, None) == expected


def _empty_batch_then_lost_checkpoint(path: Path, batch_paths: bool) -> dict[str, bytes]:
    cfg = LogConfig.from_props(PROPS)
    mgr = LogManager([path], LogConfig(), topic_config=lambda _t: cfg)
    mgr.startup()
    lg = mgr.create_log("t", 0, TOPIC_ID, cfg)
    lg.become_leader(0)
    cleaner = LogCleaner(mgr, CleanerConfig())
    cleaner.cleaner.batch_paths = batch_paths

    def idempotent(key: bytes, seq: int) -> None:
        lg.append_as_leader(bytearray(build_batch([SimpleRecord(b"v", key, (), T0 + seq)], producer_id=7,
                                                  producer_epoch=0, base_sequence=seq)), 0, T0)

    idempotent(b"a", 0)
    lg.append_as_leader(bytearray(build_batch([SimpleRecord(b"w", b"a", (), T0 + 1)])), 0, T0)
    lg.roll()
    cleaner.clean_filthiest(T0 + 10)  # producer 7's only batch stays as an empty header
    idempotent(b"b", 1)
    lg.append_as_leader(bytearray(build_batch([SimpleRecord(b"x", b"c", (), T0 + 2)])), 0, T0)
    lg.roll()
    (path / "cleaner-offset-checkpoint").unlink()  # the cleaned data counts as dirty again
    cleaner.clean_filthiest(T0 + 20)
    mgr.shutdown()
    return snapshot(path)


def test_an_empty_batch_read_as_dirty_goes_once_its_producer_moved_on(tmp_path: Path) -> None:
    fast = _empty_batch_then_lost_checkpoint(tmp_path / "fast", True)
    slow = _empty_batch_then_lost_checkpoint(tmp_path / "slow", False)
    assert fast == slow
    logs = b"".join(v for k, v in sorted(fast.items()) if k.endswith(".log"))
    headers = [b.header() for b in iter_batches(logs)]
    assert not [h for h in headers if h.record_count == 0]  # no longer producer 7's last batch
