"""``odradek dump-log`` and Kafka's own DumpLogSegments print the same thing for every file an
Odradek broker writes, in every mode.

Scenario: an Odradek broker gets data from kafka-python with every codec, record headers,
UTF-8 and binary values, an idempotent producer, a LogAppendTime topic, a topic with small
segments (rolled segments, index entries) and a consumer group that commits offsets; then it is
stopped cleanly. Both tools then dump every file of the data dir in each mode and the outputs
are compared: stdout byte for byte, stderr line for line without the JVM's stack frames.

Kafka's tool creates a missing index file when asked to dump one, so the data dir is restored
from a copy between the two runs. Files without a dot in their name make both tools die at once,
so they are dumped one by one; everything else is dumped in one run per mode (which also checks
the order of the summary blocks).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

#: DumpLogSegments version the tool follows (docs/dump-log.md)
KAFKA_VERSION = "3.9.1"

MODES: dict[str, list[str]] = {
    "shallow": [],
    "deep": ["--deep-iteration"],
    "print": ["--print-data-log"],
    "skip-metadata": ["--print-data-log", "--skip-record-metadata"],
    "verify-index-only": ["--verify-index-only"],
    "index-sanity-check": ["--index-sanity-check"],
    "max-bytes": ["--max-bytes", "3000"],
}
#: decoder modes, run on the files of the partitions they are meant for
DECODER_MODES: dict[str, tuple[str, list[str]]] = {
    "offsets-decoder": ("__consumer_offsets-", ["--offsets-decoder"]),
    "transaction-log-decoder": ("__transaction_state-", ["--transaction-log-decoder"]),
    "cluster-metadata-decoder": ("__cluster_metadata-", ["--cluster-metadata-decoder"]),
}

BASE_TS = 1_700_000_000_000


def _produce(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics(
        [
            NewTopic("dl-codecs", num_partitions=2, replication_factor=1),
            NewTopic("dl-lat", num_partitions=1, replication_factor=1,
                     topic_configs={"message.timestamp.type": "LogAppendTime"}),
            NewTopic("dl-small", num_partitions=1, replication_factor=1,
                     topic_configs={"segment.bytes": "16384"}),
        ]
    )
    admin.close()
    values = [
        b"plain ascii value",
        "utf-8 v\u00e4lue \u20ac \U0001f600".encode(),
        bytes(range(256)),
        b"",
        None,
    ]
    i = 0
    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20,
                                 enable_idempotence=codec in (None, "zstd"))
        for _ in range(40):
            headers = [("h1", b"x"), ("trace-id", str(i).encode())] if i % 3 == 0 else []
            value = values[i % len(values)]
            # kafka-python refuses a record with neither key nor value
            key = None if i % 7 == 0 and value is not None else f"key-{i}".encode()
            producer.send("dl-codecs", key=key, value=value, headers=headers,
                          timestamp_ms=BASE_TS + i, partition=i % 2)
            i += 1
        producer.flush()
        producer.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for j in range(30):
        producer.send("dl-lat", key=b"k", value=f"lat-{j}".encode(), headers=[("h", b"")])
        if j % 10 == 9:
            producer.flush()
    # enough small batches to roll 16 KiB segments and cross the 4 KiB index interval
    for j in range(400):
        producer.send("dl-small", value=(f"small-{j}-".encode() * 8), timestamp_ms=BASE_TS + 10 * j)
        if j % 20 == 19:
            producer.flush()
    producer.flush()
    producer.close()
    _transactions(bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="dl-group", auto_offset_reset="earliest",
                             enable_auto_commit=False)
    consumer.assign([TopicPartition("dl-lat", 0)])
    seen = 0
    deadline = time.time() + 20
    while seen < 30 and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            seen += len(batch)
            consumer.commit()
    consumer.close()


def _transactions(bootstrap: str) -> None:
    """One committed and one aborted transaction: COMMIT/ABORT markers, a .txnindex and
    __transaction_state records. Best effort: if it fails, the transaction-log test skips."""
    from kafka import KafkaProducer

    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="dl-txn", linger_ms=5)
        producer.init_transactions()
        for commit in (True, False, True):
            producer.begin_transaction()
            for j in range(5):
                producer.send("dl-codecs", key=f"txn-{j}".encode(), value=b"in a transaction", partition=j % 2)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
        producer.close()
    except Exception as exc:  # noqa: BLE001 - the dump comparison does not depend on it
        warnings.warn(f"transactions against Odradek failed, no __transaction_state to dump: {exc!r}", stacklevel=1)


def _odradek(files: list[str], flags: list[str]) -> tuple[str, str, int]:
    # text=True like kafka_oracle.run_java_tool, so both outputs get the same decoding and the
    # same universal-newline translation (a "\r" inside a printed value becomes "\n" in both)
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", "dump-log", "--files", ",".join(files), *flags],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc.stdout, proc.stderr, proc.returncode


def _frames_removed(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if not ln.startswith(("\tat ", "\t..."))]


@pytest.fixture(scope="module")
def odradek_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log dir written by Odradek (cleanly stopped), and a pristine copy next to it."""
    from kafka_oracle import require_tool
    from odradek_broker import OdradekBroker

    from odradek.cli import main as odradek_main

    require_tool(f"kafka-{KAFKA_VERSION}")
    # Kafka 3.9's coordinator writes OffsetCommitValue v4 without the topic id (its tool does not
    # know that tagged field): Odradek's 4.1 record format is that layout (4.4 adds the id)
    broker = OdradekBroker(tmp_path_factory.mktemp("odradek"), overrides={"group.coordinator.record.format": "4.1"})
    # formatted for the release whose tool is the reference, so that its metadata records are in
    # versions that tool reads (Odradek formats for Kafka 4.4 by default)
    assert odradek_main(["storage", "format", "-t", "q1w2e3r4t5y6u7i8o9p0AA", "--override",
                         f"log.dirs={broker.log_dirs[0]}", "--release-version", KAFKA_VERSION.rsplit(".", 1)[0]]) == 0
    broker.start()
    try:
        _produce(broker.bootstrap)
    finally:
        broker.stop()
        broker.kill()
    data = broker.log_dirs[0]
    shutil.copytree(data, data.with_name(data.name + ".pristine"))
    return data


