"""Crash loop: producers stream while the broker is SIGKILLed at random moments, again and again (#13).

Two producers write to the same broker at once:

* kafka-python with ``acks=all`` and retries (at-least-once): every acknowledged record must be in
  the log at the offset the broker acknowledged, and the first occurrences of a producer's
  records are in send order;
* confluent-kafka (librdkafka) with ``enable.idempotence=true``: every acknowledged record is in the
  log exactly once, in send order; its in-flight batches are retried across the restart and the
  recovered producer state must drop the duplicates.

After every restart the whole topic is read back and checked; after the last round the broker is
stopped cleanly and the data dir must have Kafka's clean-shutdown layout (trimmed indexes,
snapshot at the log end, checkpoints equal to the log end offsets).

Both durability settings run: ``log.flush.interval.messages=1`` (an fsync per append, the durable
setting) and Kafka's default (page cache only: survives a process crash, not a power loss; a
SIGKILL is a process crash, so nothing acknowledged may be lost there either).

Disk faults (``test_injected_disk_faults``, ``test_real_disk_full_on_tmpfs``): ENOSPC and EIO on the
segment write and on the index write give KAFKA_STORAGE_ERROR, leave no torn bytes, and service
resumes once the fault is gone.

``ODRADEK_LONG_TESTS=1`` raises the number of kills from 8 (CI) to 50. The counts measured by the
last run are written to ``artifacts/reliability/crash_loop_<mode>.json`` for docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class
from odradek.wire.records import SimpleRecord, build_batch

LONG = os.environ.get("ODRADEK_LONG_TESTS") == "1"
KILLS = 50 if LONG else 8
PARTITIONS = 3
# Results go to the repo's artifacts/ (for docs/reliability.md) only when asked for, so that an
# ordinary test run leaves the work tree clean.
ARTIFACTS = (
    Path(__file__).resolve().parent.parent / "artifacts" / "reliability"
    if os.environ.get("ODRADEK_RECORD_RESULTS")
    else Path(tempfile.gettempdir()) / "odradek-reliability"
)


def read_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 300.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of the topic, per partition, as (offset, value), up to the current end offsets."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_bytes=4 << 20
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    deadline = time.time() + timeout
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        assert time.time() < deadline, f"could not read the topic to its end {ends}"
        for tp, batch in consumer.poll(timeout_ms=500).items():
            out[tp.partition] += [(m.offset, m.value) for m in batch if m.offset < ends[tp]]
    consumer.close()
    return out


class Stream:
    """One producer thread sending numbered values until stopped; remembers what was acknowledged."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.acked: list[tuple[int, int, int]] = []  # (partition, offset, seq)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.sent = 0
        self.errors: list[str] = []
        self.thread: threading.Thread | None = None

    def value(self, seq: int) -> bytes:
        return f"{self.name}-{seq:08d}".encode()

    def ack(self, partition: int, offset: int, seq: int) -> None:
        with self.lock:
            self.acked.append((partition, offset, seq))

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)


def run_kafka_python(stream: Stream, bootstrap: str, topic: str) -> None:
    """acks=all, retries, one request in flight (so retries keep send order)."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", retries=1000, retry_backoff_ms=100,
        max_in_flight_requests_per_connection=1, linger_ms=1, request_timeout_ms=5000,
        reconnect_backoff_max_ms=500, enable_idempotence=False,
    )
    seq = 0
    pending = []
    while not stream.stop.is_set():
        partition = seq % PARTITIONS
        future = producer.send(topic, value=stream.value(seq), partition=partition)

        def done(meta, seq=seq) -> None:
            stream.ack(meta.partition, meta.offset, seq)

        future.add_callback(done)
        pending.append(future)
        seq += 1
        stream.sent = seq
        if len(pending) >= 50:
            # keep the queue short: wait for the oldest (errors are fine, the broker may be down)
            try:
                pending.pop(0).get(60)
            except Exception as exc:  # noqa: BLE001 - an unacknowledged record may be lost
                stream.errors.append(repr(exc))
        else:
            time.sleep(0.002)
    producer.flush(60)
    producer.close(10)


def run_confluent(stream: Stream, bootstrap: str, topic: str) -> None:
    """librdkafka's idempotent producer with its stock settings (acks=all implied)."""
    producer = ConfluentProducer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
        "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500,
    })
    seq = 0
    while not stream.stop.is_set():
        def done(err, msg, seq=seq) -> None:
            if err is None:
                stream.ack(msg.partition(), msg.offset(), seq)
            else:
                stream.errors.append(str(err))

        try:
            producer.produce(topic, value=stream.value(seq), partition=seq % PARTITIONS, on_delivery=done)
        except BufferError:
            producer.poll(0.1)
            continue
        seq += 1
        stream.sent = seq
        producer.poll(0)
        time.sleep(0.002)
    assert producer.flush(120) == 0, "librdkafka could not deliver its queue after the last restart"


