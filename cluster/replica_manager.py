"""Per-partition leadership on a broker of a KRaft cluster (Kafka's ReplicaManager and Partition).

The committed metadata says who leads each partition and in which epoch. `ReplicaManager.apply`
brings this broker in line after every metadata change, as Kafka's ReplicaManager.applyDelta
does: it becomes the leader of the partitions the controller gave it (their log made if needed,
the new leader epoch started at the log end), stops leading the ones taken away, and deletes the
logs of replicas it no longer hosts (deleted topics, reassigned partitions). Handlers ask it for
a partition's log and for the error to answer when this broker does not lead the partition.

Followers (replication factor above 1) come with the replication work: a partition this broker
hosts but does not lead is answered NOT_LEADER_OR_FOLLOWER and its log is kept as it is.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..logstore.config import LogConfig
from ..wire.errors import ErrorCode
from .partition import Partition, ReplicaState, now_ms
from .replication_quota import FOLLOWER, LEADER, ReplicationQuotaManager

if TYPE_CHECKING:
    from ..broker import Broker
    from ..kraft.image import MetadataImage
    from ..logstore.partition_log import PartitionLog

log = logging.getLogger(__name__)


class ReplicaManager:
    """The partitions of the cluster, and this broker's part in each."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.node_id = broker.node_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        #: led partitions whose logs do not exist yet: `create_missing_logs` makes them in a worker
        #: thread (3-5 ms of file work and fsyncs each), then the next `apply` leads them
        self.missing: dict[tuple[str, int], tuple[bytes, LogConfig]] = {}
        #: logs a worker thread is making right now
        self.in_flight: set[tuple[str, int]] = set()
        #: False: make missing logs inside `apply`, on the caller's thread (no event loop to spare)
        self.defer_log_creation = False
        #: the follower side (cluster.replica_fetcher.ReplicaFetcherManager), set by the broker role
        self.fetchers: Any = None
        #: sends ISR changes to the controller (cluster.alter_partition.AlterPartitionManager)
        self.alter_partition: Any = None
        #: the configs of each topic last applied to its logs
        self._topic_configs: dict[str, dict[str, str]] = {}
        #: replication throttles (Kafka's quotaManagers.leader / .follower)
        window = (int(broker.config.get("replication.quota.window.num")),
                  int(broker.config.get("replication.quota.window.size.seconds")))
        self.leader_quota = ReplicationQuotaManager(LEADER, self.node_id, *window)
        self.follower_quota = ReplicationQuotaManager(FOLLOWER, self.node_id, *window)

    # ------------------------------------------------------------------ queries

    def leader_log(self, topic: str, index: int) -> PartitionLog | None:
        """The log of a partition this broker leads, else None."""
        part = self.partitions.get((topic, index))
        if part is None or part.leader != self.node_id:
            return None
        return part.log

    def error_for(self, topic: str, index: int) -> ErrorCode:
        """What to answer for a partition this broker has no leader log of (Kafka's
        getPartitionOrError): NOT_LEADER_OR_FOLLOWER when it exists, else UNKNOWN_TOPIC_OR_PARTITION."""
        if (topic, index) in self.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # ------------------------------------------------------------------ leader side of replication

    def follower_fetch(self, topic: str, index: int, replica_id: int, fetch_offset: int) -> None:
        """A follower fetched a partition this broker leads from `fetch_offset` (Kafka's
        updateFollowerFetchState): its state, then the high watermark and the ISR."""
        part = self.partitions.get((topic, index))
        if part is None or part.leader != self.node_id or part.log is None:
            return
        if not part.update_follower_fetch_state(replica_id, fetch_offset, now_ms()):
            return
        self.maybe_increment_high_watermark(part)
        expand = part.isr_to_expand()
        if expand and self.alter_partition is not None:
            self.alter_partition.submit(part, sorted(set(part.isr) | set(expand), key=part.replicas.index))

    def leader_throttled(self, topic: str, index: int, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle: hold back a throttled partition's records from a follower
        that is not in sync while the leader-side replication rate is over its bound."""
        quota = self.leader_quota
        if not quota.is_throttled(topic, index):
            return False
        part = self.partitions.get((topic, index))
        if part is not None and replica_id in part.isr:
            return False
        if quota.is_quota_exceeded():
            quota.held_back += 1
            return True
        return False

    def maybe_increment_high_watermark(self, part: Partition) -> None:
        hw = part.new_high_watermark()
        if hw is None:
            return
        assert part.log is not None
        part.log.high_watermark = hw
        # acks=all produces and fetches waiting on this partition see the new high watermark
        self.broker.notify_appended([(part.topic, part.index)])

    def shrink_isrs(self, max_lag_ms: int) -> None:
        """Kafka's maybeShrinkIsr, for every partition led here: followers that fell behind leave."""
        if self.alter_partition is None:
            return
        now = now_ms()
        for part in self.partitions.values():
            if part.leader != self.node_id or not part.replicated:
                continue
            out = part.isr_to_shrink(now, max_lag_ms)
            if out:
                log.info("[Partition %s broker=%d] Shrinking ISR from %s: %s out of sync", part.name, self.node_id,
                         part.isr, out)
                self.alter_partition.submit(part, [r for r in part.isr if r not in out])

    def follower_read(self, topic: str, index: int) -> tuple[PartitionLog, int] | None:
        """(log, leader epoch) of a partition this broker follows, for a consumer that may fetch
        from its closest replica (KIP-392): it reads up to this follower's high watermark."""
        part = self.partitions.get((topic, index))
        if part is None or part.log is None or part.leader == self.node_id or self.node_id not in part.replicas:
            return None
        return part.log, part.leader_epoch

    def preferred_read_replica(self, topic: str, index: int, client_rack: str, fetch_offset: int,
                               racks: dict[int, str | None]) -> int:
        """Kafka's Partition.findPreferredReadReplica with the RackAwareReplicaSelector: an in-sync
        replica in the client's rack that has the fetch offset, the leader when it is in that rack
        or none is; -1 when the leader is the answer (no redirect)."""
        part = self.partitions.get((topic, index))
        if part is None or part.leader != self.node_id or part.log is None or not client_rack:
            return -1
        if racks.get(self.node_id) == client_rack:
            return -1
        for replica in part.isr:
            state = part.followers.get(replica)
            if replica != self.node_id and state is not None and racks.get(replica) == client_rack \
                    and state.log_end_offset >= fetch_offset >= part.log.log_start_offset:
                return replica
        return -1

    def isr_size(self, topic: str, index: int) -> int:
        part = self.partitions.get((topic, index))
        return len(part.isr) if part is not None else 0

    # ------------------------------------------------------------------ metadata changes

    def apply(self, image: MetadataImage) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """Bring the partitions (and this broker's logs) in line with the committed metadata;
        returns the partitions this broker became the leader of, and those it stopped leading."""
        broker = self.broker
        seen: set[tuple[str, int]] = set()
        elected: list[tuple[str, int]] = []
        resigned: list[tuple[str, int]] = []
        self.leader_quota.update(image)
        self.follower_quota.update(image)
        for topic in image.topics_by_id.values():
            configs = image.topic_configs(topic.name)
            if self._topic_configs.get(topic.name) != configs:
                # a topic's configs apply to its logs here as they change (Kafka's
                # DynamicConfigPublisher), also to logs loaded before the metadata was known
                self._topic_configs[topic.name] = configs
                broker.log_manager.update_topic_config(
                    topic.name, LogConfig.from_props(configs, base=broker.default_log_config))
            for index, state in topic.partitions.items():
                key = (topic.name, index)
                seen.add(key)
                part = self.partitions.get(key)
                if part is None or part.topic_id != topic.topic_id:
                    if part is not None:
                        if part.leader == self.node_id:
                            resigned.append(key)
                        if self.fetchers is not None:
                            self.fetchers.remove(key)
                        self._drop(part, "its topic was replaced")
                    part = self.partitions[key] = Partition(topic.name, index, topic.topic_id)
                was_leader = part.leader == self.node_id
                new_epoch = state.leader_epoch != part.leader_epoch
                epoch_changed = state.partition_epoch != part.partition_epoch
                part.leader, part.leader_epoch = state.leader, state.leader_epoch
                part.partition_epoch = state.partition_epoch
                part.replicas, part.isr = list(state.replicas), list(state.isr)
                if self.node_id not in state.replicas:
                    if self.fetchers is not None:
                        self.fetchers.remove(key)
                    if was_leader:
                        resigned.append(key)
                    if part.log is not None:
                        self._drop(part, "this broker is no longer one of its replicas")
                    continue
                if part.log is None:
                    # Kafka makes the log of a replica it hosts, leader or follower
                    config = LogConfig.from_props(configs, base=broker.default_log_config)
                    existing = broker.log_manager.get_log(topic.name, index)
                    if existing is None and topic.name in broker.topics_being_created:
                        # CreateTopics on this controller is making its logs off the event loop:
                        # the publish after it leads them
                        part.leader = part.leader_epoch = -1
                        continue
                    if existing is None and self.defer_log_creation:
                        self.missing[key] = (topic.topic_id.bytes, config)
                        # not led (nor followed) until its log exists: the apply after it is made does it
                        part.leader = part.leader_epoch = -1
                        continue
                    part.log = broker.log_manager.create_log(topic.name, index, topic.topic_id.bytes, config)
                part.log.replicated = part.replicated
                part.log.on_leader_append = None
                if state.leader == self.node_id:
                    if part.replicated:
                        part.log.on_leader_append = lambda part=part: self.maybe_increment_high_watermark(part)
                    if new_epoch or not was_leader:
                        if self.fetchers is not None:
                            # first: waits out an append of the old leader's batches under way in
                            # the fetcher's thread (Kafka removes the fetcher before makeLeader)
                            self.fetchers.remove(key)
                        # Kafka's Partition.makeLeader: the new epoch starts at the log end offset
                        part.log.become_leader(state.leader_epoch)
                        part.reset_followers(now_ms())
                        log.info("[ReplicaManager broker=%d] Leader %s with leader epoch %d", self.node_id,
                                 part.name, state.leader_epoch)
                    else:
                        for r in part.replicas:
                            if r != self.node_id and r not in part.followers:
                                part.followers[r] = ReplicaState()
                    if epoch_changed:
                        part.pending_isr = None  # the controller decided (Kafka: the partition epoch moved)
                    if not was_leader:
                        elected.append(key)
                    if part.replicated:
                        self.maybe_increment_high_watermark(part)
                else:
                    if was_leader:
                        resigned.append(key)
                        log.info("[ReplicaManager broker=%d] No longer the leader of %s (leader %d, epoch %d)",
                                 self.node_id, part.name, state.leader, state.leader_epoch)
                    part.followers = {}
                    if self.fetchers is not None:
                        # Kafka's makeFollower: fetch from the new leader (truncating where the logs diverge)
                        self.fetchers.follow(key, part, state.leader, state.leader_epoch)
        for name in set(self._topic_configs) - {k[0] for k in seen}:
            del self._topic_configs[name]  # a deleted topic
        for key in [k for k in self.partitions if k not in seen]:
            part = self.partitions.pop(key)
            if self.fetchers is not None:
                self.fetchers.remove(key)
            if part.leader == self.node_id:
                resigned.append(key)
            self._drop(part, "its topic was deleted")
        if resigned:
            # acks=all produces waiting on a partition this broker no longer leads (a follower now,
            # or not a replica at all) answer NOT_LEADER_OR_FOLLOWER now, as Kafka's DelayedProduce
            # does, not at their timeout: librdkafka bumps an idempotent producer's epoch after a
            # timed-out produce and sends the batch again under new sequence numbers (a duplicate)
            broker.notify_appended(resigned)
        return elected, resigned

    def take_missing(self) -> tuple[dict[tuple[str, int], tuple[bytes, LogConfig]], dict[Path, int]]:
        """The logs `apply` found missing, and how many logs each dir holds (on the event loop).
        A log already registered or being made is not made again: opening a second PartitionLog on
        a live partition's dir would recover (and rewrite) its files under it."""
        manager = self.broker.log_manager
        wanted = {k: v for k, v in self.missing.items()
                  if k not in self.in_flight and manager.get_log(*k) is None}
        self.missing = {}
        self.in_flight |= set(wanted)
        return wanted, manager.log_counts_by_dir()

    def make_logs(self, wanted: dict[tuple[str, int], tuple[bytes, LogConfig]],
                  counts: dict[Path, int]) -> list[tuple[LogConfig, PartitionLog]]:
        """Make the logs of `take_missing` in the dirs with the fewest logs, as Kafka places them
        (blocking file work: from a worker thread; `register` them on the event loop)."""
        manager = self.broker.log_manager
        dirs = [Path(d) for d in self.broker.config.log_dirs]
        made: list[tuple[LogConfig, PartitionLog]] = []
        try:
            for (topic, index), (topic_id, config) in sorted(wanted.items()):
                chosen = min(dirs, key=lambda d: counts.get(d, 0))
                counts[chosen] = counts.get(chosen, 0) + 1
                made.append((config, manager.open_new_log(topic, index, topic_id, config, chosen)))
        except BaseException:
            for _config, plog in made:
                plog.close_handlers()
            raise
        return made

    def register(self, made: list[tuple[LogConfig, PartitionLog]]) -> None:
        """Register logs from `make_logs` with the log manager; the next `apply` leads them."""
        manager = self.broker.log_manager
        for config, plog in made:
            part = self.partitions.get((plog.topic, plog.partition))
            if part is None or self.node_id not in part.replicas or part.topic_id.bytes != plog.topic_id:
                # the metadata moved on while the log was being made (topic deleted, replica moved)
                plog.close_handlers()
                plog.delete_all_files()
                continue
            manager.topic_configs[plog.topic] = config
            manager.add_log(plog)

    def _drop(self, part: Partition, why: str) -> None:
        if part.log is None:
            return
        log.info("[ReplicaManager broker=%d] Deleting the log of %s: %s", self.node_id, part.name, why)
        self.broker.log_manager.delete_log(part.topic, part.index)
        part.log = None


def hand_over_coordinators(coordinators: dict[str, Any], elected: list[tuple[str, int]],
                           resigned: list[tuple[str, int]]) -> None:
    """Kafka's coordinators follow their internal partitions' leadership: the group coordinator
    `__consumer_offsets`, the transaction coordinator `__transaction_state` (onElection/onResignation)."""
    for name, topic in (("groups", "__consumer_offsets"), ("transactions", "__transaction_state")):
        coordinator = coordinators.get(name)
        if coordinator is None:
            continue
        gone = [p for t, p in resigned if t == topic]
        new = [p for t, p in elected if t == topic]
        if gone:
            coordinator.on_resignation(gone)
        if new:
            coordinator.on_election(new)
