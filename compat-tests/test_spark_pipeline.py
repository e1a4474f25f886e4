"""End to end: the PySpark clickstream pipeline (``pipelines/``) over a live Odradek.

Spark 4.0's built-in Kafka source and sink (spark-sql-kafka-0-10 with kafka-clients 3.9) talk to
Odradek exactly as they would to Kafka: admin DescribeCluster / DescribeTopicPartitions /
ListOffsets (earliest, latest, by timestamp) for offset discovery, one assign+seek consumer per
task with Fetch v17 by topic id, and an idempotent producer (InitProducerId + Produce) for the sink.

One module-scoped run (:func:`pipeline_run`) drives the streaming job across a broker restart:

1. the generator writes phase 1 (240 events, 4 minutes of event time) to ``clicks`` (3 partitions);
2. the job starts (Kafka sink -> ``page-stats`` and a Parquet sink, 1 s trigger, 1 min windows,
   1 min watermark) and processes it: windows whose end the watermark passed come out;
3. the broker is stopped cleanly and started again on the same port and log dir while both
   queries keep running;
4. phase 2 (240 more events) and a heartbeat 10 min later are written; the watermark passes
   every real window and the rest come out.

The tests then check the output topic holds every (page, window) exactly once with exactly the
reference aggregates, the Parquet output the same, the sink's batches are idempotent-producer
batches with gap-free sequences, and batch reads by offsets and by timestamp give the expected
backfills. Skipped without pyspark or the connector jars, failed instead under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_oracle import in_ci
from odradek_broker import OdradekBroker

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "pipelines"))

import generator  # noqa: E402

INPUT, OUTPUT = "clicks", "page-stats"
PARTITIONS = 3
WINDOW_MS = 60_000
START = generator.DEFAULT_START_MS
PHASE = 240  # events per phase, one per second of event time
BROKER_CONFIG = {"num.partitions": str(PARTITIONS), "group.initial.rebalance.delay.ms": "0"}
WAIT_S = 420  # upper bound for output to appear on two busy cores; the usual wait is seconds to a minute


def _missing(msg: str) -> None:
    msg = f"SPARK MISSING: {msg}"
    if in_ci():
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def spark() -> object:
    """The process's local[2] SparkSession with the connector jars from .cache/spark-kafka.classpath."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _missing("pyspark is not installed (pip install -e '.[test]')")
    from spark_env import FAST_LOCAL_CONF, build_session, classpath_file, connector_jars

    try:
        jars = connector_jars()
    except FileNotFoundError as exc:
        _missing(f"spark-sql-kafka jars ({classpath_file()}): {exc}; run bash .ci/fetch-tools.sh")
    session = build_session("spark-e2e", jars=jars, conf=FAST_LOCAL_CONF)
    # A session started earlier in this process (the unit tests) was built with the same jars when
    # the classpath file existed; make sure the kafka source really is there.
    session.sparkContext._jvm.java.lang.Class.forName(
        "org.apache.spark.sql.kafka010.KafkaSourceProvider", True,
        session.sparkContext._jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader(),
    )
    return session


def _create_topics(bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="spark-e2e-admin")
    try:
        admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (INPUT, OUTPUT)])
    finally:
        admin.close()


