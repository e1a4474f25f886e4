"""Transactional producers against a real Odradek process (issue #6, must-show 2 and 3).

* confluent-kafka commits some transactions and aborts others: a ``read_committed`` consumer sees
  exactly the committed records, a ``read_uncommitted`` one all of them; the partitions'
  ``.txnindex`` files and COMMIT/ABORT markers decode (``odradek.tools.dump_log``, Kafka's format).
* The stock Java client does the same (commit and ``--abort``).
* A broker restart in the middle of an open transaction: the transaction is aborted when its
  timeout passes and read_committed consumers move past it.
* Consume-transform-produce with ``send_offsets_to_transaction`` in a consumer group, aborting every
  third transaction and restarting the broker half-way: the committed output holds every input
  record exactly once.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.tools.client import BrokerConnection

TXN_OVERRIDES = {
    # abort checks every 500 ms instead of Kafka's 10 s so the timeout tests stay short
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
}


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)


def _consume(bootstrap: str, topic: str, partitions: int, isolation: str, idle_s: float = 3.0) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of every record a consumer with `isolation` reads from the start."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    start = time.monotonic()
    deadline = start + 60
    # idle_s counts from the last record; before the first one the consumer gets 10 s to connect
    # and fetch (a loaded machine takes more than idle_s for that alone)
    last: float | None = None
    try:
        while time.monotonic() < deadline:
            now = time.monotonic()
            if (now - last >= idle_s) if last is not None else (now - start >= max(idle_s, 10.0)):
                break
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is not None:
                    continue
                out.append((m.partition(), m.offset(), m.value().decode()))
                last = time.monotonic()
    finally:
        consumer.close()
    return out


def _dump(path: Path) -> str:
    files = ",".join(str(p) for p in sorted(path.glob("*.log")) + sorted(path.glob("*.txnindex")))
    res = subprocess.run([sys.executable, "-m", "odradek.tools.dump_log", "--files", files, "--deep-iteration"],
                         capture_output=True, text=True, timeout=60, check=True)
    return res.stdout


def _run_transactions(producer: Producer, topic: str, plan: list[bool], per_txn: int) -> list[str]:
    """One transaction per plan entry (True = commit); returns the values that were committed."""
    committed = []
    for t, commit in enumerate(plan):
        producer.begin_transaction()
        values = [f"t{t}-r{i}" for i in range(per_txn)]
        for i, v in enumerate(values):
            producer.produce(topic, key=str(i).encode(), value=v.encode())
        # librdkafka drops unsent records on abort: flush so the aborted data is really in the log
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
            committed += values
        else:
            producer.abort_transaction(30)
    return committed


def test_confluent_commit_and_abort_read_committed_and_markers(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides=TXN_OVERRIDES)
    bootstrap = broker.bootstrap
    topic = f"txn-ck-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tid-{topic}", "linger.ms": 5})
    producer.init_transactions(30)
    plan = [True, False, True, True, False, True, False, True]
    committed = _run_transactions(producer, topic, plan, 25)
    all_values = [f"t{t}-r{i}" for t in range(len(plan)) for i in range(25)]

    rc = _consume(bootstrap, topic, 2, "read_committed")
    ru = _consume(bootstrap, topic, 2, "read_uncommitted")
    assert sorted(v for _, _, v in rc) == sorted(committed)
    assert sorted(v for _, _, v in ru) == sorted(all_values)

    # ListOffsets(latest, read_committed) = LSO = HW once everything ended; DescribeTransactions agrees
    producer.flush(10)
    broker.stop()
    for p in range(2):
        text = _dump(broker.log_dir / f"{topic}-{p}")
        assert text.count("endTxnMarker: COMMIT") == plan.count(True)
        assert text.count("endTxnMarker: ABORT") == plan.count(False)
        # one .txnindex entry per aborted transaction, Kafka's line format
        assert text.count("version: 0 producerId: ") == plan.count(False)
    state = broker.log_dir / "__transaction_state-0"
    assert state.parent.joinpath("__transaction_state-49").is_dir()


def test_java_client_commit_and_abort(odradek_broker_factory, java_client: Callable) -> None:
    broker = odradek_broker_factory(overrides=TXN_OVERRIDES)
    client = java_client(broker)
    topic = f"txn-java-{uuid.uuid4().hex[:6]}"
    _create(broker.bootstrap, topic, 3)
    summary = client.produce(topic, 300, transactional_id=f"java-{topic}", value_format="commit-%d")
    assert summary["produced"] == 300
    client.run("produce", "--topic", topic, "--count", "200", "--acks", "all", "--compression", "none",
               "--value-format", "abort-%d", "--key-format", "key-%d", "--transactional-id", f"java-{topic}", "--abort")
    client.produce(topic, 100, transactional_id=f"java-{topic}", value_format="commit2-%d")
    rc = client.consume(topic, isolation="read_committed", idle_timeout_ms=3000)
    ru = client.consume(topic, isolation="read_uncommitted", idle_timeout_ms=3000)
    rc_values = sorted(r.value.decode() for r in rc)
    assert rc_values == sorted([f"commit-{i}" for i in range(300)] + [f"commit2-{i}" for i in range(100)])
    assert len(ru) == 600
    # confluent-kafka agrees on what is committed
    assert sorted(v for _, _, v in _consume(broker.bootstrap, topic, 3, "read_committed")) == rc_values


def test_restart_mid_transaction_aborts_on_timeout(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides=TXN_OVERRIDES)
    bootstrap = broker.bootstrap
    topic = f"txn-restart-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tid-{topic}",
                         "transaction.timeout.ms": 4000})
    producer.init_transactions(30)
    committed = _run_transactions(producer, topic, [True], 10)
    producer.begin_transaction()
    for i in range(15):
        producer.produce(topic, value=f"open-{i}".encode())
    producer.flush(30)  # in the log, transaction still open
    rc = _consume(bootstrap, topic, 1, "read_committed", idle_s=1.0)
    assert sorted(v for _, _, v in rc) == sorted(committed)

    broker.stop()
    broker.start()
    # the open transaction holds the LSO after the restart, then the timeout aborts it
    deadline = time.monotonic() + 30
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "isolation.level": "read_committed"})
    try:
        while True:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            committed_end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5, cached=False)[1]
            # with read_committed, librdkafka's "high" watermark is the LSO
            if committed_end == 10 + 1 + 15 + 1:
                break
            assert time.monotonic() < deadline, f"transaction not aborted (LSO/high {high})"
            time.sleep(0.5)
    finally:
        consumer.close()
    rc = _consume(bootstrap, topic, 1, "read_committed", idle_s=1.0)
    assert sorted(v for _, _, v in rc) == sorted(committed)
    # the zombie is fenced: its commit fails
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)
    broker.stop()
    text = _dump(broker.log_dir / f"{topic}-0")
    assert text.count("endTxnMarker: ABORT") == 1 and text.count("endTxnMarker: COMMIT") == 1
    assert "version: 0 producerId: " in text


def test_consume_transform_produce_exactly_once(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides=TXN_OVERRIDES)
    bootstrap = broker.bootstrap
    src, dst = f"eos-in-{uuid.uuid4().hex[:6]}", f"eos-out-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, src, 3)
    _create(bootstrap, dst, 3)
    n = 3000
    feeder = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(n):
        feeder.produce(src, key=str(i).encode(), value=str(i).encode())
    assert feeder.flush(30) == 0
    group = f"eos-group-{uuid.uuid4().hex[:6]}"

    def run_worker(limit: int, abort_every: int) -> int:
        """Transform up to `limit` records in transactions of ~100; every `abort_every`th is aborted."""
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"eos-{group}"})
        producer.init_transactions(30)
        consumer.subscribe([src])
        done = 0
        txn = 0
        idle = 0
        try:
            while done < limit and idle < 10:
                msgs = [m for m in consumer.consume(100, timeout=1.0) if m.error() is None]
                if not msgs:
                    idle += 1
                    continue
                idle = 0
                txn += 1
                producer.begin_transaction()
                for m in msgs:
                    producer.produce(dst, key=m.key(), value=b"out-" + m.value())
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
                if abort_every and txn % abort_every == 0:
                    producer.flush(30)
                    producer.abort_transaction(30)
                    # rewind to the last committed offsets, as an EOS app does after an abort
                    committed = consumer.committed(consumer.assignment(), timeout=10)
                    for tp in committed:
                        consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                    continue
                producer.commit_transaction(30)
                done += len(msgs)
        finally:
            consumer.close()
        return done

    first = run_worker(1200, abort_every=3)   # stops part-way; aborted batches are redone
    # a restart in between: the group's offsets come back from __consumer_offsets by their markers
    broker.stop()
    broker.start()
    rest = run_worker(n, abort_every=0)       # a new instance continues from the committed offsets
    assert first + rest == n
    out = _consume(bootstrap, dst, 3, "read_committed")
    values = sorted(int(v[4:]) for _, _, v in out)
    assert values == list(range(n)), "every input record exactly once in the committed output"
    raw = _consume(bootstrap, dst, 3, "read_uncommitted")
    assert len(raw) > n  # the aborted transactions' records are in the log, just not committed


# ----------------------------------------------------------------------------- Kafka's answers


class _RawClient(BrokerConnection):
    """One connection, one request at a time: the project's own client, called as (api, version, body)."""

    def call(self, api_key: int, version: int, body):
        return self.send(api_key, body, version)


