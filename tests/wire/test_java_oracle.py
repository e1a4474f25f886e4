"""Oracle test: Kafka's own generated Java message classes (from the 4.4.0 jars, and for the versions
4.4 dropped from the older jar that still had them: 4.1.1, then 3.9.1) decode every Odradek-encoded sample, consume every byte, and re-encode the
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
# .ci/fetch-tools.sh fills the repository's own Maven cache; a developer's ~/.m2 is the fallback.
M2 = next((p for p in (ROOT / ".cache/m2", Path(os.path.expanduser("~/.m2/repository")))
           if (p / "org/apache/kafka/kafka-clients").is_dir()), ROOT / ".cache/m2")
SLF4J = M2 / "org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_messages", ROOT / "tools" / "gen_messages.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()
NEW_JARS = [GEN.jar_path(M2, *GEN.BASE)] + [GEN.jar_path(M2, a, GEN.EXTRA_VERSION) for a in GEN.EXTRA]
OLD_JARS = [GEN.jar_path(M2, *older) for older in GEN.OLDER]

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


def _valid(jar: Path) -> dict[str, tuple[int, int] | None]:
    return {name: GEN.parse_range(spec["validVersions"]) for name, spec in GEN.read_jar(jar).items()}


def _cases():
    """(name, version) pairs by the jar that defines them: the new jars, else the newest older one."""
    new_valid: dict = {}
    for jar in NEW_JARS:
        for name, rng in _valid(jar).items():
            new_valid.setdefault(name, rng)
    old_valid = [_valid(jar) for jar in OLD_JARS]
    new_cases: list = []
    old_cases: list[list] = [[] for _ in OLD_JARS]
    for name in MESSAGES:
        for v in message_def(name).versions():
            rng = new_valid.get(name)
            if rng and rng[0] <= v <= rng[1]:
                new_cases.append((name, v))
                continue
            i = next(i for i, valid in enumerate(old_valid) if (r := valid.get(name)) and r[0] <= v <= r[1])
            old_cases[i].append((name, v))
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


def test_kafka_4_4_classes_agree(oracle) -> None:
    assert len(NEW_CASES) > 700
    _check(oracle, NEW_JARS, NEW_CASES)


def test_older_classes_agree_on_old_versions(oracle) -> None:
    old = [case for cases in OLD_CASES for case in cases]
    assert ("ProduceRequest", 0) in old and ("FetchResponse", 3) in old
    for jar, cases in zip(OLD_JARS, OLD_CASES, strict=True):
        if cases:
            _check(oracle, [jar], cases)
