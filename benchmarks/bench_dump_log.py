"""Time and peak memory of ``odradek dump-log`` on a 1 GiB segment.

Run: ``python benchmarks/bench_dump_log.py [--size-mib 1024] [--records-per-batch 100]
[--value-bytes 1000] [--codec none] [--modes shallow,deep,print] [--output docs/benchmarks-dump-log.md]``.

The segment is built with ``odradek.wire.records.build_batch``: one batch is built and written
again and again with its baseOffset patched (baseOffset is outside the CRC, so every copy is a
valid batch), until the file reaches the requested size. Each mode runs
``python -m odradek.tools.dump_log`` in a child process with stdout to /dev/null; the child's
peak RSS comes from ``os.wait4``. A child that only imports the tool gives the baseline RSS, so
the report shows what dumping adds (it should not grow with the file: the tool streams).
"""

from __future__ import annotations

import argparse
import os
import platform
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odradek.wire.records import CompressionType, SimpleRecord, build_batch

MODES = {
    "shallow": [],
    "deep": ["--deep-iteration"],
    "print": ["--print-data-log"],
}


def make_segment(path: Path, size: int, records_per_batch: int, value_bytes: int, codec: str) -> tuple[int, int]:
    """Write a segment of about ``size`` bytes; returns (batches, records)."""
    value = (b"0123456789abcdef" * (value_bytes // 16 + 1))[:value_bytes]
    recs = [
        SimpleRecord(value=value, key=f"key-{i}".encode(), headers=[("h", b"v")], timestamp=1_700_000_000_000 + i)
        for i in range(records_per_batch)
    ]
    batch = bytearray(build_batch(recs, compression=CompressionType[codec.upper()]))
    n = 0
    with open(path, "wb", buffering=8 << 20) as f:
        written = 0
        while written + len(batch) <= size:
            struct.pack_into(">q", batch, 0, n * records_per_batch)
            f.write(batch)
            written += len(batch)
            n += 1
    return n, n * records_per_batch


def run_child(args: list[str]) -> tuple[float, float, int]:
    """Run a child Python with ``args``; returns (wall seconds, CPU seconds, peak RSS in KiB)."""
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen([sys.executable, *args], stdout=devnull, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{args} failed: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def machine() -> str:
    """One line about the machine (CPU model, cores, RAM, Python, OS)."""
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_kb = int(next(ln for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")).split()[1])
        mem = f"{mem_kb / 1024 / 1024:.0f} GiB RAM"
    except (OSError, StopIteration):
        mem = "unknown RAM"
    return (f"{cpu}, {os.cpu_count()} cores, {mem}; Python {platform.python_version()}; "
            f"{platform.system()} {platform.release()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--records-per-batch", type=int, default=100)
    ap.add_argument("--value-bytes", type=int, default=1000)
    ap.add_argument("--codec", default="none", choices=[c.name.lower() for c in CompressionType])
    ap.add_argument("--modes", default="shallow,deep,print")
    ap.add_argument("--dir", default=None, help="where to write the segment (default: a temp dir)")
    ap.add_argument("--output", default=None, help="also write the Markdown report here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        seg = Path(tmp) / "00000000000000000000.log"
        t0 = time.perf_counter()
        batches, records = make_segment(seg, args.size_mib << 20, args.records_per_batch, args.value_bytes, args.codec)
        gen = time.perf_counter() - t0
        size = seg.stat().st_size
        # read the file once so every mode starts with it in the page cache
        with open(seg, "rb") as f:
            while f.read(16 << 20):
                pass
        _, base_cpu, base_rss = run_child(["-c", "import odradek.tools.dump_log"])
        load_before = os.getloadavg()[0]
        rows = []
        for mode in args.modes.split(","):
            secs, cpu, rss = run_child(["-m", "odradek.tools.dump_log", "--files", str(seg), *MODES[mode]])
            rows.append((mode, secs, cpu, rss))
            print(f"{mode}: {secs:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss / 1024:.1f} MiB", file=sys.stderr)
        load_after = os.getloadavg()[0]

    lines = [
        "| mode | flags | wall time | CPU time | MiB/s (CPU) | records/s (CPU) | peak RSS | RSS above baseline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, secs, cpu, rss in rows:
        flags = " ".join(MODES[mode]) or "(none)"
        lines.append(
            f"| {mode} | `{flags}` | {secs:.1f} s | {cpu:.1f} s | {size / cpu / 2**20:.0f} | "
            f"{records / cpu:,.0f} | {rss / 1024:.1f} MiB | {(rss - base_rss) / 1024:.1f} MiB |"
        )
    report = "\n".join([
        f"Segment: {size / 2**20:.0f} MiB, {batches:,} batches x {args.records_per_batch} records "
        f"({records:,} records, {args.value_bytes}-byte values, key, one header, codec {args.codec}); "
        f"generated in {gen:.1f} s. stdout to /dev/null, file in the page cache.",
        f"Baseline (interpreter + imports): {base_rss / 1024:.1f} MiB peak RSS, {base_cpu:.2f} s CPU.",
        f"Load average (1 min) before/after the runs: {load_before:.1f} / {load_after:.1f} "
        "(wall time includes waiting for a shared CPU; CPU time does not).",
        f"Machine: {machine()}.",
        "",
        *lines,
        "",
    ])
    print(report)
    if args.output:
        Path(args.output).write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
