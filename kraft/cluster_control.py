"""The brokers of a cluster as its controller keeps them (Kafka's ClusterControlManager,
BrokerHeartbeatManager and the broker parts of ReplicationControlManager).

A broker registers (BrokerRegistration: a RegisterBrokerRecord, fenced, whose offset is the
broker epoch), then heartbeats. Once a heartbeat reports that the broker has applied the metadata
up to its registration, it is unfenced and leads again the partitions that wait for it. A broker
whose heartbeats stop for `broker.session.timeout.ms` is fenced and loses its leaderships; one that
asks to shut down is moved out of leadership first and told to stop once it has seen that. New
partitions are placed over the usable brokers as Kafka's StripedReplicaPlacer stripes them.

Every change is written to the metadata log as the records Kafka's controller writes, so Java
and Odradek brokers apply it from their copies of the log.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from ..wire.errors import ErrorCode
from .features import supports_directory_assignment
from .records import new_record

if TYPE_CHECKING:
    from .store import MetadataStore

log = logging.getLogger(__name__)

_SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
#: BrokerRegistrationChangeRecord's fencing values (Kafka's BrokerRegistrationFencingChange).
FENCE, UNFENCE = 1, -1


class PlacementError(Exception):
    """No placement is possible (too few usable brokers); carries Kafka's error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class BrokerHeartbeatState:
    """A registered broker's liveness as the controller tracks it (not persisted: a new
    controller gives every broker a fresh session)."""

    broker_id: int
    last_contact: float
    metadata_offset: int = -1
    #: the log end when the broker entered controlled shutdown (it must have seen that far)
    controlled_shutdown_offset: int = -1


