"""DescribeQuorum, AddRaftVoter, RemoveRaftVoter and UnregisterBroker for a single-voter quorum.

A Kafka broker forwards these to its controller, whose Raft client (KafkaRaftClient) answers
the quorum ones. Odradek is the only voter and always the leader of ``__cluster_metadata-0``;
each metadata append is fsynced before it is applied, so the high watermark is the log end
offset. With a static voter set (kraft.version 0, what Odradek writes) Kafka refuses voter
changes with UNSUPPORTED_VERSION once the request itself is valid; so does this. UpdateFeatures
upgrades it to kraft.version 1 (`upgrade_kraft_version`, KIP-853). A dynamic
quorum (kraft.version 1, a Kafka 4.x directory formatted with --standalone) has its voter, with
a directory id and endpoint, in a VotersRecord: adding a voter with the same id is
DUPLICATE_VOTER, another voter never answers (Kafka's REQUEST_TIMED_OUT), and removing the
last voter is VOTER_NOT_FOUND.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from ..kraft.records import decode_control_value
from ..wire.errors import ErrorCode
from ..wire.primitives import Uuid
from ..wire.protocol import response_class, supported_versions
from ..wire.records import ControlRecordType, iter_batches, parse_control_record_key
from .common import advertised_endpoint
from .registry import RequestContext, handles

DESCRIBE_QUORUM_KEY = 55
UNREGISTER_BROKER_KEY = 64
ADD_RAFT_VOTER_KEY = 80
REMOVE_RAFT_VOTER_KEY = 81

DescribeQuorumResponse = response_class(DESCRIBE_QUORUM_KEY)
UnregisterBrokerResponse = response_class(UNREGISTER_BROKER_KEY)
AddRaftVoterResponse = response_class(ADD_RAFT_VOTER_KEY)
RemoveRaftVoterResponse = response_class(REMOVE_RAFT_VOTER_KEY)

METADATA_TOPIC = "__cluster_metadata"
# Errors.UNKNOWN_TOPIC_OR_PARTITION.message()
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."
# the default of controller.listener.names' first entry in Kafka's own examples and tools
DEFAULT_CONTROLLER_LISTENER = "CONTROLLER"


@dataclass(frozen=True)
class Quorum:
    """The quorum as the metadata log records it: kraft.version and, from 1 on, the VotersRecord's
    voters as (id, directory id, [(listener, host, port)])."""

    kraft_version: int
    voters: tuple[tuple[int, Uuid, tuple[tuple[str, str, int], ...]], ...] = ()


# per store: the KRaftVersion and Voters control records change only when a voter is added or
# removed, which this node never does, and finding them reads the snapshot and the log
_quorums: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


async def quorum_of(store: Any) -> Quorum:
    """The metadata log's kraft.version and voter set, read once per store."""
    quorum = _quorums.get(store)
    if quorum is None:
        quorum = await trio.to_thread.run_sync(_read_quorum, store.log) if store.log is not None else Quorum(0)
        _quorums[store] = quorum
    return quorum


def _read_quorum(md_log: Any) -> Quorum:
    """The last KRaftVersionRecord and VotersRecord of the newest snapshot and the log after it."""
    version, voters = 0, None
    sources: list[tuple[Path, int]] = []
    snapshot = md_log.latest_snapshot()
    start = 0
    if snapshot is not None:
        sources.append((md_log.dir / snapshot.file_name, 0))
        start = snapshot.end_offset
    sources += [(seg.log_path, start) for seg in list(md_log.plog.segments)]
    for path, first in sources:
        data = path.read_bytes()
        for batch in iter_batches(data):
            h = batch.header()
            if not h.attributes & 0x20 or h.base_offset + h.last_offset_delta < first:
                continue
            for rec in batch.records():
                _v, ctype = parse_control_record_key(rec.key)
                if rec.value is None:
                    continue
                if int(ctype) == int(ControlRecordType.KRAFT_VERSION):
                    version = int(decode_control_value(int(ctype), rec.value).k_raft_version)
                elif int(ctype) == int(ControlRecordType.KRAFT_VOTERS):
                    voters = decode_control_value(int(ctype), rec.value).voters
    if version < 1 or not voters:
        return Quorum(version)
    return Quorum(version, tuple((v.voter_id, v.voter_directory_id, tuple((e.name, e.host, e.port) for e in v.endpoints))
                                 for v in voters))


def upgrade_kraft_version(ctx: RequestContext, level: int) -> None:
    """UpdateFeatures' kraft.version upgrade of a static quorum (KIP-853): this node, the only voter,
    writes the KRaftVersionRecord and a VotersRecord naming itself with the directory id of its
    metadata log dir and its controller endpoint, as KafkaRaftClient.upgradeKRaftVersion does."""
    from ..kraft.features import supported_feature_ranges  # noqa: PLC0415
    from ..kraft.records import new_record  # noqa: PLC0415 - metadata records only on a change

    broker = ctx.broker
    store = broker.metadata_store
    name, host, port = controller_endpoint(ctx, _quorums.get(store) or Quorum(0))
    dir_id = store.directory_ids.get(store.metadata_log_dir) or next(iter(store.directory_ids.values()), Uuid.ZERO)
    lo, hi = supported_feature_ranges()["kraft.version"]
    cls = type(new_record("VotersRecord"))
    voters = cls(version=0, voters=[cls.Voter(
        voter_id=broker.node_id, voter_directory_id=dir_id, endpoints=[cls.Endpoint(name=name, host=host, port=port)],
        k_raft_version_feature=cls.KRaftVersionFeature(min_supported_version=lo, max_supported_version=hi))])
    store.log.upgrade_kraft_version(level, voters, store.epoch, store.now_ms())
    _quorums.pop(store, None)  # read again from the log


