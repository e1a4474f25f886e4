"""The broker's view of the cluster: topics, their ids, partitions and config overrides.

Kafka keeps this in the KRaft metadata log (`__cluster_metadata-0`). Odradek's model is
the same set of facts (TopicRecord, PartitionRecord, ConfigRecord, RemoveTopicRecord);
every change goes through :meth:`ClusterMetadata.apply` so that it can be persisted as
those records and replayed at start-up.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .wire.primitives import Uuid

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

# Kafka's Topic.validate: legal characters and maximum length.
LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


# Kafka reserves these two ids (Uuid.ZERO_UUID and Uuid.METADATA_TOPIC_ID).
_RESERVED_IDS = (bytes(16), bytes(15) + b"\x01")


def random_uuid() -> Uuid:
    """A random id as Kafka's Uuid.randomUuid makes one: never a reserved id, never printed with a leading '-'."""
    while True:
        raw = bytearray(os.urandom(16))
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4, as java.util.UUID.randomUUID
        raw[8] = (raw[8] & 0x3F) | 0x80
        value = Uuid(raw)
        if value.bytes in _RESERVED_IDS or value.to_base64().startswith("-"):
            continue
        return value


def validate_topic_name(name: str) -> str | None:
    """Kafka's topic name rules; returns the error message or None when valid."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not LEGAL_TOPIC_NAME.fullmatch(name):
        return (
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )
    return None


@dataclass
class Topic:
    """A topic: name, id, partition count and its config overrides (as text, like Kafka stores them)."""

    name: str
    topic_id: Uuid
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class ClusterMetadata:
    """Topics by name and by id, kept in step with the log manager's partition logs."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[Uuid, Topic] = {}

    @classmethod
    def load(cls, broker: Broker) -> ClusterMetadata:
        """Rebuild the topic table from the persisted metadata (and the partition dirs).

        With a metadata store (the KRaft metadata log), its replay is the truth; partition dirs it
        does not know (written before the metadata log existed) are adopted and recorded, so the
        log dir stays readable by Kafka; partitions it knows without a log get an empty one, as
        Kafka creates them when it becomes their leader.
        """
        meta = cls(broker)
        store = getattr(broker, "metadata_store", None)
        if store is not None:
            for topic in store.replay():
                meta._add(topic)
        # Partition dirs without metadata (e.g. written before the metadata log existed):
        # adopt them with the topic id from partition.metadata.
        found: dict[str, tuple[Uuid, int]] = {}
        for partition_log in broker.log_manager.all_logs():
            name, index = partition_log.topic, partition_log.partition
            known = meta.topics.get(name)
            if known is not None:
                if partition_log.topic_id and partition_log.topic_id != known.topic_id.bytes:
                    log.warning("Log %s has topic id %s but the metadata says %s; it is served as %s", partition_log.name,
                                Uuid(partition_log.topic_id).to_base64(), known.topic_id.to_base64(), name)
                continue
            topic_id = Uuid(partition_log.topic_id) if partition_log.topic_id else random_uuid()
            prev = found.get(name)
            found[name] = (prev[0] if prev else topic_id, max(index + 1, prev[1] if prev else 0))
        for name, (topic_id, count) in found.items():
            topic = Topic(name, topic_id, count)
            meta._persist("create", topic)
            meta._add(topic)
        if store is not None:
            for topic in meta.topics.values():
                if topic.configs:
                    # the configs reach every loaded log (adopted and Kafka-made topics included)
                    broker.reconfigure_topic(topic)
                for index in range(topic.partitions):
                    if broker.log_manager.get_log(topic.name, index) is None and broker.hosts_replica(topic.name, index):
                        broker.open_partition_log(topic, index)
            # partition dirs moved between log dirs while stopped: tell the metadata where they are
            store.reconcile_directories({(plog.topic, plog.partition): plog.dir.parent
                                         for plog in broker.log_manager.all_logs() if plog.topic in meta.topics})
        return meta

    def _add(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def by_id(self, topic_id: Uuid) -> Topic | None:
        return self.topics_by_id.get(topic_id)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        """Create a topic and its partition logs (caller has validated the request)."""
        topic = Topic(name, random_uuid(), partitions, dict(configs))
        self._persist("create", topic)
        self._add(topic)
        for index in range(partitions):
            if self.broker.hosts_replica(name, index):
                self.broker.open_partition_log(topic, index)
        log.info("Created topic %s with %d partitions, id %s", name, partitions, topic.topic_id.to_base64())
        return topic

    def add_partitions(self, topic: Topic, new_total: int) -> None:
        old = topic.partitions
        # persisted first: what a failed append did not record must not be served
        self._persist("partitions", Topic(topic.name, topic.topic_id, new_total, topic.configs))
        topic.partitions = new_total
        for index in range(old, new_total):
            if self.broker.hosts_replica(topic.name, index):
                self.broker.open_partition_log(topic, index)

    def delete_topic(self, topic: Topic) -> None:
        self._persist("delete", topic)
        self.topics.pop(topic.name, None)
        self.topics_by_id.pop(topic.topic_id, None)
        for index in range(topic.partitions):
            self.broker.log_manager.delete_log(topic.name, index)
        log.info("Deleted topic %s", topic.name)

    def set_configs(self, topic: Topic, configs: dict[str, str]) -> None:
        self._persist("configs", Topic(topic.name, topic.topic_id, topic.partitions, dict(configs)))
        topic.configs = dict(configs)
        self.broker.reconfigure_topic(topic)

    def _persist(self, change: str, topic: Topic) -> None:
        """Record a change in the metadata store (Kafka's records in __cluster_metadata-0) before
        it is applied; raises when it cannot be written, so nothing unrecorded is served."""
        store = getattr(self.broker, "metadata_store", None)
        if store is not None:
            store.record(change, topic)
