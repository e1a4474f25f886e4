"""Fresh real traffic through the wire layer (issue #2, item 3).

The stock Java kafka-clients (3.9 and 4.1) talk to a real Apache Kafka 4.1 broker through a
recording proxy: admin calls, an idempotent lz4 producer, and a group consumer. Every frame
that crossed the proxy, in both directions, must decode with Odradek's codecs and encode
back to the identical bytes.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from odradek.wire.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    join_pieces,
)


class RecordingProxy:
    """A loopback TCP proxy that keeps every frame, per connection and direction."""

    def __init__(self) -> None:
        # Set once the broker runs: the broker must know the proxy's port before it starts.
        self.target: tuple[str, int] | None = None
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        # (connection number, "request" | "response", frame without size prefix)
        self.frames: list[tuple[int, str, bytes]] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        number = 0
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for src, dst, direction in ((client, upstream, "request"), (upstream, client, "response")):
                threading.Thread(target=self._pump, args=(number, src, dst, direction), daemon=True).start()
            number += 1

    def _pump(self, conn: int, src: socket.socket, dst: socket.socket, direction: str) -> None:
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                buf += data
                # Record before forwarding, so a request is always listed before its response.
                while len(buf) >= 4:
                    (size,) = struct.unpack(">i", buf[:4])
                    if len(buf) < 4 + size:
                        break
                    with self.lock:
                        self.frames.append((conn, direction, buf[4:4 + size]))
                    buf = buf[4 + size:]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closed = True
        self.server.close()


@pytest.fixture(scope="module")
def proxied_kafka(_module_factory) -> Iterator[tuple[object, RecordingProxy]]:
    proxy = RecordingProxy()
    # Kafka advertises the proxy, or clients would bypass it after bootstrap.
    broker = _module_factory("kafka", overrides={
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
        "group.initial.rebalance.delay.ms": "0",
        "num.partitions": "3",
    })
    proxy.target = (broker.host, broker.port)
    yield broker, proxy
    proxy.close()


def check_frames(frames: list[tuple[int, str, bytes]]) -> dict[tuple[int, int], int]:
    """Decode and re-encode every frame; returns how many frames each (api, version) had."""
    pending: dict[tuple[int, int], tuple[int, int]] = {}
    seen: dict[tuple[int, int], int] = {}
    for conn, direction, frame in frames:
        if direction == "request":
            request = decode_request(frame)
            h = request.header
            again = join_pieces(encode_request(h.api_version, h.correlation_id, request.body,
                                               client_id=h.client_id, api_key=h.api_key))
            assert again[4:] == frame, f"request {h.api_name} v{h.api_version} re-encodes differently"
            pending[(conn, h.correlation_id)] = (h.api_key, h.api_version)
            seen[(h.api_key, h.api_version)] = seen.get((h.api_key, h.api_version), 0) + 1
        else:
            (correlation,) = struct.unpack(">i", frame[:4])
            api_key, version = pending.pop((conn, correlation))
            _, body = decode_response(frame, api_key, version)
            again = join_pieces(encode_response(api_key, version, correlation, body))
            assert again[4:] == frame, f"response of api {api_key} v{version} re-encodes differently"
    return seen


@pytest.mark.parametrize("client_version", ["3.9.1", "4.1.1"])
def test_java_client_traffic_round_trips(proxied_kafka, java_client, client_version: str) -> None:
    broker, proxy = proxied_kafka
    client = java_client(f"127.0.0.1:{proxy.port}", version=client_version)
    topic = f"fresh-{client_version.replace('.', '-')}"
    with proxy.lock:
        proxy.frames.clear()
    client.create_topic(topic, partitions=3, config={"retention.ms": "3600000"})
    client.describe_topic(topic)
    client.describe_configs(topic)
    client.produce(topic, 50, compression="lz4", headers={"seq": "%d"})
    client.list_offsets(topic, "earliest")
    client.list_offsets(topic, "max-timestamp")
    records = client.consume(topic, start="earliest", max_records=50, group=f"g-{client_version}")
    assert len(records) == 50
    client.delete_topic(topic)
    with proxy.lock:
        frames = list(proxy.frames)
    seen = check_frames(frames)
    # The conversation covered the core APIs the Java client uses.
    apis = {api for api, _ in seen}
    assert {0, 1, 2, 3, 18, 19, 20, 22, 32}.issubset(apis), sorted(seen)
    assert len(frames) >= 40
