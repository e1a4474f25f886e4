"""The APIs brokers send to their controller: BrokerRegistration (62), BrokerHeartbeat (63),
AllocateProducerIds (67), AssignReplicasToDirs (73), AlterPartition (56), Envelope (58) and
FetchSnapshot (59); the metadata-log Fetch is answered through handlers.fetch.

They are served by a node with the controller role whose `controller.listener.names` are set (a
controller of other brokers), on those listeners; the state behind them is in
`kraft.cluster_control` and `kraft.raft_leader`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..kraft.log import METADATA_TOPIC_ID
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from ..wire.schema import codec
from .quorum import controller_endpoint, quorum_of
from .registry import RequestContext, dispatch, handles

BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
ALLOCATE_PRODUCER_IDS = 67
ASSIGN_REPLICAS_TO_DIRS = 73
ALTER_PARTITION = 56
ENVELOPE = 58
FETCH_SNAPSHOT = 59

def _controller(ctx: RequestContext) -> Any:
    return getattr(ctx.broker, "quorum_controller", None)


def _refusal(ctx: RequestContext, request: Any) -> ErrorCode:
    """NOT_CONTROLLER on a node that is no controller of brokers, else Kafka's broker-epoch check."""
    controller = _controller(ctx)
    if controller is None:
        return ErrorCode.NOT_CONTROLLER
    return controller.cluster.check_broker_epoch(request.broker_id, request.broker_epoch)


async def node_endpoints(ctx: RequestContext, cls: Any) -> list[Any]:
    """The leader's endpoint on the request's listener, for Fetch/FetchSnapshot v17+/v1+."""
    _name, host, port = controller_endpoint(ctx, await quorum_of(ctx.broker.metadata_store))
    return [cls(node_id=ctx.broker.node_id, host=host, port=port, rack=None)]


async def metadata_fetch(ctx: RequestContext, version: int, request: Any) -> Any | None:
    """A Fetch of the metadata log, answered by the Raft leader; None if this node is none."""
    controller = _controller(ctx)
    if controller is None:
        return None
    endpoints = await node_endpoints(ctx, response_class(1).NodeEndpoint) if version >= 17 else []
    return await controller.raft.fetch(request, version, endpoints)


@handles(FETCH_SNAPSHOT, 0, supported_versions(FETCH_SNAPSHOT)[1])
async def handle_fetch_snapshot(ctx: RequestContext, header, request) -> object:
    controller = _controller(ctx)
    R = response_class(FETCH_SNAPSHOT)
    if controller is None:
        return R(error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER), topics=[])
    endpoints = await node_endpoints(ctx, R.NodeEndpoint) if header.api_version >= 1 else []
    return controller.raft.fetch_snapshot(request, header.api_version, endpoints)


@handles(BROKER_REGISTRATION, 0, supported_versions(BROKER_REGISTRATION)[1])
async def handle_broker_registration(ctx: RequestContext, header, request) -> object:
    R = response_class(BROKER_REGISTRATION)
    controller = _controller(ctx)
    if controller is None:
        return R(error_code=int(ErrorCode.NOT_CONTROLLER), broker_epoch=-1)
    error, epoch, _message = controller.cluster.register(request)
    return R(throttle_time_ms=0, error_code=int(error), broker_epoch=epoch)


@handles(BROKER_HEARTBEAT, 0, supported_versions(BROKER_HEARTBEAT)[1])
async def handle_broker_heartbeat(ctx: RequestContext, header, request) -> object:
    R = response_class(BROKER_HEARTBEAT)
    controller = _controller(ctx)
    if controller is None:
        return R(error_code=int(ErrorCode.NOT_CONTROLLER), is_fenced=True)
    error, caught_up, fenced, shut_down = controller.cluster.heartbeat(request)
    return R(throttle_time_ms=0, error_code=int(error), is_caught_up=caught_up, is_fenced=fenced,
             should_shut_down=shut_down)


@handles(ALLOCATE_PRODUCER_IDS, 0, supported_versions(ALLOCATE_PRODUCER_IDS)[1])
async def handle_allocate_producer_ids(ctx: RequestContext, header, request) -> object:
    R = response_class(ALLOCATE_PRODUCER_IDS)
    error = _refusal(ctx, request)
    if error:
        return R(throttle_time_ms=0, error_code=int(error))
    from ..kraft.store import PRODUCER_ID_BLOCK_SIZE  # noqa: PLC0415

    start = ctx.broker.metadata_store.allocate_producer_ids(broker_id=request.broker_id,
                                                            broker_epoch=request.broker_epoch)
    return R(throttle_time_ms=0, error_code=0, producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK_SIZE)


@handles(ASSIGN_REPLICAS_TO_DIRS, 0, supported_versions(ASSIGN_REPLICAS_TO_DIRS)[1])
async def handle_assign_replicas_to_dirs(ctx: RequestContext, header, request) -> object:
    R = response_class(ASSIGN_REPLICAS_TO_DIRS)
    error = _refusal(ctx, request)
    if error:
        return R(throttle_time_ms=0, error_code=int(error), directories=[])
    results = _controller(ctx).replication.assign_replicas_to_dirs(request.broker_id, request.directories)
    return R(throttle_time_ms=0, error_code=0, directories=results)


@handles(ALTER_PARTITION, 0, supported_versions(ALTER_PARTITION)[1])
async def handle_alter_partition(ctx: RequestContext, header, request) -> object:
    R = response_class(ALTER_PARTITION)
    error = _refusal(ctx, request)
    if error:
        return R(throttle_time_ms=0, error_code=int(error), topics=[])
    return R(throttle_time_ms=0, error_code=0,
             topics=_controller(ctx).replication.alter_partition(request.broker_id, request.topics, header.api_version))


# ====================================================================== Envelope

def _principal_of(data: bytes) -> str:
    """KafkaPrincipalSerde.deserialize of DefaultKafkaPrincipalBuilder: version, DefaultPrincipalData."""
    version = int.from_bytes(data[:2], "big")
    principal, _end = codec("DefaultPrincipalData", version).decode(memoryview(data)[2:])
    return f"{principal.type}:{principal.name}"


@handles(ENVELOPE, 0, supported_versions(ENVELOPE)[1])
async def handle_envelope(ctx: RequestContext, header, request) -> object:
    """A client's request forwarded by a broker (KIP-590): run as the client's principal, the
    answer (header included) sent back inside the envelope."""
    R = response_class(ENVELOPE)
    if _controller(ctx) is None:
        return R(error_code=int(ErrorCode.NOT_CONTROLLER))
    try:
        principal = _principal_of(bytes(request.request_principal or b""))
    except Exception:  # noqa: BLE001 - a principal we cannot read is Kafka's PRINCIPAL_DESERIALIZATION_FAILURE
        return R(error_code=int(ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE))
    address = bytes(request.client_host_address or b"")
    host = ".".join(str(b) for b in address) if len(address) == 4 else ctx.peer.rpartition(":")[0]
    session = dataclasses.replace(ctx.session, principal=principal, peer=f"{host}:0") if ctx.session else None
    inner = RequestContext(broker=ctx.broker, peer=f"{host}:0", listener_name=ctx.listener_name, session=session)
    inner.extra["forwarded"] = True
    frames = await dispatch(inner, memoryview(bytes(request.request_data)))
    if frames is None:
        return R(error_code=int(ErrorCode.INVALID_REQUEST))
    data = b"".join(bytes(f) for f in frames)[4:]
    return R(error_code=0, response_data=data)


__all__ = ["METADATA_TOPIC_ID", "metadata_fetch"]
