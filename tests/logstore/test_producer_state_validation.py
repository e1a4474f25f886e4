"""Produce-path producer checks (Kafka's ProducerAppendInfo rules) through PartitionLog.append_as_leader:
duplicates of the last 5 batches, sequence gaps, old epochs, new epochs, unknown producers,
transactional rules, and the state surviving a restart through the `.snapshot` files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from odradek.handlers.common import error_code_for
from odradek.logstore import LogConfig, PartitionLog
from odradek.logstore.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    in_sequence,
    last_sequence,
)
from odradek.wire.errors import ErrorCode
from odradek.wire.records import ControlRecordType, SimpleRecord, build_batch, build_end_txn_marker_batch

TOPIC_ID = bytes(range(1, 17))
PID = 4000


def new_log(path: Path, **props) -> PartitionLog:
    lg = PartitionLog.open(path / "t-0", LogConfig.from_props(props), topic_id=TOPIC_ID)
    lg.become_leader(0)
    return lg


def batch(seq: int, n: int = 3, *, pid: int = PID, epoch: int = 0, txn: bool = False, ts: int | None = None) -> bytearray:
    # current timestamps: producers idle for producer.id.expiration.ms (1 day) are dropped on reload
    now = ts if ts is not None else time.time_ns() // 1_000_000
    recs = [SimpleRecord(b"v%d" % (seq + i), b"k", (), now + i) for i in range(n)]
    return bytearray(build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                 is_transactional=txn))


def marker(kind: ControlRecordType, *, pid: int = PID, epoch: int = 0, coordinator_epoch: int = 0) -> bytearray:
    return bytearray(build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=epoch,
                                                coordinator_epoch=coordinator_epoch, timestamp=1_700_000_001_000))


def test_in_order_batches_append(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    assert lg.append_as_leader(batch(0), 0).first_offset == 0
    assert lg.append_as_leader(batch(3), 0).first_offset == 3
    entry = lg.producer_state.producers[PID]
    assert entry.last_seq == 5 and entry.producer_epoch == 0 and len(entry.batch_metadata) == 2


def test_duplicate_of_each_of_the_last_five_batches_returns_original_offsets(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    firsts = [lg.append_as_leader(batch(3 * i), 0).first_offset for i in range(7)]
    leo = lg.log_end_offset
    size = lg.active_segment.size
    # batches 2..6 are remembered: a retry answers with the original base offset and writes nothing
    for i in range(2, 7):
        info = lg.append_as_leader(batch(3 * i), 0)
        assert info.duplicate and info.first_offset == firsts[i] and info.last_offset == firsts[i] + 2
    assert lg.log_end_offset == leo and lg.active_segment.size == size
    # batches 0 and 1 fell out of the window of 5: an old sequence is out of order
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(0), 0)
    # a different range over remembered sequences is not a duplicate
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(6, n=2), 0)


def test_sequence_gap_is_out_of_order(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(batch(0), 0)
    with pytest.raises(OutOfOrderSequenceError) as exc:
        lg.append_as_leader(batch(4), 0)
    assert error_code_for(exc.value) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lg.log_end_offset == 3
    lg.append_as_leader(batch(3), 0)  # the right one still goes in


def test_old_epoch_is_invalid_producer_epoch(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(batch(0, epoch=1), 0)
    with pytest.raises(InvalidProducerEpochError) as exc:
        lg.append_as_leader(batch(3, epoch=0), 0)
    assert error_code_for(exc.value) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_epoch_must_start_at_zero(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(batch(0, epoch=0), 0)
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(3, epoch=1), 0)
    lg.append_as_leader(batch(0, epoch=1), 0)
    entry = lg.producer_state.producers[PID]
    assert entry.producer_epoch == 1 and len(entry.batch_metadata) == 1  # a new epoch forgets old batches


def test_unknown_producer_with_nonzero_sequence_is_accepted(tmp_path: Path) -> None:
    # Kafka 3.x/4.x (since KIP-360): no UNKNOWN_PRODUCER_ID from the produce path; a producer whose
    # state expired or was removed with old segments may continue at any sequence.
    lg = new_log(tmp_path)
    assert lg.append_as_leader(batch(42), 0).first_offset == 0
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(46), 0)
    lg.append_as_leader(batch(45), 0)


def test_sequence_wraps_at_int_max() -> None:
    assert in_sequence(2**31 - 1, 0)
    assert last_sequence(2**31 - 2, 3) == 1
    assert last_sequence(-1, 3) == -1


def test_wrapping_batch_and_its_duplicate(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(batch(2**31 - 5, n=3), 0)
    info = lg.append_as_leader(batch(2**31 - 2, n=4), 0)  # sequences MAX-1, MAX, 0, 1
    assert lg.append_as_leader(batch(2**31 - 2, n=4), 0).duplicate
    assert lg.append_as_leader(batch(2, n=1), 0).first_offset == info.last_offset + 1


def test_non_transactional_write_inside_transaction(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(batch(0, txn=True), 0)
    with pytest.raises(InvalidTxnStateError) as exc:
        lg.append_as_leader(batch(3, txn=False), 0)
    assert error_code_for(exc.value) is ErrorCode.INVALID_TXN_STATE


def test_markers_end_transactions_index_aborts_and_fence_old_coordinators(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(batch(0, txn=True), 0)  # 0..2
    other = 5000
    lg.append_as_leader(batch(0, pid=other, txn=True), 0)  # 3..5, still open after the abort below
    assert lg.last_stable_offset == 0
    lg.append_as_coordinator(marker(ControlRecordType.ABORT, coordinator_epoch=3), 0)  # 6
    assert lg.last_stable_offset == 3
    txns = lg.aborted_transactions(0, lg.log_end_offset)
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in txns] == [(PID, 0, 6, 3)]
    lg.append_as_coordinator(marker(ControlRecordType.COMMIT, pid=other, coordinator_epoch=3), 0)  # 7
    assert lg.last_stable_offset == lg.log_end_offset == 8
    with pytest.raises(TransactionCoordinatorFencedError):
        lg.append_as_coordinator(marker(ControlRecordType.ABORT, coordinator_epoch=2), 0)
    lg.append_as_leader(batch(0, txn=True, epoch=2), 0)  # the producer moved on to epoch 2
    with pytest.raises(InvalidProducerEpochError):
        lg.append_as_coordinator(marker(ControlRecordType.ABORT, epoch=1, coordinator_epoch=3), 0)


def test_state_survives_restart_through_snapshots(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    for i in range(6):
        lg.append_as_leader(batch(3 * i), 0)
    first = lg.producer_state.producers[PID].batch_metadata[-1].first_offset
    lg.close()
    names = sorted(os.listdir(tmp_path / "t-0"))
    assert "00000000000000000018.snapshot" in names
    lg = PartitionLog.open(tmp_path / "t-0", LogConfig.from_props({}))
    # Kafka's snapshot keeps only the last batch: its retry is still a duplicate, the next sequence follows
    info = lg.append_as_leader(batch(15), 0)
    assert info.duplicate and info.first_offset == first
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(batch(19), 0)
    assert lg.append_as_leader(batch(18), 0).first_offset == 18
    lg.close()


def test_state_rebuilt_from_log_after_unclean_shutdown(tmp_path: Path) -> None:
    lg = new_log(tmp_path, **{"segment.bytes": "400"})
    for i in range(8):
        lg.append_as_leader(batch(3 * i), 0)
    leo = lg.log_end_offset
    lg.close_handlers()  # no snapshot at the LEO: recovery replays the log
    lg = PartitionLog.open(tmp_path / "t-0", LogConfig.from_props({"segment.bytes": "400"}), had_clean_shutdown=False)
    assert lg.log_end_offset == leo
    assert lg.append_as_leader(batch(21), 0).duplicate
    assert lg.append_as_leader(batch(24), 0).first_offset == leo
    lg.close()


def test_check_append_ignores_producers_without_state(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    assert psm.check_append(1, 0, 17, 2, False, False) is None


def test_aborted_transactions_found_in_later_segments_and_fetch_bound(tmp_path: Path) -> None:
    # the ABORT marker (and so the .txnindex entry) of a transaction can be segments after its data
    lg = new_log(tmp_path, **{"segment.bytes": "300"})
    lg.append_as_leader(batch(0, txn=True), 0)  # 0..2
    for i in range(4):
        lg.append_as_leader(batch(3 * i, pid=PID + 1), 0)  # other producer, rolls segments
    lg.append_as_coordinator(marker(ControlRecordType.ABORT), 0)
    assert len(lg.segments) >= 2 and lg.segments[-1].base_offset > 3  # the marker is in a later segment
    assert lg.collect_aborted_transactions(0, 3) == [(PID, 0)]
    data = lg.read(0, 100)  # the first batch only
    upper = lg.fetch_upper_bound_offset(data)
    assert 3 <= upper <= lg.log_end_offset
    assert lg.collect_aborted_transactions(0, upper) == [(PID, 0)]
    lg.close()
    again = PartitionLog.open(tmp_path / "t-0", LogConfig.from_props({"segment.bytes": "300"}))
    assert again.collect_aborted_transactions(0, 3) == [(PID, 0)]
    again.close()


def test_an_entry_keeps_its_last_five_batches_packed():
    """Past 5 batches the oldest is forgotten; duplicates are found across the sequence wrap; the
    batches cost a fixed few bytes each, whatever their values (no per-batch objects or ints)."""
    import tracemalloc

    from odradek.logstore.producer_state import ProducerStateEntry

    entry = ProducerStateEntry(PID, producer_epoch=0)
    big = 2**40
    for i in range(12):
        entry.add_batch(i * 10 + 9, big + i * 10 + 9, 9, big + i)
    assert [(b.first_seq, b.last_seq, b.first_offset, b.timestamp) for b in entry.batch_metadata] == [
        (i * 10, i * 10 + 9, big + i * 10, big + i) for i in range(7, 12)]
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (70, 119, big + 119)
    assert entry.find_duplicate(0, 110, 119).last_offset == big + 119
    assert entry.find_duplicate(0, 60, 69) is None and entry.find_duplicate(1, 110, 119) is None
    entry.add_batch(last_sequence(2**31 - 3, 5), big + 200, 5, big)  # sequence 2**31-3 .. 2
    assert entry.find_duplicate(0, 2**31 - 3, 2) is not None
    entry.clear_batches()
    assert (entry.batch_metadata, entry.last_seq, entry.last_data_offset) == ([], -1, -1)

    tracemalloc.start()
    try:
        entries = [ProducerStateEntry(big + n, producer_epoch=0) for n in range(2000)]
        before = tracemalloc.get_traced_memory()[0]
        for e in entries:
            for i in range(8):
                e.add_batch(1000 + i, big + i, 1, big + i)
        per_entry = (tracemalloc.get_traced_memory()[0] - before) / len(entries)
    finally:
        tracemalloc.stop()
    assert per_entry < 5 * 4 * 8 * 2, per_entry  # five 4-value batches of 8 bytes, some slack
