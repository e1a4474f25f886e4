"""Record batches against real Kafka-written data (shared/fixtures): parse, CRC, iterate, compare
with DumpLogSegments output, reproduce the broker's in-place patches byte for byte, rebuild."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from odradek.wire.records import (
    BATCH_OVERHEAD,
    CompressionType,
    ControlRecordType,
    RecordBatch,
    SimpleRecord,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    iter_batches,
    next_batch_size,
    parse_batch_header,
    parse_control_record_key,
    parse_end_txn_marker,
)

FIXTURES = Path("/work/shared/fixtures")
REAL = FIXTURES / "kafka-real"
CORPUS = FIXTURES / "kafka-corpus"

pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared fixtures not mounted")


def _real_logs() -> list[Path]:
    return sorted(p for p in REAL.rglob("*.log"))


def _checkpoints() -> list[Path]:
    # KRaft snapshots and bootstrap.checkpoint hold the same batch format
    return sorted(FIXTURES.rglob("*.checkpoint"))


def _corpus_logs() -> list[Path]:
    return sorted(CORPUS.glob("*/logdir-clean/*/*.log"))


def _corpus_batch_files() -> list[Path]:
    return sorted(CORPUS.glob("*/batches/*/*.bin"))


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(FIXTURES)) for p in paths]


LOGS = _real_logs() + _corpus_logs() + _checkpoints()


def _check_batch(b: RecordBatch) -> int:
    """Everything a reader relies on, for one batch; returns its record count."""
    b.ensure_valid()
    assert b.is_valid()
    assert b.magic == 2
    assert b.compute_crc() == b.crc
    h = b.header()
    assert h == parse_batch_header(bytes(b.buffer[:BATCH_OVERHEAD]))
    assert h.size_in_bytes == b.size_in_bytes == len(b.buffer)
    recs = list(b.records())
    assert len(recs) == b.record_count
    summary = b.scan_records()
    assert summary.record_count == len(recs)
    for i, r in enumerate(recs):
        assert b.base_offset <= r.offset <= b.last_offset
        if b.base_sequence >= 0:
            assert r.sequence == (b.base_sequence + r.offset_delta) % (2**31)
        else:
            assert r.sequence == -1
        if b.timestamp_type is TimestampType.LOG_APPEND_TIME:
            assert r.timestamp == b.max_timestamp
        else:
            assert r.timestamp == b.base_timestamp + r.timestamp_delta
        assert r.offset_delta == i or not summary.offsets_consecutive
    if recs:
        assert summary.max_timestamp == max(b.base_timestamp + r.timestamp_delta for r in recs)
        assert summary.min_timestamp == min(b.base_timestamp + r.timestamp_delta for r in recs)
        assert summary.has_null_key == any(r.key is None for r in recs)
        if b.timestamp_type is TimestampType.CREATE_TIME and not b.has_delete_horizon:
            assert b.max_timestamp == summary.max_timestamp
    return len(recs)


@pytest.mark.parametrize("path", LOGS, ids=_ids(LOGS))
def test_every_log_parses_and_is_valid(path: Path) -> None:
    data = path.read_bytes()
    end = 0
    for b in iter_batches(data):
        assert b.position == end
        _check_batch(b)
        end = b.position + b.size_in_bytes
    # Kafka writes no trailing bytes: the batches cover the whole file.
    assert end == len(data)


BATCH_FILES = _corpus_batch_files()


def test_corpus_has_batch_files() -> None:
    assert len(BATCH_FILES) > 200


@pytest.mark.parametrize("path", BATCH_FILES, ids=_ids(BATCH_FILES))
def test_every_sent_batch_parses(path: Path) -> None:
    data = path.read_bytes()
    batches = list(iter_batches(data))
    assert len(batches) == 1
    assert batches[0].size_in_bytes == len(data)
    _check_batch(batches[0])


def test_pread_header_scan_matches_iter_batches() -> None:
    """The log store's way: os.pread 61 bytes, parse the header, jump to the next batch."""
    path = next(p for p in _corpus_logs() if "w2-zstd" in str(p))
    data = path.read_bytes()
    expected = [(b.position, b.header()) for b in iter_batches(data)]
    got = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pos = 0
        while True:
            prefix = os.pread(fd, BATCH_OVERHEAD, pos)
            n = next_batch_size(prefix, size - pos)
            if n is None:
                break
            got.append((pos, parse_batch_header(prefix)))
            pos += n
    finally:
        os.close(fd)
    assert got == expected and len(got) == 33