def check_log(records: dict[int, list[tuple[int, bytes]]], streams: dict[str, Stream],
              acked_before: dict[str, list[tuple[int, int, int]]], exactly_once: set[str]) -> int:
    """Every record acknowledged before the read at its offset; no duplicates for idempotent streams;
    send order. (Records acknowledged while the topic was being read may lie past the read's end.)"""
    by_offset = {p: dict(recs) for p, recs in records.items()}
    for recs in records.values():
        offsets = [o for o, _ in recs]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    checked = 0
    for name, stream in streams.items():
        for partition, offset, seq in acked_before[name]:
            assert by_offset[partition].get(offset) == stream.value(seq), (
                f"{name}: acknowledged seq {seq} at {partition}/{offset} is "
                f"{by_offset[partition].get(offset)!r}"
            )
            checked += 1
        prefix = f"{name}-".encode()
        for partition, recs in records.items():
            seqs = [int(v[len(prefix):]) for _, v in recs if v.startswith(prefix)]
            first_seen: list[int] = []
            seen: set[int] = set()
            for s in seqs:
                if s not in seen:
                    seen.add(s)
                    first_seen.append(s)
            assert first_seen == sorted(first_seen), f"{name}: partition {partition} out of send order"
            if name in exactly_once:
                dups = len(seqs) - len(seen)
                assert dups == 0, f"{name}: {dups} duplicates in partition {partition}"
    return checked


def acked_snapshot(streams: dict[str, Stream]) -> dict[str, list[tuple[int, int, int]]]:
    out = {}
    for name, stream in streams.items():
        with stream.lock:
            out[name] = list(stream.acked)
    return out


