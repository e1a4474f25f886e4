"""Transactions V2 (KIP-890 part 2) in the coordinator: every commit/abort bumps the epoch (and
rotates the producer id when it runs out), partitions are added by the partition leader from
Produce v12+, EndTxn v5 answers the producer id/epoch to continue with, and `__transaction_state`
values follow the finalized transaction.version (Kafka's TransactionLog.valueToBytes)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_coordinator import T0, TOPIC, batches, txn_batch
from test_handlers import call

from odradek.txn_coordinator import TransactionCoordinator, TxnError, TxnState
from odradek.txn_coordinator import records as rec
from odradek.txn_coordinator.coordinator import verify_transactional_produce
from odradek.wire.errors import ErrorCode as E
from odradek.wire.protocol import request_class

MAX = 2**15 - 1


def finalize(broker, level: int) -> None:
    """What the metadata image says of transaction.version (the FakeBroker has no metadata log)."""
    broker.metadata_store = SimpleNamespace(image=SimpleNamespace(features={"transaction.version": level}))


def values(broker, txn_id: str) -> list:
    plog = broker.partition_log(rec.TRANSACTION_STATE_TOPIC, rec.partition_for(txn_id, 5))
    out = []
    for key, value in rec.read_records(plog):
        if rec.decode_key(key) == txn_id:
            out.append((int.from_bytes(value[:2], "big"), rec.decode_value(value)))
    return out


def produce(broker, pid: int, epoch: int, seq: int, partition: int = 0, version: int = 12):
    """A transactional batch through the produce path's check, then appended if it passes."""
    plog = broker.partition_log(TOPIC, partition)
    batch = txn_batch(pid, epoch, seq)
    refused = verify_transactional_produce(broker, "t1", TOPIC, partition, plog, memoryview(batch), version)
    if refused is None:
        plog.append_as_leader(batch, 0)
    return refused


@pytest.fixture
def tv2(coordinator: TransactionCoordinator, broker) -> TransactionCoordinator:
    finalize(broker, 2)
    broker.metadata.create_topic(TOPIC, 2, {})
    return coordinator


def test_every_end_bumps_the_epoch_and_produce_adds_partitions(tv2: TransactionCoordinator, broker) -> None:
    pid, epoch = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    assert produce(broker, pid, epoch, 0, 0) is None and produce(broker, pid, epoch, 0, 1) is None
    meta = tv2.txns["t1"]
    assert meta.state == TxnState.ONGOING and meta.partitions == {(TOPIC, 0), (TOPIC, 1)}
    done = tv2.end_transaction("t1", pid, epoch, True, T0 + 2, client_tv=2)
    assert (done.state, done.producer_epoch) == (TxnState.COMPLETE_COMMIT, epoch + 1)
    assert tv2.completed_ids(done) == (pid, epoch + 1)
    marker = batches(broker.partition_log(TOPIC, 0))[-1].header()
    assert (marker.producer_id, marker.producer_epoch) == (pid, epoch + 1)  # markers carry the bumped epoch
    # the next transaction runs under the new epoch from sequence 0
    assert produce(broker, pid, epoch + 1, 0, 1) is None
    aborted = tv2.end_transaction("t1", pid, epoch + 1, False, T0 + 3, client_tv=2)
    assert aborted.producer_epoch == epoch + 2 and aborted.state == TxnState.COMPLETE_ABORT
    plog = broker.partition_log(TOPIC, 1)
    assert [t.first_offset for t in plog.aborted_transactions(0, 100)] == [4]
    assert plog.last_stable_offset == plog.log_end_offset


def test_produce_before_v12_only_verifies(tv2: TransactionCoordinator, broker) -> None:
    pid, epoch = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    assert produce(broker, pid, epoch, 0, version=11) == (E.INVALID_TXN_STATE, "Partition was not added to the transaction")
    assert tv2.txns["t1"].state == TxnState.EMPTY
    assert produce(broker, pid, epoch + 1, 0) == (E.INVALID_PRODUCER_EPOCH, "PRODUCER_FENCED")
    assert produce(broker, pid + 5, epoch, 0)[0] == E.INVALID_PRODUCER_ID_MAPPING


