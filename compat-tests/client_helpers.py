"""Small client routines the compat tests share (real clients, no broker of their own)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, TopicPartition


def read_committed(bootstrap: str, topic: str, partitions: int, idle_s: float = 3.0,
                   timeout_s: float = 60.0) -> list[bytes]:
    """Every value a read_committed confluent-kafka consumer finds in `topic` from offset 0,
    once nothing new came for `idle_s` (no group: the partitions are assigned)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    idle_until = time.monotonic() + idle_s
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < min(idle_until, deadline):
            for m in consumer.consume(500, timeout=0.5):
                assert m.error() is None, m.error()
                out.append(m.value())
                idle_until = time.monotonic() + idle_s
    finally:
        consumer.close()
    return out
