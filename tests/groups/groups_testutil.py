"""A minimal broker for coordinator tests: real partition logs in a temp dir, trio with a mock clock."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from odradek.cluster.metadata_cache import LocalMetadataCache
from odradek.config import BrokerConfig
from odradek.group_coordinator import GroupCoordinator
from odradek.handlers.registry import RequestContext, dispatch
from odradek.logstore.config import LogConfig
from odradek.logstore.partition_log import PartitionLog
from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class
from odradek.wire.schema import message_def

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: the shared fakes
from fake_metadata import FakeMetadata  # noqa: E402

CONSUMER_OFFSETS = "__consumer_offsets"


class FakeBroker:
    """Config, topic metadata and partition logs under `root`; reopenable (a restart)."""

    def __init__(self, root: Path, **overrides: object) -> None:
        props = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
                 "offsets.topic.num.partitions": "3", "listeners": "PLAINTEXT://127.0.0.1:9092"}
        props.update({k: str(v) for k, v in overrides.items()})
        self.root = root
        self.config = BrokerConfig(props)
        self.metadata = FakeMetadata(self)
        self.leader_epoch = 0
        self.node_id = 1
        self.bound_addresses: list[tuple[str, int]] = []
        self.coordinators: dict[str, Any] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.appends = 0
        # the single node's view of the cluster, as Broker has it (a KRaft broker swaps these)
        self.metadata_cache = LocalMetadataCache(self)
        self.forwarding = None
        self.broker_role = None

    def open_log(self, name: str, index: int, configs: dict[str, str]) -> PartitionLog:
        plog = PartitionLog.open(self.root / f"{name}-{index}", LogConfig.from_props(configs))
        self.logs[(name, index)] = plog
        return plog

    def partition_error(self, topic: str, partition: int) -> ErrorCode:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def notify_appended(self, partitions=None) -> None:
        self.appends += 1

    def restarted(self) -> FakeBroker:
        """Close the logs and open everything again from disk, like a broker restart."""
        for plog in self.logs.values():
            plog.close()
        again = FakeBroker(self.root, **{k: v for k, v in self.config.raw.items()})
        for name, topic in self.metadata.topics.items():
            again.metadata.topics[name] = topic
            for index in range(topic.partitions):
                again.open_log(name, index, topic.configs)
        return again


def run_with_coordinator(broker: FakeBroker | None, test: Callable[[GroupCoordinator], Awaitable[None]],
                         **config: object) -> GroupCoordinator:
    """Run `test(coordinator)` under trio with an autojumping clock and the coordinator's timers."""
    coordinator = GroupCoordinator(broker, None if broker is not None else BrokerConfig(
        {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
         **{k: str(v) for k, v in config.items()}}))
    if broker is not None:
        broker.coordinators["groups"] = coordinator

    async def main() -> None:
        await coordinator.startup()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(coordinator.run)
            await test(coordinator)
            nursery.cancel_scope.cancel()
        await coordinator.shutdown()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return coordinator


def consumer_subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 bytes for the topics."""
    from odradek.wire.schema import codec, message_class

    cls = message_class("ConsumerProtocolSubscription")
    return b"\x00\x00" + codec("ConsumerProtocolSubscription", 0).encode_bytes(cls(topics=list(topics), user_data=None))


def join_kwargs(**kwargs: object) -> dict[str, object]:
    """JoinGroup arguments with test defaults."""
    base: dict[str, object] = dict(
        group_id="g", member_id="", group_instance_id=None, client_id="client", client_host="/127.0.0.1",
        session_timeout_ms=1000, rebalance_timeout_ms=2000, protocol_type="consumer",
        protocols=[("range", consumer_subscription("t"))], require_known_member_id=True,
    )
    base.update(kwargs)
    return base


def _strip(obj: Any, fields: list, structs: dict, version: int) -> Any:
    """Reset the fields a version does not have to their defaults (recursively)."""
    for f in fields:
        present = f.versions is not None and f.versions[0] <= version <= f.versions[1]
        value = getattr(obj, f.attr)
        if not present:
            setattr(obj, f.attr, type(obj)().__getattribute__(f.attr))
        elif f.struct is not None and value is not None:
            for item in value if f.is_array else [value]:
                _strip(item, structs[f.struct].fields, structs, version)
    return obj


async def call(broker: FakeBroker, api_key: int, version: int, **fields: Any) -> Any:
    """One request through the real dispatcher, encoded as a client of `version` would, decoded back."""
    cls = request_class(api_key)
    mdef = message_def(cls.__name__)
    body = _strip(cls(**fields), mdef.root.fields, mdef.structs, version)
    frame = join_pieces(encode_request(version, 7, body, client_id="sweep"))[4:]
    ctx = RequestContext(broker=broker, peer="127.0.0.1:5555", listener_name="PLAINTEXT")
    pieces = await dispatch(ctx, memoryview(bytearray(frame)))
    corr, response = decode_response(join_pieces(pieces)[4:], api_key, version)
    assert corr == 7
    return response
