"""Log store benchmark: append throughput next to a plain os.write loop, and lookup latency.

Run: `python benchmarks/bench_logstore.py [--dir DIR] [--mb 256]`. Prints a Markdown report.
Append: the same batch bytes are appended again and again (baseOffset reset to 0 before each append,
as a fresh produce request would carry it), once through `PartitionLog.append_as_leader` (validation,
in-place patch, one pwrite, index upkeep, rolls at 1 GiB) and once with a bare `os.write` loop into a
file of the same directory. Lookups: a 1,000,000-entry `.index` / `.timeindex` (and the same log through
`PartitionLog.read` / `fetch_offset_by_timestamp`, which add the header scan).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from odradek.logstore import LogConfig, PartitionLog
from odradek.logstore.offset_index import OffsetIndex
from odradek.logstore.time_index import TimeIndex
from odradek.wire.records import RecordBatch, SimpleRecord, build_batch


def make_batch(batch_bytes: int, record_bytes: int) -> bytearray:
    n = max(1, batch_bytes // (record_bytes + 10))
    recs = [SimpleRecord(os.urandom(record_bytes), None, (), 1_700_000_000_000 + i) for i in range(n)]
    return bytearray(build_batch(recs))


def bench_append(dir_: Path, batch: bytearray, total_bytes: int, props: dict,
                 validate_records: bool = True) -> tuple[float, float, int]:
    """(MB/s via append_as_leader, MB/s via os.write, appends)."""
    n = max(1, total_bytes // len(batch))
    log_dir = dir_ / "bench-0"
    lg = PartitionLog.open(log_dir, LogConfig.from_props(props), validate_records=validate_records)
    lg.become_leader(0)
    zero = bytes(8)
    t0 = time.perf_counter()
    for _ in range(n):
        batch[0:8] = zero  # a fresh request carries baseOffset 0
        lg.append_as_leader(batch, 0, 1_700_000_000_000)
    t_log = time.perf_counter() - t0
    lg.close()
    shutil.rmtree(log_dir)
    path = dir_ / "plain.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    data = bytes(batch)
    t0 = time.perf_counter()
    for _ in range(n):
        os.write(fd, data)
    t_plain = time.perf_counter() - t0
    os.close(fd)
    path.unlink()
    mb = n * len(batch) / 1e6
    return mb / t_log, mb / t_plain, n


def percentiles(samples: list[float]) -> str:
    s = sorted(samples)
    return (f"p50 {s[len(s) // 2] * 1e6:.1f} µs, p99 {s[int(len(s) * 0.99)] * 1e6:.1f} µs, "
            f"mean {statistics.fmean(s) * 1e6:.1f} µs")


def bench_index_lookups(dir_: Path, entries: int, lookups: int) -> tuple[str, str]:
    idx = OffsetIndex(dir_ / "00000000000000000000.index", 0, max_index_size=(entries + 1) * 8)
    tix = TimeIndex(dir_ / "00000000000000000000.timeindex", 0, max_index_size=(entries + 2) * 12)
    for i in range(entries):
        idx.append(i * 10, i * 800)  # positions stay below 2 GiB (int32) even for 2.6M entries
        tix.maybe_append(1_700_000_000_000 + i * 7, i * 10)
    rnd = random.Random(1)
    off_t, ts_t = [], []
    for _ in range(lookups):
        o = rnd.randrange(entries * 10)
        t0 = time.perf_counter()
        idx.lookup(o)
        off_t.append(time.perf_counter() - t0)
        ts = 1_700_000_000_000 + rnd.randrange(entries * 7)
        t0 = time.perf_counter()
        tix.lookup(ts)
        ts_t.append(time.perf_counter() - t0)
    idx.close()
    tix.close()
    return percentiles(off_t), percentiles(ts_t)


def bench_log_lookups(dir_: Path, batches: int, lookups: int) -> tuple[str, str, int]:
    lg = PartitionLog.open(dir_ / "lookup-0", LogConfig())
    lg.become_leader(0)
    b = make_batch(1024, 100)
    count = RecordBatch(b).record_count
    for i in range(batches):
        b[0:8] = bytes(8)
        rb = RecordBatch(b)
        # distinct, increasing timestamps per batch (CRC fixed up by the log: header max ts rewritten)
        b[27:35] = (1_700_000_000_000 + i * count).to_bytes(8, "big")
        b[17:21] = rb.compute_crc().to_bytes(4, "big")
        lg.append_as_leader(b, 0, 0)
    rnd = random.Random(2)
    rt, tt = [], []
    for _ in range(lookups):
        o = rnd.randrange(lg.log_end_offset)
        t0 = time.perf_counter()
        lg.read(o, 1 << 20)
        rt.append(time.perf_counter() - t0)
    for _ in range(max(1, lookups // 10)):
        ts = 1_700_000_000_000 + rnd.randrange(lg.log_end_offset)
        t0 = time.perf_counter()
        lg.fetch_offset_by_timestamp(ts)
        tt.append(time.perf_counter() - t0)
    entries = lg.active_segment.offset_index.entries
    lg.close()
    return percentiles(rt), percentiles(tt), entries


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs ({cpu}), "
            f"{mem:.0f} GiB RAM")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None, help="directory on the file system to measure (default: a temp dir)")
    ap.add_argument("--mb", type=int, default=256, help="MB appended per case")
    # 10 GiB of log with index.interval.bytes=4096 is indexed by 2,621,440 entries.
    ap.add_argument("--index-entries", type=int, default=2_621_440)
    args = ap.parse_args()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-logstore-"))
    base.mkdir(parents=True, exist_ok=True)
    fs = os.statvfs(base)
    print(f"# logstore benchmark\n\nMachine: {machine()}\n")
    print(f"Directory: `{base}` (fs block size {fs.f_bsize}); page cache only, no fsync in either loop.\n")
    print("| case | batch bytes | appends | append_as_leader MB/s | os.write MB/s | ratio |")
    print("|---|---|---|---|---|---|")
    big = {"max.message.bytes": str(2 << 20)}
    lat = {"message.timestamp.type": "LogAppendTime"}
    cases = [
        ("1 KiB batch, 10 × 100 B records, CreateTime", make_batch(1024, 90), {}, True),
        ("1 KiB batch, CreateTime, validate_records=False", make_batch(1024, 90), {}, False),
        ("1 KiB batch, LogAppendTime (no record scan)", make_batch(1024, 90), lat, True),
        ("1 MiB batch, 1024 × 1 KiB records, CreateTime", make_batch(1 << 20, 1010), big, True),
        ("1 MiB batch, CreateTime, validate_records=False", make_batch(1 << 20, 1010), big, False),
        ("1 MiB batch, LogAppendTime (no record scan)", make_batch(1 << 20, 1010), {**big, **lat}, True),
    ]
    for name, batch, props, full in cases:
        log_mbs, plain_mbs, n = bench_append(base, batch, args.mb * 1_000_000, props, full)
        print(f"| {name} | {len(batch)} | {n} | {log_mbs:.0f} | {plain_mbs:.0f} | {log_mbs / plain_mbs:.2f} |")
    off, ts = bench_index_lookups(base, args.index_entries, 20_000)
    print(f"\nIndex lookups ({args.index_entries:,} entries, random targets, 20,000 lookups):\n")
    print(f"* `.index` by offset: {off}")
    print(f"* `.timeindex` by timestamp: {ts}")
    rd, bt, entries = bench_log_lookups(base, 200_000, 20_000)
    print(f"\nLog-level lookups (200,000 × 1 KiB batches in one segment, {entries:,} index entries):\n")
    print(f"* `PartitionLog.read(offset)` (index lookup + header scan): {rd}")
    print(f"* `fetch_offset_by_timestamp(ts)` (time index + offset index + scan + record decode): {bt}")
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
