"""Costs at scale, Odradek beside Apache Kafka 4.4.0 in the same run (issue #28, the scale table).

Each row is measured at two sizes at least, so that the table says whether a cost grows linearly
with the work or worse. Brokers alternate within a repetition (odradek, kafka, odradek, ...), each
on a fresh log dir, started as in ``benchmarks/runner.py`` (Kafka with its stock JVM options).

Rows (``python benchmarks/bench_scale.py ROW [--sizes ...] [--runs N]``):

* ``partitions``: N partitions in topics of 1,000 (one CreateTopics each). Times CreateTopics until Metadata shows a leader for
  every partition, and until a Produce to every partition succeeds (Kafka shows leaders before it
  has made their logs); Metadata latency (all topics, 30 requests, median and max, request sent to
  the last byte of the answer received, not decoded); one Produce request
  carrying a one-record batch for every partition (acks=1; 5 requests, median); then a clean stop
  and a restart: process start -> first ApiVersions answer, and -> a Produce to all N partitions
  answered without an error (the broker serves every partition).
* ``connections``: 50 busy connections, each sending a Produce of 10 records of 100 B (acks=1) every
  20 ms for 10 s, measured with 0, then N idle connections open beside them (each did one
  ApiVersions, then stays silent). Memory per idle connection = RSS growth / N; p50/p99/max round
  trip of the busy connections' requests.
* ``recovery``: 200 partitions filled with S GB by ``benchmarks/wire_load.py`` (1 KiB records),
  SIGKILL as soon as the last request is acknowledged, restart on the same dir: process start ->
  first ApiVersions answer, and -> ListOffsets reports every record of every partition.
* ``groups``: N consumer groups each commit one offset (OffsetCommit, generation -1, pipelined);
  clean stop, restart: process start -> first ApiVersions answer, and -> OffsetFetch returns the
  committed offset for a sample of 500 groups (spread over all ``__consumer_offsets`` partitions)
  and for the last group committed.

Results go to a JSON file (``--json``, appended per row); ``report`` turns it into the Markdown of
docs/performance.md's "Scale" section and the plots docs/img/scale-*.png.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runner import (  # noqa: E402  (runner puts compat-tests on the path for kafka_oracle)
    KafkaTarget,
    OdradekTarget,
    Target,
    end_offsets,
    proc_status_kb,
    wire_processes,
)

from odradek.tools.client import PRODUCE, BrokerConnection  # noqa: E402
from odradek.wire.protocol import decode_response, encode_request, request_class  # noqa: E402
from odradek.wire.records import SimpleRecord, build_batch  # noqa: E402

KAFKA_VERSION = "4.4.0"
METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, CREATE_TOPICS = 3, 8, 9, 10, 19
RETRY_CODES = {7, 14, 15, 16, 3, 5, 6}  # timeout, load in progress, not available, not coordinator, unknown tp...
REPO = Path(__file__).resolve().parent.parent
PER_TOPIC = 1000


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def make_target(name: str, workdir: Path, src: Path | None) -> Target:
    if name == "kafka":
        return KafkaTarget(workdir / "kafka", version=KAFKA_VERSION)
    target = OdradekTarget(workdir / "odradek")
    target.src = src
    return target


def connect(target: Target, timeout: float = 120.0) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", target.port, client_id="bench-scale", timeout=timeout)


def pipelined(conn: BrokerConnection, api_key: int, bodies: Iterable[Any], depth: int = 64) -> list[Any]:
    """Send requests with up to `depth` unanswered, return the responses in order."""
    version = conn.version_for(api_key)
    out: list[Any] = []
    in_flight = 0
    for body in bodies:
        conn._write(api_key, version, body)
        in_flight += 1
        if in_flight >= depth:
            out.append(decode_response(conn._read_frame(), api_key, version)[1])
            in_flight -= 1
    for _ in range(in_flight):
        out.append(decode_response(conn._read_frame(), api_key, version)[1])
    return out


def create_topic(target: Target, topic: str, partitions: int, timeout: float = 600.0) -> float:
    """CreateTopics, then wait until Metadata shows a leader for every partition; seconds."""
    cls = request_class(CREATE_TOPICS)
    t0 = time.perf_counter()
    with _closing(connect(target, timeout)) as conn:
        while True:
            resp = conn.send(CREATE_TOPICS, cls(topics=[cls.CreatableTopic(
                name=topic, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=int(timeout * 1000)))
            code = resp.topics[0].error_code
            if code in (0, 36):  # 36 TOPIC_ALREADY_EXISTS
                break
            if code not in RETRY_CODES or time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"CreateTopics {topic}: error {code}")
            time.sleep(0.2)
        while led_partitions(conn, topic) < partitions:
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"{topic}: not every partition has a leader after {timeout}s")
            time.sleep(0.1)
    return time.perf_counter() - t0


class _closing:
    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn

    def __enter__(self) -> BrokerConnection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def metadata(conn: BrokerConnection, topics: list[str] | None) -> Any:
    cls = request_class(METADATA)
    return conn.send(METADATA, cls(topics=None if topics is None else [cls.MetadataRequestTopic(name=t)
                                                                       for t in topics],
                                   allow_auto_topic_creation=False))


def led_partitions(conn: BrokerConnection, topic: str) -> int:
    resp = metadata(conn, [topic])
    return sum(1 for t in resp.topics if t.error_code == 0 for p in t.partitions if p.leader_id >= 0)


def produce_all_request(topic: str, partitions: int, records: int = 1, size: int = 100) -> Any:
    return produce_topics_request({topic: partitions}, records, size)


def produce_topics_request(topics: dict[str, int], records: int = 1, size: int = 100) -> Any:
    """One Produce request with a batch of `records` records for every partition of `topics`."""
    cls = request_class(PRODUCE)
    now = int(time.time() * 1000)
    batch = build_batch([SimpleRecord(b"x" * size, None, (), now) for _ in range(records)])
    return cls(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[cls.TopicProduceData(
        name=topic, partition_data=[cls.PartitionProduceData(index=p, records=batch) for p in range(partitions)])
        for topic, partitions in topics.items()])


def produce_errors(conn: BrokerConnection, body: Any) -> int:
    resp = conn.send(PRODUCE, body)
    return sum(1 for t in resp.responses for p in t.partition_responses if p.error_code != 0)


def rss_mb(target: Target) -> float:
    return proc_status_kb(target.pid, "VmRSS") / 1024


def median(values: list[float]) -> float:
    return statistics.median(values)


def wait_until(check: Callable[[], bool], timeout: float, what: str, pause: float = 0.01) -> None:
    t0 = time.perf_counter()
    while True:
        try:
            if check():
                return
        except (OSError, ConnectionError, EOFError):
            pass
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError(f"{what}: not done after {timeout}s")
        time.sleep(pause)


# ---------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------

def row_partitions(target: Target, n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    target.start()
    # topics of 1,000 partitions: Kafka's controller refuses a CreateTopics of more than 10,000
    # records (POLICY_VIOLATION), so one topic of 10,000 partitions cannot be made there
    topics = {f"scale-{i}": min(PER_TOPIC, n - i * PER_TOPIC) for i in range(-(-n // PER_TOPIC))}
    t0 = time.perf_counter()
    for topic, count in topics.items():
        create_topic(target, topic, count)
    out["create_s"] = time.perf_counter() - t0
    body = produce_topics_request(topics)
    with _closing(connect(target)) as conn:
        # Kafka shows leaders before their logs exist: ready = a produce to every partition succeeds
        wait_until(lambda: produce_errors(conn, body) == 0, 600, "first produce to all partitions", 0.05)
        out["create_ready_s"] = time.perf_counter() - t0
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            errors = produce_errors(conn, body)
            times.append(time.perf_counter() - t0)
            assert errors == 0, errors
        out["produce_all_ms"] = median(times) * 1000
        # the round trip to the last byte of the answer; the client decodes it once afterwards
        # (decoding 10,000 partitions in Python would add ~25 ms to both brokers' figures)
        cls = request_class(METADATA)
        version = conn.version_for(METADATA)
        lat = []
        for _ in range(30):
            t0 = time.perf_counter()
            conn._write(METADATA, version, cls(topics=None, allow_auto_topic_creation=False))
            frame = conn._read_frame()
            lat.append(time.perf_counter() - t0)
        resp = decode_response(frame, METADATA, version)[1]
        assert sum(len(t.partitions) for t in resp.topics if t.name in topics) == n
        out["metadata_p50_ms"] = median(lat) * 1000
        out["metadata_max_ms"] = max(lat) * 1000
    out["rss_mb"] = rss_mb(target)
    t0 = time.perf_counter()
    target.stop(timeout=600)
    out["stop_s"] = time.perf_counter() - t0
    os.sync()
    t0 = time.perf_counter()
    out["restart_api_s"] = target.start(timeout=600)
    with _closing(connect(target)) as conn:
        wait_until(lambda: produce_errors(conn, body) == 0, 600, "produce to all partitions after the restart")
    out["restart_serving_s"] = time.perf_counter() - t0
    target.stop(timeout=600)
    return out


def _api_versions_frame(correlation: int) -> bytes:
    payload = struct.pack(">hhih", 18, 0, correlation, 5) + b"bench"
    return struct.pack(">i", len(payload)) + payload


def _read_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("closed")
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            raise ConnectionError("closed")
        body += chunk
    return bytes(body)


def open_idle(port: int, count: int) -> list[socket.socket]:
    """`count` connections that each did one ApiVersions round trip, as a client's first request."""
    socks = []
    for start in range(0, count, 100):
        chunk = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(min(100, count - start))]
        for s in chunk:
            s.sendall(_api_versions_frame(1))
        for s in chunk:
            _read_frame(s)
        socks.extend(chunk)
    return socks


