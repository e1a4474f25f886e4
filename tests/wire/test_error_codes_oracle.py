"""Oracle test: ErrorCode has every code of Kafka 4.4's ``Errors`` enum, with its name and
retriability, read from the kafka-clients 4.4.0 jar."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from odradek.wire.errors import ErrorCode

pytestmark = pytest.mark.oracle

ROOT = Path(__file__).resolve().parents[2]
M2 = next((p for p in (ROOT / ".cache/m2", Path(os.path.expanduser("~/.m2/repository")))
           if (p / "org/apache/kafka/kafka-clients").is_dir()), ROOT / ".cache/m2")
CLIENTS = M2 / "org/apache/kafka/kafka-clients/4.4.0/kafka-clients-4.4.0.jar"
SLF4J = M2 / "org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar"

if not shutil.which("javac") or not CLIENTS.exists() or not SLF4J.exists():
    pytest.skip("needs javac and kafka-clients 4.4.0 + slf4j-api in the Maven cache", allow_module_level=True)


def test_error_codes_match_kafka_4_4(tmp_path: Path) -> None:
    cp = os.pathsep.join([str(tmp_path), str(CLIENTS), str(SLF4J)])
    subprocess.run(["javac", "-d", str(tmp_path), "-cp", cp, str(ROOT / "tests/wire/oracle/ErrorCodes.java")],
                   check=True)
    out = subprocess.run(["java", "-cp", cp, "ErrorCodes"], capture_output=True, text=True, check=True).stdout
    kafka = {}
    for line in out.splitlines():
        code, name, retriable = line.split()
        kafka[int(code)] = (name, retriable == "true")
    ours = {int(e): (e.name, e.retriable) for e in ErrorCode}
    assert ours == kafka
