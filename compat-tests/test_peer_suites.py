"""What the client projects' own test suites found (issue #22), as tests of ours, each checked
against Apache Kafka 4.4.0 as well:

* franz-go's TestTxnEtl (KIP-848 subtests) and librdkafka's transactional consumers: a member of a
  consumer-protocol group commits its offsets inside transactions (TxnOffsetCommit v3+ carrying
  the member id and epoch);
* librdkafka's test 0011: a batch with some key-less records to a compacted topic (and records
  with timestamps out of range) fails only those records, named by the broker (KIP-467).
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from client_helpers import read_committed
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ORACLE_VERSION = "4.4.0"

BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.consumer.min.heartbeat.interval.ms": "500",
                    "group.consumer.heartbeat.interval.ms": "500"}


# Tests that start Kafka through _start also ask for kafka_broker_factory: that marks them
# `oracle` (conftest), like every test that needs the Kafka jars.
def _start(broker_factory, kind: str):
    if kind == "kafka":
        return broker_factory("kafka", version=ORACLE_VERSION, overrides=BROKER_OVERRIDES)
    return broker_factory("odradek", overrides=BROKER_OVERRIDES)


def _create(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})]).values():
        fut.result(30)


# ------------------------------------------------------------------ per-record produce errors


def _delivery_reports(bootstrap: str, topic: str, records: list[tuple[bytes | None, int]]) -> list[tuple]:
    """Produce `records` (key, timestamp) as one batch; (index, error name, error text) per record."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2000, "batch.num.messages": 10_000,
                         "enable.idempotence": False, "retries": 0, "acks": "all"})
    # the first send waits for metadata; then every record goes into the same linger window
    producer.list_topics(topic, timeout=30)
    reports: dict[int, tuple] = {}

    def report(index: int):
        def done(err, msg) -> None:
            reports[index] = (index, None, None) if err is None else (index, err.name(), err.str())
        return done

    for index, (key, ts) in enumerate(records):
        producer.produce(topic, key=key, value=f"v{index}".encode(), timestamp=ts, on_delivery=report(index))
    assert producer.flush(60) == 0
    return [reports[i] for i in range(len(records))]


def _clock_free(text: str | None) -> str | None:
    """Kafka's timestamp message names the record's timestamp and the broker's window
    ([now - before, now + after]): both depend on the clock."""
    if text is None:
        return None
    text = re.sub(r"Timestamp -?\d+ of", "Timestamp .. of", text)
    return re.sub(r"within \[-?\d+, -?\d+\]", "within [..]", text)


def _normalised(reports: list[tuple]) -> list[tuple]:
    return [(i, name, _clock_free(text)) for i, name, text in reports]


def _raw_produce(broker, topic: str, records: list[tuple[bytes | None, int]], log_append_time: bool = False) -> tuple:
    """The partition answer of Produce v9 (record_errors and error_message, KIP-467) for one batch of
    `records`, as it is on the wire; timestamp windows normalised. `log_append_time`: the batch
    claims LogAppendTime (attribute bit 3), which a producer may not."""
    from odradek.tools.client import BrokerConnection
    from odradek.wire.protocol import request_class
    from odradek.wire.records import RecordBatch, SimpleRecord, build_batch

    batch = bytearray(build_batch([SimpleRecord(f"v{i}".encode(), key, (), ts)
                                   for i, (key, ts) in enumerate(records)]))
    if log_append_time:
        batch[21:23] = (RecordBatch(batch).attributes | 0x08).to_bytes(2, "big")
        batch[17:21] = RecordBatch(batch).compute_crc().to_bytes(4, "big")
    batch = bytes(batch)
    P = request_class(0)
    request = P(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])])
    connection = BrokerConnection(broker.host, broker.port)
    try:
        answer = connection.send(0, request, 9).responses[0].partition_responses[0]
    finally:
        connection.close()
    return (answer.error_code, answer.base_offset, answer.log_append_time_ms, answer.log_start_offset,
            [(e.batch_index, _clock_free(e.batch_index_error_message))
             for e in answer.record_errors],
            answer.error_message)


