"""The broker's state: configuration, the log manager, topic metadata and coordinators.

Handlers reach everything through one `Broker`. Background work (checkpoints, flushes,
retention) runs in the server's nursery so that shutdown cancels it cleanly.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import trio

from . import storage
from .cluster.metadata_cache import ControllerMetadataCache, LocalMetadataCache
from .cluster_metadata import ClusterMetadata, Topic
from .config import BrokerConfig
from .faults import Faults
from .handlers.fetch_sessions import AppendWaiters, FetchSessionCache
from .handlers.producer_ids import ProducerIdManager
from .logstore.config import LogConfig
from .logstore.partition_log import PartitionLog
from .wire.errors import ErrorCode

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


#: Worker threads for per-partition file work at start-up and topic creation: each partition's
#: leader-epoch checkpoint is written with two fsyncs (~3.4 ms here, most of it waiting for the
#: journal), and concurrent fsyncs share journal commits (8 threads: 0.8 ms a file).
FILE_WORKERS = 8


async def in_file_workers(items: list, work: Any) -> None:
    """Run `work(chunk)` over `items` split into FILE_WORKERS interleaved chunks, in worker threads."""
    chunks = [items[i::FILE_WORKERS] for i in range(FILE_WORKERS) if items[i::FILE_WORKERS]]
    async with trio.open_nursery() as nursery:
        for chunk in chunks:
            nursery.start_soon(trio.to_thread.run_sync, work, chunk)


async def _become_leaders(leaders: list[tuple[Any, int]]) -> None:
    """become_leader of every (log, epoch), off the event loop (10,000 partitions: 34 s serially)."""
    def work(chunk: list[tuple[Any, int]]) -> None:
        for partition_log, epoch in chunk:
            partition_log.become_leader(epoch)

    await in_file_workers(leaders, work)


class Broker:
    """One Odradek node: a combined KRaft broker and controller with one replica per partition."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.bound_addresses: list[tuple[str, int]] = []
        self.cluster_id = ""
        self.log_manager: Any = None
        self.metadata: ClusterMetadata | None = None
        # Long-polling fetches wait here for appends to their partitions.
        self.append_waiters = AppendWaiters()
        # Group and transaction coordinators (objects with async startup/shutdown).
        self.coordinators: dict[str, Any] = {}
        # Topics whose logs a worker thread is making (handlers.topics.create_topic): synchronous
        # create-on-first-use paths stay out meanwhile.
        self.topics_being_created: set[str] = set()
        self.fetch_sessions = FetchSessionCache()
        self.producer_ids: ProducerIdManager | None = None
        # The KRaft metadata log (kraft.store.MetadataStore); ClusterMetadata persists through it.
        self.metadata_store: Any = None
        self._metadata_lock: Any = None
        self._boot_image: Any = None
        # What Metadata answers about brokers and leaders; a broker of a KRaft cluster swaps in
        # the cache of its metadata image (cluster.broker_role).
        self.metadata_cache: Any = LocalMetadataCache(self)
        # process.roles=broker only: the metadata follower, leadership, forwarding
        self.broker_role: Any = None
        self.replica_manager: Any = None
        self.forwarding: Any = None
        # the controller of other brokers (kraft.quorum_controller), when controller.listener.names is set
        self.quorum_controller: Any = None
        # a broker of a cluster: transactional batches checked with coordinators on other brokers,
        # and transaction markers for partitions other brokers lead
        self.add_partitions_to_txn: Any = None
        self.txn_markers: Any = None
        # faults a test injects (odradek.testing): inert unless set
        self.faults = Faults(config.log_dirs)

    # ------------------------------------------------------------------ lifecycle

    async def startup(self) -> None:
        """Format the storage if needed, load (and recover) every log, replay the metadata."""
        if storage.is_broker_only(self.config):
            await self._startup_broker_only()
            return
        # Read and validate everything first: a refused start must leave every byte of the dirs
        # as it was (no formatting, no -stray renames, no clean-shutdown marker removed).
        plan = await trio.to_thread.run_sync(storage.check_startup, self.config)
        storage.ensure_formatted(self.config)
        self.cluster_id = storage.read_cluster_id(self.config)
        self.default_log_config = storage.default_log_config(self.config)
        metadata_store = storage.open_metadata_store(self.config, now_ms)
        from .kraft import quorum_controller  # noqa: PLC0415 - a controller of other brokers only
        metadata_store.serves_brokers = quorum_controller.serves_brokers(self.config)
        metadata_store.is_broker = quorum_controller.is_broker(self.config)
        # topic configs for the logs being loaded (segment.bytes, index settings, ...) before
        # ClusterMetadata exists
        self._boot_image = plan.metadata.image
        self.log_manager = storage.open_log_manager(self.config, self.topic_log_config_by_name)
        await trio.to_thread.run_sync(self.log_manager.lock_dirs)
        storage.mark_stray_partition_dirs(plan)
        await trio.to_thread.run_sync(self.log_manager.startup)
        self._metadata_lock = storage.lock_metadata_dir(self.config)
        self.metadata_store = metadata_store
        self.metadata_store.choose_dirs = self._dirs_for_new_logs
        await trio.to_thread.run_sync(self.metadata_store.start)
        if metadata_store.serves_brokers:
            self.quorum_controller = quorum_controller.QuorumController(
                metadata_store, self.cluster_id, self.node_id,
                session_timeout_ms=int(self.config.get("broker.session.timeout.ms")))
            self.metadata_cache = ControllerMetadataCache(self)
            if metadata_store.is_broker:
                # its own failed dirs, as a heartbeat of another broker would name them
                self.log_manager.dir_failure_listeners.append(
                    lambda path, _tps: self.quorum_controller.cluster.dirs_offline(
                        self.node_id, [u for p, u in metadata_store.directory_ids.items()
                                       if p.resolve() == path.resolve()]))
        elif metadata_store.is_broker:
            # the single node: a failed log dir's partitions go offline in the metadata
            self.log_manager.dir_failure_listeners.append(metadata_store.handle_dir_offline)
        self.metadata = ClusterMetadata.load(self)
        self._boot_image = None
        # Kafka's Partition.makeLeader: each partition's leader epoch (from the metadata) starts
        # at its log's end offset
        leaders = [(partition_log, self.partition_epoch_in_metadata(partition_log.topic, partition_log.partition))
                   for partition_log in self.log_manager.all_logs()
                   # a follower's epochs are its leader's (the ReplicaManager decides)
                   if not metadata_store.serves_brokers or self.leads(partition_log.topic, partition_log.partition)]
        await _become_leaders(leaders)
        self.producer_ids = ProducerIdManager.after_logs(
            self.log_manager.all_logs(), self.metadata_store.allocate_producer_ids
        )
        if not metadata_store.is_broker:
            return  # a controller only: no groups, no transactions
        from .group_coordinator import GroupCoordinator  # noqa: PLC0415 - keeps broker import light
        from .txn_coordinator import TransactionCoordinator  # noqa: PLC0415
        groups = self.coordinators.setdefault("groups", GroupCoordinator(self))
        txn = self.coordinators.setdefault("transactions", TransactionCoordinator(self))
        if metadata_store.serves_brokers:
            # the coordinators of a cluster's combined node own what the partitions it leads hold;
            # the rest of a transaction is on other brokers
            from .cluster.add_partitions_to_txn import AddPartitionsToTxnManager  # noqa: PLC0415
            from .cluster.txn_markers import TransactionMarkerChannelManager  # noqa: PLC0415

            groups.owns = lambda group_id: self.leads("__consumer_offsets", groups.partition_for(group_id))
            txn.owns = lambda txn_id: self.leads("__transaction_state", txn.partition_for(txn_id))
            listener = storage.inter_broker_listener(self.config)
            self.txn_markers = TransactionMarkerChannelManager(self, listener)
            txn.remote_markers = self.txn_markers.send
            self.add_partitions_to_txn = AddPartitionsToTxnManager(
                self.node_id, lambda: metadata_store.image, lambda: self.metadata_cache, listener)
        for name in ("groups", "transactions"):
            coordinator = self.coordinators.get(name)
            if coordinator is not None:
                await coordinator.startup()
        if metadata_store.serves_brokers:
            self._start_replica_manager()

    def _start_replica_manager(self) -> None:
        """A combined node that is the controller of a cluster is one of its brokers: its
        partitions' leadership and replication go through a ReplicaManager, as on any broker,
        fed by its own metadata store (and its ISR changes go to its own controller)."""
        from .cluster.alter_partition import AlterPartitionManager  # noqa: PLC0415
        from .cluster.replica_fetcher import ReplicaFetcherManager  # noqa: PLC0415
        from .cluster.replica_manager import ReplicaManager  # noqa: PLC0415
        from .wire.protocol import response_class  # noqa: PLC0415

        store, controller = self.metadata_store, self.quorum_controller
        manager = self.replica_manager = ReplicaManager(self)
        listener = storage.inter_broker_listener(self.config)

        def endpoint(broker_id: int) -> tuple[str, int] | None:
            node = next((b for b in self.metadata_cache.alive_brokers(listener) if b.node_id == broker_id), None)
            return (node.host, node.port) if node is not None else None

        async def to_controller(_api_key: int, body: Any) -> Any:
            # AlterPartition to this node's own controller
            return response_class(56)(error_code=0, topics=controller.replication.alter_partition(
                self.node_id, body.topics, 3))

        manager.fetchers = ReplicaFetcherManager(self.node_id, lambda: store.broker_epoch, endpoint,
                                                  manager.follower_quota)
        manager.alter_partition = AlterPartitionManager(self.node_id, to_controller, lambda: store.broker_epoch,
                                                        lambda: store.image, manager.maybe_increment_high_watermark)
        controller.on_change.append(self.publish_metadata)
        self._published = False
        self.publish_metadata()

    def publish_metadata(self) -> None:
        """Bring leadership in line with this controller's metadata (Kafka's BrokerMetadataPublisher
        on a combined node): the ReplicaManager, then the coordinators of the internal partitions."""
        manager = self.replica_manager
        if manager is None or self.metadata_store is None:
            return
        elected, resigned = manager.apply(self.metadata_store.image)
        first, self._published = not self._published, True
        if first:
            return  # the coordinators loaded what this node leads at start-up
        from .cluster.replica_manager import hand_over_coordinators  # noqa: PLC0415

        hand_over_coordinators(self.coordinators, elected, resigned)

    async def _startup_broker_only(self) -> None:
        """process.roles=broker: load the logs and the local copy of the metadata log; the
        metadata follower and registration start with the background tasks (cluster.broker_role)."""
        from .cluster.broker_role import BrokerRole  # noqa: PLC0415 - only brokers of a cluster need it
        from .logstore.metadata_files import read_clean_shutdown_file  # noqa: PLC0415

        await trio.to_thread.run_sync(storage.check_broker_startup, self.config)
        if not any((d / "meta.properties").exists() for d in storage.all_storage_dirs(self.config)):
            storage.format_storage(self.config, cluster_id=self.config.get("cluster.id"), bootstrap=False)
        self.cluster_id = storage.read_cluster_id(self.config)
        self.default_log_config = storage.default_log_config(self.config)
        dir_ids = storage.directory_ids(self.config)
        meta_dir = storage.metadata_log_dir(self.config)
        # the epoch a clean shutdown left, for BrokerRegistration's previous_broker_epoch
        marker = read_clean_shutdown_file(self.config.log_dirs[0])
        self.log_manager = storage.open_log_manager(self.config, self.topic_log_config_by_name)
        await trio.to_thread.run_sync(self.log_manager.startup)
        self._metadata_lock = storage.lock_metadata_dir(self.config)
        role = BrokerRole(self, meta_dir, dir_ids, marker if marker is not None and marker >= 0 else -1)
        await trio.to_thread.run_sync(role.open)
        self.broker_role = role
        self.replica_manager = role.replica_manager
        self.metadata_cache = role.cache
        self.forwarding = role.forwarding
        self.add_partitions_to_txn = role.add_partitions
        self.metadata = ClusterMetadata(self)
        # producer ids come in blocks from the controller
        self.producer_ids = role.producer_ids
        # the group coordinator coordinates the groups of the offsets partitions this broker leads,
        # loading them as it is elected (BrokerRole._publish)
        from .group_coordinator import GroupCoordinator  # noqa: PLC0415 - keeps broker import light
        groups = self.coordinators.setdefault("groups", GroupCoordinator(self))
        groups.owns = lambda group_id: self.replica_manager.leader_log(
            "__consumer_offsets", groups.partition_for(group_id)) is not None
        await groups.startup()
        # likewise the transactions of the __transaction_state partitions it leads; markers for
        # partitions led by other brokers go out as WriteTxnMarkers
        from .txn_coordinator import TransactionCoordinator  # noqa: PLC0415
        txn = self.coordinators.setdefault("transactions", TransactionCoordinator(self))
        txn.owns = lambda txn_id: self.replica_manager.leader_log(
            "__transaction_state", txn.partition_for(txn_id)) is not None
        txn.remote_markers = role.txn_markers.send
        await txn.startup()

    async def shutdown(self) -> None:
        """Clean shutdown: flush, trim indexes, write snapshots, checkpoints and the clean marker."""
        if self.broker_role is not None:
            # Kafka's controlled shutdown: the controller moves leadership away first
            await self.broker_role.controlled_shutdown()
        for coordinator in self.coordinators.values():
            await coordinator.shutdown()
        if self.add_partitions_to_txn is not None and self.broker_role is None:
            await self.add_partitions_to_txn.close()
        if self.metadata_store is not None:
            # controlled shutdown: the metadata records that this node no longer leads
            await trio.to_thread.run_sync(self.metadata_store.resign)
        if self.log_manager is not None:
            # Kafka writes the broker epoch into .kafka_cleanshutdown
            epoch = self.metadata_store.broker_epoch if self.metadata_store is not None else -1
            if self.broker_role is not None and self.broker_role.lifecycle is not None:
                epoch = self.broker_role.lifecycle.broker_epoch
            await trio.to_thread.run_sync(self.log_manager.shutdown, epoch)
            self.log_manager = None
        if self.metadata_store is not None:
            await trio.to_thread.run_sync(self.metadata_store.close)
            self.metadata_store = None
        if self.broker_role is not None:
            await trio.to_thread.run_sync(self.broker_role.close)
        if self._metadata_lock is not None:
            self._metadata_lock.destroy()
            self._metadata_lock = None
        log.info("Odradek broker %s shut down cleanly", self.node_id)

    async def run_background_tasks(self) -> None:
        """Periodic checkpoints and time-based flushes, like Kafka's scheduler."""
        cfg = self.config
        hw_interval = int(cfg.get("replica.high.watermark.checkpoint.interval.ms")) / 1000
        rp_interval = int(cfg.get("log.flush.offset.checkpoint.interval.ms")) / 1000
        from .handlers.replica_log_dirs import resume_moves  # noqa: PLC0415 - JBOD only
        resume_moves(self)  # replica moves between log dirs a restart interrupted
        if self.replica_manager is not None and getattr(self.replica_manager, "fetchers", None) is not None:
            self.replica_manager.fetchers.faults = self.faults
        async with trio.open_nursery() as nursery:
            faults_file = cfg.get("odradek.faults.file")
            if faults_file:
                nursery.start_soon(self.faults.follow_file, Path(faults_file))
            nursery.start_soon(self._every, hw_interval, self.log_manager.checkpoint_high_watermarks)
            nursery.start_soon(self._every, rp_interval, self.log_manager.checkpoint_recovery_points)
            ls_interval = int(cfg.get("log.flush.start.offset.checkpoint.interval.ms")) / 1000
            nursery.start_soon(self._every, ls_interval, self.log_manager.checkpoint_log_start_offsets)
            if "groups" in self.coordinators:
                nursery.start_soon(self.coordinators["groups"].run)
            if self.broker_role is not None:
                if self.bound_addresses:
                    self.broker_role.bound_port(self.bound_addresses[0][1])
                nursery.start_soon(self.broker_role.run)
            if self.quorum_controller is not None:
                nursery.start_soon(self.quorum_controller.run)
                if self.replica_manager is not None and self.broker_role is None:
                    self.replica_manager.fetchers.start(nursery)
                    self.replica_manager.alter_partition.nursery = nursery
                    max_lag_ms = int(cfg.get("replica.lag.time.max.ms"))

                    async def shrink_isrs() -> None:
                        while True:
                            await trio.sleep(max_lag_ms / 2000)
                            self.replica_manager.shrink_isrs(max_lag_ms)

                    nursery.start_soon(shrink_isrs)
            if self.txn_markers is not None and self.broker_role is None:
                nursery.start_soon(self.txn_markers.run)
            # retention (Kafka's kafka-log-retention task) and the removal of .deleted files and
            # -delete dirs; structural log changes hop back to the event loop (run_exclusive)
            self.log_manager.run_exclusive = trio.from_thread.run_sync
            retention_s = max(int(cfg.get("log.retention.check.interval.ms")), 1) / 1000
            # Kafka's kafka-log-retention task first runs log.initial.task.delay.ms after start-up
            first_s = max(int(cfg.get("log.initial.task.delay.ms")), 0) / 1000
            nursery.start_soon(self._every, retention_s, self.log_manager.cleanup_logs, first_s)
            delete_delay_s = int(cfg.get("log.segment.delete.delay.ms")) / 1000
            nursery.start_soon(self._every, min(max(delete_delay_s, 0.05), 1.0), self.log_manager.delete_pending_dirs)
            if cfg.get("log.cleaner.enable"):
                from .logstore.cleaner import LogCleaner  # noqa: PLC0415 - only brokers run it
                mv = getattr(self.metadata_store, "metadata_version", None)
                self.log_cleaner = LogCleaner.from_broker_config(self.log_manager, cfg.raw, mv)
                nursery.start_soon(self.log_cleaner.run_forever)
            flush_ms = cfg.log_flush_interval_ms
            if flush_ms < 2**62:
                nursery.start_soon(self._every, max(flush_ms, 1) / 1000, self._flush_due_logs)

    async def _every(self, seconds: float, func: Any, first: float | None = None) -> None:
        """Run `func` in a worker thread every `seconds` (the first time after `first`, if given)."""
        wait = seconds if first is None else first
        while True:
            await trio.sleep(wait)
            wait = seconds
            try:
                await trio.to_thread.run_sync(func)
            except Exception:
                log.exception("Background task %s failed", getattr(func, "__name__", func))

    def _flush_due_logs(self) -> None:
        for partition_log in self.log_manager.all_logs():
            partition_log.flush()

    # ------------------------------------------------------------------ appends and waits

    def notify_appended(self, partitions: Any = None) -> None:
        """Wake the long-polling fetches reading `partitions` ((topic, index) pairs; None: all)."""
        self.append_waiters.notify(partitions)

    async def wait_for_append(self, timeout_s: float, partitions: Any = None) -> bool:
        """Wait until one of `partitions` ((topic, index) pairs; None: any) gets data or the
        timeout passes; True if woken by an append."""
        return await self.append_waiters.wait(timeout_s, partitions)

    # ------------------------------------------------------------------ topics

    def topic_log_config(self, topic: Topic) -> LogConfig:
        """Effective log config of a topic: its overrides on top of the broker-wide defaults."""
        return LogConfig.from_props(topic.configs, base=self.default_log_config)

    def topic_log_config_by_name(self, name: str) -> LogConfig | None:
        if self.metadata is None and self._boot_image is not None:
            configs = self._boot_image.topic_configs(name)
            return LogConfig.from_props(configs, base=self.default_log_config) if configs else None
        topic = self.metadata.get(name) if self.metadata is not None else None
        return self.topic_log_config(topic) if topic is not None else None

    def open_partition_log(self, topic: Topic, partition: int) -> PartitionLog:
        """Create (or get) a partition's log; this node leads it at the current leader epoch."""
        partition_log = self.log_manager.create_log(
            topic.name, partition, topic.topic_id.bytes, self.topic_log_config(topic)
        )
        if self.leads(topic.name, partition):
            # (a follower's log takes its leader's epochs)
            partition_log.become_leader(self.partition_epoch_in_metadata(topic.name, partition))
        return partition_log

    def partition_epoch_in_metadata(self, topic: str, partition: int) -> int:
        """A partition's leader epoch as the KRaft metadata records it (0 for a new partition)."""
        store = self.metadata_store
        return store.leader_epoch_of(topic, partition) if store is not None else 0

    def _dirs_for_new_logs(self, topic: str, first: int, end: int) -> list[Any]:
        """The log dir of each partition index in [first, end): where its log is, else where the
        LogManager places it (as Kafka 4.4 does), so PartitionRecords name the right directory id."""
        dirs = self.log_manager.dirs_for_new_logs(topic, list(range(first, end)))
        return [dirs[index] for index in range(first, end)]

    def reconfigure_topic(self, topic: Topic) -> None:
        self.log_manager.update_topic_config(topic.name, self.topic_log_config(topic))

    def hosts_replica(self, topic: str, partition: int) -> bool:
        """Whether a partition has a replica on this node: always on a single node; on the
        controller of a cluster as its metadata places it (a pure controller hosts none)."""
        store = self.metadata_store
        if store is None or not store.serves_brokers:
            return True
        if not store.is_broker:
            return False
        state = store.image.topic(topic)
        part = state.partitions.get(partition) if state is not None else None
        return part is None or self.node_id in part.replicas

    def leads(self, topic: str, partition: int) -> bool:
        """Whether this node leads a partition (as the metadata says, on a cluster's controller)."""
        store = self.metadata_store
        if store is None or not store.serves_brokers:
            return self.log_manager is not None and self.log_manager.get_log(topic, partition) is not None
        state = store.image.topic(topic)
        part = state.partitions.get(partition) if state is not None else None
        return part is not None and part.leader == self.node_id

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log of a partition this broker leads (None if it does not)."""
        if self.replica_manager is not None:
            return self.replica_manager.leader_log(topic, partition)
        return self.log_manager.get_log(topic, partition)

    def partition_error(self, topic: str, partition: int) -> ErrorCode:
        """What to answer for a partition `partition_log` has no log of: NOT_LEADER_OR_FOLLOWER when
        another broker leads it, KAFKA_STORAGE_ERROR when its log dir failed, else UNKNOWN_TOPIC_OR_PARTITION."""
        if self.log_manager is not None and (topic, partition) in self.log_manager.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.replica_manager is not None:
            return self.replica_manager.error_for(topic, partition)
        store = self.metadata_store
        if store is not None and store.serves_brokers:
            state = store.image.topic(topic)
            if state is not None and partition in state.partitions:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
