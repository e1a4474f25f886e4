"""Small file formats against the real files: checkpoints (and their line order), leader-epoch rules,
partition.metadata, meta.properties, .kafka_cleanshutdown, producer snapshots, index files."""

from __future__ import annotations

import calendar
import time
from pathlib import Path

import pytest
from logstore_testutil import CORPUS, REAL, REAL_38, REAL_41, need

from odradek.logstore.checkpoints import (
    ORDER_ANYREFMAP,
    ORDER_HASHMAP_COPY,
    CheckpointFormatError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from odradek.logstore.index_base import IndexOffsetError
from odradek.logstore.leader_epoch import LeaderEpochCache
from odradek.logstore.metadata_files import (
    MetaProperties,
    PartitionMetadataFile,
    read_clean_shutdown_file,
    read_properties,
    write_clean_shutdown_file,
)
from odradek.logstore.offset_index import OffsetIndex
from odradek.logstore.producer_state import ProducerStateManager, read_snapshot, write_snapshot
from odradek.logstore.time_index import TimeIndex

CHECKPOINTS = {
    "recovery-point-offset-checkpoint": ORDER_HASHMAP_COPY,
    "log-start-offset-checkpoint": ORDER_HASHMAP_COPY,
    "cleaner-offset-checkpoint": ORDER_HASHMAP_COPY,
    "replication-offset-checkpoint": ORDER_ANYREFMAP,
}


def checkpoint_files() -> list[Path]:
    dirs = [REAL_41, REAL_38, *sorted(CORPUS.glob("W*/logdir-clean"))]
    return [d / n for d in dirs for n in CHECKPOINTS if (d / n).exists()]


@pytest.mark.parametrize("path", checkpoint_files(), ids=lambda p: "/".join(p.parts[-3:]))
def test_offset_checkpoints_rewrite_byte_identical(path: Path, tmp_path: Path) -> None:
    """Reading a real checkpoint and writing its entries gives the same bytes (line order models)."""
    entries = OffsetCheckpointFile(path, create=False).read()
    out = OffsetCheckpointFile(tmp_path / path.name, CHECKPOINTS[path.name])
    assert out.path.read_bytes() == b""  # created empty, like Kafka's constructor
    if path.stat().st_size == 0:
        return
    out.write(entries)
    assert out.path.read_bytes() == path.read_bytes()


def test_checkpoint_reader_edge_cases(tmp_path: Path) -> None:
    p = tmp_path / "cp"
    p.write_bytes(b"0\n")
    assert OffsetCheckpointFile(p).read() == {}
    p.write_bytes(b"0\n2\nt 0 5\n")
    with pytest.raises(CheckpointFormatError):
        OffsetCheckpointFile(p).read()
    p.write_bytes(b"1\n0\n")
    with pytest.raises(CheckpointFormatError):
        OffsetCheckpointFile(p).read()


def test_leader_epoch_checkpoint_files_and_assign_rules(tmp_path: Path) -> None:
    for real in [REAL_41 / "__consumer_offsets-31" / "leader-epoch-checkpoint",
                 CORPUS / "W2" / "logdir-clean" / "w2-gzip-0" / "leader-epoch-checkpoint"]:
        entries = LeaderEpochCheckpointFile(need(real), create=False).read()
        f = LeaderEpochCheckpointFile(tmp_path / "lec")
        f.write(entries)
        assert f.path.read_bytes() == real.read_bytes()
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert cache.file.path.read_bytes() == b""  # created empty
    for epoch, off in [(0, 0), (1, 3), (2, 3), (2, 4), (10, 4)]:
        cache.assign(epoch, off)
    # epoch 2 at 3 replaced epoch 1 at 3; "2 4" is not lower than "2 3"; epoch 10 then starts at 4
    assert cache.file.path.read_bytes() == b"0\n3\n0 0\n2 3\n10 4\n"
    cache.assign(5, 2)  # a lower epoch/offset drops every entry at or above it
    assert cache.entries == [(0, 0), (5, 2)]
    cache.truncate_from_end(2)
    assert cache.entries == [(0, 0)]


def test_partition_metadata(tmp_path: Path) -> None:
    real = need(REAL_41 / "__consumer_offsets-31" / "partition.metadata")
    topic_id = PartitionMetadataFile(real.parent).read()
    f = PartitionMetadataFile(tmp_path)
    f.write(topic_id)
    assert f.path.read_bytes() == real.read_bytes() and not real.read_bytes().endswith(b"\n")
    meta = PartitionMetadataFile(need(REAL_41 / "__cluster_metadata-0")).read()
    assert meta == bytes(15) + b"\x01"
    with pytest.raises(ValueError):
        f.write(bytes(16))


def test_meta_properties_41_exact(tmp_path: Path) -> None:
    real = need(REAL_41 / "meta.properties")
    props = read_properties(real)
    mp = MetaProperties(props["cluster.id"], int(props["node.id"]), props["directory.id"])
    # "#Tue Dec 16 12:13:34 NPT 2025": Nepal time is UTC+05:45
    t = calendar.timegm(time.strptime("2025-12-16 12:13:34", "%Y-%m-%d %H:%M:%S")) - (5 * 3600 + 45 * 60)
    assert mp.render(t, tz_name="NPT", utc_offset_s=5 * 3600 + 45 * 60) == real.read_bytes()
    mp.write(tmp_path)
    lines = (tmp_path / "meta.properties").read_text().split("\n")
    assert lines[0] == "#" and lines[1].startswith("#") and lines[1].endswith(time.strftime("%Y", time.gmtime()))
    assert MetaProperties.read(tmp_path) == mp


def test_meta_properties_jdk17_order_examples() -> None:
    ex = need(REAL / "meta-properties-examples")
    for p in ex.iterdir():
        lines = p.read_bytes().split(b"\n")
        keys = [line.split(b"=")[0] for line in lines[2:-1]]
        props = read_properties(p)
        if keys == sorted(keys) or props.get("version") != "1":
            continue
        mp = MetaProperties(props["cluster.id"], int(props["node.id"]), props.get("directory.id"))
        assert mp.render(0, key_order="chm").split(b"\n")[2:] == lines[2:]


def test_clean_shutdown_file(tmp_path: Path) -> None:
    assert read_clean_shutdown_file(tmp_path) is None
    write_clean_shutdown_file(tmp_path, 11)
    assert (tmp_path / ".kafka_cleanshutdown").read_bytes() == need(REAL_41 / ".kafka_cleanshutdown").read_bytes()
    assert read_clean_shutdown_file(tmp_path) == 11
    (tmp_path / ".kafka_cleanshutdown").write_bytes(b"")
    assert read_clean_shutdown_file(tmp_path) == -1


def test_producer_snapshots_round_trip_and_hashmap_order(tmp_path: Path) -> None:
    snaps = sorted(REAL.rglob("*.snapshot")) + sorted(CORPUS.glob("W*/logdir-clean/**/*.snapshot"))
    assert snaps
    for p in snaps:
        entries = read_snapshot(p)
        write_snapshot(tmp_path / p.name, entries)
        assert (tmp_path / p.name).read_bytes() == p.read_bytes()
        # entries put into the map in file order come back out in file order (Java HashMap order)
        psm = ProducerStateManager(tmp_path)
        for e in entries:
            psm.put(e)
        assert [e.producer_id for e in psm.entries_in_kafka_order()] == [e.producer_id for e in entries]
    # and sorted insertion of the 20-producer genuine snapshot still lands in the right buckets
    big = read_snapshot(need(REAL / "synthetic-genuine-code" / "producer-snapshots" / "00000000000000000100.snapshot"))
    psm = ProducerStateManager(tmp_path)
    for e in sorted(big, key=lambda e: e.producer_id):
        psm.put(e)
    from odradek.logstore.java_hash import long_hash, spread

    buckets = [spread(long_hash(e.producer_id)) & 31 for e in psm.entries_in_kafka_order()]
    assert buckets == sorted(buckets)
    assert (tmp_path / "x").exists() is False
    psm.update_map_end_offset(0)
    assert psm.take_snapshot() is None  # never a 0.snapshot for a new log


def test_index_files(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    assert idx.length == 10485760 and idx.entries == 0
    assert idx.lookup(150) == (100, 0)
    for i in range(10):
        idx.append(105 + i * 10, i * 5000)
    assert idx.lookup(104) == (100, 0) and idx.lookup(105) == (105, 0) and idx.lookup(160) == (155, 25000)
    with pytest.raises(IndexOffsetError):
        idx.append(150, 1)
    idx.truncate_to(125)
    assert idx.entries == 2
    idx.close()
    assert (tmp_path / "00000000000000000100.index").read_bytes() == bytes.fromhex("0000000500000000" "0000000f00001388")
    tix = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100)
    assert tix.length == 10485756
    tix.maybe_append(1000, 105)
    tix.maybe_append(1000, 110)  # not strictly larger: ignored
    tix.maybe_append(2000, 120)
    assert tix.entries == 2 and tix.lookup(1500) == (1000, 105) and tix.lookup(10) == (-1, 100)
    tix.close()
    assert (tmp_path / "00000000000000000100.timeindex").stat().st_size == 24
