"""Transactions V2 (KIP-890 part 2, issue #23 must-show 6): the stock Java 4.4 producer, with
transaction.version 2 finalized, runs several transactions in a row on one producer (every
commit/abort bumps its epoch; partitions are added by the partition leaders from Produce v12);
read_committed returns exactly the committed records, and the ``__transaction_state`` records
Odradek writes equal Kafka 4.4.0's for the same sequence except for their timestamps.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from kafka_oracle import KAFKA_4_4, _clients_jar, java_bin, kafka_classpath, require_tool

from odradek.txn_coordinator import records as rec
from odradek.wire.records import iter_batches, parse_end_txn_marker

SOURCE = Path(__file__).resolve().parent / "java-tv2" / "TxnSequence.java"
TOPIC = "tv2"
TXN_ID = "tv2-producer"
# commit / abort with records in both partitions, an abort and a commit with nothing sent, a last commit
PLAN = "commit:4,abort:3,commit:2,abort:0,commit:0,commit:1"


@pytest.fixture(scope="module")
def txn_sequence() -> Path:
    """TxnSequence compiled against kafka-clients 4.4.0 (a directory for the classpath)."""
    require_tool(f"kafka-{KAFKA_4_4}")
    out = Path(tempfile.mkdtemp(prefix="tv2-java-"))
    proc = subprocess.run([java_bin("javac"), "-nowarn", "--release", "17", "-cp", _clients_jar(KAFKA_4_4),
                           "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


def _run_plan(classes: Path, bootstrap: str) -> list[dict]:
    cp = f"{classes}:{kafka_classpath(KAFKA_4_4)}"
    proc = subprocess.run([java_bin("java"), "-Xmx256m", "-cp", cp, "TxnSequence", bootstrap, TOPIC, TXN_ID, PLAN],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _expected_committed() -> list[str]:
    out = []
    for step, item in enumerate(PLAN.split(",")):
        kind, n = item.split(":")
        if kind == "commit":
            out += [f"{step}-{i}" for i in range(int(n))]
    return out


def _state_records(log_dir: Path) -> list[tuple[bytes, bytes | None]]:
    """(key, value with its timestamps zeroed) of the producer's __transaction_state partition,
    re-encoded so the comparison is byte for byte for everything else."""
    part = log_dir / f"{rec.TRANSACTION_STATE_TOPIC}-{rec.partition_for(TXN_ID, 50)}"
    out = []
    for batch in iter_batches(b"".join(p.read_bytes() for p in sorted(part.glob("*.log")))):
        for r in batch.records():
            value = None if r.value is None else bytes(r.value)
            if value is not None:
                version = int.from_bytes(value[:2], "big")
                decoded = rec.decode_value(value)
                assert rec.encode_value(decoded, version) == value  # the codec gives the bytes back
                decoded.transaction_last_update_timestamp_ms = 0
                if decoded.transaction_start_timestamp_ms != -1:
                    decoded.transaction_start_timestamp_ms = 0
                value = rec.encode_value(decoded, version)
            out.append((bytes(r.key), value))
    return out


def _describe(records: list[tuple[bytes, bytes | None]]) -> list[tuple]:
    """The records readably, for the assertion message."""
    out = []
    for key, value in records:
        v = rec.decode_value(value)
        version = int.from_bytes(value[:2], "big")
        out.append((rec.decode_key(key), version, v.producer_id, v.producer_epoch, v.transaction_status,
                    v.previous_producer_id if version else None, v.next_producer_id if version else None,
                    v.client_transaction_version if version else None,
                    None if v.transaction_partitions is None else
                    [(p.topic, list(p.partition_ids)) for p in v.transaction_partitions]))
    return out


def _data_batches(log_dir: Path) -> list[tuple]:
    """Every batch of the data partitions but its timestamps and CRC: offsets, producer id and
    epoch (bumped per transaction), sequences, attributes, and each marker's type and epoch."""
    out = []
    for p in (0, 1):
        part = log_dir / f"{TOPIC}-{p}"
        for batch in iter_batches(b"".join(f.read_bytes() for f in sorted(part.glob("*.log")))):
            h = batch.header()
            marker = None
            if h.attributes & 0x20:
                m = parse_end_txn_marker(next(iter(batch.records())))
                marker = (m.control_type, m.coordinator_epoch)
            out.append((p, h.base_offset, h.last_offset_delta, h.producer_id, h.producer_epoch, h.base_sequence,
                        h.attributes, h.partition_leader_epoch, marker))
    return out


