"""Property tests: arbitrary records round-trip through every codec; truncated or bit-flipped
batches (with and without a repaired CRC) raise CorruptRecordError and nothing else."""

from __future__ import annotations

import struct

from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.wire.records import (
    CompressionType,
    CorruptRecordError,
    RecordBatch,
    SimpleRecord,
    build_batch,
    iter_batches,
)

LIMIT = 1 << 20

opt_bytes = st.none() | st.binary(max_size=64)
records_st = st.lists(
    st.builds(
        SimpleRecord,
        value=opt_bytes,
        key=opt_bytes,
        headers=st.lists(st.tuples(st.text(max_size=8), opt_bytes), max_size=3),
        timestamp=st.integers(min_value=-1, max_value=2**42),
    ),
    min_size=1,
    max_size=12,
)
codec_st = st.sampled_from(list(CompressionType))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=records_st,
    codec=codec_st,
    base_offset=st.integers(min_value=0, max_value=2**62),
    seq=st.integers(min_value=-1, max_value=2**31 - 1),
)
def test_round_trip(recs: list[SimpleRecord], codec: CompressionType, base_offset: int, seq: int) -> None:
    data = build_batch(recs, base_offset=base_offset, compression=codec, producer_id=1 if seq >= 0 else -1,
                       base_sequence=seq)
    (b,) = list(iter_batches(data))
    b.validate_client_batch()
    got = list(b.records())
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (r.key, r.value, list(r.headers), r.timestamp) for r in recs
    ]
    assert [r.offset for r in got] == list(range(base_offset, base_offset + len(recs)))
    s = b.scan_records()
    assert s.max_timestamp == max(r.timestamp for r in recs) == b.max_timestamp
    assert s.offsets_consecutive


def _read_everything(data: bytes) -> tuple[int, int] | None:
    """What a broker/reader might do with the bytes; returns (records, scanned) when it all parsed."""
    out = None
    for b in iter_batches(data):
        _ = (b.header(), b.last_sequence, b.timestamp_type, b.next_offset, b.delete_horizon_ms, b.is_valid())
        try:
            b.ensure_valid()
        except CorruptRecordError:
            pass  # keep going: exercise the decoders on unchecked bytes too
        recs = None
        try:
            recs = list(RecordBatch(b.buffer).records(LIMIT))
        except CorruptRecordError:
            pass
        scanned = None
        try:
            scanned = RecordBatch(b.buffer).scan_records(LIMIT).record_count
        except CorruptRecordError:
            pass
        # the cheap validator and the full decoder agree on what is well-formed
        assert (recs is None) == (scanned is None)
        if recs is not None:
            assert all(r.size_in_bytes >= 7 for r in recs)
            out = (len(recs), scanned)
    return out


def _fix_crc(buf: bytearray) -> None:
    if len(buf) >= 61:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=records_st,
    codec=codec_st,
    cut=st.integers(min_value=0, max_value=400),
    flips=st.lists(st.integers(min_value=0, max_value=8 * 4000), max_size=3),
    fix_crc=st.booleans(),
    fix_length=st.booleans(),
)
def test_damaged_batches_raise_only_corrupt_record_error(
    recs: list[SimpleRecord], codec: CompressionType, cut: int, flips: list[int], fix_crc: bool, fix_length: bool
) -> None:
    buf = bytearray(build_batch(recs, compression=codec))
    if cut:
        del buf[max(0, len(buf) - cut) :]
    for f in flips:
        if buf:
            buf[(f // 8) % len(buf)] ^= 1 << (f % 8)
    if fix_length and len(buf) >= 12:
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    if fix_crc:
        _fix_crc(buf)
    try:
        _read_everything(bytes(buf))
    except CorruptRecordError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=records_st,
    codec=codec_st,
    pos=st.integers(min_value=61, max_value=4000),
    junk=st.binary(min_size=1, max_size=16),
)
def test_garbage_in_records_block_with_valid_crc(
    recs: list[SimpleRecord], codec: CompressionType, pos: int, junk: bytes
) -> None:
    """Overwrite part of the records block (or inflated block) and repair CRC: reaches the decoders."""
    from odradek.wire.compression import compress

    good = RecordBatch(build_batch(recs, compression=codec))
    block = bytearray(good.inflated_block())
    p = (pos - 61) % (len(block) + 1)
    block[p : p + len(junk)] = junk
    payload = compress(codec, bytes(block))
    buf = bytearray(bytes(good.buffer[:61]) + payload)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    _fix_crc(buf)
    try:
        _read_everything(bytes(buf))
    except CorruptRecordError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    try:
        _read_everything(data)
    except CorruptRecordError:
        pass


def _legacy(offset: int, magic: int, attrs: int, ts: int, value: bytes | None, key: bytes | None) -> bytes:
    import zlib

    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += struct.pack(">q", ts)
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    msg = struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + body
    return struct.pack(">qi", offset, len(msg)) + msg


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(opt_bytes, min_size=1, max_size=5),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from([c for c in CompressionType if c is not CompressionType.ZSTD]),
    cut=st.integers(min_value=0, max_value=200),
    flips=st.lists(st.integers(min_value=0, max_value=8 * 2000), max_size=3),
)
def test_damaged_legacy_sets_raise_only_corrupt_record_error(
    values: list[bytes | None], magic: int, codec: CompressionType, cut: int, flips: list[int]
) -> None:
    from odradek.wire.compression import compress
    from odradek.wire.records import iter_legacy_messages

    inner = b"".join(_legacy(i, magic, 0, 100 + i, v, b"k") for i, v in enumerate(values))
    data = inner if codec is CompressionType.NONE else _legacy(len(values) - 1, magic, int(codec), 5, compress(codec, inner), None)
    # undamaged: every value comes back
    assert [m.value for m in iter_legacy_messages(data)] == values
    buf = bytearray(data)
    if cut:
        del buf[max(0, len(buf) - cut) :]
    for f in flips:
        if buf:
            buf[(f // 8) % len(buf)] ^= 1 << (f % 8)
    try:
        list(iter_legacy_messages(bytes(buf), max_inflated_size=LIMIT))
    except CorruptRecordError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.binary(max_size=300),
    magic=st.sampled_from([0, 1, 2]),
    codec=st.integers(min_value=0, max_value=7),
)
def test_mixed_iteration_of_garbage(data: bytes, magic: int, codec: int) -> None:
    """Random entries framed with a plausible size/magic/attributes still raise only CorruptRecordError."""
    from odradek.wire.records import LegacyMessage, iter_log_entries, legacy_inner_messages

    body = bytearray(data.ljust(10, b"\0"))
    body[4] = magic  # offset 16 of the entry = body[4] after offset and size
    body[5] = codec
    framed = struct.pack(">qi", 0, len(body)) + bytes(body)
    try:
        for e in iter_log_entries(framed):
            if isinstance(e, LegacyMessage):
                legacy_inner_messages(e, LIMIT)
            else:
                list(e.records(LIMIT))
    except CorruptRecordError:
        pass
