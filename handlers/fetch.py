"""Fetch: long-polling reads that send record bytes straight from segment files.

The handler asks each partition log for file slices (never the bytes), honours the
request's and each partition's byte limits (the first batch is always returned whole so a
consumer can make progress), waits for appends up to max_wait_ms while fewer than
min_bytes are ready, and keeps KIP-227 fetch sessions.
"""

from __future__ import annotations

import time

from ..kraft.raft_leader import is_metadata_fetch
from ..logstore.errors import OffsetOutOfRangeError
from ..quota.throttle import fetch_max_bytes, fetch_throttle_ms
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .common import error_code_for, leader_epoch_error
from .fetch_sessions import CachedPartition, SessionError
from .registry import RequestContext, handles

FETCH_KEY = 1
FetchResponse = response_class(FETCH_KEY)
TopicData = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction

READ_COMMITTED = 1
# Kafka's fetch.max.bytes broker default caps a request's max_bytes.
BROKER_FETCH_MAX_BYTES = 55 * 1024 * 1024


class _Read:
    """The outcome of reading one partition in one pass."""

    __slots__ = ("key", "code", "hw", "lso", "log_start", "slices", "size", "aborted", "diverging", "preferred")

    def __init__(self, key, code=ErrorCode.NONE, hw=-1, lso=-1, log_start=-1, slices=(), size=0, aborted=None,
                 diverging=None, preferred=-1):
        self.key = key
        self.preferred = preferred  # KIP-392: the replica the consumer should fetch from instead
        self.diverging = diverging  # a follower's (epoch, end offset) where its log left this one's
        self.code = code
        self.hw = hw
        self.lso = lso
        self.log_start = log_start
        self.slices = slices
        self.size = size
        self.aborted = aborted