def test_end_txn_retries_and_states(tv2: TransactionCoordinator, broker) -> None:
    pid, e = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)

    def end(epoch: int, commit: bool):
        try:
            return tv2.completed_ids(tv2.end_transaction("t1", pid, epoch, commit, T0 + 5, client_tv=2))
        except TxnError as exc:
            return exc.code

    assert end(e, True) == E.INVALID_TXN_STATE  # Empty: nothing to commit
    assert end(e - 1 if e else MAX, False) == E.PRODUCER_FENCED
    produce(broker, pid, e, 0)
    assert end(e, True) == (pid, e + 1)
    # the table of KafkaCoordinator.endTransaction for TV2: retries carry the epoch before the bump
    assert end(e, True) == (pid, e + 1)  # retried commit: answered again
    assert end(e, False) == E.INVALID_TXN_STATE  # an abort retry of a commit
    assert end(e + 1, True) == E.INVALID_TXN_STATE  # commit with nothing open
    assert end(e + 2, False) == E.PRODUCER_FENCED
    assert end(e + 1, False) == (pid, e + 2)  # abort with nothing open: a new epoch all the same
    assert end(e + 1, False) == (pid, e + 2)  # and its retry
    assert end(e + 1, True) == E.INVALID_TXN_STATE
    meta = tv2.txns["t1"]
    assert meta.state == TxnState.COMPLETE_ABORT and meta.txn_start_timestamp == T0 + 5


def test_exhausted_epoch_moves_to_a_new_producer_id(tv2: TransactionCoordinator, broker) -> None:
    pid, _ = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    tv2.txns["t1"].producer_epoch = MAX - 1
    assert produce(broker, pid, MAX - 1, 0) is None
    done = tv2.end_transaction("t1", pid, MAX - 1, True, T0 + 2, client_tv=2)
    new_pid = done.producer_id
    assert new_pid != pid and done.producer_epoch == 0 and tv2.completed_ids(done) == (new_pid, 0)
    marker = batches(broker.partition_log(TOPIC, 0))[-1].header()
    assert (marker.producer_id, marker.producer_epoch) == (pid, MAX)  # the old id's last epoch
    # a retry from the old id is recognised and answered with the new one
    assert tv2.completed_ids(tv2.end_transaction("t1", pid, MAX - 1, True, T0 + 3, client_tv=2)) == (new_pid, 0)
    prepare, complete = [v for _, v in values(broker, "t1")][-2:]
    assert (prepare.producer_id, prepare.producer_epoch, prepare.next_producer_id) == (pid, MAX, new_pid)
    assert (complete.producer_id, complete.producer_epoch, complete.previous_producer_id,
            complete.next_producer_id) == (new_pid, 0, pid, -1)


def test_records_follow_the_finalized_transaction_version(tv2: TransactionCoordinator, broker) -> None:
    pid, e = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    produce(broker, pid, e, 0)
    tv2.end_transaction("t1", pid, e, True, T0 + 2, client_tv=2)
    got = [(version, TxnState(v.transaction_status).display_name, v.producer_epoch, v.previous_producer_id,
            v.client_transaction_version, v.transaction_partitions) for version, v in values(broker, "t1")]
    parts = [rec.PartitionsSchema(topic=TOPIC, partition_ids=[0])]
    assert got == [(1, "Empty", 0, pid, 0, None), (1, "Ongoing", 0, pid, 2, parts),
                   (1, "PrepareCommit", 1, pid, 2, parts), (1, "CompleteCommit", 1, pid, 2, [])]


def test_v1_clients_keep_the_v1_rules(coordinator: TransactionCoordinator, broker) -> None:
    # transaction.version 1 finalized: flexible values, but a client's AddPartitionsToTxn v3 and
    # EndTxn v4 are TV_0 (no epoch bump, ClientTransactionVersion 0)
    finalize(broker, 1)
    broker.metadata.create_topic(TOPIC, 1, {})
    pid, e = coordinator.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    coordinator.add_partitions("t1", pid, e, [(TOPIC, 0)], T0 + 1)
    done = coordinator.end_transaction("t1", pid, e, True, T0 + 2)
    assert done.producer_epoch == e
    assert [(version, v.producer_epoch, v.client_transaction_version) for version, v in values(broker, "t1")] == [
        (1, e, 0)] * 4