def test_codecs_and_batch_kinds_present() -> None:
    codecs: set[CompressionType] = set()
    control_types: list[ControlRecordType | int] = []
    lat = 0
    for path in _corpus_logs():
        for b in iter_batches(path.read_bytes()):
            codecs.add(b.compression)
            if b.is_control and "w4-txn" in str(path):
                assert b.is_transactional
                for r in b.records():
                    control_types.append(parse_control_record_key(r.key)[1])
            if b.timestamp_type is TimestampType.LOG_APPEND_TIME:
                lat += 1
    # W2's snappy and lz4 topics hold uncompressed batches (librdkafka sent them uncompressed,
    # see the dumps), so only gzip and zstd appear among real compressed data.
    assert {CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD} <= codecs
    assert control_types.count(ControlRecordType.COMMIT) == 12
    assert control_types.count(ControlRecordType.ABORT) == 4
    assert lat == 14


# ---------------------------------------------------------------------------------------------
# DumpLogSegments cross-check

_BATCH_LINE = re.compile(r"^baseOffset: ")
_RECORD_LINE = re.compile(r"^\| offset: ")


def _fmt_batch_line(b: RecordBatch) -> str:
    h = b.header()
    dh = "OptionalLong.empty" if h.delete_horizon_ms is None else f"OptionalLong[{h.delete_horizon_ms}]"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
        f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
        f"deleteHorizonMs: {dh} position: {b.position} {h.timestamp_type.display_name}: {h.max_timestamp} "
        f"size: {h.size_in_bytes} magic: {h.magic} compresscodec: {h.compression.display_name} "
        f"crc: {h.crc} isvalid: {str(b.is_valid()).lower()}"
    )


def _fmt_record_lines(b: RecordBatch) -> list[str]:
    tt = b.timestamp_type.display_name
    out = []
    for r in b.records():
        line = (
            f"| offset: {r.offset} {tt}: {r.timestamp} keySize: {-1 if r.key is None else len(r.key)} "
            f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {r.sequence} "
            f"headerKeys: [{','.join(k for k, _ in r.headers)}]"
        )
        if b.is_control:
            _, ctype = parse_control_record_key(r.key)
            if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                m = parse_end_txn_marker(r)
                line += f" endTxnMarker: {m.control_type.name} coordinatorEpoch: {m.coordinator_epoch}"
        out.append(line)
    return out


def _dump_pairs() -> list[tuple[Path, Path]]:
    pairs = []
    for dump in sorted(CORPUS.glob("*/dump/*/*.log.deep.txt")):
        w = dump.parents[2]
        log = w / "logdir-clean" / dump.parent.name / dump.name.removesuffix(".deep.txt")
        pairs.append((dump, log))
    return pairs


DUMPS = _dump_pairs()


@pytest.mark.parametrize(("dump", "log"), DUMPS, ids=[str(d.relative_to(CORPUS)) for d, _ in DUMPS])
def test_deep_dump_lines_match(dump: Path, log: Path) -> None:
    """Batch and record lines rebuilt from our parse equal DumpLogSegments --deep-iteration output."""
    expected = [
        line for line in dump.read_text().splitlines() if _BATCH_LINE.match(line) or _RECORD_LINE.match(line)
    ]
    got = []
    for b in iter_batches(log.read_bytes()):
        got.append(_fmt_batch_line(b))
        got.extend(_fmt_record_lines(b))
    assert len(got) == len(expected)
    assert got == expected
    assert bool(expected) == (log.stat().st_size > 0)