def _mixed_batches(broker) -> dict[str, object]:
    """Delivery reports of the mixed batches, and the raw answers to the same batches."""
    bootstrap = broker.bootstrap
    now = int(time.time() * 1000)
    compacted = "compacted-keys"
    _create(bootstrap, compacted, 1, {"cleanup.policy": "compact"})
    bounded = "compacted-times"
    # both bounds set: Kafka 4.4's default after.max.ms (1 h) need not be Odradek's
    _create(bootstrap, bounded, 1, {"cleanup.policy": "compact", "message.timestamp.before.max.ms": "3600000",
                                    "message.timestamp.after.max.ms": "3600000"})
    appended = "log-append-time"
    _create(bootstrap, appended, 1, {"message.timestamp.type": "LogAppendTime"})
    keyless = [(None if i % 4 == 1 else f"k{i}".encode(), now) for i in range(12)]
    day = 24 * 3600 * 1000
    mixed = [(b"a", now), (b"b", now - day), (None, now), (b"d", now + day), (None, now - day), (b"f", now)]
    return {"keyless": _delivery_reports(bootstrap, compacted, keyless),
            "timestamps": _delivery_reports(bootstrap, bounded, mixed),
            "keyless raw": _raw_produce(broker, compacted, keyless),
            "timestamps raw": _raw_produce(broker, bounded, mixed),
            "all fine raw": _raw_produce(broker, compacted, [(b"a", now)]),
            # the records' timestamp is the batch's max timestamp: fixed, so the messages are too
            "claims log append time raw": _raw_produce(
                broker, appended, [(b"a", 1_700_000_000_000), (None, 1_700_000_000_005)], log_append_time=True),
            # message.timestamp.after.max.ms is 1 h by default since Kafka 4.0
            "default bounds raw": _raw_produce(broker, compacted, [(b"a", now), (b"b", now + 2 * 3600 * 1000)]),
            "all fine reports": _delivery_reports(bootstrap, compacted, [(b"a", now), (b"b", now)])}


def test_mixed_batch_to_compacted_topic_fails_only_the_named_records(broker_factory, kafka_broker_factory) -> None:
    """librdkafka 0011: the broker names the failing records, so only they fail with the broker's
    error and message; the rest of the batch fails as "invalid different record"; the delivery
    reports are Kafka 4.4.0's for the same batches."""
    odradek = _start(broker_factory, "odradek")
    ours = _mixed_batches(odradek)
    odradek.stop()
    kafka = _start(broker_factory, "kafka")
    theirs = _mixed_batches(kafka)
    kafka.stop()

    keyless = ours["keyless"]
    named = [i for i, name, _ in keyless if name == "INVALID_RECORD"]
    assert named == [1, 5, 9], keyless
    assert all(name == "_INVALID_DIFFERENT_RECORD" for i, name, _ in keyless if i not in named), keyless
    # librdkafka gives each named record INVALID_RECORD, whatever the partition's error
    assert [name for _, name, _ in ours["timestamps"]] == [
        "_INVALID_DIFFERENT_RECORD", "INVALID_RECORD", "INVALID_RECORD", "INVALID_RECORD",
        "INVALID_RECORD", "_INVALID_DIFFERENT_RECORD"], ours["timestamps"]
    key_rule = "Compacted topic cannot accept message without key in topic partition compacted-times-0"
    assert ours["timestamps raw"][0] == KafkaError.INVALID_TIMESTAMP
    assert ours["timestamps raw"][4][1] == (2, key_rule)
    assert ours["all fine reports"] == [(0, None, None), (1, None, None)]
    assert [i for i, _ in ours["default bounds raw"][4]] == [1]
    claimed = ours["claims log append time raw"]
    assert claimed[0] == KafkaError.INVALID_TIMESTAMP and [i for i, _ in claimed[4]] == [0, 1], claimed
    for case in ours:
        assert _normalised(ours[case]) == _normalised(theirs[case]) if "raw" not in case else \
            ours[case] == theirs[case], (case, ours[case], theirs[case])


