"""Wire-level Kafka load generator: prebuilt Produce requests and header-only Fetch parsing.

``kcat`` costs about as much CPU per GB as the broker it drives, so on a small machine it
measures the client as much as the broker (issue #12). This generator does almost no work per
byte, so that what is left is the broker and the kernel:

* **Produce.** Before the clock starts, one Produce request is encoded ONCE with the project's
  own wire layer (``odradek.wire``): record batches v2 (CRC-32C, producerId -1, no compression)
  of ``record_size``-byte records, one batch of about ``batch_bytes`` per partition, all
  partitions in one request. Timed, each connection sends that same frame again and again with
  ``socket.sendall`` (only the 4-byte correlation id is patched in place), keeping up to
  ``in_flight`` requests unanswered like a producer's ``max.in.flight``; the broker assigns the
  offsets, so the same batch bytes can be appended any number of times. Responses (a few
  hundred bytes) are received into one reused buffer and decoded, and every partition's error
  code is checked.
* **Consume.** Fetch requests (the version the project's client negotiates, max_bytes 50 MiB,
  10 MiB per partition) from offset 0 to the end offsets ListOffsets reported before the clock
  started, one request in flight per connection as a consumer does. Each response is received
  with ``recv_into`` straight into a preallocated buffer; only the response's small structure is
  decoded (the record sets stay memoryviews into that buffer), and the record sets are walked
  batch header by batch header (base offset, length, last offset delta, record count) to
  advance the positions and count records; no record is decoded.

Each run is one process per connection (``--conns``): the processes set everything up, print a
``ready`` line and wait for ``go`` on stdin, so that the timed part is only the traffic; each
prints a JSON line with its own wall-clock span and CPU seconds (``time.process_time``).

Run by ``benchmarks/runner.py`` (the "wire ..." rows) or by hand::

    python benchmarks/wire_load.py produce --bootstrap 127.0.0.1:9092 --topic t --requests 100
    python benchmarks/wire_load.py consume --bootstrap 127.0.0.1:9092 --topic t
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any

from odradek.tools.client import FETCH, LIST_OFFSETS, PRODUCE, BrokerConnection, KafkaClient, KafkaError
from odradek.wire.protocol import decode_response, encode_request, request_class
from odradek.wire.records import SimpleRecord, build_batch

MIB = 1 << 20
_SIZE = struct.Struct(">i")
_CORR_AT = 8  # size(4) api_key(2) api_version(2) -> correlation id
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (bytes after these 12)
_LAST_DELTA = struct.Struct(">i")  # at +23
_COUNT = struct.Struct(">i")  # at +57
_BATCH_OVERHEAD = 61


def _leader_connection(bootstrap: str, topic: str, timeout: float) -> tuple[BrokerConnection, list[int]]:
    """A connection to the (single) leader of every partition of `topic`, and the partitions."""
    client = KafkaClient(bootstrap, client_id="odradek-wire-load", timeout=timeout)
    info = client.topic(topic, wait_s=30)
    leaders = {p.leader for p in info.partitions.values()}
    if len(leaders) != 1:
        raise RuntimeError(f"{topic}: partitions are led by {sorted(leaders)}; the generator drives one broker")
    host, port = client.brokers.get(leaders.pop(), client.bootstrap[0])
    client.close()
    conn = BrokerConnection(host, port, client_id="odradek-wire-load", timeout=timeout)
    return conn, sorted(info.partitions)


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got, size = 0, len(view)
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if not n:
            raise ConnectionError("broker closed the connection")
        got += n


# ---------------------------------------------------------------------------------------------
# Produce
# ---------------------------------------------------------------------------------------------

def records_per_batch(batch_bytes: int, record_size: int) -> int:
    """How many records of `record_size` value bytes fit a v2 batch of at most `batch_bytes`."""
    per_record = record_size + 12  # length, attributes, deltas, key -1, value length, headers 0
    return max(1, (batch_bytes - _BATCH_OVERHEAD) // per_record)


def build_produce_request(version: int, topic: str, partitions: list[int], *, batch_bytes: int,
                          record_size: int, acks: int, timeout_ms: int = 30_000,
                          seed: int = 1) -> tuple[bytearray, int]:
    """One Produce frame (size prefix included) with one batch per partition; (frame, records)."""
    rng = random.Random(seed)
    count = records_per_batch(batch_bytes, record_size)
    now = int(time.time() * 1000)
    values = [rng.randbytes(record_size) for _ in range(count)]
    batches = {p: build_batch([SimpleRecord(v, None, (), now) for v in values]) for p in partitions}
    cls = request_class(PRODUCE)
    body = cls(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[cls.TopicProduceData(
        name=topic, partition_data=[cls.PartitionProduceData(index=p, records=batches[p]) for p in partitions])])
    frame = bytearray(b"".join(bytes(piece) for piece in encode_request(version, 0, body,
                                                                        client_id="odradek-wire-load")))
    return frame, count * len(partitions)


class _Responses:
    """Small response frames from a socket through one reused receive buffer."""

    def __init__(self, sock: socket.socket, size: int = 256 * 1024) -> None:
        self.sock = sock
        self.buf = bytearray(size)
        self.view = memoryview(self.buf)
        self.start = 0
        self.end = 0

    def next_frame(self) -> memoryview:
        while True:
            if self.end - self.start >= 4:
                (size,) = _SIZE.unpack_from(self.buf, self.start)
                if self.end - self.start >= 4 + size:
                    frame = self.view[self.start + 4:self.start + 4 + size]
                    self.start += 4 + size
                    return frame
                if 4 + size > len(self.buf):
                    raise RuntimeError(f"response of {size} bytes is larger than the receive buffer")
            if self.start and (self.end == len(self.buf) or self.start == self.end):
                # move the partial frame to the front (a few hundred bytes at most)
                self.buf[:self.end - self.start] = self.buf[self.start:self.end]
                self.end -= self.start
                self.start = 0
            n = self.sock.recv_into(self.view[self.end:])
            if not n:
                raise ConnectionError("broker closed the connection")
            self.end += n


def check_produce_response(frame: memoryview, version: int, expected_corr: int) -> None:
    corr, response = decode_response(frame, PRODUCE, version)
    if corr != expected_corr:
        raise RuntimeError(f"Produce response for correlation id {corr}, expected {expected_corr}")
    for t in response.responses:
        for p in t.partition_responses:
            if p.error_code:
                raise KafkaError(p.error_code, p.error_message or f"Produce {t.name}-{p.index}")


@dataclass
class Stats:
    seconds: float
    cpu_seconds: float
    records: int
    bytes: int  # payload bytes (record values)
    requests: int
    start: float  # time.time() at the first send
    end: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ProduceLoad:
    """One connection sending one prebuilt Produce request `requests` times, pipelined."""

    def __init__(self, bootstrap: str, topic: str, *, batch_bytes: int = 256 * 1024, record_size: int = 1024,
                 acks: int = 1, in_flight: int = 5, timeout: float = 60.0) -> None:
        self.conn, self.partitions = _leader_connection(bootstrap, topic, timeout)
        self.version = self.conn.version_for(PRODUCE)
        self.frame, self.records_per_request = build_produce_request(
            self.version, topic, self.partitions, batch_bytes=batch_bytes, record_size=record_size, acks=acks)
        self.record_size = record_size
        self.acks = acks
        self.in_flight = max(1, in_flight if acks != 0 else 1)

    def run(self, requests: int) -> Stats:
        sock, frame = self.conn.sock, self.frame
        responses = _Responses(sock)
        version = self.version
        corr = 1 << 20  # above the ids the negotiation used
        answered = corr
        cpu0, t0, w0 = time.process_time(), time.perf_counter(), time.time()
        for _ in range(requests):
            if self.acks != 0 and corr - answered >= self.in_flight:
                check_produce_response(responses.next_frame(), version, answered)
                answered += 1
            struct.pack_into(">i", frame, _CORR_AT, corr)
            sock.sendall(frame)
            corr += 1
        if self.acks != 0:
            while answered < corr:
                check_produce_response(responses.next_frame(), version, answered)
                answered += 1
        seconds = time.perf_counter() - t0
        records = requests * self.records_per_request
        return Stats(seconds, time.process_time() - cpu0, records, records * self.record_size, requests,
                     w0, time.time())

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------------------------------------
# Consume
# ---------------------------------------------------------------------------------------------

def end_offsets(conn: BrokerConnection, topic: str, partitions: list[int], timestamp: int = -1) -> dict[int, int]:
    cls = request_class(LIST_OFFSETS)
    req = cls(replica_id=-1, isolation_level=0, topics=[cls.ListOffsetsTopic(
        name=topic, partitions=[cls.ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in partitions])])
    out = {}
    for t in conn.send(LIST_OFFSETS, req).topics:
        for p in t.partitions:
            if p.error_code:
                raise KafkaError(p.error_code, f"ListOffsets {topic}-{p.partition_index}")
            out[p.partition_index] = p.offset
    return out


def walk_batches(records: memoryview) -> tuple[int, int]:
    """(next offset after the last complete batch or -1, records in the complete batches).

    Reads only batch headers; a partial batch at the end (a broker may cut one off at the size
    limit) is not counted.
    """
    pos, size = 0, len(records)
    next_offset, count = -1, 0
    while pos + _BATCH_OVERHEAD <= size:
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        end = pos + 12 + length
        if end > size:
            break
        next_offset = base + _LAST_DELTA.unpack_from(records, pos + 23)[0] + 1
        count += _COUNT.unpack_from(records, pos + 57)[0]
        pos = end
    return next_offset, count


class ConsumeLoad:
    """One connection fetching partitions of a topic from offset 0 to their current end."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int] | None = None, *,
                 max_bytes: int = 50 * MIB, partition_max_bytes: int = 10 * MIB, timeout: float = 60.0) -> None:
        self.conn, all_parts = _leader_connection(bootstrap, topic, timeout)
        self.topic = topic
        self.partitions = all_parts if partitions is None else partitions
        self.version = self.conn.version_for(FETCH)
        self.ends = end_offsets(self.conn, topic, self.partitions)
        self.starts = end_offsets(self.conn, topic, self.partitions, timestamp=-2)
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        # a broker returns at least one whole batch even when it exceeds the limits: slack
        self.buf = bytearray(max_bytes + 2 * MIB)

    @property
    def expected_records(self) -> int:
        return sum(self.ends[p] - self.starts[p] for p in self.partitions)

    def _request(self, corr: int, positions: dict[int, int]) -> bytes:
        cls = request_class(FETCH)
        body = cls(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=self.max_bytes, isolation_level=0,
                   session_id=0, session_epoch=-1, topics=[cls.FetchTopic(topic=self.topic, partitions=[
                       cls.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=self.partition_max_bytes)
                       for p, o in positions.items()])])
        return b"".join(bytes(p) for p in encode_request(self.version, corr, body, client_id="odradek-wire-load"))

    def _receive(self) -> memoryview:
        sock = self.conn.sock
        head = memoryview(self.buf)[:4]
        _recv_exact(sock, head)
        (size,) = _SIZE.unpack_from(self.buf, 0)
        if size > len(self.buf):
            self.buf = bytearray(size + MIB)
        view = memoryview(self.buf)[:size]
        _recv_exact(sock, view)
        return view

    def run(self) -> Stats:
        positions = {p: self.starts[p] for p in self.partitions if self.starts[p] < self.ends[p]}
        records = fetched_bytes = requests = 0
        corr = 1 << 20
        cpu0, t0, w0 = time.process_time(), time.perf_counter(), time.time()
        while positions:
            self.conn.sock.sendall(self._request(corr, positions))
            requests += 1
            frame = self._receive()
            got, response = decode_response(frame, FETCH, self.version)
            if got != corr:
                raise RuntimeError(f"Fetch response for correlation id {got}, expected {corr}")
            corr += 1
            if response.error_code:
                raise KafkaError(response.error_code, "Fetch")
            for t in response.responses:
                for pd in t.partitions:
                    p = pd.partition_index
                    if pd.error_code:
                        error = KafkaError(pd.error_code, f"Fetch {self.topic}-{p}")
                        if error.retriable:
                            continue  # a partition still loading: ask again in the next round
                        raise error
                    if p not in positions or not pd.records:
                        continue
                    nxt, n = walk_batches(memoryview(pd.records))
                    if nxt > positions[p]:
                        records += n
                        fetched_bytes += len(pd.records)
                        positions[p] = nxt
                        if nxt >= self.ends[p]:
                            del positions[p]
            del frame, response
        seconds = time.perf_counter() - t0
        stats = Stats(seconds, time.process_time() - cpu0, records, fetched_bytes, requests, w0, time.time())
        if records != self.expected_records:
            raise RuntimeError(f"fetched {records} records, the partitions hold {self.expected_records}")
        return stats

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------------------------------------
# Command line (one process per connection; the runner starts several)
# ---------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["produce", "consume"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--requests", type=int, default=100, help="produce: requests to send")
    ap.add_argument("--batch-bytes", type=int, default=256 * 1024)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--acks", type=int, default=1)
    ap.add_argument("--in-flight", type=int, default=5)
    ap.add_argument("--partitions", help="consume: comma list (default: all)")
    ap.add_argument("--wait-go", action="store_true", help="print 'ready', start on a line on stdin")
    args = ap.parse_args(argv)
    load: ProduceLoad | ConsumeLoad
    if args.mode == "produce":
        load = ProduceLoad(args.bootstrap, args.topic, batch_bytes=args.batch_bytes, record_size=args.record_size,
                           acks=args.acks, in_flight=args.in_flight)
        ready = {"records_per_request": load.records_per_request, "request_bytes": len(load.frame),
                 "version": load.version}
    else:
        parts = [int(p) for p in args.partitions.split(",")] if args.partitions else None
        load = ConsumeLoad(args.bootstrap, args.topic, parts)
        ready = {"expected_records": load.expected_records, "version": load.version}
    if args.wait_go:
        print(json.dumps({"ready": ready}), flush=True)
        sys.stdin.readline()
    stats = load.run(args.requests) if isinstance(load, ProduceLoad) else load.run()
    load.close()
    print(json.dumps(stats.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
