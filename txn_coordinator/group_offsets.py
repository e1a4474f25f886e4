"""Transactional offset commits: the small interface between the transaction coordinator and the
group coordinator.

The group coordinator (``odradek.group_coordinator``) has no transactional-offset API, so this
module does the part Kafka's GroupMetadataManager does for TxnOffsetCommit: it validates the
member through the group coordinator's public ``validate_offset_commit``, writes the offset commit
records (Kafka's exact key/value formats, from ``group_coordinator.records``) as one
*transactional* batch with the producer's id and epoch into the group's ``__consumer_offsets``
partition, keeps them pending, and when the transaction's marker lands in that partition either
makes them the group's committed offsets (COMMIT) or drops them (ABORT).

`pending` is shared with the group coordinator: at load it hands over the offsets of transactions
that have no marker yet, and OffsetFetch with require_stable reads it (UNSTABLE_OFFSET_COMMIT).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..wire.errors import ErrorCode
from ..wire.records import SimpleRecord, build_batch

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


class GroupOffsets:
    """Pending transactional offsets per (producer id, offsets partition), applied on COMMIT."""

    offsets_topic = OFFSETS_TOPIC

    def __init__(self, broker: Broker | None) -> None:
        self.broker = broker
        # (producer id, __consumer_offsets partition) -> group -> (topic, partition) -> CommittedOffset
        self.pending: dict[tuple[int, int], dict[str, dict[tuple[str, int], Any]]] = {}

    def _groups(self) -> Any:
        broker = self.broker
        coordinator = broker.coordinators.get("groups") if broker is not None else None
        return coordinator if coordinator is not None and getattr(coordinator, "active", True) else None

    def partition_for(self, group_id: str) -> int | None:
        """The group's ``__consumer_offsets`` partition (created on first use), None without a group coordinator."""
        groups = self._groups()
        if groups is None:
            return None
        groups.ensure_offsets_topic()
        return groups.partition_for(group_id)

    def validate(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                 api_version: int, partitions: list[tuple[str, int]] | None = None) -> ErrorCode:
        """The group coordinator's checks (generation, member) for a TxnOffsetCommit: those of
        OffsetCommit with Kafka's transactional exemptions."""
        groups = self._groups()
        if groups is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            groups.validate_offset_commit(group_id, generation_id, member_id, instance_id, api_version,
                                          transactional=True, partitions=partitions)
        except Exception as exc:
            code = getattr(exc, "code", None)
            if code is None:
                log.exception("Validating TxnOffsetCommit of group %s failed", group_id)
                return ErrorCode.UNKNOWN_SERVER_ERROR
            return ErrorCode(int(code))
        return ErrorCode.NONE

    def append_pending(self, group_id: str, producer_id: int, producer_epoch: int,
                       commits: list[tuple[str, int, int, int, str | None]], now: int) -> ErrorCode:
        """Write (topic, partition, offset, leader epoch, metadata) commits as a transactional batch."""
        from ..group_coordinator import records as grec  # noqa: PLC0415 - the group package is optional
        from ..group_coordinator.coordinator import CommittedOffset  # noqa: PLC0415

        broker = self.broker
        partition = self.partition_for(group_id)
        if broker is None or partition is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        plog = broker.partition_log(OFFSETS_TOPIC, partition)
        if plog is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not commits:
            return ErrorCode.NONE
        records = []
        values = {}
        # the group coordinator's record format: Kafka 4.4 writes transactional commits as it
        # writes OffsetCommit's, value version 4 with the committed topic's id
        groups = self._groups()
        fmt = getattr(groups, "format", None)
        version = fmt.offset_value_version if fmt is not None else grec.OFFSET_COMMIT_VALUE_VERSION
        for topic, index, offset, leader_epoch, metadata in commits:
            meta = metadata or ""
            topic_id = groups._topic_id(topic) if fmt is not None and fmt.offset_topic_id else None
            records.append(SimpleRecord(grec.offset_commit_value(offset, leader_epoch, meta, now, -1, version, topic_id),
                                        grec.offset_commit_key(group_id, topic, index), (), now))
            values[(topic, index)] = CommittedOffset(offset, leader_epoch, meta, now)
        # Kafka writes transactional offset commits with the producer's id/epoch, baseSequence 0.
        batch = bytearray(build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                                      base_sequence=0, is_transactional=True))
        try:
            plog.append_as_coordinator(batch, now_ms=now)
        except Exception as exc:
            from ..handlers.common import error_code_for  # noqa: PLC0415

            code = error_code_for(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("Writing transactional offsets of group %s failed", group_id)
            return code
        broker.notify_appended()
        self.pending.setdefault((producer_id, partition), {}).setdefault(group_id, {}).update(values)
        return ErrorCode.NONE

    def complete(self, producer_id: int, partition: int, commit: bool) -> None:
        """The transaction's marker is in `partition`: apply (COMMIT) or drop (ABORT) its offsets."""
        pending = self.pending.pop((producer_id, partition), None)
        if not pending or not commit:
            return
        groups = self._groups()
        if groups is None:
            return
        for group_id, values in pending.items():
            groups.offsets.setdefault(group_id, {}).update(values)
