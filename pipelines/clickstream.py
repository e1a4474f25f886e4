"""Clickstream transformations: pure DataFrame -> DataFrame functions, no I/O.

The streaming job (``streaming_job.py``) and the batch backfill (``backfill_job.py``) read Kafka
records and chain these functions; the unit tests in ``tests/pipelines/`` feed them in-memory
DataFrames. Nothing here knows whether a DataFrame is streaming or batch, except
:func:`with_event_time_watermark`, which only matters for streams.

Event (the Kafka record value, UTF-8 JSON; the record key is the user id)::

    {"event_id": "e-000042", "user_id": "u-03", "page": "/cart", "action": "click",
     "amount_cents": 0, "ts": 1767225600000}

``action`` is ``view``, ``click`` or ``purchase`` (``amount_cents`` > 0 only for purchases), or
``heartbeat``: a record that only advances event time (the generator sends one at the end of a
run so that the watermark passes the last real window); heartbeats are never counted.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

#: JSON schema of one event (the Kafka record value).
EVENT_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("user_id", StringType()),
        StructField("page", StringType()),
        StructField("action", StringType()),
        StructField("amount_cents", LongType()),
        StructField("ts", LongType()),
    ]
)

#: Actions that are counted; anything else (``heartbeat``, unknown kinds) is dropped by the aggregation.
COUNTED_ACTIONS = ("view", "click", "purchase")
HEARTBEAT = "heartbeat"

#: Columns of :func:`page_window_stats`, in order (also the Parquet layout).
STATS_COLUMNS = (
    "window_start",
    "window_end",
    "page",
    "events",
    "views",
    "clicks",
    "purchases",
    "revenue_cents",
)


def parse_events(raw: DataFrame) -> DataFrame:
    """Kafka rows (``value`` binary or string) -> one typed row per well-formed event.

    Output columns: ``event_id, user_id, page, action, amount_cents, event_time`` (a UTC
    timestamp from ``ts`` epoch milliseconds). Records whose value is not JSON, or that lack
    ``page``, ``action`` or ``ts``, are dropped: a malformed record must not stop the stream,
    and counting it under a null key would corrupt the aggregates.
    """
    parsed = raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")).select("e.*")
    return (
        parsed.where(F.col("page").isNotNull() & F.col("action").isNotNull() & F.col("ts").isNotNull())
        .withColumn("amount_cents", F.coalesce(F.col("amount_cents"), F.lit(0).cast("long")))
        .withColumn("event_time", F.timestamp_millis(F.col("ts")))
        .drop("ts")
    )


def with_event_time_watermark(events: DataFrame, delay: str) -> DataFrame:
    """Declare ``event_time`` as the watermarked column (streams only; batch queries ignore it).

    Applied before heartbeats are filtered out, so that a heartbeat still moves the watermark.
    """
    return events.withWatermark("event_time", delay)


def _count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long")


def page_window_stats(events: DataFrame, window_duration: str = "1 minute") -> DataFrame:
    """Per page and tumbling event-time window: event counts by action and purchase revenue.

    Columns: :data:`STATS_COLUMNS`. Only :data:`COUNTED_ACTIONS` count. On a stream with a
    watermark (:func:`with_event_time_watermark`) a window is emitted in append mode once the
    watermark passes its end; late events (older than the watermark) are dropped by Spark.
    """
    action = F.col("action")
    # Heartbeats and unknown actions are dropped AFTER the aggregation (groups that counted nothing),
    # not before it: Spark's optimizer pushes a filter that does not use the event-time column below
    # the watermark operator, and a heartbeat filtered there would never move the watermark.
    return (
        events.groupBy(F.window("event_time", window_duration).alias("w"), F.col("page"))
        .agg(
            _count_if(action.isin(*COUNTED_ACTIONS)).alias("events"),
            _count_if(action == "view").alias("views"),
            _count_if(action == "click").alias("clicks"),
            _count_if(action == "purchase").alias("purchases"),
            F.sum(F.when(action == "purchase", F.col("amount_cents")).otherwise(0)).cast("long").alias("revenue_cents"),
        )
        .where(F.col("events") > 0)
        .select(
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            *STATS_COLUMNS[2:],
        )
    )


def to_kafka_records(stats: DataFrame) -> DataFrame:
    """Aggregates -> the Kafka sink's ``key``/``value`` columns.

    Key: the page (so one page's windows land in one partition, in order). Value: JSON with the
    window bounds as epoch milliseconds, which are exact and independent of any time zone.
    """
    value = F.to_json(
        F.struct(
            F.col("page"),
            F.unix_millis(F.col("window_start")).alias("window_start_ms"),
            F.unix_millis(F.col("window_end")).alias("window_end_ms"),
            *[F.col(c) for c in STATS_COLUMNS[3:]],
        )
    )
    return stats.select(F.col("page").alias("key"), value.alias("value"))


def clickstream_stats(raw: DataFrame, window_duration: str = "1 minute", watermark_delay: str | None = None) -> DataFrame:
    """The whole transformation: Kafka rows -> :func:`page_window_stats` (watermarked if a delay is given)."""
    events = parse_events(raw)
    if watermark_delay is not None:
        events = with_event_time_watermark(events, watermark_delay)
    return page_window_stats(events, window_duration)