def _scenario(broker, java_client, classes: Path) -> tuple[list[tuple[bytes, bytes | None]], list[tuple]]:
    client = java_client(broker.bootstrap, version=KAFKA_4_4)
    client.create_topic(TOPIC, partitions=2)
    steps = _run_plan(classes, broker.bootstrap)
    assert [s.get("result") for s in steps[:-1]] == [i.split(":")[0] for i in PLAN.split(",")]
    committed = client.consume(TOPIC, isolation="read_committed", idle_timeout_ms=3000)
    everything = client.consume(TOPIC, isolation="read_uncommitted", idle_timeout_ms=3000)
    # partition by partition, in order; the aborted records only for read_uncommitted
    expected = _expected_committed()
    for p in (0, 1):
        got = [r.value.decode() for r in committed if r.partition == p]
        assert got == [v for v in expected if int(v.split("-")[1]) % 2 == p]
    assert sorted(r.value.decode() for r in everything) == sorted(expected + [f"1-{i}" for i in range(3)])
    broker.stop()
    return _state_records(broker.log_dirs[0]), _data_batches(broker.log_dirs[0])


def test_java_44_transactions_v2_match_kafka_44(java_client, kafka_broker_factory, odradek_broker_factory,
                                                txn_sequence: Path) -> None:
    kafka = kafka_broker_factory(version=KAFKA_4_4)
    theirs, their_batches = _scenario(kafka, java_client, txn_sequence)
    ours, our_batches = _scenario(odradek_broker_factory(), java_client, txn_sequence)
    # TV2 shows in Kafka's records: value version 1, ClientTransactionVersion 2, epochs bumped per end
    described = _describe(theirs)
    assert {d[1] for d in described} == {1} and described[-1][7] == 2
    # the client ends a transaction it sent nothing in without asking the coordinator
    assert described[-1][3] == sum(1 for item in PLAN.split(",") if not item.endswith(":0"))
    assert _describe(ours) == described
    assert ours == theirs
    # the data partitions: each transaction's batches and markers under its own epoch, as Kafka's
    marker_epochs = [b[4] for b in their_batches if b[0] == 0 and b[8] is not None]
    assert len(marker_epochs) >= 3 and marker_epochs == sorted(set(marker_epochs))
    assert our_batches == their_batches


# ----------------------------------------------------------------------------- the V2 state table