def _read_all(ctx: RequestContext, keys, cached: dict, use_ids: bool, max_bytes: int, committed: bool,
              watch: list | None = None, follower: int = -1, last_epochs: dict | None = None,
              client_rack: str = "") -> list[_Read]:
    """Read every partition once; `watch` collects the (topic, index) of the partitions read.
    `follower` >= 0: a replica's fetch (Kafka's FetchFromFollower): read up to the log end, the
    diverging epoch checked against its `last_epochs`, and its position given to the leader's Partition."""
    broker = ctx.broker
    meta = broker.metadata
    reads = []
    remaining = max_bytes
    min_one = True
    racks = None  # broker id -> rack, looked up once for a rack-aware consumer
    for key in keys:
        topic_ref, index = key
        part = cached[key]
        topic = meta.by_id(topic_ref) if use_ids else meta.get(topic_ref)
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_ID if use_ids else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            reads.append(_Read(key, code))
            continue
        plog = broker.partition_log(topic.name, index) if 0 <= index < topic.partitions else None
        epoch = plog.leader_epoch if plog is not None else -1
        if plog is None and client_rack and follower < 0 and 0 <= index < topic.partitions:
            # KIP-392: a consumer that names its rack may read from this follower
            found = broker.replica_manager.follower_read(topic.name, index)
            if found is not None:
                plog, epoch = found
        if plog is None:
            reads.append(_Read(key, broker.partition_error(topic.name, index) if 0 <= index < topic.partitions
                               else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        epoch_error = leader_epoch_error(part.current_leader_epoch, epoch)
        if epoch_error:
            reads.append(_Read(key, epoch_error))
            continue
        if watch is not None:
            watch.append((topic.name, index))
        hw = plog.high_watermark
        lso = getattr(plog, "last_stable_offset", hw)
        limit = lso if committed else hw
        if follower >= 0:
            diverging = _diverging(plog, part.fetch_offset, (last_epochs or {}).get(key, -1))
            if diverging is not None:
                reads.append(_Read(key, ErrorCode.NONE, hw, lso, plog.log_start_offset, diverging=diverging))
                continue
            if 0 <= part.fetch_offset <= plog.log_end_offset:
                broker.replica_manager.follower_fetch(topic.name, index, follower, part.fetch_offset)
            hw = plog.high_watermark
            lso = getattr(plog, "last_stable_offset", hw)
            if broker.replica_manager.leader_throttled(topic.name, index, follower):
                # a replication throttle (leader.replication.throttled.*): no records this time
                reads.append(_Read(key, ErrorCode.NONE, hw, lso, plog.log_start_offset))
                continue
            limit = None  # a follower copies everything the leader has
        elif client_rack and _rack_aware(broker):
            if racks is None:
                racks = _racks(broker)
            preferred = broker.replica_manager.preferred_read_replica(
                topic.name, index, client_rack, part.fetch_offset, racks)
            if preferred >= 0:
                reads.append(_Read(key, ErrorCode.NONE, hw, lso, plog.log_start_offset, preferred=preferred))
                continue
        try:
            data = plog.read(part.fetch_offset, min(part.max_bytes, remaining), limit, min_one)
        except OffsetOutOfRangeError:
            reads.append(_Read(key, ErrorCode.OFFSET_OUT_OF_RANGE, hw, lso, plog.log_start_offset))
            continue
        except Exception as exc:
            reads.append(_Read(key, error_code_for(exc), hw, lso, plog.log_start_offset))
            continue
        size = data.size
        aborted = None
        if committed:
            aborted = []
            collect = getattr(plog, "collect_aborted_transactions", None)
            if collect is not None and size:
                # the bound is an offset (Kafka: the index entry after the returned bytes), not a size
                upper = min(plog.fetch_upper_bound_offset(data), limit)
                aborted = [
                    AbortedTransaction(producer_id=pid, first_offset=first)
                    for pid, first in collect(part.fetch_offset, upper)
                ]
        if size:
            min_one = False
            remaining = max(0, remaining - size)
        reads.append(_Read(key, ErrorCode.NONE, hw, lso, plog.log_start_offset, data.slices, size, aborted))
    return reads


def _record_throttled(broker, reads: list[_Read], use_ids: bool) -> None:
    """Count a follower fetch's bytes of throttled partitions in the leader-side replication
    quota (Kafka's KafkaApis: quotas.leader.record of the throttled partitions' size)."""
    quota = broker.replica_manager.leader_quota
    if not quota.throttled:
        return
    meta = broker.metadata
    size = 0
    for r in reads:
        if r.size:
            topic = meta.by_id(r.key[0]) if use_ids else meta.get(r.key[0])
            if topic is not None and quota.is_throttled(topic.name, r.key[1]):
                size += r.size
    quota.record(size)


#: Kafka's replica.selector.class that sends consumers to a replica in their rack (KIP-392).
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _rack_aware(broker) -> bool:
    return broker.config.get("replica.selector.class") == RACK_AWARE_SELECTOR and \
        getattr(broker, "replica_manager", None) is not None


def _racks(broker) -> dict[int, str | None]:
    """broker id -> broker.rack of the registered brokers."""
    return {b.node_id: b.rack for b in broker.metadata_cache.all_brokers_any_listener()}


def _diverging(plog, fetch_offset: int, last_epoch: int) -> tuple[int, int] | None:
    """Kafka's Partition.fetchRecords check of a follower's last fetched epoch: (epoch, end offset)
    of this log for it when the follower's log cannot continue from `fetch_offset`."""
    if last_epoch < 0:
        return None
    epoch, end = plog.end_offset_for_epoch(last_epoch)
    if epoch < 0:
        return None
    if end < fetch_offset or epoch < last_epoch:
        return epoch, end
    return None


def _response_size(reads: list[_Read], use_ids: bool) -> int:
    """About the size of the response these reads make (what Kafka's consumer_byte_rate counts):
    the records plus each partition's and topic's fixed fields."""
    topics = len({r.key[0] for r in reads})
    names = 0 if use_ids else sum(len(str(ref)) for ref in {r.key[0] for r in reads})
    return 16 + topics * (20 if use_ids else 6) + names + sum(r.size + 46 for r in reads)


@handles(FETCH_KEY, 4, supported_versions(FETCH_KEY)[1])
async def handle_fetch(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    if getattr(ctx.broker, "quorum_controller", None) is not None and is_metadata_fetch(request):
        # a broker of this controller's cluster following the metadata log (KRaft)
        from .controller_apis import metadata_fetch  # noqa: PLC0415

        return await metadata_fetch(ctx, version, request)
    use_ids = version >= 13
    committed = request.isolation_level == READ_COMMITTED
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    follower = replica_id if replica_id >= 0 and getattr(ctx.broker, "replica_manager", None) is not None else -1
    if follower >= 0 and follower in ctx.broker.faults.partitioned:
        # a test's network partition (odradek.faults): the request is lost on the way, unanswered
        ctx.broker.faults.dropped_fetches += 1
        return None
    last_epochs = {((t.topic_id if use_ids else t.topic), p.partition): p.last_fetched_epoch
                   for t in request.topics for p in t.partitions} if follower >= 0 and version >= 12 else None
    rack = (request.rack_id or "") if version >= 11 and getattr(ctx.broker, "replica_manager", None) is not None \
        else ""
    full: list = []
    for topic in request.topics:
        ref = topic.topic_id if use_ids else topic.topic
        for p in topic.partitions:
            full.append(
                ((ref, p.partition), CachedPartition(p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch))
            )
    forgotten = [
        ((t.topic_id if use_ids else t.topic), index) for t in (request.forgotten_topics_data or []) for index in t.partitions
    ]
    cache = ctx.broker.fetch_sessions
    session_id = request.session_id if version >= 7 else 0
    epoch = request.session_epoch if version >= 7 else -1
    try:
        if follower >= 0:
            # replicas fetch without a session here: every request is a full one (session id 0)
            session, keys, incremental = None, [k for k, _ in full], False
        else:
            session, keys, incremental = cache.begin(session_id, epoch, full, forgotten)
    except SessionError as exc:
        return FetchResponse(throttle_time_ms=0, error_code=int(exc.code), session_id=0, responses=[])
    cached = session.partitions if session is not None else dict(full)
    max_bytes = min(request.max_bytes if version >= 3 else BROKER_FETCH_MAX_BYTES, BROKER_FETCH_MAX_BYTES)
    # a consumer with a consumer_byte_rate asks for no more than one quota span's worth (KafkaApis)
    max_bytes = int(min(max_bytes, fetch_max_bytes(ctx, header, request)))
    started = time.perf_counter()
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    while True:
        watch: list = []
        reads = _read_all(ctx, keys, cached, use_ids, max_bytes, committed, watch, follower, last_epochs, rack)
        total = sum(r.size for r in reads)
        has_error = any(r.code != ErrorCode.NONE for r in reads)
        remaining = deadline - time.monotonic()
        if total >= min(request.min_bytes, max_bytes) or has_error or remaining <= 0 or not keys:
            break
        # woken only by appends to the partitions this fetch reads (or by coordinator records /
        # transaction markers, which wake every fetch), else at the deadline
        waiting = time.perf_counter()
        woken = await ctx.broker.wait_for_append(remaining, watch)
        # the long poll's wait is no handling time for the request quota
        ctx.extra["waited_s"] = ctx.extra.get("waited_s", 0.0) + time.perf_counter() - waiting
        if not woken:
            reads = _read_all(ctx, keys, cached, use_ids, max_bytes, committed, None, follower, last_epochs, rack)
            break
    throttle_ms = fetch_throttle_ms(ctx, header, request, _response_size(reads, use_ids),
                                    time.perf_counter() - started)
    if throttle_ms:
        # over a quota: Kafka answers empty (getThrottledResponse), the session's partitions untouched
        return FetchResponse(throttle_time_ms=throttle_ms, error_code=0,
                             session_id=session.session_id if session is not None and incremental else 0,
                             responses=[])
    if follower >= 0:
        _record_throttled(ctx.broker, reads, use_ids)
    if follower < 0 and (metrics := getattr(ctx.broker, "metrics", None)) is not None:
        # BytesOutPerSec (Kafka counts a replica's fetches apart, as replication bytes)
        metrics.fetched_reads(reads, use_ids)
    # Kafka's FetchResponse.toMessage starts a new topic entry whenever the topic differs from the
    # previous partition's, so a request naming one topic twice (non-adjacent) is answered with two
    # entries for it, in request order; grouping all of a topic's partitions would change the shape.
    by_topic: list[tuple[object, list]] = []
    for r in reads:
        part = cached[r.key]
        if incremental:
            changed = (
                r.size > 0
                or r.code != ErrorCode.NONE
                or r.hw != part.high_watermark
                or r.log_start != part.log_start_offset
                or r.lso != part.last_stable_offset
            )
            if not changed:
                continue
        part.high_watermark, part.log_start_offset, part.last_stable_offset = r.hw, r.log_start, r.lso
        topic_ref, index = r.key
        if not by_topic or by_topic[-1][0] != topic_ref:
            by_topic.append((topic_ref, []))
        data = PartitionData(
            partition_index=index,
            error_code=int(r.code),
            high_watermark=r.hw,
            last_stable_offset=r.lso,
            log_start_offset=r.log_start,
            aborted_transactions=r.aborted,
            preferred_read_replica=r.preferred,
            records=list(r.slices) if r.slices else b"",
        )
        if r.diverging is not None:
            data.diverging_epoch = FetchResponse.EpochEndOffset(epoch=r.diverging[0], end_offset=r.diverging[1])
        by_topic[-1][1].append(data)
    responses = [
        TopicData(topic="" if use_ids else ref, topic_id=ref if use_ids else TopicData().topic_id, partitions=parts)
        for ref, parts in by_topic
    ]
    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=session.session_id if session is not None else 0,
        responses=responses,
    )
