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
    assert "metadata.version 4.1-IV1" in capsys.readouterr().out
    for d in ("a", "b"):
        meta = MetaProperties.read(tmp_path / d)
        assert (meta.cluster_id, meta.node_id, meta.version) == ("q1w2e3r4t5y6u7i8o9p0AA", 3, 1)
        assert meta.directory_id and len(meta.directory_id) == 22
    # bootstrap.checkpoint only in the metadata log dir (the first log dir)
    assert read_bootstrap(tmp_path / "a") == {"metadata.version": 27, "eligible.leader.replicas.version": 1,
                                              "group.version": 1, "transaction.version": 2}
    assert not (tmp_path / "b" / "bootstrap.checkpoint").exists()

    # formatted already: an error unless --ignore-formatted
    assert main(["storage", "format", "-t", "q1w2e3r4t5y6u7i8o9p0AA", "-c", str(props)]) == 1
    assert "already formatted" in capsys.readouterr().err
    assert main(["storage", "format", "-t", "q1w2e3r4t5y6u7i8o9p0AA", "-c", str(props), "-g"]) == 0
    capsys.readouterr()

    assert main(["storage", "info", "-c", str(props)]) == 0
    out = capsys.readouterr().out
    assert "cluster.id=q1w2e3r4t5y6u7i8o9p0AA" in out and "node.id=3" in out and "metadata.version=27" in out


def test_format_release_version_and_features(tmp_path: Path) -> None:
    d = tmp_path / "d"
    assert main(["storage", "format", "-t", "abc", "--override", f"log.dirs={d}",
                 "--release-version", "4.0", "--feature", "group.version=0"]) == 0
    levels = read_bootstrap(d)
    assert levels is not None and levels["metadata.version"] == 25 and levels["group.version"] == 0


def test_random_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["storage", "random-uuid"]) == 0
    assert len(capsys.readouterr().out.strip()) == 22
