"""bootstrap.checkpoint, quorum-state and the metadata partition's files have Kafka's exact shape."""

from __future__ import annotations

import stat
from pathlib import Path

from odradek.config import BrokerConfig
from odradek.kraft.bootstrap import (
    build_bootstrap,
    build_bootstrap_snapshot,
    read_bootstrap,
    write_bootstrap_snapshot,
)
from odradek.kraft.features import default_feature_levels
from odradek.kraft.log import MetadataLog
from odradek.kraft.quorum_state import QuorumState
from odradek.kraft.records import decode_control_value, new_record
from odradek.kraft.snapshot import (
    SnapshotId,
    build_snapshot,
    list_snapshots,
    parse_snapshot_name,
    read_snapshot,
)
from odradek.storage import format_storage
from odradek.wire.records import iter_batches, parse_control_record_key

REAL = Path("/work/shared/fixtures/kafka-real")
LOG_41 = REAL / "ronem123_rupia-transaction-service@5d88e97/kafka-logs"
LOG_38 = REAL / "JitenPalaparthi_youtube-kafka-golang-rust@63330ef/kafka-logs"


#: `kafka-storage format` of Kafka 4.4.0 with defaults (compat-tests/kafka_oracle.py's StorageTool run).
FORMAT_44 = Path(__file__).parent / "fixtures/kafka-4.4.0-format/00000000000000000000-0000000000.checkpoint"


def test_bootstrap_checkpoint_is_byte_identical_to_kafka_41() -> None:
    real = (LOG_41 / "bootstrap.checkpoint").read_bytes()
    batches = list(iter_batches(real))
    header_ts, data_ts = batches[0].header().base_timestamp, batches[1].header().base_timestamp
    levels_41 = default_feature_levels(27)  # 4.4's defaults at 4.1-IV1 are what 4.1 wrote
    assert build_bootstrap(levels_41, header_ts, data_ts) == real
    assert read_bootstrap(LOG_41) == levels_41


def test_bootstrap_snapshot_is_byte_identical_to_kafka_44() -> None:
    real = FORMAT_44.read_bytes()
    batches = list(iter_batches(real))
    first = next(batches[0].records())
    header = decode_control_value(int(parse_control_record_key(first.key)[1]), first.value)
    times = dict(format_time_ms=header.last_contained_log_timestamp, header_ms=batches[0].header().base_timestamp,
                 data_ms=batches[1].header().base_timestamp, footer_ms=batches[2].header().base_timestamp)
    assert build_bootstrap_snapshot(default_feature_levels(), **times) == real


def _shape(data: bytes) -> list[tuple[int, ...]]:
    return [(b.header().base_offset, b.header().partition_leader_epoch, b.header().attributes,
             b.header().record_count, b.header().batch_length) for b in iter_batches(data)]


def test_bootstrap_snapshot_has_kafka_44s_place_and_mode(tmp_path: Path) -> None:
    path = write_bootstrap_snapshot(tmp_path, default_feature_levels())
    assert path == tmp_path / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    assert stat.S_IMODE(path.stat().st_mode) == 0o400  # as Kafka 4.4 leaves it
    assert _shape(path.read_bytes()) == _shape(FORMAT_44.read_bytes())
    assert read_bootstrap(tmp_path) == default_feature_levels()


def test_formatted_bootstrap_has_kafkas_layout(tmp_path: Path) -> None:
    config = BrokerConfig({"log.dirs": str(tmp_path / "d")})
    cluster = format_storage(config, "q1w2e3r4t5y6u7i8o9p0AA")
    assert cluster == "q1w2e3r4t5y6u7i8o9p0AA"
    # Kafka 4.4's bootstrap snapshot, read-only, with what Kafka 4.4 writes into it
    snap = tmp_path / "d" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    ours = snap.read_bytes()
    assert len(ours) == 411 and _shape(ours) == _shape(FORMAT_44.read_bytes())
    assert snap.stat().st_mode & 0o777 == 0o400 and not (tmp_path / "d" / "bootstrap.checkpoint").exists()
    assert read_bootstrap(tmp_path / "d") == default_feature_levels()
    meta = (tmp_path / "d" / "meta.properties").read_text().splitlines()
    assert meta[0] == "#" and [line.split("=")[0] for line in meta[2:]] == [
        "cluster.id", "directory.id", "node.id", "version"]


def test_quorum_state_round_trips_both_kafka_versions() -> None:
    for log_dir in (LOG_41, LOG_38):
        d = log_dir / "__cluster_metadata-0"
        state = QuorumState.read(d)
        assert state is not None and state.render() == (d / "quorum-state").read_bytes()
    # what Odradek writes (kraft.version 0, a static single voter) is the 3.x/4.x data_version 0 shape
    ours = QuorumState(leader_id=1, leader_epoch=2, voters=[1]).render()
    assert ours == (LOG_38 / "__cluster_metadata-0/quorum-state").read_bytes()


def test_snapshot_names_and_layout() -> None:
    assert parse_snapshot_name("00000000000001734780-0000000001.checkpoint") == SnapshotId(1734780, 1)
    assert parse_snapshot_name("00000000000001734780-0000000001.checkpoint.part") is None
    assert SnapshotId(1734780, 1).file_name == "00000000000001734780-0000000001.checkpoint"
    assert [s.end_offset for s in list_snapshots(LOG_41 / "__cluster_metadata-0")] == [852953, 1734780]
    data = build_snapshot([("FeatureLevelRecord", new_record("FeatureLevelRecord", name="metadata.version",
                                                              feature_level=27))], epoch=3, timestamp=1)
    batches = list(iter_batches(data))
    assert [b.header().attributes for b in batches] == [0x20, 0, 0x20]
    assert {b.header().partition_leader_epoch for b in batches} == {3}
    assert [b.header().base_offset for b in batches] == [0, 1, 2]


def test_real_snapshot_reads_whole_metadata() -> None:
    recs = list(read_snapshot(LOG_41 / "__cluster_metadata-0/00000000000001734780-0000000001.checkpoint"))
    names = [r.name for r in recs]
    assert names.count("TopicRecord") == 2 and names.count("PartitionRecord") == 51


def test_metadata_partition_files_have_kafkas_shape(tmp_path: Path) -> None:
    md = MetadataLog.open(tmp_path)
    md.become_leader(1, 1, 1000)
    md.append([("FeatureLevelRecord", new_record("FeatureLevelRecord", name="metadata.version",
                                                  feature_level=27))], 1, 1001)
    md.close()
    d = tmp_path / "__cluster_metadata-0"
    assert (d / "partition.metadata").read_bytes() == (LOG_41 / "__cluster_metadata-0/partition.metadata").read_bytes()
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    reopened = MetadataLog.open(tmp_path)
    assert list(reopened.leader_changes()) == [(0, 1)]
    reopened.close()
