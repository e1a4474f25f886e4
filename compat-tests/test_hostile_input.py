"""Hostile input over real sockets, and the connection limits (#13; test_lifecycle.py has the basics).

* A hypothesis-driven fuzzer sends random frames, requests of every served API (sampled with
  every field set) mutated and truncated, and Produce requests whose record batches are mutated.
  The broker must never crash or hang, must answer a fresh ApiVersions within a few seconds after
  every case, its RSS must stay bounded, and a producer running alongside must never fail.
* ``max.connections.per.ip`` (+ ``.overrides``): connections over the limit are closed at once.
* ``max.connections``: at the limit the broker stops accepting until a connection closes.
* ``message.max.bytes``: a larger batch gets MESSAGE_TOO_LARGE and nothing is written.

``ODRADEK_LONG_TESTS=1`` runs 20 000 fuzz cases instead of 300 (``ODRADEK_FUZZ_CASES`` sets any number). Figures go to
``artifacts/reliability/fuzz*.json`` for docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer
from kafka_oracle import recv_frame

from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import (
    API_NAMES,
    api_versions,
    decode_response,
    encode_request,
    join_pieces,
    request_class,
)
from odradek.wire.records import SimpleRecord, build_batch
from odradek.wire.sample import sample

LONG = os.environ.get("ODRADEK_LONG_TESTS") == "1"
FUZZ_CASES = int(os.environ.get("ODRADEK_FUZZ_CASES", 20000 if LONG else 300))
# Results go to the repo's artifacts/ (for docs/reliability.md) only when asked for, so that an
# ordinary test run leaves the work tree clean.
ARTIFACTS = (
    Path(__file__).resolve().parent.parent / "artifacts" / "reliability"
    if os.environ.get("ODRADEK_RECORD_RESULTS")
    else Path(tempfile.gettempdir()) / "odradek-reliability"
)
# APIs that change broker-wide state at a scale a sampled request picks at random (thousands of
# partitions, deleting topics): their decoding is still fuzzed through mutated frames.
_STATEFUL = {19, 20, 21, 33, 37, 44, 51, 57}
FUZZ_API_KEYS = sorted(k for k in api_versions() if k not in _STATEFUL)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def api_versions_ok(broker, timeout: float = 5.0) -> bool:
    """A fresh connection gets an ApiVersions answer within `timeout` seconds."""
    with socket.create_connection((broker.host, broker.port), timeout=timeout) as sock:
        sock.sendall(join_pieces(encode_request(3, 1, request_class(18)(client_software_name="probe", client_software_version="1"), client_id="probe")))
        frame = read_frame(sock, timeout)
        _, body = decode_response(frame, 18, 3)
        return body.error_code == 0


def read_frame(sock: socket.socket, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    return recv_frame(sock)


def valid_request(api_key: int, version: int, seed: int) -> bytes:
    """A whole request frame (size prefix included) of a sampled body."""
    body = sample(request_class(api_key).__name__, version, seed=seed)
    return join_pieces(encode_request(version, seed & 0x7FFFFFFF, body, client_id="fuzz", api_key=api_key))


def produce_frame(batch: bytes, topic: str = "fuzz", version: int = 9) -> bytes:
    Produce = request_class(0)
    req = Produce(acks=-1, timeout_ms=2000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])
    return join_pieces(encode_request(version, 77, req, client_id="fuzz"))


def mutate(data: bytes, rnd: random.Random, how: str) -> bytes:
    buf = bytearray(data)
    if how == "flip" and buf:
        for _ in range(rnd.randint(1, 8)):
            i = rnd.randrange(len(buf))
            buf[i] ^= 1 << rnd.randrange(8)
    elif how == "truncate" and len(buf) > 4:
        cut = rnd.randrange(4, len(buf))
        buf = buf[:cut]
        if rnd.random() < 0.5:  # keep the prefix honest: a short but complete frame
            buf[0:4] = struct.pack(">i", len(buf) - 4)
    elif how == "insert":
        i = rnd.randrange(len(buf) + 1)
        buf[i:i] = os.urandom(rnd.randint(1, 64))
        if rnd.random() < 0.5:
            buf[0:4] = struct.pack(">i", len(buf) - 4)
    elif how == "lengths" and len(buf) > 12:
        # overwrite a random int16/int32 in the body with an extreme value (array/string lengths)
        i = rnd.randrange(4, len(buf) - 4)
        value = rnd.choice([-2, -1, 0x7FFF, 0x7FFFFFFF, -0x80000000, 1 << 20])
        fmt = ">h" if rnd.random() < 0.5 and -0x8000 <= value <= 0x7FFF else ">i"
        struct.pack_into(fmt, buf, i, value)
    elif how == "prefix":
        buf[0:4] = struct.pack(">i", rnd.choice([0, 1, 3, len(buf), len(buf) + 100, 2**31 - 1, -1]))
    return bytes(buf)


class Healthy:
    """A producer sending one record every 20 ms during the fuzzing; any failure is recorded."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0, linger_ms=0)
        self.errors: list[str] = []
        self.sent = 0
        self.max_latency = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                self.producer.send("healthy", value=b"%d" % self.sent).get(10)
                self.sent += 1
            except Exception as exc:  # noqa: BLE001 - recorded, asserted on by the test
                self.errors.append(repr(exc))
            self.max_latency = max(self.max_latency, time.monotonic() - t0)
            time.sleep(0.02)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(15)
        self.producer.close(5)


