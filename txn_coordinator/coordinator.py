"""The transaction coordinator: transactional ids, their state machine, ``__transaction_state``,
transaction markers and timeouts (Kafka's TransactionCoordinator + TransactionStateManager +
TransactionMarkerChannelManager on one node; the transaction version 1 rules, and those of
Transactions V2 for the requests of V2 producers).

Every state change is first appended to the id's ``__transaction_state`` partition and only then
applied in memory, so what the log says is what the coordinator did. On a single node a
transaction marker is a local append, so EndTxn writes PrepareCommit/PrepareAbort, the markers
into every partition of the transaction (the log store then updates producer state, the
``.txnindex`` and the last stable offset) and CompleteCommit/CompleteAbort before it answers.
At start-up the log is replayed: transactions left in PrepareCommit/PrepareAbort are completed,
Ongoing ones are aborted when their timeout passes, as Kafka does after a coordinator failover.
"""

from __future__ import annotations

import copy
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from ..wire.errors import ErrorCode
from ..wire.records import ControlRecordType, build_end_txn_marker_batch
from . import records as rec
from .group_offsets import GroupOffsets
from .metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    STATE_BY_NAME,
    TransactionMetadata,
    TxnState,
    is_epoch_exhausted,
)

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

# Broker configs Odradek's config table does not list (read from the raw properties).
_EXTRA_DEFAULTS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10_000,
    "transactional.id.expiration.ms": 604_800_000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3_600_000,
}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TxnError(Exception):
    """A request the coordinator refuses; `code` is the Kafka error code to answer."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


class TransactionCoordinator:
    """Serves InitProducerId (transactional), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
    TxnOffsetCommit and the transaction admin APIs for every transactional id of this node."""

    def __init__(self, broker: Broker | None) -> None:
        self.broker = broker
        self.txns: dict[str, TransactionMetadata] = {}
        self.groups = GroupOffsets(broker)
        self.active = False
        self._cancel: trio.CancelScope | None = None
        self._last_expiry_check = 0.0
        #: transactional id -> whether this broker coordinates it; None: all of them (the single node)
        self.owns: Any = None
        #: a broker of a KRaft cluster sends the markers of partitions led elsewhere with this:
        #: send(meta, commit, partitions, done) calls done() once every leader has written them
        self.remote_markers: Any = None

    # ================================================================== config / topic

    def cfg(self, key: str) -> int:
        """A broker config value (Kafka's default when unset)."""
        config = self.broker.config if self.broker is not None else None
        if key in _EXTRA_DEFAULTS:
            raw = config.raw.get(key) if config is not None else None
            return int(raw) if raw is not None else _EXTRA_DEFAULTS[key]
        if config is None:
            from ..config import BROKER_CONFIGS  # noqa: PLC0415

            return int(BROKER_CONFIGS[key].default)
        return int(config.get(key))

    def num_partitions(self) -> int:
        """Partitions of ``__transaction_state`` (the existing topic's, else the config)."""
        broker = self.broker
        if broker is not None and broker.metadata is not None:
            topic = broker.metadata.get(rec.TRANSACTION_STATE_TOPIC)
            if topic is not None:
                return topic.partitions
        return self.cfg("transaction.state.log.num.partitions")

    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition that holds a transactional id."""
        return rec.partition_for(transactional_id, self.num_partitions())

    def state_topic_spec(self) -> tuple[str, int, dict[str, str]] | None:
        """(name, partitions, configs) of ``__transaction_state`` as Kafka creates it, None if it exists."""
        broker = self.broker
        if broker is None or broker.metadata is None or broker.metadata.get(rec.TRANSACTION_STATE_TOPIC) is not None:
            return None
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(self.cfg("transaction.state.log.min.isr")),
            "segment.bytes": str(self.cfg("transaction.state.log.segment.bytes")),
            "unclean.leader.election.enable": "false",
        }
        return rec.TRANSACTION_STATE_TOPIC, self.cfg("transaction.state.log.num.partitions"), configs

    def ensure_state_topic(self) -> None:
        """Create ``__transaction_state`` on first use (synchronously; FindCoordinator normally made it
        already, off the event loop); nothing while that creation is still under way."""
        spec = self.state_topic_spec()
        if getattr(self.broker, "forwarding", None) is not None:
            return  # a broker of a KRaft cluster: the controller creates it (FindCoordinator asks)
        if spec is not None and spec[0] not in getattr(self.broker, "topics_being_created", ()):
            self.broker.metadata.create_topic(*spec)

    def server_txn_version(self) -> int:
        """The finalized transaction.version (Kafka's TransactionStateManager.transactionVersionLevel):
        it picks the record value version, and the rules of aborts the coordinator starts itself."""
        # a broker of a KRaft cluster follows the controllers' image; the combined node has its own
        role = getattr(self.broker, "broker_role", None)
        image = getattr(role, "image", None)
        if image is None:
            image = getattr(getattr(self.broker, "metadata_store", None), "image", None)
        features = getattr(image, "features", None)
        return int(features.get("transaction.version", 0)) if features else 0

    def coordinator_epoch(self, transactional_id: str) -> int:
        """Kafka's coordinator epoch: the leader epoch of the id's transaction-log partition."""
        if self.broker is None:
            return 0
        plog = self.broker.partition_log(rec.TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
        return max(plog.leader_epoch, 0) if plog is not None else 0

    # ================================================================== lifecycle

    async def startup(self) -> None:
        """Replay ``__transaction_state``, finish transactions caught between prepare and complete,
        and start the timeout / expiration timer."""
        self._load_all()
        self.active = True
        if self.broker is not None:
            trio.lowlevel.spawn_system_task(self._run, name="txn-coordinator-timer")

    async def shutdown(self) -> None:
        """Stop the timer; state is already in the log."""
        self.active = False
        if self._cancel is not None:
            self._cancel.cancel()

    async def _run(self) -> None:
        with trio.CancelScope() as scope:
            self._cancel = scope
            interval = self.cfg("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
            while self.active:
                await trio.sleep(interval)
                try:
                    self.tick()
                except Exception:  # a system task must never raise: it would take the broker down
                    log.exception("Transaction coordinator timer failed")

    def tick(self, now_ms: int | None = None) -> None:
        """Abort timed-out transactions; now and then expire idle transactional ids."""
        now = _now_ms() if now_ms is None else now_ms
        self.abort_timed_out_transactions(now)
        interval = self.cfg("transaction.remove.expired.transaction.cleanup.interval.ms") / 1000
        if time.monotonic() - self._last_expiry_check >= interval:
            self._last_expiry_check = time.monotonic()
            self.remove_expired_transactional_ids(now)

    def _load_all(self) -> None:
        broker = self.broker
        if broker is None or broker.metadata is None:
            return
        topic = broker.metadata.get(rec.TRANSACTION_STATE_TOPIC)
        if topic is None:
            return
        self._load_partitions(range(topic.partitions))

    def on_election(self, partitions: list[int]) -> None:
        """This broker now leads these ``__transaction_state`` partitions (a broker of a KRaft
        cluster): load their transactional ids and complete what was prepared, as Kafka does."""
        self._load_partitions(partitions)

    def on_resignation(self, partitions: list[int]) -> None:
        """Another broker leads these partitions now: forget their transactional ids."""
        gone = set(partitions)
        for txn_id in [t for t in self.txns if self.partition_for(t) in gone]:
            del self.txns[txn_id]

    def _check_owner(self, transactional_id: str) -> None:
        if self.owns is not None and transactional_id and not self.owns(transactional_id):
            raise TxnError(ErrorCode.NOT_COORDINATOR)

    def _load_partitions(self, partitions: Iterable[int]) -> None:
        broker = self.broker
        assert broker is not None
        loaded: set[str] = set()
        for partition in partitions:
            plog = broker.partition_log(rec.TRANSACTION_STATE_TOPIC, partition)
            if plog is None:
                continue
            for key, value in rec.read_records(plog):
                try:
                    txn_id = rec.decode_key(key)
                    decoded = None if txn_id is None else rec.decode_value(value)
                except Exception:
                    log.warning("Skipping an unreadable record in %s-%d", rec.TRANSACTION_STATE_TOPIC, partition)
                    continue
                if txn_id is None:
                    continue
                loaded.add(txn_id)
                if decoded is None:
                    self.txns.pop(txn_id, None)
                else:
                    self.txns[txn_id] = TransactionMetadata.from_value(txn_id, decoded)
        for meta in [m for t, m in list(self.txns.items()) if t in loaded]:
            # Kafka's TransactionStateManager.loadTransactionsForTxnTopicPartition: resend the
            # markers of transactions that were prepared but not completed.
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                log.info("Completing transaction %s (%s) found at load", meta.transactional_id,
                         meta.state.display_name)
                try:
                    self._complete(meta, meta.state == TxnState.PREPARE_COMMIT, _now_ms())
                except TxnError:
                    # stays prepared: EndTxn retries get CONCURRENT_TRANSACTIONS, the next start retries
                    log.exception("Completing transaction %s at load failed", meta.transactional_id)
        log.info("Loaded %d transactional ids from %s", len(self.txns), rec.TRANSACTION_STATE_TOPIC)

    # ================================================================== log writes

    def _persist(self, meta: TransactionMetadata, now: int) -> None:
        """Append `meta` to its transaction-log partition (TxnError if the write fails)."""
        broker = self.broker
        if broker is None:
            return
        self.ensure_state_topic()
        plog = broker.partition_log(rec.TRANSACTION_STATE_TOPIC, self.partition_for(meta.transactional_id))
        if plog is None:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        version = rec.value_version(self.server_txn_version())
        before = self.txns.get(meta.transactional_id)
        # Kafka's PreviousProducerId is the producer id the state had before this change
        prev = before.producer_id if before is not None else meta.producer_id
        value = rec.encode_value(meta.to_value(version, prev), version)
        batch = rec.record_batch(rec.encode_key(meta.transactional_id), value, now)
        try:
            plog.append_as_coordinator(batch, now_ms=now)
        except Exception as exc:
            log.exception("Writing transactional id %s to %s failed", meta.transactional_id, rec.TRANSACTION_STATE_TOPIC)
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from exc

    def _commit(self, new: TransactionMetadata, now: int) -> TransactionMetadata:
        """Write a new state to the log, then make it the in-memory state."""
        self._persist(new, now)
        self.txns[new.transactional_id] = new
        return new

    @staticmethod
    def _copy(meta: TransactionMetadata) -> TransactionMetadata:
        new = copy.copy(meta)
        new.partitions = set(meta.partitions)
        return new

    def _write_markers(self, meta: TransactionMetadata, commit: bool, now: int) -> list[tuple[str, int]]:
        """Append a COMMIT/ABORT marker to every partition of the transaction this broker leads;
        returns the partitions led by other brokers (their markers are still to be sent)."""
        broker = self.broker
        if broker is None:
            return []
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        remote: list[tuple[str, int]] = []
        for topic, partition in sorted(meta.partitions):
            plog = broker.partition_log(topic, partition)
            if plog is None and self.remote_markers is not None \
                    and broker.partition_error(topic, partition) == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                remote.append((topic, partition))  # led by another broker: WriteTxnMarkers to it
                continue
            if plog is None:
                # the topic was deleted meanwhile: Kafka drops markers for unknown partitions
                log.info("Skipping %s marker for %s-%s of %s: no such partition", kind.name, topic, partition,
                         meta.transactional_id)
                continue
            if meta.client_txn_version >= 2 and tv2_marker_fenced(plog, meta.producer_id, meta.producer_epoch):
                log.warning("Not writing the %s marker of %s to %s-%s: producer %d already has epoch %d open",
                            kind.name, meta.transactional_id, topic, partition, meta.producer_id, meta.producer_epoch)
                continue
            batch = bytearray(build_end_txn_marker_batch(
                kind, producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                coordinator_epoch=self.coordinator_epoch(meta.transactional_id), timestamp=now))
            try:
                plog.append_as_coordinator(batch, now_ms=now)
            except Exception:
                # Kafka's marker handler gives up on a partition that fences the marker
                # (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED); the rest still complete.
                log.exception("Writing the %s marker of %s to %s-%s failed", kind.name, meta.transactional_id,
                              topic, partition)
                continue
            if topic == self.groups.offsets_topic:
                self.groups.complete(meta.producer_id, partition, commit)
        broker.notify_appended()
        return remote

    def _complete(self, meta: TransactionMetadata, commit: bool, now: int) -> TransactionMetadata:
        """Markers, then CompleteCommit/CompleteAbort with no partitions. Markers for partitions
        led by other brokers go out with WriteTxnMarkers: the transaction then stays prepared
        (EndTxn has its answer; the next transaction waits with CONCURRENT_TRANSACTIONS) until
        every leader has written them, as with Kafka's TransactionMarkerChannelManager."""
        remote = self._write_markers(meta, commit, now)
        if remote:
            def done() -> None:
                current = self.txns.get(meta.transactional_id)
                if current is not None and current.state == meta.state and current.producer_epoch == meta.producer_epoch:
                    self._finish(current, commit, _now_ms())

            self.remote_markers(meta, commit, remote, done)
            return meta
        return self._finish(meta, commit, now)

    def _finish(self, meta: TransactionMetadata, commit: bool, now: int) -> TransactionMetadata:
        done = self._copy(meta)
        done.transition(TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
        done.partitions = set()
        done.txn_last_update_timestamp = now
        if meta.client_txn_version >= 2 and meta.next_producer_id != NO_PRODUCER_ID:
            # TV2 epoch overflow (TransactionMetadata.prepareComplete): the producer continues
            # with the new id at epoch 0; a retry of the EndTxn is recognised by the old id
            done.previous_producer_id = meta.producer_id
            done.producer_id, done.producer_epoch = meta.next_producer_id, 0
        done.next_producer_id = NO_PRODUCER_ID
        return self._commit(done, now)

    @staticmethod
    def completed_ids(meta: TransactionMetadata) -> tuple[int, int]:
        """The producer id and epoch a prepared transaction completes with (what EndTxn v5+ answers)."""
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) \
                and meta.client_txn_version >= 2 and meta.next_producer_id != NO_PRODUCER_ID:
            return meta.next_producer_id, 0
        return meta.producer_id, meta.producer_epoch

    # ================================================================== InitProducerId

    async def init_producer_id(self, ctx: Any, header: Any, request: Any) -> Any:
        """InitProducerId with a transactional id (called by handlers/producer_ids.py)."""
        from ..wire.protocol import response_class  # noqa: PLC0415

        response = response_class(22)
        version = header.api_version
        expected_pid = request.producer_id if version >= 3 else NO_PRODUCER_ID
        expected_epoch = request.producer_epoch if version >= 3 else NO_PRODUCER_EPOCH
        ensure = getattr(getattr(self.broker, "producer_ids", None), "ensure_available", None)
        try:
            if ensure is not None:
                # a broker of a KRaft cluster: make sure a block of ids from the controller is at hand
                await ensure()
            pid, epoch = self.handle_init_producer_id(request.transactional_id, request.transaction_timeout_ms,
                                                      expected_pid, expected_epoch)
        except TxnError as exc:
            code = exc.code
            if code == ErrorCode.PRODUCER_FENCED and version < 4:
                # PRODUCER_FENCED exists from InitProducerId v4 (KIP-588); older clients know INVALID_PRODUCER_EPOCH
                code = ErrorCode.INVALID_PRODUCER_EPOCH
            return response(throttle_time_ms=0, error_code=int(code), producer_id=-1, producer_epoch=-1)
        except ConnectionError:
            # no block of producer ids from the controller yet (Kafka's RPCProducerIdManager answers this)
            return response(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
                            producer_id=-1, producer_epoch=-1)
        return response(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)

    def handle_init_producer_id(self, transactional_id: str, timeout_ms: int, expected_pid: int,
                                expected_epoch: int, now: int | None = None) -> tuple[int, int]:
        """(producer id, epoch) for a transactional producer; TxnError otherwise (KIP-360/KIP-588 rules)."""
        now = _now_ms() if now is None else now
        if not transactional_id:
            raise TxnError(ErrorCode.INVALID_REQUEST)
        self._check_owner(transactional_id)
        if timeout_ms <= 0 or timeout_ms > self.cfg("transaction.max.timeout.ms"):
            raise TxnError(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if (expected_pid == NO_PRODUCER_ID) != (expected_epoch == NO_PRODUCER_EPOCH):
            raise TxnError(ErrorCode.INVALID_REQUEST)
        expected = None if expected_pid == NO_PRODUCER_ID else (expected_pid, expected_epoch)
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(transactional_id, self._new_producer_id(), NO_PRODUCER_EPOCH, timeout_ms,
                                       TxnState.EMPTY, set(), -1, now)
        if expected is not None and not self._valid_producer_id(meta, expected):
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        state = meta.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state == TxnState.ONGOING:
            # Abort the open transaction under a bumped epoch (fencing the old producer) and make the
            # client retry; the retry bumps the epoch once more (Kafka never returns the fence epoch).
            self._fence_and_abort(meta, now)
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        new = self._copy(meta)
        if is_epoch_exhausted(meta.producer_epoch):
            new.previous_producer_id = meta.producer_id
            new.producer_id = self._new_producer_id()
            new.producer_epoch = 0
            new.last_producer_epoch = meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
        else:
            bumped = meta.producer_epoch + 1
            if expected is None:
                new.producer_epoch, new.last_producer_epoch = bumped, NO_PRODUCER_EPOCH
            elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
                new.producer_epoch, new.last_producer_epoch = bumped, meta.producer_epoch
            elif expected[1] == meta.last_producer_epoch:
                pass  # a retry of the bump we already did: answer the same epoch
            else:
                raise TxnError(ErrorCode.PRODUCER_FENCED)
        new.txn_timeout_ms = timeout_ms
        new.transition(TxnState.EMPTY)
        new.partitions = set()
        new.txn_start_timestamp = -1
        new.txn_last_update_timestamp = now
        self._commit(new, now)
        return new.producer_id, new.producer_epoch

    @staticmethod
    def _valid_producer_id(meta: TransactionMetadata, expected: tuple[int, int]) -> bool:
        # Fresh metadata, the current id, or the previous id with an exhausted epoch (a retry of the
        # InitProducerId that rotated the id) may continue; anything else is a fenced zombie.
        pid, epoch = expected
        return (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
                or (pid == meta.previous_producer_id and is_epoch_exhausted(epoch)))

    def _new_producer_id(self) -> int:
        broker = self.broker
        if broker is None or broker.producer_ids is None:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return broker.producer_ids.generate()

    def _fence_and_abort(self, meta: TransactionMetadata, now: int) -> None:
        """Bump the epoch of an Ongoing transaction (PrepareEpochFence) and abort it with that epoch.
        The coordinator's own aborts follow the finalized transaction.version, as Kafka's do."""
        if self.server_txn_version() >= 2:
            # TV2: the abort itself bumps the epoch once (prepareAbortOrCommit), nothing before it
            self._end(meta, commit=False, now=now, client_tv=2, fence=True)
            return
        fenced = self._copy(meta)
        fenced.transition(TxnState.PREPARE_EPOCH_FENCE)
        if fenced.producer_epoch < 2**15 - 1:
            fenced.producer_epoch += 1
        fenced.last_producer_epoch = NO_PRODUCER_EPOCH
        self._end(fenced, commit=False, now=now)

    # ================================================================== AddPartitions / AddOffsets

    def _validate_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        return meta

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]], now: int | None = None, client_tv: int = 0) -> None:
        """Add partitions to the producer's transaction (starting it); TxnError on refusal.
        `client_tv` is 2 when a broker adds them for a TV2 producer (AddPartitionsToTxn v4+, not
        verify-only: Produce v12+, TxnOffsetCommit v5+), else 0 (Kafka's TV_0 for client versions)."""
        now = _now_ms() if now is None else now
        parts = set(partitions)
        self._check_owner(transactional_id)
        current = self.txns.get(transactional_id)
        if client_tv >= 2 and current is not None and current.state in (TxnState.PREPARE_COMMIT,
                                                                        TxnState.PREPARE_ABORT):
            # markers still under way (Kafka's pending transition is checked first): a V2 producer
            # may already carry the epoch, or the producer id, the end is moving to
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        meta = self._validate_producer(transactional_id, producer_id, producer_epoch)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state == TxnState.ONGOING and parts <= meta.partitions:
            return
        new = self._copy(meta)
        if meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            new.txn_start_timestamp = now
        new.transition(TxnState.ONGOING)
        new.partitions |= parts
        new.txn_last_update_timestamp = now
        new.client_txn_version = client_tv
        self._commit(new, now)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn verify_only (KIP-890): which partitions are already in the transaction."""
        parts = list(partitions)
        try:
            self._check_owner(transactional_id)
            meta = self._validate_producer(transactional_id, producer_id, producer_epoch)
        except TxnError as exc:
            return dict.fromkeys(parts, exc.code)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return dict.fromkeys(parts, ErrorCode.CONCURRENT_TRANSACTIONS)
        ongoing = meta.state == TxnState.ONGOING
        return {p: ErrorCode.NONE if ongoing and p in meta.partitions else ErrorCode.INVALID_TXN_STATE for p in parts}

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                    now: int | None = None) -> None:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        partition = self.groups.partition_for(group_id)
        if partition is None:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self.add_partitions(transactional_id, producer_id, producer_epoch, [(self.groups.offsets_topic, partition)], now)

    # ================================================================== EndTxn

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        now: int | None = None, client_tv: int = 0) -> TransactionMetadata:
        """EndTxn from a client: commit or abort the Ongoing transaction (TxnError on refusal).
        `client_tv` 2 (EndTxn v5+) takes the Transactions V2 rules: every end bumps the epoch."""
        now = _now_ms() if now is None else now
        self._check_owner(transactional_id)
        if client_tv >= 2:
            return self._end_transaction_v2(transactional_id, producer_id, producer_epoch, commit, now)
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch != meta.producer_epoch:
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        state = meta.state
        if state == TxnState.ONGOING:
            return self._end(meta, commit, now)
        if state == TxnState.COMPLETE_COMMIT and commit or state == TxnState.COMPLETE_ABORT and not commit:
            return meta  # a retry of an EndTxn that already finished
        if state == TxnState.PREPARE_COMMIT and commit or state == TxnState.PREPARE_ABORT and not commit:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        raise TxnError(ErrorCode.INVALID_TXN_STATE,
                       f"TransactionalId {transactional_id} is in state {state.display_name}")

    def _end_transaction_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                            now: int) -> TransactionMetadata:
        """Kafka's endTransaction for TV2 clients: a retry is told apart by the epoch (the
        first attempt bumped it), and an abort is allowed with no transaction open."""
        meta = self.txns.get(transactional_id)
        if meta is None:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        state = meta.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            # markers still under way: Kafka's pending transition answers this before any check
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        retry_on_overflow = (meta.previous_producer_id == producer_id and producer_epoch == 2**15 - 2
                             and meta.producer_epoch == 0)
        retry_on_bump = meta.producer_epoch == producer_epoch + 1
        if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
        else:
            valid_epoch = producer_epoch == meta.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        if meta.producer_id != producer_id and not retry_on_overflow:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        invalid = TxnError(ErrorCode.INVALID_TXN_STATE,
                           f"TransactionalId {transactional_id} is in state {state.display_name}")
        if state == TxnState.ONGOING:
            return self._end(meta, commit, now, client_tv=2)
        if state == TxnState.COMPLETE_COMMIT:
            if commit:
                if is_retry:
                    return meta
                raise invalid
            if is_retry:
                raise invalid
            return self._end(meta, False, now, client_tv=2, no_partition_added=True)
        if state == TxnState.COMPLETE_ABORT:
            if commit:
                raise invalid
            if is_retry:
                return meta
            return self._end(meta, False, now, client_tv=2, no_partition_added=True)
        if state == TxnState.EMPTY and not commit:
            return self._end(meta, False, now, client_tv=2, no_partition_added=True)
        raise invalid

    def _end(self, meta: TransactionMetadata, commit: bool, now: int, client_tv: int = 0,
             fence: bool = False, no_partition_added: bool = False) -> TransactionMetadata:
        prepared = self._copy(meta)
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        prepared.transition(target)
        if no_partition_added:
            # a TV2 abort with nothing open (TransactionMetadata.prepareAbortOrCommit): it starts now
            prepared.txn_start_timestamp = now
        prepared.txn_last_update_timestamp = now
        if client_tv >= 2:
            # TV2: every end bumps the epoch; an exhausted epoch moves to a new producer id once the
            # markers (written with the bumped epoch) are in (a fence never rotates the id)
            if not fence and is_epoch_exhausted(meta.producer_epoch):
                prepared.next_producer_id = self._new_producer_id()
            else:
                prepared.next_producer_id = NO_PRODUCER_ID
            prepared.last_producer_epoch = meta.producer_epoch
            prepared.producer_epoch = meta.producer_epoch + 1
        prepared.client_txn_version = client_tv
        self._commit(prepared, now)
        return self._complete(prepared, commit, now)

    # ================================================================== timeouts / expiration

    def abort_timed_out_transactions(self, now: int) -> list[str]:
        """Abort (with a fencing epoch bump) every Ongoing transaction older than its timeout."""
        aborted = []
        for meta in list(self.txns.values()):
            if meta.state == TxnState.ONGOING and meta.txn_start_timestamp + meta.txn_timeout_ms < now:
                log.info("Aborting transaction %s of producer %d (epoch %d): timed out after %d ms",
                         meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.txn_timeout_ms)
                try:
                    self._fence_and_abort(meta, now)
                except TxnError:
                    log.exception("Aborting timed-out transaction %s failed", meta.transactional_id)
                    continue
                aborted.append(meta.transactional_id)
        return aborted

    def remove_expired_transactional_ids(self, now: int) -> list[str]:
        """Forget ids idle for transactional.id.expiration.ms (a tombstone in the log)."""
        expiration = self.cfg("transactional.id.expiration.ms")
        gone = []
        for meta in list(self.txns.values()):
            if meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) \
                    and meta.txn_last_update_timestamp + expiration <= now:
                broker = self.broker
                if broker is not None:
                    plog = broker.partition_log(rec.TRANSACTION_STATE_TOPIC, self.partition_for(meta.transactional_id))
                    if plog is None:
                        continue
                    batch = rec.record_batch(rec.encode_key(meta.transactional_id), None, now)
                    try:
                        plog.append_as_coordinator(batch, now_ms=now)
                    except Exception:
                        log.exception("Writing the tombstone of %s failed", meta.transactional_id)
                        continue
                del self.txns[meta.transactional_id]
                gone.append(meta.transactional_id)
        return gone

    # ================================================================== TxnOffsetCommit

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          generation_id: int, member_id: str, instance_id: str | None, api_version: int,
                          commits: list[tuple[str, int, int, int, str | None]], now: int | None = None) -> ErrorCode:
        """Write offsets of a transaction to the group's partition; they count once it commits."""
        now = _now_ms() if now is None else now
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if api_version >= 5:
            # a TV2 producer sends no AddOffsetsToTxn: the group's partition joins the transaction
            # here (txnOffsetCommitRequestVersionToTransactionSupportedOperation: ADD_PARTITION)
            partition = self.groups.partition_for(group_id)
            if partition is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            try:
                self.add_partitions(transactional_id, producer_id, producer_epoch,
                                    [(self.groups.offsets_topic, partition)], now, client_tv=2)
            except TxnError as exc:
                return ErrorCode.INVALID_PRODUCER_EPOCH if exc.code == ErrorCode.PRODUCER_FENCED else exc.code
        code = self.groups.validate(group_id, generation_id, member_id, instance_id, api_version,
                                    [(topic, partition) for topic, partition, *_ in commits])
        if code != ErrorCode.NONE:
            return code
        return self.groups.append_pending(group_id, producer_id, producer_epoch, commits, now)

    # ================================================================== admin

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        """The state of one transactional id (None if unknown)."""
        return self.txns.get(transactional_id)

    def list_transactions(self, states: list[str], producer_ids: list[int], duration_ms: int,
                          pattern: str | None, now: int | None = None) -> tuple[list[str], list[TransactionMetadata]]:
        """(unknown state filters, matching transactions) for ListTransactions."""
        now = _now_ms() if now is None else now
        unknown = [s for s in states if s not in STATE_BY_NAME]
        wanted = {STATE_BY_NAME[s] for s in states if s in STATE_BY_NAME}
        try:
            regex = re.compile(pattern) if pattern else None
        except re.error as exc:
            raise TxnError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc)) from exc
        out = []
        for meta in self.txns.values():
            if meta.state == TxnState.DEAD:
                continue
            if states and meta.state not in wanted:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            # Kafka keeps transactions that have run longer than the filter (started before now - duration)
            if duration_ms >= 0 and now - meta.txn_start_timestamp <= duration_ms:
                continue
            if regex is not None and not regex.fullmatch(meta.transactional_id):
                continue
            out.append(meta)
        return unknown, out

    def transaction_of_producer(self, producer_id: int) -> TransactionMetadata | None:
        """The transactional id's state that currently owns `producer_id`, if any."""
        for meta in self.txns.values():
            if meta.producer_id == producer_id:
                return meta
        return None


