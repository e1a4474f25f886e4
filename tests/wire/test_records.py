"""Unit tests of wire.records: builder/view round trips, header fields, patches, scanning rules,
control records, produce validation helpers, legacy v0/v1 message sets."""

from __future__ import annotations

import struct
import zlib

import pytest
from crc32c import crc32c

from odradek.wire.errors import ErrorCode, ProtocolError
from odradek.wire.records import (
    BATCH_OVERHEAD,
    CompressionType,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatch,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_control_batch,
    build_end_txn_marker_batch,
    control_record_key,
    end_txn_marker_value,
    increment_sequence,
    iter_batches,
    iter_legacy_messages,
    iter_log_entries,
    legacy_inner_messages,
    next_batch_size,
    parse_batch_header,
    parse_control_record_key,
    parse_end_txn_marker,
)

RECS = [
    SimpleRecord(b"v0", b"k0", [("h", b"x")], 1000),
    SimpleRecord(None, b"k1", [], 1005),
    SimpleRecord(b"", None, [("a", None), ("b\u00e9", b"")], 998),
    SimpleRecord(b"x" * 300, b"k" * 200, [], 1002),
]


def _fields(recs):  # type: ignore[no-untyped-def]
    return [(r.key, r.value, list(r.headers), r.timestamp) for r in recs]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_build_parse_round_trip_every_codec(codec: CompressionType) -> None:
    data = build_batch(
        RECS,
        base_offset=100,
        partition_leader_epoch=7,
        compression=codec,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
    )
    b = RecordBatch(data)
    b.ensure_valid()
    h = b.header()
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (100, 7, 2)
    assert b.compression is codec
    assert b.last_offset_delta == 3 and b.last_offset == 103 and b.next_offset == 104
    assert b.base_timestamp == 1000 and b.max_timestamp == 1005
    assert b.record_count == 4 and b.size_in_bytes == len(data) == b.batch_length + 12
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (42, 3, 10, 13)
    assert not b.is_transactional and not b.is_control and b.delete_horizon_ms is None
    assert b.timestamp_type is TimestampType.CREATE_TIME
    recs = list(b.records())
    assert _fields(recs) == _fields(RECS)
    assert [r.offset for r in recs] == [100, 101, 102, 103]
    assert [r.sequence for r in recs] == [10, 11, 12, 13]
    s = b.scan_records()
    assert (s.record_count, s.min_timestamp, s.max_timestamp, s.offset_delta_of_max_timestamp) == (4, 998, 1005, 1)
    assert s.offsets_consecutive and s.has_null_key
    assert s.inflated_size == len(b.inflated_block())
    if codec is CompressionType.NONE:
        assert b.inflated_block() == data[BATCH_OVERHEAD:]
    # the stored CRC is CRC-32C of bytes [21, end)
    assert b.crc == crc32c(data[21:])


def test_view_is_zero_copy_and_cut_to_size() -> None:
    data = bytearray(build_batch(RECS) + b"trailing junk")
    b = RecordBatch(data)
    assert b.size_in_bytes == len(data) - len(b"trailing junk")
    data[0:8] = struct.pack(">q", 55)
    assert b.base_offset == 55  # reads the caller's buffer, not a copy
    two = build_batch(RECS[:1]) + build_batch(RECS[1:], base_offset=1)
    second = RecordBatch(two, position=len(build_batch(RECS[:1])))
    assert second.base_offset == 1 and second.position > 0


def test_builder_options() -> None:
    data = build_batch(
        RECS,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=5000,
        is_transactional=True,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
    )
    b = RecordBatch(data)
    assert b.timestamp_type is TimestampType.LOG_APPEND_TIME and b.max_timestamp == 5000
    assert b.base_timestamp == 1000 and b.is_transactional
    assert [r.timestamp for r in b.records()] == [5000] * 4
    # the record deltas still hold the create times
    assert [b.base_timestamp + r.timestamp_delta for r in b.records()] == [1000, 1005, 998, 1002]
    with pytest.raises(ValueError):
        build_batch(RECS, timestamp_type=TimestampType.LOG_APPEND_TIME)
    with pytest.raises(ValueError):
        build_batch([])
    d = RecordBatch(build_batch(RECS, delete_horizon_ms=777, offset_deltas=[0, 2, 5, 9]))
    assert d.has_delete_horizon and d.delete_horizon_ms == 777 and d.base_timestamp == 777
    assert [r.timestamp for r in d.records()] == [1000, 1005, 998, 1002]
    assert [r.offset for r in d.records()] == [0, 2, 5, 9] and d.last_offset_delta == 9
    assert not d.scan_records().offsets_consecutive