def _v2_answers(broker) -> tuple[list[tuple], list[tuple]]:
    """A fixed series of V2 requests (InitProducerId v5, Produce v12, EndTxn v5) with its answers,
    producer id as 'P', then the transactional id's __transaction_state records: retries told by the
    epoch, commits and aborts with nothing open, fenced epochs, InitProducerId during a transaction."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from odradek.tools.client import BrokerConnection
    from odradek.wire.protocol import request_class
    from odradek.wire.records import SimpleRecord, build_batch

    topic, tid = "tv2-checks", "tv2-checks"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)
    c = BrokerConnection(broker.host, broker.port)
    Init, End, Desc, Produce = (request_class(k) for k in (22, 26, 65, 0))
    busy = (14, 15, 16, 51)  # coordinator loading / moved / busy: clients retry these

    def call(api_key: int, version: int, body, code_of=lambda r: r.error_code, retry: bool = True):
        for _ in range(150):
            answer = c.send(api_key, body, version)
            if not retry or code_of(answer) not in busy:
                return answer
            time.sleep(0.1)
        return answer

    call(10, 4, request_class(10)(key_type=1, coordinator_keys=[tid]), lambda r: r.coordinators[0].error_code)
    pid = None

    def ids(r) -> tuple:
        return ("P" if r.producer_id == pid else r.producer_id, r.producer_epoch)

    def init(expected: tuple[int, int] = (-1, -1), retry: bool = True) -> tuple:
        nonlocal pid
        r = call(22, 5, Init(transactional_id=tid, transaction_timeout_ms=60_000, producer_id=expected[0],
                             producer_epoch=expected[1]), retry=retry)
        if pid is None and r.error_code == 0:
            pid = r.producer_id
        return ("init", expected[1], r.error_code, *ids(r))

    def end(epoch: int, commit: bool) -> tuple:
        r = c.send(26, End(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit), 5)
        return ("end", epoch, commit, r.error_code, *ids(r))

    def produce(epoch: int, seq: int) -> tuple:
        batch = build_batch([SimpleRecord(b"v%d" % seq, None, (), int(time.time() * 1000))], producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq, is_transactional=True)
        r = c.send(0, Produce(transactional_id=tid, acks=-1, timeout_ms=30_000, topic_data=[
            Produce.TopicProduceData(name=topic, partition_data=[
                Produce.PartitionProduceData(index=0, records=bytes(batch))])]), 12)
        return ("produce", epoch, seq, r.responses[0].partition_responses[0].error_code)

    def settled() -> tuple:
        # Kafka writes markers after answering EndTxn: wait for Complete* before the next step
        for _ in range(150):
            s = c.send(65, Desc(transactional_ids=[tid]), 0).transaction_states[0]
            if s.transaction_state not in ("PrepareCommit", "PrepareAbort"):
                break
            time.sleep(0.1)
        return ("state", s.transaction_state, s.producer_epoch)

    out = [init(), end(0, True), end(0, False), settled(), end(0, False), end(0, True), end(1, True)]
    out += [produce(1, 0), produce(0, 0), end(1, True), settled(), end(1, True), end(2, True), end(3, False)]
    out += [produce(2, 0), produce(2, 1), init(retry=False), settled(), end(2, False), end(2, True)]
    out += [init((pid, 2)), init((pid, 1)), init(), settled(), end(4, False), settled()]
    c.close()
    broker.stop()
    part = broker.log_dirs[0] / f"{rec.TRANSACTION_STATE_TOPIC}-{rec.partition_for(tid, 50)}"
    records = []
    for batch in iter_batches(b"".join(p.read_bytes() for p in sorted(part.glob("*.log")))):
        for r in batch.records():
            v = rec.decode_value(bytes(r.value))
            records.append((v.transaction_status, "P" if v.producer_id == pid else v.producer_id, v.producer_epoch,
                            "P" if v.previous_producer_id == pid else v.previous_producer_id, v.next_producer_id,
                            v.client_transaction_version, v.transaction_start_timestamp_ms == -1,
                            None if v.transaction_partitions is None else
                            [(t.topic, list(t.partition_ids)) for t in v.transaction_partitions]))
    return out, records


def test_v2_state_table_like_kafka_44(kafka_broker_factory, odradek_broker_factory) -> None:
    """The same V2 series gets the same answers and the same __transaction_state records (but
    timestamps) from Kafka 4.4.0 and Odradek."""
    theirs = _v2_answers(kafka_broker_factory(version=KAFKA_4_4))
    ours = _v2_answers(odradek_broker_factory())
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    assert ("end", 1, True, 0, "P", 2) in ours[0]  # a commit answers the bumped epoch


def _v1_client_records(broker) -> tuple[list[tuple], list[tuple]]:
    """A version 1 client's series (InitProducerId v4, AddPartitionsToTxn v3, Produce v9, EndTxn v4)
    on a cluster with transaction.version 2 finalized: answers and __transaction_state records."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from odradek.tools.client import BrokerConnection
    from odradek.wire.protocol import request_class
    from odradek.wire.records import SimpleRecord, build_batch

    topic, tid = "tv1-checks", "tv1-checks"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)
    c = BrokerConnection(broker.host, broker.port)
    Init, Add, End, Desc, Produce = (request_class(k) for k in (22, 24, 26, 65, 0))
    for _ in range(150):
        if c.send(10, request_class(10)(key_type=1, coordinator_keys=[tid]), 4).coordinators[0].error_code == 0:
            break
        time.sleep(0.1)
    pid = None

    def init(expected: tuple[int, int] = (-1, -1), retry: bool = True) -> tuple:
        nonlocal pid
        for _ in range(150):
            r = c.send(22, Init(transactional_id=tid, transaction_timeout_ms=60_000, producer_id=expected[0],
                                producer_epoch=expected[1]), 4)
            if not retry or r.error_code not in (14, 15, 16, 51):
                break
            time.sleep(0.1)
        if pid is None and r.error_code == 0:
            pid = r.producer_id
        return ("init", expected[1], r.error_code, "P" if r.producer_id == pid else r.producer_id, r.producer_epoch)

    def add(epoch: int) -> tuple:
        r = c.send(24, Add(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                           v3_and_below_producer_epoch=epoch,
                           v3_and_below_topics=[Add.AddPartitionsToTxnTopic(name=topic, partitions=[0])]), 3)
        return ("add", epoch, r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    def produce(epoch: int, seq: int) -> tuple:
        batch = build_batch([SimpleRecord(b"v", None, (), int(time.time() * 1000))], producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq, is_transactional=True)
        r = c.send(0, Produce(transactional_id=tid, acks=-1, timeout_ms=30_000, topic_data=[
            Produce.TopicProduceData(name=topic, partition_data=[
                Produce.PartitionProduceData(index=0, records=bytes(batch))])]), 9)
        return ("produce", epoch, seq, r.responses[0].partition_responses[0].error_code)

    def end(epoch: int, commit: bool) -> tuple:
        r = c.send(26, End(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit), 4)
        return ("end", epoch, commit, r.error_code)

    def settled() -> tuple:
        for _ in range(150):
            s = c.send(65, Desc(transactional_ids=[tid]), 0).transaction_states[0]
            if s.transaction_state not in ("PrepareCommit", "PrepareAbort"):
                break
            time.sleep(0.1)
        return ("state", s.transaction_state, s.producer_epoch)

    out = [init(), produce(0, 0), add(0), produce(0, 0), end(0, True), settled(), end(0, True), end(0, False)]
    out += [add(0), produce(0, 1), init(retry=False), settled(), init((pid, 0)), init(), settled()]
    out += [add(2), end(2, False), settled()]
    c.close()
    broker.stop()
    part = broker.log_dirs[0] / f"{rec.TRANSACTION_STATE_TOPIC}-{rec.partition_for(tid, 50)}"
    records = []
    for batch in iter_batches(b"".join(p.read_bytes() for p in sorted(part.glob("*.log")))):
        for r in batch.records():
            value = bytes(r.value)
            v = rec.decode_value(value)
            records.append((int.from_bytes(value[:2], "big"), v.transaction_status,
                            "P" if v.producer_id == pid else v.producer_id, v.producer_epoch,
                            "P" if v.previous_producer_id == pid else v.previous_producer_id,
                            v.next_producer_id, v.client_transaction_version, len(value)))
    return out, records


def test_v1_client_on_a_v2_cluster_like_kafka_44(kafka_broker_factory, odradek_broker_factory) -> None:
    """A version 1 client keeps the version 1 answers; the records are Kafka 4.4's flexible values
    (the finalized level's), and the coordinator's own fence takes the finalized level's rules."""
    theirs = _v1_client_records(kafka_broker_factory(version=KAFKA_4_4))
    ours = _v1_client_records(odradek_broker_factory())
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    assert {r[0] for r in ours[1]} == {1}