class ClusterControlManager:
    """Registrations, heartbeats, fencing and placement of the brokers of this controller's cluster."""

    def __init__(self, store: MetadataStore, cluster_id: str, *, session_timeout_ms: int,
                 own_broker: bool) -> None:
        self.store = store
        self.cluster_id = cluster_id
        self.session_timeout_s = session_timeout_ms / 1000
        #: a combined node: this node is a broker of its own cluster too (placed on, never fenced here)
        self.own_broker = own_broker
        self.heartbeats: dict[int, BrokerHeartbeatState] = {}
        #: what CreateTopics asked for a topic being created: a replication factor, or the
        #: replicas of each partition (a manual assignment)
        self.requested: dict[str, int | list[list[int]]] = {}
        self._random = random.Random()

    # ------------------------------------------------------------------ queries

    @property
    def node_id(self) -> int:
        return self.store.node_id

    def registration(self, broker_id: int) -> Any:
        return self.store.image.brokers.get(broker_id)

    def usable_brokers(self) -> list[int]:
        """Unfenced brokers not shutting down (Kafka's usableBrokers), by id."""
        out = [b for b, reg in sorted(self.store.image.brokers.items())
               if not reg.fenced and not getattr(reg, "in_controlled_shutdown", False)]
        if self.own_broker and self.node_id not in out:
            out.append(self.node_id)
        return sorted(out)

    def registered_count(self) -> int:
        ids = set(self.store.image.brokers)
        if self.own_broker:
            ids.add(self.node_id)
        return len(ids)

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> ErrorCode:
        """Kafka's ClusterControlManager.checkBrokerEpoch."""
        reg = self.registration(broker_id)
        if reg is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED
        if reg.broker_epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return ErrorCode.NONE

    # ------------------------------------------------------------------ placement

    def place(self, topic: str, first: int, end: int) -> list[list[int]]:
        """The replicas of partitions [first, end): a manual assignment as asked, else striped over
        the usable brokers from a random start, as StripedReplicaPlacer does for brokers without
        racks, with the replication factor asked for (new partitions of a topic: its own)."""
        asked = self.requested.pop(topic, None)
        if isinstance(asked, list):
            return [list(r) for r in asked[:end - first]]
        if asked is None:
            state = self.store.image.topic(topic)
            first_part = state.partitions.get(0) if state is not None else None
            asked = len(first_part.replicas) if first_part is not None else 1
        replication_factor = asked
        brokers = self.usable_brokers()
        self.check_replication_factor(replication_factor)
        start = self._random.randrange(len(brokers))
        return [[brokers[(start + i + r) % len(brokers)] for r in range(replication_factor)]
                for i in range(end - first)]

    def check_replication_factor(self, replication_factor: int) -> None:
        brokers = self.usable_brokers()
        if not brokers:
            raise PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Unable to replicate the partition {replication_factor} time(s): All brokers "
                                 "are currently fenced.")
        if replication_factor > len(brokers):
            raise PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Unable to replicate the partition {replication_factor} time(s): The target "
                                 f"replication factor of {replication_factor} cannot be reached because only "
                                 f"{len(brokers)} broker(s) are registered.")

    # ------------------------------------------------------------------ registration

    def register(self, request: Any) -> tuple[ErrorCode, int, str | None]:
        """BrokerRegistration: (error, broker epoch, message)."""
        store = self.store
        if request.cluster_id != self.cluster_id:
            return (ErrorCode.INCONSISTENT_CLUSTER_ID, -1,
                    f"Expected cluster ID {self.cluster_id}, but got cluster ID {request.cluster_id}")
        broker_id = request.broker_id
        if broker_id == self.node_id and self.own_broker:
            return ErrorCode.DUPLICATE_BROKER_REGISTRATION, -1, "Another broker is registered with that broker id."
        supported = {f.name: (f.min_supported_version, f.max_supported_version) for f in request.features}
        for name, level in sorted(store.image.features.items()):
            lo, hi = supported.get(name, (0, 0))
            if not lo <= level <= hi:
                return (ErrorCode.UNSUPPORTED_VERSION, -1,
                        f"Unable to register because the broker does not support finalized version {level} of "
                        f"{name}. The broker wants a version between {lo} and {hi}, inclusive.")
        if supports_directory_assignment(store.metadata_version) and not request.log_dirs:
            return ErrorCode.INVALID_REGISTRATION, -1, "No directories specified in request"
        existing = self.registration(broker_id)
        now = trio.current_time()
        if existing is not None:
            beat = self.heartbeats.get(broker_id)
            if existing.incarnation_id == request.incarnation_id:
                # a retry of the same registration
                self.heartbeats[broker_id] = BrokerHeartbeatState(broker_id, now)
                return ErrorCode.NONE, existing.broker_epoch, None
            if beat is not None and not existing.fenced and now - beat.last_contact < self.session_timeout_s:
                return (ErrorCode.DUPLICATE_BROKER_REGISTRATION, -1,
                        f"Another broker is registered with that broker id. The broker's session will expire in "
                        f"{int((self.session_timeout_s - (now - beat.last_contact)) * 1000)} ms.")
            # an unclean restart: the partitions it led wait for the new incarnation
            self._append(self.leadership_loss(broker_id))
        rec_cls = type(new_record("RegisterBrokerRecord"))
        record = new_record(
            "RegisterBrokerRecord", broker_id=broker_id, is_migrating_zk_broker=False,
            incarnation_id=request.incarnation_id, broker_epoch=-1,
            end_points=[rec_cls.BrokerEndpoint(name=lst.name, host=lst.host, port=lst.port,
                                               security_protocol=lst.security_protocol) for lst in request.listeners],
            features=[rec_cls.BrokerFeature(name=f.name, min_supported_version=f.min_supported_version,
                                            max_supported_version=f.max_supported_version) for f in request.features],
            rack=request.rack, fenced=True, in_controlled_shutdown=False, log_dirs=list(request.log_dirs or []))
        epoch = store.append_records([("RegisterBrokerRecord", record)], patch_epoch=True)
        self.heartbeats[broker_id] = BrokerHeartbeatState(broker_id, now)
        log.info("[QuorumController id=%d] Registered broker %d with epoch %d (incarnation %s)", self.node_id,
                 broker_id, epoch, request.incarnation_id.to_base64())
        return ErrorCode.NONE, epoch, None

    # ------------------------------------------------------------------ heartbeats

    def heartbeat(self, request: Any) -> tuple[ErrorCode, bool, bool, bool]:
        """BrokerHeartbeat: (error, is_caught_up, is_fenced, should_shut_down), with the records of
        a state change (unfence, controlled shutdown, fence) written first."""
        error = self.check_broker_epoch(request.broker_id, request.broker_epoch)
        if error:
            return error, False, True, False
        broker_id = request.broker_id
        reg = self.registration(broker_id)
        now = trio.current_time()
        beat = self.heartbeats.get(broker_id)
        if beat is None:
            beat = self.heartbeats[broker_id] = BrokerHeartbeatState(broker_id, now)
        beat.last_contact = now
        beat.metadata_offset = request.current_metadata_offset
        if request.offline_log_dirs:
            self.dirs_offline(broker_id, list(request.offline_log_dirs))
        caught_up = request.current_metadata_offset >= reg.broker_epoch
        in_shutdown = bool(getattr(reg, "in_controlled_shutdown", False))
        if reg.fenced:
            if request.want_shut_down:
                return ErrorCode.NONE, caught_up, True, True
            if caught_up and not request.want_fence:
                self._append([self._registration_change(reg, fenced=UNFENCE)] + self._leadership_gain(broker_id))
                log.info("[QuorumController id=%d] Unfenced broker %d", self.node_id, broker_id)
                return ErrorCode.NONE, True, False, False
            return ErrorCode.NONE, caught_up, True, False
        if request.want_fence:
            self._fence(reg, "it asked to be fenced")
            return ErrorCode.NONE, caught_up, True, False
        if request.want_shut_down and not in_shutdown:
            self._append([self._registration_change(reg, in_controlled_shutdown=1)] +
                         self.leadership_loss(broker_id))
            beat.controlled_shutdown_offset = self.store.log.log_end_offset - 1 if self.store.log else 0
            log.info("[QuorumController id=%d] Broker %d is in controlled shutdown", self.node_id, broker_id)
            in_shutdown = True
        if in_shutdown:
            if not self._leads_any(broker_id) and self._lowest_active_offset(broker_id) >= beat.controlled_shutdown_offset:
                self._fence(reg, "its controlled shutdown is complete")
                return ErrorCode.NONE, caught_up, True, True
            return ErrorCode.NONE, caught_up, False, False
        return ErrorCode.NONE, caught_up, False, False

    def _lowest_active_offset(self, leaving: int) -> int:
        """Kafka's BrokerHeartbeatManager.lowestActiveOffset: the least metadata offset the other
        active brokers have applied (a broker shuts down once they all know it leads nothing)."""
        offsets = [self.heartbeats[b].metadata_offset if b in self.heartbeats else -1
                   for b in self.usable_brokers() if b != leaving and not (b == self.node_id and self.own_broker)]
        return min(offsets, default=2**63 - 1)

    def expire_sessions(self) -> None:
        """Fence the unfenced brokers whose heartbeats stopped for broker.session.timeout.ms."""
        now = trio.current_time()
        for broker_id, reg in sorted(self.store.image.brokers.items()):
            if reg.fenced or (broker_id == self.node_id and self.own_broker):
                continue
            beat = self.heartbeats.get(broker_id)
            if beat is None:
                # registered before this controller started: its session starts now
                self.heartbeats[broker_id] = BrokerHeartbeatState(broker_id, now)
                continue
            if now - beat.last_contact >= self.session_timeout_s:
                self._fence(reg, f"its session expired ({int(self.session_timeout_s * 1000)} ms without heartbeat)")

    async def run(self) -> None:
        """Check the brokers' sessions as long as the controller runs."""
        while True:
            await trio.sleep(min(1.0, self.session_timeout_s / 4))
            self.expire_sessions()

    def unregister(self, broker_id: int) -> ErrorCode:
        """UnregisterBroker: the registration removed, the partitions it led without a leader."""
        if self.registration(broker_id) is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED
        self._append(self.leadership_loss(broker_id) + [
            ("UnregisterBrokerRecord", new_record("UnregisterBrokerRecord", broker_id=broker_id,
                                                  broker_epoch=self.registration(broker_id).broker_epoch))])
        self.heartbeats.pop(broker_id, None)
        return ErrorCode.NONE

    # ------------------------------------------------------------------ records

    def _fence(self, reg: Any, why: str) -> None:
        self._append([self._registration_change(reg, fenced=FENCE)] + self.leadership_loss(reg.broker_id))
        log.info("[QuorumController id=%d] Fenced broker %d: %s", self.node_id, reg.broker_id, why)

    def _registration_change(self, reg: Any, *, fenced: int = 0, in_controlled_shutdown: int = 0) -> tuple[str, Any]:
        return ("BrokerRegistrationChangeRecord", new_record(
            "BrokerRegistrationChangeRecord", broker_id=reg.broker_id, broker_epoch=reg.broker_epoch,
            fenced=fenced, in_controlled_shutdown=in_controlled_shutdown))

    def _leads_any(self, broker_id: int) -> bool:
        return any(p.leader == broker_id for t in self.store.image.topics_by_id.values()
                   for p in t.partitions.values())

    def dirs_offline(self, broker_id: int, dir_ids: list[Any]) -> None:
        """A broker named log dirs offline in its heartbeat (Kafka's handleDirectoriesOffline): it
        leaves the ISR (and the leadership) of its replicas in those dirs, and a
        BrokerRegistrationChangeRecord keeps only its online dirs. Dirs already offline change nothing."""
        reg = self.registration(broker_id)
        registered = list(reg.log_dirs or []) if reg is not None else []
        offline = {d for d in dir_ids if d in registered}
        if not offline:
            return
        online = [d for d in registered if d not in offline]
        self._append(self.leadership_loss(broker_id, in_dirs=offline) + [("BrokerRegistrationChangeRecord", new_record(
            "BrokerRegistrationChangeRecord", broker_id=broker_id, broker_epoch=reg.broker_epoch, log_dirs=online))])
        log.warning("[QuorumController id=%d] Directories %s in broker %d marked offline, remaining directories: %s",
                    self.node_id, sorted(d.to_base64() for d in offline), broker_id, [d.to_base64() for d in online])

    def leadership_loss(self, broker_id: int, in_dirs: set[Any] | None = None) -> list[tuple[str, Any]]:
        """The PartitionChangeRecords that move leadership away from `broker_id`: to another live
        ISR member, else none (leader -1, with ELR the broker kept as eligible leader). `in_dirs`:
        only the partitions whose replica on `broker_id` is in one of those log dirs."""
        usable = set(self.usable_brokers()) - {broker_id}
        out = []
        for topic in self.store.image.topics_by_id.values():
            for index, part in sorted(topic.partitions.items()):
                if in_dirs is not None and (broker_id not in part.replicas or not part.directories
                                            or part.directories[part.replicas.index(broker_id)] not in in_dirs):
                    continue
                isr = [b for b in part.isr if b != broker_id]
                if part.leader != broker_id:
                    if broker_id in part.isr and len(part.isr) > 1:
                        # a follower leaves the ISR of the partitions it is fenced from (below
                        # min.insync.replicas it becomes an eligible leader replica)
                        out.append(self.store.partition_change(topic, index, isr))
                    continue
                others = [b for b in isr if b in usable]
                out.append(self.store.partition_change(topic, index, isr, leader=others[0] if others else -1))
        return out

    def _leadership_gain(self, broker_id: int) -> list[tuple[str, Any]]:
        """The PartitionChangeRecords that give `broker_id` the partitions waiting for a leader that
        it may lead cleanly: it is in their ISR, or (ISR empty, KIP-966) one of their eligible leader
        replicas. Any other replica waits for an unclean election (kafka-leader-election.sh)."""
        out = []
        for topic in self.store.image.topics_by_id.values():
            for index, part in sorted(topic.partitions.items()):
                if part.leader < 0 and broker_id in part.replicas and (
                        broker_id in part.isr or (not part.isr and broker_id in part.elr)):
                    out.append(self.store.partition_change(topic, index, list(part.isr), leader=broker_id))
        return out

    def _append(self, records: list[tuple[str, Any]]) -> None:
        if records:
            self.store.append_records(records)
