"""The metadata a replay of Kafka's metadata records builds (Kafka's MetadataImage, the parts Odradek uses).

Records are applied in log order. Records inside a metadata transaction
(BeginTransactionRecord ... EndTransactionRecord) are held back and applied at its end, or
dropped on AbortTransactionRecord or when the log ends inside the transaction, as Kafka's
controller does. SCRAM credentials (UserScramCredentialRecord / RemoveUserScramCredentialRecord)
are kept in ``scram``, ACL bindings (AccessControlEntryRecord / RemoveAccessControlEntryRecord) in
``acls``, as Kafka's AclsImage holds them, so that whatever writes the image out (a snapshot) carries
them: :meth:`MetadataImage.acl_records`. Delegation tokens (DelegationTokenRecord /
RemoveDelegationTokenRecord) are kept in ``delegation_tokens``, ClientQuotaRecords in
``client_quotas`` (Kafka's ClientQuotasImage). Record types Odradek has no use for here (NoOp, ...)
are counted and skipped.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..wire.primitives import Uuid
from .records import MetadataRecord

log = logging.getLogger(__name__)

#: ConfigRecord resource types (Kafka's ConfigResource.Type ids).
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

#: PartitionChangeRecord.leader value meaning "leader unchanged".
NO_LEADER_CHANGE = -2


@dataclass(slots=True)
class PartitionState:
    """One partition's registration: replicas, ISR, leader and epochs, log dir ids."""

    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    directories: list[Uuid]
    #: an ongoing reassignment: the replicas being added, and those being removed
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    #: KIP-966: replicas that may still lead (eligible leader replicas), and the last known ones
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)


@dataclass(slots=True)
class TopicState:
    """A topic as the metadata knows it: name, id, partitions by index."""

    name: str
    topic_id: Uuid
    partitions: dict[int, PartitionState] = field(default_factory=dict)


