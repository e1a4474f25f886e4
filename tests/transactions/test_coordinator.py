"""The transaction coordinator against real partition logs: InitProducerId epoch rules, the state
machine, markers, LSO and `.txnindex`, timeouts with fencing, reload after a restart."""

from __future__ import annotations

import os

import pytest

from odradek.logstore.producer_state import InvalidProducerEpochError
from odradek.txn_coordinator import TransactionCoordinator, TxnError, TxnState
from odradek.txn_coordinator import records as rec
from odradek.wire.errors import ErrorCode as E
from odradek.wire.records import ControlRecordType, RecordBatch, SimpleRecord, build_batch, iter_batches

T0 = 1_800_000_000_000
TOPIC = "data"


def txn_batch(pid: int, epoch: int, seq: int, n: int = 3) -> bytearray:
    recs = [SimpleRecord(b"v%d" % i, b"k", (), T0 + i) for i in range(n)]
    return bytearray(build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True))


def states_in_log(broker, txn_id: str) -> list[str]:
    plog = broker.partition_log(rec.TRANSACTION_STATE_TOPIC, rec.partition_for(txn_id, 5))
    out = []
    for key, value in rec.read_records(plog):
        if rec.decode_key(key) == txn_id:
            v = rec.decode_value(value)
            out.append("tombstone" if v is None else TxnState(v.transaction_status).display_name)
    return out


def batches(plog) -> list[RecordBatch]:
    data = plog.read(plog.log_start_offset, 1 << 30)
    buf = b"".join(os.pread(s.file.fileno(), s.size, s.position) for s in data.slices)
    return list(iter_batches(buf))


def test_init_producer_id_bumps_and_fences(coordinator: TransactionCoordinator, broker) -> None:
    pid, epoch = coordinator.handle_init_producer_id("t1", 60_000, -1, -1, T0)
    assert (pid, epoch) == (0, 0)
    assert coordinator.handle_init_producer_id("t1", 60_000, -1, -1, T0) == (0, 1)  # a new instance
    assert coordinator.handle_init_producer_id("t1", 60_000, 0, 1, T0) == (0, 2)  # KIP-360 bump
    assert coordinator.handle_init_producer_id("t1", 60_000, 0, 1, T0) == (0, 2)  # its retry
    with pytest.raises(TxnError) as exc:
        coordinator.handle_init_producer_id("t1", 60_000, 0, 0, T0)
    assert exc.value.code == E.PRODUCER_FENCED
    with pytest.raises(TxnError) as exc:
        coordinator.handle_init_producer_id("t1", 60_000, 77, 0, T0)
    assert exc.value.code == E.PRODUCER_FENCED
    with pytest.raises(TxnError) as exc:
        coordinator.handle_init_producer_id("t1", 900_001, -1, -1, T0)
    assert exc.value.code == E.INVALID_TRANSACTION_TIMEOUT
    with pytest.raises(TxnError) as exc:
        coordinator.handle_init_producer_id("", 60_000, -1, -1, T0)
    assert exc.value.code == E.INVALID_REQUEST
    assert states_in_log(broker, "t1") == ["Empty"] * 4  # Kafka writes the retried bump again


def test_exhausted_epoch_rotates_the_producer_id(coordinator: TransactionCoordinator) -> None:
    pid, _ = coordinator.handle_init_producer_id("t1", 60_000, -1, -1, T0)
    coordinator.txns["t1"].producer_epoch = 2**15 - 2
    new_pid, epoch = coordinator.handle_init_producer_id("t1", 60_000, pid, 2**15 - 2, T0)
    assert new_pid != pid and epoch == 0
    # a retry from the old id with the exhausted epoch is recognised (previous producer id)
    assert coordinator.handle_init_producer_id("t1", 60_000, pid, 2**15 - 2, T0)[0] == new_pid


def _open_txn(coordinator, broker, txn_id: str = "t1", parts: int = 2) -> tuple[int, int]:
    broker.metadata.create_topic(TOPIC, parts, {})
    pid, epoch = coordinator.handle_init_producer_id(txn_id, 10_000, -1, -1, T0)
    coordinator.add_partitions(txn_id, pid, epoch, [(TOPIC, p) for p in range(parts)], T0 + 1)
    for p in range(parts):
        broker.partition_log(TOPIC, p).append_as_leader(txn_batch(pid, epoch, 0), 0)
    return pid, epoch


