"""wire.compression: codec round trips, the exact framings Kafka clients use, bounded inflation."""

from __future__ import annotations

import gzip
import os
import struct
import subprocess
import sys
import textwrap
import zlib

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.wire.compression import (
    CompressionType,
    CorruptRecordError,
    compress,
    decompress,
    xxh32_short,
)

SAMPLES = [b"", b"a", b"hello kafka " * 1000, os.urandom(70_000), bytes(200_000)]


@pytest.mark.parametrize("codec", list(CompressionType))
@pytest.mark.parametrize("size_index", range(len(SAMPLES)))
def test_round_trip(codec: CompressionType, size_index: int) -> None:
    data = SAMPLES[size_index]
    z = compress(codec, data)
    assert decompress(codec, z, len(data)) == data  # exactly at the bound is fine
    if data:
        with pytest.raises(CorruptRecordError):
            decompress(codec, z, len(data) - 1)


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_levels(codec: CompressionType) -> None:
    data = SAMPLES[2]
    assert decompress(codec, compress(codec, data, level=1)) == data
    assert decompress(codec, compress(codec, data, level=9)) == data


def test_gzip_interoperates_with_stdlib() -> None:
    data = SAMPLES[2]
    z = compress(CompressionType.GZIP, data)
    assert z[:2] == b"\x1f\x8b"
    assert gzip.decompress(z) == data
    # concatenated members, as GZIPInputStream reads them
    two = gzip.compress(b"abc") + gzip.compress(b"def")
    assert decompress(CompressionType.GZIP, two) == b"abcdef"
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.GZIP, z[:-10])  # truncated
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.GZIP, zlib.compress(data))  # zlib, not gzip


def test_snappy_xerial_framing() -> None:
    data = SAMPLES[2] + SAMPLES[3]  # > 32 KiB: several chunks
    z = compress(CompressionType.SNAPPY, data)
    assert z[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # walk the chunks by hand: int32 length + raw snappy block of at most 32 KiB input each
    pos, out, chunks = 16, b"", 0
    while pos < len(z):
        (n,) = struct.unpack_from(">i", z, pos)
        block = z[pos + 4 : pos + 4 + n]
        part = bytes(cramjam.snappy.decompress_raw(block))
        assert len(part) <= 32 * 1024
        out += part
        pos += 4 + n
        chunks += 1
    assert out == data and chunks == (len(data) + 32767) // 32768
    # raw snappy without framing (what some clients send) is read too
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    # concatenated xerial streams
    assert decompress(CompressionType.SNAPPY, compress(2, b"abc") + compress(2, b"def")[16:]) == b"abcdef"
    assert decompress(CompressionType.SNAPPY, compress(2, b"abc") + compress(2, b"def")) == b"abcdef"
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, z[:-3])


def test_lz4_frame_format() -> None:
    assert (xxh32_short(b""), xxh32_short(b"a"), xxh32_short(b"abc")) == (0x02CC5D05, 0x550D7456, 0x32D153FF)
    data = SAMPLES[2] * 10 + SAMPLES[3]
    z = compress(CompressionType.LZ4, data)
    # magic, FLG (v01, independent blocks), BD (64 KiB), HC
    assert z[:7] == bytes.fromhex("04224d18604082")
    assert z[-4:] == b"\x00\x00\x00\x00"
    assert bytes(cramjam.lz4.decompress(z)) == data  # a reference frame decoder agrees
    # frames with block checksums, content checksum, content size flags (independent blocks)
    c = cramjam.lz4.Compressor(block_linked=False, content_checksum=True)
    c.compress(data)
    assert decompress(CompressionType.LZ4, bytes(c.finish())) == data
    bad = bytearray(z)
    bad[6] ^= 1
    with pytest.raises(CorruptRecordError, match="checksum"):
        decompress(CompressionType.LZ4, bad)
    assert decompress(CompressionType.LZ4, bad, legacy_lz4=True) == data
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.LZ4, z[:-4])  # no end mark


def test_zstd_interoperates() -> None:
    data = SAMPLES[2]
    z = compress(CompressionType.ZSTD, data)
    assert z[:4] == bytes.fromhex("28b52ffd")
    assert bytes(cramjam.zstd.decompress(z)) == data
    assert decompress(CompressionType.ZSTD, bytes(cramjam.zstd.compress(data)) * 2) == data * 2


