"""Batches compressed by librdkafka itself (raw snappy, lz4 frame, gzip, zstd) decode correctly.

librdkafka's built-in mock cluster (``test.mock.num.brokers``) stores what the producer sends; a
hand-made Fetch v4 request on a plain socket brings the stored batch bytes back unchanged, and
every CRC-valid v2 batch in the response is checked against the records that were produced.
"""

from __future__ import annotations

import socket
import struct

import pytest
from crc32c import crc32c

from odradek.wire.records import CompressionType, RecordBatch

ck = pytest.importorskip("confluent_kafka")

N = 400


def _fetch_frame(host: str, port: int, topic: str, offset: int) -> bytes:
    t = topic.encode()
    body = (
        struct.pack(">iiiib", -1, 100, 1, 10 << 20, 0)  # replica, max_wait, min_bytes, max_bytes, isolation
        + struct.pack(">ih", 1, len(t))
        + t
        + struct.pack(">iiqi", 1, 0, offset, 10 << 20)  # one partition: 0, fetch_offset, partition max
    )
    req = struct.pack(">hhih", 1, 4, 1, 5) + b"probe" + body  # Fetch v4, correlation 1
    with socket.create_connection((host, port), timeout=60) as s:
        s.sendall(struct.pack(">i", len(req)) + req)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = s.recv(1 << 16)
            assert chunk, "connection closed"
            buf += chunk
    return buf[4:]


def _batches_in(frame: bytes) -> list[RecordBatch]:
    out, i = [], 0
    while i + 61 <= len(frame):
        if frame[i + 16] == 2:
            (length,) = struct.unpack_from(">i", frame, i + 8)
            end = i + 12 + length
            if length >= 49 and end <= len(frame) and struct.unpack_from(">I", frame, i + 17)[0] == crc32c(frame[i + 21 : end]):
                out.append(RecordBatch(frame, i))
                i = end
                continue
        i += 1
    return out


def _value(i: int) -> bytes:
    return b"value-%d-" % i + b"abcdefgh" * (i % 50)


@pytest.mark.parametrize("codec", ["snappy", "lz4", "gzip", "zstd"])
def test_librdkafka_compressed_batches(codec: str) -> None:
    p = ck.Producer({"test.mock.num.brokers": 1, "compression.type": codec, "linger.ms": 20, "log_level": 0})
    broker = next(iter(p.list_topics(timeout=60).brokers.values()))
    for i in range(N):
        p.produce(
            "t",
            partition=0,  # the mock auto-creates several partitions; the fetch reads partition 0
            value=_value(i),
            key=b"k%d" % i,
            headers=[("h", b"x"), ("n", None)] if i % 3 == 0 else None,
            timestamp=1700000000000 + i,
        )
    assert p.flush(60) == 0  # generous: CI machines are shared and loaded
    got = []
    codecs = set()
    offset = 0
    while offset < N:
        batches = _batches_in(_fetch_frame(broker.host, broker.port, "t", offset))
        assert batches
        for b in batches:
            b.ensure_valid()
            codecs.add(b.compression)
            got.extend(b.records())
            offset = b.next_offset
    # librdkafka sends a batch uncompressed when the codec would not make it smaller (a small last
    # batch under load): the codec is there, and nothing else but NONE
    wanted = int(CompressionType[codec.upper()])
    assert wanted in {int(c) for c in codecs} and {int(c) for c in codecs} <= {wanted, int(CompressionType.NONE)}
    assert [r.offset for r in got] == list(range(N))
    for i, r in enumerate(got):
        assert (r.key, r.value, r.timestamp) == (b"k%d" % i, _value(i), 1700000000000 + i)
        assert r.headers == ([("h", b"x"), ("n", None)] if i % 3 == 0 else [])
