"""`process.roles=broker`: Odradek as a broker of a KRaft cluster whose controllers are elsewhere
(Apache Kafka's, or another Odradek node's).

It keeps a copy of the metadata log (`kraft.observer`), registers and heartbeats
(`kraft.broker_lifecycle`), and applies each committed change: the topics clients see
(`ClusterMetadata`), what Metadata answers (`KRaftMetadataCache`) and the partitions this broker
leads (`ReplicaManager`). Requests that change metadata are forwarded to the active controller
(`cluster.forwarding`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ..cluster_metadata import ClusterMetadata, Topic, random_uuid
from ..kraft.broker_lifecycle import BrokerLifecycleManager
from ..kraft.image import MetadataImage
from ..kraft.log import MetadataLog
from ..kraft.node_client import NodeConnection, NodeUnavailableError
from ..kraft.observer import MetadataObserver, QuorumNode, parse_bootstrap_servers, parse_voters
from ..kraft.records import MetadataRecord
from ..kraft.store import supported_feature_ranges
from ..storage import inter_broker_listener, security_protocol_of
from ..wire.protocol import request_class
from .add_partitions_to_txn import AddPartitionsToTxnManager
from .alter_partition import AlterPartitionManager
from .forwarding import ForwardingManager
from .metadata_cache import KRaftMetadataCache
from .replica_fetcher import ReplicaFetcherManager
from .replica_manager import ReplicaManager, hand_over_coordinators
from .txn_markers import TransactionMarkerChannelManager

if TYPE_CHECKING:
    from ..broker import Broker
    from ..wire.primitives import Uuid

log = logging.getLogger(__name__)

ALLOCATE_PRODUCER_IDS = 67
CREATE_TOPICS = 19
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: The replication factor settings of the internal topics (Kafka's offsets/transaction configs).
_REPLICATION_CONFIGS = {OFFSETS_TOPIC: "offsets.topic.replication.factor",
                        TRANSACTION_STATE_TOPIC: "transaction.state.log.replication.factor"}


class BrokerRoleError(RuntimeError):
    """The configuration cannot make a broker of a KRaft cluster (the message says why)."""


def quorum_of(config: Any) -> list[QuorumNode]:
    """The controllers to fetch from: controller.quorum.voters, else controller.quorum.bootstrap.servers."""
    nodes = parse_voters(config.get("controller.quorum.voters")) or parse_bootstrap_servers(
        config.get("controller.quorum.bootstrap.servers"))
    if not nodes:
        raise BrokerRoleError("process.roles=broker needs controller.quorum.voters or "
                              "controller.quorum.bootstrap.servers")
    return nodes


class BrokerRole:
    """The broker side of a KRaft cluster member; `open`, then `run` as long as the broker runs."""

    def __init__(self, broker: Broker, metadata_log_dir: Any, directory_ids: dict[Any, Uuid],
                 previous_broker_epoch: int) -> None:
        self.broker = broker
        config = broker.config
        self.node_id = broker.node_id
        self.quorum = quorum_of(config)
        self.metadata_log_dir = metadata_log_dir
        self.directory_ids = directory_ids
        self.previous_broker_epoch = previous_broker_epoch
        self.image = MetadataImage()
        self.cache = KRaftMetadataCache(self.image, self.node_id)
        self.replica_manager = ReplicaManager(broker)
        self.log: MetadataLog | None = None
        self.observer: MetadataObserver | None = None
        self.lifecycle: BrokerLifecycleManager | None = None
        self.forwarding = ForwardingManager(self.node_id, self.controller)
        self.caught_up = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._creating_logs = False
        self.producer_ids = ControllerProducerIdManager(self)
        listener = inter_broker_listener(config)
        self.txn_markers = TransactionMarkerChannelManager(broker, listener)
        self.add_partitions = AddPartitionsToTxnManager(self.node_id, lambda: self.image, lambda: self.cache, listener)
        # replication: the partitions this broker follows are fetched from their leaders; ISR
        # changes of those it leads go to the controller
        self.replica_manager.fetchers = ReplicaFetcherManager(
            self.node_id, lambda: self.lifecycle.broker_epoch if self.lifecycle is not None else -1,
            lambda broker_id: self._endpoint(broker_id, listener), self.replica_manager.follower_quota)
        self.replica_manager.alter_partition = AlterPartitionManager(
            self.node_id, self.forwarding.send_own,
            lambda: self.lifecycle.broker_epoch if self.lifecycle is not None else -1,
            lambda: self.image, self.replica_manager.maybe_increment_high_watermark)
        self._max_lag_ms = int(config.get("replica.lag.time.max.ms"))

    def controller(self) -> QuorumNode | None:
        """Where the active controller is: the quorum leader the observer follows."""
        return self.observer._leader_address if self.observer is not None else None  # noqa: SLF001

    def open(self) -> None:
        """Open the local copy of the metadata log (blocking I/O: from a worker thread)."""
        config = self.broker.config
        self.log = MetadataLog.open(self.metadata_log_dir)
        meta_dir_id = next(iter(self.directory_ids.values()))
        self.observer = MetadataObserver(
            self.log, node_id=self.node_id, cluster_id=self.broker.cluster_id, directory_id=meta_dir_id,
            quorum=self.quorum, client_id=f"raft-client-{self.node_id}", on_commit=self._on_commit,
            on_snapshot=self._on_snapshot)
        controller_names = {str(n).upper() for n in config.get("controller.listener.names") or []}
        listeners = [(lst.name, lst.advertised_host, lst.port, security_protocol_of(config, lst.name))
                     for lst in config.advertised_listeners if lst.name.upper() not in controller_names]
        self.lifecycle = BrokerLifecycleManager(
            node_id=self.node_id, cluster_id=self.broker.cluster_id, incarnation_id=random_uuid(),
            listeners=listeners, features=supported_feature_ranges(), log_dirs=list(self.directory_ids.values()),
            rack=config.get("broker.rack"), previous_broker_epoch=self.previous_broker_epoch,
            controller=self.controller, metadata_offset=lambda: self.observer.applied_offset - 1 if self.observer else -1,
            caught_up=self.caught_up.is_set,
            heartbeat_interval_s=int(config.get("broker.heartbeat.interval.ms")) / 1000)
        log_manager = getattr(self.broker, "log_manager", None)
        if log_manager is not None:
            log_manager.dir_failure_listeners.append(self._dir_failed)

    def _dir_failed(self, path: Any, _partitions: Any) -> None:
        """A log dir failed: the next heartbeats name it offline (Kafka's propagateDirectoryFailure)."""
        resolved = Path(path).resolve()
        dir_id = next((u for p, u in self.directory_ids.items() if Path(p).resolve() == resolved), None)
        if dir_id is not None and self.lifecycle is not None:
            self.lifecycle.offline_dirs.add(dir_id)

    def bound_port(self, port: int) -> None:
        """The port the listener really bound (a configured port 0) is the one to register."""
        if self.lifecycle is not None:
            self.lifecycle.listeners = [(n, h, port if p == 0 else p, proto)
                                        for n, h, p, proto in self.lifecycle.listeners]

    async def run(self) -> None:
        assert self.observer is not None and self.lifecycle is not None
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            # from now on new partition logs are made off the event loop (_create_logs)
            self.replica_manager.defer_log_creation = True
            self.replica_manager.fetchers.start(nursery)
            self.replica_manager.alter_partition.nursery = nursery
            nursery.start_soon(self._shrink_isrs)
            nursery.start_soon(self.observer.run)
            nursery.start_soon(self._watch_catch_up)
            nursery.start_soon(self.lifecycle.run)
            nursery.start_soon(self.txn_markers.run)

    async def _watch_catch_up(self) -> None:
        assert self.observer is not None
        await self.observer.caught_up.wait()
        log.info("[BrokerServer id=%d] The broker has caught up with the metadata log (offset %d).",
                 self.node_id, self.observer.applied_offset)
        # Kafka publishes the first image only once caught up: strays first (renamed, not deleted
        # as a replica removed at run time is), then the partitions this broker leads
        strays = self.stray_logs()
        if strays:
            await trio.to_thread.run_sync(self.broker.log_manager.mark_stray, strays)
        self.caught_up.set()
        self._publish()

    def stray_logs(self) -> list[tuple[str, int]]:
        """Kafka's LogManager.findStrayReplicas, once the broker has caught up: loaded logs whose
        topic id the metadata does not know, whose partition it does not have, or that it does
        not place on this broker. All of them at once only with odradek.startup.allow.all.stray
        (a wrong cluster or a mixed-up dir is far likelier than every partition moving away)."""
        logs = self.broker.log_manager.all_logs()
        strays = []
        for plog in logs:
            if plog.topic in ("__cluster_metadata",):
                continue
            state = self.image.topic(plog.topic)
            part = state.partitions.get(plog.partition) if state is not None else None
            same_id = state is not None and (plog.topic_id is None or plog.topic_id == state.topic_id.bytes)
            if part is None or not same_id or self.node_id not in part.replicas:
                strays.append((plog.topic, plog.partition))
        if strays and len(strays) == len(logs) and not self.broker.config.get("odradek.startup.allow.all.stray"):
            log.error("[BrokerServer id=%d] The metadata places none of the %d partitions on disk on this broker; "
                      "they are left as they are and not served. Set odradek.startup.allow.all.stray=true to "
                      "rename them to -stray.", self.node_id, len(logs))
            return []
        return strays

    async def next_producer_id(self) -> int:
        """A producer id from a block the controller handed out (NodeUnavailableError while none)."""
        await self.producer_ids.ensure_available()
        return self.producer_ids.generate()

    async def controlled_shutdown(self) -> None:
        if self.lifecycle is not None and self.lifecycle.broker_epoch >= 0:
            granted = await self.lifecycle.controlled_shutdown(30)
            log.info("[BrokerLifecycleManager id=%d] controlled shutdown %s", self.node_id,
                     "granted" if granted else "not granted in time")
        await self.forwarding.close()
        await self.producer_ids.close()
        await self.add_partitions.close()

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None

    # ------------------------------------------------------------------ applying metadata

    def _on_commit(self, records: list[MetadataRecord], _offset: int) -> None:
        for rec in records:
            self.image.replay(rec)
        self._publish()

    def _on_snapshot(self, records: list[MetadataRecord], _offset: int) -> None:
        image = MetadataImage()
        for rec in records:
            image.replay(rec)
        self.image = self.cache.image = image
        self._publish()

    def _publish(self) -> None:
        """Kafka's BrokerMetadataPublisher: topics, the Metadata cache, then partition leadership."""
        broker = self.broker
        meta = broker.metadata
        if meta is None:
            meta = broker.metadata = ClusterMetadata(broker)
        topics = {}
        for state in self.image.topics_by_id.values():
            count = max(state.partitions) + 1 if state.partitions else 0
            topics[state.name] = Topic(state.name, state.topic_id, count, self.image.topic_configs(state.name))
        meta.topics = topics
        meta.topics_by_id = {t.topic_id: t for t in topics.values()}
        self.cache.changed()
        if not self.caught_up.is_set():
            return  # partitions follow the complete image, not the steps of a catch-up
        elected, resigned = self.replica_manager.apply(self.image)
        if self.replica_manager.missing and not self._creating_logs and self._nursery is not None:
            self._creating_logs = True
            self._nursery.start_soon(self._create_logs)
        hand_over_coordinators(broker.coordinators, elected, resigned)

    def _endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        for node in self.cache.alive_brokers(listener):
            if node.node_id == broker_id:
                return node.host, node.port
        return None

    async def _shrink_isrs(self) -> None:
        """Kafka's isr-expiration task: every half replica.lag.time.max.ms, followers that fell behind
        leave the ISR of the partitions this broker leads."""
        while True:
            await trio.sleep(self._max_lag_ms / 2000)
            self.replica_manager.shrink_isrs(self._max_lag_ms)

    async def _create_logs(self) -> None:
        """Make the logs of newly led partitions in a worker thread, then lead them (Kafka's
        makeLeaders creates them on its request-handler threads, not on a network thread)."""
        try:
            manager = self.replica_manager
            while manager.missing:
                wanted, counts = manager.take_missing()
                with trio.CancelScope(shield=True):
                    try:
                        made = await trio.to_thread.run_sync(manager.make_logs, wanted, counts)
                    finally:
                        manager.in_flight -= set(wanted)
                    manager.register(made)
                self._publish()
        finally:
            self._creating_logs = False

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        """Ask the active controller to create a topic (Kafka's AutoTopicCreationManager, for the
        internal topics of the coordinators); an existing topic is fine."""
        req = request_class(CREATE_TOPICS)
        replication = int(self.broker.config.get(_REPLICATION_CONFIGS.get(name, "default.replication.factor")))
        body = req(topics=[req.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication, assignments=[],
            configs=[req.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
            timeout_ms=30000, validate_only=False)
        try:
            resp = await self.forwarding.send_own(CREATE_TOPICS, body)
        except NodeUnavailableError as e:
            log.info("[BrokerServer id=%d] CreateTopics for %s not sent: %s", self.node_id, name, e)
            return
        for topic in resp.topics:
            if topic.error_code not in (0, 36):  # TOPIC_ALREADY_EXISTS
                log.warning("[BrokerServer id=%d] The controller did not create %s: error %d %s", self.node_id,
                            topic.name, topic.error_code, topic.error_message)


class ControllerProducerIdManager:
    """Producer ids in blocks from the active controller (Kafka's RPCProducerIdManager): the broker
    asks for a block with AllocateProducerIds when the one it has is used up. `generate` is
    synchronous (the transaction coordinator calls it); `ensure_available` first."""

    def __init__(self, role: BrokerRole) -> None:
        self.role = role
        self._lock = trio.Lock()
        self.next_id = self.block_end = 0
        self._conn: NodeConnection | None = None

    async def ensure_available(self) -> None:
        async with self._lock:
            if self.next_id < self.block_end:
                return
            role = self.role
            node = role.controller()
            epoch = role.lifecycle.broker_epoch if role.lifecycle is not None else -1
            if node is None or epoch < 0:
                raise NodeUnavailableError("no registered broker epoch or active controller yet")
            if self._conn is None or (self._conn.host, self._conn.port) != (node.host, node.port):
                self._conn = NodeConnection(node.host, node.port, node_id=node.node_id,
                                            client_id=f"broker-{role.node_id}-producer-ids")
            body = request_class(ALLOCATE_PRODUCER_IDS)(broker_id=role.node_id, broker_epoch=epoch)
            _v, resp = await self._conn.request(ALLOCATE_PRODUCER_IDS, body)
            if resp.error_code:
                raise NodeUnavailableError(f"AllocateProducerIds answered error {resp.error_code}")
            self.next_id, self.block_end = resp.producer_id_start, resp.producer_id_start + resp.producer_id_len

    def generate(self) -> int:
        if self.next_id >= self.block_end:
            raise NodeUnavailableError("the block of producer ids is used up")
        pid = self.next_id
        self.next_id += 1
        return pid

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
