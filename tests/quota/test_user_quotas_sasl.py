"""A user quota follows the authenticated principal: a SASL/PLAIN user is throttled by its quota,
while a PLAINTEXT client (User:ANONYMOUS) with the same client id is not."""

from __future__ import annotations

import socket
import time

from confluent_kafka import Producer

from odradek.testing import running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret";')


def _produce(bootstrap: str, extra: dict[str, str]) -> list[float]:
    throttles: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "shared-id", "linger.ms": 5,
                         "batch.size": 20000, "throttle_cb": lambda e: throttles.append(e.throttle_time), **extra})
    for i in range(20):
        producer.produce("users-q", value=b"u" * 10000, key=str(i).encode())
        producer.poll(0)
    deadline = time.monotonic() + 60
    while producer.flush(1) and time.monotonic() < deadline:
        pass
    assert len(producer) == 0
    producer.poll(0.2)
    return throttles


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_user_quota_follows_the_sasl_principal() -> None:
    # fixed ports, so that Metadata on each listener advertises that listener's own port
    listeners = f"PLAINTEXT://127.0.0.1:{_free_port()},SASL_PLAINTEXT://127.0.0.1:{_free_port()}"
    with running_broker({"listeners": listeners,
                         "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                         "auto.create.topics.enable": "true"}) as running:
        plain = f"{running.host}:{running.port}"
        sasl = next(f"{host}:{port}" for host, port in running.broker.bound_addresses if port != running.port)
        conn = BrokerConnection(running.host, running.port)
        try:
            A = request_class(49)
            answer = conn.send(49, A(validate_only=False, entries=[A.EntryData(
                entity=[A.EntityData(entity_type="user", entity_name="alice")],
                ops=[A.OpData(key="producer_byte_rate", value=10000.0, remove=False)])]), 1)
            assert answer.entries[0].error_code == 0
        finally:
            conn.close()
        # 200 kB at 10 kB/s over the 10 s span: alice is throttled
        alice = _produce(sasl, {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                                "sasl.username": "alice", "sasl.password": "alice-secret"})
        assert any(t > 0 for t in alice), alice
        # the same client id without authentication has no quota
        assert not any(t > 0 for t in _produce(plain, {}))