def describe_value(meta: TransactionMetadata) -> dict[str, Any]:
    """A plain dict of a transaction's state (logs, tests)."""
    return {
        "transactional_id": meta.transactional_id,
        "producer_id": meta.producer_id,
        "producer_epoch": meta.producer_epoch,
        "state": meta.state.display_name,
        "partitions": sorted(meta.partitions),
    }


_PRODUCE_ERRORS = {
    # ReplicaManager: coordinator trouble becomes NOT_ENOUGH_REPLICAS, which every client retries
    ErrorCode.CONCURRENT_TRANSACTIONS: (ErrorCode.NOT_ENOUGH_REPLICAS, True),
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: (ErrorCode.NOT_ENOUGH_REPLICAS, True),
    ErrorCode.COORDINATOR_NOT_AVAILABLE: (ErrorCode.NOT_ENOUGH_REPLICAS, True),
    ErrorCode.NOT_COORDINATOR: (ErrorCode.NOT_ENOUGH_REPLICAS, True),
    ErrorCode.INVALID_TXN_STATE: (ErrorCode.INVALID_TXN_STATE, False),
}


def tv2_marker_fenced(partition_log: Any, producer_id: int, producer_epoch: int) -> bool:
    """Kafka 4.4's log check of a TV2 marker (ProducerAppendInfo.checkProducerEpoch with transaction
    version 2): it must carry an epoch above the producer's, since the end bumped it; the same epoch
    is only a retried marker when no transaction is open (or the epoch is the last one). Without
    it a late marker of the last transaction would end the next one, already under that epoch.
    (An older epoch is refused by the log store for every version.)"""
    entry = partition_log.producer_state.producers.get(producer_id)
    return (entry is not None and producer_epoch == entry.producer_epoch
            and entry.current_txn_first_offset is not None and producer_epoch != 2**15 - 1)


