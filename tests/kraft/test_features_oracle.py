"""Oracle test: kraft/features.py holds the facts of Kafka 4.4.0's MetadataVersion and Feature
enums (kafka-server-common 4.4.0, run through tests/kraft/oracle/Features.java): metadata.version
levels and names, the record versions at each level, each feature's default level at each
metadata.version, the supported ranges, dependencies, and the names --release-version takes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from odradek.kraft import features as F

pytestmark = pytest.mark.oracle

ROOT = Path(__file__).resolve().parents[2]
M2 = next((p for p in (ROOT / ".cache/m2", Path(os.path.expanduser("~/.m2/repository")))
           if (p / "org/apache/kafka/kafka-server-common").is_dir()), ROOT / ".cache/m2")
JARS = [M2 / "org/apache/kafka/kafka-server-common/4.4.0/kafka-server-common-4.4.0.jar",
        M2 / "org/apache/kafka/kafka-clients/4.4.0/kafka-clients-4.4.0.jar",
        M2 / "org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar"]

if not shutil.which("javac") or not all(j.exists() for j in JARS):
    pytest.skip("needs javac and kafka-server-common/kafka-clients 4.4.0 in the Maven cache", allow_module_level=True)

#: names to resolve: everything features.py accepts, and some it must refuse
RELEASES = [*F.RELEASE_METADATA_VERSIONS, "3.2", "3.3-IV2", "4.5", "4.5-IV0", "4.4-IV3"]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> list[list[str]]:
    out = tmp_path_factory.mktemp("features")
    cp = os.pathsep.join([str(out), *map(str, JARS)])
    subprocess.run(["javac", "-d", str(out), "-cp", cp, str(ROOT / "tests/kraft/oracle/Features.java")], check=True)
    proc = subprocess.run(["java", "-cp", cp, "Features", *RELEASES], capture_output=True, text=True, check=True)
    return [line.split() for line in proc.stdout.splitlines()]


def test_metadata_versions_and_record_versions(kafka: list[list[str]]) -> None:
    [latest] = [int(x[1]) for x in kafka if x[0] == "latest"]
    assert F.LATEST_PRODUCTION == latest
    mvs = [x[1:] for x in kafka if x[0] == "mv"]
    assert {int(level): name for level, name, *_ in mvs} == F.METADATA_VERSIONS
    assert F.METADATA_CHANGED == {int(level) for level, *_, changed in mvs if changed == "true"}
    for level, _name, register, partition, change, txn, dirs, cordon, _changed in mvs:
        mv = int(level)
        assert F.record_versions(mv) == {"RegisterBrokerRecord": int(register), "PartitionRecord": int(partition),
                                         "PartitionChangeRecord": int(change)}, mv
        assert (F.supports_metadata_transactions(mv), F.supports_directory_assignment(mv),
                F.supports_cordoned_log_dirs(mv)) == (txn == "true", dirs == "true", cordon == "true"), mv


def test_feature_defaults_ranges_and_dependencies(kafka: list[list[str]]) -> None:
    for _, name, mv, level in (x for x in kafka if x[0] == "default"):
        assert F.default_level(name, int(mv)) == int(level), (name, mv)
    ranges = {name: (int(lo), int(hi)) for _, name, lo, hi in (x for x in kafka if x[0] == "range")}
    assert F.supported_feature_ranges() == {**ranges, "metadata.version": (7, F.LATEST_PRODUCTION)}
    deps = {(name, int(level)): {} for _, name, level, *_ in (x for x in kafka if x[0] == "dep")}
    for _, name, level, dep, need in (x for x in kafka if x[0] == "dep"):
        deps[(name, int(level))][dep] = int(need)
    assert F.FEATURE_DEPENDENCIES == deps


def test_release_version_names(kafka: list[list[str]]) -> None:
    resolved = {name: None if level == "none" else int(level) for _, name, level in (x for x in kafka
                                                                                         if x[0] == "release")}
    assert resolved == {name: F.RELEASE_METADATA_VERSIONS.get(name) for name in RELEASES}