def busy_latencies(target: Target, topic: str, conns: int = 50, period: float = 0.02,
                   seconds: float = 10.0) -> list[float]:
    """Round trips (s) of `conns` connections each sending one small Produce every `period`."""
    import selectors

    with _closing(connect(target)) as probe:
        version = probe.version_for(PRODUCE)
    cls = request_class(PRODUCE)
    batch = build_batch([SimpleRecord(b"y" * 100, None, (), int(time.time() * 1000)) for _ in range(10)])
    frames = []
    for i in range(conns):
        body = cls(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[cls.TopicProduceData(
            name=topic, partition_data=[cls.PartitionProduceData(index=i % 6, records=batch)])])
        frames.append(b"".join(bytes(p) for p in encode_request(version, i, body, client_id="bench-busy",
                                                                api_key=PRODUCE)))
    sel = selectors.DefaultSelector()
    socks = []
    for i in range(conns):
        s = socket.create_connection(("127.0.0.1", target.port), timeout=60)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(_api_versions_frame(1))
        _read_frame(s)
        s.setblocking(False)
        socks.append(s)
        sel.register(s, selectors.EVENT_READ, i)
    sent_at = [0.0] * conns
    next_at = [time.perf_counter() + period * i / conns for i in range(conns)]
    pending = [False] * conns
    bufs = [bytearray() for _ in range(conns)]
    samples: list[float] = []
    end = time.perf_counter() + seconds
    try:
        while True:
            now = time.perf_counter()
            if now >= end and not any(pending):
                break
            for i in range(conns):
                if not pending[i] and now >= next_at[i] and now < end:
                    socks[i].setblocking(True)
                    socks[i].sendall(frames[i])
                    socks[i].setblocking(False)
                    sent_at[i] = time.perf_counter()
                    pending[i] = True
                    next_at[i] += period
                    if next_at[i] < now:  # behind: keep the pace, do not burst
                        next_at[i] = now + period
            wake = min((t for i, t in enumerate(next_at) if not pending[i]), default=now + period)
            for key, _ in sel.select(max(0.0, min(wake - time.perf_counter(), 0.005))):
                i = key.data
                data = socks[i].recv(65536)
                if not data:
                    raise ConnectionError("broker closed a busy connection")
                bufs[i] += data
                while len(bufs[i]) >= 4:
                    (size,) = struct.unpack_from(">i", bufs[i])
                    if len(bufs[i]) < 4 + size:
                        break
                    frame = bytes(bufs[i][4:4 + size])
                    del bufs[i][:4 + size]
                    _, resp = decode_response(memoryview(frame), PRODUCE, version)
                    code = resp.responses[0].partition_responses[0].error_code
                    if code != 0:
                        raise RuntimeError(f"busy produce error {code}")
                    samples.append(time.perf_counter() - sent_at[i])
                    pending[i] = False
    finally:
        for s in socks:
            s.close()
        sel.close()
    return samples


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def row_connections(target: Target, sizes: list[int]) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    target.start()
    topic = "busy"
    create_topic(target, topic, 6)
    busy_latencies(target, topic, seconds=2)  # warm-up (JIT, first segment writes)
    idle: list[socket.socket] = []
    try:
        base_rss = 0.0
        for n in [0, *sizes]:
            idle.extend(open_idle(target.port, n - len(idle)))
            time.sleep(2)
            rss = rss_mb(target)
            if n == 0:
                base_rss = rss
            lat = busy_latencies(target, topic)
            out[n] = {"rss_mb": rss, "kb_per_conn": (rss - base_rss) * 1024 / n if n else 0.0,
                      "p50_ms": _pct(lat, 0.5) * 1000, "p99_ms": _pct(lat, 0.99) * 1000,
                      "max_ms": max(lat) * 1000, "requests": len(lat)}
            print(f"  {target.name} idle={n}: {out[n]}", file=sys.stderr, flush=True)
    finally:
        for s in idle:
            s.close()
        target.stop()
    return out


