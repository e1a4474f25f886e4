"""Unit tests of the clickstream transformations on local Spark, with in-memory data (no Kafka).

The DataFrames imitate what Spark's Kafka source yields (a binary ``value`` column); the answers
come from ``generator.expected_page_windows``, a plain-Python reference aggregation. The
streaming test runs the same functions over a file stream to check the event-time semantics the
Kafka job relies on: windows are emitted once the watermark passes them, a heartbeat moves the
watermark without being counted, and late events are dropped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

import generator
import pytest

if importlib.util.find_spec("pyspark") is None:
    # Without this guard a missing pyspark would be a collection error instead of a skip/failure.
    _MSG = "SPARK MISSING: pyspark is not installed (pip install -e '.[test]')"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(_MSG, pytrace=False)
    pytest.skip(_MSG, allow_module_level=True)

import clickstream  # noqa: E402 - needs pyspark

WINDOW_MS = 60_000
START = generator.DEFAULT_START_MS


def kafka_like(spark, events: list[dict | str]):
    """Rows shaped like the Kafka source's: ``value`` is the UTF-8 JSON as bytes."""
    rows = [((e if isinstance(e, str) else json.dumps(e)).encode(),) for e in events]
    return spark.createDataFrame(rows, "value binary")


def stats_by_key(df) -> dict[tuple[str, int], dict]:
    """Collect page_window_stats output as ``(page, window_start_ms) -> counts`` (like the reference)."""
    rows = df.collect()
    for row in rows:
        assert (row["window_end"] - row["window_start"]).total_seconds() * 1000 == WINDOW_MS
    return stats_by_key_rows(rows)


def test_parse_events_keeps_well_formed_and_drops_the_rest(spark) -> None:
    good = {"event_id": "e1", "user_id": "u1", "page": "/home", "action": "view", "amount_cents": 0, "ts": START}
    no_amount = {"event_id": "e2", "user_id": "u2", "page": "/cart", "action": "purchase", "ts": START + 1}
    rows = [
        good,
        no_amount,
        "not json at all",
        {"event_id": "e3", "page": "/home", "action": "view"},  # no ts
        {"event_id": "e4", "ts": START, "action": "click"},  # no page
        "[1, 2, 3]",
    ]
    parsed = clickstream.parse_events(kafka_like(spark, rows))
    assert parsed.columns == ["event_id", "user_id", "page", "action", "amount_cents", "event_time"]
    got = sorted(parsed.collect(), key=lambda r: r["event_id"])
    assert [r["event_id"] for r in got] == ["e1", "e2"]
    assert got[1]["amount_cents"] == 0  # missing amount counts as 0, not null
    assert int(got[0]["event_time"].timestamp() * 1000) == START
    assert int(got[1]["event_time"].timestamp() * 1000) == START + 1


def test_window_stats_equal_the_reference_aggregation(spark) -> None:
    events = generator.make_events(400, step_ms=700)
    got = stats_by_key(clickstream.clickstream_stats(kafka_like(spark, events)))
    want = generator.expected_page_windows(events, WINDOW_MS)
    assert got == want
    assert sum(v["events"] for v in got.values()) == 400
    assert sum(v["revenue_cents"] for v in got.values()) == sum(e["amount_cents"] for e in events)


def test_window_bounds_heartbeats_and_unknown_actions(spark) -> None:
    base = {"user_id": "u", "page": "/p", "amount_cents": 0}
    events = [
        {**base, "event_id": "a", "action": "view", "ts": START + WINDOW_MS - 1},  # last ms of window 0
        {**base, "event_id": "b", "action": "click", "ts": START + WINDOW_MS},  # first ms of window 1
        {**base, "event_id": "c", "action": "purchase", "amount_cents": 250, "ts": START + WINDOW_MS + 5},
        {**base, "event_id": "d", "action": "scroll", "ts": START + 10},  # unknown action: not counted
        generator.heartbeat(START + 5 * WINDOW_MS),  # only moves event time
    ]
    got = stats_by_key(clickstream.clickstream_stats(kafka_like(spark, events)))
    assert got == {
        ("/p", START): {"events": 1, "views": 1, "clicks": 0, "purchases": 0, "revenue_cents": 0},
        ("/p", START + WINDOW_MS): {"events": 2, "views": 0, "clicks": 1, "purchases": 1, "revenue_cents": 250},
    }


