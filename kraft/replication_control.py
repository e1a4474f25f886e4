"""Partition changes brokers ask their controller for (the broker-request parts of Kafka's
ReplicationControlManager): AlterPartition (a leader's new ISR) and AssignReplicasToDirs (the log
dir a broker put a replica in). Each accepted change is a PartitionChangeRecord in the metadata log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class
from .records import new_record

if TYPE_CHECKING:
    from .cluster_control import ClusterControlManager
    from .store import MetadataStore

AlterPartitionResponse = response_class(56)
AssignReplicasToDirsResponse = response_class(73)


class ReplicationControlManager:
    """ISR and directory changes requested by brokers, checked and recorded as Kafka's controller does."""

    def __init__(self, store: MetadataStore, cluster: ClusterControlManager) -> None:
        self.store = store
        self.cluster = cluster

    def alter_partition(self, broker_id: int, topics: list[Any], version: int) -> list[Any]:
        R = AlterPartitionResponse
        image = self.store.image
        records: list[tuple[str, Any]] = []
        out = []
        usable = set(self.cluster.usable_brokers())
        for topic in topics:
            state = image.topics_by_id.get(topic.topic_id) if version >= 2 else image.topic(topic.topic_name)
            results = []
            for wanted in topic.partitions:
                part = state.partitions.get(wanted.partition_index) if state is not None else None
                result = R.PartitionData(partition_index=wanted.partition_index, error_code=0)
                results.append(result)
                if part is None:
                    result.error_code = int(ErrorCode.UNKNOWN_TOPIC_ID if version >= 2
                                            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                new_isr = ([b.broker_id for b in wanted.new_isr_with_epochs] if version >= 3
                           else list(wanted.new_isr))
                if part.leader != broker_id:
                    result.error_code = int(ErrorCode.INVALID_REQUEST)
                elif wanted.leader_epoch != part.leader_epoch:
                    result.error_code = int(ErrorCode.FENCED_LEADER_EPOCH)
                elif wanted.partition_epoch != part.partition_epoch:
                    result.error_code = int(ErrorCode.INVALID_UPDATE_VERSION)
                elif any(b not in part.replicas for b in new_isr) or broker_id not in new_isr:
                    result.error_code = int(ErrorCode.INVALID_REQUEST)
                elif any(b not in usable for b in new_isr):
                    result.error_code = int(ErrorCode.INELIGIBLE_REPLICA)
                if result.error_code:
                    continue
                if new_isr != part.isr:
                    records.append(self.store.partition_change(state, wanted.partition_index, new_isr))
                    epoch = part.partition_epoch + 1
                else:
                    epoch = part.partition_epoch
                result.leader_id, result.leader_epoch = part.leader, part.leader_epoch
                result.isr, result.partition_epoch = new_isr, epoch
                result.leader_recovery_state = 0
            out.append(R.TopicData(topic_name=topic.topic_name, topic_id=topic.topic_id, partitions=results))
        if records:
            self.store.append_records(records)
            for name, index in {(t.topic_name if version < 2 else self.store.image.topics_by_id[t.topic_id].name, p.partition_index)
                                for t in topics for p in t.partitions
                                if (version < 2 or t.topic_id in self.store.image.topics_by_id)}:
                self.maybe_complete_reassignment(name, index)
        return out

    def assign_replicas_to_dirs(self, broker_id: int, directories: list[Any]) -> list[Any]:
        R = AssignReplicasToDirsResponse
        image = self.store.image
        reg = image.brokers.get(broker_id)
        known = set(reg.log_dirs or []) if reg is not None else set()
        records: list[tuple[str, Any]] = []
        out = []
        for directory in directories:
            topics = []
            for topic in directory.topics:
                state = image.topics_by_id.get(topic.topic_id)
                parts = []
                for wanted in topic.partitions:
                    part = state.partitions.get(wanted.partition_index) if state is not None else None
                    code = ErrorCode.NONE
                    if part is None:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if state is not None else ErrorCode.UNKNOWN_TOPIC_ID
                    elif broker_id not in part.replicas:
                        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    elif directory.id not in known:
                        code = ErrorCode.LOG_DIR_NOT_FOUND
                    else:
                        dirs = list(part.directories) or [self.store.default_dir(b) for b in part.replicas]
                        dirs[part.replicas.index(broker_id)] = directory.id
                        if dirs != part.directories:
                            records.append(("PartitionChangeRecord", new_record(
                                "PartitionChangeRecord", partition_id=wanted.partition_index,
                                topic_id=topic.topic_id, directories=dirs)))
                    parts.append(R.PartitionData(partition_index=wanted.partition_index, error_code=int(code)))
                topics.append(R.TopicData(topic_id=topic.topic_id, partitions=parts))
            out.append(R.DirectoryData(id=directory.id, topics=topics))
        if records:
            self.store.append_records(records)
        return out

    # ------------------------------------------------------------------ reassignments

    def reassign(self, topic: str, index: int, target: list[int] | None,
                 allow_replication_factor_change: bool = True) -> tuple[ErrorCode, str | None]:
        """AlterPartitionReassignments for one partition (Kafka's ReplicationControlManager): the
        target replicas are added (replicas = target + those leaving, with adding/removing set),
        and the move completes once the ISR holds the whole target; `target` None cancels."""
        state = self.store.image.topic(topic)
        part = state.partitions[index] if state is not None and index in state.partitions else None
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{index}."
        ongoing = bool(part.adding or part.removing)
        original = [r for r in part.replicas if r not in part.adding]
        if target is None:
            if not ongoing:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
            self._change(state.topic_id, index, part, original, leader_from=original)
            return ErrorCode.NONE, None
        registered = set(self.store.image.brokers) | ({self.cluster.node_id} if self.cluster.own_broker else set())
        seen: set[int] = set()
        for broker_id in target:
            if broker_id not in registered:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes broker {broker_id}, but no such broker is "
                        "registered.")
            if broker_id in seen:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"The manual partition assignment includes the broker {broker_id} more than once.")
            seen.add(broker_id)
        if not allow_replication_factor_change and len(target) != len(original):
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"The replication factor is changed from {len(original)} to {len(target)}")
        if not ongoing and list(target) == part.replicas:
            return ErrorCode.NONE, None
        merged = list(target) + [r for r in original if r not in target]
        adding = [r for r in target if r not in original]
        removing = [r for r in original if r not in target]
        self.store.append_records([("PartitionChangeRecord", new_record(
            "PartitionChangeRecord", partition_id=index, topic_id=state.topic_id, replicas=merged,
            isr=[r for r in part.isr if r in merged] or None, adding_replicas=adding, removing_replicas=removing,
            **self._directories(part, merged)))])
        self.maybe_complete_reassignment(topic, index)
        return ErrorCode.NONE, None

    def maybe_complete_reassignment(self, topic: str, index: int) -> None:
        """Finish a move whose target replicas are all in sync: the leaving replicas go, and a
        leader that leaves hands over to an in-sync target replica."""
        state = self.store.image.topic(topic)
        part = state.partitions.get(index) if state is not None else None
        if part is None or not (part.adding or part.removing):
            return
        target = [r for r in part.replicas if r not in part.removing]
        if not all(r in part.isr for r in target):
            return
        self._change(state.topic_id, index, part, target, leader_from=[r for r in target if r in part.isr])

    def ongoing_reassignments(self) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """(topic, partition, replicas, adding, removing) of every move in progress."""
        out = []
        for topic in self.store.image.topics_by_id.values():
            for index, part in sorted(topic.partitions.items()):
                if part.adding or part.removing:
                    out.append((topic.name, index, list(part.replicas), list(part.adding), list(part.removing)))
        return out

    def _change(self, topic_id: Any, index: int, part: Any, replicas: list[int], leader_from: list[int]) -> None:
        fields: dict[str, Any] = {"replicas": replicas, "isr": [r for r in part.isr if r in replicas],
                                  "adding_replicas": [], "removing_replicas": [], **self._directories(part, replicas)}
        if part.leader not in replicas:
            usable = set(self.cluster.usable_brokers())
            fields["leader"] = next((r for r in leader_from if r in usable), -1)
        if not fields["isr"]:
            fields["isr"] = [fields.get("leader", part.leader)] if fields.get("leader", part.leader) >= 0 else []
        self.store.append_records([("PartitionChangeRecord", new_record(
            "PartitionChangeRecord", partition_id=index, topic_id=topic_id, **fields))])

    def _directories(self, part: Any, replicas: list[int]) -> dict[str, Any]:
        if not part.directories:
            return {}
        known = dict(zip(part.replicas, part.directories, strict=False))
        return {"directories": [known.get(r, self.store.default_dir(r)) for r in replicas]}
