"""Helpers shared by the dump-log tests: run the tool in-process and capture its bytes."""

from __future__ import annotations

import difflib
import io
import sys
from pathlib import Path

from odradek.tools.dump_log import main

FIXTURES = Path("/work/shared/fixtures")
REAL = FIXTURES / "kafka-real"
CORPUS = FIXTURES / "kafka-corpus"


class _Stream:
    """A text-stream stand-in with a ``buffer`` (what the tool writes to) and no terminal."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        return self.buffer.write(s.encode())

    def flush(self) -> None:
        pass


def run_dump(args: list[str]) -> tuple[bytes, bytes, int]:
    """Run ``odradek dump-log`` in this process; returns (stdout, stderr, exit code)."""
    old_out, old_err = sys.stdout, sys.stderr
    out, err = _Stream(), _Stream()
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        rc = main(args)
    finally:
        sys.stdout, sys.stderr = old_out, old_err
    return out.buffer.getvalue(), err.buffer.getvalue(), rc


def assert_same_lines(actual: bytes, expected: bytes, what: str) -> None:
    """Byte equality, reported as a line diff (the first differing lines) when it fails."""
    if actual == expected:
        return
    a = actual.decode("utf-8", "backslashreplace").splitlines(keepends=True)
    e = expected.decode("utf-8", "backslashreplace").splitlines(keepends=True)
    diff = list(difflib.unified_diff(e, a, "kafka", "odradek", n=1))
    raise AssertionError(f"{what}: output differs from Kafka's\n" + "".join(diff[:40]))
