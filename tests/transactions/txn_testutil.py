"""A minimal in-process broker for transaction coordinator tests: real partition logs in a temp dir."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from odradek.cluster.metadata_cache import LocalMetadataCache
from odradek.config import BrokerConfig
from odradek.handlers.fetch_sessions import FetchSessionCache
from odradek.handlers.producer_ids import ProducerIdManager
from odradek.logstore.config import LogConfig
from odradek.logstore.partition_log import PartitionLog
from odradek.wire.errors import ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: the shared fakes
from fake_metadata import FakeMetadata  # noqa: E402


class FakeBroker:
    """Config, metadata, logs under `root` and a producer id allocator; `restart()` reopens the logs."""

    def __init__(self, root: Path, **overrides: object) -> None:
        props = {"transaction.state.log.num.partitions": "5"}
        props.update({k: str(v) for k, v in overrides.items()})
        self.root = root
        self.config = BrokerConfig(props)
        self.metadata = FakeMetadata(self)
        self.leader_epoch = 0
        self.coordinators: dict[str, Any] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.producer_ids = ProducerIdManager(-1)
        self.notified = 0
        self.fetch_sessions = FetchSessionCache()
        # the single node's view of the cluster, as Broker has it (a KRaft broker swaps these)
        self.metadata_cache = LocalMetadataCache(self)
        self.forwarding = None
        self.broker_role = None

    def open_log(self, name: str, index: int, configs: dict[str, str]) -> PartitionLog:
        plog = PartitionLog.open(self.root / f"{name}-{index}", LogConfig.from_props(configs))
        plog.become_leader(self.leader_epoch)
        self.logs[(name, index)] = plog
        return plog

    def partition_error(self, topic: str, partition: int) -> ErrorCode:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def partition_log(self, name: str, index: int) -> PartitionLog | None:
        return self.logs.get((name, index))

    def notify_appended(self, partitions=None) -> None:
        self.notified += 1

    async def wait_for_append(self, timeout_s: float, partitions=None) -> bool:
        return False

    def restart(self) -> FakeBroker:
        """Close every log cleanly and open a new broker over the same dirs (same topics)."""
        for plog in self.logs.values():
            plog.close()
        other = FakeBroker(self.root)
        other.config = self.config
        for topic in self.metadata.topics.values():
            other.metadata.topics[topic.name] = topic
            for index in range(topic.partitions):
                other.open_log(topic.name, index, topic.configs)
        other.producer_ids = ProducerIdManager.after_logs(other.logs.values())
        return other
