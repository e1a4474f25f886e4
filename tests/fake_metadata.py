"""`FakeMetadata`: just enough of ClusterMetadata for in-process coordinator tests (shared by the
group and transaction tests' fake brokers)."""

from __future__ import annotations

from typing import Any

from odradek.cluster_metadata import Topic, random_uuid


class FakeMetadata:
    """Topics by name and id; creating a topic opens its partition logs via `broker.open_log`."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.topics: dict[str, Topic] = {}

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def by_id(self, topic_id: Any) -> Topic | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        topic = Topic(name, random_uuid(), partitions, dict(configs))
        self.topics[name] = topic
        for index in range(partitions):
            self.broker.open_log(name, index, configs)
        return topic


async def create_internal_topic_in_place(broker: Any, spec: tuple[str, int, dict[str, str]] | None) -> None:
    """Stand-in for handlers.topics.ensure_internal_topic on a fake broker: FakeMetadata creates a
    topic in one call (a real broker makes the logs in a worker thread; tests/server checks that)."""
    if spec is not None and broker.metadata.get(spec[0]) is None:
        broker.metadata.create_topic(*spec)