# ------------------------------------------------------------------ KIP-848 members in transactions


def _committed_output(bootstrap: str, topic: str, partitions: int) -> list[str]:
    """Every value a read_committed consumer finds in `topic`."""
    return [v.decode() for v in read_committed(bootstrap, topic, partitions)]


@pytest.mark.parametrize("kind", [pytest.param("kafka", marks=pytest.mark.oracle), "odradek"])
def test_kip848_member_commits_offsets_in_transactions(broker_factory, kind: str) -> None:
    """Consume-transform-produce with a consumer-protocol (KIP-848) member: librdkafka commits the
    member's offsets with TxnOffsetCommit carrying the member id and epoch; every third
    transaction is aborted and redone. The read_committed output holds each input exactly once
    and the group's committed offsets are the inputs' ends, on Kafka 4.4.0 as on Odradek."""
    broker = _start(broker_factory, kind)
    bootstrap = broker.bootstrap
    src, dst, partitions, n = "eos848-in", "eos848-out", 3, 600
    _create(bootstrap, src, partitions)
    _create(bootstrap, dst, partitions)
    feeder = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        feeder.produce(src, key=str(i).encode(), value=str(i).encode())
    assert feeder.flush(30) == 0

    group = "eos848-group"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos848-txn"})
    producer.init_transactions(30)
    consumer.subscribe([src])
    done = aborted = transactions = idle = 0
    try:
        while done < n and idle < 20:
            msgs = [m for m in consumer.consume(50, timeout=1.0) if m.error() is None]
            if not msgs:
                idle += 1
                continue
            idle = 0
            transactions += 1
            producer.begin_transaction()
            for m in msgs:
                producer.produce(dst, key=m.key(), value=b"out-" + m.value())
            metadata = consumer.consumer_group_metadata()
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()), metadata, 30)
            if transactions % 3 == 0:
                producer.abort_transaction(30)
                aborted += 1
                # rewind to the committed offsets, as an exactly-once application does after an abort
                for tp in consumer.committed(consumer.assignment(), timeout=10):
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                continue
            producer.commit_transaction(30)
            done += len(msgs)
        committed = {tp.partition: tp.offset
                     for tp in consumer.committed([TopicPartition(src, p) for p in range(partitions)], timeout=10)}
    finally:
        consumer.close()
    assert aborted > 0 and done == n
    assert committed == _ends(bootstrap, src, partitions)
    assert sorted(_committed_output(bootstrap, dst, partitions)) == sorted(f"out-{i}" for i in range(n))


def _ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:6]}"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


# ------------------------------------------------------------------ the other produce refusals


def _refusals(broker) -> dict[str, tuple]:
    """Partition answers of Produce v9 to batches refused for a reason other than a record's:
    Kafka sends no error message with them, and a log start offset only where ReplicaManager
    does not expect the error."""
    from odradek.tools.client import BrokerConnection
    from odradek.wire.protocol import request_class
    from odradek.wire.records import RecordBatch, SimpleRecord, build_batch

    bootstrap = broker.bootstrap
    _create(bootstrap, "refusals", 1, {"max.message.bytes": "2000"})
    connection = BrokerConnection(broker.host, broker.port)
    Find = request_class(10)
    for _ in range(100):  # the offsets topic is created by the first FindCoordinator for a group
        found = connection.send(10, Find(key_type=0, coordinator_keys=["g"]), 4).coordinators[0]
        if found.error_code == 0:
            break
        time.sleep(0.2)
    P = request_class(0)

    def produce(topic: str, records: bytes) -> tuple:
        request = P(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[P.TopicProduceData(
            name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])])
        a = connection.send(0, request, 9).responses[0].partition_responses[0]
        return (a.error_code, a.base_offset, a.log_append_time_ms, a.log_start_offset,
                [(e.batch_index, e.batch_index_error_message) for e in a.record_errors], a.error_message)

    def batch(n: int = 2, size: int = 10) -> bytearray:
        return bytearray(build_batch([SimpleRecord(b"v" * size, b"k") for _ in range(n)]))

    bad_count = batch()
    bad_count[23:27] = (5).to_bytes(4, "big")  # lastOffsetDelta 5 for two records
    bad_count[17:21] = RecordBatch(bad_count).compute_crc().to_bytes(4, "big")
    bad_crc = batch()
    bad_crc[-1] ^= 0xFF
    try:
        return {
            "accepted": produce("refusals", bytes(batch())),
            "internal topic": produce("__consumer_offsets", bytes(batch())),
            "no records": produce("refusals", b""),
            "two batches": produce("refusals", bytes(batch() + batch())),
            "count": produce("refusals", bytes(bad_count)),
            "too large": produce("refusals", bytes(batch(3, 1000))),
            "crc": produce("refusals", bytes(bad_crc)),
        }
    finally:
        connection.close()