def row_recovery(target: Target, gb: float, logs: Path) -> dict[str, float]:
    from wire_load import records_per_batch

    target.start()
    topic = "recovery"
    partitions = 200
    create_topic(target, topic, partitions)
    body = produce_all_request(topic, partitions)
    with _closing(connect(target)) as conn:  # Kafka shows leaders before it has made their logs
        wait_until(lambda: produce_errors(conn, body) == 0, 600, "first produce to all partitions", 0.05)
    batch_bytes, size = 64 * 1024, 1024
    per_request = records_per_batch(batch_bytes, size) * partitions
    conns = 2
    requests = max(1, round(gb * 1e9 / (per_request * size) / conns))
    args = ["--requests", str(requests), "--batch-bytes", str(batch_bytes), "--record-size", str(size),
            "--acks", "1", "--in-flight", "3"]
    os.sync()
    elapsed, stats = wire_processes("produce", target.bootstrap, topic, [args] * conns, logs)
    # the broker's own count (the first produce's retries appended to the partitions that took them)
    records = end_offsets(target.bootstrap, topic, timeout=30)
    if records < sum(s["records"] for s in stats) + partitions:
        raise RuntimeError(f"{target.name}: {topic} holds {records} records, fewer than were acknowledged")
    target.kill()
    disk = sum(f.stat().st_size for f in target.log_dir.rglob("*.log") if f.parent.name.startswith(topic))
    os.sync()
    t0 = time.perf_counter()
    api = target.start(timeout=1800)
    wait_until(lambda: end_offsets(target.bootstrap, topic, timeout=5) == records, 1800,
               "ListOffsets after the restart", 0.05)
    serving = time.perf_counter() - t0
    target.stop(timeout=600)
    return {"produce_s": elapsed, "log_bytes": disk, "restart_api_s": api, "restart_serving_s": serving,
            "records": records}


