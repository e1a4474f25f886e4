"""Event-loop stalls of a real Odradek under a mixed workload plus admin operations (issue #12).

Starts ``python -m odradek serve`` as a subprocess with ``ODRADEK_LOOP_MONITOR`` and small
segments (``log.segment.bytes``, so segments roll all the time), then at once:

* a ``kcat`` producer (1 KiB records, acks=1) and a tailing ``kcat`` consumer on a 6-partition topic;
* an admin thread (confluent-kafka): CreateTopics of 100-partition topics (1000 partitions in
  all by default), a Metadata request for every topic after each creation, consumer-group joins
  (the first one creates ``__consumer_offsets``), and at the end DeleteTopics of those topics.

Afterwards it prints what the loop monitor saw during that window: the longest task step (wall
clock and CPU), p99 / p99.9 of the step durations, the longest GC pause (wall clock and CPU),
and every step that took more than 5 ms of CPU with the request it served. Then, with the load
gone, how long after a Produce a long-polling Fetch of the same partition is answered. Reproducible, one command::

    python benchmarks/bench_loop_stalls.py            # ~30-60 s on 2 busy cores
    python benchmarks/bench_loop_stalls.py --json out.json --records 50000

Wall-clock figures on a shared machine include time the OS gave to other processes in the
middle of a step; the CPU figures do not. The load average is printed with the results.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from odradek import loop_monitor
from odradek.testing import wait_listening

KCAT = shutil.which("kcat") or shutil.which("kafkacat") or "kcat"


def start_broker(workdir: Path, loop_file: Path, segment_bytes: int,
                 src: Path | None = None) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "odradek", "serve",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
           "--override", f"log.dirs={workdir / 'data'}",
           "--override", f"log.segment.bytes={segment_bytes}",
           "--override", "group.initial.rebalance.delay.ms=0"]
    env = dict(os.environ, ODRADEK_LOOP_MONITOR=str(loop_file))
    if src is not None:  # a directory named odradek, e.g. `git archive` of an older commit
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src.resolve().parent), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    host, port = wait_listening(proc)
    return proc, f"{host}:{port}"


def payload_file(path: Path, size: int, count: int) -> Path:
    rng = random.Random(size)
    alphabet = b"abcdefghijklmnopqrstuvwxyz "
    pool = bytes(rng.choice(alphabet) for _ in range(1 << 16))
    with path.open("wb") as out:
        for _ in range(count):
            start = rng.randrange(len(pool) - size)
            out.write(pool[start:start + size] + b"\n")
    return path


def create_topic(admin, name: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(60)


def admin_ops(bootstrap: str, topics: int, partitions: int, joins: int, stop: threading.Event,
              stats: dict) -> None:
    """CreateTopics, Metadata of everything, group joins, then DeleteTopics."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = []
    for i in range(topics):
        if stop.is_set():
            break
        name = f"stall-admin-{i}"
        t0 = time.perf_counter()
        create_topic(admin, name, partitions)
        stats["create_s"].append(time.perf_counter() - t0)
        names.append(name)
        t0 = time.perf_counter()
        md = admin.list_topics(timeout=30)  # Metadata of every topic
        stats["metadata_s"].append(time.perf_counter() - t0)
        stats["metadata_partitions"] = sum(len(t.partitions) for t in md.topics.values())
        if i < joins:
            t0 = time.perf_counter()
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"stall-group-{i}",
                                 "auto.offset.reset": "earliest", "enable.auto.commit": True})
            consumer.subscribe(["stall-mixed"])
            deadline = time.monotonic() + 30
            while not consumer.assignment() and time.monotonic() < deadline:
                consumer.poll(0.2)
            consumer.close()
            stats["join_s"].append(time.perf_counter() - t0)
        time.sleep(0.5)
    if names:
        t0 = time.perf_counter()
        for fut in admin.delete_topics(names, operation_timeout=30).values():
            fut.result(60)
        stats["delete_s"].append(time.perf_counter() - t0)


