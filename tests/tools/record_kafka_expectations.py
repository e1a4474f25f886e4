"""Record what Kafka's own DumpLogSegments prints for the cases of ``corrupt_cases.py``.

Needs the Kafka jars (``bash .ci/fetch-tools.sh``). Run from the repository root:
``python tests/tools/record_kafka_expectations.py [--version 3.9.1]``; it rewrites
``tests/tools/data/kafka39_corrupt_expectations.json``. Stack-trace frames (``\\tat ...`` and
``\\t... N more``) are left out of stderr; everything else is kept as printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "compat-tests"))

from corrupt_cases import CASES, FIXED_ROOT, FIXED_ROOT_CASES, make_cases  # noqa: E402
from kafka_oracle import run_java_tool  # noqa: E402

OUT = HERE / "data" / "kafka39_corrupt_expectations.json"
REAL = Path("/work/shared/fixtures/kafka-real")
REAL_OUT = HERE / "data" / "kafka39_real_extra"

_RON = "./ronem123_rupia-transaction-service@5d88e97/kafka-logs"
_JIT = "./JitenPalaparthi_youtube-kafka-golang-rust@63330ef/kafka-logs"
_META = [
    f"{_JIT}/__cluster_metadata-0/00000000000000000000.log",
    f"{_RON}/__cluster_metadata-0/00000000000001725413.log",
    f"{_RON}/__cluster_metadata-0/00000000000000852953-0000000001.checkpoint",
    f"{_RON}/__cluster_metadata-0/00000000000001734780-0000000001.checkpoint",
    f"{_RON}/bootstrap.checkpoint",
    f"{_JIT}/bootstrap.checkpoint",
]
_OFFSETS = [
    f"{_RON}/__consumer_offsets-31/00000000000000000000.log",
    f"{_RON}/__consumer_offsets-31/00000000000000000003.log",
    f"{_RON}/__consumer_offsets-44/00000000000000000000.log",
    f"{_RON}/__consumer_offsets-44/00000000000000000009.log",
]
_INDEXES = [
    f"{_RON}/__cluster_metadata-0/00000000000001725413.index",
    f"{_RON}/__cluster_metadata-0/00000000000001725413.timeindex",
    f"{_RON}/__consumer_offsets-31/00000000000000000000.timeindex",
    f"{_RON}/__consumer_offsets-31/00000000000000000003.index",
    f"{_RON}/__consumer_offsets-44/00000000000000000009.timeindex",
]
#: (name, files relative to kafka-real, flags): modes the kafka-real dumps do not cover
REAL_EXTRA: list[tuple[str, list[str], list[str]]] = [
    ("metadata-decoder", _META, ["--cluster-metadata-decoder"]),
    ("metadata-skip-metadata", _META[:1] + _META[2:], ["--cluster-metadata-decoder", "--skip-record-metadata"]),
    ("offsets-decoder", _OFFSETS, ["--offsets-decoder"]),
    ("offsets-skip-metadata", _OFFSETS, ["--print-data-log", "--skip-record-metadata"]),
    ("indexes-verify", _INDEXES, ["--verify-index-only"]),
    ("indexes-sanity", _INDEXES, ["--index-sanity-check"]),
]


def record_real_extra(version: str) -> None:
    """Run the tool on kafka-real files in extra modes (from kafka-real/, paths with "./")."""
    import gzip
    import os

    REAL_OUT.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(REAL)
    try:
        for name, files, flags in REAL_EXTRA:
            proc = run_java_tool("kafka.tools.DumpLogSegments", ["--files", ",".join(files), *flags], version=version)
            err = [ln for ln in proc.stderr.splitlines() if not ln.startswith(("\tat ", "\t..."))]
            (REAL_OUT / f"{name}.stdout.gz").write_bytes(gzip.compress(proc.stdout.encode("utf-8"), 9, mtime=0))
            text = "\n".join(ln.replace(str(REAL), "<fixtures>") for ln in err)
            (REAL_OUT / f"{name}.stderr").write_text(text + ("\n" if err else "") + f"[exit {proc.returncode}]\n")
    finally:
        os.chdir(cwd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--version", default="3.9.1")
    args = ap.parse_args()
    result = {"kafka_version": args.version, "cases": {}}
    for case_id, files, flags in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            if case_id in FIXED_ROOT_CASES:
                shutil.rmtree(FIXED_ROOT, ignore_errors=True)
                FIXED_ROOT.mkdir()
                root = FIXED_ROOT
            make_cases(root)
            argv = ["--files", files.replace("<dir>", str(root)), *[f.replace("<dir>", str(root)) for f in flags]]
            proc = run_java_tool("kafka.tools.DumpLogSegments", argv, version=args.version)
            err = [ln for ln in proc.stderr.splitlines() if not ln.startswith(("\tat ", "\t..."))]
            result["cases"][case_id] = {
                "stdout": proc.stdout.replace(str(root), "<dir>"),
                "stderr": [ln.replace(str(root), "<dir>") for ln in err],
                "returncode": proc.returncode,
            }
            if root == FIXED_ROOT:
                shutil.rmtree(FIXED_ROOT)
    OUT.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT} ({len(CASES)} cases)")
    record_real_extra(args.version)
    print(f"wrote {REAL_OUT} ({len(REAL_EXTRA)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