def read_topic(bootstrap: str, topic: str) -> list:
    """Every record of ``topic`` (kafka-python, assign + seek to beginning, read to the end offsets)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="spark-e2e-reader", enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        records: list = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def decode_stats(records: list) -> dict[tuple[str, int], dict]:
    """Output records -> ``(page, window_start_ms) -> counts``; a window seen twice is an error."""
    out: dict[tuple[str, int], dict] = {}
    for rec in records:
        value = json.loads(rec.value)
        assert rec.key.decode() == value["page"]
        assert value["window_end_ms"] - value["window_start_ms"] == WINDOW_MS
        key = (value["page"], value["window_start_ms"])
        assert key not in out, f"window written twice to {OUTPUT}: {key}"
        out[key] = {k: value[k] for k in ("events", "views", "clicks", "purchases", "revenue_cents")}
    return out


def rows_to_stats(rows: list) -> dict[tuple[str, int], dict]:
    """Spark rows of clickstream.STATS_COLUMNS -> the same mapping as :func:`decode_stats`."""
    out: dict[tuple[str, int], dict] = {}
    for row in rows:
        key = (row["page"], int(row["window_start"].timestamp() * 1000))
        assert key not in out, f"window twice: {key}"
        out[key] = {k: row[k] for k in ("events", "views", "clicks", "purchases", "revenue_cents")}
    return out


def _wait_for_output(bootstrap: str, want: int, queries: dict) -> list:
    deadline = time.monotonic() + WAIT_S
    while True:
        records = read_topic(bootstrap, OUTPUT)
        if len(records) >= want or time.monotonic() > deadline:
            return records
        for name, q in queries.items():
            assert q.exception() is None, f"{name} query failed: {q.exception()}"
        time.sleep(1)


def _await_source_offsets(queries: dict, ends: dict[int, int], timeout: float = WAIT_S) -> None:
    """Wait until every query has committed a batch reading up to ``ends`` (partition -> offset).

    Like ``StreamingQuery.processAllAvailable`` but bounded: a stalled query fails the test
    instead of hanging CI.
    """
    deadline = time.monotonic() + timeout
    for name, q in queries.items():
        while True:
            exc = q.exception()
            assert exc is None, f"{name} query failed: {exc}"
            done = {}
            for progress in q.recentProgress:
                for source in progress.get("sources", []):
                    end = source.get("endOffset")
                    end = json.loads(end) if isinstance(end, str) else end
                    for p, off in ((end or {}).get(INPUT) or {}).items():
                        done[int(p)] = max(done.get(int(p), 0), int(off))
            if all(done.get(p, 0) >= off for p, off in ends.items()):
                break
            assert time.monotonic() < deadline, f"{name} query read {done}, not {ends}, in {timeout} s"
            time.sleep(0.5)


def _wait_for_parquet(spark, path: Path, want: int, queries: dict) -> None:
    """Wait until the file sink has committed ``want`` rows (it may trail the Kafka query by a batch)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        # The file sink's _spark_metadata log lists committed files only, so a partial batch never shows.
        if path.joinpath("_spark_metadata").is_dir() and spark.read.parquet(str(path)).count() >= want:
            return
        for name, q in queries.items():
            assert q.exception() is None, f"{name} query failed: {q.exception()}"
        assert time.monotonic() < deadline, f"Parquet output at {path} did not reach {want} rows"
        time.sleep(1)


def _close_cached_producers(spark) -> None:
    """Close the Kafka sink's cached producers while the broker is still up (best effort).

    Spark keeps a sink's producer for 10 idle minutes; left open, it would log a failed
    reconnect to the stopped broker every second for the rest of the pytest session. The pool is
    internal to the connector (a Scala object), hence the reflection-like access and no failure.
    """
    try:
        pool_module = getattr(spark.sparkContext._jvm.org.apache.spark.sql.kafka010.producer, "InternalKafkaProducerPool$")
        getattr(pool_module, "MODULE$").reset()
    except Exception as exc:  # noqa: BLE001 - only log noise is at stake
        print(f"could not close Spark's cached Kafka producers: {exc}")