def wakeup_latency(bootstrap: str, topic: str, rounds: int) -> dict:
    """A long-poll Fetch waits on partition 0; a Produce appends one record. Returns p50/p99/max of
    produce sent -> fetch answered (end to end) and of the produce's own round trip (ms)."""
    from odradek.tools.client import BrokerConnection
    from odradek.wire.protocol import request_class
    from odradek.wire.records import SimpleRecord, build_batch

    host, port = bootstrap.rsplit(":", 1)
    producer = BrokerConnection(host, int(port))
    fetcher = BrokerConnection(host, int(port))
    produce_cls, fetch_cls = request_class(0), request_class(1)
    offsets = producer.send(2, request_class(2)(replica_id=-1, isolation_level=0, topics=[
        request_class(2).ListOffsetsTopic(name=topic, partitions=[
            request_class(2).ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    offset = offsets.topics[0].partitions[0].offset
    e2e, ack = [], []
    for _ in range(rounds):
        answered: dict[str, float] = {}

        def fetch(at: int = offset, answered: dict = answered) -> None:
            fetcher.send(1, fetch_cls(replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20,
                                      isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                          fetch_cls.FetchTopic(topic=topic, partitions=[fetch_cls.FetchPartition(
                                              partition=0, fetch_offset=at, partition_max_bytes=1 << 20)])]),
                         version=12)
            answered["t"] = time.perf_counter()

        waiter = threading.Thread(target=fetch)
        waiter.start()
        time.sleep(0.03)  # the fetch is waiting in the broker by now
        batch = build_batch([SimpleRecord(b"x" * 100, timestamp=int(time.time() * 1000))])
        t0 = time.perf_counter()
        producer.send(0, produce_cls(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
            produce_cls.TopicProduceData(name=topic, partition_data=[
                produce_cls.PartitionProduceData(index=0, records=batch)])]))
        t1 = time.perf_counter()
        waiter.join(10)
        e2e.append((answered["t"] - t0) * 1000)
        ack.append((t1 - t0) * 1000)
        offset += 1
    producer.close()
    fetcher.close()

    def stats(xs: list[float]) -> dict:
        xs = sorted(xs)
        return {"p50_ms": round(xs[len(xs) // 2], 3), "p99_ms": round(xs[int(len(xs) * 0.99)], 3),
                "max_ms": round(xs[-1], 3)}

    return {"produce_to_fetch_answer": stats(e2e), "produce_round_trip": stats(ack), "rounds": rounds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000, help="1 KiB records produced (and consumed)")
    ap.add_argument("--chunks", type=int, default=30, help="kcat producer runs the records are split into")
    ap.add_argument("--pause", type=float, default=0.3, help="seconds between producer runs")
    ap.add_argument("--topics", type=int, default=10, help="topics created during the run")
    ap.add_argument("--partitions", type=int, default=100, help="partitions per created topic")
    ap.add_argument("--joins", type=int, default=3, help="consumer-group joins (one per created topic)")
    ap.add_argument("--segment-bytes", type=int, default=1 << 20, help="log.segment.bytes (rolls)")
    ap.add_argument("--wakeup-rounds", type=int, default=200,
                    help="long-poll fetch wake-up measurements after the load (0: none)")
    ap.add_argument("--odradek-src", type=Path, help="run the odradek package in this directory (named odradek)")
    ap.add_argument("--json", type=Path, help="write the summary here too")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (loop monitor lines, logs)")
    args = ap.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="odradek-stalls-"))
    loop_file = workdir / "loop.jsonl"
    data = payload_file(workdir / "records.txt", 1024, args.records // args.chunks)
    load_before = os.getloadavg()
    proc, bootstrap = start_broker(workdir, loop_file, args.segment_bytes, args.odradek_src)
    stats: dict = collections.defaultdict(list)
    try:
        from confluent_kafka.admin import AdminClient

        create_topic(AdminClient({"bootstrap.servers": bootstrap}), "stall-mixed", 6)
        time.sleep(1.5)  # the monitor reports per second: start the window after the set-up
        start = time.time()
        logs = (workdir / "kcat.err").open("w")
        consumer = subprocess.Popen([KCAT, "-C", "-b", bootstrap, "-t", "stall-mixed", "-o", "beginning",
                                     "-q", "-c", str(args.records // args.chunks * args.chunks)], stdout=subprocess.DEVNULL, stderr=logs)
        stop = threading.Event()
        admin = threading.Thread(target=admin_ops, args=(bootstrap, args.topics, args.partitions, args.joins,
                                                         stop, stats), daemon=True)
        admin.start()
        t0 = time.perf_counter()
        # the records in --chunks kcat runs with pauses between, so that the load lasts as long
        # as the admin operations do
        per = args.records // args.chunks
        for _ in range(args.chunks):
            producer = subprocess.run([KCAT, "-P", "-b", bootstrap, "-t", "stall-mixed", "-l", "-X", "acks=1",
                                       "-X", "queue.buffering.max.kbytes=262144", "-c", str(per),
                                       str(data)], stderr=logs)
            if producer.returncode != 0:
                break
            time.sleep(args.pause)
        produce_s = time.perf_counter() - t0
        try:
            consumer.wait(timeout=120)
        except subprocess.TimeoutExpired:
            consumer.kill()
            print("consumer did not read everything in time", file=sys.stderr)
        consume_s = time.perf_counter() - t0
        admin.join(timeout=300)
        stop.set()
        time.sleep(1.2)  # let the monitor write the last second
        end = time.time()
        if producer.returncode != 0 or consumer.returncode != 0:
            print(f"kcat failed (producer {producer.returncode}, consumer {consumer.returncode}); "
                  f"see {workdir / 'kcat.err'}", file=sys.stderr)
        wakeups = wakeup_latency(bootstrap, "stall-mixed", args.wakeup_rounds) if args.wakeup_rounds else {}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    load_after = os.getloadavg()
    summary = loop_monitor.summarize(loop_monitor.read_window(loop_file, start, end), slow_limit=None)
    mb = args.records // args.chunks * args.chunks * 1024 / 1e6
    by_label: dict[str, list[float]] = collections.defaultdict(list)
    for entry in summary["slow"]:
        by_label[entry["label"] or entry["task"]].append(entry["cpu_ms"])
    report = {
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "produce_mb_s": round(mb / produce_s, 1), "consume_mb_s": round(mb / consume_s, 1),
        "steps": summary["steps"],
        "max_step_ms": summary["max_ms"], "max_step_task": summary["max_task"],
        "max_step_cpu_ms": summary["max_cpu_ms"], "max_step_cpu_task": summary["max_cpu_task"],
        "p99_ms": summary["p99_ms"], "p999_ms": summary["p999_ms"], "lag_max_ms": summary["lag_max_ms"],
        "gc_max_ms": summary["gc_max_ms"], "gc_max_cpu_ms": summary["gc_max_cpu_ms"], "gc_count": summary["gc_count"],
        "steps_over_5ms_cpu": summary["slow_count"],
        "slow_by_request": {k: {"count": len(v), "max_cpu_ms": max(v)} for k, v in
                            sorted(by_label.items(), key=lambda kv: -max(kv[1]))},
        "gc_slow": summary["gc_slow"][:10],
        "fetch_wakeup": wakeups,
        "admin": {k: [round(x, 3) for x in v] if isinstance(v, list) else v for k, v in stats.items()},
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.keep:
        print(f"work dir kept: {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
