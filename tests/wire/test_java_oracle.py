"""Oracle test: Kafka's own generated Java message classes (from the 4.1.1 jars, and 3.9.1 for the
versions 4.x dropped) decode every Odradek-encoded sample, consume every byte, and re-encode the
identical bytes. Covers all messages in the data module (requests, responses, headers, internal
records), every version."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from odradek.wire.messages.defs import MESSAGES
from odradek.wire.sample import sample
from odradek.wire.schema import codec, message_def

pytestmark = pytest.mark.oracle

ROOT = Path(__file__).resolve().parents[2]
M2 = Path(os.path.expanduser("~/.m2/repository"))
SLF4J = M2 / "org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_messages", ROOT / "tools" / "gen_messages.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()
NEW_JARS = [GEN.jar_path(M2, *GEN.BASE)] + [GEN.jar_path(M2, a, GEN.EXTRA_VERSION) for a in GEN.EXTRA]
OLD_JARS = [GEN.jar_path(M2, *GEN.OLD)]

if not shutil.which("javac") or not all(p.exists() for p in NEW_JARS + OLD_JARS + [SLF4J]):
    pytest.skip("needs javac, the Kafka jars in ~/.m2 and slf4j-api", allow_module_level=True)


def _class_index(jars: list[Path]) -> dict[str, str]:
    """Simple class name -> fully qualified name, for generated message classes."""
    index: dict[str, str] = {}
    for jar in jars:
        with zipfile.ZipFile(jar) as z:
            for entry in z.namelist():
                if not entry.endswith(".class") or "$" in entry:
                    continue
                package, _, simple = entry[:-6].rpartition("/")
                if package.endswith(("/message", "/metadata", "/generated")):
                    index.setdefault(simple, entry[:-6].replace("/", "."))
    return index


def _java_class(index: dict[str, str], name: str) -> str:
    return index.get(name + "Data") or index[name]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle")
    subprocess.run(["javac", "-d", str(out), "-cp", os.pathsep.join(map(str, NEW_JARS)),
                    str(ROOT / "tests/wire/oracle/WireOracle.java")], check=True)

    def run(jars: list[Path], lines: list[str]) -> list[str]:
        cp = os.pathsep.join([str(out), str(SLF4J), *map(str, jars)])
        proc = subprocess.run(["java", "-cp", cp, "WireOracle"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.splitlines()

    return run


def _cases():
    new_valid = {}
    for jar in NEW_JARS:
        for name, spec in GEN.read_jar(jar).items():
            new_valid.setdefault(name, GEN.parse_range(spec["validVersions"]))
    new_cases, old_cases = [], []
    for name in MESSAGES:
        rng = new_valid.get(name)
        for v in message_def(name).versions():
            (new_cases if rng and rng[0] <= v <= rng[1] else old_cases).append((name, v))
    return new_cases, old_cases


NEW_CASES, OLD_CASES = _cases()


def _check(oracle, jars: list[Path], cases: list[tuple[str, int]]) -> None:
    index = _class_index(jars)
    lines, expected = [], []
    for name, v in cases:
        for seed, nulls in ((0, False), (1, True), (2, False)):
            data = codec(name, v).encode_bytes(sample(name, v, seed=seed, nulls=nulls))
            lines.append(f"{_java_class(index, name)} {v} {data.hex()}")
            expected.append((name, v, seed, data.hex()))
    results = oracle(jars, lines)
    assert len(results) == len(expected)
    failures = []
    for (name, v, seed, want), got in zip(expected, results, strict=True):
        if got != f"OK 0 {want}":
            failures.append(f"{name} v{v} seed {seed}: {got[:300]} (sent {want[:200]})")
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:20])


def test_kafka_4_1_classes_agree(oracle) -> None:
    assert len(NEW_CASES) > 700
    _check(oracle, NEW_JARS, NEW_CASES)


def test_kafka_3_9_classes_agree_on_old_versions(oracle) -> None:
    assert ("ProduceRequest", 0) in OLD_CASES and ("FetchResponse", 3) in OLD_CASES
    _check(oracle, OLD_JARS, OLD_CASES)
