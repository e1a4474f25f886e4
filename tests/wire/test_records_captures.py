"""Record batches inside real wire captures (Java kafka-clients 3.9.0 against Kafka 3.9.0):
Java-compressed lz4 batches decode, rebuild byte for byte, and the sent batch patched with the
broker's baseOffset/leader epoch equals what a consumer later fetched."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from odradek.wire.compression import compress
from odradek.wire.records import CompressionType, RecordBatch, build_batch, iter_batches

CAPTURES = Path("/work/shared/wire-captures")
CORPUS = Path("/work/shared/fixtures/kafka-corpus")

pytestmark = pytest.mark.skipif(not CAPTURES.is_dir(), reason="wire captures not mounted")


def _embedded_batches(scenario: str, api: str, direction: str) -> list[RecordBatch]:
    """Every CRC-valid v2 batch found inside the scenario's frames (no protocol decoding needed:
    a CRC-32C match over a whole declared batch does not happen by chance)."""
    out = []
    for path in sorted((CAPTURES / scenario).glob("conn-*.jsonl")):
        for line in path.read_text().splitlines():
            m = json.loads(line)
            if m.get("api_name") != api or m.get("direction") != direction or m.get("frame_truncated"):
                continue
            frame = base64.b64decode(m["frame_b64"])
            i = 0
            while i + 61 <= len(frame):
                if frame[i + 16] == 2:
                    (length,) = struct.unpack_from(">i", frame, i + 8)
                    end = i + 12 + length
                    if length >= 49 and end <= len(frame):
                        (crc,) = struct.unpack_from(">I", frame, i + 17)
                        if crc == crc32c(frame[i + 21 : end]):
                            out.append(RecordBatch(frame, i))
                            i = end
                            continue
                i += 1
    return out


SCENARIOS = ["S2", "S2-cold"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_lz4_batches_decode_and_rebuild_exactly(scenario: str) -> None:
    sent = _embedded_batches(scenario, "Produce", "request")
    lz4 = [b for b in sent if b.compression is CompressionType.LZ4]
    assert len(lz4) >= 3 and len(sent) >= 7
    for b in sent:
        b.ensure_valid()
        recs = list(b.records())
        assert len(recs) == b.record_count
        for r in recs:
            # the S2 producer (clients/WireScenarios.java): key-i, "value-i-" + "x" * (i % 17), headers
            i = int(r.key.decode().removeprefix("key-"))  # type: ignore[union-attr]
            assert r.value == f"value-{i}-".encode() + b"x" * (i % 17)
            assert r.headers == [("seq", str(i).encode()), ("src", b"wirecapture")]
        h = b.header()
        rebuilt = build_batch(
            recs,
            base_offset=h.base_offset,
            partition_leader_epoch=h.partition_leader_epoch,
            compression=h.compression,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            is_transactional=h.is_transactional,
        )
        # lz4 frames included: same frame header (independent 64 KiB blocks) and same block bytes
        assert rebuilt == bytes(b.buffer)


@pytest.mark.parametrize(("produce", "fetch"), [("S2", "S3"), ("S2-cold", "S3-cold")])
def test_sent_batch_patched_equals_fetched_batch(produce: str, fetch: str) -> None:
    sent = _embedded_batches(produce, "Produce", "request")
    fetched = _embedded_batches(fetch, "Fetch", "response")
    assert fetched
    by_body = {bytes(b.buffer[16:]): b for b in sent}
    matched = 0
    for f in fetched:
        s = by_body[bytes(f.buffer[16:])]  # from magic on (CRC-covered part included) unchanged
        buf = bytearray(s.buffer)
        patched = RecordBatch(buf)
        patched.set_last_offset(f.last_offset)
        patched.set_partition_leader_epoch(f.partition_leader_epoch)
        assert bytes(buf) == bytes(f.buffer)
        matched += 1
    assert matched == len(fetched) >= 7


def test_librdkafka_gzip_blocks_equal_ours() -> None:
    """Our gzip output for the W2 records blocks is byte-identical to what librdkafka sent (same
    zlib default level and gzip header): evidence that the framing is the usual one."""
    n = 0
    for log in sorted(CORPUS.glob("W2/logdir-clean/w2-gzip-0/*.log")):
        for b in iter_batches(log.read_bytes()):
            assert compress(CompressionType.GZIP, b.inflated_block()) == bytes(b.buffer[61:])
            n += 1
    assert n == 36
