"""Batch backfill: recompute per-page window stats for a slice of the clickstream topic.

    spark-submit --master 'local[2]' --jars "$(python3 pipelines/spark_env.py --jars)" \
        pipelines/backfill_job.py --bootstrap 127.0.0.1:9092 --input clicks \
        --starting-offsets '{"clicks":{"0":0,"1":0,"2":0}}' --ending-offsets latest \
        --parquet /tmp/backfill [--output page-stats-backfill]

    ... --starting-timestamp 1767225900000 [--ending-timestamp 1767226200000]

The slice is chosen the way Spark's Kafka source allows: by offsets (``startingOffsets`` /
``endingOffsets``: ``earliest``/``latest`` or per-partition JSON) or by record timestamp
(``startingTimestamp`` / ``endingTimestamp``, epoch ms; the broker answers ListOffsets by
timestamp). The generator stamps records with their event time, so a timestamp slice is an
event-time slice. Batch queries ignore watermarks: every window in the slice is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from clickstream import STATS_COLUMNS, clickstream_stats, to_kafka_records  # noqa: E402


def offsets_json(topic: str, offsets: Mapping[int, int]) -> str:
    """``{"topic": {"0": 12, ...}}``: the per-partition form of startingOffsets/endingOffsets."""
    return json.dumps({topic: {str(p): int(o) for p, o in sorted(offsets.items())}})


def read_batch(
    spark,
    bootstrap: str,
    topic: str,
    *,
    starting_offsets: str | None = None,
    ending_offsets: str | None = None,
    starting_timestamp: int | None = None,
    ending_timestamp: int | None = None,
    options: Mapping[str, str] | None = None,
):
    """The Kafka source as a batch DataFrame over the given slice (defaults: earliest..latest)."""
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    if starting_timestamp is not None:
        reader = reader.option("startingTimestamp", str(starting_timestamp))
    elif starting_offsets is not None:
        reader = reader.option("startingOffsets", starting_offsets)
    if ending_timestamp is not None:
        reader = reader.option("endingTimestamp", str(ending_timestamp))
    elif ending_offsets is not None:
        reader = reader.option("endingOffsets", ending_offsets)
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return reader.load()


def backfill(
    spark,
    *,
    bootstrap: str,
    input_topic: str,
    parquet_dir: str | None = None,
    output_topic: str | None = None,
    window: str = "1 minute",
    **slice_options,
):
    """Aggregate a slice (see :func:`read_batch` for ``slice_options``); write it where asked; return it.

    The result is cached so that writing it twice (Parquet and Kafka) reads the topic once.
    """
    stats = clickstream_stats(read_batch(spark, bootstrap, input_topic, **slice_options), window).select(*STATS_COLUMNS)
    stats = stats.cache()
    if parquet_dir:
        stats.write.mode("overwrite").parquet(parquet_dir)
    if output_topic:
        (
            to_kafka_records(stats)
            .write.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", output_topic)
            .save()
        )
    return stats


def main(argv: list[str] | None = None) -> None:
    """Command line: run one backfill and print how many (window, page) rows it produced."""
    from spark_env import build_session

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", default="clicks")
    ap.add_argument("--starting-offsets", default=None, help="earliest or per-partition JSON")
    ap.add_argument("--ending-offsets", default=None, help="latest or per-partition JSON")
    ap.add_argument("--starting-timestamp", type=int, default=None, help="epoch ms (wins over --starting-offsets)")
    ap.add_argument("--ending-timestamp", type=int, default=None, help="epoch ms (wins over --ending-offsets)")
    ap.add_argument("--window", default="1 minute")
    ap.add_argument("--parquet", default=None)
    ap.add_argument("--output", default=None, help="also write the stats to this topic")
    args = ap.parse_args(argv)
    spark = build_session("clickstream-backfill")
    try:
        stats = backfill(
            spark,
            bootstrap=args.bootstrap,
            input_topic=args.input,
            parquet_dir=args.parquet,
            output_topic=args.output,
            window=args.window,
            starting_offsets=args.starting_offsets,
            ending_offsets=args.ending_offsets,
            starting_timestamp=args.starting_timestamp,
            ending_timestamp=args.ending_timestamp,
        )
        print(json.dumps({"rows": stats.count()}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
