"""Smoke test of benchmarks/runner.py: its quick mode on a tiny workload, Odradek only.

Nothing is timed or compared here (the machine may be busy); the test only keeps the runner,
its helper processes, the loop monitor and the report generator from rotting: every workload
must complete, its record count must check out (the runner verifies it with ListOffsets) and
the report must be written.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka_oracle import in_ci

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))


def test_runner_quick_tiny(tmp_path: Path, kcat: str) -> None:
    out_json = tmp_path / "perf.json"
    report = tmp_path / "performance.md"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "runner.py"), "--quick", "--scale", "0.005",
         "--brokers", "odradek", "--workdir", str(tmp_path / "work"), "--json", str(out_json),
         "--output", str(report)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out_json.read_text())
    workloads = {r["workload"] for r in data["results"]}
    assert {"start-up", "consumer catch-up from 0", "recovery after kill -9", "1KiB base",
            "mixed produce+consume", "peak RSS"} <= workloads
    assert any(w.startswith("latency") for w in workloads)
    lat = next(r for r in data["results"] if r["kind"] == "latency")["metrics"]
    assert lat["received"] > 0
    mixed = next(r for r in data["results"] if r["kind"] == "mixed")["metrics"]
    assert mixed["loop"]["steps"] > 0  # the loop monitor reported while the workload ran
    text = report.read_text()
    assert "## Targets" in text and "1KiB base" in text
    # the wire load generator's rows run next to the kcat ones
    assert {"wire 1KiB base", "wire acks=all", "wire consumer catch-up from 0",
            "wire consumer catch-up from 0, 2 connections"} <= workloads
    wire = next(r for r in data["results"] if r["workload"] == "wire 1KiB base")["metrics"]
    assert wire["gen_cpu_s_per_gb"] > 0 and wire["bytes"] > 0
    # and kafka-python's, for comparison (the runner checks the produced count with ListOffsets)
    assert {"kafka-python 1KiB", "kafka-python consumer from 0"} <= workloads
    for name in ("kafka-python 1KiB", "kafka-python consumer from 0"):
        metrics = next(r for r in data["results"] if r["workload"] == name)["metrics"]
        assert metrics["bytes"] > 0 and metrics["gen_cpu_s_per_gb"] > 0, name
    assert "kafka-python 1KiB" in text


def test_wire_load_generator(odradek_broker_factory, tmp_path: Path) -> None:
    """benchmarks/wire_load.py against a real Odradek: the prebuilt, re-sent Produce requests are
    accepted (acks=1 and acks=all; the broker checks each batch's CRC-32C) and appended as new
    records every time, and the header-only consumer counts every record, also when the size
    limits cut responses (and possibly batches) short."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from runner import admin_create_topic, end_offsets
    from wire_load import ConsumeLoad, ProduceLoad, records_per_batch, walk_batches

    from odradek.tools.client import KafkaClient

    broker = odradek_broker_factory()
    topic = "wire-load"
    admin_create_topic(broker.bootstrap, topic, 3)
    produced = 0
    for acks, requests in ((1, 9), (-1, 4)):
        load = ProduceLoad(broker.bootstrap, topic, batch_bytes=64 * 1024, record_size=1024, acks=acks, in_flight=3)
        assert load.records_per_request == 3 * records_per_batch(64 * 1024, 1024)
        stats = load.run(requests)
        load.close()
        assert stats.records == requests * load.records_per_request
        assert stats.bytes == stats.records * 1024
        produced += stats.records
    assert end_offsets(broker.bootstrap, topic) == produced

    with KafkaClient(broker.bootstrap) as client:
        info = client.topic(topic)
        first = next(client.fetch(info, {0: 0}))
    assert first.key is None and len(first.value) == 1024

    for max_bytes, part_max in ((50 << 20, 10 << 20), (150_000, 70_000)):
        consume = ConsumeLoad(broker.bootstrap, topic, max_bytes=max_bytes, partition_max_bytes=part_max)
        assert consume.expected_records == produced
        stats = consume.run()  # raises unless it counted every record
        consume.close()
        assert stats.records == produced
        assert stats.requests >= (2 if max_bytes < produced * 1024 else 1)
    part = ConsumeLoad(broker.bootstrap, topic, [1])
    assert part.run().records == part.expected_records == produced // 3
    part.close()

    # a record set cut inside its second batch: only the first batch counts
    from odradek.wire.records import SimpleRecord, build_batch

    one = build_batch([SimpleRecord(b"x" * 10, timestamp=1)] * 5, base_offset=7)
    assert walk_batches(memoryview(one + one[:40])) == (12, 5)
    assert walk_batches(memoryview(b"")) == (-1, 0)


def test_go_latency_client(odradek_broker_factory, tmp_path: Path) -> None:
    """benchmarks/latency_client (Go, franz-go) against a real Odradek for 2 s at 2000 records/s:
    it builds (fetching its modules from the Go proxy if they are not cached), receives every
    record it sent and reports finite, ordered percentiles and its own CPU time."""
    from runner import admin_create_topic, build_latency_client, go_latency, go_tool

    if go_tool() is None:
        msg = ("GO TOOLCHAIN MISSING: `go` is not installed, so the benchmark's Go latency client "
               "(benchmarks/latency_client) is untested")
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    exe = build_latency_client(tmp_path / "bin")  # before the broker starts: the build is CPU-heavy
    broker = odradek_broker_factory()
    admin_create_topic(broker.bootstrap, "latency", 3)
    out = go_latency(exe, broker.bootstrap, "latency", 3, rate=2000, seconds=2.0)
    assert out["sent"] == 4000 and out["received"] == out["sent"], out
    assert out["produce_errors"] == 0, out
    assert 1.9 <= out["seconds"] < 10, out  # the last record is due at (sent - 1) / rate
    for prefix in ("", "ack_"):
        p50, p99, p999, top = (out[f"{prefix}{k}_ms"] for k in ("p50", "p99", "p999", "max"))
        assert all(math.isfinite(v) and v >= 0 for v in (p50, p99, p999, top)), out
        assert p50 <= p99 <= p999 <= top, out
    assert out["client_cpu_s"] > 0, out


def test_broker_cpu_and_memory_include_its_child_processes() -> None:
    """Odradek's sender processes do part of a broker's work: the runner's CPU and RSS figures of
    a broker count its running children (and reaped ones' CPU) with it."""
    import runner

    spin = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\ninput()"
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys\n"
         f"child = subprocess.Popen([sys.executable, '-c', {spin!r}], stdin=subprocess.PIPE)\n"
         "print(child.pid, flush=True)\ninput()\nchild.communicate(b'\\n')\nprint('reaped', flush=True)\ninput()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert runner.live_children(parent.pid) == [child]
        deadline = time.monotonic() + 30
        while runner.proc_cpu_seconds(child) < 0.55 and time.monotonic() < deadline:
            time.sleep(0.05)
        own = runner._proc_stat(parent.pid)
        assert (int(own[11]) + int(own[12])) / runner.CLK_TCK < 0.3  # the parent itself is idle
        assert runner.proc_cpu_seconds(parent.pid) >= 0.55
        assert runner.proc_status_kb(parent.pid, "VmRSS") > runner.proc_status_kb(child, "VmRSS")
        parent.stdin.write("\n")
        parent.stdin.flush()
        assert parent.stdout.readline().strip() == "reaped"
        assert runner.live_children(parent.pid) == []
        assert runner.proc_cpu_seconds(parent.pid) >= 0.55  # now in the parent's cutime
    finally:
        parent.kill()
        parent.wait()
