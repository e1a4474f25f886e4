"""Structured Streaming job: clickstream topic -> per-page windowed stats -> Kafka topic + Parquet.

    spark-submit --master 'local[2]' --conf spark.sql.shuffle.partitions=2 \
        --jars "$(python3 pipelines/spark_env.py --jars)" \
        pipelines/streaming_job.py --bootstrap 127.0.0.1:9092 --input clicks --output page-stats \
        --checkpoint /tmp/clicks-ckpt --parquet /tmp/page-stats

Two queries share the transformation (``clickstream.clickstream_stats``) and each has its own
checkpoint directory under ``--checkpoint``:

* ``kafka`` - Spark's built-in Kafka sink: one JSON record per closed window, key = page. The sink
  writes through an idempotent Java producer (acks=all), so a retried send is not duplicated.
* ``parquet`` - the file sink, exactly-once through its own metadata log.

Output mode is append: a (window, page) row is written once, after the watermark passes the
window's end; rows are therefore final, and the Kafka topic holds each exactly once.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

# Running as a script (python or spark-submit) puts this folder on sys.path; tests add it themselves.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from clickstream import STATS_COLUMNS, clickstream_stats, to_kafka_records  # noqa: E402

#: Source options that let a query ride out a broker restart: offset look-ups are retried for
#: ~30 s instead of Spark's default 3 x 1 s before the query fails.
RESILIENT_SOURCE_OPTIONS = {
    "fetchOffset.numRetries": "30",
    "fetchOffset.retryIntervalMs": "1000",
}


def read_stream(spark, bootstrap: str, topic: str, starting_offsets: str = "earliest",
                options: Mapping[str, str] | None = None):
    """The Kafka source as a streaming DataFrame (``key, value, topic, partition, offset, timestamp, ...``)."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
    )
    for key, value in {**RESILIENT_SOURCE_OPTIONS, **(options or {})}.items():
        reader = reader.option(key, value)
    return reader.load()


def start_queries(
    spark,
    *,
    bootstrap: str,
    input_topic: str,
    output_topic: str | None,
    checkpoint_dir: str,
    parquet_dir: str | None = None,
    window: str = "1 minute",
    watermark: str = "1 minute",
    trigger_seconds: float = 1.0,
    starting_offsets: str = "earliest",
    source_options: Mapping[str, str] | None = None,
    producer_options: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """Start the job's queries; returns ``{"kafka": StreamingQuery, "parquet": StreamingQuery}`` (those asked for)."""
    queries: dict[str, object] = {}
    trigger = {"processingTime": f"{trigger_seconds} seconds"}
    if output_topic:
        stats = clickstream_stats(
            read_stream(spark, bootstrap, input_topic, starting_offsets, source_options), window, watermark
        )
        writer = (
            to_kafka_records(stats)
            .writeStream.format("kafka")
            .queryName(f"clickstream-kafka-{output_topic}")
            .outputMode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", output_topic)
            # The Java producer's defaults already are these; spelled out because the job relies on them.
            .option("kafka.enable.idempotence", "true")
            .option("kafka.acks", "all")
            .option("checkpointLocation", os.path.join(checkpoint_dir, "kafka"))
            .trigger(**trigger)
        )
        for key, value in (producer_options or {}).items():
            writer = writer.option(f"kafka.{key}", value)
        queries["kafka"] = writer.start()
    if parquet_dir:
        stats = clickstream_stats(
            read_stream(spark, bootstrap, input_topic, starting_offsets, source_options), window, watermark
        )
        queries["parquet"] = (
            stats.select(*STATS_COLUMNS)
            .writeStream.format("parquet")
            .queryName("clickstream-parquet")
            .outputMode("append")
            .option("path", parquet_dir)
            .option("checkpointLocation", os.path.join(checkpoint_dir, "parquet"))
            .trigger(**trigger)
            .start()
        )
    return queries


def main(argv: list[str] | None = None) -> None:
    """Command line: start the queries and wait (Ctrl-C stops them; checkpoints make a rerun resume)."""
    from spark_env import build_session

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", default="clicks")
    ap.add_argument("--output", default="page-stats", help="output topic ('' for none)")
    ap.add_argument("--parquet", default=None, help="Parquet output directory")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--window", default="1 minute")
    ap.add_argument("--watermark", default="1 minute")
    ap.add_argument("--trigger-seconds", type=float, default=1.0)
    ap.add_argument("--starting-offsets", default="earliest")
    ap.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    args = ap.parse_args(argv)
    spark = build_session("clickstream-streaming")
    queries = start_queries(
        spark,
        bootstrap=args.bootstrap,
        input_topic=args.input,
        output_topic=args.output or None,
        checkpoint_dir=args.checkpoint,
        parquet_dir=args.parquet,
        window=args.window,
        watermark=args.watermark,
        trigger_seconds=args.trigger_seconds,
        starting_offsets=args.starting_offsets,
    )
    try:
        spark.streams.awaitAnyTermination(args.timeout)
    except KeyboardInterrupt:
        pass
    finally:
        for q in queries.values():
            q.stop()
        spark.stop()


if __name__ == "__main__":
    main()