def _commit_body(group: str, topic: str, offset: int) -> Any:
    cls = request_class(OFFSET_COMMIT)
    return cls(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        cls.OffsetCommitRequestTopic(name=topic, partitions=[cls.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_metadata="")])])


def _fetch_body(group: str, topic: str) -> Any:
    cls = request_class(OFFSET_FETCH)
    return cls(group_id=group, topics=[cls.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])


def row_groups(target: Target, n: int) -> dict[str, float]:
    target.start()
    topic = "committed"
    create_topic(target, topic, 1)
    out: dict[str, float] = {}
    groups = [f"bench-group-{i}" for i in range(n)]
    with _closing(connect(target)) as conn:
        cls = request_class(FIND_COORDINATOR)
        wait_until(lambda: conn.send(FIND_COORDINATOR, cls(key=groups[0], key_type=0)).error_code == 0, 120,
                   "FindCoordinator", 0.2)

        def commit_ok() -> bool:
            r = conn.send(OFFSET_COMMIT, _commit_body(groups[0], topic, 0))
            return r.topics[0].partitions[0].error_code == 0

        wait_until(commit_ok, 120, "first OffsetCommit", 0.2)
        t0 = time.perf_counter()
        for start in range(0, n, 5000):
            resps = pipelined(conn, OFFSET_COMMIT, (_commit_body(g, topic, start + j + 1)
                                                    for j, g in enumerate(groups[start:start + 5000])))
            bad = [r for r in resps if r.topics[0].partitions[0].error_code != 0]
            if bad:
                raise RuntimeError(f"OffsetCommit error {bad[0].topics[0].partitions[0].error_code}")
        out["commit_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    target.stop(timeout=600)
    out["stop_s"] = time.perf_counter() - t0
    out["offsets_bytes"] = sum(f.stat().st_size for f in target.log_dir.rglob("*.log")
                               if f.parent.name.startswith("__consumer_offsets"))
    os.sync()
    sample = sorted(set(random.Random(n).sample(range(n), min(n, 500))) | {n - 1})
    todo = {i: groups[i] for i in sample}
    t0 = time.perf_counter()
    out["restart_api_s"] = target.start(timeout=600)
    with _closing(connect(target)) as conn:
        while todo:
            keys = list(todo)
            resps = pipelined(conn, OFFSET_FETCH, (_fetch_body(todo[i], topic) for i in keys))
            for i, r in zip(keys, resps, strict=True):
                code = r.error_code or r.topics[0].partitions[0].error_code
                if code == 0:
                    got = r.topics[0].partitions[0].committed_offset
                    if got != i + 1:
                        if got == -1:
                            continue  # not loaded yet would answer an error; -1 is a real miss: retry a bit
                        raise RuntimeError(f"group {todo[i]}: offset {got}, committed {i + 1}")
                    del todo[i]
                elif code not in RETRY_CODES:
                    raise RuntimeError(f"OffsetFetch error {code}")
            if time.perf_counter() - t0 > 600:
                raise RuntimeError(f"{len(todo)} groups' offsets not loaded after 600 s")
            if todo:
                time.sleep(0.01)
    out["restart_loaded_s"] = time.perf_counter() - t0
    target.stop(timeout=600)
    return out


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------

def save(path: Path, row: str, broker: str, size: float, run: int, metrics: dict[str, float]) -> None:
    data = json.loads(path.read_text()) if path.is_file() else {"runs": []}
    data["runs"].append({"row": row, "broker": broker, "size": size, "run": run, "metrics": metrics,
                         "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                         "load": os.getloadavg()[0]})
    path.write_text(json.dumps(data, indent=1))


def export_head(dest: Path) -> Path:
    """The committed package (git archive HEAD), so other people's uncommitted edits are not measured."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--prefix=odradek/", "HEAD"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    from runner import compile_package

    return compile_package(dest / "odradek")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("row", choices=["partitions", "connections", "recovery", "groups", "report"])
    parser.add_argument("--sizes", type=float, nargs="+")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--brokers", nargs="+", default=["odradek", "kafka"])
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "scale.json")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--head", action="store_true", help="run the committed package (git archive HEAD)")
    parser.add_argument("--output", type=Path, help="report: write the Markdown here")
    parser.add_argument("--img", type=Path, default=REPO / "docs" / "img")
    args = parser.parse_args(argv)
    if args.row == "report":
        from bench_scale_report import render

        text = render(json.loads(args.json.read_text()), args.img)
        if args.output:
            args.output.write_text(text)
        print(text)
        return 0
    defaults = {"partitions": [2000, 10000], "connections": [500, 2000], "recovery": [2, 20],
                "groups": [10000, 100000]}
    sizes = args.sizes or defaults[args.row]
    base = args.workdir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    src = export_head(base / "src") if args.head else None
    try:
        for run in range(args.runs):
            if args.row == "connections":
                for broker in args.brokers:
                    wd = base / f"{broker}-{run}"
                    target = make_target(broker, wd, src)
                    try:
                        res = row_connections(target, [int(s) for s in sizes])
                    finally:
                        target.kill()
                        shutil.rmtree(wd, ignore_errors=True)
                    for n, metrics in res.items():
                        save(args.json, "connections", broker, n, run, metrics)
                continue
            for size in sizes:
                for broker in args.brokers:
                    wd = base / f"{broker}-{run}-{size}"
                    target = make_target(broker, wd, src)
                    try:
                        if args.row == "partitions":
                            res = row_partitions(target, int(size))
                        elif args.row == "recovery":
                            (wd / "logs").mkdir(parents=True, exist_ok=True)
                            res = row_recovery(target, size, wd / "logs")
                        else:
                            res = row_groups(target, int(size))
                    except BaseException:
                        target.kill()
                        print(f"failed; the broker's console log: {target.console}", file=sys.stderr)
                        raise
                    target.kill()
                    shutil.rmtree(wd, ignore_errors=True)
                    print(f"{args.row} {broker} {size}: {res}", flush=True)
                    save(args.json, args.row, broker, size, run, res)
    except BaseException:
        raise
    if args.workdir is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