def test_last_sequence_wraps_like_kafka() -> None:
    b = RecordBatch(build_batch(RECS, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert b.last_sequence == 1  # MAX-2 +3 wraps past Int.MAX_VALUE to 1
    assert [r.sequence for r in b.records()] == [2**31 - 2, 2**31 - 1, 0, 1]
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(5, 3) == 8
    assert parse_batch_header(build_batch(RECS)).last_sequence == -1


def test_patches() -> None:
    buf = bytearray(build_batch(RECS, partition_leader_epoch=0))
    b = RecordBatch(buf)
    crc = b.crc
    b.set_base_offset(1234)
    b.set_partition_leader_epoch(9)
    assert (b.base_offset, b.partition_leader_epoch, b.crc) == (1234, 9, crc)
    b.ensure_valid()
    b.set_last_offset(2000)
    assert b.base_offset == 2000 - 3 and b.last_offset == 2000
    before = bytes(buf)
    b.set_max_timestamp(1005, log_append_time=False)  # unchanged: Kafka leaves the bytes alone
    assert bytes(buf) == before
    b.set_max_timestamp(99999, log_append_time=True)
    assert b.timestamp_type is TimestampType.LOG_APPEND_TIME and b.max_timestamp == 99999
    assert b.crc != crc and b.is_valid()
    assert [r.timestamp for r in b.records()] == [99999] * 4
    b.set_max_timestamp(1005, log_append_time=False)  # back to the original bytes
    assert b.crc == crc and b.timestamp_type is TimestampType.CREATE_TIME
    with pytest.raises(TypeError):
        RecordBatch(bytes(buf)).set_base_offset(1)  # read-only memory
    # unused attribute bits are dropped when Kafka rewrites the attributes
    odd = bytearray(build_batch(RECS, is_transactional=True, producer_id=1, producer_epoch=0, base_sequence=0))
    odd[21] |= 0x80
    ob = RecordBatch(odd)
    ob.set_max_timestamp(1005, log_append_time=False)  # nothing to change: bytes kept
    assert ob.attributes & 0x8000
    ob.set_max_timestamp(7, log_append_time=True)
    assert ob.attributes == 0x18 and ob.is_valid()


def test_ensure_valid_errors() -> None:
    buf = bytearray(build_batch(RECS))
    buf[-1] ^= 1
    b = RecordBatch(buf)
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match="crc"):
        b.ensure_valid()
    buf = bytearray(build_batch(RECS))
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        RecordBatch(buf).ensure_valid()
    # the leader epoch is outside the CRC
    buf = bytearray(build_batch(RECS))
    buf[12:16] = b"\x7f\x00\x00\x01"
    RecordBatch(buf).ensure_valid()
    with pytest.raises(CorruptRecordError):
        RecordBatch(build_batch(RECS)[:60])
    small = bytearray(build_batch(RECS))
    small[8:12] = struct.pack(">i", 40)
    with pytest.raises(CorruptRecordError, match="minimum"):
        RecordBatch(small)
    with pytest.raises(CorruptRecordError):
        RecordBatch(build_batch(RECS)[:-1])
    e = CorruptRecordError("x")
    assert isinstance(e, ProtocolError) and isinstance(e, ValueError)
    assert CorruptRecordError.error_code == ErrorCode.CORRUPT_MESSAGE
    assert InvalidRecordError.error_code == ErrorCode.INVALID_RECORD
    assert issubclass(InvalidRecordError, CorruptRecordError)


def _with_block(block: bytes, count: int, codec: CompressionType = CompressionType.NONE) -> bytes:
    """A valid-CRC batch around an arbitrary records block (to reach the record decoder)."""
    from odradek.wire.compression import compress

    payload = compress(codec, block)
    tail = struct.pack(">hiqqqhii", int(codec), max(count - 1, 0), 0, 0, -1, -1, -1, count)
    crc = crc32c(payload, crc32c(tail))
    return struct.pack(">qiibI", 0, 49 + len(payload), -1, 2, crc) + tail + payload


def test_record_validation() -> None:
    block = RecordBatch(build_batch(RECS)).inflated_block()
    for codec in (CompressionType.NONE, CompressionType.ZSTD):
        # count says more than there are
        with pytest.raises(InvalidRecordError):
            list(RecordBatch(_with_block(block, 5, codec)).records())
        # count says fewer: trailing bytes inside the records block
        with pytest.raises(InvalidRecordError, match="remaining"):
            list(RecordBatch(_with_block(block, 3, codec)).records())
        with pytest.raises(InvalidRecordError, match="remaining"):
            RecordBatch(_with_block(block, 3, codec)).scan_records()
        with pytest.raises(InvalidRecordError):
            list(RecordBatch(_with_block(block, -1, codec)).records())
        assert len(list(RecordBatch(_with_block(block, 4, codec)).records())) == 4
    # a record whose length varint claims one byte more than its fields use
    one = RecordBatch(build_batch(RECS[:1])).inflated_block()
    bad = bytes([one[0] + 2]) + one[1:] + b"\x00"
    with pytest.raises(InvalidRecordError, match="record size"):
        list(RecordBatch(_with_block(bad, 1)).records())
    with pytest.raises(InvalidRecordError):
        RecordBatch(_with_block(bad, 1)).scan_records()
    # negative header count
    rec = bytearray(b"\x00\x00\x00\x02a\x02b\x01")  # attrs, tsDelta, offDelta, key "a", value "b", headers -1
    blk = bytes([len(rec) * 2]) + bytes(rec)
    with pytest.raises(InvalidRecordError, match="headers"):
        list(RecordBatch(_with_block(blk, 1)).records())
    # a varint longer than 5 bytes
    blk = b"\xff\xff\xff\xff\xff\xff\x01" + b"\x00" * 10
    with pytest.raises(InvalidRecordError):
        list(RecordBatch(_with_block(blk, 1)).records())
    # unknown codec id
    bad_codec = bytearray(build_batch(RECS))
    bad_codec[22] |= 7
    with pytest.raises(CorruptRecordError, match="codec"):
        list(RecordBatch(bad_codec).records())


def test_header_only_parse_and_next_batch_size() -> None:
    data = build_batch(RECS, base_offset=5, producer_id=3, producer_epoch=1, base_sequence=0)
    h = parse_batch_header(data[:61])
    b = RecordBatch(data)
    assert h == b.header()
    assert (h.base_offset, h.last_offset, h.size_in_bytes, h.record_count) == (5, 8, len(data), 4)
    assert h.compression is CompressionType.NONE and h.has_producer_id
    assert parse_batch_header(b"zz" + data, 2) == h
    with pytest.raises(CorruptRecordError):
        parse_batch_header(data[:60])
    assert next_batch_size(data[:61], len(data)) == len(data)
    assert next_batch_size(data[:61], len(data) - 1) is None  # declared size past the end
    assert next_batch_size(data[:17], 17) is None  # a tail of <= 17 bytes is the end of the log
    bad = bytearray(data[:61])
    bad[8:12] = struct.pack(">i", 13)
    with pytest.raises(CorruptRecordError, match="minimum"):
        next_batch_size(bad, 1000)


def test_iter_batches_tail_rules() -> None:
    a = build_batch(RECS, base_offset=0)
    b = build_batch(RECS, base_offset=4, compression=CompressionType.GZIP)
    log = a + b
    got = list(iter_batches(log))
    assert [(x.position, x.base_offset) for x in got] == [(0, 0), (len(a), 4)]
    # incomplete last batch: iteration just stops
    assert [x.position for x in iter_batches(log[:-1])] == [0]
    # a tail of up to 17 bytes is ignored, whatever it holds
    assert len(list(iter_batches(log + b"\xff" * 17))) == 2
    # 18 bytes with a declared size that does not fit: still the end
    assert len(list(iter_batches(log + b[:18]))) == 2
    # declared size < 14: corrupt
    junk = struct.pack(">qi", 0, 13) + b"\x00" * 10
    with pytest.raises(CorruptRecordError) as ei:
        list(iter_batches(log + junk))
    assert ei.value.offset == len(log)  # where recovery would cut the log
    # 14 <= declared size < 61: not a v2 batch either
    small = bytearray(b[:61])
    small[8:12] = struct.pack(">i", 30)
    with pytest.raises(CorruptRecordError, match="minimum") as ei:
        list(iter_batches(log + bytes(small)))
    assert ei.value.offset == len(log)
    # start / end arguments
    assert [x.base_offset for x in iter_batches(log, len(a))] == [4]
    assert [x.base_offset for x in iter_batches(log, 0, len(a))] == [0]
    # a legacy entry is refused here (read it with iter_legacy_messages)
    with pytest.raises(CorruptRecordError, match="legacy"):
        list(iter_batches(_legacy(0, 0, 0, None, b"v", None)))
    assert list(iter_batches(b"")) == []


def test_control_records_and_markers() -> None:
    assert control_record_key(ControlRecordType.COMMIT) == b"\x00\x00\x00\x01"
    assert parse_control_record_key(b"\x00\x00\x00\x06") == (0, ControlRecordType.KRAFT_VOTERS)
    assert parse_control_record_key(b"\x00\x01\x00\x63") == (1, 99)
    with pytest.raises(InvalidRecordError):
        parse_control_record_key(b"\x00\x00\x00")
    with pytest.raises(InvalidRecordError):
        parse_control_record_key(None)
    assert end_txn_marker_value(7) == b"\x00\x00\x00\x00\x00\x07"
    data = build_end_txn_marker_batch(
        ControlRecordType.ABORT, producer_id=9, producer_epoch=2, coordinator_epoch=7, timestamp=123, base_offset=50
    )
    b = RecordBatch(data)
    b.ensure_valid()
    assert b.is_control and b.is_transactional and b.base_sequence == -1 and b.record_count == 1
    assert (b.producer_id, b.producer_epoch, b.base_timestamp, b.max_timestamp) == (9, 2, 123, 123)
    (r,) = list(b.records())
    m = parse_end_txn_marker(r)
    assert (m.control_type, m.coordinator_epoch, m.version) == (ControlRecordType.ABORT, 7, 0)
    with pytest.raises(ValueError):
        build_end_txn_marker_batch(ControlRecordType.LEADER_CHANGE, producer_id=1, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=0)
    lc = RecordBatch(build_control_batch(ControlRecordType.LEADER_CHANGE, b"\x00\x00", timestamp=5))
    (r,) = list(lc.records())
    assert lc.is_control and not lc.is_transactional
    assert parse_control_record_key(r.key) == (0, ControlRecordType.LEADER_CHANGE)
    with pytest.raises(InvalidRecordError):
        parse_end_txn_marker(r)
    short = build_control_batch(ControlRecordType.COMMIT, b"\x00\x00\x00", timestamp=5, is_transactional=True)
    with pytest.raises(InvalidRecordError):
        parse_end_txn_marker(next(iter(RecordBatch(short).records())))


def test_validate_client_batch() -> None:
    RecordBatch(build_batch(RECS)).validate_client_batch()
    RecordBatch(build_batch(RECS, producer_id=1, producer_epoch=0, base_sequence=0,
                            is_transactional=True)).validate_client_batch()
    cases = [
        build_batch(RECS, offset_deltas=[0, 1, 2, 4]),  # lastOffsetDelta + 1 != count
        build_control_batch(ControlRecordType.COMMIT, end_txn_marker_value(0), timestamp=1),
        build_batch(RECS, producer_id=5, producer_epoch=0),  # producer id without sequence
        build_batch(RECS, is_transactional=True),  # transactional without producer id
    ]
    for data in cases:
        with pytest.raises(InvalidRecordError):
            RecordBatch(data).validate_client_batch()
    bad = bytearray(build_batch(RECS))
    bad[70] ^= 0x10
    with pytest.raises(CorruptRecordError) as ei:
        RecordBatch(bad).validate_client_batch()
    assert not isinstance(ei.value, InvalidRecordError)


# ---------------------------------------------------------------------------------------------
# legacy message sets (encoded here from the v0/v1 layout)


def _legacy(offset: int, magic: int, attrs: int, ts: int | None, value: bytes | None, key: bytes | None) -> bytes:
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += struct.pack(">q", ts)
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    crc = zlib.crc32(body) & 0xFFFFFFFF
    msg = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def test_legacy_uncompressed_v0_v1() -> None:
    data = _legacy(0, 0, 0, None, b"a", None) + _legacy(1, 1, 0, 1000, b"bb", b"k") + _legacy(2, 1, 8, 2000, None, b"k")
    msgs = list(iter_legacy_messages(data))
    assert [(m.offset, m.magic, m.timestamp, m.key, m.value, m.is_valid) for m in msgs] == [
        (0, 0, -1, None, b"a", True),
        (1, 1, 1000, b"k", b"bb", True),
        (2, 1, 2000, b"k", None, True),
    ]
    assert [m.timestamp_type for m in msgs] == [
        TimestampType.NO_TIMESTAMP_TYPE,
        TimestampType.CREATE_TIME,
        TimestampType.LOG_APPEND_TIME,
    ]
    assert msgs[1].position == len(_legacy(0, 0, 0, None, b"a", None))
    bad = bytearray(data)
    bad[-1] ^= 0xFF
    assert [m.is_valid for m in iter_legacy_messages(bad)] == [True, True, False]
    assert len(list(iter_legacy_messages(data + data[:20]))) == 3  # incomplete tail


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4])
def test_legacy_compressed_wrappers(codec: CompressionType) -> None:
    from odradek.wire.compression import compress

    # v1: inner offsets relative (0..n-1), wrapper offset = absolute offset of the last inner one
    inner = b"".join(_legacy(i, 1, 0, 500 + i, b"m%d" % i, None) for i in range(3))
    wrapper = _legacy(12, 1, int(codec) | 8, 9999, compress(codec, inner), None)
    msgs = list(iter_legacy_messages(wrapper))
    assert [(m.offset, m.value, m.timestamp) for m in msgs] == [(10, b"m0", 9999), (11, b"m1", 9999), (12, b"m2", 9999)]
    assert all(m.timestamp_type is TimestampType.LOG_APPEND_TIME for m in msgs)
    shallow = list(iter_legacy_messages(wrapper, deep=False))
    assert len(shallow) == 1 and shallow[0].compression is codec and shallow[0].offset == 12
    # v0: inner offsets absolute
    inner0 = b"".join(_legacy(20 + i, 0, 0, None, b"z", None) for i in range(2))
    w0 = _legacy(21, 0, int(codec), None, compress(codec, inner0), None)
    assert [m.offset for m in iter_legacy_messages(w0)] == [20, 21]