def test_produce_refusals_answer_like_kafka(broker_factory, kafka_broker_factory) -> None:
    """Batches refused for a reason other than a record's get the answer Kafka 4.4.0 gives."""
    odradek = _start(broker_factory, "odradek")
    ours = _refusals(odradek)
    odradek.stop()
    kafka = _start(broker_factory, "kafka")
    theirs = _refusals(kafka)
    kafka.stop()
    assert ours == theirs


# ------------------------------------------------------------------ commits with older member epochs


def _older_epoch_commits(broker) -> list[tuple]:
    """Two consumer-protocol members share a topic; then transactional offset commits with the
    members' older and current epochs, as raw requests: (step, per-partition error codes)."""
    from odradek.tools.client import BrokerConnection
    from odradek.wire.protocol import request_class

    topic, group, txn = "epochs", "epochs-group", "epochs-txn"
    _create(broker.bootstrap, topic, 4)
    c = BrokerConnection(broker.host, broker.port)
    HB, Find, Init, AddOffsets, Commit, End = (request_class(k) for k in (68, 10, 22, 25, 28, 26))

    def retried(api_key: int, version: int, body, code_of=lambda r: r.error_code):
        for _ in range(150):  # coordinators of a fresh broker need a moment
            answer = c.send(api_key, body, version)
            if code_of(answer) not in (14, 15, 16, 51):
                return answer
            time.sleep(0.1)
        return answer

    for key_type, key in ((0, group), (1, txn)):
        retried(10, 4, Find(key_type=key_type, coordinator_keys=[key]), lambda r: r.coordinators[0].error_code)
    members: dict[str, dict] = {}

    def beat(name: str) -> None:
        m = members.setdefault(name, {"epoch": 0, "owned": None, "assigned": []})
        joining = m["epoch"] == 0
        owned = None if m["owned"] is None else [HB.TopicPartitions(topic_id=t, partitions=ps) for t, ps in m["owned"]]
        r = retried(68, 1, HB(group_id=group, member_id=f"{name}-member-id-0000000", member_epoch=m["epoch"],
                              rebalance_timeout_ms=30_000, server_assignor="range",
                              subscribed_topic_names=[topic] if joining else None,
                              topic_partitions=owned if owned is not None else ([] if joining else None)))
        assert r.error_code == 0, (name, r.error_code, r.error_message)
        m["epoch"] = r.member_epoch
        if r.assignment is not None:  # the client takes the assignment: it owns it from now on
            m["owned"] = [(tp.topic_id, sorted(tp.partitions)) for tp in r.assignment.topic_partitions]
            m["assigned"] = sorted(p for tp in r.assignment.topic_partitions for p in tp.partitions)

    def settle(names: list[str]) -> None:
        """Heartbeat until every member holds partitions, all 4 are held, twice the same (Kafka 4.4
        computes assignments at most every group.consumer.assignment.interval.ms)."""
        last = None
        for _ in range(100):
            for name in names:
                beat(name)
            now = [(members[n]["epoch"], members[n]["assigned"]) for n in names]
            if now == last and all(a for _, a in now) and sum(len(a) for _, a in now) == 4:
                return
            last = now
            time.sleep(0.2)
        raise AssertionError(f"the group did not settle: {members}")

    beat("a")
    settle(["a"])
    first_epoch = members["a"]["epoch"]
    beat("b")
    settle(["a", "b"])
    a, b = members["a"], members["b"]
    init = retried(22, 4, Init(transactional_id=txn, transaction_timeout_ms=60_000))
    pid, pepoch = init.producer_id, init.producer_epoch
    assert retried(25, 3, AddOffsets(transactional_id=txn, producer_id=pid, producer_epoch=pepoch,
                                     group_id=group)).error_code == 0

    def commit(name: str, epoch: int, partitions: list[int]) -> list[int]:
        T = Commit.TxnOffsetCommitRequestTopic
        r = c.send(28, Commit(transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=pepoch,
                              generation_id_or_member_epoch=epoch, member_id=f"{name}-member-id-0000000",
                              topics=[T(name=topic, partitions=[Commit.TxnOffsetCommitRequestPartition(
                                  partition_index=p, committed_offset=1) for p in partitions])]), 4)
        return [p.error_code for t in r.topics for p in t.partitions]

    Plain = request_class(8)

    def plain(name: str, epoch: int, partitions: list[int]) -> list[int]:
        T = Plain.OffsetCommitRequestTopic
        r = c.send(8, Plain(group_id=group, generation_id_or_member_epoch=epoch, member_id=f"{name}-member-id-0000000",
                            topics=[T(name=topic, partitions=[Plain.OffsetCommitRequestPartition(
                                partition_index=p, committed_offset=1) for p in partitions])]), 9)
        return [p.error_code for t in r.topics for p in t.partitions]

    # epochs are compared by order only: Kafka 4.4 may bump the group epoch more than once per join
    out = [("epochs", (first_epoch < a["epoch"], a["epoch"] == b["epoch"], a["assigned"], b["assigned"])),
           ("a, first epoch, its partitions", commit("a", first_epoch, a["assigned"])),
           ("a, first epoch, b's partition", commit("a", first_epoch, b["assigned"][:1])),
           ("b, first epoch", commit("b", first_epoch, b["assigned"])),
           ("a, current epoch", commit("a", a["epoch"], a["assigned"])),
           ("a, newer epoch", commit("a", a["epoch"] + 1, a["assigned"])),
           ("plain: a, first epoch, its partitions", plain("a", first_epoch, a["assigned"])),
           ("plain: a, first epoch, b's partition", plain("a", first_epoch, b["assigned"][:1])),
           ("plain: b, first epoch", plain("b", first_epoch, b["assigned"]))]
    c.send(26, End(transactional_id=txn, producer_id=pid, producer_epoch=pepoch, committed=False), 3)
    c.close()
    return out


def test_commit_with_an_older_member_epoch_like_kafka(broker_factory, kafka_broker_factory) -> None:
    """Kafka 4.4 accepts a member's commit (TxnOffsetCommit v4, OffsetCommit v9) with an older
    member epoch for the partitions it has held since that epoch, and refuses it for others
    (ILLEGAL_GENERATION before TxnOffsetCommit v6, else STALE_MEMBER_EPOCH), as Odradek does."""
    odradek = _start(broker_factory, "odradek")
    ours = _older_epoch_commits(odradek)
    odradek.stop()
    kafka = _start(broker_factory, "kafka")
    theirs = _older_epoch_commits(kafka)
    kafka.stop()
    assert ours == theirs
    codes = dict(ours)
    assert set(codes["a, first epoch, its partitions"]) == {0} and set(codes["a, current epoch"]) == {0}
    assert set(codes["a, first epoch, b's partition"]) == {KafkaError.ILLEGAL_GENERATION}
    assert set(codes["b, first epoch"]) == {KafkaError.ILLEGAL_GENERATION}
    assert set(codes["plain: a, first epoch, its partitions"]) == {0}
    assert set(codes["plain: b, first epoch"]) == {KafkaError.STALE_MEMBER_EPOCH}