@pytest.fixture(scope="module")
def pipeline_run(spark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Run the streaming job over phase 1, a broker restart and phase 2 (see the module docstring)."""
    import streaming_job

    work = tmp_path_factory.mktemp("spark-e2e")
    broker = OdradekBroker(work / "broker", overrides=BROKER_CONFIG)
    queries: dict = {}
    timings: dict[str, float] = {}
    try:
        broker.start()
        bootstrap = broker.bootstrap
        _create_topics(bootstrap)
        phase1 = generator.make_events(PHASE)
        ends1 = generator.produce(bootstrap, INPUT, phase1)

        t0 = time.monotonic()
        queries = streaming_job.start_queries(
            spark, bootstrap=bootstrap, input_topic=INPUT, output_topic=OUTPUT,
            checkpoint_dir=str(work / "checkpoints"), parquet_dir=str(work / "parquet"),
            window="1 minute", watermark="1 minute", trigger_seconds=1.0,
        )
        _await_source_offsets(queries, ends1)
        # Max event time START+239 s -> watermark START+179 s: windows ending by then are final.
        want1 = generator.expected_page_windows(phase1, WINDOW_MS)
        closed1 = {k: v for k, v in want1.items() if k[1] + WINDOW_MS <= START + (PHASE - 1) * 1000 - 60_000}
        out1 = _wait_for_output(bootstrap, len(closed1), queries)
        timings["phase 1"] = time.monotonic() - t0

        # Restart mid-stream: both queries keep triggering while the broker is away.
        t0 = time.monotonic()
        assert broker.stop() == 0, broker.log_tail()
        time.sleep(3)
        broker.start()
        timings["restart"] = time.monotonic() - t0

        t0 = time.monotonic()
        phase2 = generator.make_events(PHASE, first=PHASE)
        ends2 = generator.produce(bootstrap, INPUT, [*phase2, generator.heartbeat(phase2[-1]["ts"] + 600_000)])
        _await_source_offsets(queries, {p: max(ends1.get(p, 0), ends2.get(p, 0)) for p in range(PARTITIONS)})
        want = generator.expected_page_windows(phase1 + phase2, WINDOW_MS)
        _wait_for_output(bootstrap, len(want), queries)
        _wait_for_parquet(spark, work / "parquet", len(want), queries)
        # A few more triggers: nothing else may come out (no duplicates, no heartbeat window).
        time.sleep(4)
        for name, q in queries.items():
            assert q.exception() is None, f"{name} query failed: {q.exception()}"
            assert q.isActive, f"{name} query stopped"
        timings["phase 2"] = time.monotonic() - t0
        yield {
            "broker": broker, "bootstrap": bootstrap, "work": work, "phase1": phase1, "phase2": phase2,
            "ends1": ends1, "ends2": ends2, "closed1": closed1, "out1": out1, "want": want, "queries": queries,
            "timings": timings,
        }
    finally:
        for q in queries.values():
            q.stop()
        _close_cached_producers(spark)
        try:
            broker.stop()
        finally:
            broker.kill()


def test_streaming_output_topic_has_exact_aggregates_across_restart(pipeline_run: dict) -> None:
    """Kafka sink: every (page, window) exactly once with the reference counts, before and after the restart."""
    got1 = decode_stats(pipeline_run["out1"])
    assert got1 == pipeline_run["closed1"], "windows closed before the restart"
    records = read_topic(pipeline_run["bootstrap"], OUTPUT)
    got = decode_stats(records)
    assert len(records) == len(pipeline_run["want"])
    assert got == pipeline_run["want"]
    assert sum(v["events"] for v in got.values()) == 2 * PHASE
    print("timings:", {k: round(v, 1) for k, v in pipeline_run["timings"].items()})


def test_streaming_parquet_output_matches(pipeline_run: dict, spark) -> None:
    """File sink: the same rows as the topic (exactly once through the sink's metadata log)."""
    rows = spark.read.parquet(str(pipeline_run["work"] / "parquet")).collect()
    assert len(rows) == len(pipeline_run["want"])
    assert rows_to_stats(rows) == pipeline_run["want"]


def _batch_headers(log_dir: Path) -> list[tuple[int, int, int, int, int]]:
    """(base_offset, producer_id, producer_epoch, base_sequence, record_count) of each batch in a partition dir."""
    out = []
    for seg in sorted(log_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            pid, epoch, base_seq, count = struct.unpack_from(">qhii", data, pos + 43)
            out.append((base_offset, pid, epoch, base_seq, count))
            pos += 12 + length
    return out


def test_kafka_sink_used_an_idempotent_producer(pipeline_run: dict) -> None:
    """Every batch in the output topic carries a producer id, and sequences run without gaps or repeats.

    The sink's producer survived the broker restart: its next sequence numbers were accepted
    because Odradek reloaded the producer state from its log dir.
    """
    log_dir = pipeline_run["broker"].log_dirs[0]
    total = 0
    producers: set[tuple[int, int]] = set()
    for p in range(PARTITIONS):
        batches = _batch_headers(log_dir / f"{OUTPUT}-{p}")
        next_seq: dict[tuple[int, int], int] = {}
        for base_offset, pid, epoch, base_seq, count in batches:
            assert pid >= 0 and base_seq >= 0, f"{OUTPUT}-{p}@{base_offset}: not an idempotent batch"
            expected = next_seq.get((pid, epoch), 0)
            assert base_seq == expected, f"{OUTPUT}-{p}@{base_offset}: sequence {base_seq}, expected {expected}"
            next_seq[(pid, epoch)] = base_seq + count
            total += count
        producers.update(next_seq)
    assert total == len(pipeline_run["want"])
    # One producer id and epoch before and after the restart: had Odradek forgotten the producer's
    # state, the client would have hit UNKNOWN_PRODUCER_ID/OUT_OF_ORDER_SEQUENCE and bumped its epoch.
    assert len(producers) == 1, producers


def test_batch_backfill_by_offsets(pipeline_run: dict, spark) -> None:
    """startingOffsets/endingOffsets (per-partition JSON): exactly phase 1, every window (batch: no watermark)."""
    import backfill_job

    ends1 = {p: pipeline_run["ends1"].get(p, 0) for p in range(PARTITIONS)}
    stats = backfill_job.backfill(
        spark, bootstrap=pipeline_run["bootstrap"], input_topic=INPUT,
        parquet_dir=str(pipeline_run["work"] / "backfill-offsets"),
        starting_offsets=backfill_job.offsets_json(INPUT, {p: 0 for p in range(PARTITIONS)}),
        ending_offsets=backfill_job.offsets_json(INPUT, ends1),
    )
    assert rows_to_stats(stats.collect()) == generator.expected_page_windows(pipeline_run["phase1"], WINDOW_MS)
    written = spark.read.parquet(str(pipeline_run["work"] / "backfill-offsets")).collect()
    assert rows_to_stats(written) == generator.expected_page_windows(pipeline_run["phase1"], WINDOW_MS)
    # earliest..latest: both phases (the heartbeat is read but never counted).
    everything = backfill_job.backfill(spark, bootstrap=pipeline_run["bootstrap"], input_topic=INPUT,
                                       starting_offsets="earliest", ending_offsets="latest")
    assert rows_to_stats(everything.collect()) == pipeline_run["want"]


def test_batch_backfill_by_timestamp(pipeline_run: dict, spark) -> None:
    """startingTimestamp/endingTimestamp: the broker's ListOffsets by timestamp picks the event-time slice."""
    import backfill_job

    lo, hi = START + 300_000, START + 420_000  # window-aligned; inside phase 2, after the restart
    stats = backfill_job.backfill(
        spark, bootstrap=pipeline_run["bootstrap"], input_topic=INPUT,
        starting_timestamp=lo, ending_timestamp=hi,
    )
    events = [e for e in pipeline_run["phase1"] + pipeline_run["phase2"] if lo <= e["ts"] < hi]
    assert len(events) == 120
    assert rows_to_stats(stats.collect()) == generator.expected_page_windows(events, WINDOW_MS)
    # Only a start: everything from lo on (the records written before the restart are skipped).
    tail = backfill_job.backfill(spark, bootstrap=pipeline_run["bootstrap"], input_topic=INPUT,
                                 starting_timestamp=START + 120_000)
    events = [e for e in pipeline_run["phase1"] + pipeline_run["phase2"] if e["ts"] >= START + 120_000]
    assert rows_to_stats(tail.collect()) == generator.expected_page_windows(events, WINDOW_MS)


def test_broker_log_has_no_errors(pipeline_run: dict) -> None:
    """Whatever Spark sent, Odradek's console.log shows no ERROR line and no traceback."""
    text = pipeline_run["broker"].console_log.read_text(errors="replace")
    bad = [line for line in text.splitlines() if " ERROR " in line or "Traceback" in line or " CRITICAL " in line]
    assert not bad, "\n".join(bad[:30])


def test_no_network_needed_at_run_time() -> None:
    """The connector comes from the local Maven cache (spark.jars), never from spark.jars.packages/Ivy."""
    from spark_env import classpath_file

    if not classpath_file().exists():
        _missing(f"{classpath_file()} (run bash .ci/fetch-tools.sh)")
    for jar in classpath_file().read_text().strip().split(os.pathsep):
        assert Path(jar).is_file(), jar
