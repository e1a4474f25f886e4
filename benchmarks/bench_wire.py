"""Wire-layer speed and copy benchmark; writes docs/benchmarks-wire.md.

Cases:
* a Produce request (v11) carrying 1 MiB of records: decode_request + encode_request;
* a Fetch response (v17) for 100 partitions (10 KiB of records each): encode_response with the
  records as bytes and as FileSlices, and decode_response;
* small control-plane messages for scale (Metadata response of 20 topics x 3 partitions).

Record bytes must never be copied more than once: decode returns memoryviews into the frame
(checked by identity) and encode passes big payloads through as their own pieces (checked by
identity); tracemalloc's peak during each operation shows no payload-sized allocation.

Usage: ``python benchmarks/bench_wire.py [--out docs/benchmarks-wire.md] [--quick]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from odradek.wire.messages import FetchRequest, FetchResponse, MetadataResponse, ProduceRequest
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import (
    FileSlice,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    join_pieces,
)

MiB = 1 << 20


def machine() -> str:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or str(os.cpu_count())
    return (f"`nproc` = {nproc}; CPU: {cpu}; Python {platform.python_version()} "
            f"({platform.python_implementation()}) on {platform.system()} {platform.release()}")


def calibration_ns() -> float:
    """ns per ``struct.Struct.pack`` of three ints: a yardstick for how loaded the machine was."""
    import struct

    s = struct.Struct(">iqq")
    best, _ = bench(lambda: s.pack(1, 2, 3), 5, 100000)
    return best * 1e9


def bench(fn, repeat: int, number: int) -> tuple[float, float]:
    """Best-of-``repeat`` mean CPU seconds per call (the machine is shared; min is the least noisy)."""
    # process CPU time, not wall time: the machine is shared, and time spent descheduled is not ours
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        times.append((time.process_time() - t0) / number)
    return min(times), statistics.median(times)


def peak_alloc(fn) -> int:
    fn()  # warm caches (codec compilation) first
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def produce_case():
    payload = os.urandom(MiB)
    body = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name="bench-topic", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=payload)])])
    pieces = encode_request(11, 1, body, client_id="bench")
    assert any(p is payload for p in pieces), "encode copied the records"
    frame = memoryview(bytearray(join_pieces(pieces)[4:]))
    req = decode_request(frame)
    rec = req.body.topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and rec.obj is frame.obj, "decode copied the records"
    return payload, body, frame


def fetch_case(fh, per_partition: int = 10 * 1024):
    topic_id = Uuid(os.urandom(16))
    blobs = [os.urandom(per_partition) for _ in range(100)]

    def body(use_files: bool):
        parts = []
        for i in range(100):
            rec = FileSlice(fh, i * per_partition, per_partition) if use_files else blobs[i]
            parts.append(FetchResponse.PartitionData(partition_index=i, high_watermark=1000 + i,
                                                     last_stable_offset=1000 + i, log_start_offset=0,
                                                     records=rec))
        return FetchResponse(session_id=12345, responses=[
            FetchResponse.FetchableTopicResponse(topic_id=topic_id, partitions=parts)])

    return blobs, body(False), body(True)


def fetch_request_frame() -> bytes:
    """A consumer's Fetch v17 for 100 partitions of one topic (what the broker decodes per poll)."""
    body = FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52428800, isolation_level=1,
                        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                            topic_id=Uuid(os.urandom(16)), partitions=[
                                FetchRequest.FetchPartition(partition=i, current_leader_epoch=0, fetch_offset=1000 + i,
                                                            log_start_offset=-1, partition_max_bytes=1048576)
                                for i in range(100)])], rack_id="")
    return join_pieces(encode_request(17, 9, body, client_id="consumer-1"))[4:]


