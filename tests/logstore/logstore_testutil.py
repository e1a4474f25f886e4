"""Shared helpers for the log store tests: fixture locations and corpus loading."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

FIXTURES = Path("/work/shared/fixtures")
CORPUS = FIXTURES / "kafka-corpus"
REAL = FIXTURES / "kafka-real"
REAL_41 = REAL / "ronem123_rupia-transaction-service@5d88e97" / "kafka-logs"
REAL_38 = REAL / "JitenPalaparthi_youtube-kafka-golang-rust@63330ef" / "kafka-logs"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"fixture {path} not available")
    return path


def copy_tree(src: Path, dst: Path) -> Path:
    """Copy a read-only fixture tree and make the copy writable."""
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def manifest(workload: str) -> list[dict]:
    path = need(CORPUS / workload / "batches" / "manifest.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def workload_json(workload: str) -> dict:
    return json.loads(need(CORPUS / workload / "workload.json").read_text())


def batch_bytes(workload: str, entry: dict) -> bytearray:
    return bytearray((CORPUS / workload / "batches" / entry["file"]).read_bytes())


def make_batch(n: int = 3, value_size: int = 100, ts: int = 1_700_000_000_000, key: bytes | None = b"k",
               **kw) -> bytearray:
    """A client-style v2 batch of `n` records (base offset 0, PLE -1), writable."""
    from odradek.wire.records import SimpleRecord, build_batch

    recs = [SimpleRecord(bytes([65 + i % 26]) * value_size, key, (), ts + i) for i in range(n)]
    return bytearray(build_batch(recs, **kw))
