"""Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit (served by the
transaction coordinator, ``broker.coordinators["transactions"]``), and the admin APIs
DescribeProducers, DescribeTransactions and ListTransactions.

The broker creates the coordinator at start-up (``broker.coordinators["transactions"]``).
"""

from __future__ import annotations

import logging
from typing import Any

from ..security.acl import (
    CLUSTER_NAME,
    OP_CLUSTER_ACTION,
    OP_DESCRIBE,
    OP_READ,
    OP_WRITE,
    RT_CLUSTER,
    RT_GROUP,
    RT_TOPIC,
    RT_TRANSACTIONAL_ID,
    permits,
)
from ..txn_coordinator import TransactionCoordinator, TxnError
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .registry import RequestContext, handles

log = logging.getLogger(__name__)


ADD_PARTITIONS_TO_TXN_KEY = 24
ADD_OFFSETS_TO_TXN_KEY = 25
END_TXN_KEY = 26
TXN_OFFSET_COMMIT_KEY = 28
DESCRIBE_PRODUCERS_KEY = 61
DESCRIBE_TRANSACTIONS_KEY = 65
LIST_TRANSACTIONS_KEY = 66

AddPartitionsToTxnResponse = response_class(ADD_PARTITIONS_TO_TXN_KEY)
AddOffsetsToTxnResponse = response_class(ADD_OFFSETS_TO_TXN_KEY)
EndTxnResponse = response_class(END_TXN_KEY)
TxnOffsetCommitResponse = response_class(TXN_OFFSET_COMMIT_KEY)
DescribeProducersResponse = response_class(DESCRIBE_PRODUCERS_KEY)
DescribeTransactionsResponse = response_class(DESCRIBE_TRANSACTIONS_KEY)
ListTransactionsResponse = response_class(LIST_TRANSACTIONS_KEY)


def _max(key: int) -> int:
    return supported_versions(key)[1]


def _coordinator(ctx: RequestContext) -> TransactionCoordinator | None:
    coordinator = ctx.broker.coordinators.get("transactions")
    return coordinator if coordinator is not None and coordinator.active else None


def _fenced(code: ErrorCode, version: int, since: int) -> ErrorCode:
    # PRODUCER_FENCED came with KIP-588; older request versions get INVALID_PRODUCER_EPOCH, which
    # those clients handle the same way.
    if code == ErrorCode.PRODUCER_FENCED and version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _known_partition(ctx: RequestContext, topic: str, partition: int) -> bool:
    meta = ctx.broker.metadata.get(topic)
    return meta is not None and 0 <= partition < meta.partitions


# ====================================================================== AddPartitionsToTxn


def _add_partitions(ctx: RequestContext, coordinator: TransactionCoordinator | None, version: int,
                    txn_id: str, pid: int, epoch: int, topics: list[Any], verify_only: bool) -> list[Any]:
    Topic = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    Partition = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    codes: dict[tuple[str, int], ErrorCode]
    allowed = permits(ctx)
    # clients' versions (v0-3) need WRITE on the transactional id and on each topic (KafkaApis)
    client = version <= 3
    refused = {tp for tp in wanted if client and not allowed(OP_WRITE, RT_TOPIC, tp[0])}
    unknown = [tp for tp in wanted if tp not in refused and not _known_partition(ctx, *tp)]
    if client and not allowed(OP_WRITE, RT_TRANSACTIONAL_ID, txn_id):
        codes = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif refused or (unknown and coordinator is not None):
        # Kafka checks the partitions first: refused and unknown ones fail, the others are not attempted.
        codes = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp in refused
                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                 for tp in wanted}
    elif coordinator is None:
        codes = dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    elif verify_only:
        codes = coordinator.verify_partitions(txn_id, pid, epoch, wanted)
    else:
        try:
            # v4+ comes from a broker adding a TV2 producer's partitions (TransactionVersion
            # .transactionVersionForAddPartitionsToTxn); v0-3 from a client (TV_0)
            coordinator.add_partitions(txn_id, pid, epoch, wanted, client_tv=2 if version >= 4 else 0)
            code = ErrorCode.NONE
        except TxnError as exc:
            code = exc.code
        codes = dict.fromkeys(wanted, code)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(
            Partition(partition_index=partition, partition_error_code=int(_fenced(code, version, 2))))
    return [Topic(name=name, results_by_partition=parts) for name, parts in by_topic.items()]


@handles(ADD_PARTITIONS_TO_TXN_KEY, 0, _max(ADD_PARTITIONS_TO_TXN_KEY))
async def handle_add_partitions_to_txn(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    coordinator = _coordinator(ctx)
    if version <= 3:
        results = _add_partitions(ctx, coordinator, version, request.v3_and_below_transactional_id,
                                  request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
                                  request.v3_and_below_topics, False)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=results)
    # v4+: batched, sent by brokers (KIP-890), possibly verify-only: CLUSTER_ACTION on the cluster
    if not permits(ctx)(OP_CLUSTER_ACTION, RT_CLUSTER, CLUSTER_NAME):
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                                          results_by_transaction=[])
    Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
    out = []
    for txn in request.transactions:
        results = _add_partitions(ctx, coordinator, version, txn.transactional_id, txn.producer_id,
                                  txn.producer_epoch, txn.topics, txn.verify_only)
        out.append(Result(transactional_id=txn.transactional_id, topic_results=results))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=out)