def _restore(data: Path) -> None:
    shutil.rmtree(data)
    shutil.copytree(data.with_name(data.name + ".pristine"), data)


def _compare(data: Path, files: list[str], flags: list[str], dump_log_segments_tool) -> None:
    _restore(data)
    k_out, k_err, k_rc = dump_log_segments_tool(files, *flags, version=KAFKA_VERSION)
    _restore(data)
    o_out, o_err, o_rc = _odradek(files, flags)
    assert o_out == k_out, _first_diff(k_out, o_out)
    assert _frames_removed(o_err) == _frames_removed(k_err)
    assert o_rc == k_rc


def _first_diff(a: str, b: str) -> str:
    al, bl = a.split("\n"), b.split("\n")
    for n, (x, y) in enumerate(zip(al, bl, strict=False)):
        if x != y:
            return f"line {n + 1}:\nkafka:   {x[:400]!r}\nodradek: {y[:400]!r}"
    return f"kafka has {len(al)} lines, odradek {len(bl)}"


def _all_files(data: Path) -> list[Path]:
    return sorted(p for p in data.rglob("*") if p.is_file())


def test_data_dir_has_the_interesting_files(odradek_data_dir: Path) -> None:
    names = {p.name for p in _all_files(odradek_data_dir)}
    suffixes = {Path(n).suffix for n in names}
    assert {".log", ".index", ".timeindex", ".snapshot"} <= suffixes
    small = sorted((odradek_data_dir / "dl-small-0").glob("*.log"))
    assert len(small) > 1, "dl-small should have rolled"


@pytest.mark.parametrize("mode", list(MODES))
def test_every_file_every_mode(mode: str, odradek_data_dir: Path, dump_log_segments_tool) -> None:
    files = [str(p) for p in _all_files(odradek_data_dir) if "." in p.name]
    _compare(odradek_data_dir, files, MODES[mode], dump_log_segments_tool)


@pytest.mark.parametrize("mode", list(DECODER_MODES))
def test_decoders(mode: str, odradek_data_dir: Path, dump_log_segments_tool) -> None:
    prefix, flags = DECODER_MODES[mode]
    files = [str(p) for p in _all_files(odradek_data_dir) if p.parent.name.startswith(prefix) and "." in p.name]
    if not files:
        pytest.skip(f"Odradek wrote no {prefix}* partition")
    _compare(odradek_data_dir, files, flags, dump_log_segments_tool)


def test_files_without_a_dot(odradek_data_dir: Path, dump_log_segments_tool) -> None:
    # leader-epoch-checkpoint, recovery-point-offset-checkpoint, ...: both tools die on the
    # first one, so one file of each name is enough
    first_of_name: dict[str, Path] = {}
    for p in _all_files(odradek_data_dir):
        if "." not in p.name:
            first_of_name.setdefault(p.name, p)
    assert first_of_name
    for p in first_of_name.values():
        _compare(odradek_data_dir, [str(p)], [], dump_log_segments_tool)
