"""Smoke test of benchmarks/runner.py: its quick mode on a tiny workload, Odradek only.

Nothing is timed or compared here (the machine may be busy); the test only keeps the runner,
its helper processes, the loop monitor and the report generator from rotting: every workload
must complete, its record count must check out (the runner verifies it with ListOffsets) and
the report must be written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


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
