"""Storage formatting (like `kafka-storage.sh format` / `info`), the log manager and the metadata store.

Kafka refuses to start on unformatted log dirs; Odradek formats them on first start so
that `odradek serve` works with no preparation, and otherwise behaves like Kafka: every
log dir (and `metadata.log.dir`) carries a `meta.properties` with the same cluster id and
this node's id, and the metadata log dir holds `bootstrap.checkpoint` with the feature
levels the cluster starts with. A dir formatted here can be started by Apache Kafka 4.1
and the other way round.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from .cluster_metadata import random_uuid
from .config import BrokerConfig
from .kraft.bootstrap import read_bootstrap, write_bootstrap
from .kraft.features import default_feature_levels
from .kraft.image import MetadataImage
from .kraft.log import METADATA_PARTITION_DIR, METADATA_TOPIC, metadata_log_dir_of
from .kraft.snapshot import list_snapshots
from .kraft.store import MetadataStore
from .logstore.config import LogConfig
from .logstore.files import (
    is_delete_dir,
    is_future_dir,
    is_stray_dir,
    parse_partition_dir_name,
    stray_dir_name,
)
from .logstore.manager import LogManager
from .logstore.metadata_files import FileLock, MetaProperties, PartitionMetadataFile
from .wire.primitives import Uuid

log = logging.getLogger(__name__)


class StorageError(RuntimeError):
    """The log dirs cannot be used (different clusters, wrong node id, ...)."""


def _read_meta(directory: Path) -> MetaProperties | None:
    if not (directory / "meta.properties").exists():
        return None
    return MetaProperties.read(directory)


def metadata_log_dir(config: BrokerConfig) -> Path:
    """`metadata.log.dir`, or the first log dir (Kafka's default)."""
    return metadata_log_dir_of(config.log_dirs, config.get("metadata.log.dir"))


def all_storage_dirs(config: BrokerConfig) -> list[Path]:
    """The log dirs plus the metadata log dir when it is not one of them (each gets meta.properties)."""
    dirs = list(config.log_dirs)
    meta_dir = metadata_log_dir(config)
    if meta_dir not in dirs:
        dirs.append(meta_dir)
    return dirs


def _has_metadata(directory: Path) -> bool:
    part = directory / METADATA_PARTITION_DIR
    return part.is_dir() and (any(part.glob("*.log")) or bool(list_snapshots(part)))


def format_storage(config: BrokerConfig, cluster_id: str | None = None,
                   feature_levels: Mapping[str, int] | None = None, ignore_formatted: bool = True) -> str:
    """Format every dir that lacks a `meta.properties` (and write `bootstrap.checkpoint`); return the cluster id.

    With `ignore_formatted=False` (the `storage format` command without --ignore-formatted) an
    already formatted dir is an error, as in kafka-storage.sh.
    """
    dirs = all_storage_dirs(config)
    existing = {d: _read_meta(d) for d in dirs}
    known = {m.cluster_id for m in existing.values() if m is not None}
    if len(known) > 1:
        raise StorageError(f"Log dirs belong to different clusters: {sorted(known)}")
    if not ignore_formatted:
        formatted = [str(d) for d, m in existing.items() if m is not None]
        if formatted:
            raise StorageError(f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to "
                               "ignore this directory and format the others.")
    if cluster_id and known and cluster_id not in known:
        raise StorageError(f"Log dirs are formatted for cluster {known.pop()}, not {cluster_id}")
    cluster = cluster_id or (known.pop() if known else None) or config.get("cluster.id") or random_uuid().to_base64()
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
    meta_dir = metadata_log_dir(config)
    # Kafka writes bootstrap.checkpoint at format time and reads it only for an empty metadata log
    if not (meta_dir / "bootstrap.checkpoint").exists() and not _has_metadata(meta_dir):
        write_bootstrap(meta_dir, dict(feature_levels or default_feature_levels()))
    return cluster


def ensure_formatted(config: BrokerConfig) -> None:
    """Format on first start (Odradek's convenience over Kafka's refusal)."""
    format_storage(config)


def read_cluster_id(config: BrokerConfig) -> str:
    meta = _read_meta(config.log_dirs[0])
    if meta is None:
        raise StorageError(f"{config.log_dirs[0]} is not formatted")
    return meta.cluster_id


def directory_ids(config: BrokerConfig) -> dict[Path, Uuid]:
    """Each log dir's `directory.id` (log dirs formatted before 3.7 get one written now, as Kafka does)."""
    out: dict[Path, Uuid] = {}
    for d in config.log_dirs:
        meta = _read_meta(d)
        if meta is None:
            raise StorageError(f"{d} is not formatted")
        if not meta.directory_id:
            meta = MetaProperties(meta.cluster_id, meta.node_id, random_uuid().to_base64(), meta.version)
            meta.write(d)
        out[d] = Uuid.from_base64(meta.directory_id or "")
    return out


def open_metadata_store(config: BrokerConfig, now_ms: Callable[[], int] | None = None) -> MetadataStore:
    """The metadata store over `metadata.log.dir`; call `start()` after the log manager has locked the dirs."""
    clock = now_ms or (lambda: time.time_ns() // 1_000_000)
    store = MetadataStore(metadata_log_dir(config), config.node_id, directory_ids(config), clock)
    # the broker registration lists broker listeners only, as Kafka's does
    controller_names = {str(n).upper() for n in config.get("controller.listener.names") or []}
    store.listeners = [(lst.name, lst.advertised_host, lst.port, _protocol_of(config, lst.name))
                       for lst in config.advertised_listeners if lst.name.upper() not in controller_names]
    return store


def mark_stray_partition_dirs(config: BrokerConfig, image: MetadataImage) -> list[Path]:
    """Rename partition dirs the metadata does not know to `<topic>-<p>.<uuid>-stray`, as Kafka (3.7+) does.

    Only when the metadata log holds a cluster's metadata (it has a metadata.version): then a
    partition dir outside it belongs to a deleted topic (or an older topic of the same name) and
    must not be served. Dirs of a log dir that never had a metadata log (Odradek before the
    metadata log existed) are adopted instead (see ClusterMetadata.load). Returns the new paths.
    """
    if "metadata.version" not in image.features:
        return []
    moved: list[Path] = []
    for log_dir in config.log_dirs:
        if not log_dir.is_dir():
            continue
        for sub in sorted(log_dir.iterdir()):
            name = sub.name
            if not sub.is_dir() or is_delete_dir(name) or is_stray_dir(name) or is_future_dir(name):
                continue
            tp = parse_partition_dir_name(name)
            if tp is None or tp[0] == METADATA_TOPIC:
                continue
            topic = image.topic(tp[0])
            known = topic is not None and tp[1] in topic.partitions
            if known and topic is not None and (sub / "partition.metadata").exists():
                try:
                    known = PartitionMetadataFile(sub).read() == topic.topic_id.bytes
                except (ValueError, KeyError, OSError):
                    pass
            if known:
                continue
            target = log_dir / stray_dir_name(tp[0], tp[1])
            os.rename(sub, target)
            log.warning("Partition dir %s is not in the metadata (deleted or replaced topic); renamed to %s",
                        sub, target.name)
            moved.append(target)
    return moved


def lock_metadata_dir(config: BrokerConfig) -> FileLock | None:
    """Lock `metadata.log.dir` when it is not a log dir (the LogManager locks the log dirs)."""
    meta_dir = metadata_log_dir(config)
    if meta_dir in config.log_dirs:
        return None
    meta_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(meta_dir)
    lock.try_lock()
    return lock


def _protocol_of(config: BrokerConfig, listener: str) -> str:
    mapping = config.get("listener.security.protocol.map") or []
    for item in mapping:
        name, _, proto = str(item).partition(":")
        if name.upper() == listener.upper():
            return proto.upper()
    return listener.upper() if listener.upper() in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL") else "PLAINTEXT"


def default_log_config(config: BrokerConfig) -> LogConfig:
    """The broker-wide topic defaults as a log-store LogConfig (Kafka 4.x defaults where they changed)."""
    props = {"log.message.timestamp.after.max.ms": str(config.get("log.message.timestamp.after.max.ms"))}
    props.update(config.raw)
    return LogConfig.from_broker_props(props)


def open_log_manager(config: BrokerConfig, topic_config: Callable[[str], LogConfig | None]) -> LogManager:
    """The log manager over the configured log dirs; `topic_config` gives a topic's overrides."""
    validation = str(config.get("odradek.record.validation")).lower()
    if validation not in ("crc", "full"):
        raise StorageError(f"odradek.record.validation must be crc or full, not {validation!r}")
    return LogManager(config.log_dirs, default_log_config(config), topic_config, validate_records=validation == "full")


def storage_info(config: BrokerConfig) -> str:
    """What `odradek storage info` prints: each dir's meta.properties and the bootstrap feature levels."""
    lines: list[str] = []
    metas = {d: _read_meta(d) for d in all_storage_dirs(config)}
    found = [d for d, m in metas.items() if m is not None]
    missing = [d for d, m in metas.items() if m is None]
    if found:
        lines.append("Found log director" + ("y:" if len(found) == 1 else "ies:"))
        lines += [f"  {d}" for d in found]
        lines.append("")
    for d, m in metas.items():
        if m is not None:
            props = ", ".join(f"{k}={v}" for k, v in sorted(m.to_props().items()))
            lines.append(f"Found metadata in {d}: {{{props}}}")
    if missing:
        lines.append("")
        lines.append("Found problem:")
        lines += [f"  {d} is not formatted." for d in missing]
    levels = read_bootstrap(metadata_log_dir(config))
    if levels is not None:
        lines.append("")
        lines.append("Bootstrap feature levels: " + ", ".join(f"{k}={v}" for k, v in levels.items()))
    return "\n".join(lines)
