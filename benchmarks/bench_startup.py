"""Start-up time of an embedded broker (``odradek.testing.running_broker``), in-process vs subprocess,
and of an in-process three-broker cluster (``odradek.testing.running_cluster``).

Run: ``python benchmarks/bench_startup.py [--runs 5] [--output docs/benchmarks-startup.md]``.
Prints a Markdown report (and writes it with --output).

"Started" means the context manager has yielded: the listener is bound and a client can
connect. Each measurement is then checked by a real request (ApiVersions + Metadata through
``odradek.tools.client``), which is not counted. Measured cases:

* in-process, cold: a fresh interpreter imports ``odradek.testing`` and starts the first broker
  (what a test session's first fixture use costs, imports included);
* in-process, warm: a further broker in the same interpreter (what each later
  ``odradek_fresh_broker`` costs);
* subprocess: ``python -m odradek serve`` on port 0, until its log says it listens;
* stop: the clean shutdown when the context exits (in-process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

_COLD_SCRIPT = """
import json, time
t0, c0 = time.perf_counter(), time.process_time()
from odradek.testing import running_broker
t1, c1 = time.perf_counter(), time.process_time()
with running_broker() as broker:
    t2, c2 = time.perf_counter(), time.process_time()
    from odradek.tools.client import KafkaClient
    with KafkaClient(broker.bootstrap_servers) as client:
        client.metadata(None)
print(json.dumps({"import": t1 - t0, "start": t2 - t1, "import_cpu": c1 - c0, "start_cpu": c2 - c1}))
"""


_COLD_CLUSTER_SCRIPT = """
import json, time
t0, c0 = time.perf_counter(), time.process_time()
from odradek.testing import running_cluster
t1, c1 = time.perf_counter(), time.process_time()
with running_cluster(brokers=3) as cluster:
    t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"import": t1 - t0, "start": t2 - t1, "import_cpu": c1 - c0, "start_cpu": c2 - c1}))
"""


def _proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a running process (Linux /proc), so a subprocess's CPU can be read before it exits."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cold_in_process(script: str = _COLD_SCRIPT) -> dict[str, float]:
    """Import + first start in a fresh interpreter (seconds, wall and CPU)."""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed_cluster_starts(runs: int) -> tuple[list[float], list[float], list[float]]:
    """(start seconds, CPU seconds, stop seconds) of three-broker `running_cluster`s, one after another:
    started means every broker registered and unfenced."""
    from odradek.testing import running_cluster

    starts, cpu, stops = [], [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        cm = running_cluster(brokers=3)
        cm.__enter__()
        starts.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        t1 = time.perf_counter()
        cm.__exit__(None, None, None)
        stops.append(time.perf_counter() - t1)
    return starts, cpu, stops


def timed_starts(in_process: bool, runs: int) -> tuple[list[float], list[float], list[float]]:
    """(start seconds, start CPU seconds, stop seconds) of `runs` brokers started one after another."""
    from odradek.testing import running_broker
    from odradek.tools.client import KafkaClient

    starts, cpu, stops = [], [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        cm = running_broker(in_process=in_process)
        broker = cm.__enter__()
        starts.append(time.perf_counter() - t0)
        # In-process: this process's CPU (the broker thread included); subprocess: the child's.
        cpu.append(time.process_time() - c0 if in_process else _proc_cpu_seconds(broker.process.pid))
        with KafkaClient(broker.bootstrap_servers) as client:
            client.metadata(None)
        t1 = time.perf_counter()
        cm.__exit__(None, None, None)
        stops.append(time.perf_counter() - t1)
    return starts, cpu, stops


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} (min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    cold = [cold_in_process() for _ in range(args.runs)]
    # The warm measurement follows one untimed start that pays the imports.
    timed_starts(True, 1)
    warm, warm_cpu, warm_stop = timed_starts(True, args.runs)
    sub, sub_cpu, sub_stop = timed_starts(False, args.runs)
    cold_cluster = [cold_in_process(_COLD_CLUSTER_SCRIPT) for _ in range(args.runs)]
    cluster, cluster_cpu, cluster_stop = timed_cluster_starts(args.runs)
    load = os.getloadavg()[0]
    lines = [
        "# Embedded broker start-up",
        "",
        f"Generated by `python benchmarks/bench_startup.py --runs {args.runs}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"Machine: `nproc` = {os.cpu_count()}; Python {platform.python_version()} on {platform.system()}; "
        f"load average {load:.1f} when the run ended (the machine is shared, so times vary with load). "
        "Milliseconds, median (min, max) of the runs: wall clock, and the CPU time the starting",
        "process used (less sensitive to other load; for the subprocess, the child's CPU).",
        "",
        "| case | wall ms | CPU ms |",
        "|---|---|---|",
        f"| in-process, cold: `import odradek.testing` | {_ms([c['import'] for c in cold])} | "
        f"{_ms([c['import_cpu'] for c in cold])} |",
        f"| in-process, cold: first `running_broker()` start (imports the broker) | {_ms([c['start'] for c in cold])} | "
        f"{_ms([c['start_cpu'] for c in cold])} |",
        f"| in-process, warm: a later `running_broker()` start | {_ms(warm)} | {_ms(warm_cpu)} |",
        f"| in-process: clean stop | {_ms(warm_stop)} | |",
        f"| subprocess (`python -m odradek serve`): start until listening | {_ms(sub)} | {_ms(sub_cpu)} |",
        f"| subprocess: clean stop (SIGTERM) | {_ms(sub_stop)} | |",
        f"| `running_cluster(brokers=3)`, cold: first start (imports the broker) | "
        f"{_ms([c['start'] for c in cold_cluster])} | {_ms([c['start_cpu'] for c in cold_cluster])} |",
        f"| `running_cluster(brokers=3)`, warm: a later start, until all three are unfenced | {_ms(cluster)} | "
        f"{_ms(cluster_cpu)} |",
        f"| `running_cluster(brokers=3)`: clean stop (controlled shutdowns, then the controller) | "
        f"{_ms(cluster_stop)} | |",
        "",
        "`running_broker()` and the pytest fixtures use the in-process broker because it is the",
        "faster one; the subprocess pays a new interpreter and all imports on every start.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.output:
        args.output.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