def test_zstd_declared_content_size() -> None:
    from odradek.wire.compression import _zstd_content_size

    z = bytes(cramjam.zstd.compress(bytes(2 << 20)))
    assert _zstd_content_size(z) == 2 << 20
    with pytest.raises(CorruptRecordError, match="declares"):
        decompress(CompressionType.ZSTD, z, 1 << 20)
    assert decompress(CompressionType.ZSTD, z, 2 << 20) == bytes(2 << 20)
    # a frame that lies about its size (declares less) is still bounded and fails cleanly
    lying = bytearray(bytes(cramjam.zstd.compress(bytes(5000))))
    assert _zstd_content_size(lying) == 5000
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.ZSTD, bytes(lying[:5]) + bytes([0x10, 0x00]) + bytes(lying[7:]), 1 << 20)


def test_unknown_codec() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(6, b"abc")


def _bomb(codec: CompressionType, size: int) -> bytes:
    """``size`` zero bytes compressed, made without holding ``size`` bytes in memory."""
    mib = bytes(1 << 20)
    n = size >> 20
    if codec is CompressionType.GZIP:
        co = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join(co.compress(mib) for _ in range(n)) + co.flush()
    if codec is CompressionType.ZSTD:
        return compress(codec, mib) * n  # concatenated frames
    if codec is CompressionType.SNAPPY:
        chunk = compress(codec, bytes(32 * 1024))[16:]
        return compress(codec, b"")[:16] + chunk * (size // (32 * 1024))
    frame = compress(codec, mib)  # lz4: 16 blocks of 64 KiB; repeat the blocks
    blocks = frame[7:-4]
    return frame[:7] + blocks * n + b"\x00\x00\x00\x00"


@pytest.mark.parametrize("codec", [c for c in CompressionType if c is not CompressionType.NONE])
def test_bomb_is_refused(codec: CompressionType) -> None:
    bomb = _bomb(codec, 64 << 20)
    assert len(bomb) < 4 << 20
    with pytest.raises(CorruptRecordError, match="beyond|allowed"):
        decompress(codec, bomb, 1 << 20)


def test_snappy_declared_length_checked_before_allocating() -> None:
    # raw snappy block announcing 4 GiB with nothing behind it
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, b"\xff\xff\xff\xff\x0f\x00", 1 << 20)


def test_bombs_do_not_use_memory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """In a fresh process, 1 GiB bombs of every codec with a 1 MiB bound stay far below 1 GiB RSS."""
    paths = {}
    for codec in (CompressionType.GZIP, CompressionType.ZSTD, CompressionType.LZ4, CompressionType.SNAPPY):
        p = tmp_path / f"{codec.name}.bin"
        p.write_bytes(_bomb(codec, 1 << 30))
        paths[int(codec)] = str(p)
    script = textwrap.dedent(
        f"""
        import resource
        from odradek.wire.compression import decompress, CorruptRecordError
        blobs = {{c: open(p, 'rb').read() for c, p in {paths!r}.items()}}
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for c, blob in blobs.items():
            try:
                decompress(c, blob, 1 << 20)
            except CorruptRecordError:
                pass
            else:
                raise SystemExit('no error for codec %d' % c)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    grown_kib = int(out.stdout.strip())
    assert grown_kib < 128 * 1024, f"RSS grew by {grown_kib} KiB"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(list(CompressionType)), data=st.binary(max_size=2000))
def test_garbage_raises_only_corrupt_record_error(codec: CompressionType, data: bytes) -> None:
    try:
        out = decompress(codec, data, 1 << 16)
    except CorruptRecordError:
        return
    assert len(out) <= 1 << 16


@settings(max_examples=200, deadline=None)
@given(
    codec=st.sampled_from([c for c in CompressionType if c is not CompressionType.NONE]),
    data=st.binary(max_size=5000),
    cut=st.integers(min_value=0, max_value=10_000),
    flip=st.integers(min_value=0, max_value=80_000),
)
def test_damaged_streams_raise_only_corrupt_record_error(codec: CompressionType, data: bytes, cut: int, flip: int) -> None:
    z = bytearray(compress(codec, data))
    z = z[: len(z) - cut % (len(z) + 1)]
    if z:
        z[(flip // 8) % len(z)] ^= 1 << (flip % 8)
    try:
        out = decompress(codec, bytes(z), 1 << 16)
    except CorruptRecordError:
        return
    assert len(out) <= 1 << 16
