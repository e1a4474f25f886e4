"""Soak: mixed load on many connections and partitions; memory flat, no errors, no leaked descriptors (#13).

CI mode: 60 s, ~50 connections, 200 partitions. ``ODRADEK_LONG_TESTS=1``: 30 minutes, ~200
connections, 1000 partitions (``ODRADEK_SOAK_SECONDS`` overrides the duration).

Load (librdkafka clients, so the test process itself stays light): producers with acks=all and
idempotence, consumer groups reading everything back, and raw connections polling Metadata and
ApiVersions (every 0.5 s in CI, every 5 s in the long mode). The broker's RSS (``/proc/<pid>/status``) is sampled every 2 s: after the warm-up
(first 25 % of the run) it must grow by less than 10 %. When the clients are gone, the broker's
descriptor count (``/proc/<pid>/fd``) must be back at its level before the load. Figures and the
RSS curve go to ``artifacts/reliability/soak*.json`` for docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_oracle import recv_frame

from odradek.wire.protocol import encode_request, join_pieces, request_class

LONG = os.environ.get("ODRADEK_LONG_TESTS") == "1"
SECONDS = int(os.environ.get("ODRADEK_SOAK_SECONDS", 1800 if LONG else 60))
PARTITIONS = 1000 if LONG else 200
# librdkafka keeps a bootstrap connection and one per broker: ~2 sockets per client
PRODUCERS, CONSUMER_GROUPS, MEMBERS, POLLERS = (30, 5, 2, 110) if LONG else (8, 4, 2, 18)
# the same total produce rate in both modes (~2000 records/s): more connections, not more load
PRODUCE_PAUSE_S = 0.004 * PRODUCERS / 8
# a Metadata answer for 1000 partitions costs the broker ~10 ms: keep the pollers' share of CPU
POLL_PAUSE_S = 5.0 if LONG else 0.5
# Results go to the repo's artifacts/ (for docs/reliability.md) only when asked for, so that an
# ordinary test run leaves the work tree clean.
ARTIFACTS = (
    Path(__file__).resolve().parent.parent / "artifacts" / "reliability"
    if os.environ.get("ODRADEK_RECORD_RESULTS")
    else Path(tempfile.gettempdir()) / "odradek-reliability"
)


def rss_kib(pid: int) -> int:
    return memory_kib(pid)["VmRSS"]


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and its parts: RssAnon (the Python heap) and RssFile (mapped files: the indexes)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(value.split()[0])
    assert "VmRSS" in out, "no VmRSS"
    return out


def socket_fds(pid: int) -> tuple[int, int]:
    """(all descriptors, sockets) of a process."""
    total = sockets = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        total += 1
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                sockets += 1
        except OSError:
            pass
    return total, sockets


def test_soak(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(overrides={"num.partitions": 1, "group.initial.rebalance.delay.ms": 0})
    pid = broker.proc.pid
    topic = "soak"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(60)
    # __consumer_offsets (50 partitions, 5 files each) is created by the first FindCoordinator:
    # create it before the descriptors are counted
    with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
        find = request_class(10)(key="soak-warm-up")
        sock.sendall(join_pieces(encode_request(0, 1, find, client_id="soak-warm-up")))
        recv_frame(sock)
    time.sleep(1)
    fds_before, sockets_before = socket_fds(pid)
    stop = threading.Event()
    errors: list[str] = []
    counts = {"produced": 0, "consumed": 0, "polls": 0}
    lock = threading.Lock()

    def on_delivery(err, _msg) -> None:
        with lock:
            if err is not None:
                errors.append(f"delivery: {err}")
            else:
                counts["produced"] += 1

    def produce_loop(index: int) -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                             "linger.ms": 5, "client.id": f"soak-p{index}",
                             "error_cb": lambda e: errors.append(f"producer error_cb: {e}")})
        n = 0
        while not stop.is_set():
            try:
                producer.produce(topic, key=b"%d" % (n % 997), value=os.urandom(64 + n % 512),
                                 on_delivery=on_delivery)
            except BufferError:
                producer.poll(0.05)
                continue
            n += 1
            producer.poll(0)
            time.sleep(PRODUCE_PAUSE_S)
        producer.flush(30)

    def consume_loop(group: int, member: int) -> None:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"soak-g{group}",
                             "auto.offset.reset": "earliest", "client.id": f"soak-c{group}-{member}",
                             "error_cb": lambda e: errors.append(f"consumer error_cb: {e}")})
        consumer.subscribe([topic])
        while not stop.is_set():
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is not None:
                    errors.append(f"consume: {msg.error()}")
                else:
                    with lock:
                        counts["consumed"] += 1
        consumer.close()

    def poll_loop(index: int) -> None:
        with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
            corr = 0
            while not stop.is_set():
                corr += 1
                if corr % 2:
                    body = request_class(3)(topics=[request_class(3).MetadataRequestTopic(name=topic)])
                    frame = encode_request(12, corr, body, client_id=f"soak-m{index}")
                else:
                    frame = encode_request(3, corr, request_class(18)(client_software_name="probe", client_software_version="1"), client_id=f"soak-m{index}")
                sock.sendall(join_pieces(frame))
                recv_frame(sock)
                with lock:
                    counts["polls"] += 1
                stop.wait(POLL_PAUSE_S)

    threads = [threading.Thread(target=produce_loop, args=(i,), daemon=True) for i in range(PRODUCERS)]
    threads += [threading.Thread(target=consume_loop, args=(g, m), daemon=True)
                for g in range(CONSUMER_GROUPS) for m in range(MEMBERS)]
    threads += [threading.Thread(target=poll_loop, args=(i,), daemon=True) for i in range(POLLERS)]
    # ramp up like a fleet of clients coming online, not all in the same millisecond: the broker
    # answers requests on one event loop, and a burst of 200 handshakes plus 1000-partition
    # Metadata answers would hold it for seconds (librdkafka times ApiVersions out at 10 s)
    for t in threads:
        t.start()
        time.sleep(0.05)
    started = time.monotonic()
    curve: list[tuple[float, int]] = []
    parts: list[tuple[float, int, int]] = []  # (seconds, RssAnon, RssFile)
    peak_sockets = 0
    while (elapsed := time.monotonic() - started) < SECONDS:
        mem = memory_kib(pid)
        curve.append((round(elapsed, 1), mem["VmRSS"]))
        parts.append((round(elapsed, 1), mem.get("RssAnon", 0), mem.get("RssFile", 0)))
        peak_sockets = max(peak_sockets, socket_fds(pid)[1])
        assert broker.running, broker.log_tail()
        time.sleep(2)
    curve.append((round(time.monotonic() - started, 1), rss_kib(pid)))
    stop.set()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    time.sleep(2)  # the broker notices the closed connections
    fds_after, sockets_after = socket_fds(pid)
    warm = [rss for t, rss in curve if t >= SECONDS * 0.25]
    growth = (warm[-1] - warm[0]) / warm[0]
    stats = {
        "seconds": SECONDS, "partitions": PARTITIONS, "peak_broker_sockets": peak_sockets,
        "clients": {"producers": PRODUCERS, "consumers": CONSUMER_GROUPS * MEMBERS, "pollers": POLLERS},
        **counts, "errors": len(errors), "rss_kib_after_warmup": warm[0], "rss_kib_end": warm[-1],
        "rss_kib_max": max(r for _, r in curve), "rss_growth_after_warmup": round(growth, 4),
        "fds_before": fds_before, "fds_after": fds_after, "sockets_before": sockets_before,
        "sockets_after": sockets_after, "rss_curve": curve, "rss_anon_file_curve": parts, "long_mode": LONG,
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"soak{'_long' if LONG else ''}.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps({k: v for k, v in stats.items() if k != "rss_curve"}))
    assert errors == [], errors[:10]
    assert counts["produced"] > 0 and counts["consumed"] > 0 and counts["polls"] > 0
    assert peak_sockets >= (150 if LONG else 40), peak_sockets
    assert growth < 0.10, f"RSS grew {growth:.1%} after warm-up: {curve}"
    assert sockets_after <= sockets_before + 2, (sockets_before, sockets_after)
    # new segments and producer snapshots may open files; sockets are the leak that matters, but
    # descriptors overall must not grow with the number of requests either
    assert fds_after <= fds_before + 2 * PARTITIONS // 10 + 10, (fds_before, fds_after)
    console = broker.console_log.read_text()
    assert "Traceback" not in console and " ERROR " not in console, console[-3000:]