REAL_DUMPS = sorted(REAL.glob("dump-outputs-3.9/*.log.deep.stdout*"))


@pytest.mark.parametrize("dump", REAL_DUMPS, ids=[p.name[:80] for p in REAL_DUMPS])
def test_real_deep_dump_lines_match(dump: Path) -> None:
    """Same for the two real log dirs; record lines are compared up to the header keys, since
    KRaft control records carry JSON renderings that are the dump tool's business."""
    # dump names are "<repo>__<path with / written as __>.log.deep.stdout[.gz]"
    by_name = {
        str(p.relative_to(REAL)).replace("/", "__", 1).replace("/", "__"): p for p in _real_logs()
    }
    log = by_name[dump.name.split(".log.")[0] + ".log"]
    opener = gzip.open if dump.suffix == ".gz" else open
    with opener(dump, "rt") as f:  # type: ignore[operator]
        lines = f.read().splitlines()
    expected = [ln for ln in lines if _BATCH_LINE.match(ln)]
    exp_records = [re.sub(r"(headerKeys: \[[^\]]*\]).*", r"\1", ln) for ln in lines if _RECORD_LINE.match(ln)]
    batches = list(iter_batches(log.read_bytes()))
    assert [_fmt_batch_line(b) for b in batches] == expected
    got_records = [re.sub(r"(headerKeys: \[[^\]]*\]).*", r"\1", ln) for b in batches for ln in _fmt_record_lines(b)]
    assert got_records == exp_records
    assert expected


# ---------------------------------------------------------------------------------------------
# the broker's in-place patches, byte for byte


def _sent_batches(workload: str) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    root = CORPUS / workload / "batches"
    for line in (root / "manifest.jsonl").read_text().splitlines():
        m = json.loads(line)
        out.setdefault(f"{m['topic']}-{m['partition']}", []).append((root / m["file"]).read_bytes())
    return out


def _stored_batches(workload: str, partition: str) -> list[RecordBatch]:
    out = []
    for log in sorted((CORPUS / workload / "logdir-clean" / partition).glob("*.log")):
        out.extend(iter_batches(log.read_bytes()))
    return out


@pytest.mark.parametrize("workload", ["W2", "W4", "W5", "W8"])
def test_patching_sent_batches_reproduces_stored_bytes(workload: str) -> None:
    sent = _sent_batches(workload)
    assert sent
    total = 0
    for partition, batches in sent.items():
        # Control batches are written by the broker itself (txn markers): not in the capture.
        stored = [b for b in _stored_batches(workload, partition) if not b.is_control]
        assert len(stored) == len(batches)
        for raw, st in zip(batches, stored, strict=True):
            buf = bytearray(raw)
            b = RecordBatch(buf)
            b.ensure_valid()
            assert bytes(buf) != bytes(st.buffer) or (st.base_offset == 0 and st.partition_leader_epoch == b.partition_leader_epoch)
            b.set_last_offset(st.last_offset)  # what UnifiedLog does: setLastOffset(LEO + n - 1)
            b.set_partition_leader_epoch(st.partition_leader_epoch)
            if workload == "W8":
                assert st.timestamp_type is TimestampType.LOG_APPEND_TIME
                assert b.timestamp_type is TimestampType.CREATE_TIME
                b.set_max_timestamp(st.max_timestamp, log_append_time=True)
            else:
                # CreateTime topics: the client's maxTimestamp is already right, so no rewrite.
                crc = b.crc
                b.set_max_timestamp(b.scan_records().max_timestamp, log_append_time=False)
                assert b.crc == crc
            assert bytes(buf) == bytes(st.buffer)
            b.ensure_valid()
            total += 1
    assert total == {"W2": 156, "W4": 16, "W5": 26, "W8": 14}[workload]


# ---------------------------------------------------------------------------------------------
# rebuilding real batches


