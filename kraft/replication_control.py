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
                    records.append(("PartitionChangeRecord", new_record(
                        "PartitionChangeRecord", partition_id=wanted.partition_index, topic_id=state.topic_id,
                        isr=new_isr)))
                    epoch = part.partition_epoch + 1
                else:
                    epoch = part.partition_epoch
                result.leader_id, result.leader_epoch = part.leader, part.leader_epoch
                result.isr, result.partition_epoch = new_isr, epoch
                result.leader_recovery_state = 0
            out.append(R.TopicData(topic_name=topic.topic_name, topic_id=topic.topic_id, partitions=results))
        if records:
            self.store.append_records(records)
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
