"""Odradek's metadata store: the KRaft metadata log of a single-voter, single-broker cluster.

At start-up :meth:`MetadataStore.start` replays the newest snapshot and the log after it into a
:class:`MetadataImage`, refuses directories it cannot serve, and then acts as the (only) Raft
leader: a new leader epoch (quorum-state + LEADER_CHANGE batch), the bootstrap records when the
log is empty, and this broker's registration. Afterwards every metadata change made through
:class:`~odradek.cluster_metadata.ClusterMetadata` is appended (and fsynced) as Kafka's records
before it is applied, so Apache Kafka can start on the same directory, and vice versa.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..wire.primitives import Uuid
from .bootstrap import read_bootstrap_records
from .elr import partition_change
from .errors import UnservableMetadataError
from .features import (
    LATEST_PRODUCTION,
    MV_4_0_IV1,
    default_feature_levels,
    record_versions,
    supports_directory_assignment,
    supports_metadata_transactions,
)
from .image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage, PartitionState
from .log import METADATA_PARTITION_DIR, MetadataLog, metadata_batch
from .quorum_state import QuorumState
from .records import encode_metadata_record, new_record, warm_metadata_codecs
from .snapshot import SnapshotId, read_snapshot_voters
from .validation import ValidatedMetadata, validate_metadata_dir

if TYPE_CHECKING:
    from ..cluster_metadata import Topic

log = logging.getLogger(__name__)

#: Records per appended batch for bulk changes (Kafka's controller caps one operation at 10000).
MAX_RECORDS_PER_BATCH = 10000

#: Producer ids per block (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
PRODUCER_ID_BLOCK_SIZE = 1000

#: Topic configs that need something Odradek does not have.
_TIERED_STORAGE_CONFIG = "remote.storage.enable"

#: Security protocol ids of RegisterBrokerRecord endpoints (Kafka's SecurityProtocol).
_SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


#: Records built (or encoded) by `MetadataStore.build` between two yields: ~1-2 ms of Python.
BUILD_CHUNK = 100

#: The record types each ClusterMetadata change writes (`MetadataStore.records_for`).
_CHANGE_RECORDS = {"create": ("TopicRecord", "ConfigRecord", "PartitionRecord"), "partitions": ("PartitionRecord",),
                   "delete": ("RemoveTopicRecord",), "configs": ("ConfigRecord",)}

T = TypeVar("T")


class Steps(Generic[T]):
    """A generator of steps (such as `MetadataStore.build`) to iterate, one item a step (an
    event loop may checkpoint in between); `value` is what it returned, once iterated."""

    def __init__(self, steps: Generator[None, None, T]) -> None:
        self._steps = steps
        self.value: T | None = None

    def __iter__(self) -> Iterator[None]:
        self.value = yield from self._steps


def run_steps(steps: Generator[None, None, T]) -> T:
    """Run a generator of steps to its end; its return value."""
    run = Steps(steps)
    for _ in run:
        pass
    return run.value  # type: ignore[return-value]  # set by the iteration


@dataclass
class BuiltChange:
    """A metadata change ready for `MetadataStore.commit`: its records and the batch storing them."""

    records: list[tuple[str, Any]]
    batch: bytes | None


class MetadataStore:
    """The broker's `metadata_store`: replay at start-up, then one batch of records per metadata change.

    `directory_ids` maps each log dir to its `directory.id` (from meta.properties), which
    PartitionRecords name as the partition's log dir. `choose_dirs(topic, first, end)` (set by
    the broker) says in which log dir each partition index in [first, end) is or will be.
    """

    def __init__(self, metadata_log_dir: Path, node_id: int, directory_ids: dict[Path, Uuid],
                 now_ms: Callable[[], int]) -> None:
        self.metadata_log_dir = Path(metadata_log_dir)
        self.node_id = node_id
        self.directory_ids = {Path(k): v for k, v in directory_ids.items()}
        self.now_ms = now_ms
        self.image = MetadataImage()
        self.log: MetadataLog | None = None
        self.epoch = 0
        self.broker_epoch = -1
        self.choose_dirs: Callable[[str, int, int], list[Path]] | None = None
        self.listeners: list[tuple[str, str, int, str]] = []
        #: the broker's min.insync.replicas, the cluster-level config the bootstrap writes with ELR
        self.min_insync_replicas = "1"
        #: False on a node with process.roles=controller: it neither registers nor leads partitions
        self.is_broker = True
        #: True when other brokers may register (controller.listener.names set): partitions of
        #: other brokers are then this controller's to keep, not a dir to refuse
        self.serves_brokers = False
        #: the replicas of each new partition index in [first, end) (kraft.cluster_control); None:
        #: this node alone
        self.placement: Callable[[str, int, int], list[list[int]]] | None = None
        #: called once appended records are on disk (the Raft leader wakes waiting fetches)
        self.on_flushed: Callable[[], None] | None = None
        #: the records that take a broker's leaderships away (kraft.cluster_control), for `resign`
        self.leadership_loss: Callable[[int], list[tuple[str, Any]]] | None = None

    # ------------------------------------------------------------------ start-up

    def precheck(self) -> ValidatedMetadata:
        """Refuse unservable metadata before anything is locked, loaded or changed on disk.

        Reads the newest snapshot and every batch after it completely, without opening or
        recovering the log, and refuses a record type, version, control record or feature level
        this build does not know, and corruption anywhere but a torn tail; so a refused start
        leaves a Kafka directory exactly as it was (clean-shutdown markers included). Returns
        what it read (the image is used to find stray partition dirs before the logs load).
        """
        checked = validate_metadata_dir(self.metadata_log_dir, supported_feature_ranges())
        md_dir = self.metadata_log_dir / METADATA_PARTITION_DIR
        self._check_voters_in(md_dir, [checked.snapshot])
        self._check_image(checked.image)
        return checked

    def start(self) -> None:
        """Open and replay the metadata log, check it can be served, then lead a new epoch."""
        self.log = MetadataLog.open(self.metadata_log_dir)
        md = self.log
        self._check_voters_in(md.dir, [md.latest_snapshot()])
        self.image.replay_all(md.replay_records())
        open_transaction = self.image.finish()
        self.check_servable()
        state = QuorumState.read(md.dir)
        self.epoch = max(md.last_epoch(), state.leader_epoch if state else 0) + 1
        # Kafka persists the election before acting as leader of the new epoch, in the file version
        # of the log's kraft.version (0: with the voter set; 1: KIP-853, voters live in the log)
        if md.kraft_version() >= 1:
            QuorumState(leader_id=self.node_id, leader_epoch=self.epoch, data_version=1).write(md.dir)
        else:
            QuorumState(leader_id=self.node_id, leader_epoch=self.epoch, voters=[self.node_id]).write(md.dir)
        now = self.now_ms()
        # Kafka 4.4's format leaves the bootstrap records as the snapshot 0-0: not a snapshot of a
        # started log, its records still have to go into the log on the first start
        was_empty = md.log_end_offset == 0 and md.latest_snapshot() in (None, SnapshotId(0, 0))
        md.become_leader(self.epoch, self.node_id, now)
        if open_transaction:
            # what Kafka's controller writes on activation after a failover mid-transaction
            self._append([("AbortTransactionRecord",
                           new_record("AbortTransactionRecord", reason="Controller failover"))])
        if was_empty or "metadata.version" not in self.image.features:
            self._append(self._bootstrap_records())
        if self.is_broker:
            self.broker_epoch = self._append([("RegisterBrokerRecord", self._registration(-1))], patch_epoch=True)
            if self.serves_brokers:
                # other brokers see this one as any broker: unfenced once registered (Kafka's
                # combined node is unfenced by its own controller's first heartbeat answer)
                self._append([("BrokerRegistrationChangeRecord", new_record(
                    "BrokerRegistrationChangeRecord", broker_id=self.node_id, broker_epoch=self.broker_epoch,
                    fenced=-1, in_controlled_shutdown=0))])
            self._take_leadership()
        log.info("Metadata log %s: %d topics, leader epoch %d, broker epoch %d, end offset %d", md.dir,
                 len(self.image.topics_by_id), self.epoch, self.broker_epoch, md.log_end_offset)

    def _check_voters_in(self, md_dir: Path, snapshots: Sequence[SnapshotId | None]) -> None:
        voters: list[int] | None = None
        state = QuorumState.read(md_dir)
        if state is not None and state.voters:
            voters = state.voters
        snap = snapshots[0] if snapshots else None
        if snap is not None:
            voters = read_snapshot_voters(md_dir / snap.file_name) or voters
        if voters is not None and sorted(set(voters)) != [self.node_id]:
            raise UnservableMetadataError(
                f"The KRaft quorum in {md_dir} has voters {sorted(set(voters))}; Odradek is a single combined node "
                f"and can only continue a quorum whose only voter is node.id {self.node_id}.")

    def check_servable(self) -> None:
        """Refuse metadata this node cannot serve: replicas on other brokers, tiered storage."""
        self._check_image(self.image)

    def _check_image(self, image: MetadataImage) -> None:
        problems: list[str] = []
        for topic in image.topics_by_id.values():
            for index, part in sorted(topic.partitions.items()):
                if self.serves_brokers:
                    break
                others = sorted(set(part.replicas) - {self.node_id})
                if others or self.node_id not in part.replicas:
                    problems.append(f"{topic.name}-{index} has replicas {part.replicas} (other brokers: {others})")
            if image.topic_configs(topic.name).get(_TIERED_STORAGE_CONFIG, "false").lower() == "true":
                problems.append(f"topic {topic.name} uses tiered storage (remote.storage.enable=true)")
        if problems:
            shown = "; ".join(problems[:20]) + (f"; and {len(problems) - 20} more" if len(problems) > 20 else "")
            raise UnservableMetadataError(
                f"Odradek (node.id {self.node_id}, one replica per partition, no tiered storage) cannot serve the "
                f"metadata in {self.metadata_log_dir}: {shown}. Reassign these partitions to node {self.node_id} only "
                "(kafka-reassign-partitions.sh) and disable tiered storage before moving the log dir.")

    def _bootstrap_records(self) -> list[tuple[str, Any]]:
        """The bootstrap records in a transaction: the format's records (bootstrap.checkpoint, else
        Kafka 4.4's bootstrap snapshot; else the default levels), then, with ELR, the cluster's
        min.insync.replicas as Kafka 4.4's controller writes it on its first start."""
        found = read_bootstrap_records(self.metadata_log_dir)
        levels: list[tuple[str, Any]]
        if found:
            levels = [(r.name, r.message) for r in found if r.message is not None]
        else:
            levels = [("FeatureLevelRecord", new_record("FeatureLevelRecord", name=n, feature_level=v))
                      for n, v in default_feature_levels().items()]
        # metadata.version first: Kafka replays it before anything else (SCRAM records of
        # --add-scram follow the feature levels, in their order)
        def is_mv(r: tuple[str, Any]) -> bool:
            return r[0] == "FeatureLevelRecord" and r[1].name == "metadata.version"

        levels.sort(key=lambda r: 0 if is_mv(r) else 1)
        mv = next((m.feature_level for n, m in levels if is_mv((n, m))), LATEST_PRODUCTION)
        elr = next((m.feature_level for n, m in levels
                    if n == "FeatureLevelRecord" and m.name == "eligible.leader.replicas.version"), 0)
        if elr >= 1 and not any(n == "ConfigRecord" and m.resource_type == RESOURCE_BROKER and not m.resource_name
                                and m.name == "min.insync.replicas" for n, m in levels):
            levels.append(("ConfigRecord", new_record(
                "ConfigRecord", resource_type=RESOURCE_BROKER, resource_name="", name="min.insync.replicas",
                value=str(self.min_insync_replicas))))
        if not supports_metadata_transactions(mv):
            return levels
        return [("BeginTransactionRecord", new_record("BeginTransactionRecord", name="Bootstrap records")),
                *levels,
                ("EndTransactionRecord", new_record("EndTransactionRecord"))]

    def _registration(self, broker_epoch: int) -> Any:
        rec_cls = type(new_record("RegisterBrokerRecord"))
        endpoints = [rec_cls.BrokerEndpoint(name=name, host=host, port=port,
                                            security_protocol=_SECURITY_PROTOCOLS.get(proto, 0))
                     for name, host, port, proto in self.listeners]
        features = [rec_cls.BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                    for n, (lo, hi) in supported_feature_ranges().items()]
        # Registered fenced: a Kafka controller taking over this log then waits for no session of
        # this registration to expire (an unfenced one would block the new registration for
        # broker.session.timeout.ms).
        return new_record("RegisterBrokerRecord", broker_id=self.node_id, is_migrating_zk_broker=False,
                          incarnation_id=_random_uuid(), broker_epoch=broker_epoch, end_points=endpoints,
                          features=features, rack=None, fenced=True, in_controlled_shutdown=False,
                          log_dirs=sorted(set(self.directory_ids.values()), key=lambda u: u.bytes)
                          if supports_directory_assignment(self.metadata_version) else [])

    # ------------------------------------------------------------------ partition leadership

    def _take_leadership(self) -> None:
        """Lead every partition again, with the PartitionChangeRecords Kafka's controller writes
        when a broker comes back: a still-registered previous incarnation (no controlled
        shutdown) is fenced first (leader -1), then the unfenced broker is elected. Each change
        is a new leader epoch, so epochs grow across restarts exactly as with Kafka."""
        changes: list[tuple[str, Any]] = []
        for topic in self.image.topics_by_id.values():
            for index, part in sorted(topic.partitions.items()):
                if self.node_id not in part.replicas:
                    continue  # another broker's (a controller of a cluster)
                if self.serves_brokers and (part.leader not in (-1, self.node_id)
                                            or (part.isr and self.node_id not in part.isr)):
                    continue  # led by another broker, or this replica is out of sync: not ours to take
                if part.leader == self.node_id:
                    changes.append(self._fence(topic.topic_id, index))
                changes.append(self._elect(topic.topic_id, index, part))
        self._append_chunked(changes)

    def resign(self) -> None:
        """Controlled shutdown: give up the leadership of every partition (leader -1), as Kafka's
        controller records it when the broker stops cleanly."""
        if self.log is None:
            return
        if self.leadership_loss is not None:
            # the controller of a cluster: another in-sync replica takes over where there is one
            self._append_chunked(self.leadership_loss(self.node_id))
            return
        changes = [self._fence(topic.topic_id, index)
                   for topic in self.image.topics_by_id.values()
                   for index, part in sorted(topic.partitions.items()) if part.leader == self.node_id]
        self._append_chunked(changes)

    def handle_dir_offline(self, path: Path, _partitions: Sequence[tuple[str, int]] = ()) -> int:
        """A log dir of this node failed: what Kafka's controller writes when a broker's heartbeat
        names it offline (ReplicationControlManager.handleDirectoriesOffline): this node leaves the
        ISR of every partition whose replica the metadata places in that dir (leader -1 where it
        led), then a BrokerRegistrationChangeRecord lists the dirs still online. Metadata then
        answers those partitions as offline. Returns how many partitions changed."""
        if self.log is None or not self.is_broker:
            return 0
        dir_id = self.directory_ids.get(Path(path)) or next(
            (u for p, u in self.directory_ids.items() if p.resolve() == Path(path).resolve()), None)
        reg = self.image.brokers.get(self.node_id)
        if dir_id is None or reg is None or dir_id not in (reg.log_dirs or []):
            return 0
        changes: list[tuple[str, Any]] = []
        for topic in self.image.topics_by_id.values():
            for index, part in sorted(topic.partitions.items()):
                if self.node_id not in part.replicas or not part.directories:
                    continue
                if part.directories[part.replicas.index(self.node_id)] != dir_id:
                    continue
                if part.leader == self.node_id or self.node_id in part.isr:
                    changes.append(self._fence(topic.topic_id, index))
        online = [u for u in reg.log_dirs if u != dir_id]
        changes.append(("BrokerRegistrationChangeRecord", new_record(
            "BrokerRegistrationChangeRecord", broker_id=self.node_id, broker_epoch=reg.broker_epoch,
            log_dirs=online)))
        self._append_chunked(changes)
        log.warning("Directory %s of broker %d marked offline, remaining directories: %s", dir_id.to_base64(),
                    self.node_id, [u.to_base64() for u in online])
        return len(changes) - 1

    def _elr(self) -> bool:
        return self.metadata_version >= MV_4_0_IV1

    def min_isr(self, topic: str) -> int:
        """A topic's min.insync.replicas as the controller sees it: the topic's config, else the
        cluster-wide one (the ConfigRecord Kafka's bootstrap writes with ELR), else the node's."""
        value = (self.image.configs.get((RESOURCE_TOPIC, topic), {}).get("min.insync.replicas")
                 or self.image.configs.get((RESOURCE_BROKER, ""), {}).get("min.insync.replicas")
                 or self.min_insync_replicas)
        try:
            return int(value)
        except ValueError:
            return 1

    def partition_change(self, topic: Any, index: int, target_isr: list[int], **kwargs: Any) -> tuple[str, Any]:
        """A PartitionChangeRecord of a cluster's partition as Kafka's PartitionChangeBuilder
        writes it (kraft.elr: the ISR, the leader, and the eligible leader replicas)."""
        fields = partition_change(topic.partitions[index], target_isr, min_isr=self.min_isr(topic.name),
                                  elr_enabled=self._elr(), **kwargs)
        return ("PartitionChangeRecord", new_record("PartitionChangeRecord", partition_id=index,
                                                    topic_id=topic.topic_id, **fields))

    def _fence(self, topic_id: Uuid, index: int, broker: int | None = None) -> tuple[str, Any]:
        """The PartitionChangeRecord that takes the leadership of a partition with one replica
        away from `broker` (default: this node), as Kafka's controller writes it on fencing."""
        broker = self.node_id if broker is None else broker
        fields: dict[str, Any] = {"partition_id": index, "topic_id": topic_id, "leader": -1}
        if self._elr():
            # with ELR the last ISR member leaves the ISR and becomes the eligible leader
            fields.update(isr=[], eligible_leader_replicas=[broker], last_known_elr=[broker])
        return ("PartitionChangeRecord", new_record("PartitionChangeRecord", **fields))

    def _elect(self, topic_id: Uuid, index: int, part: PartitionState, broker: int | None = None) -> tuple[str, Any]:
        """The PartitionChangeRecord that makes `broker` (default: this node) the leader again."""
        broker = self.node_id if broker is None else broker
        fields: dict[str, Any] = {"partition_id": index, "topic_id": topic_id, "leader": broker}
        if len(part.replicas) > 1 and broker in part.isr:
            pass  # a clean election: the ISR stays as it is
        elif part.isr != [broker]:
            fields["isr"] = [broker]
        if self._elr():
            fields.update(eligible_leader_replicas=[], last_known_elr=[])
        return ("PartitionChangeRecord", new_record("PartitionChangeRecord", **fields))

    def _append_chunked(self, records: list[tuple[str, Any]], chunk: int = MAX_RECORDS_PER_BATCH) -> None:
        for i in range(0, len(records), chunk):
            self._append(records[i:i + chunk])

    # ------------------------------------------------------------------ appends

    @property
    def metadata_version(self) -> int:
        """The finalized metadata.version (Kafka 4.4's latest production level before the bootstrap
        records are in, as its MetadataVersion fallback)."""
        return self.image.features.get("metadata.version", LATEST_PRODUCTION)

    def _append(self, records: Sequence[tuple[str, Any]], patch_epoch: bool = False) -> int:
        """Append records (one batch), then apply them to the image; returns the batch's base offset."""
        assert self.log is not None, "metadata store not started"
        if patch_epoch:
            # Kafka's broker epoch is the offset of the registration record itself
            for _name, msg in records:
                msg.broker_epoch = self.log.log_end_offset
        base = self.log.append(records, self.epoch, self.now_ms(), record_versions(self.metadata_version))
        self.image.replay_appended(records)
        if self.on_flushed is not None:
            self.on_flushed()
        return base

    def append_records(self, records: Sequence[tuple[str, Any]], patch_epoch: bool = False) -> int:
        """Persist controller records that are no topic change (SCRAM credentials, ...) as one batch
        (several past MAX_RECORDS_PER_BATCH), then apply them to the image; returns the first
        batch's base offset. `patch_epoch`: a RegisterBrokerRecord's epoch is its own offset."""
        if len(records) <= MAX_RECORDS_PER_BATCH:
            return self._append(records, patch_epoch=patch_epoch)
        first = self.log.log_end_offset if self.log is not None else 0
        self._append_chunked(list(records))
        return first

    def scram_credentials(self) -> dict[tuple[int, str], Any]:
        """The UserScramCredentialRecords in force, by (mechanism type, user name)."""
        return self.image.scram

    # ------------------------------------------------------------------ ClusterMetadata's interface

    def replay(self) -> Iterator[Topic]:
        """The topics of the replayed metadata, as ClusterMetadata's Topic objects."""
        from ..cluster_metadata import Topic

        for state in self.image.topics_by_id.values():
            count = max(state.partitions) + 1 if state.partitions else 0
            yield Topic(state.name, state.topic_id, count, self.image.topic_configs(state.name))

    def record(self, change: str, topic: Topic) -> None:
        """Persist one ClusterMetadata change ("create", "partitions", "delete", "configs") as records."""
        self.commit(run_steps(self.build(change, topic)))

    def build(self, change: str, topic: Topic) -> Generator[None, None, BuiltChange]:
        """Build the records and the batch of a ClusterMetadata change (see `record`) without
        appending it; yields after every BUILD_CHUNK records, so that an event loop can serve
        others in between (1000 partitions: ~20-40 ms of Python). Nothing is changed until
        `commit`; the caller keeps other changes of the same topic out until then."""
        records = yield from self._record_steps(change, topic)
        if not records:
            return BuiltChange([], None)
        versions = record_versions(self.metadata_version)
        values = []
        for i, (name, msg) in enumerate(records, 1):
            values.append(encode_metadata_record(name, msg, versions.get(name)))
            if i % BUILD_CHUNK == 0:
                yield
        return BuiltChange(records, metadata_batch(values, self.now_ms()))

    def warm_codecs(self, change: str) -> None:
        """Compile the codecs of the records a change writes (blocking: from a worker thread)."""
        warm_metadata_codecs(_CHANGE_RECORDS[change], record_versions(self.metadata_version))

    def commit(self, built: BuiltChange) -> int:
        """Append a built change as one batch (fsynced), then apply it to the image; returns the
        batch's base offset."""
        base = self.append_built(built)
        self.apply(built)
        return base

    def append_built(self, built: BuiltChange, *, flush: bool = True) -> int:
        """The first half of `commit`: append the change's batch, and fsync it unless `flush` is
        False (then `flush`, from a worker thread if need be, before `apply`)."""
        assert self.log is not None, "metadata store not started"
        if built.batch is None:
            return self.log.log_end_offset
        base = self.log.append_batch(built.batch, self.epoch, flush=flush)
        if flush and self.on_flushed is not None:
            self.on_flushed()
        return base

    def flush(self) -> None:
        """fsync the metadata log (blocking I/O)."""
        assert self.log is not None, "metadata store not started"
        self.log.flush()

    def apply(self, built: BuiltChange) -> None:
        """The second half of `commit`: apply an appended (and flushed) change to the image."""
        self.image.replay_appended(built.records)
        if self.on_flushed is not None:
            self.on_flushed()

    def records_for(self, change: str, topic: Topic) -> list[tuple[str, Any]]:
        """The metadata records Kafka's controller would write for a change of `topic`."""
        return run_steps(self._record_steps(change, topic))

    def _record_steps(self, change: str, topic: Topic) -> Generator[None, None, list[tuple[str, Any]]]:
        records: list[tuple[str, Any]] = []
        if change == "create":
            records.append(("TopicRecord", new_record("TopicRecord", name=topic.name, topic_id=topic.topic_id)))
            for key, value in sorted(topic.configs.items()):
                records.append(("ConfigRecord", self._config(topic.name, key, value)))
            records += yield from self._partition_records(topic, 0, topic.partitions)
        elif change == "partitions":
            state = self.image.topics_by_id.get(topic.topic_id)
            old = max(state.partitions) + 1 if state is not None and state.partitions else 0
            records += yield from self._partition_records(topic, old, topic.partitions)
        elif change == "delete":
            records.append(("RemoveTopicRecord", new_record("RemoveTopicRecord", topic_id=topic.topic_id)))
        elif change == "configs":
            old = self.image.topic_configs(topic.name)
            for key in sorted(set(old) | set(topic.configs)):
                new_value = topic.configs.get(key)
                if old.get(key) != new_value:
                    records.append(("ConfigRecord", self._config(topic.name, key, new_value)))
        else:
            raise ValueError(f"unknown metadata change {change!r}")
        return records

    def _config(self, topic: str, key: str, value: str | None) -> Any:
        return new_record("ConfigRecord", resource_type=RESOURCE_TOPIC, resource_name=topic, name=key,
                          value=None if value is None else str(value))

    def _partition_records(self, topic: Topic, first: int, end: int) -> Generator[None, None, list[tuple[str, Any]]]:
        if end <= first:
            return []
        dirs = self.choose_dirs(topic.name, first, end) if self.choose_dirs is not None else []
        with_dirs = supports_directory_assignment(self.metadata_version)
        default = next(iter(self.directory_ids.values()), None)
        ids = {d: self.directory_ids.get(Path(d), default) for d in set(dirs)}
        placed = self.placement(topic.name, first, end) if self.placement is not None else None
        out = []
        for i, index in enumerate(range(first, end)):
            replicas = placed[i] if placed is not None else [self.node_id]
            directory = ids[dirs[i]] if i < len(dirs) else default
            directories = [directory if b == self.node_id else self.default_dir(b) for b in replicas]
            out.append(("PartitionRecord", new_record(
                "PartitionRecord", partition_id=index, topic_id=topic.topic_id, replicas=list(replicas),
                isr=list(replicas), removing_replicas=[], adding_replicas=[], leader=replicas[0],
                leader_recovery_state=0, leader_epoch=0, partition_epoch=0,
                directories=directories if with_dirs else [])))
            if (i + 1) % BUILD_CHUNK == 0:
                yield
        return out

    def default_dir(self, broker_id: int) -> Uuid:
        """Kafka's ClusterControlManager.defaultDir: the log dir of a broker registered with exactly
        one, else UNASSIGNED (the broker then says where with AssignReplicasToDirs)."""
        if broker_id == self.node_id and self.is_broker:
            return next(iter(self.directory_ids.values()), Uuid.ZERO)
        reg = self.image.brokers.get(broker_id)
        dirs = list(reg.log_dirs or []) if reg is not None else []
        return dirs[0] if len(dirs) == 1 else Uuid.ZERO

    def reconcile_directories(self, locations: dict[tuple[str, int], Path]) -> int:
        """Record where partition logs really are (a PartitionChangeRecord with `directories`, what
        Kafka's controller writes after a broker's AssignReplicasToDirs); returns how many moved."""
        changes: list[tuple[str, Any]] = []
        for (name, index), path in sorted(locations.items()):
            state = self.image.topic(name)
            part = state.partitions.get(index) if state is not None else None
            dir_id = self.directory_ids.get(Path(path))
            # only where Kafka's records carry directories at all (metadata.version 3.7-IV2+)
            if part is None or dir_id is None or not part.directories or part.directories == [dir_id]:
                continue
            changes.append(("PartitionChangeRecord", new_record(
                "PartitionChangeRecord", partition_id=index, topic_id=state.topic_id, directories=[dir_id])))
        if changes and supports_directory_assignment(self.metadata_version):
            self._append(changes)
            return len(changes)
        return 0

    def partition_leader_epoch(self) -> int:
        """The highest leader epoch any partition has reached."""
        return self.image.max_leader_epoch()

    def leader_epoch_of(self, name: str, index: int) -> int:
        """A partition's leader epoch in the metadata (0, a new partition's, when it has none yet)."""
        state = self.image.topic(name)
        part = state.partitions.get(index) if state is not None else None
        return part.leader_epoch if part is not None else 0

    def partition_states(self, name: str) -> dict[int, PartitionState]:
        state = self.image.topic(name)
        return dict(state.partitions) if state is not None else {}

    # ------------------------------------------------------------------ producer ids

    def allocate_producer_ids(self, at_least: int = 0, broker_id: int | None = None,
                              broker_epoch: int | None = None) -> int:
        """Reserve the next block of producer ids (persisted first) for `broker_id` (default: this
        node); returns its first id."""
        start = max(self.image.next_producer_id, at_least)
        record = new_record("ProducerIdsRecord", broker_id=self.node_id if broker_id is None else broker_id,
                            broker_epoch=self.broker_epoch if broker_epoch is None else broker_epoch,
                            next_producer_id=start + PRODUCER_ID_BLOCK_SIZE)
        self._append([("ProducerIdsRecord", record)])
        return start

    # ------------------------------------------------------------------ shutdown

    def close(self) -> None:
        """Close the metadata log cleanly (final producer snapshot, trimmed indexes)."""
        if self.log is not None:
            self.log.close()
            self.log = None


def supported_feature_ranges() -> dict[str, tuple[int, int]]:
    """The feature ranges a Kafka 4.4 broker registers with, in the order of its RegisterBrokerRecord."""
    from .features import supported_feature_ranges as kafka_ranges  # (only this function is ours to edit)

    ranges = kafka_ranges()
    order = ("kraft.version", "group.version", "streams.version", "transaction.version",
             "eligible.leader.replicas.version", "metadata.version", "share.version")
    return {name: ranges[name] for name in order}


def _random_uuid() -> Uuid:
    from ..cluster_metadata import random_uuid

    return random_uuid()