def test_commit_writes_markers_and_moves_the_lso(coordinator: TransactionCoordinator, broker) -> None:
    pid, epoch = _open_txn(coordinator, broker)
    plog = broker.partition_log(TOPIC, 0)
    assert plog.last_stable_offset == 0 and plog.high_watermark == 3
    coordinator.end_transaction("t1", pid, epoch, True, T0 + 2)
    assert plog.last_stable_offset == 4 == plog.log_end_offset
    marker = batches(plog)[-1]
    h = marker.header()
    assert h.attributes & 0x30 == 0x30 and (h.producer_id, h.producer_epoch) == (pid, epoch)
    assert states_in_log(broker, "t1") == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert coordinator.txns["t1"].state == TxnState.COMPLETE_COMMIT and not coordinator.txns["t1"].partitions
    assert plog.aborted_transactions(0, 10) == []
    # a retried commit is fine, an abort now is not
    coordinator.end_transaction("t1", pid, epoch, True, T0 + 3)
    with pytest.raises(TxnError) as exc:
        coordinator.end_transaction("t1", pid, epoch, False, T0 + 3)
    assert exc.value.code == E.INVALID_TXN_STATE


def test_abort_indexes_the_transaction(coordinator: TransactionCoordinator, broker) -> None:
    pid, epoch = _open_txn(coordinator, broker)
    coordinator.end_transaction("t1", pid, epoch, False, T0 + 2)
    plog = broker.partition_log(TOPIC, 1)
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in plog.aborted_transactions(0, 4)] == [(pid, 0, 3, 4)]
    assert plog.collect_aborted_transactions(0, 4) == [(pid, 0)]
    assert (plog.dir / "00000000000000000000.txnindex").stat().st_size == 34


def test_end_txn_errors(coordinator: TransactionCoordinator, broker) -> None:
    pid, epoch = coordinator.handle_init_producer_id("t1", 60_000, -1, -1, T0)
    with pytest.raises(TxnError) as exc:
        coordinator.end_transaction("t1", pid, epoch, True)
    assert exc.value.code == E.INVALID_TXN_STATE  # nothing started
    for args, code in ((("nope", pid, epoch), E.INVALID_PRODUCER_ID_MAPPING),
                       (("t1", pid + 1, epoch), E.INVALID_PRODUCER_ID_MAPPING),
                       (("t1", pid, epoch + 1), E.PRODUCER_FENCED)):
        with pytest.raises(TxnError) as exc:
            coordinator.end_transaction(*args, True)
        assert exc.value.code == code


def test_init_during_ongoing_transaction_aborts_it_and_asks_to_retry(coordinator, broker) -> None:
    pid, epoch = _open_txn(coordinator, broker)
    with pytest.raises(TxnError) as exc:
        coordinator.handle_init_producer_id("t1", 10_000, -1, -1, T0 + 5)
    assert exc.value.code == E.CONCURRENT_TRANSACTIONS
    assert coordinator.txns["t1"].state == TxnState.COMPLETE_ABORT
    marker = batches(broker.partition_log(TOPIC, 0))[-1].header()
    assert marker.producer_epoch == epoch + 1  # aborted under the fencing epoch
    assert coordinator.handle_init_producer_id("t1", 10_000, -1, -1, T0 + 6) == (pid, epoch + 2)


def test_timeout_aborts_and_fences_the_producer(coordinator: TransactionCoordinator, broker) -> None:
    pid, epoch = _open_txn(coordinator, broker)
    assert coordinator.abort_timed_out_transactions(T0 + 10_000) == []  # start + timeout is not past yet
    assert coordinator.abort_timed_out_transactions(T0 + 10_002) == ["t1"]
    meta = coordinator.txns["t1"]
    assert meta.state == TxnState.COMPLETE_ABORT and meta.producer_epoch == epoch + 1
    assert states_in_log(broker, "t1")[-2:] == ["PrepareAbort", "CompleteAbort"]
    plog = broker.partition_log(TOPIC, 0)
    assert plog.last_stable_offset == plog.log_end_offset
    with pytest.raises(TxnError) as exc:
        coordinator.end_transaction("t1", pid, epoch, False)
    assert exc.value.code == E.PRODUCER_FENCED
    with pytest.raises(InvalidProducerEpochError):  # the zombie's late batch
        plog.append_as_leader(txn_batch(pid, epoch, 3), 0)


