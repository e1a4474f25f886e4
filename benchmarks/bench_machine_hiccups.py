"""How much CPU time does a fixed piece of work take on this machine, alone and beside a busy broker?

The broker's loop monitor sometimes sees a Produce or Fetch step take 5-12 ms of thread CPU time
where the same request usually takes well under 1 ms. This benchmark checks whether such outliers
belong to the broker's code or to the machine: a probe process times one fixed, tiny, pure-Python
work item (no allocation beyond the first, no syscalls) in thread CPU time, over and over, first on
the otherwise idle machine, then while an Odradek broker serves the latency workload of
benchmarks/runner.py (the Go latency client) and its loop monitor records slow steps (needs Go for the latency client). A work item whose CPU time jumps from ~40 us to milliseconds
did not do more work: the virtual CPU it ran on was slowed or taken away without the guest
accounting it as steal time.

Run: `python benchmarks/bench_machine_hiccups.py [--seconds 10]`; prints a Markdown report
(docs/performance.md quotes it).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PROBE = r"""
import json, sys, time
end = time.perf_counter() + float(sys.argv[1])
data = list(range(200))
xs = []
while time.perf_counter() < end:
    c = time.thread_time()
    s = 0
    for x in data:
        s += x * x
    xs.append(time.thread_time() - c)
print(json.dumps(xs))
"""


def probe_stats(samples: list[float]) -> dict[str, float]:
    xs = sorted(samples)
    return {"items": len(xs), "median_us": statistics.median(xs) * 1e6,
            "p9999_ms": xs[min(len(xs) - 1, int(len(xs) * 0.9999))] * 1e3, "max_ms": xs[-1] * 1e3,
            "over_1ms": sum(1 for x in xs if x > 1e-3), "over_4ms": sum(1 for x in xs if x > 4e-3)}


def start_probe(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PROBE, str(seconds)], stdout=subprocess.PIPE, text=True)


def finish_probe(proc: subprocess.Popen) -> dict[str, float]:
    out, _ = proc.communicate()
    return probe_stats(json.loads(out))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def beside_broker(seconds: float) -> tuple[dict[str, float], list[dict], float]:
    """Probe stats, the broker's slow loop steps and the steal share while the latency workload runs."""
    from runner import admin_create_topic, build_latency_client, go_latency, machine_cpu_seconds

    from odradek.loop_monitor import read_window

    work = Path(tempfile.mkdtemp(prefix="hiccups-"))
    port = free_port()
    env = {**os.environ, "ODRADEK_LOOP_MONITOR": str(work / "loop.jsonl")}
    broker = subprocess.Popen([sys.executable, "-m", "odradek", "serve", "--override",
                               f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={work / 'logs'}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        admin_create_topic(bootstrap, "hiccups", 6)
        time.sleep(1.1)
        exe = build_latency_client(work)
        t0, (_, steal0) = time.time(), machine_cpu_seconds()
        probe = start_probe(seconds)
        go_latency(exe, bootstrap, "hiccups", 6, 10_000, seconds)
        stats = finish_probe(probe)
        t1, (_, steal1) = time.time(), machine_cpu_seconds()
        time.sleep(1.2)  # the loop monitor's line covering the end of the window
        slow = [s for line in read_window(work / "loop.jsonl", t0, t1) for s in line.get("slow", ())]
        return stats, slow, (steal1 - steal0) / (t1 - t0)
    finally:
        broker.terminate()
        broker.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    from runner import go_tool, machine_cpu_seconds

    if go_tool() is None:
        raise SystemExit("needs Go (the latency client is benchmarks/latency_client)")
    t0, (_, steal0) = time.time(), machine_cpu_seconds()
    idle = finish_probe(start_probe(args.seconds))
    idle_steal = (machine_cpu_seconds()[1] - steal0) / (time.time() - t0)
    loaded, slow, loaded_steal = beside_broker(args.seconds)
    print(f"## Machine hiccups ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs)\n")
    print(f"A fixed pure-Python work item timed in thread CPU time, {args.seconds:.0f} s each; "
          "loaded = beside an Odradek broker serving 10k records/s of 1 KiB to the Go latency client. "
          "Steal: CPU time the hypervisor took from this VM, in CPUs.\n")
    print("| probe | items | median | p99.99 | max | items > 1 ms | items > 4 ms | steal (CPUs) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, st, steal in (("idle machine", idle, idle_steal), ("beside the broker", loaded, loaded_steal)):
        print(f"| {name} | {st['items']:,} | {st['median_us']:.1f} us | {st['p9999_ms']:.2f} ms | {st['max_ms']:.2f} ms "
              f"| {st['over_1ms']} | {st['over_4ms']} | {steal:.2f} |")
    print(f"\nBroker loop steps over 5 ms of CPU in the same window: {len(slow)}")
    for s in sorted(slow, key=lambda e: -e["cpu_ms"])[:10]:
        print(f"* {s.get('label') or s['task']}: {s['ms']:.1f} ms wall, {s['cpu_ms']:.1f} ms CPU, "
              f"{s.get('waits', '?')} waits")


if __name__ == "__main__":
    main()
