"""The follower side of replication (Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

For every partition this broker follows, a fetcher per leader broker sends Fetch as a replica
(ReplicaState with its id and broker epoch, the leader epoch it follows, its log end offset and
the epoch of its last batch), and appends the leader's batches as they are: offsets, epochs and
bytes kept, the producer state and transaction index built as on the leader. A diverging epoch
in the answer truncates the log where it left the leader's; an offset out of range resets it to
the leader's log (truncated to its end, or started at its log start). The high watermark is the
leader's, never past the local log end.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from ..faults import Faults
from ..kraft.node_client import NodeConnection, NodeUnavailableError
from ..wire.errors import ErrorCode
from ..wire.protocol import request_class
from ..wire.records import iter_batches

if TYPE_CHECKING:
    from ..logstore.partition_log import PartitionLog
    from .partition import Partition
    from .replication_quota import ReplicationQuotaManager

log = logging.getLogger(__name__)

FETCH = 1
LIST_OFFSETS = 2
FetchRequest = request_class(FETCH)
ListOffsetsRequest = request_class(LIST_OFFSETS)

#: Kafka's replica.fetch.* defaults.
FETCH_WAIT_MAX_MS = 500
FETCH_MIN_BYTES = 1
FETCH_MAX_BYTES = 1024 * 1024
FETCH_RESPONSE_MAX_BYTES = 10 * 1024 * 1024
BACKOFF_S = 1.0

_RETRY = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.KAFKA_STORAGE_ERROR,
          ErrorCode.OFFSET_NOT_AVAILABLE}


@dataclass
class Followed:
    """A partition this broker follows: whom, in which leader epoch."""

    part: Partition
    leader: int
    leader_epoch: int
    #: caught up with the leader's high watermark at the last fetch (Kafka's isReplicaInSync):
    #: a replication throttle never holds back a partition that is
    in_sync: bool = False


class ReplicaFetcherManager:
    """Fetchers per leader broker for the partitions this broker follows."""

    def __init__(self, node_id: int, broker_epoch: Any, endpoint: Any,
                 quota: ReplicationQuotaManager | None = None) -> None:
        self.node_id = node_id
        self._broker_epoch = broker_epoch  # () -> this broker's epoch
        self._endpoint = endpoint  # (broker id) -> (host, port) on the inter-broker listener, or None
        self.followed: dict[tuple[str, int], Followed] = {}
        self._fetchers: set[int] = set()
        self._wake: dict[int, trio.Event] = {}
        self.nursery: trio.Nursery | None = None
        #: the broker's injected faults (odradek.faults): no fetching from a partitioned leader
        self.faults = Faults()
        #: the follower-side replication throttle (cluster.replication_quota)
        self.quota = quota
        #: Kafka's partitionMapLock: a fetch response's batches are appended (in a worker thread)
        #: under it, a partition at a time, and `follow`/`remove` take it, so once the partition's
        #: leadership changes no batch of the old leader's lands in its log (an append racing a
        #: become-leader put the old epoch's batches after the new epoch's start, and lost the
        #: new epoch from the leader-epoch-checkpoint)
        self.lock = threading.Lock()

    def follow(self, key: tuple[str, int], part: Partition, leader: int, leader_epoch: int) -> None:
        """Follow `leader` for this partition from now on (a new leader or epoch: Kafka's makeFollower)."""
        current = self.followed.get(key)
        if current is not None and current.leader == leader and current.leader_epoch == leader_epoch:
            return
        with self.lock:
            self.followed[key] = Followed(part, leader, leader_epoch)
        if leader >= 0:
            log.info("[ReplicaFetcherManager broker=%d] Following %s from leader %d in epoch %d", self.node_id,
                     part.name, leader, leader_epoch)
            self._ensure_fetcher(leader)

    def remove(self, key: tuple[str, int]) -> None:
        """Stop following the partition; returns once no append of a fetched batch is under way
        for it (Kafka's removeFetcherForPartitions)."""
        if key in self.followed:
            with self.lock:
                self.followed.pop(key, None)

    def is_followed(self, f: Followed) -> bool:
        """Whether `f` is still how this broker follows its partition (not removed or replaced)."""
        return self.followed.get((f.part.topic, f.part.index)) is f

    def start(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        for leader in {f.leader for f in self.followed.values() if f.leader >= 0}:
            self._ensure_fetcher(leader)

    def _ensure_fetcher(self, leader: int) -> None:
        if leader in self._fetchers or self.nursery is None:
            return
        self._fetchers.add(leader)
        self.nursery.start_soon(self._run_fetcher, leader)

    async def _run_fetcher(self, leader: int) -> None:
        conn: NodeConnection | None = None
        try:
            while True:
                parts = {k: f for k, f in self.followed.items() if f.leader == leader and f.part.log is not None}
                if parts and self.quota is not None and self.quota.throttled:
                    parts = self._unthrottled(parts)
                    if not parts:
                        await trio.sleep(0.1)  # everything held back until the rate falls
                        continue
                if not parts:
                    if not any(f.leader == leader for f in self.followed.values()):
                        return
                    await trio.sleep(0.05)  # partitions whose logs are being made
                    continue
                if leader in self.faults.partitioned:
                    # a test's network partition: this leader is out of reach
                    self.faults.skipped_fetches += 1
                    await trio.sleep(0.1)
                    continue
                address = self._endpoint(leader)
                if address is None:
                    await trio.sleep(BACKOFF_S)
                    continue
                if conn is None or (conn.host, conn.port) != address:
                    if conn is not None:
                        await conn.close()
                    conn = NodeConnection(address[0], address[1], node_id=leader,
                                          client_id=f"broker-{self.node_id}-fetcher-0")
                try:
                    await self._fetch_once(conn, parts)
                except NodeUnavailableError as exc:
                    log.info("[ReplicaFetcher replicaId=%d, leaderId=%d] Error fetching: %s", self.node_id, leader,
                             exc)
                    await trio.sleep(BACKOFF_S)
        finally:
            self._fetchers.discard(leader)
            if conn is not None:
                with trio.CancelScope(shield=True):
                    await conn.close()

    def _unthrottled(self, parts: dict[tuple[str, int], Followed]) -> dict[tuple[str, int], Followed]:
        """Kafka's shouldFollowerThrottle: throttled partitions that are not in sync are left out
        while the follower-side replication rate is over its bound."""
        quota = self.quota
        assert quota is not None
        held = [k for k, f in parts.items() if not f.in_sync and quota.is_throttled(*k)]
        if not held or not quota.is_quota_exceeded():
            return parts
        quota.held_back += len(held)
        return {k: f for k, f in parts.items() if k not in held}

    def _request(self, parts: dict[tuple[str, int], Followed]) -> Any:
        by_topic: dict[Any, list[Any]] = {}
        for f in parts.values():
            plog = f.part.log
            assert plog is not None
            last_epoch = plog.leader_epoch_cache.latest_epoch
            by_topic.setdefault(f.part.topic_id, []).append(FetchRequest.FetchPartition(
                partition=f.part.index, current_leader_epoch=f.leader_epoch, fetch_offset=plog.log_end_offset,
                last_fetched_epoch=last_epoch if last_epoch is not None else -1,
                log_start_offset=plog.log_start_offset, partition_max_bytes=FETCH_MAX_BYTES))
        return FetchRequest(
            replica_id=-1, replica_state=FetchRequest.ReplicaState(replica_id=self.node_id,
                                                                   replica_epoch=self._broker_epoch()),
            max_wait_ms=FETCH_WAIT_MAX_MS, min_bytes=FETCH_MIN_BYTES, max_bytes=FETCH_RESPONSE_MAX_BYTES,
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic_id=tid, partitions=ps) for tid, ps in by_topic.items()])

    async def _fetch_once(self, conn: NodeConnection, parts: dict[tuple[str, int], Followed]) -> None:
        by_id = {(f.part.topic_id, f.part.index): f for f in parts.values()}
        _v, resp = await conn.request(FETCH, self._request(parts), highest=17,
                                      timeout=FETCH_WAIT_MAX_MS / 1000 + 30)
        if resp.error_code:
            raise NodeUnavailableError(f"Fetch answered {resp.error_code}")
        appends: list[tuple[Followed, bytes, Any]] = []
        backoff = False
        for topic in resp.responses:
            for p in topic.partitions:
                f = by_id.get((topic.topic_id, p.partition_index))
                if f is None or not self.is_followed(f):
                    continue  # no longer followed from this leader
                code = p.error_code
                if code == ErrorCode.NONE:
                    if p.diverging_epoch is not None and p.diverging_epoch.epoch >= 0:
                        self._truncate_to_diverging(f, p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
                        continue
                    appends.append((f, bytes(p.records) if p.records is not None else b"", p))
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._reset_out_of_range(conn, f)
                elif code in _RETRY:
                    backoff = True
                else:
                    log.warning("[ReplicaFetcher replicaId=%d, leaderId=%d] Error for partition %s: %s",
                                self.node_id, f.leader, f.part.name, code)
                    backoff = True
        if appends:
            # the file work leaves the event loop; nothing else appends to a follower's log
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._append_all, appends)
            if self.quota is not None and self.quota.throttled:
                self.quota.record(sum(len(data) for f, data, _p in appends if self.quota.is_throttled(f.part.topic,
                                                                                                    f.part.index)))
        if backoff:
            await trio.sleep(BACKOFF_S)

    def _append_all(self, appends: list[tuple[Followed, bytes, Any]]) -> None:
        """Append each partition's batches from the leader, then take its high watermark and log
        start (in a worker thread; a partition no longer followed as fetched is skipped)."""
        for f, data, p in appends:
            with self.lock:
                plog = f.part.log
                if plog is None or plog.closed or not self.is_followed(f):
                    continue
                _append_fetched(f, plog, data, p)

    def _truncate_to_diverging(self, f: Followed, epoch: int, end_offset: int) -> None:
        """Kafka's truncateOnFetchResponse: cut the log where it left the leader's."""
        plog = f.part.log
        assert plog is not None
        _e, local_end = plog.leader_epoch_cache.end_offset_for(epoch, plog.log_end_offset)
        target = min(end_offset, local_end if local_end >= 0 else end_offset)
        log.info("[ReplicaFetcher replicaId=%d, leaderId=%d] Truncating %s to offset %d (diverging epoch %d "
                 "ends at %d)", self.node_id, f.leader, f.part.name, target, epoch, end_offset)
        plog.truncate_to(target)
        plog.high_watermark = min(plog.high_watermark, plog.log_end_offset)

    async def _reset_out_of_range(self, conn: NodeConnection, f: Followed) -> None:
        """Kafka's handleOutOfRangeError: the leader's log end below ours, truncate to it; else we
        are behind its log start, so start over there."""
        plog = f.part.log
        assert plog is not None
        latest = await self._list_offset(conn, f, -1)
        if not self.is_followed(f) or f.part.log is not plog:
            return  # the partition's leadership changed while we asked
        if latest is not None and plog.log_end_offset > latest:
            log.info("[ReplicaFetcher replicaId=%d] Truncating %s to the leader's log end %d", self.node_id,
                     f.part.name, latest)
            plog.truncate_to(latest)
            plog.high_watermark = min(plog.high_watermark, plog.log_end_offset)
            return
        earliest = await self._list_offset(conn, f, -2)
        if not self.is_followed(f) or f.part.log is not plog:
            return
        if earliest is not None and earliest > plog.log_end_offset:
            log.info("[ReplicaFetcher replicaId=%d] %s starts over at the leader's log start %d", self.node_id,
                     f.part.name, earliest)
            plog.truncate_fully_and_start_at(earliest)

    async def _list_offset(self, conn: NodeConnection, f: Followed, timestamp: int) -> int | None:
        body = ListOffsetsRequest(replica_id=self.node_id, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=f.part.topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=f.part.index, current_leader_epoch=f.leader_epoch, timestamp=timestamp)])])
        _v, resp = await conn.request(LIST_OFFSETS, body)
        for topic in resp.topics:
            for p in topic.partitions:
                if p.error_code == 0:
                    return p.offset
        return None


def _append_fetched(f: Followed, plog: PartitionLog, data: bytes, p: Any) -> None:
    """Append the leader's batches as they are, then take its high watermark and log start."""
    for batch in iter_batches(data):
        if batch.header().base_offset < plog.log_end_offset:
            continue  # already here (a fetch that raced a truncation)
        plog.append_as_follower(batch._mv)  # noqa: SLF001 - the batch's own bytes
    if p.high_watermark >= 0:
        plog.high_watermark = min(p.high_watermark, plog.log_end_offset)
    f.in_sync = plog.log_end_offset >= p.high_watermark
    if p.log_start_offset > plog.log_start_offset:
        try:
            plog.delete_records_before(min(p.log_start_offset, plog.high_watermark))
        except Exception:  # noqa: BLE001 - the leader's start moves again with the next fetch
            log.debug("log start of %s not moved to %d", plog.name, p.log_start_offset)
