"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest local (-4),
latest tiered (-5), earliest pending upload (-6, v11), or the first offset whose timestamp is
at least the one asked for."""

from __future__ import annotations

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class
from .common import error_code_for, leader_epoch_error
from .registry import RequestContext, handles

LIST_OFFSETS_KEY = 2
ListOffsetsResponse = response_class(LIST_OFFSETS_KEY)
TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_PENDING_UPLOAD = -6
READ_COMMITTED = 1


def _error(index: int, code: ErrorCode) -> object:
    return PartitionResponse(partition_index=index, error_code=int(code), timestamp=-1, offset=-1, leader_epoch=-1)


@handles(LIST_OFFSETS_KEY, 1, 11)
async def handle_list_offsets(ctx: RequestContext, header, request) -> object:
    broker = ctx.broker
    version = header.api_version
    committed = version >= 2 and request.isolation_level == READ_COMMITTED
    topics = []
    seen: set = set()
    for wanted in request.topics:
        topic = broker.metadata.get(wanted.name)
        partitions = []
        for p in wanted.partitions:
            index = p.partition_index
            if (wanted.name, index) in seen:
                partitions.append(_error(index, ErrorCode.INVALID_REQUEST))
                continue
            seen.add((wanted.name, index))
            plog = broker.partition_log(topic.name, index) if topic is not None and 0 <= index < topic.partitions else None
            if plog is None:
                partitions.append(_error(index, broker.partition_error(topic.name, index)
                                         if topic is not None and 0 <= index < topic.partitions
                                         else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            epoch_error = leader_epoch_error(p.current_leader_epoch, plog.leader_epoch)
            if epoch_error:
                partitions.append(_error(index, epoch_error))
                continue
            ts = p.timestamp
            try:
                if ts == LATEST:
                    # What a consumer may read: the high watermark, or the last stable offset.
                    offset = getattr(plog, "last_stable_offset", plog.high_watermark) if committed else plog.high_watermark
                    epoch = plog.epoch_for_offset(max(offset - 1, 0))
                    found = (-1, offset, epoch)
                elif ts == EARLIEST_PENDING_UPLOAD:
                    # KIP-1023: nothing is pending upload without tiered storage (UnifiedLog answers
                    # no offset, leader epoch -1, for a log without remote storage)
                    found = (-1, -1, -1)
                else:
                    result = plog.fetch_offset_by_timestamp(ts)
                    found = None if result is None else (result.timestamp, result.offset, result.leader_epoch)
            except Exception as exc:
                partitions.append(_error(index, error_code_for(exc)))
                continue
            if found is None:
                partitions.append(PartitionResponse(partition_index=index, error_code=0, timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            timestamp, offset, epoch = found
            partitions.append(
                PartitionResponse(
                    partition_index=index,
                    error_code=0,
                    old_style_offsets=[offset] if version == 0 else [],
                    timestamp=timestamp,
                    offset=offset,
                    # The field exists from v4; older versions must carry its default.
                    leader_epoch=-1 if epoch is None or version < 4 else epoch,
                )
            )
        topics.append(TopicResponse(name=wanted.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