def test_no_finalized_level_writes_value_version_0(coordinator: TransactionCoordinator, broker) -> None:
    coordinator.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    plog = broker.partition_log(rec.TRANSACTION_STATE_TOPIC, rec.partition_for("t1", 5))
    (_, value), = rec.read_records(plog)
    # Kafka 3.9's bytes: value version 0 and a null partition list for Empty
    assert value[:2] == b"\0\0" and value[2 + 8 + 2 + 4 + 1:][:4] == b"\xff\xff\xff\xff"


def test_timeout_abort_follows_the_finalized_level(tv2: TransactionCoordinator, broker) -> None:
    pid, e = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    produce(broker, pid, e, 0)
    assert tv2.abort_timed_out_transactions(T0 + 20_000) == ["t1"]
    meta = tv2.txns["t1"]
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch) == (TxnState.COMPLETE_ABORT, e + 1, e)
    prepare = values(broker, "t1")[-2][1]
    assert (prepare.transaction_status, prepare.producer_epoch, prepare.client_transaction_version) == (3, e + 1, 2)
    with pytest.raises(TxnError) as exc:
        tv2.end_transaction("t1", pid, e, True, client_tv=2)
    assert exc.value.code == E.INVALID_TXN_STATE  # the fenced producer's commit: a retry of nothing


def test_reload_completes_a_prepared_rotation(tv2: TransactionCoordinator, broker) -> None:
    pid, _ = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    tv2.txns["t1"].producer_epoch = MAX - 1
    produce(broker, pid, MAX - 1, 0)
    prepared = tv2._copy(tv2.txns["t1"])
    prepared.transition(TxnState.PREPARE_COMMIT)
    prepared.producer_epoch, prepared.next_producer_id, prepared.client_txn_version = MAX, 4242, 2
    tv2._commit(prepared, T0 + 3)
    broker2 = broker.restart()
    finalize(broker2, 2)
    c2 = TransactionCoordinator(broker2)
    c2._load_all()
    meta = c2.txns["t1"]
    assert (meta.state, meta.producer_id, meta.producer_epoch) == (TxnState.COMPLETE_COMMIT, 4242, 0)


def test_end_txn_v5_answers_the_next_producer_id_and_epoch(tv2: TransactionCoordinator, broker) -> None:
    pid, e = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    produce(broker, pid, e, 0)
    ET = request_class(26)
    resp = call(broker, 26, 5, ET(transactional_id="t1", producer_id=pid, producer_epoch=e, committed=True))
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (0, pid, e + 1)
    resp = call(broker, 26, 5, ET(transactional_id="t1", producer_id=pid, producer_epoch=e + 5, committed=True))
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (E.PRODUCER_FENCED, -1, -1)
    produce(broker, pid, e + 1, 0, version=11)  # refused: v11 does not add the partition
    resp = call(broker, 26, 4, ET(transactional_id="t1", producer_id=pid, producer_epoch=e + 1, committed=False))
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (E.INVALID_TXN_STATE, -1, -1)


def test_add_partitions_v5_from_a_broker_adds_for_tv2(tv2: TransactionCoordinator, broker) -> None:
    pid, e = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    R = request_class(24)
    req = R(transactions=[R.AddPartitionsToTxnTransaction(
        transactional_id="t1", producer_id=pid, producer_epoch=e, verify_only=False,
        topics=[R.AddPartitionsToTxnTopic(name=TOPIC, partitions=[1])])])
    resp = call(broker, 24, 5, req)
    assert [r.partition_error_code for r in resp.results_by_transaction[0].topic_results[0].results_by_partition] == [0]
    meta = tv2.txns["t1"]
    assert meta.partitions == {(TOPIC, 1)} and meta.client_txn_version == 2


