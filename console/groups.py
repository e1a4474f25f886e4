"""The groups pages: every group, and one group's members, offsets, lag and lag over time.

Classic groups are described with DescribeGroups, KIP-848 consumer groups with
ConsumerGroupDescribe and share groups with ShareGroupDescribe (whichever the broker serves).
Lag per partition is log end offset - committed offset, as kafka-consumer-groups.sh shows it.
The console keeps each group's total lag at every look (the group page asks every few
seconds) in a bounded in-memory history, which the page draws as a plot.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from ..tools.client import KafkaClient, KafkaError, check
from ..tools.consumer_groups import log_end_offsets
from ..tools.group_client import (
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    decode_assignment,
    fetch_committed,
    find_coordinator,
)
from ..wire.protocol import request_class

CONSUMER_GROUP_DESCRIBE = 69
SHARE_GROUP_DESCRIBE = 77
DESCRIBE_SHARE_GROUP_OFFSETS = 90
HISTORY_POINTS = 720  # 1 h of lag history at the page's 5 s refresh; ~30 kB per group


def list_groups(client: KafkaClient) -> list[dict[str, Any]]:
    """Every group of every broker, with its type (classic, consumer, share) and state."""
    client.metadata([])
    out: dict[str, dict[str, Any]] = {}
    for node_id in sorted(client.brokers):
        response = client.send(LIST_GROUPS, request_class(LIST_GROUPS)(), node_id)
        check(response.error_code, "ListGroups")
        for g in response.groups:
            out[g.group_id] = {"group_id": g.group_id, "protocol_type": g.protocol_type,
                               "state": g.group_state or "", "type": (g.group_type or "classic").lower()}
    return sorted(out.values(), key=lambda g: g["group_id"])


class LagHistory:
    """(time ms, total lag) samples per group, the newest HISTORY_POINTS of each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: dict[str, deque[tuple[int, int]]] = {}

    def add(self, group: str, lag: int) -> list[tuple[int, int]]:
        now = int(time.time() * 1000)
        with self._lock:
            samples = self._samples.setdefault(group, deque(maxlen=HISTORY_POINTS))
            samples.append((now, lag))
            return list(samples)


def describe(client: KafkaClient, group: str, group_type: str | None = None) -> dict[str, Any]:
    """Members with their assignments, then committed offset, end offset and lag per partition."""
    if group_type is None:
        group_type = next((g["type"] for g in list_groups(client) if g["group_id"] == group), "classic")
    coordinator = find_coordinator(client, group)
    conn = client.connection(coordinator)
    if group_type == "consumer" and conn.supports(CONSUMER_GROUP_DESCRIBE):
        desc = _describe_new(client, group, coordinator, CONSUMER_GROUP_DESCRIBE)
    elif group_type == "share" and conn.supports(SHARE_GROUP_DESCRIBE):
        desc = _describe_new(client, group, coordinator, SHARE_GROUP_DESCRIBE)
    else:
        desc = _describe_classic(client, group, coordinator)
    desc["type"] = group_type
    desc["coordinator"] = coordinator
    owners = {(a["topic"], a["partition"]): m["member_id"] for m in desc["members"] for a in m["assignment"]}
    # Share groups keep no committed offsets in OffsetFetch: their start offsets (and, from v1,
    # their lag) come from the share coordinator through DescribeShareGroupOffsets.
    share_lag: dict[tuple[str, int], int] = {}
    if group_type == "share":
        committed, share_lag = _share_offsets(client, group, coordinator)
    else:
        committed = fetch_committed(client, group)
    partitions = set(committed) | set(owners)
    ends = log_end_offsets(client, partitions)
    rows = []
    for topic, partition in sorted(partitions):
        current = committed.get((topic, partition))
        end = ends.get((topic, partition))
        lag = share_lag.get((topic, partition))
        if lag is None and current is not None and end is not None:
            lag = end - current
        rows.append({
            "topic": topic, "partition": partition, "committed": current, "end_offset": end, "lag": lag,
            "member_id": owners.get((topic, partition)),
        })
    desc["offsets"] = rows
    desc["total_lag"] = sum(r["lag"] for r in rows if r["lag"] is not None)
    return desc


def _describe_classic(client: KafkaClient, group: str, coordinator: int) -> dict[str, Any]:
    response = client.send(DESCRIBE_GROUPS, request_class(DESCRIBE_GROUPS)(groups=[group]), coordinator)
    g = response.groups[0]
    check(g.error_code, f"DescribeGroups {group}")
    members = []
    for m in g.members:
        assignment = []
        if g.protocol_type == "consumer" and m.member_assignment:
            try:
                assignment = [{"topic": t, "partition": p} for t, p in decode_assignment(m.member_assignment)]
            except (ValueError, IndexError):
                assignment = []  # an assignor with its own format: the console cannot read it
        members.append({"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                        "assignment": sorted(assignment, key=lambda a: (a["topic"], a["partition"]))})
    return {"group_id": g.group_id, "state": g.group_state, "protocol_type": g.protocol_type,
            "protocol": g.protocol_data, "members": members}


def _describe_new(client: KafkaClient, group: str, coordinator: int, api_key: int) -> dict[str, Any]:
    response = client.send(api_key, request_class(api_key)(group_ids=[group], include_authorized_operations=False),
                           coordinator)
    g = response.groups[0]
    if g.error_code:
        raise KafkaError(g.error_code, g.error_message or f"describing group {group}")
    members = []
    for m in g.members:
        assignment = [{"topic": tp.topic_name, "partition": p}
                      for tp in (m.assignment.topic_partitions if m.assignment else ()) for p in tp.partitions]
        members.append({"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                        "assignment": sorted(assignment, key=lambda a: (a["topic"], a["partition"]))})
    return {"group_id": g.group_id, "state": g.group_state,
            "protocol_type": "share" if api_key == SHARE_GROUP_DESCRIBE else "consumer",
            "protocol": g.assignor_name, "members": members}


def _share_offsets(client: KafkaClient, group: str, coordinator: int
                   ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """(start offset, lag) per partition of a share group; empty when the broker cannot say."""
    if not client.connection(coordinator).supports(DESCRIBE_SHARE_GROUP_OFFSETS):
        return {}, {}
    cls = request_class(DESCRIBE_SHARE_GROUP_OFFSETS)
    response = client.send(DESCRIBE_SHARE_GROUP_OFFSETS, cls(
        groups=[cls.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), coordinator)
    g = response.groups[0]
    check(g.error_code, g.error_message or f"DescribeShareGroupOffsets {group}")
    starts, lags = {}, {}
    for t in g.topics:
        for p in t.partitions:
            if p.error_code or p.start_offset < 0:
                continue
            starts[(t.topic_name, p.partition_index)] = p.start_offset
            if getattr(p, "lag", -1) >= 0:
                lags[(t.topic_name, p.partition_index)] = p.lag
    return starts, lags