def assert_clean_layout(log_dir: Path, topic: str, ends: dict[int, int]) -> None:
    """Kafka's clean-shutdown shape of the data dir after the final SIGTERM."""
    assert re.fullmatch(rb'\{"version":0,"brokerEpoch":-?\d+\}', (log_dir / ".kafka_cleanshutdown").read_bytes())
    assert not (log_dir / ".lock").exists()
    lines = (log_dir / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    points = {(t, int(p)): int(o) for t, p, o in (line.split(" ") for line in lines[2:])}
    for partition, leo in ends.items():
        assert points[(topic, partition)] == leo
        pdir = log_dir / f"{topic}-{partition}"
        epochs = (pdir / "leader-epoch-checkpoint").read_text().splitlines()
        assert epochs[0] == "0" and int(epochs[1]) == len(epochs) - 2
        pairs = [tuple(map(int, e.split(" "))) for e in epochs[2:]]
        assert pairs == sorted(pairs) and len({e for e, _ in pairs}) == len(pairs)
        for index in pdir.glob("*.index"):
            assert index.stat().st_size % 8 == 0 and index.stat().st_size < 10485760, index
        for tindex in pdir.glob("*.timeindex"):
            assert tindex.stat().st_size % 12 == 0 and tindex.stat().st_size < 10485756, tindex
        assert (pdir / f"{leo:020d}.snapshot").exists(), sorted(p.name for p in pdir.iterdir())
        assert not list(pdir.glob("*.cleaned")) and not list(pdir.glob("*.swap"))


def assert_unclean_leftovers_ok(log_dir: Path) -> None:
    """After a SIGKILL: no clean-shutdown marker; the lock file is there (the loader copes with it)."""
    assert not (log_dir / ".kafka_cleanshutdown").exists()


@pytest.mark.parametrize("durability", ["fsync-per-append", "page-cache"])
def test_crash_loop(odradek_broker_factory, durability: str) -> None:
    overrides: dict[str, object] = {"num.partitions": PARTITIONS, "log.segment.bytes": 256 * 1024}
    if durability == "fsync-per-append":
        overrides["log.flush.interval.messages"] = 1
    broker = odradek_broker_factory(overrides=overrides)
    topic = "crash-loop"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    streams = {"kp": Stream("kp"), "ck": Stream("ck")}
    runners = {"kp": run_kafka_python, "ck": run_confluent}
    for name, stream in streams.items():
        stream.thread = threading.Thread(target=runners[name], args=(stream, broker.bootstrap, topic), daemon=True)
        stream.thread.start()
    rng = random.Random(int(os.environ.get("ODRADEK_CRASH_SEED", "13")))
    kills = 0
    checked = 0
    started = time.time()
    restart_times: list[float] = []
    for _ in range(KILLS):
        # let both producers get some records acknowledged in this incarnation, then kill at a random moment
        floor = {n: s.acked_count() for n, s in streams.items()}
        deadline = time.time() + 60
        while any(s.acked_count() < floor[n] + 20 for n, s in streams.items()):
            assert time.time() < deadline, f"producers stalled: {[s.errors[-3:] for s in streams.values()]}"
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 1.0))
        broker.kill()
        kills += 1
        assert_unclean_leftovers_ok(broker.log_dir)
        t0 = time.time()
        broker.start()
        restart_times.append(time.time() - t0)
        snapshot = acked_snapshot(streams)
        records = read_topic(broker.bootstrap, topic, PARTITIONS)
        checked += check_log(records, streams, snapshot, exactly_once={"ck"})
    for stream in streams.values():
        stream.stop.set()
    for stream in streams.values():
        assert stream.thread is not None
        stream.thread.join(180)
        assert not stream.thread.is_alive()
    snapshot = acked_snapshot(streams)
    records = read_topic(broker.bootstrap, topic, PARTITIONS)
    checked += check_log(records, streams, snapshot, exactly_once={"ck"})
    ends = {p: (recs[-1][0] + 1 if recs else 0) for p, recs in records.items()}
    assert broker.stop() == 0
    assert_clean_layout(broker.log_dir, topic, ends)
    console = broker.console_log.read_text()
    assert "Traceback" not in console, console[-3000:]
    # the data dir starts again after the clean stop, and nothing changed
    broker.start()
    assert read_topic(broker.bootstrap, topic, PARTITIONS) == records
    stats = defaultdict(int)
    stats.update(
        durability=durability, kills=kills, acked_records_checked=checked,
        records_in_log=sum(len(r) for r in records.values()),
        acked_kafka_python=streams["kp"].acked_count(), acked_confluent_idempotent=streams["ck"].acked_count(),
        duplicates_kafka_python=sum(len(r) for r in records.values()) - len(
            {v for recs in records.values() for _, v in recs}),
        mean_restart_s=round(sum(restart_times) / len(restart_times), 2), seconds=round(time.time() - started, 1),
        long_mode=LONG,
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"crash_loop_{durability}{'_long' if LONG else ''}.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps(stats))


# ------------------------------------------------------------------------------------------------
# Disk faults: ENOSPC / EIO on the append and on the index write
# ------------------------------------------------------------------------------------------------

def _produce(sock: socket.socket, topic: str, value: bytes, corr: int) -> tuple[int, int]:
    """One acks=all Produce of one record on a raw connection: (error code, base offset)."""
    Produce = request_class(0)
    batch = bytes(build_batch([SimpleRecord(value)]))
    req = Produce(acks=-1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])
    sock.sendall(join_pieces(encode_request(9, corr, req, client_id="disk-faults")))
    header = _recv_exact(sock, 4)
    frame = _recv_exact(sock, int.from_bytes(header, "big"))
    _, resp = decode_response(frame, 0, 9)
    part = resp.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def _check_partition(bootstrap: str, topic: str, acked: dict[int, bytes]) -> None:
    records = read_topic(bootstrap, topic, 1)[0]
    assert [o for o, _ in records] == list(range(len(records))), "offsets must stay dense"
    got = dict(records)
    assert set(got) == set(acked), "exactly the acknowledged records"
    assert all(got[o] == v for o, v in acked.items())


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()


