"""Record what Kafka's own DumpLogSegments prints for the cases of ``corrupt_cases.py``.

Needs the Kafka jars (``bash .ci/fetch-tools.sh``). Run from the repository root:
``python tests/tools/record_kafka_expectations.py [--version 3.9.1]``; it rewrites
``tests/tools/data/kafka39_corrupt_expectations.json``. Stack-trace frames (``\\tat ...`` and
``\\t... N more``) are left out of stderr; everything else is kept as printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "compat-tests"))

from corrupt_cases import CASES, make_cases  # noqa: E402
from kafka_oracle import run_java_tool  # noqa: E402

OUT = HERE / "data" / "kafka39_corrupt_expectations.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--version", default="3.9.1")
    args = ap.parse_args()
    result = {"kafka_version": args.version, "cases": {}}
    for case_id, files, flags in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            make_cases(root)
            argv = ["--files", files.replace("<dir>", str(root)), *[f.replace("<dir>", str(root)) for f in flags]]
            proc = run_java_tool("kafka.tools.DumpLogSegments", argv, version=args.version)
            err = [ln for ln in proc.stderr.splitlines() if not ln.startswith(("\tat ", "\t..."))]
            result["cases"][case_id] = {
                "stdout": proc.stdout.replace(str(root), "<dir>"),
                "stderr": [ln.replace(str(root), "<dir>") for ln in err],
                "returncode": proc.returncode,
            }
    OUT.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT} ({len(CASES)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