def _rebuild(b: RecordBatch) -> bytes:
    h = b.header()
    recs = list(b.records())
    if b.timestamp_type is TimestampType.LOG_APPEND_TIME:
        recs = [SimpleRecord(r.value, r.key, r.headers, h.base_timestamp + r.timestamp_delta) for r in recs]  # type: ignore[misc]
    return build_batch(
        recs,
        base_offset=h.base_offset,
        partition_leader_epoch=h.partition_leader_epoch,
        timestamp_type=h.timestamp_type,
        log_append_time=h.max_timestamp,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        is_transactional=h.is_transactional,
        is_control=h.is_control,
        delete_horizon_ms=h.delete_horizon_ms,
        offset_deltas=[r.offset_delta for r in b.records()],
    )


@pytest.mark.parametrize("path", LOGS, ids=_ids(LOGS))
def test_builder_reproduces_uncompressed_batches(path: Path) -> None:
    """build_batch lays records out exactly like the Java/librdkafka/kafka-python writers did,
    including broker-written __consumer_offsets, __transaction_state, KRaft and marker batches."""
    n = 0
    for b in iter_batches(path.read_bytes()):
        if b.compression is CompressionType.NONE and b.record_count > 0:
            assert _rebuild(b) == bytes(b.buffer)
            n += 1


def test_end_txn_markers_rebuilt_exactly() -> None:
    n = 0
    for path in sorted(CORPUS.glob("W4/logdir-clean/w4-txn-*/*.log")):
        for b in iter_batches(path.read_bytes()):
            if not b.is_control:
                continue
            (r,) = list(b.records())
            m = parse_end_txn_marker(r)
            out = build_end_txn_marker_batch(
                m.control_type,
                producer_id=b.producer_id,
                producer_epoch=b.producer_epoch,
                coordinator_epoch=m.coordinator_epoch,
                timestamp=r.timestamp,
                base_offset=b.base_offset,
                partition_leader_epoch=b.partition_leader_epoch,
            )
            assert out == bytes(b.buffer)
            n += 1
    assert n == 16


@pytest.mark.parametrize("codec", list(CompressionType))
def test_real_records_recompressed_with_every_codec(codec: CompressionType) -> None:
    """Records from real compressed batches go through our compressor and back unchanged."""
    for path in sorted(CORPUS.glob("W2/logdir-clean/w2-*/*.log"))[:4]:
        batches = list(iter_batches(path.read_bytes()))[:5]
        for b in batches:
            recs = list(b.records())
            out = build_batch(recs, base_offset=b.base_offset, compression=codec)
            nb = RecordBatch(out)
            nb.ensure_valid()
            assert nb.compression is codec
            assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in nb.records()] == [
                (r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs
            ]
            # same records block after inflation: the layout does not depend on the codec
            assert nb.inflated_block() == b.inflated_block()


DATA_DUMPS = sorted(
    d for d in CORPUS.glob("*/dump/*/*.log.data.txt") if not d.parent.name.startswith("__")
)


@pytest.mark.parametrize("dump", DATA_DUMPS, ids=[str(d.relative_to(CORPUS)) for d in DATA_DUMPS])
def test_print_data_log_contents_match(dump: Path) -> None:
    """Keys and values (as UTF-8 text) match DumpLogSegments --print-data-log, record by record."""
    log = dump.parents[2] / "logdir-clean" / dump.parent.name / dump.name.removesuffix(".data.txt")
    expected = [ln for ln in dump.read_text().splitlines() if _RECORD_LINE.match(ln)]
    got = []
    for b in iter_batches(log.read_bytes()):
        for line, r in zip(_fmt_record_lines(b), b.records(), strict=True):
            if not b.is_control:
                if r.key is not None:
                    line += " key: " + r.key.decode("utf-8", "replace")
                if r.value is not None:
                    line += " payload: " + r.value.decode("utf-8", "replace")
            got.append(line)
    assert expected and got == expected