class MetadataImage:
    """Topics, topic and broker configs, features, brokers and the next producer id block."""

    def __init__(self) -> None:
        self.topics_by_id: dict[Uuid, TopicState] = {}
        self.topic_ids: dict[str, Uuid] = {}
        #: ConfigRecords by (resource type, resource name): config name -> value
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.features: dict[str, int] = {}
        self.brokers: dict[int, Any] = {}
        self.next_producer_id = 0
        #: UserScramCredentialRecords by (mechanism type, user name), as Kafka's ScramImage holds them
        self.scram: dict[tuple[int, str], Any] = {}
        #: AccessControlEntryRecords by their id (16 bytes), in the order they were created
        self.acls: dict[bytes, Any] = {}
        #: ClientQuotaRecords as Kafka's ClientQuotasImage holds them: entity (sorted (type, name or
        #: None for the default) pairs) -> quota key -> value; `client_quotas_version` counts changes
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
        self.client_quotas_version = 0
        #: DelegationTokenRecords by token id (Kafka's DelegationTokenImage)
        self.delegation_tokens: dict[str, Any] = {}
        self.skipped: Counter[str] = Counter()
        self.records_applied = 0
        self._txn: list[MetadataRecord] | None = None

    # ------------------------------------------------------------------ queries

    def topic(self, name: str) -> TopicState | None:
        topic_id = self.topic_ids.get(name)
        return self.topics_by_id.get(topic_id) if topic_id is not None else None

    def topic_configs(self, name: str) -> dict[str, str]:
        return dict(self.configs.get((RESOURCE_TOPIC, name), {}))

    def acl_records(self) -> list[tuple[str, Any]]:
        """The AccessControlEntryRecords that rebuild the ACLs in force (what a snapshot must hold)."""
        return [("AccessControlEntryRecord", m) for m in self.acls.values()]

    def max_leader_epoch(self) -> int:
        return max((p.leader_epoch for t in self.topics_by_id.values() for p in t.partitions.values()), default=0)

    # ------------------------------------------------------------------ replay

    def replay_all(self, records: Iterable[MetadataRecord]) -> None:
        for rec in records:
            self.replay(rec)

    def replay_appended(self, records: Iterable[tuple[str, Any]]) -> None:
        """`replay` for (name, message) pairs this node has just appended: no MetadataRecord each
        and one handler lookup per record type (1000 PartitionRecords: ~1.5 ms instead of ~3.5)."""
        handlers: dict[str, Any] = {}
        for name, message in records:
            if self._txn is not None or name.endswith("TransactionRecord"):
                self.replay(MetadataRecord(name, 0, message))
                continue
            if name not in handlers:
                handlers[name] = getattr(self, "_on_" + name, None)
            self._apply_message(name, message, handlers[name])

    def finish(self) -> bool:
        """End of the log: a transaction still open was never committed, drop it.

        Returns True when one was open: the next leader must then append an
        AbortTransactionRecord before anything else, or a replay would count its records in.
        """
        if self._txn is not None:
            log.warning("Metadata log ends inside a metadata transaction; dropping its %d records", len(self._txn))
            self._txn = None
            return True
        return False

    def replay(self, rec: MetadataRecord) -> None:
        """Apply one record (or hold it back while a metadata transaction is open)."""
        name = rec.name
        if name == "BeginTransactionRecord":
            self._txn = []
            return
        if name == "EndTransactionRecord":
            held, self._txn = self._txn or [], None
            for r in held:
                self._apply(r)
            return
        if name == "AbortTransactionRecord":
            self._txn = None
            return
        if self._txn is not None:
            self._txn.append(rec)
            return
        self._apply(rec)

    def _apply(self, rec: MetadataRecord) -> None:
        self._apply_message(rec.name, rec.message, getattr(self, "_on_" + rec.name, None))

    def _apply_message(self, name: str, message: Any, handler: Any) -> None:
        if handler is None or message is None:
            self.skipped[name] += 1
            return
        handler(message)
        self.records_applied += 1

    def _on_TopicRecord(self, m: Any) -> None:  # noqa: N802 - named after Kafka's record
        self.topics_by_id[m.topic_id] = TopicState(m.name, m.topic_id)
        self.topic_ids[m.name] = m.topic_id

    def _on_PartitionRecord(self, m: Any) -> None:  # noqa: N802
        topic = self.topics_by_id.get(m.topic_id)
        if topic is None:
            log.warning("PartitionRecord for unknown topic id %s", m.topic_id)
            return
        topic.partitions[m.partition_id] = PartitionState(
            list(m.replicas), list(m.isr), m.leader, m.leader_epoch, m.partition_epoch, list(m.directories or []),
            list(m.adding_replicas or []), list(m.removing_replicas or []),
            list(getattr(m, "eligible_leader_replicas", None) or []), list(getattr(m, "last_known_elr", None) or []),
        )

    def _on_PartitionChangeRecord(self, m: Any) -> None:  # noqa: N802
        topic = self.topics_by_id.get(m.topic_id)
        part = topic.partitions.get(m.partition_id) if topic is not None else None
        if part is None:
            return
        if m.isr is not None:
            part.isr = list(m.isr)
        if m.replicas is not None:
            part.replicas = list(m.replicas)
        if m.directories is not None:
            part.directories = list(m.directories)
        if m.adding_replicas is not None:
            part.adding = list(m.adding_replicas)
        if m.removing_replicas is not None:
            part.removing = list(m.removing_replicas)
        if getattr(m, "eligible_leader_replicas", None) is not None:
            part.elr = list(m.eligible_leader_replicas)
        if getattr(m, "last_known_elr", None) is not None:
            part.last_known_elr = list(m.last_known_elr)
        # a leader change starts a new leader epoch (Kafka's PartitionRegistration.merge)
        if m.leader != NO_LEADER_CHANGE:
            part.leader = m.leader
            part.leader_epoch += 1
        part.partition_epoch += 1

    def _on_RemoveTopicRecord(self, m: Any) -> None:  # noqa: N802
        topic = self.topics_by_id.pop(m.topic_id, None)
        if topic is None:
            return
        if self.topic_ids.get(topic.name) == m.topic_id:
            del self.topic_ids[topic.name]
        # Kafka drops a deleted topic's configs with it
        self.configs.pop((RESOURCE_TOPIC, topic.name), None)

    def _on_ConfigRecord(self, m: Any) -> None:  # noqa: N802
        key = (m.resource_type, m.resource_name)
        if m.value is None:
            entry = self.configs.get(key)
            if entry is not None:
                entry.pop(m.name, None)
                if not entry:
                    del self.configs[key]
        else:
            self.configs.setdefault(key, {})[m.name] = m.value

    def _on_FeatureLevelRecord(self, m: Any) -> None:  # noqa: N802
        if m.feature_level == 0 and m.name != "metadata.version":
            self.features.pop(m.name, None)
        else:
            self.features[m.name] = m.feature_level

    def _on_RegisterBrokerRecord(self, m: Any) -> None:  # noqa: N802
        self.brokers[m.broker_id] = m

    def _on_UnregisterBrokerRecord(self, m: Any) -> None:  # noqa: N802
        self.brokers.pop(m.broker_id, None)

    def _on_BrokerRegistrationChangeRecord(self, m: Any) -> None:  # noqa: N802
        # Kafka's BrokerRegistrationFencingChange: 1 fenced, -1 unfenced, 0 no change; the same
        # for InControlledShutdown (1 = entered it)
        reg = self.brokers.get(m.broker_id)
        if reg is None or reg.broker_epoch != m.broker_epoch:
            return
        if m.fenced == 1:
            reg.fenced = True
        elif m.fenced == -1:
            reg.fenced = False
        if getattr(m, "in_controlled_shutdown", 0) == 1:
            reg.in_controlled_shutdown = True
        if getattr(m, "log_dirs", None):
            # the broker's online dirs after some failed (an empty list changes nothing)
            reg.log_dirs = list(m.log_dirs)

    def _on_FenceBrokerRecord(self, m: Any) -> None:  # noqa: N802
        reg = self.brokers.get(m.id)
        if reg is not None and reg.broker_epoch == m.epoch:
            reg.fenced = True

    def _on_UnfenceBrokerRecord(self, m: Any) -> None:  # noqa: N802
        reg = self.brokers.get(m.id)
        if reg is not None and reg.broker_epoch == m.epoch:
            reg.fenced = False

    def alive_brokers(self) -> list[Any]:
        """Registered, unfenced brokers (Kafka's KRaftMetadataCache.getAliveBrokerNodes), by id."""
        return [reg for _id, reg in sorted(self.brokers.items()) if not reg.fenced]

    def _on_ProducerIdsRecord(self, m: Any) -> None:  # noqa: N802
        self.next_producer_id = max(self.next_producer_id, m.next_producer_id)

    def _on_UserScramCredentialRecord(self, m: Any) -> None:  # noqa: N802
        self.scram[(m.mechanism, m.name)] = m

    def _on_RemoveUserScramCredentialRecord(self, m: Any) -> None:  # noqa: N802
        if self.scram.pop((m.mechanism, m.name), None) is None:
            # Kafka's controller refuses such a log; a reader here only notes it
            log.warning("RemoveUserScramCredentialRecord for %s (mechanism %d) that does not exist", m.name,
                        m.mechanism)

    def _on_AccessControlEntryRecord(self, m: Any) -> None:  # noqa: N802
        self.acls[_acl_id(m.id)] = m

    def _on_RemoveAccessControlEntryRecord(self, m: Any) -> None:  # noqa: N802
        if self.acls.pop(_acl_id(m.id), None) is None:
            log.warning("RemoveAccessControlEntryRecord for ACL %s that does not exist", m.id)

    def _on_DelegationTokenRecord(self, m: Any) -> None:  # noqa: N802
        self.delegation_tokens[m.token_id] = m

    def _on_RemoveDelegationTokenRecord(self, m: Any) -> None:  # noqa: N802
        self.delegation_tokens.pop(m.token_id, None)

    def _on_ClientQuotaRecord(self, m: Any) -> None:  # noqa: N802
        entity = tuple(sorted((e.entity_type, e.entity_name) for e in m.entity))
        if m.remove:
            quotas = self.client_quotas.get(entity)
            if quotas is not None:
                quotas.pop(m.key, None)
                if not quotas:
                    del self.client_quotas[entity]
        else:
            self.client_quotas.setdefault(entity, {})[m.key] = m.value
        self.client_quotas_version += 1


def _acl_id(value: Any) -> bytes:
    return bytes(value.bytes if hasattr(value, "bytes") else value)
