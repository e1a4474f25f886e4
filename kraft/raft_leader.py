"""The metadata log served to other nodes by its KRaft leader (Kafka's KafkaRaftClient, leader side).

Brokers of the cluster, Java and Odradek alike, follow `__cluster_metadata-0` as observers: they
Fetch from the leader with the offset they have and the epoch of their last batch, and FetchSnapshot
when the log no longer starts where they are. The leader answers as Kafka's does: a fetch from a
stale or future epoch is refused with FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH and the current
leader; a fetch whose last epoch the log does not end the same way gets the diverging epoch; a
fetch below the log start gets the snapshot to load; otherwise the batches as they are on disk
(file slices, sent with sendfile), and a fetch with nothing new waits up to its max_wait_ms for
the next append. The high watermark is what is on disk (a single voter commits on its fsync).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import response_class
from .log import METADATA_TOPIC, METADATA_TOPIC_ID
from .snapshot import SnapshotId, list_snapshots

if TYPE_CHECKING:
    from .store import MetadataStore

log = logging.getLogger(__name__)

FETCH = 1
FETCH_SNAPSHOT = 59
FetchResponse = response_class(FETCH)
FetchSnapshotResponse = response_class(FETCH_SNAPSHOT)

#: Kafka's leader caps a fetch of the metadata log at 8 MiB (KafkaRaftClient.MAX_FETCH_SIZE_BYTES).
MAX_FETCH_BYTES = 8 * 1024 * 1024
#: and waits at most this long for new data (controller.quorum.fetch.timeout.ms / 2 would be longer)
MAX_FETCH_WAIT_MS = 500


@dataclass
class ObserverState:
    """What DescribeQuorum reports of a node fetching the log (Kafka's ReplicaState)."""

    replica_id: int
    directory_id: Uuid
    log_end_offset: int = -1
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


def is_metadata_fetch(request: Any) -> bool:
    """A Fetch of `__cluster_metadata` (by topic id from v13, by name before)."""
    topics = request.topics or []
    return any(t.topic_id == METADATA_TOPIC_ID or t.topic == METADATA_TOPIC for t in topics)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class RaftLeader:
    """Serves the metadata log of `store` (this node leads its epoch) to fetching nodes."""

    def __init__(self, store: MetadataStore, cluster_id: str, node_id: int) -> None:
        self.store = store
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.observers: dict[int, ObserverState] = {}
        self._appended = trio.Event()

    def notify_appended(self) -> None:
        """Wake the fetches waiting for new data (called after every append that is on disk)."""
        self._appended.set()
        self._appended = trio.Event()

    @property
    def high_watermark(self) -> int:
        assert self.store.log is not None
        plog = self.store.log.plog
        return min(plog.recovery_point, plog.log_end_offset)

    # ------------------------------------------------------------------ Fetch

    async def fetch(self, request: Any, version: int, endpoints: list[Any]) -> Any:
        """The answer to a Fetch of the metadata log (waiting up to max_wait_ms for new data)."""
        if request.cluster_id is not None and request.cluster_id != self.cluster_id:
            return FetchResponse(error_code=int(ErrorCode.INCONSISTENT_CLUSTER_ID), responses=[])
        topics = request.topics or []
        if len(topics) != 1 or len(topics[0].partitions) != 1 or topics[0].partitions[0].partition != 0:
            return FetchResponse(error_code=int(ErrorCode.INVALID_REQUEST), responses=[])
        wait_ms = min(max(request.max_wait_ms, 0), MAX_FETCH_WAIT_MS)
        deadline = trio.current_time() + wait_ms / 1000
        while True:
            waiter = self._appended
            part, has_data = self._answer(request, version)
            if has_data or part.error_code or trio.current_time() >= deadline:
                break
            with trio.move_on_at(deadline):
                await waiter.wait()
        topic = topics[0]
        body = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
            FetchResponse.FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id, partitions=[part])])
        if version >= 17:
            body.node_endpoints = endpoints
        return body

    def _answer(self, request: Any, version: int) -> tuple[Any, bool]:
        store = self.store
        assert store.log is not None
        plog = store.log.plog
        wanted = request.topics[0].partitions[0]
        replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
        epoch = store.epoch
        leader = FetchResponse.LeaderIdAndEpoch(leader_id=self.node_id, leader_epoch=epoch)
        part = FetchResponse.PartitionData(partition_index=0, error_code=0, high_watermark=self.high_watermark,
                                           last_stable_offset=-1, log_start_offset=plog.log_start_offset,
                                           current_leader=leader, records=None)
        if wanted.current_leader_epoch < epoch:
            part.error_code = int(ErrorCode.FENCED_LEADER_EPOCH)
            return part, False
        if wanted.current_leader_epoch > epoch:
            part.error_code = int(ErrorCode.UNKNOWN_LEADER_EPOCH)
            return part, False
        offset, last_epoch = wanted.fetch_offset, wanted.last_fetched_epoch
        if offset < 0 or last_epoch < 0 or (last_epoch > 0 and offset == 0):
            part.error_code = int(ErrorCode.INVALID_REQUEST)
            return part, False
        self._track(replica_id, getattr(wanted, "replica_directory_id", Uuid.ZERO), offset)
        snapshot = self._snapshot_for(offset)
        if snapshot is not None:
            part.snapshot_id = FetchResponse.SnapshotId(end_offset=snapshot.end_offset, epoch=snapshot.epoch)
            return part, True
        diverging = self._diverging(offset, last_epoch)
        if diverging is not None:
            part.diverging_epoch = FetchResponse.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])
            return part, True
        hw = self.high_watermark
        if offset >= hw:
            return part, False
        data = plog.read(offset, MAX_FETCH_BYTES, max_offset=hw)
        part.records = list(data.slices) if data.slices else None
        return part, bool(data.slices)

    def _snapshot_for(self, offset: int) -> SnapshotId | None:
        """KafkaMetadataLog.validateOffsetAndEpoch's SNAPSHOT case: below the log start, the latest
        snapshot is the way on."""
        assert self.store.log is not None
        if offset >= self.store.log.log_start_offset:
            return None
        return self.store.log.latest_snapshot()

    def _diverging(self, offset: int, last_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) when the fetcher's log leaves this one's, else None."""
        assert self.store.log is not None
        plog = self.store.log.plog
        if offset == 0:
            return None
        end_epoch, end_offset = plog.leader_epoch_cache.end_offset_for(last_epoch, plog.log_end_offset)
        if end_epoch < 0:
            # an epoch older than the log: everything from the log start diverges
            return (last_epoch, plog.log_start_offset) if offset > plog.log_start_offset else None
        if end_offset < offset or end_epoch < last_epoch:
            return end_epoch, end_offset
        return None

    def _track(self, replica_id: int, directory_id: Uuid, offset: int) -> None:
        if replica_id < 0:
            return
        state = self.observers.get(replica_id)
        if state is None or state.directory_id != directory_id:
            state = self.observers[replica_id] = ObserverState(replica_id, directory_id)
        now = _wall_ms()
        state.log_end_offset = offset
        state.last_fetch_timestamp = now
        if offset >= self.high_watermark:
            state.last_caught_up_timestamp = now

    # ------------------------------------------------------------------ FetchSnapshot

    def fetch_snapshot(self, request: Any, version: int, endpoints: list[Any]) -> Any:
        """The answer to a FetchSnapshot: a chunk of the snapshot file asked for, from `position`."""
        R = FetchSnapshotResponse
        if request.cluster_id is not None and request.cluster_id != self.cluster_id:
            return R(error_code=int(ErrorCode.INCONSISTENT_CLUSTER_ID), topics=[])
        topics = request.topics or []
        if len(topics) != 1 or topics[0].name != METADATA_TOPIC or len(topics[0].partitions) != 1:
            return R(error_code=int(ErrorCode.INVALID_REQUEST), topics=[])
        wanted = topics[0].partitions[0]
        store = self.store
        assert store.log is not None
        leader = R.LeaderIdAndEpoch(leader_id=self.node_id, leader_epoch=store.epoch)
        part = R.PartitionSnapshot(index=0, error_code=0, snapshot_id=R.SnapshotId(
            end_offset=wanted.snapshot_id.end_offset, epoch=wanted.snapshot_id.epoch), current_leader=leader,
            size=0, position=wanted.position, unaligned_records=b"")
        if wanted.current_leader_epoch < store.epoch:
            part.error_code = int(ErrorCode.FENCED_LEADER_EPOCH)
        elif wanted.current_leader_epoch > store.epoch:
            part.error_code = int(ErrorCode.UNKNOWN_LEADER_EPOCH)
        else:
            snap = SnapshotId(wanted.snapshot_id.end_offset, wanted.snapshot_id.epoch)
            path = store.log.dir / snap.file_name
            if snap not in list_snapshots(store.log.dir) or not path.exists():
                part.error_code = int(ErrorCode.SNAPSHOT_NOT_FOUND)
            else:
                size = path.stat().st_size
                if wanted.position < 0 or wanted.position >= max(size, 1):
                    part.error_code = int(ErrorCode.POSITION_OUT_OF_RANGE)
                else:
                    limit = min(max(request.max_bytes, 1), MAX_FETCH_BYTES)
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        part.unaligned_records = os.pread(fd, limit, wanted.position)
                    finally:
                        os.close(fd)
                    part.size = size
        body = R(throttle_time_ms=0, error_code=0, topics=[R.TopicSnapshot(name=METADATA_TOPIC, partitions=[part])])
        if version >= 1:
            body.node_endpoints = endpoints
        return body
