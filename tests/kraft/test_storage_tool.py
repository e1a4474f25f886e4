"""`odradek storage format | info | random-uuid` behave like kafka-storage.sh."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.cli import main
from odradek.kraft.bootstrap import read_bootstrap
from odradek.logstore.metadata_files import MetaProperties


def test_format_info_and_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"node.id=3\nlog.dirs={tmp_path / 'a'},{tmp_path / 'b'}\n")
    assert main(["storage", "format", "-t", "q1w2e3r4t5y6u7i8o9p0AA", "-c", str(props)]) == 0
    assert "metadata.version 4.4-IV2" in capsys.readouterr().out
    for d in ("a", "b"):
        meta = MetaProperties.read(tmp_path / d)
        assert (meta.cluster_id, meta.node_id, meta.version) == ("q1w2e3r4t5y6u7i8o9p0AA", 3, 1)
        assert meta.directory_id and len(meta.directory_id) == 22
    # the bootstrap snapshot only in the metadata log dir (the first log dir), what 4.4 finalizes
    assert read_bootstrap(tmp_path / "a") == {"metadata.version": 33, "eligible.leader.replicas.version": 1,
                                              "group.version": 1, "share.version": 2, "streams.version": 1,
                                              "transaction.version": 2}
    assert read_bootstrap(tmp_path / "b") is None and not (tmp_path / "b" / "bootstrap.checkpoint").exists()

    # formatted already: an error unless --ignore-formatted
    assert main(["storage", "format", "-t", "q1w2e3r4t5y6u7i8o9p0AA", "-c", str(props)]) == 1
    assert "already formatted" in capsys.readouterr().err
    assert main(["storage", "format", "-t", "q1w2e3r4t5y6u7i8o9p0AA", "-c", str(props), "-g"]) == 0
    capsys.readouterr()

    assert main(["storage", "info", "-c", str(props)]) == 0
    out = capsys.readouterr().out
    assert "cluster.id=q1w2e3r4t5y6u7i8o9p0AA" in out and "node.id=3" in out and "metadata.version=33" in out


def _format(d: Path, *args: str) -> dict[str, int] | None:
    assert main(["storage", "format", "-t", "abc", "--override", f"log.dirs={d}", *args]) == 0
    return read_bootstrap(d)


def test_format_release_version_and_features(tmp_path: Path) -> None:
    # what kafka-storage format of 4.4.0 writes for the same arguments (a level-0 feature gets no record)
    assert _format(tmp_path / "a", "--release-version", "4.0", "--feature", "group.version=0") == {
        "metadata.version": 25, "transaction.version": 2}
    assert _format(tmp_path / "b", "--release-version", "4.2") == {
        "metadata.version": 29, "eligible.leader.replicas.version": 1, "group.version": 1, "share.version": 1,
        "streams.version": 1, "transaction.version": 2}
    assert _format(tmp_path / "c", "--release-version", "3.9") == {"metadata.version": 21}
    assert _format(tmp_path / "d", "--release-version", "3.6-IV1") == {"metadata.version": 13}
    assert _format(tmp_path / "e", "--feature", "share.version=0") == {
        "metadata.version": 33, "eligible.leader.replicas.version": 1, "group.version": 1, "streams.version": 1,
        "transaction.version": 2}


@pytest.mark.parametrize("args", [("--release-version", "4.5"), ("--release-version", "3.2"),
                                  ("--feature", "share.version=3"), ("--feature", "no.such.version=1"),
                                  ("--release-version", "4.0-IV0", "--feature", "eligible.leader.replicas.version=1")])
def test_format_refuses_what_kafka_44_refuses(tmp_path: Path, args: tuple[str, ...],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["storage", "format", "-t", "abc", "--override", f"log.dirs={tmp_path / 'd'}", *args]) == 1
    assert capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_random_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["storage", "random-uuid"]) == 0
    assert len(capsys.readouterr().out.strip()) == 22