def test_legacy_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        list(iter_legacy_messages(_legacy(0, 1, 1, 0, b"not gzip at all", None)))
    m = bytearray(_legacy(0, 1, 0, 0, b"abc", None))
    m[16] = 5  # magic
    with pytest.raises(CorruptRecordError):
        list(iter_legacy_messages(m))
    m = bytearray(_legacy(0, 1, 0, 0, b"abc", None))
    m[-4:-3] = b"\x7f"  # value length no longer matches (still inside the message)
    with pytest.raises(CorruptRecordError):
        list(iter_legacy_messages(bytes(m)))


def test_mixed_format_segment() -> None:
    """An old segment: v1 entries (one a gzip wrapper) followed by v2 batches after an upgrade."""
    from odradek.wire.compression import compress

    v1 = _legacy(0, 1, 0, 10, b"a", None)
    inner = b"".join(_legacy(i, 1, 0, 20 + i, b"w%d" % i, None) for i in range(2))
    wrapper = _legacy(2, 1, int(CompressionType.GZIP), 30, compress(CompressionType.GZIP, inner), None)
    v2 = build_batch(RECS, base_offset=3)
    log = v1 + wrapper + v2
    entries = list(iter_log_entries(log + v2[:30]))
    assert [type(e).__name__ for e in entries] == ["LegacyMessage", "LegacyMessage", "RecordBatch"]
    assert [e.position for e in entries] == [0, len(v1), len(v1) + len(wrapper)]
    assert [m.offset for m in legacy_inner_messages(entries[1])] == [1, 2]  # type: ignore[arg-type]
    assert legacy_inner_messages(entries[0]) == [entries[0]]  # type: ignore[arg-type]
    assert entries[2].base_offset == 3  # type: ignore[union-attr]
    with pytest.raises(CorruptRecordError):
        list(iter_log_entries(log + struct.pack(">qi", 0, 3) + b"\x00" * 20))
    # trailing garbage inside a compressed wrapper is not silently dropped
    for junk, msg in ((b"\x00" * 20, "minimum"), (b"\x01" * 5, "truncated")):
        bad = _legacy(2, 1, int(CompressionType.GZIP), 30, compress(CompressionType.GZIP, inner + junk), None)
        with pytest.raises(CorruptRecordError, match=msg):
            list(iter_legacy_messages(bad))