def send_case(broker, payload: bytes, read: bool) -> str:
    """Send a case on a fresh connection; 'answered', 'closed' or 'silent' (waiting for more bytes)."""
    with socket.create_connection((broker.host, broker.port), timeout=5) as sock:
        try:
            sock.sendall(payload)
        except OSError:
            return "closed"
        if not read:
            return "sent"
        try:
            read_frame(sock, timeout=2.0)
            return "answered"
        except (ConnectionError, OSError):
            return "closed"
        except TimeoutError:
            return "silent"


def test_fuzz_frames_and_batches(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides={
        "socket.request.max.bytes": 1_048_576, "num.partitions": 1, "connections.max.idle.ms": 10000,
        "auto.create.topics.enable": "false",
    })
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("fuzz", 1, 1), NewTopic("healthy", 1, 1)])
    admin.close()
    pid = broker.proc.pid
    # warm-up: one valid request of every API version, so the internal topics that requests
    # create on demand (__consumer_offsets, __transaction_state: 50 partitions, 250 files each)
    # exist before descriptors and memory are measured
    for api_key in FUZZ_API_KEYS:
        lo, hi = api_versions()[api_key]
        for version in range(lo, hi + 1):
            send_case(broker, valid_request(api_key, version, 0), read=True)
    healthy = Healthy(broker.bootstrap)
    time.sleep(1)
    rss_start = rss_kib(pid)
    fds_start = fd_count(pid)
    outcomes: dict[str, int] = {}
    cases = {"n": 0}
    valid_batch = bytes(build_batch([SimpleRecord(b"k%d" % i, b"v" * i) for i in range(5)]))

    @settings(max_examples=FUZZ_CASES, deadline=None, database=None, derandomize=not LONG,
              suppress_health_check=list(HealthCheck))
    @given(
        kind=st.sampled_from(["random", "api", "api", "batch", "batch"]),
        api_key=st.sampled_from(FUZZ_API_KEYS),
        how=st.sampled_from(["none", "flip", "truncate", "insert", "lengths", "prefix"]),
        seed=st.integers(0, 2**31 - 1),
        pipeline=st.integers(1, 3),
    )
    def case(kind: str, api_key: int, how: str, seed: int, pipeline: int) -> None:
        rnd = random.Random(seed)
        if kind == "random":
            size = rnd.choice([0, 1, 7, 64, 1000, 70000])
            payload = struct.pack(">i", size) + os.urandom(size if rnd.random() < 0.8 else size // 2)
        elif kind == "api":
            lo, hi = api_versions()[api_key]
            payload = mutate(valid_request(api_key, rnd.randint(lo, hi), seed), rnd, how)
        else:
            batch = mutate(valid_batch, rnd, rnd.choice(["flip", "truncate", "insert", "lengths"]))
            payload = produce_frame(batch)
            if how in ("flip", "truncate"):
                payload = mutate(payload, rnd, how)
        result = send_case(broker, payload * pipeline, read=True)
        outcomes[result] = outcomes.get(result, 0) + 1
        cases["n"] += 1
        assert broker.running, broker.log_tail()
        if cases["n"] % 25 == 0:
            assert api_versions_ok(broker), "broker stopped answering"

    case()
    assert api_versions_ok(broker)
    time.sleep(1)
    healthy.close()
    rss_end = rss_kib(pid)
    fds_end = fd_count(pid)
    assert healthy.errors == [], healthy.errors[:5]
    assert healthy.sent > 10
    # bounded memory: a decoder never allocates more than its frame; frames are at most 1 MiB here
    assert rss_end - rss_start < 64 * 1024, (rss_start, rss_end)
    assert fds_end <= fds_start + 5, (fds_start, fds_end)
    console = broker.console_log.read_text()
    stats = {
        "fuzz_cases": cases["n"], "outcomes": outcomes, "rss_start_kib": rss_start, "rss_end_kib": rss_end,
        "fds_start": fds_start, "fds_end": fds_end, "healthy_records": healthy.sent,
        "healthy_max_latency_s": round(healthy.max_latency, 3), "apis_fuzzed": len(FUZZ_API_KEYS),
        "internal_errors_logged": console.count("after an internal error"), "long_mode": LONG,
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"fuzz{'_long' if LONG else ''}.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps(stats))
    # a malformed request closes its connection as "malformed request"; anything else that
    # escapes a handler is a bug the fuzzer found
    assert stats["internal_errors_logged"] == 0, console[console.find("after an internal error") - 200:][:3000]


def _open_raw(broker) -> socket.socket:
    return socket.create_connection((broker.host, broker.port), timeout=5)


def _answers(sock: socket.socket, timeout: float = 3.0) -> bool:
    try:
        sock.sendall(join_pieces(encode_request(3, 9, request_class(18)(client_software_name="probe", client_software_version="1"), client_id="limit")))
        read_frame(sock, timeout)
        return True
    except (ConnectionError, OSError):
        return False


def test_max_connections_per_ip_and_overrides(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides={
        "max.connections.per.ip": 2, "max.connections.per.ip.overrides": "127.0.0.1:3"})
    time.sleep(0.5)  # the harness's readiness probe must have been accepted and closed
    socks = [_open_raw(broker) for _ in range(3)]
    assert all(_answers(s) for s in socks)  # the override (3) wins over the default (2)
    extra = _open_raw(broker)
    assert not _answers(extra)  # accepted, then closed at once
    extra.close()
    socks.pop().close()
    time.sleep(0.3)
    again = _open_raw(broker)
    assert _answers(again)
    for s in [*socks, again]:
        s.close()
    log = broker.console_log.read_text()
    assert "Rejected connection from /127.0.0.1, address already has the configured maximum of 3 connections." in log


def test_max_connections_blocks_the_acceptor(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides={"max.connections": 2})
    time.sleep(0.5)
    first, second = _open_raw(broker), _open_raw(broker)
    assert _answers(first) and _answers(second)
    waiting = _open_raw(broker)  # the kernel completes the handshake; the broker does not accept yet
    waiting.sendall(join_pieces(encode_request(3, 5, request_class(18)(client_software_name="probe", client_software_version="1"), client_id="waiting")))
    with pytest.raises(TimeoutError):
        read_frame(waiting, timeout=1.5)
    first.close()
    _, body = decode_response(read_frame(waiting, timeout=5), 18, 3)
    assert body.error_code == 0
    for s in (second, waiting):
        s.close()


def test_message_max_bytes(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides={"message.max.bytes": 2000})
    small = bytes(build_batch([SimpleRecord(b"x" * 100)]))
    big = bytes(build_batch([SimpleRecord(os.urandom(5000))]))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("limits", value=b"warm").get(15)
    producer.close()
    with _open_raw(broker) as sock:
        sock.sendall(produce_frame(big, "limits"))
        _, resp = decode_response(read_frame(sock), 0, 9)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
        sock.sendall(produce_frame(small, "limits"))
        _, resp = decode_response(read_frame(sock), 0, 9)
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == 0 and part.base_offset == 1  # the refused batch took no offset


def test_fuzzer_covers_every_api_name() -> None:
    """Every served API is in the fuzz list unless it is excluded on purpose (documented above)."""
    assert set(FUZZ_API_KEYS) | _STATEFUL == set(api_versions())
    assert all(k in API_NAMES for k in FUZZ_API_KEYS)
