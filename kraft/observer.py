"""A broker's copy of the KRaft metadata log: follow the quorum leader as an observer.

What Kafka's KafkaRaftClient does on a `process.roles=broker` node: Fetch `__cluster_metadata-0`
from the leader (found through `controller.quorum.voters` / `controller.quorum.bootstrap.servers`
and the leader ids and endpoints in Fetch answers), append the leader's batches exactly as they
are (its offsets, epochs and timestamps: the local files are the same bytes as every other
replica's), take the high watermark from the leader, and hand each record to the metadata image
once it is committed (below the high watermark). `quorum-state` is written on each change of
leader, as Kafka's follower state writes it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import request_class
from ..wire.records import iter_batches
from .log import METADATA_TOPIC, METADATA_TOPIC_ID, MetadataLog
from .node_client import NodeConnection, NodeUnavailableError
from .quorum_state import QuorumState
from .records import MetadataRecord
from .snapshot import SnapshotId, list_snapshots, read_snapshot
from .validation import _is_noop, decode_record_strictly

log = logging.getLogger(__name__)

FETCH = 1
FETCH_SNAPSHOT = 59
#: KafkaRaftClient.MAX_FETCH_SIZE_BYTES
MAX_FETCH_BYTES = 8 * 1024 * 1024
#: KafkaRaftClient's fetch max wait (RaftManager: 500 ms)
FETCH_MAX_WAIT_MS = 500
RETRY_BACKOFF_S = 0.1


@dataclass(frozen=True)
class QuorumNode:
    """A controller this node may fetch from (node id -1 when known only by address)."""

    node_id: int
    host: str
    port: int


def parse_voters(voters: Sequence[str] | None) -> list[QuorumNode]:
    """`controller.quorum.voters` entries `id@host:port`."""
    out = []
    for item in voters or []:
        ident, _, address = str(item).partition("@")
        host, _, port = address.rpartition(":")
        out.append(QuorumNode(int(ident), host.strip("[]"), int(port)))
    return out


def parse_bootstrap_servers(servers: Sequence[str] | None) -> list[QuorumNode]:
    """`controller.quorum.bootstrap.servers` entries `host:port`."""
    out = []
    for item in servers or []:
        host, _, port = str(item).rpartition(":")
        out.append(QuorumNode(-1, host.strip("[]"), int(port)))
    return out


class MetadataObserver:
    """Follows the quorum leader's metadata log into `metadata_log`; `on_commit(records, offset)`
    gets the records that became committed (in log order) and the new committed offset, and
    `on_snapshot(records, offset)` the whole metadata of a snapshot loaded from the leader (the
    image starts over from it)."""

    def __init__(self, metadata_log: MetadataLog, *, node_id: int, cluster_id: str, directory_id: Uuid,
                 quorum: Sequence[QuorumNode], client_id: str,
                 on_commit: Callable[[list[MetadataRecord], int], None],
                 on_snapshot: Callable[[list[MetadataRecord], int], None] | None = None) -> None:
        self.log = metadata_log
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.directory_id = directory_id
        self.quorum = list(quorum)
        self.voter_ids = sorted(n.node_id for n in self.quorum if n.node_id >= 0)
        self.client_id = client_id
        self.on_commit = on_commit
        self.on_snapshot = on_snapshot
        self.leader_id = -1
        self.leader_epoch = 0
        self.high_watermark = -1
        self._leader_address: QuorumNode | None = None
        self._connections: dict[tuple[str, int], NodeConnection] = {}
        #: records appended but not yet committed: (offset, record)
        self._pending: list[tuple[int, MetadataRecord]] = []
        self.applied_offset = 0
        self.caught_up = trio.Event()
        self._bootstrap_index = 0
        state = QuorumState.read(self.log.dir)
        if state is not None:
            self.leader_epoch = state.leader_epoch
        # the local copy is applied once the leader says how much of it is committed
        self._pending = self._records_from(self.log.log_start_offset)

    def _records_from(self, offset: int) -> list[tuple[int, MetadataRecord]]:
        """The metadata records of the local log from `offset` (strictly decoded)."""
        out: list[tuple[int, MetadataRecord]] = []
        for batch in self.log._batches_from(offset):  # noqa: SLF001 - same package
            self._collect(batch, out)
        return out

    def _collect(self, batch: Any, out: list[tuple[int, MetadataRecord]]) -> None:
        if batch.header().attributes & 0x20:
            return
        for rec in batch.records():
            if rec.value is None or _is_noop(rec.value):
                continue
            out.append((rec.offset, decode_record_strictly(rec.value, f"{self.log.dir} offset {rec.offset}")))

    # ------------------------------------------------------------------ the fetch loop

    async def run(self) -> None:
        """Fetch forever (until cancelled), backing off on errors."""
        try:
            while True:
                try:
                    await self._fetch_once()
                except NodeUnavailableError as e:
                    log.info("[RaftManager id=%d] %s; retrying", self.node_id, e)
                    self._leader_address = None
                    await trio.sleep(RETRY_BACKOFF_S)
        finally:
            with trio.CancelScope(shield=True):
                for conn in self._connections.values():
                    await conn.close()

    def _target(self) -> QuorumNode:
        if self._leader_address is not None:
            return self._leader_address
        node = self.quorum[self._bootstrap_index % len(self.quorum)]
        self._bootstrap_index += 1
        return node

    def _connection(self, node: QuorumNode) -> NodeConnection:
        key = (node.host, node.port)
        conn = self._connections.get(key)
        if conn is None:
            conn = self._connections[key] = NodeConnection(node.host, node.port, client_id=self.client_id,
                                                           node_id=node.node_id)
        return conn

    def fetch_request(self) -> Any:
        """The Fetch KafkaRaftClient.buildFetchRequest sends."""
        req = request_class(FETCH)
        # KafkaMetadataLog.lastFetchedEpoch: the log's latest epoch, else the latest snapshot's
        epoch_cache = self.log.plog.leader_epoch_cache
        if epoch_cache.latest_epoch is not None:
            last_epoch = epoch_cache.latest_epoch
        else:
            snap = self.log.latest_snapshot()
            last_epoch = snap.epoch if snap is not None else 0
        partition = req.FetchPartition(partition=0, current_leader_epoch=self.leader_epoch,
                                       fetch_offset=self.log.log_end_offset, last_fetched_epoch=last_epoch,
                                       log_start_offset=-1, partition_max_bytes=0,
                                       replica_directory_id=self.directory_id,
                                       high_watermark=self.high_watermark)
        return req(cluster_id=self.cluster_id, replica_id=-1,
                   replica_state=req.ReplicaState(replica_id=self.node_id, replica_epoch=-1),
                   max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=0, max_bytes=MAX_FETCH_BYTES, isolation_level=0,
                   session_id=0, session_epoch=-1,
                   topics=[req.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[partition])])

    async def _fetch_once(self) -> None:
        node = self._target()
        conn = self._connection(node)
        _version, resp = await conn.request(FETCH, self.fetch_request(), timeout=FETCH_MAX_WAIT_MS / 1000 + 10)
        if resp.error_code:
            code = ErrorCode(resp.error_code) if resp.error_code in ErrorCode._value2member_map_ else resp.error_code
            log.warning("[RaftManager id=%d] Fetch from %s:%d failed: %s", self.node_id, node.host, node.port, code)
            self._leader_address = None
            await trio.sleep(RETRY_BACKOFF_S)
            return
        endpoints = {e.node_id: QuorumNode(e.node_id, e.host, e.port) for e in (resp.node_endpoints or [])}
        part = resp.responses[0].partitions[0]
        leader = part.current_leader
        if leader is not None and leader.leader_id >= 0:
            self._follow(leader.leader_id, leader.leader_epoch, endpoints.get(leader.leader_id), node)
        if part.error_code:
            if part.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                                   ErrorCode.UNKNOWN_LEADER_EPOCH):
                await trio.sleep(RETRY_BACKOFF_S)
                return
            raise NodeUnavailableError(f"Fetch of the metadata log answered error {part.error_code}")
        if part.diverging_epoch is not None and part.diverging_epoch.epoch >= 0:
            self._truncate_to_diverging(part.diverging_epoch.epoch, part.diverging_epoch.end_offset)
            return
        if part.snapshot_id is not None and part.snapshot_id.end_offset >= 0:
            await self._fetch_snapshot(conn, SnapshotId(part.snapshot_id.end_offset, part.snapshot_id.epoch))
            return
        if part.records is not None and len(part.records):
            self._append(part.records)
        if part.high_watermark >= 0:
            self.high_watermark = min(part.high_watermark, self.log.log_end_offset)
            self._commit()
        if self.high_watermark >= 0 and self.applied_offset >= part.high_watermark:
            self.caught_up.set()

    def _follow(self, leader_id: int, epoch: int, endpoint: QuorumNode | None, asked: QuorumNode) -> None:
        if endpoint is None:
            endpoint = next((n for n in self.quorum if n.node_id == leader_id), None)
        if endpoint is None and (leader_id == asked.node_id or asked.node_id < 0):
            endpoint = QuorumNode(leader_id, asked.host, asked.port)
        if leader_id != self.leader_id or epoch != self.leader_epoch:
            log.info("[RaftManager id=%d] Following leader %d in epoch %d", self.node_id, leader_id, epoch)
            self.leader_id, self.leader_epoch = leader_id, epoch
            # Kafka's durable transition to FollowerState
            QuorumState(leader_id=leader_id, leader_epoch=epoch, voters=self.voter_ids).write(self.log.dir)
        self._leader_address = endpoint

    def _append(self, records: Any) -> None:
        """Append the leader's batches as they are (offsets, epochs and bytes kept)."""
        data = bytes(records)
        for batch in iter_batches(data):
            raw = bytes(batch._mv)  # noqa: SLF001 - the batch's own bytes
            h = batch.header()
            if h.base_offset != self.log.log_end_offset:
                raise NodeUnavailableError(f"the leader sent a batch at offset {h.base_offset}, the local metadata "
                                           f"log ends at {self.log.log_end_offset}")
            batch.ensure_valid()
            self.log.plog.append_as_coordinator(bytearray(raw), h.partition_leader_epoch)
            self._collect(batch, self._pending)
        self.log.flush()

    def _commit(self) -> None:
        ready = [(o, r) for o, r in self._pending if o < self.high_watermark]
        if not ready and self.applied_offset >= self.high_watermark:
            return
        self._pending = [(o, r) for o, r in self._pending if o >= self.high_watermark]
        self.applied_offset = max(self.applied_offset, self.high_watermark)
        self.on_commit([r for _o, r in ready], self.applied_offset)

    # ------------------------------------------------------------------ divergence and snapshots

    def _truncate_to_diverging(self, epoch: int, end_offset: int) -> None:
        """KafkaMetadataLog.truncateToEndOffset: cut the log where it left the leader's (never below
        what is committed)."""
        _e, local_end = self.log.plog.leader_epoch_cache.end_offset_for(epoch, self.log.log_end_offset)
        target = min(end_offset, local_end if local_end >= 0 else end_offset)
        if target < self.applied_offset:
            raise NodeUnavailableError(f"the leader asks to truncate the metadata log to {target}, below the "
                                       f"committed offset {self.applied_offset}")
        log.info("[RaftManager id=%d] Truncating the metadata log to %d (diverging epoch %d ends at %d)",
                 self.node_id, target, epoch, end_offset)
        self.log.plog.truncate_to(target)
        self._pending = [(o, r) for o, r in self._pending if o < target]

    async def _fetch_snapshot(self, conn: NodeConnection, snapshot: SnapshotId) -> None:
        """FetchSnapshot from the leader into `<end>-<epoch>.checkpoint`, as Kafka's
        FileRawSnapshotWriter stores it (a `.checkpoint.part` temp file, made read-only and
        renamed when whole), then start the log at its end offset and load it."""
        md_dir = self.log.dir
        final = md_dir / snapshot.file_name
        part = md_dir / f"{snapshot.file_name}.part"
        req = request_class(FETCH_SNAPSHOT)
        position, size = 0, None
        log.info("[RaftManager id=%d] Fetching snapshot %s from the leader", self.node_id, snapshot.file_name)
        fd = os.open(part, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        try:
            while size is None or position < size:
                body = req(cluster_id=self.cluster_id, replica_id=self.node_id, max_bytes=MAX_FETCH_BYTES, topics=[
                    req.TopicSnapshot(name=METADATA_TOPIC, partitions=[req.PartitionSnapshot(
                        partition=0, current_leader_epoch=self.leader_epoch,
                        snapshot_id=req.SnapshotId(end_offset=snapshot.end_offset, epoch=snapshot.epoch),
                        position=position, replica_directory_id=self.directory_id)])])
                _v, resp = await conn.request(FETCH_SNAPSHOT, body)
                if resp.error_code:
                    raise NodeUnavailableError(f"FetchSnapshot answered error {resp.error_code}")
                got = resp.topics[0].partitions[0]
                if got.error_code:
                    raise NodeUnavailableError(f"FetchSnapshot of {snapshot.file_name} answered error {got.error_code}")
                if got.position != position:
                    raise NodeUnavailableError(f"FetchSnapshot answered position {got.position}, asked {position}")
                data = bytes(got.unaligned_records or b"")
                os.pwrite(fd, data, position)
                position += len(data)
                size = got.size
                if not data and position < size:
                    raise NodeUnavailableError("FetchSnapshot answered no bytes")
            os.fsync(fd)
        finally:
            os.close(fd)
        part.chmod(0o400)  # Kafka's freeze(): setReadOnly() on the 0600 temp file
        os.replace(part, final)
        records = list(read_snapshot(final))
        plog = self.log.plog
        latest = plog.leader_epoch_cache.latest_epoch or 0
        if snapshot.epoch > latest or (snapshot.epoch == latest and snapshot.end_offset > plog.log_end_offset):
            plog.truncate_fully_and_start_at(snapshot.end_offset)
            for older in list_snapshots(md_dir):
                if (older.end_offset, older.epoch) < (snapshot.end_offset, snapshot.epoch):
                    (md_dir / older.file_name).unlink(missing_ok=True)
        self._pending = []
        self.applied_offset = snapshot.end_offset
        self.high_watermark = max(self.high_watermark, snapshot.end_offset)
        if self.on_snapshot is not None:
            self.on_snapshot(records, snapshot.end_offset)
