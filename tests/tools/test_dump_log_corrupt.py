"""Damaged and unusual files: ``odradek dump-log`` prints what Kafka 3.9.1's DumpLogSegments printed
on the very same files (recorded in ``data/kafka39_corrupt_expectations.json`` by
``record_kafka_expectations.py``), never a Python traceback.

Kafka dies with an uncaught exception on some of them; the tool then prints the same
``Exception in thread "main" <class>: <message>`` line and the ``Caused by:`` lines (JVM stack
frames are not reproduced and were left out of the recording) and exits 1.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from corrupt_cases import CASES, FIXED_ROOT, FIXED_ROOT_CASES, make_cases
from dumplog_util import assert_same_lines, run_dump

EXPECTED = json.loads((Path(__file__).parent / "data" / "kafka39_corrupt_expectations.json").read_text())["cases"]

#: Cases where Kafka's exception text comes from code paths Odradek does not share (its record
#: decoder and java.util.zip); the tool dies at the same point with the same exception family,
#: worded differently. stdout must still be identical.
MESSAGE_DIFFERS = {
    "bad-crc-gzip": "org.apache.kafka.common.errors.CorruptRecordException",
    "bad-record": "org.apache.kafka.common.InvalidRecordException",
}


def test_every_case_was_recorded() -> None:
    assert {c[0] for c in CASES} == set(EXPECTED)


@pytest.mark.parametrize(("case_id", "files", "flags"), CASES, ids=[c[0] for c in CASES])
def test_like_kafka(case_id: str, files: str, flags: list[str], tmp_path: Path) -> None:
    if case_id in FIXED_ROOT_CASES:
        shutil.rmtree(FIXED_ROOT, ignore_errors=True)
        FIXED_ROOT.mkdir()
        tmp_path = FIXED_ROOT
    try:
        _check_case(case_id, files, flags, tmp_path)
    finally:
        if tmp_path == FIXED_ROOT:
            shutil.rmtree(FIXED_ROOT, ignore_errors=True)


def _check_case(case_id: str, files: str, flags: list[str], tmp_path: Path) -> None:
    make_cases(tmp_path)
    root = str(tmp_path)
    argv = ["--files", files.replace("<dir>", root), *[f.replace("<dir>", root) for f in flags]]
    out, err, rc = run_dump(argv)
    exp = EXPECTED[case_id]
    err_text = err.decode("utf-8")
    assert "Traceback" not in err_text
    assert rc == exp["returncode"]
    assert_same_lines(out.replace(root.encode(), b"<dir>"), exp["stdout"].encode("utf-8"), f"{case_id} stdout")
    got_err = [ln.replace(root, "<dir>") for ln in err_text.splitlines()]
    if case_id in MESSAGE_DIFFERS:
        assert len(got_err) == 1
        assert got_err[0].startswith(f'Exception in thread "main" {MESSAGE_DIFFERS[case_id]}: ')
        assert exp["stderr"][0].startswith('Exception in thread "main" org.apache.kafka.common.')
    else:
        assert got_err == exp["stderr"]


def test_missing_index_is_created_empty_like_kafka(tmp_path: Path) -> None:
    # Kafka's AbstractIndex creates a missing index before failing; a second run finds it empty.
    make_cases(tmp_path)
    index = tmp_path / "noidx" / "00000000000000000000.index"
    out, err, rc = run_dump(["--files", str(index)])
    assert rc == 1 and b"Invalid max index size: -1" in err
    out, err, rc = run_dump(["--files", str(index)])
    assert (rc, err) == (0, b"")
    assert out.decode().splitlines()[-1] == f"{index} is empty."
