"""Corpus workload W4 (Kafka 3.9 + confluent-kafka transactions) replayed against a running Odradek
over the wire (issue #6, must-show 4).

A raw replay of the captured Produce requests is not what Kafka does either (3.9 verifies that a
transactional partition was added to the transaction), so the replay drives the transaction path the
way the client did: InitProducerId, then per transaction AddPartitionsToTxn, the captured data
batches byte for byte in Produce v8 requests, and EndTxn (commit, or abort for #2 and #5). The
broker writes the markers with its own clock, so marker timestamps/CRCs and the .timeindex/.snapshot
timestamps differ from Kafka's; everything else must match: every data batch (offsets, leader
epoch), the markers' type, producer, epoch, offsets and coordinator epoch, the .index and .txnindex
files byte for byte, the snapshot entries but their timestamps, and ``__transaction_state-31``'s
records but their timestamps.
"""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli import main as odradek_main
from odradek.logstore.producer_state import read_snapshot
from odradek.txn_coordinator import records as rec
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class
from odradek.wire.records import iter_batches, parse_end_txn_marker

W4 = Path("/work/shared/fixtures/kafka-corpus/W4")
TXN_ID = "w4-txn-producer"


class RawClient:
    """One connection; requests are sent and answered one at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.correlation = 0

    def call(self, api_key: int, version: int, body):
        self.correlation += 1
        self.sock.sendall(join_pieces(encode_request(version, self.correlation, body, client_id="w4-txn",
                                                     api_key=api_key)))
        size = struct.unpack(">i", self._read(4))[0]
        correlation, answer = decode_response(self._read(size), api_key, version)
        assert correlation == self.correlation
        return answer

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def _batches(path: Path) -> list:
    return list(iter_batches(b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))))


def test_w4_replays_through_the_transaction_path(odradek_broker_factory) -> None:
    if not W4.exists():
        pytest.skip("corpus W4 not available")
    workload = json.loads((W4 / "workload.json").read_text())
    manifest = [json.loads(line) for line in (W4 / "batches" / "manifest.jsonl").read_text().splitlines() if line]
    sent = {p: [(W4 / "batches" / m["file"]).read_bytes() for m in manifest if m["partition"] == p] for p in (0, 1)}
    plan = [kind == "commit" for _i, _n, kind in workload["transactions"]]

    broker = odradek_broker_factory(start=False)
    # formatted as the Kafka 3.9 that captured W4 (transaction.version 0): from transaction.version
    # 1 on, Kafka (and Odradek) write the flexible TransactionLogValue v1 instead
    assert odradek_main(["storage", "format", "-t", "q1w2e3r4t5y6u7i8o9p0AA", "--override",
                         f"log.dirs={broker.log_dirs[0]}", "--release-version", "3.9"]) == 0
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic("w4-txn", 2, 1, config=workload["topic_config"]["w4-txn"])]).values():
        fut.result(30)
    client = RawClient(broker.host, broker.port)
    try:
        init = client.call(22, 1, request_class(22)(transactional_id=TXN_ID, transaction_timeout_ms=60_000))
        assert init.error_code == 0
        if (init.producer_id, init.producer_epoch) != (0, 0):
            pytest.skip(f"the broker handed out producer id {init.producer_id}; W4's batches carry id 0")
        AP, PR, ET = request_class(24), request_class(0), request_class(26)
        for k, commit in enumerate(plan):
            added = client.call(24, 3, AP(v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=0,
                                          v3_and_below_producer_epoch=0, v3_and_below_topics=[
                                              AP.AddPartitionsToTxnTopic(name="w4-txn", partitions=[0, 1])]))
            assert all(r.partition_error_code == 0 for t in added.results_by_topic_v3_and_below
                       for r in t.results_by_partition)
            for p in (0, 1):
                produced = client.call(0, 8, PR(transactional_id=TXN_ID, acks=-1, timeout_ms=30_000, topic_data=[
                    PR.TopicProduceData(name="w4-txn", partition_data=[
                        PR.PartitionProduceData(index=p, records=sent[p][k])])]))
                assert produced.responses[0].partition_responses[0].error_code == 0
            ended = client.call(26, 3, ET(transactional_id=TXN_ID, producer_id=0, producer_epoch=0, committed=commit))
            assert ended.error_code == 0
    finally:
        client.close()
    broker.stop()

    original = W4 / "logdir-clean"
    for p in (0, 1):
        ours_dir, theirs_dir = broker.log_dir / f"w4-txn-{p}", original / f"w4-txn-{p}"
        ours, theirs = _batches(ours_dir), _batches(theirs_dir)
        assert len(ours) == len(theirs) == 16
        for a, b in zip(ours, theirs, strict=True):
            ha, hb = a.header(), b.header()
            if hb.attributes & 0x20:
                ma, mb = parse_end_txn_marker(next(iter(a.records()))), parse_end_txn_marker(next(iter(b.records())))
                assert (ha.base_offset, ha.producer_id, ha.producer_epoch, ha.attributes, ha.partition_leader_epoch,
                        ma.control_type, ma.coordinator_epoch) == \
                       (hb.base_offset, hb.producer_id, hb.producer_epoch, hb.attributes, hb.partition_leader_epoch,
                        mb.control_type, mb.coordinator_epoch)
            else:
                assert bytes(a.buffer) == bytes(b.buffer)  # data batches byte for byte
        names = sorted(f.name for f in theirs_dir.iterdir())
        assert sorted(f.name for f in ours_dir.iterdir()) == names
        for name in names:
            if name.endswith((".index", ".txnindex", "leader-epoch-checkpoint")):
                assert (ours_dir / name).read_bytes() == (theirs_dir / name).read_bytes(), name
            elif name.endswith(".snapshot"):
                strip = [(e.producer_id, e.producer_epoch, e.coordinator_epoch, e.current_txn_first_offset,
                          [(m.last_seq, m.last_offset, m.offset_delta) for m in e.batch_metadata])
                         for e in read_snapshot(ours_dir / name)]
                assert strip == [(e.producer_id, e.producer_epoch, e.coordinator_epoch, e.current_txn_first_offset,
                                  [(m.last_seq, m.last_offset, m.offset_delta) for m in e.batch_metadata])
                                 for e in read_snapshot(theirs_dir / name)], name

    def state_records(path: Path) -> list[tuple[bytes, tuple]]:
        out = []
        for batch in _batches(path):
            for r in batch.records():
                v = rec.decode_value(bytes(r.value))
                out.append((bytes(r.key), len(r.value), (
                    v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.transaction_status,
                    [(t.topic, list(t.partition_ids)) for t in v.transaction_partitions or []])))
        return out

    assert state_records(broker.log_dir / "__transaction_state-31") == state_records(original / "__transaction_state-31")