def _voter_directory_id(broker: Any, quorum: Quorum) -> Uuid:
    # a static voter has no directory id; a dynamic one has the VotersRecord's
    for voter_id, directory_id, _endpoints in quorum.voters:
        if voter_id == broker.node_id:
            return directory_id
    return Uuid.ZERO


def _voter_keys(quorum: Quorum) -> str:
    """Kafka's printed set of voter keys: [ReplicaKey(id=1, directoryId=...)]."""
    return "[" + ", ".join(_replica_key(i, d) for i, d, _ in quorum.voters) + "]"


def controller_endpoint(ctx: RequestContext, quorum: Quorum) -> tuple[str, str, int]:
    """(listener name, host, port) this voter is reached on: its VotersRecord's endpoint, its
    `controller.quorum.voters` entry
    (a static voter set, as Kafka builds it, under the first controller listener name), else a
    listener named in controller.listener.names, else the request's own listener (Odradek
    serves the controller APIs on every listener)."""
    broker = ctx.broker
    names = broker.config.get("controller.listener.names") or []
    # controller listeners are often left out of advertised.listeners
    by_name = {lst.name: (lst.advertised_host, lst.port)
               for lst in broker.config.listeners}
    by_name.update({lst.name: advertised_endpoint(broker, lst.name) for lst in broker.config.advertised_listeners})
    for voter_id, _directory_id, endpoints in quorum.voters:
        # a dynamic quorum (kraft.version 1): the listener its VotersRecord names, where this node
        # now has it (a Kafka voter whose endpoint moved records the new one with UpdateRaftVoter)
        if voter_id == broker.node_id and endpoints:
            name, host, port = endpoints[0]
            return (name, *by_name.get(name, (host, port)))
    for voter in broker.config.get("controller.quorum.voters") or []:
        node, _, address = voter.partition("@")
        host, _, port = address.rpartition(":")
        if node.strip() == str(broker.node_id) and port.isdigit():
            return (names[0] if names else DEFAULT_CONTROLLER_LISTENER), host.strip("[]"), int(port)
    for name in names:
        if name in by_name:
            return (name, *by_name[name])
    host, port = advertised_endpoint(broker, ctx.listener_name)
    return (names[0] if names else ctx.listener_name), host, port


def _controller_listener_name(ctx: RequestContext) -> str:
    names = ctx.broker.config.get("controller.listener.names") or []
    return names[0] if names else DEFAULT_CONTROLLER_LISTENER


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@handles(DESCRIBE_QUORUM_KEY, 0, supported_versions(DESCRIBE_QUORUM_KEY)[1])
async def handle_describe_quorum(ctx: RequestContext, header, request) -> object:
    R = DescribeQuorumResponse
    topics = request.topics
    valid = (len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC and len(topics[0].partitions) == 1
             and topics[0].partitions[0].partition_index == 0)
    if not valid:
        # KafkaRaftClient: exactly one partition, __cluster_metadata-0, or every one named fails
        return R(error_code=0, topics=[R.TopicData(topic_name=t.topic_name, partitions=[
            R.PartitionData(partition_index=p.partition_index, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                            error_message=UNKNOWN_PARTITION_MESSAGE) for p in t.partitions]) for t in topics])
    broker = ctx.broker
    store = broker.metadata_store
    quorum = await quorum_of(store)
    end = store.log.log_end_offset
    voter = R.ReplicaState(replica_id=broker.node_id, log_end_offset=end)
    if header.api_version >= 2:
        voter.replica_directory_id = _voter_directory_id(broker, quorum)
    if header.api_version >= 1:
        # the leader reports itself as fetched and caught up just now
        now = _wall_ms()
        voter.last_fetch_timestamp = now
        voter.last_caught_up_timestamp = now
    observers = []
    controller = getattr(broker, "quorum_controller", None)
    for state in sorted(controller.raft.observers.values(), key=lambda o: o.replica_id) if controller else []:
        # the brokers following the log (KafkaRaftClient's observer states)
        observer = R.ReplicaState(replica_id=state.replica_id, log_end_offset=state.log_end_offset)
        if header.api_version >= 2:
            observer.replica_directory_id = state.directory_id
        if header.api_version >= 1:
            observer.last_fetch_timestamp = state.last_fetch_timestamp
            observer.last_caught_up_timestamp = state.last_caught_up_timestamp
        observers.append(observer)
    partition = R.PartitionData(partition_index=0, error_code=0, leader_id=broker.node_id,
                                leader_epoch=store.epoch, high_watermark=end, current_voters=[voter],
                                observers=observers)
    nodes = []
    if header.api_version >= 2:
        name, host, port = controller_endpoint(ctx, quorum)
        nodes = [R.Node(node_id=broker.node_id, listeners=[R.Listener(name=name, host=host, port=port)])]
    return R(error_code=0, topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])], nodes=nodes)


