"""kraft.validation: the read-only pass over a metadata log before start-up changes anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.cluster_metadata import Topic, random_uuid
from odradek.kraft.records import encode_metadata_record, new_record
from odradek.kraft.store import MetadataStore, supported_feature_ranges
from odradek.kraft.validation import MetadataRefusedError, validate_metadata_dir
from odradek.wire.primitives import Uuid, encode_uvarint
from odradek.wire.records import SimpleRecord, build_batch, iter_batches

DIR_ID = Uuid.from_base64("yYuMrFRVQVSX0VVQPcMSrA")


def _written(path: Path, topics: int = 3) -> Path:
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    store = MetadataStore(path, 1, {path: DIR_ID}, lambda: next(clock))
    store.listeners = [("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    store.start()
    for i in range(topics):
        store.record("create", Topic(f"t{i}", random_uuid(), 2, {}))
    store.close()
    return sorted((path / "__cluster_metadata-0").glob("*.log"))[-1]


def _append(seg: Path, values: list[bytes]) -> int:
    end = epoch = 0
    for batch in iter_batches(seg.read_bytes()):
        h = batch.header()
        end, epoch = h.base_offset + h.last_offset_delta + 1, h.partition_leader_epoch
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(build_batch([SimpleRecord(value=v, key=None, timestamp=1) for v in values], base_offset=end,
                            partition_leader_epoch=epoch))
    return size


def _topic_value(name: str) -> bytes:
    return encode_metadata_record("TopicRecord", new_record("TopicRecord", name=name, topic_id=random_uuid()))


def test_a_written_log_validates_and_its_image_has_the_topics(tmp_path: Path) -> None:
    _written(tmp_path)
    checked = validate_metadata_dir(tmp_path, supported_feature_ranges())
    assert {t.name for t in checked.image.topics_by_id.values()} == {"t0", "t1", "t2"}
    assert checked.torn_tail is None and not checked.empty


def test_a_missing_metadata_log_is_empty(tmp_path: Path) -> None:
    assert validate_metadata_dir(tmp_path, supported_feature_ranges()).empty


@pytest.mark.parametrize("cut", [1, 20, 70])
def test_an_incomplete_last_batch_is_a_torn_tail(tmp_path: Path, cut: int) -> None:
    seg = _written(tmp_path)
    size = _append(seg, [_topic_value("torn")])
    os.truncate(seg, size + cut)
    checked = validate_metadata_dir(tmp_path, supported_feature_ranges())
    assert checked.torn_tail is not None and checked.torn_tail.position == size
    assert "torn" not in {t.name for t in checked.image.topics_by_id.values()}


def test_a_crc_failure_of_the_last_batch_is_a_torn_tail(tmp_path: Path) -> None:
    seg = _written(tmp_path)
    size = _append(seg, [_topic_value("bad-crc")])
    raw = bytearray(seg.read_bytes())
    raw[-1] ^= 0x55
    seg.write_bytes(bytes(raw) + bytes(4096))  # zeros after it: still the end of the log
    checked = validate_metadata_dir(tmp_path, supported_feature_ranges())
    assert checked.torn_tail is not None and checked.torn_tail.position == size
    assert "CRC" in checked.torn_tail.reason


def test_a_crc_failure_followed_by_good_batches_is_refused(tmp_path: Path) -> None:
    seg = _written(tmp_path)
    size = _append(seg, [_topic_value("bad-crc")])
    raw = bytearray(seg.read_bytes())
    raw[-1] ^= 0x55
    seg.write_bytes(bytes(raw))
    _append_raw_after = build_batch([SimpleRecord(value=_topic_value("after"), key=None, timestamp=1)],
                                    base_offset=10_000)
    with open(seg, "ab") as f:
        f.write(_append_raw_after)
    with pytest.raises(MetadataRefusedError, match=rf"position {size}: the metadata log is corrupt in the middle"):
        validate_metadata_dir(tmp_path, supported_feature_ranges())


def test_unknown_types_versions_and_feature_levels_are_refused(tmp_path: Path) -> None:
    seg = _written(tmp_path)
    original = seg.read_bytes()
    cases = [
        (encode_uvarint(1) + encode_uvarint(251) + encode_uvarint(0), r"type 251, which Odradek does not know"),
        (encode_uvarint(1) + encode_uvarint(2) + encode_uvarint(77) + b"\x00", r"TopicRecord version 77"),
        (encode_metadata_record("FeatureLevelRecord", new_record("FeatureLevelRecord", name="metadata.version",
                                                                 feature_level=500)), r"finalized at level 500"),
        (encode_metadata_record("FeatureLevelRecord", new_record("FeatureLevelRecord", name="future.version",
                                                                 feature_level=1)), r"does not support"),
    ]
    for value, message in cases:
        seg.write_bytes(original)
        _append(seg, [value])
        with pytest.raises(MetadataRefusedError, match=message) as info:
            validate_metadata_dir(tmp_path, supported_feature_ranges())
        assert str(seg) in str(info.value) and "Nothing in the log dirs was changed" in str(info.value)
