"""Request latency on a running Odradek while its log cleaner compacts a large partition (issue #28).

Run: `python benchmarks/bench_cleaner_latency.py [--records 1000000] [--modes worker,thread]
[--repeat 1] [--json out.jsonl]`.

For each mode (`worker`: `odradek.log.cleaner.worker.process=true`, the default; `thread`: the
cleaner in a thread of the broker process), it starts `python -m odradek serve` with
`ODRADEK_LOOP_MONITOR`, creates a compacted topic with 8 MiB segments and
`min.compaction.lag.ms=3600000` (nothing is cleaned while it fills), produces issue #28's case
into it (1,000,000 records of 100 B over 100,000 keys, `bench_cleaner.case_batches`), and starts
a probe (after a first, tiny cleaning of another topic: a broker's cleaner worker starts with its
first cleaning and then stays): one connection sending ApiVersions and a Fetch (offset 0 of a small topic, max_wait 0)
in turn, 2 ms apart, timing every answer. After a quiet baseline it lifts the lag
(IncrementalAlterConfigs); the cleaning window runs from then until the broker's
`cleaner-offset-checkpoint` holds the partition's new first dirty offset.

Reported per mode and window (baseline, cleaning): the probe's answers (count, p50, p99, max, how
many took more than 5 ms), and the broker's loop monitor over the window: `max_held_ms`, the
longest a task step kept the event loop from serving anything for a reason of the broker's own
(the OS running other processes is not counted; see `loop_monitor.py`), and `lag_max_ms`, its
10 ms watchdog's worst lateness. The probe's wall-clock figures include the machine's scheduling
(2 cores shared by the broker, its cleaner and the probe); the loop monitor's held time does not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "compat-tests"))

import bench_cleaner  # noqa: E402
from bench_cleaner_kafka import _STATS, _alter, _produce_all  # noqa: E402

from odradek import loop_monitor  # noqa: E402
from odradek.testing import wait_listening  # noqa: E402
from odradek.tools.client import BrokerConnection  # noqa: E402
from odradek.wire.protocol import request_class  # noqa: E402
from odradek.wire.records import SimpleRecord, build_batch  # noqa: E402

TOPIC = "bench-compact"
PROBE_TOPIC = "probe"
WARM_TOPIC = "warm-up"
ApiVersions = request_class(18)
Fetch = request_class(1)


def start_broker(workdir: Path, loop_file: Path, worker: bool) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "odradek", "serve",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0",
           "--override", f"log.dirs={workdir / 'data'}",
           "--override", "log.cleaner.backoff.ms=100",
           "--override", "auto.create.topics.enable=false",
           "--override", f"odradek.log.cleaner.worker.process={'true' if worker else 'false'}"]
    env = dict(os.environ, ODRADEK_LOOP_MONITOR=str(loop_file))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    host, port = wait_listening(proc)
    return proc, f"{host}:{port}"


def create_topics(bootstrap: str, segment_bytes: int, warm_up_topic: bool = True) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "segment.ms": "86400000",
               "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "3600000"}
    warm = {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}
    topics = [NewTopic(TOPIC, 1, 1, config=configs), NewTopic(PROBE_TOPIC, 1, 1)]
    if warm_up_topic:
        topics.append(NewTopic(WARM_TOPIC, 1, 1, config=warm))
    for fut in admin.create_topics(topics).values():
        fut.result(30)


def warm_up_cleaner(bootstrap: str, data_dir: Path) -> None:
    """A first, tiny cleaning, so the worker process is running before the measured one (as on
    any broker that has cleaned before: it starts with the first cleaning and then stays)."""
    now = int(time.time() * 1000)
    _produce_all(bootstrap, [build_batch([SimpleRecord(b"v" * 300, b"k%d" % (i % 3), (), now)]) for i in range(12)],
                 WARM_TOPIC)
    deadline = time.monotonic() + 60
    while checkpointed(data_dir, WARM_TOPIC) < 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the warm-up topic was not cleaned in 60 s")
        time.sleep(0.05)


def checkpointed(data_dir: Path, topic: str = TOPIC) -> int:
    """The partition's first dirty offset in `cleaner-offset-checkpoint` (-1 if absent)."""
    path = data_dir / "cleaner-offset-checkpoint"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return -1
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3 and parts[0] == topic and parts[1] == "0":
            return int(parts[2])
    return -1


