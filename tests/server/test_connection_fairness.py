"""A connection whose requests keep arriving must not keep the event loop to itself.

The connection task reads bytes that are already in its socket without going through the
scheduler (server.Connection._receive_ready), so a client pipelining requests faster than the
broker handles them never makes that task wait for its socket. It must still let the other tasks
run once per request. Seen from outside: a flood of acks=0 Produce requests (no answers, so the
broker never waits to send either) ends with one ApiVersions; another connection's ApiVersions,
sent while the flood is being worked through, is answered before the flood's last request.
"""

from __future__ import annotations

import socket
import threading
import time

from odradek.testing import running_broker
from odradek.wire.protocol import decode_response, encode_request, request_class

PRODUCE, API_VERSIONS = 0, 18
FLOOD = 50000


def _frame(api_key: int, version: int, correlation_id: int, body) -> bytes:
    return b"".join(bytes(part) for part in encode_request(version, correlation_id, body, client_id="t",
                                                           api_key=api_key))


def _api_versions(correlation_id: int) -> bytes:
    body = request_class(API_VERSIONS)(client_software_name="flood", client_software_version="1")
    return _frame(API_VERSIONS, 3, correlation_id, body)


def _unanswered_produce(correlation_id: int) -> bytes:
    """acks=0 to a topic that does not exist: handled (decoded, looked up) and never answered."""
    cls = request_class(PRODUCE)
    body = cls(acks=0, timeout_ms=1000, topic_data=[
        cls.TopicProduceData(name="no-such-topic", partition_data=[cls.PartitionProduceData(index=0)])])
    return _frame(PRODUCE, 9, correlation_id, body)


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return bytes(data)

    return exactly(int.from_bytes(exactly(4), "big"))


def test_a_pipelining_connection_does_not_starve_another() -> None:
    # a broker process of its own: no GIL shared with this test's client threads
    with running_broker(in_process=False) as running:
        flood = socket.create_connection((running.host, running.port))
        other = socket.create_connection((running.host, running.port))
        try:
            payload = b"".join(_unanswered_produce(i) for i in range(FLOOD)) + _api_versions(FLOOD)
            answered: list[str] = []  # which connection got its answer first

            def wait_answer(sock: socket.socket, name: str, correlation_id: int) -> None:
                frame = _read_frame(sock)
                corr, body = decode_response(frame, API_VERSIONS, 3)
                assert (corr, body.error_code) == (correlation_id, 0)
                answered.append(name)

            readers = [threading.Thread(target=wait_answer, args=(flood, "flood", FLOOD), daemon=True),
                       threading.Thread(target=wait_answer, args=(other, "other", 7), daemon=True)]
            for reader in readers:
                reader.start()
            threading.Thread(target=flood.sendall, args=(payload,), daemon=True).start()
            time.sleep(0.05)  # the broker is into the flood (50k requests take it seconds)
            other.sendall(_api_versions(7))
            for reader in readers:
                reader.join(120)
            assert sorted(answered) == ["flood", "other"], answered
            assert answered[0] == "other", "the other connection waited for the whole flood"
        finally:
            flood.close()
            other.close()
