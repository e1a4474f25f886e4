"""Clickstream generator: deterministic events, a kafka-python producer, and the expected aggregates.

    python pipelines/generator.py --bootstrap 127.0.0.1:9092 --topic clicks --count 500 [--heartbeat]

Events are a pure function of (seed, first index, start time): a test can regenerate exactly what
was sent and compute the answer with :func:`expected_page_windows`, a plain-Python reference of
``clickstream.page_window_stats``. Each record's Kafka timestamp is its event time, so
``startingTimestamp`` reads and ListOffsets by timestamp see event time too.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from collections.abc import Iterable

PAGES = ("/home", "/search", "/product", "/cart", "/checkout")
ACTIONS = ("view", "view", "view", "click", "click", "purchase")
#: 2026-01-01T00:00:00Z: a fixed event-time origin, so windows are the same on every run.
DEFAULT_START_MS = 1_767_225_600_000


def make_events(
    count: int,
    *,
    first: int = 0,
    start_ms: int = DEFAULT_START_MS,
    step_ms: int = 1000,
    users: int = 12,
    seed: int = 7,
) -> list[dict]:
    """Events ``first .. first+count-1``; event ``i`` happens at ``start_ms + i * step_ms``.

    Times only grow, so no event is late for a watermark of at least a few steps. The random
    choices are seeded per index: ``make_events(10, first=5)`` equals ``make_events(15)[5:]``.
    """
    events = []
    for i in range(first, first + count):
        rnd = random.Random(seed * 1_000_003 + i)
        action = rnd.choice(ACTIONS)
        events.append(
            {
                "event_id": f"e-{i:06d}",
                "user_id": f"u-{rnd.randrange(users):02d}",
                "page": rnd.choice(PAGES),
                "action": action,
                "amount_cents": rnd.randrange(100, 10_000) if action == "purchase" else 0,
                "ts": start_ms + i * step_ms,
            }
        )
    return events


def heartbeat(ts_ms: int) -> dict:
    """An event that only moves event time forward (never counted; see ``clickstream``)."""
    return {"event_id": f"hb-{ts_ms}", "user_id": "", "page": "__heartbeat__", "action": "heartbeat",
            "amount_cents": 0, "ts": ts_ms}


def window_start(ts_ms: int, window_ms: int) -> int:
    """Start of the tumbling window holding ``ts_ms`` (Spark's windows start at the epoch)."""
    return ts_ms - ts_ms % window_ms


def expected_page_windows(events: Iterable[dict], window_ms: int = 60_000) -> dict[tuple[str, int], dict]:
    """Reference aggregation: ``(page, window_start_ms) -> {events, views, clicks, purchases, revenue_cents}``."""
    out: dict[tuple[str, int], dict] = defaultdict(
        lambda: {"events": 0, "views": 0, "clicks": 0, "purchases": 0, "revenue_cents": 0}
    )
    for e in events:
        if e["action"] not in ("view", "click", "purchase"):
            continue
        row = out[(e["page"], window_start(e["ts"], window_ms))]
        row["events"] += 1
        row[e["action"] + "s"] += 1
        if e["action"] == "purchase":
            row["revenue_cents"] += e["amount_cents"]
    return dict(out)


def produce(bootstrap: str, topic: str, events: Iterable[dict], *, client_id: str = "clickstream-generator") -> dict[int, int]:
    """Send events (key = user id, timestamp = event time), wait for every ack.

    Returns ``partition -> next offset`` (one past the last offset written there), which is what a
    backfill's ``endingOffsets`` needs. The producer is idempotent with acks=all, as the Java
    client's defaults are.
    """
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
    )
    try:
        futures = [
            producer.send(topic, key=e["user_id"].encode(), value=json.dumps(e, separators=(",", ":")).encode(),
                          timestamp_ms=e["ts"])
            for e in events
        ]
        producer.flush(timeout=60)
        ends: dict[int, int] = {}
        for f in futures:
            md = f.get(timeout=60)
            ends[md.partition] = max(ends.get(md.partition, 0), md.offset + 1)
        return ends
    finally:
        producer.close(timeout=10)


def main(argv: list[str] | None = None) -> None:
    """Command line: produce ``--count`` events (optionally followed by a heartbeat)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default="clicks")
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--first", type=int, default=0, help="index of the first event (continue a previous run)")
    ap.add_argument("--start-ms", type=int, default=DEFAULT_START_MS)
    ap.add_argument("--step-ms", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--heartbeat", action="store_true",
                    help="finish with a heartbeat 10 minutes after the last event, closing every window")
    args = ap.parse_args(argv)
    events = make_events(args.count, first=args.first, start_ms=args.start_ms, step_ms=args.step_ms, seed=args.seed)
    if args.heartbeat and events:
        events.append(heartbeat(events[-1]["ts"] + 600_000))
    ends = produce(args.bootstrap, args.topic, events)
    print(json.dumps({"topic": args.topic, "sent": len(events), "end_offsets": ends}))


if __name__ == "__main__":
    main()
