"""The message browser and the produce form: read a page of records, render them, send one.

A page is read with a few Fetch rounds from a start position per partition (an offset, the
offset of a timestamp, or the last N of each partition) and never holds more than one Fetch
response (`FETCH_MAX_BYTES`) plus the page, whatever the topic's size. Keys, values and header
values are sent to the browser as text (when they are UTF-8), pretty JSON (when they parse as
JSON) and hex, each cut at `SHOW_BYTES`; the page picks which to show.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from ..tools.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    FetchedRecord,
    KafkaClient,
    KafkaError,
    TopicInfo,
)
from ..tools.partitioner import partition_for_key
from ..wire.errors import ErrorCode
from ..wire.records import SimpleRecord, build_batch

SHOW_BYTES = 16 * 1024  # longer keys/values are cut for display (the size is still shown)
FETCH_MAX_BYTES = 1024 * 1024
MAX_LIMIT = 500
MAX_ROUNDS = 20


def render(data: bytes | None) -> dict[str, Any] | None:
    """`data` as the browser shows it: text, pretty JSON and hex (None for a null key/value)."""
    if data is None:
        return None
    truncated = len(data) > SHOW_BYTES
    shown = data[:SHOW_BYTES]
    text: str | None
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The cut may split the last character; anything earlier means it is not text.
        text = shown[:exc.start].decode("utf-8") if truncated and exc.start >= len(shown) - 3 else None
    pretty = None
    if text is not None and not truncated and text.lstrip()[:1] in ("{", "["):
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return {"size": len(data), "truncated": truncated, "text": text, "json": pretty, "hex": shown.hex(" ")}


def record_json(r: FetchedRecord) -> dict[str, Any]:
    return {
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": r.timestamp_type,
        "key": render(r.key),
        "value": render(r.value),
        "headers": [{"key": k, "value": render(v)} for k, v in r.headers],
    }


def _topic(client: KafkaClient, name: str) -> TopicInfo:
    info = client.metadata([name]).get(name)
    if info is None or info.error_code:
        raise KafkaError(info.error_code if info else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name}")
    return info


def start_positions(client: KafkaClient, info: TopicInfo, partitions: list[int], mode: str, value: int | None,
                    limit: int) -> tuple[dict[int, int], dict[int, int]]:
    """(start offset, end offset) per partition for a page that starts at `mode`/`value`.

    mode: "end" (the last `limit` records of each partition), "beginning", "offset" (`value` in
    each partition, clamped to the log) or "timestamp" (`value` ms since the epoch; partitions
    with nothing at or after it start at their end).
    """
    starts = client.list_offsets(info, partitions, EARLIEST_TIMESTAMP)
    ends = client.list_offsets(info, partitions, LATEST_TIMESTAMP)
    if mode == "end":
        return {p: max(starts[p], ends[p] - limit) for p in partitions}, ends
    if mode == "beginning":
        return dict(starts), ends
    if mode == "offset":
        if value is None:
            raise ValueError("an offset is needed")
        return {p: min(max(value, starts[p]), ends[p]) for p in partitions}, ends
    if mode == "timestamp":
        if value is None:
            raise ValueError("a timestamp is needed")
        found = client.list_offsets(info, partitions, value)
        return {p: found[p] if found[p] >= 0 else ends[p] for p in partitions}, ends
    raise ValueError(f"unknown start {mode!r}: end, beginning, offset or timestamp")


def read_page(client: KafkaClient, topic: str, *, partition: int | None = None, mode: str = "end",
              value: int | None = None, limit: int = 50) -> dict[str, Any]:
    """A page of at most `limit` records from the start `mode` says (see :func:`start_positions`).

    Records are ordered by timestamp, partition and offset; with mode "end" the page holds the
    newest `limit` of them. `positions` (next offset per partition) is where follow mode goes on.
    """
    limit = max(1, min(limit, MAX_LIMIT))
    info = _topic(client, topic)
    if partition is not None and partition not in info.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
    partitions = sorted(info.partitions) if partition is None else [partition]
    starts, ends = start_positions(client, info, partitions, mode, value, limit)
    records, positions = _page(client, info, starts, ends, limit, newest=mode == "end")
    return {
        "topic": topic,
        "records": [record_json(r) for r in records],
        "positions": {str(p): o for p, o in sorted(positions.items())},
        "end_offsets": {str(p): o for p, o in sorted(ends.items())},
    }


def follow(client: KafkaClient, topic: str, positions: dict[int, int], limit: int = 200) -> dict[str, Any]:
    """Records after `positions` (partition -> next offset) that arrived since the last call."""
    limit = max(1, min(limit, MAX_LIMIT))
    info = _topic(client, topic)
    starts = {p: o for p, o in positions.items() if p in info.partitions}
    for p in info.partitions:
        starts.setdefault(p, 0)  # a partition added since the page was read: from its beginning
    ends = client.list_offsets(info, sorted(starts), LATEST_TIMESTAMP)
    # Like `tail -f`: when more arrived than a page holds, show the newest and say how many were skipped.
    skipped = 0
    for p, end in ends.items():
        if end - starts[p] > limit:
            skipped += end - limit - starts[p]
            starts[p] = end - limit
    records, next_positions = _page(client, info, starts, ends, limit, newest=True)
    return {"topic": topic, "records": [record_json(r) for r in records], "skipped": skipped,
            "positions": {str(p): o for p, o in sorted(next_positions.items())}}


def _page(client: KafkaClient, info: TopicInfo, starts: dict[int, int], ends: dict[int, int], limit: int, *,
          newest: bool) -> tuple[list[FetchedRecord], dict[int, int]]:
    """Read from `starts` until each partition passed `ends` or enough records are in; keep the
    oldest (or `newest`) `limit` in timestamp order; return them and where to go on."""
    positions = dict(starts)
    wanted = limit * (len(starts) if newest else 1)
    records: list[FetchedRecord] = []
    for _ in range(MAX_ROUNDS):
        pending = {p: o for p, o in positions.items() if o < ends.get(p, 0)}
        if not pending or len(records) >= wanted:
            break
        before = dict(pending)
        records.extend(client.fetch(info, pending, max_wait_ms=0, max_bytes=FETCH_MAX_BYTES))
        positions.update(pending)
        if pending == before:
            break  # nothing moved (a leader change, say): the next page or poll asks again
    records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    if len(records) <= limit:
        return records, positions
    if newest:
        # The dropped records are older than the kept ones: going on from `positions` skips none.
        return records[-limit:], positions
    kept = records[:limit]
    next_positions = dict(starts)
    for r in kept:
        next_positions[r.partition] = max(next_positions[r.partition], r.offset + 1)
    return kept, next_positions


def produce(client: KafkaClient, topic: str, *, key: str | None, value: str | None,
            headers: list[tuple[str, str]], partition: int | None = None) -> dict[str, Any]:
    """Send one record (UTF-8 key/value/headers) with acks=all; returns where it landed."""
    info = client.topic(topic)
    count = len(info.partitions)
    key_bytes = None if key is None else key.encode()
    if partition is None:
        partition = partition_for_key(key_bytes, count) if key_bytes is not None else random.randrange(count)
    elif partition not in info.partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
    record = SimpleRecord(None if value is None else value.encode(), key_bytes,
                          [(k, None if v is None else v.encode()) for k, v in headers], int(time.time() * 1000))
    offsets = client.produce(topic, {partition: build_batch([record])}, acks=-1,
                             leaders={partition: info.partitions[partition].leader})
    return {"topic": topic, "partition": partition, "offset": offsets[partition]}