def _coordinator_answers(broker) -> list[tuple]:
    """Answers of the transaction coordinator to a fixed series of requests (producer id as 'P')."""
    from odradek.wire.protocol import request_class

    topic = "txn-checks"
    _create(broker.bootstrap, topic, 1)
    c = _RawClient(broker.host, broker.port)
    Init, Add, End, Desc, Find = (request_class(k) for k in (22, 24, 26, 65, 10))
    tid = "coordinator-checks"
    busy = (14, 15, 16, 51)  # coordinator loading / moved / busy: clients retry these

    def retried(api_key: int, version: int, body, code_of=lambda r: r.error_code):
        for _ in range(150):
            answer = c.call(api_key, version, body)
            if code_of(answer) not in busy:
                return answer
            time.sleep(0.1)
        return answer

    retried(10, 4, Find(key_type=1, coordinator_keys=[tid]), lambda r: r.coordinators[0].error_code)
    pid = None

    def init(expected: tuple[int, int] = (-1, -1), timeout_ms: int = 60_000, retry: bool = True):
        nonlocal pid
        body = Init(transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=expected[0],
                    producer_epoch=expected[1])
        r = retried(22, 4, body) if retry else c.call(22, 4, body)
        if pid is None and r.error_code == 0:
            pid = r.producer_id
        return ("init", expected[1], r.error_code, "P" if r.producer_id == pid else r.producer_id, r.producer_epoch)

    def add(epoch: int, producer: int | None = None):
        r = retried(24, 3, Add(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid if producer is None else producer,
                               v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                   Add.AddPartitionsToTxnTopic(name=topic, partitions=[0])]),
                    lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
        return ("add", epoch, r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    def end(epoch: int, commit: bool, producer: int | None = None):
        r = c.call(26, 3, End(transactional_id=tid, producer_id=pid if producer is None else producer,
                              producer_epoch=epoch, committed=commit))
        return ("end", epoch, commit, r.error_code)

    def settled():
        # Kafka writes markers after answering EndTxn: wait for Complete* before the next step
        for _ in range(150):
            s = c.call(65, 0, Desc(transactional_ids=[tid])).transaction_states[0]
            if s.transaction_state not in ("PrepareCommit", "PrepareAbort"):
                return ("state", s.transaction_state, s.producer_epoch)
            time.sleep(0.1)
        return ("state", s.transaction_state, s.producer_epoch)

    out = [init(), init(), init((pid, 1)), init((pid, 1)), init((pid, 0)), init(timeout_ms=900_001),
           end(2, True), add(1), add(2), end(1, True), end(2, True, producer=pid + 7), end(2, True), settled(),
           end(2, True), end(2, False), add(2), init(retry=False)]
    out += [init(), settled(), end(2, False), add(4), end(4, False), settled()]
    c.sock.close()
    return out


def test_coordinator_answers_like_kafka(kafka_broker, odradek_broker) -> None:
    """The same InitProducerId/AddPartitionsToTxn/EndTxn series gets the same answers from Kafka 4.1.1
    and Odradek: epoch bumps and their retries, fencing, state errors, completing and aborting."""
    theirs = _coordinator_answers(kafka_broker)
    ours = _coordinator_answers(odradek_broker)
    assert ours == theirs
    assert ("init", 0, 90, -1, -1) in ours  # PRODUCER_FENCED for a stale expected epoch


def _read_committed_answers(broker) -> list[tuple]:
    """ListOffsets, Fetch and DescribeProducers around a committed, an aborted and an open transaction."""
    from odradek.wire.protocol import request_class

    topic = "rc-checks"
    _create(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "rc-checks", "linger.ms": 0})
    producer.init_transactions(60)
    _run_transactions(producer, topic, [True, False], 5)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"open-{i}".encode())
    producer.flush(30)
    c = _RawClient(broker.host, broker.port)
    LO, F, DP = request_class(2), request_class(1), request_class(61)
    pid = None

    def norm(p: int) -> str | int:
        return "P" if p == pid else p

    def latest(isolation: int) -> int:
        r = c.call(2, 5, LO(replica_id=-1, isolation_level=isolation, topics=[LO.ListOffsetsTopic(
            name=topic, partitions=[LO.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
        return r.topics[0].partitions[0].offset

    def fetch(isolation: int) -> tuple:
        r = c.call(1, 11, F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation,
                            session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))
        p = r.responses[0].partitions[0]
        aborted = None if p.aborted_transactions is None else [(norm(a.producer_id), a.first_offset)
                                                               for a in p.aborted_transactions]
        return ("fetch", isolation, p.error_code, p.high_watermark, p.last_stable_offset, aborted)

    def producers() -> tuple:
        r = c.call(61, 0, DP(topics=[DP.TopicRequest(name=topic, partition_indexes=[0])]))
        return ("producers", [(norm(s.producer_id), s.producer_epoch, s.last_sequence, s.coordinator_epoch,
                               s.current_txn_start_offset) for s in r.topics[0].partitions[0].active_producers])

    pid = c.call(61, 0, DP(topics=[DP.TopicRequest(name=topic, partition_indexes=[0])])) \
        .topics[0].partitions[0].active_producers[0].producer_id
    out = [("latest", latest(0), latest(1)), fetch(0), fetch(1), producers()]
    producer.commit_transaction(30)
    for _ in range(100):  # Kafka writes the markers after answering EndTxn
        if latest(1) == latest(0):
            break
        time.sleep(0.1)
    out += [("latest", latest(0), latest(1)), fetch(1), producers()]
    c.sock.close()
    return out


def test_read_committed_answers_like_kafka(kafka_broker, odradek_broker) -> None:
    """LSO vs high watermark, the aborted-transaction list of read_committed fetches and the producer
    state DescribeProducers shows are the same as Kafka 4.1.1's for the same transactions."""
    theirs = _read_committed_answers(kafka_broker)
    ours = _read_committed_answers(odradek_broker)
    assert ours == theirs
    assert ("latest", 17, 12) in ours  # 5+1 committed, 5+1 aborted, 5 open: the LSO waits at the open one


def test_kafka_python_transactions_and_read_committed(odradek_broker_factory) -> None:
    """kafka-python's own transaction manager and read_committed consumer (an independent client)."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KPTopicPartition

    broker = odradek_broker_factory(overrides=TXN_OVERRIDES)
    topic = f"txn-kp-{uuid.uuid4().hex[:6]}"
    _create(broker.bootstrap, topic, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{topic}")
    producer.init_transactions()
    committed = []
    for t, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        values = [f"kp{t}-{i}" for i in range(40)]
        for i, v in enumerate(values):
            producer.send(topic, key=str(i).encode(), value=v.encode())
        producer.flush()
        if commit:
            producer.commit_transaction()
            committed += values
        else:
            producer.abort_transaction()
    producer.close()

    def read(isolation: str) -> list[str]:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                                 enable_auto_commit=False, group_id=None, consumer_timeout_ms=3000)
        consumer.assign([KPTopicPartition(topic, p) for p in range(2)])
        consumer.seek_to_beginning()
        values = [m.value.decode() for m in consumer]
        consumer.close()
        return values

    assert sorted(read("read_committed")) == sorted(committed)
    assert len(read("read_uncommitted")) == 200
    # confluent-kafka agrees
    assert sorted(v for _, _, v in _consume(broker.bootstrap, topic, 2, "read_committed")) == sorted(committed)