#: Produce v12+ is a TV2 producer's: the leader adds the partition to the transaction itself
#: (AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation: ADD_PARTITION)
PRODUCE_ADDS_PARTITIONS = 12


@dataclass(frozen=True, slots=True)
class RemoteTxnCheck:
    """The first transactional batch of a producer whose coordinator is on another broker: that
    coordinator must be asked (Kafka's AddPartitionsToTxnManager), to add the partition (`add`,
    Produce v12+, Transactions V2) or to verify it is in the transaction."""

    producer_id: int
    producer_epoch: int
    add: bool


def verify_transactional_produce(broker: Any, transactional_id: str | None, topic: str, partition: int,
                                 partition_log: Any, records: Any,
                                 version: int = 0) -> tuple[ErrorCode, str] | RemoteTxnCheck | None:
    """KIP-890 produce verification (Kafka's transaction.partition.verification.enable, on by default):
    the first transactional batch of a producer in a partition is only appended if the coordinator has
    that partition in the producer's ongoing transaction. From Produce v12 (Transactions V2) the
    partition is added to the transaction instead, whatever that config says. Returns (error,
    message) to refuse the batch, None to append it, or a `RemoteTxnCheck` when the coordinator is
    on another broker (the caller asks it, then `produce_refusal`).

    Reads four header fields only; later batches of the same transaction skip the check (the
    partition's producer state already shows the open transaction), as in Kafka.
    """
    if transactional_id is None or records is None or len(records) < 61 or records[16] != 2:
        return None
    attributes = int.from_bytes(records[21:23], "big")
    if not attributes & 0x10 or attributes & 0x20:
        return None
    add = version >= PRODUCE_ADDS_PARTITIONS
    raw = broker.config.raw.get("transaction.partition.verification.enable") if broker.config is not None else None
    if not add and raw is not None and raw.strip().lower() == "false":
        return None
    producer_id = int.from_bytes(records[43:51], "big", signed=True)
    producer_epoch = int.from_bytes(records[51:53], "big", signed=True)
    entry = partition_log.producer_state.producers.get(producer_id)
    if entry is not None and entry.current_txn_first_offset is not None and entry.producer_epoch == producer_epoch:
        return None
    coordinator = broker.coordinators.get("transactions")
    if coordinator is not None and coordinator.owns is not None and not coordinator.owns(transactional_id):
        return RemoteTxnCheck(producer_id, producer_epoch, add)
    if coordinator is None or not coordinator.active:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif add:
        try:
            coordinator.add_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)],
                                       client_tv=2)
            code = ErrorCode.NONE
        except TxnError as exc:
            code = exc.code
    else:
        code = coordinator.verify_partitions(transactional_id, producer_id, producer_epoch,
                                             [(topic, partition)])[(topic, partition)]
    return produce_refusal(code, add)


def produce_refusal(code: ErrorCode | int, add: bool) -> tuple[ErrorCode, str] | None:
    """What a produce answers for the coordinator's code about its partition (ReplicaManager and
    AddPartitionsToTxnManager): None to append, else (error, message)."""
    if code == ErrorCode.NONE:
        return None
    if not isinstance(code, ErrorCode):
        code = ErrorCode(code) if code in ErrorCode._value2member_map_ else ErrorCode.UNKNOWN_SERVER_ERROR
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, code.name  # a fenced epoch, as a produce says it
    if code == ErrorCode.TRANSACTION_ABORTABLE and not add:
        code = ErrorCode.INVALID_TXN_STATE  # a remote Kafka coordinator's "not in the transaction"
    if code == ErrorCode.CONCURRENT_TRANSACTIONS and add:
        # not made NOT_ENOUGH_REPLICAS for TV2: the producer retries it (the last end's markers
        # are still being written)
        return code, code.name
    mapped, retriable = _PRODUCE_ERRORS.get(code, (code, False))
    if mapped == ErrorCode.INVALID_TXN_STATE:
        return mapped, "Partition was not added to the transaction"
    if retriable:
        return mapped, f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}"
    return mapped, code.name
