"""Consumers of real clients (kafka-python, confluent-kafka) running in threads, for the group tests.

Each consumer polls in its own thread, records what it consumed, commits synchronously
after every poll that returned records, and publishes its current assignment, so a test
can wait for a rebalance to settle and then check exactly-once consumption.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

GROUP_BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "num.partitions": "6",
    "offsets.topic.num.partitions": "5",
}


def wait_for(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> float:
    """Poll `cond` until true; returns the seconds it took, fails the test on timeout."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if cond():
            return time.monotonic() - start
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class ThreadedConsumer(threading.Thread):
    """Base: poll loop, consumed records, assignment snapshot, stop/close."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.records: list[tuple[int, int, bytes]] = []
        self.assignment: set[int] = set()
        self.stop_event = threading.Event()
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        # every distinct assignment this consumer had, in order
        self.history: list[set[int]] = []
        self.extra_conf: dict[str, object] = {}

    def _note_assignment(self, partitions: set[int]) -> None:
        if not self.history or self.history[-1] != partitions:
            self.history.append(set(partitions))
        self.assignment = partitions

    def run(self) -> None:
        try:
            self.open()
            self.ready.set()
            while not self.stop_event.is_set():
                self.poll_once()
            self.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
            self.ready.set()

    def stop(self, timeout: float = 30) -> None:
        self.stop_event.set()
        self.join(timeout)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error

    def open(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def poll_once(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class KafkaPythonConsumer(ThreadedConsumer):
    """kafka-python 3.x KafkaConsumer."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, assignor: str,
                 session_timeout_ms: int = 6000) -> None:
        super().__init__(name)
        self.bootstrap, self.group, self.topic, self.assignor = bootstrap, group, topic, assignor
        self.session_timeout_ms = session_timeout_ms

    def open(self) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        strategy = CooperativeStickyAssignor if self.assignor == "cooperative-sticky" else RangePartitionAssignor
        self.consumer = KafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
            auto_offset_reset="earliest", enable_auto_commit=False,
            partition_assignment_strategy=[strategy], session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=300, max_poll_records=50,
        )

    def poll_once(self) -> None:
        from kafka.errors import CommitFailedError, KafkaError

        batches = self.consumer.poll(timeout_ms=100)
        got = [(m.partition, m.offset, m.value) for msgs in batches.values() for m in msgs]
        if got:
            with self.lock:
                self.records.extend(got)
            try:
                self.consumer.commit()
            except (CommitFailedError, KafkaError):
                pass  # a rebalance: the next owner reads from the last commit
        self._note_assignment({tp.partition for tp in self.consumer.assignment()})

    def close(self) -> None:
        self.consumer.close()


class ConfluentConsumer(ThreadedConsumer):
    """confluent-kafka 2.x (librdkafka) Consumer, classic or KIP-848 protocol."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, assignor: str | None,
                 protocol: str = "classic", session_timeout_ms: int = 6000) -> None:
        super().__init__(name)
        self.bootstrap, self.group, self.topic, self.assignor = bootstrap, group, topic, assignor
        self.protocol = protocol
        self.session_timeout_ms = session_timeout_ms

    def open(self) -> None:
        from confluent_kafka import Consumer

        conf = {
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "group.protocol": self.protocol,
        }
        if self.protocol == "classic":
            conf.update({
                "partition.assignment.strategy": self.assignor or "range",
                "session.timeout.ms": self.session_timeout_ms, "heartbeat.interval.ms": 300,
            })
        conf.update(self.extra_conf)
        self.consumer = Consumer(conf)
        self.consumer.subscribe([self.topic])

    def poll_once(self) -> None:
        from confluent_kafka import KafkaException

        msgs = self.consumer.consume(num_messages=50, timeout=0.1)
        got = [(m.partition(), m.offset(), m.value()) for m in msgs if m.error() is None]
        if got:
            with self.lock:
                self.records.extend(got)
            try:
                self.consumer.commit(asynchronous=False)
            except KafkaException:
                pass
        self._note_assignment({tp.partition for tp in self.consumer.assignment()})

    def close(self) -> None:
        self.consumer.close()


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 6) -> None:
    """Write values round-robin over the partitions with kafka-python, flushed."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i, value in enumerate(values):
        producer.send(topic, value, partition=i % partitions)
    producer.flush()
    producer.close()