def test_kafka_records_are_keyed_by_page_with_exact_window_millis(spark) -> None:
    events = generator.make_events(120)
    stats = clickstream.clickstream_stats(kafka_like(spark, events))
    records = clickstream.to_kafka_records(stats).collect()
    want = generator.expected_page_windows(events, WINDOW_MS)
    assert len(records) == len(want)
    for rec in records:
        value = json.loads(rec["value"])
        assert rec["key"] == value["page"]
        assert value["window_end_ms"] - value["window_start_ms"] == WINDOW_MS
        counts = {k: value[k] for k in clickstream.STATS_COLUMNS[3:]}
        assert counts == want[(value["page"], value["window_start_ms"])]


def test_make_events_is_deterministic_and_resumable() -> None:
    assert generator.make_events(15)[5:] == generator.make_events(10, first=5)
    times = [e["ts"] for e in generator.make_events(50)]
    assert times == sorted(times)


def _wait_rows(spark, table: str, want: int, query, timeout: float = 90.0) -> list:
    """Poll a memory-sink table until it has ``want`` rows (the closing no-data batch runs later)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = spark.sql(f"SELECT * FROM {table}").collect()
        if len(rows) >= want or time.monotonic() > deadline:
            return rows
        assert query.exception() is None, query.exception()
        time.sleep(0.5)


def test_streaming_watermark_closes_windows_and_drops_late_events(spark, tmp_path: Path) -> None:
    """The same functions on a stream: append mode emits a window only after the watermark passes it."""
    source = tmp_path / "in"
    source.mkdir()

    def drop(name: str, events: list[dict]) -> None:
        # Write then rename: the file source must never see a half-written file.
        tmp = tmp_path / f".{name}"
        tmp.write_text("".join(json.dumps(e) + "\n" for e in events))
        tmp.rename(source / name)

    phase1 = generator.make_events(150)  # event times START .. START+149 s: windows 0, 1, 2
    drop("1.json", phase1)
    raw = spark.readStream.format("text").load(str(source))
    stats = clickstream.clickstream_stats(raw, "1 minute", watermark_delay="30 seconds")
    query = (
        stats.writeStream.format("memory").queryName("clickstream_unit").outputMode("append")
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="500 milliseconds").start()
    )
    try:
        query.processAllAvailable()
        want1 = generator.expected_page_windows(phase1, WINDOW_MS)
        # Max event time START+149 s, watermark START+119 s: windows 0 and 1 are closed, 2 is open.
        closed = {k: v for k, v in want1.items() if k[1] + WINDOW_MS <= START + 119_000}
        rows = _wait_rows(spark, "clickstream_unit", len(closed), query)
        assert stats_by_key_rows(rows) == closed

        late = {"event_id": "late", "user_id": "u", "page": "/home", "action": "view", "amount_cents": 0, "ts": START}
        drop("2.json", [late, generator.heartbeat(START + 10 * WINDOW_MS)])
        query.processAllAvailable()
        rows = _wait_rows(spark, "clickstream_unit", len(want1), query)
        # Every window of phase 1 exactly once, the late event not counted, the heartbeat not emitted.
        assert stats_by_key_rows(rows) == want1
        assert len(rows) == len(want1)
    finally:
        query.stop()


def stats_by_key_rows(rows: list) -> dict[tuple[str, int], dict]:
    """:func:`stats_by_key` for already collected rows (no duplicates allowed)."""
    out = {}
    for row in rows:
        key = (row["page"], int(row["window_start"].timestamp() * 1000))
        assert key not in out, f"window emitted twice: {key}"
        out[key] = {k: row[k] for k in clickstream.STATS_COLUMNS[3:]}
    return out