def test_injected_disk_faults(odradek_broker_factory, tmp_path: Path) -> None:
    """EIO / ENOSPC (also torn half-writes) on the segment write and on the index block: the produce
    gets KAFKA_STORAGE_ERROR, the broker logs it, nothing acknowledged changes, the next append
    after the fault continues at the same offset, and a restart finds no torn batch."""
    control = tmp_path / "faults"
    broker = odradek_broker_factory(start=False)
    base_env = broker._env
    broker._env = lambda: {**base_env(), "ODRADEK_FAULT_INJECT": str(control)}  # type: ignore[method-assign]
    broker.start()
    topic = "disk-faults"
    _create_topic(broker.bootstrap, topic)
    acked: dict[int, bytes] = {}
    faults_seen = 0
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        corr = 0
        for round_ in range(4):
            for fault in ("append:EIO", "append:ENOSPC", "append-partial:ENOSPC", "index:EIO", "index:ENOSPC"):
                # values > index.interval.bytes: every append after the first is due an index entry
                for _ in range(2):
                    value = f"{round_}-{corr}-".encode() + os.urandom(3000).hex().encode()
                    corr += 1
                    code, offset = _produce(sock, topic, value, corr)
                    assert code == 0
                    acked[offset] = value
                control.write_text(fault + "\n")
                corr += 1
                code, _ = _produce(sock, topic, b"must-not-be-stored", corr)
                assert code == ErrorCode.KAFKA_STORAGE_ERROR, (fault, code)
                faults_seen += 1
                control.write_text("")
                corr += 1
                value = f"after-{fault}-{corr}".encode()
                code, offset = _produce(sock, topic, value, corr)
                assert code == 0 and offset == max(acked) + 1, (fault, code, offset)
                acked[offset] = value
    _check_partition(broker.bootstrap, topic, acked)
    log_text = broker.console_log.read_text()
    assert log_text.count("Append to disk-faults-0 failed") == faults_seen
    assert "(injected" in log_text
    broker.kill()  # crash right after: recovery must not find torn bytes either
    broker.start()
    _check_partition(broker.bootstrap, topic, acked)
    restart_log = broker.console_log.read_text()[len(log_text):]
    assert "disk-faults-0" not in restart_log or "truncat" not in restart_log.lower(), restart_log[-2000:]
    assert broker.stop() == 0
    ends = {0: max(acked) + 1}
    assert_clean_layout(broker.log_dir, topic, ends)


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def test_real_disk_full_on_tmpfs(odradek_broker_factory, tmp_path: Path) -> None:
    """A real ENOSPC: the log dir is a 16 MiB tmpfs that fills up. Produces get KAFKA_STORAGE_ERROR
    (never a crash: index pages are reserved before they are written through the mapping),
    everything acknowledged stays readable, and service resumes when space is freed."""
    mount = tmp_path / "small-disk"
    if not _mount_tmpfs(mount, "16m"):
        pytest.skip("cannot mount a tmpfs here (needs root); test_injected_disk_faults covers the code path")
    try:
        broker = odradek_broker_factory(overrides={
            "log.dirs": str(mount / "data"), "metadata.log.dir": str(tmp_path / "meta"),
            "log.segment.bytes": 4 * 1024 * 1024, "offsets.topic.num.partitions": 1,
        })
        topic = "full-disk"
        _create_topic(broker.bootstrap, topic)
        # leave ~2 MiB free
        filler = mount / "filler"
        free = os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize
        with open(filler, "wb") as f:
            f.write(b"\0" * max(free - 2 * 1024 * 1024, 0))
        acked: dict[int, bytes] = {}
        errors = 0
        with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
            corr = 0
            while errors < 3:
                corr += 1
                value = f"{corr}-".encode() + os.urandom(6000).hex().encode()
                code, offset = _produce(sock, topic, value, corr)
                if code == 0:
                    acked[offset] = value
                else:
                    assert code == ErrorCode.KAFKA_STORAGE_ERROR, code
                    errors += 1
                assert corr < 2000, "the disk never filled up"
            assert broker.running
            _check_partition(broker.bootstrap, topic, acked)
            filler.unlink()
            for _ in range(20):
                corr += 1
                value = f"again-{corr}".encode() * 100
                code, offset = _produce(sock, topic, value, corr)
                assert code == 0 and offset == max(acked) + 1
                acked[offset] = value
        _check_partition(broker.bootstrap, topic, acked)
        assert "No space left on device" in broker.console_log.read_text()
        assert broker.stop() == 0
        assert_clean_layout(broker.log_dir, topic, {0: max(acked) + 1})
        broker.start()
        _check_partition(broker.bootstrap, topic, acked)
        broker.stop()
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
