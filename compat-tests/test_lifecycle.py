"""Restart, crash and hostile input against a real Odradek process (issue #4, items 2-4).

* SIGTERM, then start on the same dir: every record is still there, offsets continue, and
  the data dir has Kafka's clean-shutdown shape (trimmed indexes, marker, checkpoints).
* SIGKILL in the middle of an acks=all stream: every acknowledged record survives.
* Garbage, oversized frames and unsupported versions get Kafka's answer or a closed
  connection, and other clients are served meanwhile.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import threading
import time
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError
from kafka_oracle import recv_frame

from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 20.0):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    out = []
    deadline = time.time() + timeout
    while len(out) < expected and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=300).values():
            out += [(m.partition, m.offset, m.value) for m in batch]
    consumer.close()
    return out


def _assert_clean_shutdown_layout(log_dir: Path, partitions: dict[str, int]) -> None:
    """The golden shape Kafka leaves after a clean stop (kafka-log-format.md §1, §3.4, §9)."""
    assert re.fullmatch(
        rb'\{"version":0,"brokerEpoch":-?\d+\}', (log_dir / ".kafka_cleanshutdown").read_bytes()
    )
    assert not (log_dir / ".lock").exists()
    recovery = (log_dir / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert recovery[0] == "0" and int(recovery[1]) == len(recovery) - 2
    entries = {tuple(line.split(" ")[:2]): int(line.split(" ")[2]) for line in recovery[2:]}
    for name, leo in partitions.items():
        topic, _, index = name.rpartition("-")
        assert entries[(topic, index)] == leo
        pdir = log_dir / name
        assert (pdir / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
        meta = (pdir / "partition.metadata").read_bytes()
        assert meta.startswith(b"version: 0\ntopic_id: ") and len(meta) == 43 and not meta.endswith(b"\n")
        for index_file in pdir.glob("*.index"):
            assert index_file.stat().st_size % 8 == 0 and index_file.stat().st_size < 10485760
        for time_index in pdir.glob("*.timeindex"):
            assert time_index.stat().st_size % 12 == 0 and time_index.stat().st_size < 10485756
        snapshot = pdir / f"{leo:020d}.snapshot"
        assert snapshot.exists(), sorted(p.name for p in pdir.iterdir())


def test_sigterm_restart_keeps_everything(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides={"num.partitions": 2})
    topic = "restart-topic"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=2)
    acked = [producer.send(topic, value=f"r{i}".encode(), partition=i % 2).get(15) for i in range(200)]
    producer.close()
    # While running, the active segment's indexes are preallocated (10 MiB).
    pdir = broker.log_dir / f"{topic}-0"
    assert (pdir / "00000000000000000000.index").stat().st_size == 10485760
    assert (pdir / "00000000000000000000.timeindex").stat().st_size == 10485756
    assert broker.stop() == 0
    _assert_clean_shutdown_layout(broker.log_dir, {f"{topic}-0": 100, f"{topic}-1": 100})
    broker.start()
    assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
    records = _consume_all(broker.bootstrap, topic, 2, 200)
    assert sorted((p, o) for p, o, _ in records) == sorted((m.partition, m.offset) for m in acked)
    assert {v for _, _, v in records} == {f"r{i}".encode() for i in range(200)}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    assert producer.send(topic, value=b"next", partition=0).get(15).offset == 100
    producer.close()


def test_kill_9_keeps_acknowledged_records(odradek_broker_factory) -> None:
    broker = odradek_broker_factory()
    topic = "crash-topic"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0, linger_ms=0)
    producer.send(topic, value=b"warm-up").get(15)
    acked: list[tuple[int, bytes]] = []
    stop = threading.Event()

    def stream() -> None:
        i = 0
        while not stop.is_set():
            value = f"v{i}".encode()
            try:
                meta = producer.send(topic, value=value).get(5)
            except Exception:  # the broker died: nothing more gets acknowledged
                return
            acked.append((meta.offset, value))
            i += 1

    thread = threading.Thread(target=stream)
    thread.start()
    deadline = time.time() + 15
    while len(acked) < 300 and time.time() < deadline:
        time.sleep(0.01)
    broker.kill()
    stop.set()
    thread.join(10)
    try:
        producer.close(timeout=1)
    except KafkaTimeoutError:  # a send was in flight when the broker died; nothing to flush to
        pass
    assert len(acked) >= 300
    assert not (broker.log_dir / ".kafka_cleanshutdown").exists()
    broker.start()
    records = _consume_all(broker.bootstrap, topic, 1, len(acked) + 1)
    by_offset = {o: v for _, o, v in records}
    for offset, value in acked:
        assert by_offset.get(offset) == value
    # Offsets are dense from 0: recovery kept a valid prefix, nothing in between was lost.
    assert sorted(by_offset) == list(range(len(by_offset)))


def _connect(broker) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=5)
    return sock


def _closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _read_frame(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    return recv_frame(sock)


def test_hostile_input_gets_kafkas_answers(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides={"socket.request.max.bytes": 1_000_000})
    # A healthy client keeps working throughout.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("healthy", value=b"0").get(15)

    # 1. Random garbage: the connection is closed, with a log line.
    sock = _connect(broker)
    sock.sendall(struct.pack(">i", 40) + os.urandom(40))
    assert _closed_by_peer(sock)

    # 2. A frame larger than socket.request.max.bytes: closed before the body is read.
    sock = _connect(broker)
    sock.sendall(struct.pack(">i", 50_000_000) + b"\x00" * 100)
    assert _closed_by_peer(sock)

    # 3. A negative size prefix.
    sock = _connect(broker)
    sock.sendall(struct.pack(">i", -5))
    assert _closed_by_peer(sock)

    # 4. ApiVersions at a version the broker does not know: a v0 body with error 35 and the
    #    broker's ApiVersions range only, so the client can retry (Kafka 4.1 and 4.4 answer so).
    sock = _connect(broker)
    # (a flexible-version header: client id, then an empty tagged-field block)
    header = struct.pack(">hhi", 18, 99, 7) + struct.pack(">h", 4) + b"test" + b"\x00"
    sock.sendall(struct.pack(">i", len(header)) + header)
    frame = _read_frame(sock)
    corr, body = decode_response(frame, 18, 0)
    assert corr == 7
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 5)]
    sock.close()

    # 5. An unknown API key: closed.
    sock = _connect(broker)
    header = struct.pack(">hhi", 4242, 0, 1) + struct.pack(">h", -1)
    sock.sendall(struct.pack(">i", len(header)) + header)
    assert _closed_by_peer(sock)

    # 6. A truncated body of a real API: closed.
    sock = _connect(broker)
    frame = join_pieces(encode_request(12, 3, request_class(3)(topics=None)))[4:]
    sock.sendall(struct.pack(">i", len(frame) - 3) + frame[:-3])
    assert _closed_by_peer(sock)

    # 7. Produce with a corrupted batch CRC gets CORRUPT_MESSAGE for that partition.
    from odradek.wire.records import SimpleRecord, build_batch

    batch = bytearray(build_batch([SimpleRecord(b"x")]))
    batch[-1] ^= 0xFF
    Produce = request_class(0)
    req = Produce(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            Produce.TopicProduceData(
                name="healthy", partition_data=[Produce.PartitionProduceData(index=0, records=bytes(batch))]
            )
        ],
    )
    sock = _connect(broker)
    sock.sendall(join_pieces(encode_request(9, 11, req)))
    _, resp = decode_response(_read_frame(sock), 0, 9)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    sock.close()

    # The healthy client never noticed; nothing acknowledged was lost.
    assert producer.send("healthy", value=b"1").get(15).offset == 1
    producer.close()
    log = broker.console_log.read_text()
    assert "malformed request" in log or "Closing connection" in log