def test_add_partitions_and_verify(coordinator: TransactionCoordinator, broker) -> None:
    pid, epoch = _open_txn(coordinator, broker)
    assert coordinator.verify_partitions("t1", pid, epoch, [(TOPIC, 0), ("other", 0)]) == {
        (TOPIC, 0): E.NONE, ("other", 0): E.INVALID_TXN_STATE}
    before = states_in_log(broker, "t1")
    coordinator.add_partitions("t1", pid, epoch, [(TOPIC, 1)])  # already in: no write
    assert states_in_log(broker, "t1") == before
    with pytest.raises(TxnError) as exc:
        coordinator.add_partitions("t1", pid, epoch + 1, [("other", 0)])
    assert exc.value.code == E.PRODUCER_FENCED


def test_reload_keeps_state_and_aborts_ongoing_on_timeout(coordinator: TransactionCoordinator, broker) -> None:
    pid, epoch = _open_txn(coordinator, broker)
    broker2 = broker.restart()
    c2 = TransactionCoordinator(broker2)
    c2._load_all()
    meta = c2.txns["t1"]
    assert (meta.state, meta.producer_id, meta.producer_epoch) == (TxnState.ONGOING, pid, epoch)
    assert meta.partitions == {(TOPIC, 0), (TOPIC, 1)} and meta.txn_start_timestamp == T0 + 1
    plog = broker2.partition_log(TOPIC, 0)
    assert plog.last_stable_offset == 0  # the open transaction holds the LSO after the restart
    assert c2.abort_timed_out_transactions(T0 + 20_000) == ["t1"]
    assert plog.last_stable_offset == plog.log_end_offset == 4
    assert [t.first_offset for t in plog.aborted_transactions(0, 4)] == [0]
    # the new producer id allocator never hands out the old id again
    assert broker2.producer_ids.generate() > pid


def test_reload_completes_prepared_transactions(coordinator: TransactionCoordinator, broker) -> None:
    pid, epoch = _open_txn(coordinator, broker)
    # a crash between PrepareCommit and the markers: write PrepareCommit only
    prepared = coordinator._copy(coordinator.txns["t1"])
    prepared.transition(TxnState.PREPARE_COMMIT)
    coordinator._commit(prepared, T0 + 3)
    broker2 = broker.restart()
    c2 = TransactionCoordinator(broker2)
    c2._load_all()
    assert c2.txns["t1"].state == TxnState.COMPLETE_COMMIT
    plog = broker2.partition_log(TOPIC, 1)
    assert plog.last_stable_offset == plog.log_end_offset == 4
    assert plog.aborted_transactions(0, 4) == []


def test_list_and_expire(coordinator: TransactionCoordinator, broker) -> None:
    _open_txn(coordinator, broker)
    coordinator.handle_init_producer_id("t2", 60_000, -1, -1, T0)
    unknown, found = coordinator.list_transactions(["Ongoing", "Bogus"], [], -1, None, T0 + 5)
    assert unknown == ["Bogus"] and [m.transactional_id for m in found] == ["t1"]
    assert [m.transactional_id for m in coordinator.list_transactions([], [], -1, "t[0-9]", T0)[1]] == ["t1", "t2"]
    assert coordinator.remove_expired_transactional_ids(T0 + 604_800_000) == ["t2"]
    assert states_in_log(broker, "t2") == ["Empty", "tombstone"]


def test_partition_for_matches_kafka() -> None:
    # W4: Kafka put transactional id "w4-txn-producer" into __transaction_state-31
    assert rec.partition_for("w4-txn-producer", 50) == 31


def test_markers_carry_the_coordinator_epoch(coordinator: TransactionCoordinator, broker) -> None:
    broker.leader_epoch = 3
    pid, epoch = _open_txn(coordinator, broker)
    coordinator.end_transaction("t1", pid, epoch, True, T0 + 2)
    marker = batches(broker.partition_log(TOPIC, 0))[-1]
    record = next(iter(marker.records()))
    from odradek.wire.records import parse_end_txn_marker

    m = parse_end_txn_marker(record)
    assert m.control_type == ControlRecordType.COMMIT and m.coordinator_epoch == 3