def _write_marker(broker, pid: int, epoch: int, transaction_version: int) -> int:
    R = request_class(27)
    req = R(markers=[R.WritableTxnMarker(producer_id=pid, producer_epoch=epoch, transaction_result=True,
                                         coordinator_epoch=0, transaction_version=transaction_version,
                                         topics=[R.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])])])
    return call(broker, 27, 2, req).markers[0].topics[0].partitions[0].error_code


def test_a_tv2_marker_needs_an_epoch_above_the_open_transaction(tv2: TransactionCoordinator, broker) -> None:
    # a late marker of the last transaction (epoch e+1 after its bump) meets the next transaction,
    # already open under e+1: with TransactionVersion 2 it is refused, as Kafka 4.4's log does
    plog = broker.partition_log(TOPIC, 0)
    plog.append_as_leader(txn_batch(7, 1, 0), 0)
    assert _write_marker(broker, 7, 1, 2) == E.INVALID_PRODUCER_EPOCH
    assert plog.last_stable_offset == 0
    assert _write_marker(broker, 7, 2, 2) == E.NONE  # the bumped epoch ends it
    assert plog.last_stable_offset == plog.log_end_offset
    assert _write_marker(broker, 7, 2, 2) == E.NONE  # a retry with nothing open is written again
    plog.append_as_leader(txn_batch(8, 1, 0), 0)
    assert _write_marker(broker, 8, 1, 0) == E.NONE  # TV1 markers keep the same epoch


def test_txn_offset_commit_v5_adds_the_offsets_partition(tv2: TransactionCoordinator, broker, monkeypatch) -> None:
    # a TV2 producer sends no AddOffsetsToTxn: TxnOffsetCommit v5+ adds the group's partition
    groups = tv2.groups
    monkeypatch.setattr(groups, "partition_for", lambda group: 7)
    monkeypatch.setattr(groups, "validate", lambda *args: E.NONE)
    written = []
    monkeypatch.setattr(groups, "append_pending", lambda *args: written.append(args) or E.NONE)
    pid, e = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    commit = [(TOPIC, 0, 5, -1, None)]
    assert tv2.txn_offset_commit("t1", "g", pid, e, -1, "", None, 4, commit, T0 + 1) == E.NONE
    assert tv2.txns["t1"].state == TxnState.EMPTY  # v4: the client added it (AddOffsetsToTxn)
    assert tv2.txn_offset_commit("t1", "g", pid, e, -1, "", None, 5, commit, T0 + 2) == E.NONE
    meta = tv2.txns["t1"]
    assert meta.state == TxnState.ONGOING and meta.partitions == {("__consumer_offsets", 7)}
    assert meta.client_txn_version == 2 and len(written) == 2
    assert tv2.txn_offset_commit("t1", "g", pid, e + 1, -1, "", None, 5, commit) == E.INVALID_PRODUCER_EPOCH


def test_a_v2_add_waits_for_the_markers_of_the_last_end(tv2: TransactionCoordinator, broker) -> None:
    # markers still going to another broker (the transaction stays prepared): a V2 producer's next
    # batch, under the new id after a rotation, gets CONCURRENT_TRANSACTIONS and retries
    pid, _ = tv2.handle_init_producer_id("t1", 10_000, -1, -1, T0)
    tv2.txns["t1"].producer_epoch = MAX - 1
    produce(broker, pid, MAX - 1, 0)
    sent = []
    tv2.remote_markers = lambda meta, commit, parts, done: sent.append(done)
    broker.partition_error = lambda topic, partition: E.NOT_LEADER_OR_FOLLOWER
    real = broker.partition_log
    broker.partition_log = lambda name, index: None if name == TOPIC else real(name, index)
    prepared = tv2.end_transaction("t1", pid, MAX - 1, True, T0 + 2, client_tv=2)
    assert prepared.state == TxnState.PREPARE_COMMIT and sent
    new_pid = tv2.completed_ids(prepared)[0]
    broker.partition_log = real
    assert produce(broker, new_pid, 0, 0) == (E.CONCURRENT_TRANSACTIONS, "CONCURRENT_TRANSACTIONS")
    sent[0]()  # every leader wrote its marker
    assert produce(broker, new_pid, 0, 0) is None
    assert tv2.txns["t1"].producer_id == new_pid and tv2.txns["t1"].state == TxnState.ONGOING
