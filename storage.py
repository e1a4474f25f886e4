"""Storage formatting (like `kafka-storage.sh format`) and opening the log manager.

Kafka refuses to start on unformatted log dirs; Odradek formats them on first start so
that `odradek serve` works with no preparation, and otherwise behaves like Kafka: every
log dir carries a `meta.properties` with the same cluster id and this node's id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from .cluster_metadata import random_uuid
from .config import BrokerConfig
from .logstore.config import LogConfig
from .logstore.manager import LogManager
from .logstore.metadata_files import MetaProperties

log = logging.getLogger(__name__)


class StorageError(RuntimeError):
    """The log dirs cannot be used (different clusters, wrong node id, ...)."""


def _read_meta(directory: Path) -> MetaProperties | None:
    if not (directory / "meta.properties").exists():
        return None
    return MetaProperties.read(directory)


def format_storage(config: BrokerConfig, cluster_id: str | None = None) -> str:
    """Write `meta.properties` into every log dir that lacks one; return the cluster id."""
    dirs = config.log_dirs
    existing = {d: _read_meta(d) for d in dirs}
    known = {m.cluster_id for m in existing.values() if m is not None}
    if len(known) > 1:
        raise StorageError(f"Log dirs belong to different clusters: {sorted(known)}")
    cluster = cluster_id or config.get("cluster.id") or (known.pop() if known else random_uuid().to_base64())
    for directory, meta in existing.items():
        if meta is not None:
            if meta.node_id != config.node_id:
                raise StorageError(
                    f"Stored node id {meta.node_id} in {directory} doesn't match node.id {config.node_id}"
                )
            continue
        directory.mkdir(parents=True, exist_ok=True)
        MetaProperties(cluster, config.node_id, random_uuid().to_base64()).write(directory)
        log.info("Formatted %s for cluster %s, node %s", directory, cluster, config.node_id)
    return cluster


def ensure_formatted(config: BrokerConfig) -> None:
    format_storage(config)


def read_cluster_id(config: BrokerConfig) -> str:
    meta = _read_meta(config.log_dirs[0])
    if meta is None:
        raise StorageError(f"{config.log_dirs[0]} is not formatted")
    return meta.cluster_id


def default_log_config(config: BrokerConfig) -> LogConfig:
    """The broker-wide topic defaults as a log-store LogConfig."""
    return LogConfig.from_broker_props(config.raw)


def open_log_manager(config: BrokerConfig, topic_config: Callable[[str], LogConfig | None]) -> LogManager:
    """The log manager over the configured log dirs; `topic_config` gives a topic's overrides."""
    return LogManager(config.log_dirs, default_log_config(config), topic_config)