def metadata_case():
    return MetadataResponse(cluster_id="bench-cluster", controller_id=1, brokers=[
        MetadataResponse.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092)], topics=[
        MetadataResponse.MetadataResponseTopic(name=f"topic-{t}", topic_id=Uuid(os.urandom(16)), partitions=[
            MetadataResponse.MetadataResponsePartition(partition_index=p, leader_id=1, leader_epoch=0,
                                                       replica_nodes=[1], isr_nodes=[1])
            for p in range(3)]) for t in range(20)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs/benchmarks-wire.md"))
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args(argv)
    rep, num = (3, 20) if args.quick else (7, 100)
    rows = []

    payload, pbody, pframe = produce_case()
    t, m = bench(lambda: decode_request(pframe), rep, num)
    rows.append(("Produce v11 request, 1 MiB records: decode_request", t, m, MiB,
                 peak_alloc(lambda: decode_request(pframe))))
    t, m = bench(lambda: encode_request(11, 1, pbody, client_id="bench"), rep, num)
    rows.append(("Produce v11 request, 1 MiB records: encode_request", t, m, MiB,
                 peak_alloc(lambda: encode_request(11, 1, pbody, client_id="bench"))))

    import tempfile

    with tempfile.TemporaryFile() as fh:
        blobs, fbytes, fslices = fetch_case(fh)
        fh.write(b"".join(blobs))
        fh.flush()
        total = sum(len(b) for b in blobs)
        t, m = bench(lambda: encode_response(1, 17, 5, fbytes), rep, num)
        rows.append(("Fetch v17 response, 100 partitions x 10 KiB, records as bytes: encode_response", t, m, total,
                     peak_alloc(lambda: encode_response(1, 17, 5, fbytes))))
        pieces = encode_response(1, 17, 5, fslices)
        assert sum(isinstance(p, FileSlice) for p in pieces) == 100
        t, m = bench(lambda: encode_response(1, 17, 5, fslices), rep, num)
        rows.append(("Fetch v17 response, 100 partitions x 10 KiB, records as FileSlices: encode_response",
                     t, m, total, peak_alloc(lambda: encode_response(1, 17, 5, fslices))))
        fframe = memoryview(bytearray(join_pieces(encode_response(1, 17, 5, fbytes))[4:]))
        _, decoded = decode_response(fframe, 1, 17)
        assert all(p.records.obj is fframe.obj for p in decoded.responses[0].partitions)
        t, m = bench(lambda: decode_response(fframe, 1, 17), rep, num)
        rows.append(("Fetch v17 response, 100 partitions x 10 KiB: decode_response", t, m, total,
                     peak_alloc(lambda: decode_response(fframe, 1, 17))))

    freq = fetch_request_frame()
    t, m = bench(lambda: decode_request(freq), rep, num)
    rows.append(("Fetch v17 request, 100 partitions: decode_request", t, m, 0, peak_alloc(lambda: decode_request(freq))))

    meta = metadata_case()
    mframe = join_pieces(encode_response(3, 12, 5, meta))[4:]
    t, m = bench(lambda: encode_response(3, 12, 5, meta), rep, num)
    rows.append(("Metadata v12 response, 20 topics x 3 partitions: encode_response", t, m, 0,
                 peak_alloc(lambda: encode_response(3, 12, 5, meta))))
    t, m = bench(lambda: decode_response(mframe, 3, 12), rep, num)
    rows.append(("Metadata v12 response, 20 topics x 3 partitions: decode_response", t, m, 0,
                 peak_alloc(lambda: decode_response(mframe, 3, 12))))

    lines = [
        "# Wire-layer benchmark",
        "",
        f"Generated by `python benchmarks/bench_wire.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"Machine: {machine()}. The machine is shared with other work; times are process CPU time, best of "
        f"{rep} runs of {num} calls (median in brackets). Yardstick: one `struct.Struct('>iqq').pack` took "
        f"{calibration_ns():.0f} ns during this run (roughly 100 ns on an idle modern x86 core).",
        "",
        "| operation | CPU µs per call (median) | record bytes | effective GB/s of records | peak Python allocation |",
        "|---|---|---|---|---|",
    ]
    for label, best, med, nbytes, peak in rows:
        gbps = f"{nbytes / best / 1e9:.1f}" if nbytes else "-"
        lines.append(f"| {label} | {best * 1e6:.1f} ({med * 1e6:.1f}) | {nbytes} | {gbps} | {peak / 1024:.1f} KiB |")
    lines += [
        "",
        "Copies of record bytes (checked by the benchmark with `is`/`.obj` identity, not assumed):",
        "",
        "* decode (Produce request, Fetch response): 0 copies; every `records` field is a `memoryview`",
        "  slice of the frame buffer that `FrameSplitter` filled (its one copy from the socket).",
        "* encode with bytes/memoryview records (> 8 KiB): 0 copies in the wire layer; the payload object",
        "  itself is an item of the returned piece list (smaller payloads are copied once into the header",
        "  buffer, which is cheaper than an extra iovec).",
        "* encode with `FileSlice` records: 0 copies and no reads; each slice is its own piece for",
        "  `os.sendfile`.",
        "",
        "The peak allocation column is tracemalloc's peak during one call: it stays far below the 1 MiB /",
        "1000 KiB of records, i.e. no payload-sized buffer is ever allocated.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
