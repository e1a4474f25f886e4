"""Replay of corpus workload W4 (Kafka 3.9, confluent-kafka transactions) through Odradek's own
transaction path, and producer snapshots built by appends compared with Kafka's bytes.

W4 is 8 transactions over w4-txn-0/1 (#2 and #5 aborted). The replay drives the coordinator the way
the client did (InitProducerId, AddPartitionsToTxn, the captured data batches through the produce
path, EndTxn); the markers get the broker clock of the original run (read from the original log),
so every data-partition file must come out byte-identical: .log (data and markers), .index,
.timeindex, .txnindex, .snapshot, leader-epoch-checkpoint. ``__transaction_state-31`` holds the
same records (key bytes, value sizes, every field but the broker timestamps).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from txn_testutil import FakeBroker

from odradek.logstore.config import LogConfig
from odradek.logstore.partition_log import PartitionLog
from odradek.logstore.producer_state import ProducerStateEntry, read_snapshot
from odradek.txn_coordinator import TransactionCoordinator, TxnState
from odradek.txn_coordinator import records as rec
from odradek.wire.records import SimpleRecord, build_batch, iter_batches, parse_end_txn_marker

CORPUS = Path("/work/shared/fixtures/kafka-corpus/W4")
SNAPSHOTS = Path("/work/shared/fixtures/kafka-real/synthetic-genuine-code/producer-snapshots")
TXN_ID = "w4-txn-producer"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"fixture {path} not available")
    return path


def _log_batches(path: Path) -> list:
    buf = b"".join(p.read_bytes() for p in sorted(path.glob("*.log")))
    return list(iter_batches(buf))


def test_w4_replays_byte_identically(tmp_path: Path) -> None:
    _need(CORPUS)
    workload = json.loads((CORPUS / "workload.json").read_text())
    manifest = [json.loads(line) for line in (CORPUS / "batches" / "manifest.jsonl").read_text().splitlines() if line]
    sent = {p: [bytearray((CORPUS / "batches" / m["file"]).read_bytes()) for m in manifest if m["partition"] == p]
            for p in (0, 1)}
    original = CORPUS / "logdir-clean"
    markers = [b for b in _log_batches(original / "w4-txn-0") if b.header().attributes & 0x20]
    marker_times = [b.header().max_timestamp for b in markers]
    plan = [kind == "commit" for _i, _n, kind in workload["transactions"]]
    assert len(plan) == len(marker_times) == len(sent[0]) == len(sent[1]) == 8

    broker = FakeBroker(tmp_path, **{"transaction.state.log.num.partitions": "50"})
    broker.metadata.create_topic("w4-txn", 2, dict(workload["topic_config"]["w4-txn"]))
    coordinator = TransactionCoordinator(broker)
    broker.coordinators["transactions"] = coordinator
    state_records = rec.read_records(_open_original(original / "__transaction_state-31", tmp_path))
    first_ts = rec.decode_value(state_records[0][1]).transaction_last_update_timestamp_ms
    pid, epoch = coordinator.handle_init_producer_id(TXN_ID, 60_000, -1, -1, first_ts)
    assert (pid, epoch) == (0, 0)  # the first id of the first block, as KRaft gave Kafka
    for k, commit in enumerate(plan):
        coordinator.add_partitions(TXN_ID, pid, epoch, [("w4-txn", 0), ("w4-txn", 1)], marker_times[k] - 50)
        for p in (0, 1):
            broker.partition_log("w4-txn", p).append_as_leader(sent[p][k], 0, marker_times[k] - 40)
        coordinator.end_transaction(TXN_ID, pid, epoch, commit, marker_times[k])
    assert coordinator.txns[TXN_ID].state == TxnState.COMPLETE_COMMIT
    for plog in broker.logs.values():
        plog.close()

    for p in (0, 1):
        ours, theirs = tmp_path / f"w4-txn-{p}", original / f"w4-txn-{p}"
        names = sorted(f.name for f in theirs.iterdir() if f.name != "partition.metadata")
        assert sorted(f.name for f in ours.iterdir() if f.name != "partition.metadata") == names
        for name in names:
            assert (ours / name).read_bytes() == (theirs / name).read_bytes(), f"w4-txn-{p}/{name}"

    # __transaction_state-31: same keys and values except the broker's timestamps
    ours_records = rec.read_records(_reopen(tmp_path))
    assert len(ours_records) == len(state_records) == 25

    def strip(value: bytes) -> tuple:
        v = rec.decode_value(value)
        return (v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.transaction_status,
                [(t.topic, list(t.partition_ids)) for t in v.transaction_partitions or []],
                v.transaction_start_timestamp_ms == -1)

    for (k1, v1), (k2, v2) in zip(ours_records, state_records, strict=True):
        assert k1 == k2 and len(v1) == len(v2)
        assert strip(v1) == strip(v2)
    snap = "00000000000000000025.snapshot"
    assert (tmp_path / "__transaction_state-31" / snap).read_bytes() == \
        (original / "__transaction_state-31" / snap).read_bytes()
    # and the markers decode as Kafka wrote them: coordinator epoch 0, producer 0 epoch 0
    for b in _log_batches(tmp_path / "w4-txn-1"):
        h = b.header()
        if h.attributes & 0x20:
            m = parse_end_txn_marker(next(iter(b.records())))
            assert (h.producer_id, h.producer_epoch, m.coordinator_epoch) == (0, 0, 0)


def _open_original(path: Path, tmp_path: Path) -> PartitionLog:
    copy = tmp_path / "original-state" / path.name
    copy.mkdir(parents=True)
    for f in path.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    return PartitionLog.open(copy, LogConfig.from_props({}))


def _reopen(tmp_path: Path) -> PartitionLog:
    return PartitionLog.open(tmp_path / "__transaction_state-31", LogConfig.from_props({}))


def _batch(pid: int, epoch: int, seq: int, n: int, last_ts: int, txn: bool = False) -> bytearray:
    recs = [SimpleRecord(b"v", b"k", (), last_ts - (n - 1) + i) for i in range(n)]
    return bytearray(build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn))


@pytest.mark.parametrize("name", ["00000000000000000003.snapshot", "00000000000000000100.snapshot"])
def test_snapshot_from_appends_matches_kafka(tmp_path: Path, name: str) -> None:
    """Append the batches that give Kafka's genuine snapshot its entries, in offset order, close the
    log: the `.snapshot` at the LEO is byte-identical (entries in java.util.HashMap order)."""
    genuine = _need(SNAPSHOTS / name).read_bytes()
    entries = sorted(read_snapshot(SNAPSHOTS / name), key=lambda e: e.batch_metadata[-1].last_offset)
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig.from_props({"retention.ms": "-1"}))
    plog.become_leader(0)
    for e in entries:
        b = e.batch_metadata[-1]
        assert plog.log_end_offset == b.first_offset
        info = plog.append_as_leader(_batch(e.producer_id, e.producer_epoch, b.first_seq, b.offset_delta + 1,
                                            b.timestamp, e.current_txn_first_offset is not None), 0, b.timestamp)
        assert info.last_offset == b.last_offset
    for e in entries:
        # The genuine file gives producer 4242 coordinator epoch 7 with a transaction open since
        # offset 10: no marker fits in offsets 0..99, so that one field is set as Kafka held it.
        entry: ProducerStateEntry = plog.producer_state.producers[e.producer_id]
        entry.coordinator_epoch = e.coordinator_epoch
    plog.close()
    assert (tmp_path / "t-0" / name).read_bytes() == genuine
    # and it reads back as the same entries
    assert [(e.producer_id, e.current_txn_first_offset) for e in read_snapshot(tmp_path / "t-0" / name)] == \
        [(e.producer_id, e.current_txn_first_offset) for e in read_snapshot(SNAPSHOTS / name)]
