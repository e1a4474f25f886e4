"""PartitionLog / LogManager behaviour: append, read, offsets, rolling, preallocation, errors."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from logstore_testutil import make_batch

from odradek.logstore import (
    CorruptRecordError,
    InvalidRecordError,
    LogConfig,
    LogManager,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
)
from odradek.logstore.errors import InvalidTimestampError, LogDirLockedError
from odradek.wire.records import RecordBatch, iter_batches

TOPIC_ID = bytes(range(1, 17))


def new_log(tmp_path: Path, **props) -> PartitionLog:
    lg = PartitionLog.open(tmp_path / "t-0", LogConfig.from_props(props), topic_id=TOPIC_ID)
    lg.become_leader(0)
    return lg


def read_all(lg: PartitionLog, offset: int, max_bytes: int = 1 << 30) -> bytes:
    fd = lg.read(offset, max_bytes)
    return b"".join(os.pread(s.file.fileno(), s.size, s.position) for s in fd.slices)


def test_append_assigns_offsets_and_patches_in_place(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    b = make_batch(3)
    crc_before = bytes(b[17:21])
    info = lg.append_as_leader(b, leader_epoch=5, now_ms=0)
    assert (info.first_offset, info.last_offset, info.log_append_time) == (0, 2, -1)
    info2 = lg.append_as_leader(make_batch(4), leader_epoch=5, now_ms=0)
    assert (info2.first_offset, info2.last_offset) == (3, 6)
    assert lg.log_end_offset == lg.high_watermark == 7
    # header patched in place: base offset 0, PLE 5, CRC untouched (correct client max timestamp)
    assert struct.unpack(">qii", b[:16]) == (0, len(b) - 12, 5) and bytes(b[17:21]) == crc_before
    stored = list(iter_batches(read_all(lg, 0)))
    assert [x.base_offset for x in stored] == [0, 3]
    for x in stored:
        x.ensure_valid()
    # epoch 5 starting at offset 0 replaces epoch 0 that also started there (Kafka assign rule)
    assert (lg.dir / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n5 0\n"
    assert (lg.dir / "partition.metadata").read_bytes() == b"version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA"


def test_read_mid_batch_returns_whole_batch_and_respects_max_bytes(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    sizes = []
    for _ in range(5):
        b = make_batch(10)
        sizes.append(len(b))
        lg.append_as_leader(b, 0, 0)
    fd = lg.read(15, max_bytes=1)  # offset 15 is inside the second batch (10..19)
    assert fd.first_batch_offset == 10 and fd.slices[0].position == sizes[0]
    assert fd.slices[0].size == sizes[1] and fd.first_entry_incomplete is False
    fd = lg.read(15, max_bytes=1, min_one_message=False)
    assert fd.size == 1 and fd.first_entry_incomplete
    assert lg.read(50, 1000).slices == []  # at the LEO: empty, not an error
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(51, 1000)
    # max_offset (e.g. a high watermark) stops before the batch holding it
    fd = lg.read(0, 1 << 20, max_offset=20)
    assert fd.size == sizes[0] + sizes[1]


def test_active_indexes_preallocated_and_trimmed_on_close(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    for _ in range(60):
        lg.append_as_leader(make_batch(2, value_size=200), 0, 0)
    seg = lg.active_segment
    assert seg.offset_index_path.stat().st_size == 10485760
    assert seg.time_index_path.stat().st_size == 10485756
    entries = seg.offset_index.entries
    assert entries > 0
    lg.close()
    assert seg.offset_index_path.stat().st_size == entries * 8
    assert seg.time_index_path.stat().st_size % 12 == 0 and seg.time_index_path.stat().st_size > 0
    assert (lg.dir / "00000000000000000120.snapshot").read_bytes() == bytes.fromhex("000148674bc700000000")
    # reopened after a clean close: active indexes grow back to 10 MiB, entries are kept
    lg2 = PartitionLog.open(lg.dir, LogConfig())
    assert lg2.active_segment.offset_index_path.stat().st_size == 10485760
    assert lg2.active_segment.offset_index.entries == entries
    assert lg2.log_end_offset == 120
    lg2.close()


def test_roll_by_size_time_and_snapshots(tmp_path: Path) -> None:
    lg = new_log(tmp_path, **{"segment.bytes": "2000", "segment.ms": "1000"})
    b = make_batch(2, value_size=300)
    size = len(b)
    lg.append_as_leader(b, 0, 0)
    lg.append_as_leader(make_batch(2, value_size=300), 0, 0)
    lg.append_as_leader(make_batch(2, value_size=300), 0, 0)  # 3 * ~680 > 2000 -> roll before this one
    assert size * 3 > 2000
    assert [s.base_offset for s in lg.segments] == [0, 4]
    assert (lg.dir / "00000000000000000004.snapshot").exists()
    # rolled segment's indexes are trimmed (0 entries -> 0 bytes, one final time-index entry)
    assert lg.segments[0].offset_index_path.stat().st_size == 0
    assert lg.segments[0].time_index_path.stat().st_size == 12
    # time roll uses record timestamps: 1001 ms after the segment's first batch
    lg.append_as_leader(make_batch(1, ts=1_700_000_000_000 + 1002), 0, 0)
    assert [s.base_offset for s in lg.segments] == [0, 4, 6]
    lg.close()


def test_log_append_time_sets_attribute_and_crc(tmp_path: Path) -> None:
    lg = new_log(tmp_path, **{"message.timestamp.type": "LogAppendTime"})
    b = make_batch(3)
    info = lg.append_as_leader(b, 0, now_ms=1_800_000_000_000)
    rb = RecordBatch(b)
    rb.ensure_valid()
    assert info.log_append_time == 1_800_000_000_000 == rb.max_timestamp
    assert rb.attributes & 0x08
    assert rb.base_timestamp == 1_700_000_000_000  # never touched


def test_wrong_client_max_timestamp_is_fixed(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    b = make_batch(3)
    struct.pack_into(">q", b, 35, 5)
    rb = RecordBatch(b)
    struct.pack_into(">I", b, 17, rb.compute_crc())  # valid CRC over a wrong max timestamp
    lg.append_as_leader(b, 0, 0)
    assert RecordBatch(b).max_timestamp == 1_700_000_000_002
    RecordBatch(b).ensure_valid()


def test_validation_errors(tmp_path: Path) -> None:
    lg = new_log(tmp_path, **{"max.message.bytes": "2000", "segment.bytes": "1500"})
    bad_crc = make_batch(2)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader(bad_crc, 0, 0)
    bad_delta = make_batch(2)
    struct.pack_into(">i", bad_delta, 23, 5)
    struct.pack_into(">I", bad_delta, 17, RecordBatch(bad_delta).compute_crc())
    with pytest.raises(InvalidRecordError):
        lg.append_as_leader(bad_delta, 0, 0)
    with pytest.raises(MessageTooLargeError):
        lg.append_as_leader(make_batch(3, value_size=1000), 0, 0)
    with pytest.raises(RecordBatchTooLargeError):
        lg.append_as_leader(make_batch(2, value_size=800), 0, 0)
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader(bytearray(b"\x00" * 30), 0, 0)
    assert lg.log_end_offset == 0 and lg.active_segment.size == 0


def test_offsets_by_timestamp(tmp_path: Path) -> None:
    lg = new_log(tmp_path, **{"index.interval.bytes": "100"})
    for i in range(20):
        lg.append_as_leader(make_batch(5, ts=1000 + 10 * i * 5), 0, 0)  # record ts 1000 + 10*i*5 + j
    assert lg.fetch_offset_by_timestamp(-2).offset == 0
    assert lg.fetch_offset_by_timestamp(-1).offset == 100
    mx = lg.fetch_offset_by_timestamp(-3)
    assert (mx.timestamp, mx.offset) == (1000 + 10 * 19 * 5 + 4, 99)
    hit = lg.fetch_offset_by_timestamp(1000 + 10 * 7 * 5 + 2)
    assert (hit.timestamp, hit.offset) == (1000 + 10 * 7 * 5 + 2, 37)
    assert lg.fetch_offset_by_timestamp(10**15) is None


def test_delete_records_before_moves_log_start(tmp_path: Path) -> None:
    lg = new_log(tmp_path, **{"segment.bytes": "1000"})
    for _ in range(6):
        lg.append_as_leader(make_batch(2, value_size=300), 0, 0)
    bases = [s.base_offset for s in lg.segments]
    assert len(bases) > 2
    lg.delete_records_before(bases[2] + 1)
    assert lg.log_start_offset == bases[2] + 1
    assert lg.segments[0].base_offset == bases[2]
    assert not (lg.dir / f"{bases[0]:020d}.log").exists()
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(bases[2], 100)


def test_log_manager_lifecycle(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "a", tmp_path / "b"
    mgr = LogManager([d1, d2], LogConfig())
    mgr.startup()
    with pytest.raises(LogDirLockedError):
        LogManager([d1], LogConfig()).startup()
    a = mgr.create_log("x", 0, TOPIC_ID)
    b = mgr.create_log("x", 1, TOPIC_ID, LogConfig.from_props({"segment.bytes": "4096"}))
    assert {a.dir.parent, b.dir.parent} == {d1, d2}
    a.become_leader(0)
    a.append_as_leader(make_batch(3), 0, 0)
    mgr.checkpoint_recovery_points()
    mgr.checkpoint_high_watermarks()
    hw_dir = a.dir.parent
    assert (hw_dir / "replication-offset-checkpoint").read_bytes() == b"0\n1\nx 0 3\n"
    moved = mgr.delete_log("x", 1, delay_ms=0)
    assert moved is not None and not moved.exists() and mgr.get_log("x", 1) is None
    mgr.shutdown(broker_epoch=42)
    assert (hw_dir / ".kafka_cleanshutdown").read_bytes() == b'{"version":0,"brokerEpoch":42}'
    assert not (hw_dir / ".lock").exists()
    assert (hw_dir / "recovery-point-offset-checkpoint").read_bytes() == b"0\n1\nx 0 3\n"
    mgr2 = LogManager([d1, d2], LogConfig())
    mgr2.startup()
    assert not (hw_dir / ".kafka_cleanshutdown").exists()
    assert mgr2.get_log("x", 0).log_end_offset == 3 and mgr2.get_log("x", 0).recovery_point == 3
    mgr2.shutdown()


def test_lock_conflicts_with_another_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    mgr = LogManager([tmp_path], LogConfig())
    mgr.startup()
    code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
            "try:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n    sys.exit(3)\n")
    assert subprocess.run([sys.executable, "-c", code, str(tmp_path / ".lock")]).returncode == 3
    mgr.shutdown()
    assert not (tmp_path / ".lock").exists()


def test_transactions_lso_and_aborted_index(tmp_path: Path) -> None:
    from odradek.wire.records import ControlRecordType, build_end_txn_marker_batch

    lg = new_log(tmp_path)
    txn = {"producer_id": 7, "producer_epoch": 0, "is_transactional": True}
    lg.append_as_leader(make_batch(3, base_sequence=0, **txn), 0, 0)
    assert lg.last_stable_offset == 0
    lg.append_as_coordinator(bytearray(build_end_txn_marker_batch(
        ControlRecordType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=4, timestamp=5)), 0, 0)
    assert lg.last_stable_offset == lg.high_watermark == 4
    assert [tuple(t[:4]) for t in lg.aborted_transactions(0, 4)] == [(7, 0, 3, 4)]
    lg.close()
    # the snapshot at the LEO holds the producer with its coordinator epoch and no open txn
    from odradek.logstore.producer_state import read_snapshot

    (entry,) = read_snapshot(lg.dir / "00000000000000000004.snapshot")
    assert (entry.producer_id, entry.coordinator_epoch, entry.current_txn_first_offset) == (7, 4, None)
    assert entry.batch_metadata[-1].last_offset == 2
    # and recovery rebuilds the same .txnindex from the log
    txn_path = lg.dir / "00000000000000000000.txnindex"
    want = txn_path.read_bytes()
    txn_path.unlink()
    (lg.dir / "00000000000000000000.index").unlink()
    lg2 = PartitionLog.open(lg.dir, LogConfig())
    assert txn_path.read_bytes() == want
    lg2.close()


def test_retention_time_and_size(tmp_path: Path) -> None:
    lg = new_log(tmp_path, **{"segment.bytes": "1000", "retention.ms": "1000", "file.delete.delay.ms": "0"})
    for i in range(6):
        lg.append_as_leader(make_batch(2, value_size=300, ts=10_000 + i * 1000), 0, 0)
    n_before = len(lg.segments)
    # at now=13_500 the segments whose largest timestamp is < 12_500 are expired
    deleted = lg.delete_old_segments(now_ms=13_500)
    assert deleted > 0 and len(lg.segments) == n_before - deleted
    assert lg.log_start_offset == lg.segments[0].base_offset
    assert all(s.largest_timestamp >= 12_500 for s in lg.segments[:-1])
    assert not list(lg.dir.glob("*.deleted"))
    # everything expired: an empty segment is rolled at the LEO first (Kafka's 4.1 fixture shape)
    lg.delete_old_segments(now_ms=10**12)
    assert [s.base_offset for s in lg.segments] == [12] and lg.log_start_offset == 12
    lg.close()
    names = sorted(p.name for p in lg.dir.iterdir() if p.name[0] == "0")
    assert names == ["00000000000000000012.index", "00000000000000000012.log", "00000000000000000012.snapshot",
                     "00000000000000000012.timeindex"]
    assert all((lg.dir / n).stat().st_size == (10 if n.endswith("snapshot") else 0) for n in names)
    size_log = new_log(tmp_path / "s", **{"segment.bytes": "1000", "retention.bytes": "1500"})
    for _ in range(6):
        size_log.append_as_leader(make_batch(2, value_size=300), 0, 0)
    size_log.delete_old_segments(now_ms=0)
    assert size_log.size_in_bytes() - size_log.active_segment.size <= 1500
    assert list(size_log.dir.glob("*.log.deleted"))  # kept for file.delete.delay.ms
    size_log.close()
    assert not list(size_log.dir.glob("*.deleted"))


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(make_batch(3), 0, 0)
    lg.become_leader(2)
    lg.append_as_leader(make_batch(3), 2, 0)
    assert lg.end_offset_for_epoch(0) == (0, 3)
    assert lg.end_offset_for_epoch(1) == (0, 3)
    assert lg.end_offset_for_epoch(2) == (2, 6)
    assert lg.end_offset_for_epoch(3) == (-1, -1)


def test_roll_when_index_full_and_jitter(tmp_path: Path) -> None:
    # 80-byte .index = 10 slots; 80 -> 72-byte .timeindex = 6 slots, full at 5 (one kept for the roll entry)
    lg = new_log(tmp_path, **{"segment.index.bytes": "80", "index.interval.bytes": "1"})
    for i in range(20):
        lg.append_as_leader(make_batch(1, value_size=10, ts=1000 + i), 0, 0)
    assert len(lg.segments) > 1
    for seg in lg.segments[:-1]:
        assert seg.time_index.entries <= 6 and seg.offset_index.entries <= 10
    assert lg.active_segment.offset_index_path.stat().st_size == 80
    assert lg.active_segment.time_index_path.stat().st_size == 72
    lg.close()
    j = PartitionLog.open(tmp_path / "j-0", LogConfig.from_props({"segment.ms": "1000", "segment.jitter.ms": "500"}))
    assert 0 <= j.active_segment.roll_jitter_ms < 500
    j.close()


def test_read_every_offset_matches_the_stored_batches(tmp_path: Path) -> None:
    import random

    rnd = random.Random(7)
    lg = new_log(tmp_path, **{"segment.bytes": "5000", "index.interval.bytes": "500"})
    stored = []  # (base, last, bytes)
    for _ in range(60):
        b = make_batch(rnd.randint(1, 6), value_size=rnd.randint(0, 400))
        info = lg.append_as_leader(b, 0, 0)
        stored.append((info.first_offset, info.last_offset, bytes(b)))
    assert len(lg.segments) > 3
    for offset in range(lg.log_end_offset):
        max_bytes = rnd.choice([1, 300, 2000, 100_000])
        fd = lg.read(offset, max_bytes)
        data = b"".join(os.pread(s.file.fileno(), s.size, s.position) for s in fd.slices)
        k = next(i for i, (base, last, _) in enumerate(stored) if base <= offset <= last)
        assert fd.first_batch_offset == stored[k][0]
        # whole batches of one segment, starting with the one holding the offset
        expect = b""
        seg = lg.segments[max(i for i, s in enumerate(lg.segments) if s.base_offset <= stored[k][0])]
        nxt_base = next((s.base_offset for s in lg.segments if s.base_offset > seg.base_offset), None)
        for base, _last, raw in stored[k:]:
            if nxt_base is not None and base >= nxt_base:
                break
            expect += raw
        limit = max(max_bytes, len(stored[k][2]))
        assert data == expect[:limit]


def test_two_batches_rejected_partial_tail_trimmed(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    a, b = make_batch(2), make_batch(3)
    with pytest.raises(InvalidRecordError):
        lg.append_as_leader(a + b, 0, 0)
    info = lg.append_as_leader(a + b[:30], 0, 0)
    assert (info.first_offset, info.last_offset, info.size_in_bytes) == (0, 1, len(a))
    assert lg.active_segment.size == len(a)


def test_inconsistent_topic_id(tmp_path: Path) -> None:
    from odradek.logstore import InconsistentTopicIdError

    mgr = LogManager([tmp_path], LogConfig())
    mgr.startup()
    mgr.create_log("t", 0, TOPIC_ID)
    assert mgr.create_log("t", 0, TOPIC_ID).topic_id == TOPIC_ID
    with pytest.raises(InconsistentTopicIdError):
        mgr.create_log("t", 0, bytes(16 * [9]))
    mgr.shutdown()


def test_flush_in_a_worker_thread_while_appending(tmp_path: Path) -> None:
    import threading

    lg = new_log(tmp_path, **{"segment.bytes": "20000", "index.interval.bytes": "200"})
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                lg.flush()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for _ in range(150):
            lg.append_as_leader(make_batch(2, value_size=200), 0, 0)
    finally:
        stop.set()
        t.join()
    assert errors == []
    assert lg.flush() == lg.log_end_offset == lg.recovery_point == 300
    lg.close()


def _batch_of(records: list[tuple[bytes | None, int]], **kw) -> bytearray:
    from odradek.wire.records import SimpleRecord, build_batch

    return bytearray(build_batch([SimpleRecord(b"v", key, (), ts) for key, ts in records], **kw))


def test_record_errors_name_the_refused_records(tmp_path: Path) -> None:
    """Kafka's LogValidator reports each refused record (KIP-467) in its own words: key-less records
    on a compacted topic, timestamps out of range (the key rule first, one error per record)."""
    now = 1_800_000_000_000
    lg = new_log(tmp_path, **{"cleanup.policy": "compact", "message.timestamp.before.max.ms": "1000",
                              "message.timestamp.after.max.ms": "2000"})
    batch = _batch_of([(b"a", now), (None, now), (b"c", now - 5000), (None, now - 5000), (b"e", now + 3000),
                       (b"f", -1), (None, now), (None, now)])
    with pytest.raises(InvalidTimestampError) as err:
        lg.append_as_leader(batch, 0, now)
    assert str(err.value) == "One or more records have been rejected due to invalid timestamp"
    key = "Compacted topic cannot accept message without key in topic partition t-0"
    window = f"The timestamp should be within [{now - 1000}, {now + 2000}]"
    assert [tuple(e) for e in err.value.record_errors] == [
        (1, key),
        (2, f"Timestamp {now - 5000} of message with offset 2 is out of range. {window}"),
        (3, key),
        (4, f"Timestamp {now + 3000} of message with offset 4 is out of range. {window}"),
        (6, key), (7, key)]
    with pytest.raises(InvalidRecordError) as err:
        lg.append_as_leader(_batch_of([(None, now), (b"b", now), (None, now), (None, now), (None, now)]), 0, now)
    assert [e.batch_index for e in err.value.record_errors] == [0, 2, 3, 4]
    assert str(err.value) == (
        "One or more records have been rejected due to 4 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=0, message='{key}'), RecordError(batchIndex=2, "
        f"message='{key}'), RecordError(batchIndex=3, message='{key}')]")
    assert lg.log_end_offset == 0
    # a record without a timestamp is not range-checked: the batch goes in
    assert lg.append_as_leader(_batch_of([(b"a", -1), (b"b", now)]), 0, now).first_offset == 0


def test_a_producer_may_not_claim_log_append_time(tmp_path: Path) -> None:
    now = 1_800_000_000_000
    lg = new_log(tmp_path, **{"message.timestamp.type": "LogAppendTime"})
    batch = _batch_of([(b"a", now), (None, now)])
    struct.pack_into(">h", batch, 21, RecordBatch(batch).attributes | 0x08)
    struct.pack_into(">I", batch, 17, RecordBatch(batch).compute_crc())
    with pytest.raises(InvalidTimestampError) as err:
        lg.append_as_leader(batch, 0, now)
    assert [tuple(e) for e in err.value.record_errors] == [
        (i, f"Invalid timestamp type in message DefaultRecord(offset={i}, timestamp={now}, key={1 - i} bytes, "
            "value=1 bytes). Producer should not set timestamp type to LogAppendTime.") for i in (0, 1)]
