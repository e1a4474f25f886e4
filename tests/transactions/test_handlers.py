"""The transaction APIs end to end through the wire codec and the handler registry: a request frame
in, a decoded response out (InitProducerId, AddPartitionsToTxn v3/v4 verify_only, EndTxn,
DescribeProducers, DescribeTransactions, ListTransactions, read_committed ListOffsets and Fetch)."""

from __future__ import annotations

import os

import trio

from odradek.handlers.registry import RequestContext, dispatch, load_handlers
from odradek.wire.errors import ErrorCode as E
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class
from odradek.wire.records import FileSlice, SimpleRecord, build_batch


def _bytes(pieces) -> bytes:
    return b"".join(os.pread(p.file.fileno(), p.size, p.position) if isinstance(p, FileSlice) else bytes(p)
                    for p in pieces)


def call(broker, api_key: int, version: int, body):
    load_handlers()
    frame = join_pieces(encode_request(version, 7, body, api_key=api_key))[4:]
    ctx = RequestContext(broker=broker, peer="127.0.0.1:1", listener_name="PLAINTEXT")
    out = trio.run(dispatch, ctx, memoryview(bytearray(frame)))
    return decode_response(_bytes(out)[4:], api_key, version)[1]


def init(broker, txn_id: str, version: int = 4):
    req = request_class(22)(transactional_id=txn_id, transaction_timeout_ms=30_000)
    return call(broker, 22, version, req)


def add(broker, txn_id, pid, epoch, parts, version=3):
    R = request_class(24)
    if version <= 3:
        req = R(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[R.AddPartitionsToTxnTopic(name="d", partitions=parts)])
        resp = call(broker, 24, version, req)
        return {(r.partition_index): r.partition_error_code for t in resp.results_by_topic_v3_and_below
                for r in t.results_by_partition}
    req = R(transactions=[R.AddPartitionsToTxnTransaction(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[R.AddPartitionsToTxnTopic(name="d", partitions=parts)])])
    resp = call(broker, 24, version, req)
    return {r.partition_index: r.partition_error_code for t in resp.results_by_transaction[0].topic_results
            for r in t.results_by_partition}


def test_transaction_apis_over_the_wire(broker, coordinator) -> None:
    broker.metadata.create_topic("d", 2, {})
    resp = init(broker, "app")
    assert resp.error_code == 0 and resp.producer_epoch == 0
    pid = resp.producer_id
    assert init(broker, "", 4).error_code == E.INVALID_REQUEST
    assert add(broker, "app", pid, 0, [0, 5]) == {0: E.OPERATION_NOT_ATTEMPTED, 5: E.UNKNOWN_TOPIC_OR_PARTITION}
    assert add(broker, "app", pid, 0, [0]) == {0: 0}
    assert add(broker, "app", pid, 1, [1]) == {1: E.PRODUCER_FENCED}
    assert add(broker, "app", pid, 1, [1], version=1) == {1: E.INVALID_PRODUCER_EPOCH}  # before KIP-588
    assert add(broker, "app", pid, 0, [0, 1], version=4) == {0: 0, 1: E.INVALID_TXN_STATE}

    plog = broker.partition_log("d", 0)
    batch = bytearray(build_batch([SimpleRecord(b"x", b"k", (), 1_800_000_000_000)], producer_id=pid, producer_epoch=0,
                                  base_sequence=0, is_transactional=True))
    plog.append_as_leader(batch, 0)
    plog.append_as_leader(bytearray(build_batch([SimpleRecord(b"y", b"k", (), 1_800_000_000_001)])), 0)

    # ListOffsets latest: HW for read_uncommitted, LSO for read_committed
    LO = request_class(2)
    def latest(isolation: int) -> int:
        req = LO(replica_id=-1, isolation_level=isolation, topics=[LO.ListOffsetsTopic(
            name="d", partitions=[LO.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
        return call(broker, 2, 5, req).topics[0].partitions[0].offset
    assert (latest(0), latest(1)) == (2, 0)

    DP = request_class(61)
    resp = call(broker, 61, 0, DP(topics=[DP.TopicRequest(name="d", partition_indexes=[0, 9])]))
    p0, p9 = resp.topics[0].partitions
    assert p9.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    (producer,) = p0.active_producers
    assert (producer.producer_id, producer.last_sequence, producer.current_txn_start_offset) == (pid, 0, 0)

    DT = request_class(65)
    resp = call(broker, 65, 0, DT(transactional_ids=["app", "nope"]))
    app, nope = resp.transaction_states
    assert (app.transaction_state, app.producer_id, [(t.topic, t.partitions) for t in app.topics]) == \
        ("Ongoing", pid, [("d", [0])])
    assert nope.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    LT = request_class(66)
    resp = call(broker, 66, 1, LT(state_filters=["Ongoing"], duration_filter=-1))
    assert [(t.transactional_id, t.transaction_state) for t in resp.transaction_states] == [("app", "Ongoing")]

    ET = request_class(26)
    assert call(broker, 26, 3, ET(transactional_id="app", producer_id=pid, producer_epoch=0, committed=False)).error_code == 0
    assert (latest(0), latest(1)) == (3, 3)
    assert plog.collect_aborted_transactions(0, 3) == [(pid, 0)]

    # a read_committed Fetch lists the aborted transaction
    F = request_class(1)
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=1, session_epoch=-1,
            topics=[F.FetchTopic(topic="d", partitions=[F.FetchPartition(partition=0, fetch_offset=0,
                                                                          partition_max_bytes=1 << 20)])])
    part = call(broker, 1, 11, req).responses[0].partitions[0]
    assert part.last_stable_offset == 3
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]


def test_produce_verifies_the_partition_is_in_the_transaction(broker, coordinator) -> None:
    broker.metadata.create_topic("d", 2, {})
    resp = init(broker, "app")
    pid = resp.producer_id
    assert add(broker, "app", pid, 0, [0]) == {0: 0}
    P = request_class(0)

    def produce(partition: int, seq: int, txn_id: str | None = "app") -> tuple[int, str | None]:
        batch = build_batch([SimpleRecord(b"x", b"k", (), 1_800_000_000_000)], producer_id=pid, producer_epoch=0,
                            base_sequence=seq, is_transactional=True)
        req = P(transactional_id=txn_id, acks=-1, timeout_ms=1000, topic_data=[P.TopicProduceData(
            name="d", partition_data=[P.PartitionProduceData(index=partition, records=batch)])])
        r = call(broker, 0, 9, req).responses[0].partition_responses[0]
        return r.error_code, r.error_message

    assert produce(1, 0) == (E.INVALID_TXN_STATE, "Partition was not added to the transaction")
    assert produce(0, 0) == (0, None)
    assert produce(0, 1) == (0, None)  # the open transaction is known to the partition: no new check
    assert broker.partition_log("d", 1).log_end_offset == 0
    broker.config.raw["transaction.partition.verification.enable"] = "false"
    assert produce(1, 0) == (0, None)