def _replica_key(voter_id: int, directory_id: Uuid) -> str:
    # Kafka's ReplicaKey.toString
    shown = "<undefined>" if directory_id == Uuid.ZERO else directory_id.to_base64()
    return f"ReplicaKey(id={voter_id}, directoryId={shown})"


def _cluster_id_error(ctx: RequestContext, cluster_id: str | None) -> str | None:
    if cluster_id is None or cluster_id == ctx.broker.cluster_id:
        return None
    return f'The given id "{cluster_id}" doesn\'t match the cluster id "{ctx.broker.cluster_id}"'


@handles(ADD_RAFT_VOTER_KEY, 0, supported_versions(ADD_RAFT_VOTER_KEY)[1])
async def handle_add_raft_voter(ctx: RequestContext, header, request) -> object:
    R = AddRaftVoterResponse
    problem = _cluster_id_error(ctx, request.cluster_id)
    if problem is not None:
        return R(error_code=int(ErrorCode.INCONSISTENT_CLUSTER_ID), error_message=problem)
    if request.voter_id < 0 or request.voter_directory_id == Uuid.ZERO:
        return R(error_code=int(ErrorCode.INVALID_REQUEST), error_message="Add voter request didn't include a valid voter")
    listener = _controller_listener_name(ctx)
    endpoints = {lst.name: lst for lst in request.listeners}
    if listener not in endpoints:
        # Kafka prints the request's endpoints with Endpoints.toString (an empty map here)
        shown = ", ".join(f"ListenerName({e.name})={e.host}:{e.port}" for e in request.listeners)
        return R(error_code=int(ErrorCode.INVALID_REQUEST),
                 error_message=f"Add voter request didn't include the endpoint (Endpoints(endpoints={{{shown}}})) "
                               f"for the default listener ListenerName({listener})")
    quorum = await quorum_of(ctx.broker.metadata_store)
    if quorum.kraft_version < 1:
        return R(error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                 error_message="Cluster doesn't support adding voter because the kraft.version feature is "
                               f"{quorum.kraft_version}")
    key = _replica_key(request.voter_id, request.voter_directory_id)
    if any(voter_id == request.voter_id for voter_id, _, _ in quorum.voters):
        return R(error_code=int(ErrorCode.DUPLICATE_VOTER),
                 error_message=f"The voter id for {key} is already part of the set of voters {_voter_keys(quorum)}.")
    # Kafka now asks the new voter for its ApiVersions and gives up when it gets no answer; a
    # single Odradek node takes no second voter, so it answers as Kafka does then
    return R(error_code=int(ErrorCode.REQUEST_TIMED_OUT),
             error_message="Aborted add voter operation for since API_VERSIONS returned an error BROKER_NOT_AVAILABLE")


@handles(REMOVE_RAFT_VOTER_KEY, 0, supported_versions(REMOVE_RAFT_VOTER_KEY)[1])
async def handle_remove_raft_voter(ctx: RequestContext, header, request) -> object:
    R = RemoveRaftVoterResponse
    problem = _cluster_id_error(ctx, request.cluster_id)
    if problem is not None:
        return R(error_code=int(ErrorCode.INCONSISTENT_CLUSTER_ID), error_message=problem)
    if request.voter_id < 0 or request.voter_directory_id == Uuid.ZERO:
        return R(error_code=int(ErrorCode.INVALID_REQUEST),
                 error_message="Remove voter request didn't include a valid voter")
    quorum = await quorum_of(ctx.broker.metadata_store)
    if quorum.kraft_version < 1:
        return R(error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                 error_message="Cluster doesn't support removing voter because the kraft.version feature is "
                               f"{quorum.kraft_version}")
    # VoterSet.removeVoter refuses a voter not in the set and the last voter alike
    return R(error_code=int(ErrorCode.VOTER_NOT_FOUND),
             error_message=f"Cannot remove voter {_replica_key(request.voter_id, request.voter_directory_id)} from "
                           f"the set of voters {_voter_keys(quorum)}")


@handles(UNREGISTER_BROKER_KEY, 0, supported_versions(UNREGISTER_BROKER_KEY)[1])
async def handle_unregister_broker(ctx: RequestContext, header, request) -> object:
    R = UnregisterBrokerResponse
    if request.broker_id != ctx.broker.node_id:
        return R(error_code=int(ErrorCode.BROKER_ID_NOT_REGISTERED),
                 error_message=f"Broker ID {request.broker_id} is not currently registered")
    # Kafka accepts its own live broker id and records the unregistration, after which that
    # broker leads nothing and its heartbeats fail until it restarts. A single node that did so
    # would stop serving; Odradek answers as Kafka does but stays registered.
    return R(error_code=0)