# ====================================================================== AddOffsetsToTxn / EndTxn


@handles(ADD_OFFSETS_TO_TXN_KEY, 0, _max(ADD_OFFSETS_TO_TXN_KEY))
async def handle_add_offsets_to_txn(ctx: RequestContext, header, request) -> object:
    coordinator = _coordinator(ctx)
    code = ErrorCode.NONE
    allowed = permits(ctx)
    if not allowed(OP_WRITE, RT_TRANSACTIONAL_ID, request.transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not allowed(OP_READ, RT_GROUP, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif coordinator is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        try:
            coordinator.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                                    request.group_id)
        except TxnError as exc:
            code = exc.code
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=int(_fenced(code, header.api_version, 2)))


@handles(END_TXN_KEY, 0, _max(END_TXN_KEY))
async def handle_end_txn(ctx: RequestContext, header, request) -> object:
    coordinator = _coordinator(ctx)
    code = ErrorCode.NONE
    # EndTxn v5+ is a TV2 producer's (TransactionVersion.transactionVersionForEndTxn): the end bumps
    # the epoch and the answer carries the producer id and epoch to continue with
    client_tv = 2 if header.api_version >= 5 else 0
    producer = (-1, -1)
    if not permits(ctx)(OP_WRITE, RT_TRANSACTIONAL_ID, request.transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif coordinator is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        try:
            meta = coordinator.end_transaction(request.transactional_id, request.producer_id,
                                               request.producer_epoch, bool(request.committed), client_tv=client_tv)
            if client_tv >= 2:
                producer = coordinator.completed_ids(meta)
        except TxnError as exc:
            code = exc.code
    return EndTxnResponse(throttle_time_ms=0, error_code=int(_fenced(code, header.api_version, 2)),
                          producer_id=producer[0], producer_epoch=producer[1])


# ====================================================================== TxnOffsetCommit


def _java_length(text: str | None) -> int:
    """String.length() in Java (UTF-16 code units): what offset.metadata.max.bytes is compared with."""
    return 0 if text is None else len(text.encode("utf-16-le")) // 2


def _txn_topic_names(ctx: RequestContext, request, version: int) -> set[int]:
    """v6 names topics by id (KIP-1319): give each request topic its name ("" when the id is unknown,
    as KafkaApis leaves it) and return the unknown ones (by id())."""
    if version < 6:
        return set()
    meta = ctx.broker.metadata
    unknown_ids = set()
    for t in request.topics:
        found = meta.by_id(t.topic_id) if meta is not None else None
        t.name = found.name if found is not None else ""
        if found is None:
            unknown_ids.add(id(t))
    return unknown_ids


@handles(TXN_OFFSET_COMMIT_KEY, 0, 6)
async def handle_txn_offset_commit(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    coordinator = _coordinator(ctx)
    Partition = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition

    def Topic(t, partitions: list) -> object:  # noqa: N802 - the response struct, named by id from v6
        cls = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
        if version >= 6:
            return cls(topic_id=t.topic_id, partitions=partitions)
        return cls(name=t.name, partitions=partitions)

    unknown_ids = _txn_topic_names(ctx, request, version)
    allowed = permits(ctx)
    # WRITE on the transactional id, then READ on the group: every partition gets the error
    denied = None
    if not allowed(OP_WRITE, RT_TRANSACTIONAL_ID, request.transactional_id):
        denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not allowed(OP_READ, RT_GROUP, request.group_id):
        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if denied is not None:
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
            Topic(t, [Partition(partition_index=p.partition_index, error_code=int(denied)) for p in t.partitions])
            for t in request.topics])
    commits = []
    unknown: set[tuple[str, int]] = set()
    too_large: set[tuple[str, int]] = set()
    groups = ctx.broker.coordinators.get("groups")
    max_metadata = groups.cfg("offset.metadata.max.bytes") if groups is not None else 4096
    # READ on each topic (an unknown topic id is answered before that)
    refused = {t.name for t in request.topics if id(t) not in unknown_ids and not allowed(OP_READ, RT_TOPIC, t.name)}
    for t in request.topics:
        for p in t.partitions:
            if t.name in refused or id(t) in unknown_ids:
                continue
            if not _known_partition(ctx, t.name, p.partition_index):
                unknown.add((t.name, p.partition_index))
                continue
            if _java_length(p.committed_metadata) > max_metadata:
                # Kafka checks each partition's metadata before it writes any (OffsetMetadataManager)
                too_large.add((t.name, p.partition_index))
                continue
            epoch = p.committed_leader_epoch if version >= 2 else -1
            commits.append((t.name, p.partition_index, p.committed_offset, epoch, p.committed_metadata))
    if coordinator is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        generation = request.generation_id_or_member_epoch if version >= 3 else -1
        member = request.member_id if version >= 3 else ""
        instance = request.group_instance_id if version >= 3 else None
        code = coordinator.txn_offset_commit(request.transactional_id, request.group_id, request.producer_id,
                                             request.producer_epoch, generation, member, instance, version, commits)
    code = _fenced(code, version, 3)
    # KafkaApis answers what it refuses itself first (unknown topic id, topic authorization, unknown
    # topic or partition), as it meets them, then merges in the coordinator's results: appended to
    # a topic already answered, else as new topics after
    answered: dict[Any, tuple[Any, list]] = {}  # by the request topic's key: name, or id from v6

    def answer(t: Any, index: int, error: ErrorCode) -> None:
        key = t.topic_id if version >= 6 else t.name
        answered.setdefault(key, (t, []))[1].append(Partition(partition_index=index, error_code=int(error)))

    from_coordinator = []
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if id(t) in unknown_ids:
                answer(t, p.partition_index, ErrorCode.UNKNOWN_TOPIC_ID)
            elif t.name in refused:
                answer(t, p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif tp in unknown:
                answer(t, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                from_coordinator.append((t, p.partition_index, code if code != ErrorCode.NONE or tp not in too_large
                                         else ErrorCode.OFFSET_METADATA_TOO_LARGE))
    for t, index, error in from_coordinator:
        answer(t, index, error)
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[Topic(t, parts) for t, parts in answered.values()])


# ====================================================================== admin


@handles(DESCRIBE_PRODUCERS_KEY, 0, _max(DESCRIBE_PRODUCERS_KEY))
async def handle_describe_producers(ctx: RequestContext, header, request) -> object:
    R = DescribeProducersResponse
    topics = []
    allowed = permits(ctx)
    for t in request.topics:
        parts = []
        if not allowed(OP_READ, RT_TOPIC, t.name):  # READ on the topic (KafkaApis)
            topics.append(R.TopicResponse(name=t.name, partitions=[
                R.PartitionResponse(partition_index=i, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                for i in t.partition_indexes]))
            continue
        for index in t.partition_indexes:
            plog = ctx.broker.partition_log(t.name, index) if _known_partition(ctx, t.name, index) else None
            if plog is None:
                parts.append(R.PartitionResponse(partition_index=index,
                                                  error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
                continue
            active = [
                R.ProducerState(
                    producer_id=e.producer_id, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                    current_txn_start_offset=-1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
                )
                for e in plog.producer_state.producers.values()
            ]
            parts.append(R.PartitionResponse(partition_index=index, error_code=0, active_producers=active))
        topics.append(R.TopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


@handles(DESCRIBE_TRANSACTIONS_KEY, 0, _max(DESCRIBE_TRANSACTIONS_KEY))
async def handle_describe_transactions(ctx: RequestContext, header, request) -> object:
    R = DescribeTransactionsResponse
    coordinator = _coordinator(ctx)
    states = []
    allowed = permits(ctx)
    for txn_id in request.transactional_ids:
        meta = coordinator.describe(txn_id) if coordinator is not None else None
        if not allowed(OP_DESCRIBE, RT_TRANSACTIONAL_ID, txn_id):  # DESCRIBE on each transactional id
            states.append(R.TransactionState(error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                                             transactional_id=txn_id, transaction_state="", producer_id=-1,
                                             producer_epoch=-1))
            continue
        if coordinator is None:
            states.append(R.TransactionState(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                             transactional_id=txn_id, transaction_state="", producer_id=-1,
                                             producer_epoch=-1))
            continue
        if meta is None:
            states.append(R.TransactionState(error_code=int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND),
                                             transactional_id=txn_id, transaction_state="", producer_id=-1,
                                             producer_epoch=-1))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        states.append(R.TransactionState(
            error_code=0, transactional_id=txn_id, transaction_state=meta.state.display_name,
            transaction_timeout_ms=meta.txn_timeout_ms, transaction_start_time_ms=meta.txn_start_timestamp,
            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
            topics=[R.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()],
        ))
    return R(throttle_time_ms=0, transaction_states=states)


@handles(LIST_TRANSACTIONS_KEY, 0, _max(LIST_TRANSACTIONS_KEY))
async def handle_list_transactions(ctx: RequestContext, header, request) -> object:
    R = ListTransactionsResponse
    coordinator = _coordinator(ctx)
    if coordinator is None:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
    version = header.api_version
    duration = request.duration_filter if version >= 1 else -1
    pattern = request.transactional_id_pattern if version >= 2 else None
    try:
        unknown, found = coordinator.list_transactions(list(request.state_filters or []),
                                                       list(request.producer_id_filters or []), duration, pattern)
    except TxnError as exc:
        return R(throttle_time_ms=0, error_code=int(exc.code))
    allowed = permits(ctx)  # only the transactional ids the principal may DESCRIBE (KafkaApis)
    found = [m for m in found if allowed(OP_DESCRIBE, RT_TRANSACTIONAL_ID, m.transactional_id)]
    return R(
        throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
        transaction_states=[R.TransactionState(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                               transaction_state=m.state.display_name) for m in found],
    )
