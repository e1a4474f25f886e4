"""Damaged, truncated and unusual files for the dump-log tests, built deterministically.

``make_cases(root)`` writes them under ``root``; ``CASES`` lists the command lines run on them.
``record_kafka_expectations.py`` ran Kafka 3.9.1's own DumpLogSegments on exactly these files and
stored what it printed in ``data/kafka39_corrupt_expectations.json`` (paths written as ``<dir>``).
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from pathlib import Path

from crc32c import crc32c

from odradek.wire.records import (
    CompressionType,
    ControlRecordType,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_control_batch,
    build_end_txn_marker_batch,
)


def _recs(n: int, base_ts: int = 1700000000000, key: bool = True, hdr: bool = False, val: bytes = b"v") -> list:
    return [
        SimpleRecord(
            value=val + str(i).encode(),
            key=(b"k%d" % i) if key else None,
            headers=[("h1", b"x"), ("h2", None)] if hdr else (),
            timestamp=base_ts + i,
        )
        for i in range(n)
    ]


def _legacy(offset: int, magic: int, key: bytes | None, value: bytes | None, ts: int | None = None, attrs: int = 0) -> bytes:
    """A magic v0/v1 message (LegacyRecord layout, CRC-32 over magic..end)."""
    body = struct.pack(">bb", magic, attrs) + (struct.pack(">q", ts) if magic == 1 else b"")
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def _snap(entries: list[tuple], version: int = 1, crc: int | None = None) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", version, crc if crc is not None else crc32c(body)) + body


def make_cases(root: Path) -> None:
    """Write every case file under ``root`` (which must exist and be empty)."""
    recs = _recs
    legacy = _legacy
    snap = _snap

    def seg(name: str, batches: list[bytes]) -> tuple[Path, bytes]:
        d = root / name
        d.mkdir()
        data = b"".join(batches)
        (d / "00000000000000000000.log").write_bytes(data)
        return d, data

    b1 = build_batch(recs(3), base_offset=0)
    b2 = build_batch(recs(2, hdr=True), base_offset=3, compression=CompressionType.GZIP)
    b3 = build_batch(recs(2), base_offset=5, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=1800000000000)
    d, _ = seg("good", [b1, b2, b3])
    # index with one good and one mismatching entry, then zero padding
    (d / "00000000000000000000.index").write_bytes(struct.pack(">ii", 4, len(b1)) + struct.pack(">ii", 6, len(b1)) + b"\0" * 16)
    (d / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", 1700000000002, 2) + struct.pack(">qi", 1700000000000, 4) + struct.pack(">qi", 1, 3) + struct.pack(">qi", 5, 99))
    seg("trailing", [b1, b2, b"\x01" * 10])
    seg("truncated", [b1, b2[:-5]])
    seg("smallsize", [b1, struct.pack(">qi", 3, 5) + b"\0" * 20])
    bad = bytearray(b2)
    bad[-1] ^= 0xFF
    seg("badcrc", [b1, bytes(bad)])
    # corrupt record structure in an uncompressed batch, CRC made valid again
    rb = bytearray(build_batch(recs(3), base_offset=3))
    rb[61] = 0x7F  # record length varint -64
    rb[17:21] = struct.pack(">I", crc32c(bytes(rb[21:])))
    seg("badrecord", [b1, bytes(rb)])
    cb = bytearray(b1)
    cb[22] = (cb[22] & ~7) | 5  # codec id 5 does not exist
    cb[17:21] = struct.pack(">I", crc32c(bytes(cb[21:])))
    seg("badcodec", [bytes(cb)])
    seg("control", [b1, build_end_txn_marker_batch(ControlRecordType.COMMIT, producer_id=5, producer_epoch=1, coordinator_epoch=3, timestamp=1700000000099, base_offset=3),
                    build_control_batch(2, b"\0\0\0\0\0\1\0\0\0\0", timestamp=1, base_offset=4), build_control_batch(9, b"", timestamp=2, base_offset=5)])
    bin_ = [SimpleRecord(value=bytes([0xff, 0xfe, 0x41, 0xc3, 0x28, 0xe2, 0x82, 0x41, 0xf0, 0x9f, 0x98, 0x80, 0xed, 0xa0, 0x80, 0xc0, 0xaf, 0x00, 0x0a, 0xf4, 0x90, 0x80, 0x80, 0xe2, 0x82]), key=b"\xe2\x82", timestamp=5)]
    seg("binary", [build_batch(bin_, base_offset=0), build_batch([SimpleRecord(value=None, key=None, timestamp=6)], base_offset=1)])
    seg("gap", [b1, build_batch(recs(2), base_offset=7)])
    # several files with gaps and index mismatches: the order of the summary blocks follows the
    # iteration order of Kafka's Scala hash maps keyed by absolute path
    for n in range(6):
        gd, _ = seg(f"gaps-{n}", [b1, build_batch(recs(2), base_offset=5 + n), build_batch(recs(1), base_offset=9 + 2 * n)])
        (gd / "00000000000000000000.index").write_bytes(struct.pack(">ii", 3 + n, len(b1)))
    seg("empty", [])
    # legacy v0/v1
    inner = legacy(0, 1, b"a", b"x", 10) + legacy(1, 1, None, b"y", 11)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as g:
        g.write(inner)
    seg("legacy", [legacy(0, 0, b"k", b"v0"), legacy(1, 1, None, b"v1", 1234), legacy(3, 1, None, buf.getvalue(), 99, attrs=1), b1.replace(b1[:8], struct.pack(">q", 4), 1)])
    # more legacy: a v0 gzip wrapper (absolute inner offsets), a v1 LogAppendTime wrapper, a bad CRC
    inner0 = legacy(10, 0, b"a", b"x") + legacy(11, 0, None, b"y")
    buf0 = io.BytesIO()
    with gzip.GzipFile(fileobj=buf0, mode="wb", mtime=0) as g:
        g.write(inner0)
    inner1 = legacy(0, 1, None, b"p", 5) + legacy(1, 1, b"q", None, 6)
    buf1 = io.BytesIO()
    with gzip.GzipFile(fileobj=buf1, mode="wb", mtime=0) as g:
        g.write(inner1)
    broken = bytearray(legacy(14, 1, b"k", b"crc", 7))
    broken[-1] ^= 1
    seg("legacy2", [legacy(9, 0, None, b"first"), legacy(11, 0, None, buf0.getvalue(), attrs=1),
                    legacy(13, 1, None, buf1.getvalue(), 77, attrs=1 | 8), bytes(broken)])
    # snapshots
    d = root / "snap"
    d.mkdir()
    (d / "00000000000000000001.snapshot").write_bytes(snap([(7, 1, 5, 10, 2, 123, -1, -1), (8, 0, -1, -1, 0, 55, 3, 4), (9, 2, 1, 20, 5, 66, 1, 15)]))
    (d / "00000000000000000002.snapshot").write_bytes(snap([(7, 1, 5, 10, 2, 123, -1, -1)], version=2))
    (d / "00000000000000000003.snapshot").write_bytes(snap([(7, 1, 5, 10, 2, 123, -1, -1)], crc=12345))
    (d / "00000000000000000004.snapshot").write_bytes(snap([(7, 1, 5, 10, 2, 123, -1, -1)])[:30])
    (d / "00000000000000000005.snapshot").write_bytes(b"\0\1\0")
    (d / "00000000000000000006.snapshot").write_bytes(snap([])[:6] + struct.pack(">i", 3))
    (d / "00000000000000000007.txnindex").write_bytes(struct.pack(">hqqqq", 0, 5, 1, 2, 3) + struct.pack(">hqqqq", 0, 6, 4, 9, 10) + b"\0\0\0")
    (d / "00000000000000000008.txnindex").write_bytes(struct.pack(">hqqqq", 1, 5, 1, 2, 3))
    (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    (d / "foo.deleted").write_text("")
    # index cases
    d2 = root / "idx"
    d2.mkdir()
    (d2 / "00000000000000000000.log").write_bytes(b1 + b2)
    (d2 / "00000000000000000000.index").write_bytes(struct.pack(">ii", 4, 9999))
    d3 = root / "idx2"
    d3.mkdir()
    (d3 / "00000000000000000000.log").write_bytes(b1 + b2)
    (d3 / "00000000000000000000.index").write_bytes(struct.pack(">ii", 4, len(b1)) + b"\0\0\0")
    (d3 / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", 5, 4) + b"\0\0")
    d4 = root / "idx3"
    d4.mkdir()
    (d4 / "00000000000000000010.log").write_bytes(b1)
    (d4 / "00000000000000000010.index").write_bytes(struct.pack(">ii", -5, 0))
    (d4 / "00000000000000000010.timeindex").write_bytes(struct.pack(">qi", 5, -3))
    d5 = root / "noidx"
    d5.mkdir()
    (d5 / "00000000000000000000.log").write_bytes(b1)
    (d5 / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", 1700000000002, 2))


#: Cases whose output depends on the absolute path (the order of summary blocks follows Java
#: string hashes of the paths): they run under this fixed directory instead of a temporary one.
FIXED_ROOT_CASES = {"summary-order"}
FIXED_ROOT = Path("/tmp/odradek-dump-log-fixed-root")


def _f(*names: str) -> str:
    return ",".join(f"<dir>/{n}" for n in names)


_G = "good/00000000000000000000"

#: (case id, --files value with ``<dir>`` for the case root, extra flags)
CASES: list[tuple[str, str, list[str]]] = [
    ("good-shallow", _f(f"{_G}.log"), []),
    ("good-deep", _f(f"{_G}.log"), ["--deep-iteration"]),
    ("good-print", _f(f"{_G}.log"), ["--print-data-log"]),
    ("good-print-skip-metadata", _f(f"{_G}.log"), ["--print-data-log", "--skip-record-metadata"]),
    ("good-deep-skip-metadata", _f(f"{_G}.log"), ["--deep-iteration", "--skip-record-metadata"]),
    ("good-max-bytes-100", _f(f"{_G}.log"), ["--max-bytes", "100"]),
    ("good-max-bytes-0", _f(f"{_G}.log"), ["--max-bytes", "0"]),
    ("index-mismatch", _f(f"{_G}.index"), []),
    ("index-mismatch-verify", _f(f"{_G}.index"), ["--verify-index-only"]),
    ("index-sanity", _f(f"{_G}.index"), ["--index-sanity-check"]),
    ("timeindex-errors", _f(f"{_G}.timeindex"), []),
    ("timeindex-errors-verify", _f(f"{_G}.timeindex"), ["--verify-index-only"]),
    ("all-summaries", _f(f"{_G}.timeindex", f"{_G}.index", "gap/00000000000000000000.log"), ["--deep-iteration"]),
    ("trailing-bytes", _f("trailing/00000000000000000000.log"), []),
    ("truncated-batch", _f("truncated/00000000000000000000.log"), ["--deep-iteration"]),
    ("size-below-14", _f("smallsize/00000000000000000000.log"), []),
    ("bad-crc-gzip", _f("badcrc/00000000000000000000.log"), ["--print-data-log"]),
    ("bad-record", _f("badrecord/00000000000000000000.log"), ["--deep-iteration"]),
    ("bad-codec", _f("badcodec/00000000000000000000.log"), []),
    ("control-records", _f("control/00000000000000000000.log"), ["--deep-iteration"]),
    ("control-skip-metadata", _f("control/00000000000000000000.log"), ["--print-data-log", "--skip-record-metadata"]),
    ("binary-utf8", _f("binary/00000000000000000000.log"), ["--print-data-log"]),
    ("gap-and-binary", _f("gap/00000000000000000000.log", "binary/00000000000000000000.log"), ["--print-data-log"]),
    ("empty-log", _f("empty/00000000000000000000.log"), ["--deep-iteration"]),
    (
        "summary-order",
        _f(*[f"gaps-{n}/00000000000000000000.{s}" for n in range(6) for s in ("log", "index")]),
        ["--deep-iteration"],
    ),
    ("legacy-shallow", _f("legacy/00000000000000000000.log"), []),
    ("legacy-print", _f("legacy/00000000000000000000.log"), ["--print-data-log"]),
    ("legacy-wrappers-shallow", _f("legacy2/00000000000000000000.log"), []),
    ("legacy-wrappers-deep", _f("legacy2/00000000000000000000.log"), ["--print-data-log"]),
    ("snapshots", _f(*[f"snap/{i:020d}.snapshot" for i in range(1, 7)]), []),
    ("txnindex-partial-tail", _f("snap/00000000000000000007.txnindex"), []),
    ("txnindex-version-1", _f("snap/00000000000000000008.txnindex"), []),
    ("unknown-and-no-dot", _f("snap/foo.deleted", "snap/leader-epoch-checkpoint"), []),
    ("index-position-past-end", _f("idx/00000000000000000000.index"), []),
    ("index-bad-length-sanity", _f("idx2/00000000000000000000.index"), ["--index-sanity-check"]),
    ("timeindex-bad-length-sanity", _f("idx2/00000000000000000000.timeindex"), ["--index-sanity-check"]),
    ("index-bad-length", _f("idx2/00000000000000000000.index"), []),
    ("index-below-base-sanity", _f("idx3/00000000000000000010.index"), ["--index-sanity-check"]),
    ("timeindex-below-base-sanity", _f("idx3/00000000000000000010.timeindex"), ["--index-sanity-check"]),
    ("timeindex-below-base", _f("idx3/00000000000000000010.timeindex"), []),
    ("timeindex-without-index", _f("noidx/00000000000000000000.timeindex"), []),
    ("index-missing", _f("noidx/00000000000000000000.index"), []),
    ("log-missing", _f("nodir/00000000000000000000.log"), []),
    (
        "deprecated-decoder-name",
        _f(f"{_G}.log"),
        ["--key-decoder-class", "kafka.serializer.StringDecoder", "--value-decoder-class=org.apache.kafka.tools.api.StringDecoder"],
    ),
    ("integer-decoder-too-short", _f(f"{_G}.log"), ["--value-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder"]),
    (
        "deprecated-long-decoder",
        _f(f"{_G}.log", "control/00000000000000000000.log"),
        ["--key-decoder-class", "kafka.serializer.LongDecoder", "--value-decoder-class", "kafka.serializer.StringDecoder"],
    ),
    ("unknown-decoder-class", _f(f"{_G}.log"), ["--value-decoder-class", "foo.Bar"]),
    ("offsets-decoder-on-data", _f(f"{_G}.log"), ["--offsets-decoder"]),
    ("txn-decoder-on-data", _f(f"{_G}.log"), ["--transaction-log-decoder"]),
    ("metadata-decoder-on-data", _f(f"{_G}.log"), ["--cluster-metadata-decoder"]),
    ("files-twice", _f(f"{_G}.log"), ["--files", "x"]),
    ("unknown-option", _f(f"{_G}.log"), ["--bogus"]),
    ("bad-max-bytes", _f(f"{_G}.log"), ["--max-bytes", "abc"]),
]