class Probe:
    """ApiVersions and Fetch in turn on one connection, 2 ms apart: (sent at, kind, seconds)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.conn = BrokerConnection(host, int(port), client_id="bench-cleaner-probe")
        self.samples: list[tuple[float, str, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        api = ApiVersions(client_software_name="bench", client_software_version="1")
        fetch = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 16, isolation_level=0,
                      session_id=0, session_epoch=-1, topics=[Fetch.FetchTopic(topic=PROBE_TOPIC, partitions=[
                          Fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 16)])])
        while not self.stop.is_set():
            for kind, key, req, version in (("ApiVersions", 18, api, 3), ("Fetch", 1, fetch, 12)):
                t0 = time.time()
                p0 = time.perf_counter()
                self.conn.send(key, req, version)
                self.samples.append((t0, kind, time.perf_counter() - p0))
                time.sleep(0.002)

    def window(self, start: float, end: float) -> dict[str, object]:
        out: dict[str, object] = {}
        for kind in ("ApiVersions", "Fetch"):
            xs = sorted(s for t, k, s in self.samples if k == kind and start <= t <= end)
            if xs:
                out[kind] = {"n": len(xs), "p50_ms": xs[len(xs) // 2] * 1e3, "p99_ms": xs[int(len(xs) * 0.99)] * 1e3,
                             "max_ms": xs[-1] * 1e3, "over_5ms": sum(x > 0.005 for x in xs),
                             # every answer, so rounds can be pooled (bench_cleaner_plot.py)
                             "samples_ms": [round(x * 1e3, 3) for x in xs]}
        return out


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def run_mode(worker: bool, records: int, base: Path, baseline_s: float, worker_nice: int = 0) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="bench-cleaner-latency-", dir=base))
    loop_file = work / "loop.jsonl"
    proc, bootstrap = start_broker(work, loop_file, worker)
    try:
        case = bench_cleaner.Case("issue #28", records, records // 10, 100, segment_bytes=8 << 20)
        create_topics(bootstrap, case.segment_bytes)
        _produce_all(bootstrap, list(bench_cleaner.case_batches(case, int(time.time() * 1000))), TOPIC)
        _produce_all(bootstrap, [build_batch([SimpleRecord(b"x" * 100, b"k", (), int(time.time() * 1000))])],
                     PROBE_TOPIC)
        data_dir = work / "data"
        warm_up_cleaner(bootstrap, data_dir)
        if worker and worker_nice:
            # an experiment, not what the broker does: the worker (started by the warm-up
            # cleaning) yields the cores to the broker's event loop when both want one
            for child in _children(proc.pid):
                os.setpriority(os.PRIO_PROCESS, child, worker_nice)
        before = checkpointed(data_dir)
        time.sleep(1.0)  # let the produce tail settle
        probe = Probe(bootstrap)
        probe.thread.start()
        time.sleep(baseline_s)
        load = os.getloadavg()[0]
        loadavg = [Path("/proc/loadavg").read_text().strip()]
        t_lift = time.time()
        _alter(bootstrap, {"min.compaction.lag.ms": "0"}, TOPIC)
        deadline = time.monotonic() + 300
        while checkpointed(data_dir) <= max(before, 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        t_done = time.time()
        loadavg.append(Path("/proc/loadavg").read_text().strip())
        if checkpointed(data_dir) <= max(before, 0):
            raise RuntimeError("the partition was not cleaned in 300 s")
        time.sleep(1.2)  # the loop monitor writes a line a second
        probe.stop.set()
        probe.thread.join(10)
        probe.conn.close()
        mon_base = loop_monitor.summarize(loop_monitor.read_window(loop_file, t_lift - baseline_s + 0.5, t_lift - 0.1))
        mon_clean = loop_monitor.summarize(loop_monitor.read_window(loop_file, t_lift, t_done))
        keep = ("max_held_ms", "max_held_task", "lag_max_ms", "max_cpu_ms", "max_ms")
        mode = ("worker process" + (f" (nice {worker_nice})" if worker_nice else "")) if worker else "thread"
        return {"mode": mode, "records": records, "load": load,
                "loadavg": loadavg, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_lift)),
                "cleaning_s": t_done - t_lift,
                "baseline": {"probe": probe.window(t_lift - baseline_s, t_lift),
                             "loop": {k: mon_base[k] for k in keep}},
                "cleaning": {"probe": probe.window(t_lift, t_done),
                             "loop": {k: mon_clean[k] for k in keep}}}
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def run_kafka(version: str, records: int, base: Path, baseline_s: float) -> dict[str, object]:
    """The same probe on Apache Kafka (a single-node KRaft broker, the jars of kafka_oracle):
    the cleaning window ends when Kafka's cleaner logs its statistics for the partition. There is
    no loop monitor on Kafka's side."""
    from kafka_oracle import KafkaBroker  # noqa: PLC0415

    work = Path(tempfile.mkdtemp(prefix="bench-cleaner-latency-kafka-", dir=base))
    broker = KafkaBroker(work, version=version, overrides={
        "log.cleaner.backoff.ms": "100", "auto.create.topics.enable": "false"})
    broker.start()
    try:
        bootstrap = broker.bootstrap
        case = bench_cleaner.Case("issue #28", records, records // 10, 100, segment_bytes=8 << 20)
        create_topics(bootstrap, case.segment_bytes, warm_up_topic=False)  # Kafka's cleaner thread always runs
        _produce_all(bootstrap, list(bench_cleaner.case_batches(case, int(time.time() * 1000))), TOPIC)
        _produce_all(bootstrap, [build_batch([SimpleRecord(b"x" * 100, b"k", (), int(time.time() * 1000))])],
                     PROBE_TOPIC)
        os.sync()
        time.sleep(1.0)
        probe = Probe(bootstrap)
        probe.thread.start()
        time.sleep(baseline_s)
        load = os.getloadavg()[0]
        loadavg = [Path("/proc/loadavg").read_text().strip()]
        t_lift = time.time()
        _alter(bootstrap, {"min.compaction.lag.ms": "0"}, TOPIC)
        deadline = time.monotonic() + 300
        done = False
        while not done and time.monotonic() < deadline:
            text = broker.server_log.read_text(errors="replace")
            done = any(m.group("log").rsplit("-", 1)[0] == TOPIC for m in _STATS.finditer(text))
            if not done:
                time.sleep(0.01)
        t_done = time.time()
        loadavg.append(Path("/proc/loadavg").read_text().strip())
        if not done:
            raise RuntimeError("Kafka did not clean the partition in 300 s")
        time.sleep(0.5)
        probe.stop.set()
        probe.thread.join(10)
        probe.conn.close()
        none = {"max_held_ms": float("nan"), "lag_max_ms": float("nan")}
        return {"mode": f"Kafka {version}", "records": records, "load": load, "loadavg": loadavg,
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_lift)), "cleaning_s": t_done - t_lift,
                "baseline": {"probe": probe.window(t_lift - baseline_s, t_lift), "loop": none},
                "cleaning": {"probe": probe.window(t_lift, t_done), "loop": none}}
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--modes", default="worker,thread", help="worker, thread, kafka (Apache Kafka, --version)")
    ap.add_argument("--version", default="4.4.0", help="Kafka version of the kafka mode")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--baseline-s", type=float, default=3.0)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="append one JSON line per run to this file")
    ap.add_argument("--worker-nice", type=int, default=0,
                    help="experiment: renice the broker's cleaner worker by this much before the measured cleaning")
    ap.add_argument("--first-round", type=int, default=0, help="number of the first round")
    args = ap.parse_args()
    rows = []
    for rnd in range(args.first_round, args.first_round + args.repeat):
        for mode in args.modes.split(","):
            base = args.dir or Path(tempfile.gettempdir())
            if mode == "kafka":
                row = run_kafka(args.version, args.records, base, args.baseline_s)
            else:
                row = run_mode(mode == "worker", args.records, base, args.baseline_s, args.worker_nice)
            row["round"] = rnd
            rows.append(row)
            if args.json is not None:
                with args.json.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    print(f"# Request latency while the cleaner compacts {args.records:,} records (1/10 of them kept)\n")
    print("| cleaner | round | window | s | ApiVersions n / p50 / p99 / max ms / >5 ms | Fetch n / p50 / p99 / max ms "
          "/ >5 ms | loop max held ms | loop watchdog max lag ms | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        for window in ("baseline", "cleaning"):
            w = row[window]
            assert isinstance(w, dict)
            cells = []
            for kind in ("ApiVersions", "Fetch"):
                p = w["probe"].get(kind)
                cells.append(f"{p['n']} / {p['p50_ms']:.2f} / {p['p99_ms']:.2f} / {p['max_ms']:.2f} / {p['over_5ms']}"
                             if p else "-")
            secs = row["cleaning_s"] if window == "cleaning" else args.baseline_s
            print(f"| {row['mode']} | {row['round']} | {window} | {secs:.2f} | {cells[0]} | {cells[1]} "
                  f"| {w['loop']['max_held_ms']:.2f} | {w['loop']['lag_max_ms']:.2f} | {row['load']:.1f} |")


if __name__ == "__main__":
    main()
