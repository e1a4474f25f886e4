"""Log cleaner benchmark: disk use before/after compaction and cleaner throughput.

Run: `python benchmarks/bench_cleaner.py [--dir DIR] [--records 200000] [--cases 0,6]`. Prints a
Markdown report. Case 6 is issue #28's: 1,000,000 records of 100 B over 100,000 keys, 8 MiB
segments (not scaled by --records); case 7 has values of 50-150 B, so its batches are not of
fixed-size records (the cleaner's strided path does not apply). To measure another version of the code, put its tree first on
PYTHONPATH (a directory holding it as `odradek/`).

Each case writes a compacted partition (1 MiB segments, producer-style batches) through
`PartitionLog.append_as_leader`, rolls the active segment so the whole log is dirty, then runs one
cleaning round (`LogCleaner.clean_filthiest`) from this thread, in a worker process as the broker
does (`--in-thread`: in this thread), unthrottled unless the case says so. Round CPU s counts this
thread's and the worker's CPU time.
Throughput = bytes of the dirty section / wall time of the round (offset map + rewrite + swap), the
figure Kafka's cleaner logs as "read X MB in Y seconds"; the two phases are also shown apart.
Disk use: the `.log` bytes, and the allocated size of every file of the partition dir (`du`;
after the cleaning, once the `.deleted` files are gone).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.logstore import LogConfig, LogManager
from odradek.logstore.cleaner import CleanerConfig, LogCleaner
from odradek.wire.records import CompressionType, SimpleRecord, build_batch

T0 = 1_700_000_000_000


@dataclass
class Case:
    name: str
    records: int
    keys: int
    value_bytes: int
    per_batch: int = 10
    compression: CompressionType = CompressionType.NONE
    tombstone_share: float = 0.0
    rate: float = float("inf")
    segment_bytes: int = 1 << 20
    #: values of value_bytes +- this many bytes (0: every value the same size)
    value_jitter: int = 0


def disk_use(path: Path) -> int:
    """Allocated bytes of the partition dir's files (what `du` counts: the active segment's
    10 MiB index files are sparse until written)."""
    return sum(p.stat().st_blocks * 512 for p in path.iterdir() if p.is_file())


def log_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob("*.log"))


def case_batches(case: Case, t0: int) -> Iterator[bytes]:
    """The case's producer-style batches, record timestamps from `t0` on (seeded: the same keys,
    tombstones and value sizes every time)."""
    rng = random.Random(1)
    value = os.urandom(case.value_bytes + case.value_jitter)
    for start in range(0, case.records, case.per_batch):
        recs = []
        for i in range(start, min(start + case.per_batch, case.records)):
            k = rng.randrange(case.keys)
            tomb = case.tombstone_share and rng.random() < case.tombstone_share
            v = value[:case.value_bytes + rng.randint(-case.value_jitter, case.value_jitter)] if case.value_jitter else value
            recs.append(SimpleRecord(None if tomb else v, b"key-%08d" % k, (), t0 + i))
        yield build_batch(recs, compression=case.compression)


def _round_beside_loop(cleaner: LogCleaner, now_ms: int) -> tuple[float, list[float]]:
    """The round in a Trio worker thread, as the broker runs it (GIL switch interval 1 ms, as
    `odradek serve` sets), while a task on the loop sleeps 1 ms at a time: returns the round's
    thread CPU time and how late each of those wake-ups was (the loop held up by the round)."""
    import sys  # noqa: PLC0415

    import trio  # noqa: PLC0415

    late: list[float] = []

    def clean() -> float:
        c0 = time.thread_time()
        assert cleaner.clean_filthiest(now_ms)
        return time.thread_time() - c0

    async def main() -> float:
        done = trio.Event()

        async def probe() -> None:
            while not done.is_set():
                t = time.perf_counter()
                await trio.sleep(0.001)
                late.append(time.perf_counter() - t - 0.001)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(probe)
            cpu = await trio.to_thread.run_sync(clean)
            done.set()
        return cpu

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        return trio.run(main), late
    finally:
        sys.setswitchinterval(interval)


def _process_cpu_s(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(case: Case, base: Path, loop_probe: bool = False, worker: bool = True) -> dict[str, object]:
    work = base / case.name.replace(" ", "_")
    work.mkdir(parents=True)
    cfg = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": str(case.segment_bytes),
                                "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"})
    mgr = LogManager([work], LogConfig(), topic_config=lambda _t: cfg, validate_records=False)
    mgr.startup()
    lg = mgr.create_log("bench", 0, bytes(range(16)), cfg)
    lg.become_leader(0)
    for batch in case_batches(case, T0):
        lg.append_as_leader(bytearray(batch), 0, T0)
    lg.roll()
    # the case's data goes to disk first: its writeback would otherwise queue the cleaner's fsyncs
    # behind it (the Kafka side syncs before its cleaning too, bench_cleaner_kafka)
    os.sync()
    before = disk_use(lg.dir)
    before_log = log_bytes(lg.dir)
    dirty = lg.size_in_bytes()
    cleaner = LogCleaner(mgr, CleanerConfig(max_io_bytes_per_second=case.rate))
    worker_pid = None
    if worker:
        # as the broker cleans: in a worker process (started before the timing starts)
        cleaner.use_worker_process()
        assert cleaner.worker is not None
        cleaner.worker.start()
        worker_pid = cleaner.worker.pid
        assert worker_pid is not None
        w0 = _process_cpu_s(worker_pid)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    late: list[float] = []
    if loop_probe:
        cpu, late = _round_beside_loop(cleaner, T0 + 10**6)
    else:
        c0 = time.thread_time()
        assert cleaner.clean_filthiest(T0 + 10**6)
        cpu = time.thread_time() - c0
    elapsed = time.perf_counter() - t0
    if worker_pid is not None:
        cpu += _process_cpu_s(worker_pid) - w0
        cleaner.close()
    stats = cleaner.last_stats
    assert stats is not None
    after = disk_use(lg.dir)
    after_log = log_bytes(lg.dir)
    mgr.shutdown()
    shutil.rmtree(work)
    map_s = stats.map_done_s - stats.start_s
    return {
        "case": case.name, "records": case.records, "keys": case.keys, "before": before, "after": after,
        "before_log": before_log, "after_log": after_log,
        "mb_s": dirty / 1e6 / elapsed, "elapsed": elapsed, "map_s": map_s, "copy_s": elapsed - map_s,
        "kept": stats.messages_written, "slept": cleaner.cleaner.throttler.slept_s, "cpu": cpu, "load": load,
        "late": sorted(late),
        "io_mb_s": (stats.bytes_read + stats.map_bytes_read + stats.bytes_written) / 1e6 / elapsed,
    }


def all_cases(n: int) -> list[Case]:
    """The benchmark's cases for `n` records (case 6, issue #28's, does not scale)."""
    return [
        Case("100 B values, 10 updates/key", n, n // 10, 100),
        Case("100 B values, all keys unique (nothing to drop)", n, n * 10, 100),
        Case("1 KiB values, 10 updates/key", n // 4, n // 40, 1024),
        Case("100 B values, 10 updates/key, 10 % tombstones", n, n // 10, 100, tombstone_share=0.1),
        Case("100 B values, 10 updates/key, lz4 batches of 50", n, n // 10, 100, per_batch=50,
             compression=CompressionType.LZ4),
        # big enough that the round outlasts the throttler's 300 ms check interval
        Case("100 B values, 10 updates/key, throttled to 20 MB/s", n * 2, n // 5, 100, rate=20e6),
        Case("issue #28: 100 B values, 10 updates/key, 8 MiB segments", 1_000_000, 100_000, 100,
             segment_bytes=8 << 20),
        Case("50-150 B values, 10 updates/key", n, n // 10, 100, value_jitter=50),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--cases", default=None, help="comma-separated case numbers (default: all but 6)")
    ap.add_argument("--loop-probe", action="store_true",
                    help="run each round in a Trio worker thread and report how late a 1 ms sleep on the loop woke")
    ap.add_argument("--in-thread", action="store_true",
                    help="clean in this process's thread (odradek.log.cleaner.worker.process=false), not a worker process")
    args = ap.parse_args()
    cases = all_cases(args.records)
    chosen = [int(i) for i in args.cases.split(",")] if args.cases else [0, 1, 2, 3, 4, 5, 7]
    cases = [cases[i] for i in chosen]
    base = Path(tempfile.mkdtemp(prefix="bench-cleaner-", dir=args.dir))
    try:
        rows = [run(c, base, args.loop_probe, not args.in_thread) for c in cases]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("# Log cleaner benchmark\n")
    print(f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs "
          f"({platform.processor() or 'unknown CPU'})\n")
    print(f"Directory: `{base}` (page cache, the cleaner's fsyncs included)\n")
    print("| case | records | keys | .log before | .log after | du before | du after | records kept | round s "
          "| map s | rewrite s | round CPU s | dirty MB/s | I/O MB/s (read+map+write) | throttle sleep s | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['records']} | {r['keys']} | {r['before_log'] / 1e6:.1f} MB "
              f"| {r['after_log'] / 1e6:.1f} MB | {r['before'] / 1e6:.1f} MB | {r['after'] / 1e6:.1f} MB "
              f"| {r['kept']} | {r['elapsed']:.2f} | {r['map_s']:.2f} | {r['copy_s']:.2f} | {r['cpu']:.2f} "
              f"| {r['mb_s']:.1f} | {r['io_mb_s']:.1f} | {r['slept']:.1f} | {r['load']:.1f} |")


    if args.loop_probe:
        print("\nEvent loop beside the round (a task sleeping 1 ms at a time; lateness of its wake-ups):\n")
        print("| case | wake-ups | p50 ms | p99 ms | max ms | over 5 ms |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            late = r["late"]
            assert isinstance(late, list)
            if late:
                print(f"| {r['case']} | {len(late)} | {late[len(late) // 2] * 1e3:.2f} "
                      f"| {late[int(len(late) * 0.99)] * 1e3:.2f} | {late[-1] * 1e3:.2f} "
                      f"| {sum(x > 0.005 for x in late)} |")


if __name__ == "__main__":
    main()
