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
from dataclasses import dataclass, field
from pathlib import Path

from .cluster_metadata import random_uuid
from .config import BrokerConfig
from .kraft.bootstrap import read_bootstrap, write_bootstrap
from .kraft.features import default_feature_levels
from .kraft.image import MetadataImage
from .kraft.log import METADATA_PARTITION_DIR, METADATA_TOPIC, metadata_log_dir_of
from .kraft.snapshot import list_snapshots
from .kraft.store import MetadataStore, supported_feature_ranges
from .kraft.validation import ValidatedMetadata, validate_metadata_dir
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
                   feature_levels: Mapping[str, int] | None = None, ignore_formatted: bool = True,
                   bootstrap: bool = True) -> str:
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
        # every dir is checked before any is written
        if meta is not None and meta.node_id != config.node_id:
            raise StorageError(f"Stored node id {meta.node_id} in {directory} doesn't match node.id {config.node_id}")
    for directory, meta in existing.items():
        if meta is not None:
            continue
        directory.mkdir(parents=True, exist_ok=True)
        MetaProperties(cluster, config.node_id, random_uuid().to_base64()).write(directory)
        log.info("Formatted %s for cluster %s, node %s", directory, cluster, config.node_id)
    meta_dir = metadata_log_dir(config)
    # Kafka writes bootstrap.checkpoint at format time and reads it only for an empty metadata log
    if bootstrap and not (meta_dir / "bootstrap.checkpoint").exists() and not _has_metadata(meta_dir):
        write_bootstrap(meta_dir, dict(feature_levels or default_feature_levels()))
    return cluster


def ensure_formatted(config: BrokerConfig) -> None:
    """Format on first start (Odradek's convenience over Kafka's refusal); a broker-only node
    gets no bootstrap.checkpoint (its controllers bootstrap the cluster), as with Kafka."""
    format_storage(config, bootstrap=not is_broker_only(config))


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


def inter_broker_listener(config: BrokerConfig) -> str:
    """The listener brokers reach each other on: inter.broker.listener.name, else the first
    listener that is not a controller listener."""
    controller_names = {str(n).upper() for n in config.get("controller.listener.names") or []}
    return config.get("inter.broker.listener.name") or next(
        (lst.name for lst in config.listeners if lst.name.upper() not in controller_names), "PLAINTEXT")


def open_metadata_store(config: BrokerConfig, now_ms: Callable[[], int] | None = None) -> MetadataStore:
    """The metadata store over `metadata.log.dir`; call `start()` after the log manager has locked the dirs."""
    clock = now_ms or (lambda: time.time_ns() // 1_000_000)
    store = MetadataStore(metadata_log_dir(config), config.node_id, directory_ids(config), clock)
    # the broker registration lists broker listeners only, as Kafka's does
    controller_names = {str(n).upper() for n in config.get("controller.listener.names") or []}
    store.listeners = [(lst.name, lst.advertised_host, lst.port, security_protocol_of(config, lst.name))
                       for lst in config.advertised_listeners if lst.name.upper() not in controller_names]
    store.min_insync_replicas = str(config.raw.get("min.insync.replicas", "1"))
    return store


@dataclass
class StartupPlan:
    """What start-up found in the dirs before changing anything (see `check_startup`)."""

    metadata: ValidatedMetadata
    #: (partition dir, its `-stray` name) for each dir the metadata does not name
    strays: list[tuple[Path, Path]] = field(default_factory=list)


def check_startup(config: BrokerConfig) -> StartupPlan:
    """Read and validate everything start-up needs, changing nothing: every dir's meta.properties,
    the whole metadata log and its newest snapshot, and which partition dirs the metadata names.

    Raises StorageError or UnservableMetadataError (one line saying what and where) for a dir
    Odradek must not start on, so that a refused start leaves every byte as it was.
    """
    check_storage_dirs(config)
    probe = MetadataStore(metadata_log_dir(config), config.node_id, {}, lambda: 0)
    from .kraft.quorum_controller import serves_brokers  # noqa: PLC0415
    # the controller of a cluster keeps other brokers' partitions in its metadata
    probe.serves_brokers = serves_brokers(config)
    checked = probe.precheck()
    partition_dirs = _partition_dirs(config)
    if checked.empty:
        if partition_dirs and not config.get("odradek.startup.adopt.partition.dirs"):
            raise StorageError(
                f"{len(partition_dirs)} partition dirs (e.g. {partition_dirs[0]}) but no metadata log in "
                f"{metadata_log_dir(config) / METADATA_PARTITION_DIR}: without it Odradek cannot tell which topics "
                "they belong to. Point metadata.log.dir at the dir that holds __cluster_metadata-0, or set "
                "odradek.startup.adopt.partition.dirs=true to adopt them as topics. Nothing was changed.")
        return StartupPlan(checked)
    strays = _stray_partition_dirs(partition_dirs, checked.image)
    if strays and len(strays) == len(partition_dirs) and not config.get("odradek.startup.allow.all.stray"):
        raise StorageError(
            f"The metadata log in {metadata_log_dir(config)} names none of the {len(partition_dirs)} partition dirs "
            f"(e.g. {partition_dirs[0]}): the dirs look mixed up (another cluster's metadata log, a wrong "
            "metadata.log.dir or log.dirs). Nothing was changed. Set odradek.startup.allow.all.stray=true to start "
            "anyway and rename all of them to -stray, as Kafka does with partitions it no longer hosts.")
    return StartupPlan(checked, strays)


def is_broker_only(config: BrokerConfig) -> bool:
    """process.roles=broker: a broker of a KRaft cluster whose controllers are other nodes."""
    roles = {str(r).strip().lower() for r in config.get("process.roles") or []}
    return "controller" not in roles


def check_broker_startup(config: BrokerConfig) -> ValidatedMetadata:
    """`check_startup` for process.roles=broker: the dirs' meta.properties, a cluster id to format
    new dirs with, and the local copy of the metadata log read completely (records and feature
    levels this build knows). Stray partitions are found later, against the controller's
    metadata, as Kafka does once the broker has caught up. Changes nothing."""
    check_storage_dirs(config)
    formatted = [d for d in all_storage_dirs(config) if (d / "meta.properties").exists()]
    if not formatted and not config.get("cluster.id"):
        raise StorageError(
            "process.roles=broker on log dirs that are not formatted needs the cluster's id: set cluster.id "
            "(the controllers' meta.properties has it) or format the dirs with `odradek storage format -t "
            "<cluster id>`. Nothing was changed.")
    return validate_metadata_dir(metadata_log_dir(config), supported_feature_ranges())


def check_storage_dirs(config: BrokerConfig) -> None:
    """Refuse dirs of another node or cluster, unreadable meta.properties, and non-empty dirs that
    were never formatted (a wrong path), before anything is written to any of them."""
    clusters: dict[str, Path] = {}
    for directory in all_storage_dirs(config):
        try:
            meta = _read_meta(directory)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            raise StorageError(f"{directory / 'meta.properties'} cannot be read ({e}). Nothing was changed.") from None
        if meta is None:
            if directory.is_dir() and any(p.name != ".lock" for p in directory.iterdir()):
                raise StorageError(
                    f"{directory} is not empty but has no meta.properties: it is not a formatted Kafka log dir "
                    "(a wrong path, or a dir copied without it). Odradek formats only new, empty dirs; format it "
                    "with `odradek storage format` if it is meant to be one. Nothing was changed.")
            continue
        if meta.node_id != config.node_id:
            raise StorageError(f"Stored node id {meta.node_id} in {directory / 'meta.properties'} doesn't match "
                               f"node.id {config.node_id}: the dir belongs to another node. Nothing was changed.")
        clusters.setdefault(meta.cluster_id, directory)
    if len(clusters) > 1:
        named = ", ".join(f"{d} has {c}" for c, d in clusters.items())
        raise StorageError(f"Log dirs belong to different clusters ({named}). Nothing was changed.")


def _partition_dirs(config: BrokerConfig) -> list[Path]:
    """Every `<topic>-<partition>` dir of the log dirs (not deleted, stray or future ones, not the
    metadata log)."""
    found: list[Path] = []
    for log_dir in config.log_dirs:
        if not log_dir.is_dir():
            continue
        for sub in sorted(log_dir.iterdir()):
            name = sub.name
            if not sub.is_dir() or is_delete_dir(name) or is_stray_dir(name) or is_future_dir(name):
                continue
            tp = parse_partition_dir_name(name)
            if tp is not None and tp[0] != METADATA_TOPIC:
                found.append(sub)
    return found


def _stray_partition_dirs(partition_dirs: list[Path], image: MetadataImage) -> list[tuple[Path, Path]]:
    """The partition dirs a complete metadata image does not name (Kafka's findStrayReplicas: the
    topic id is unknown, or the partition does not exist), with the `-stray` names they get."""
    out: list[tuple[Path, Path]] = []
    for sub in partition_dirs:
        tp = parse_partition_dir_name(sub.name)
        assert tp is not None
        topic = image.topic(tp[0])
        known = topic is not None and tp[1] in topic.partitions
        if known and topic is not None and (sub / "partition.metadata").exists():
            try:
                known = PartitionMetadataFile(sub).read() == topic.topic_id.bytes
            except (ValueError, KeyError, OSError):
                pass
        if not known:
            out.append((sub, sub.parent / stray_dir_name(tp[0], tp[1])))
    return out


def mark_stray_partition_dirs(plan: StartupPlan) -> list[Path]:
    """Rename the partition dirs `check_startup` found stray to `<topic>-<p>.<uuid>-stray`, as
    Kafka (3.7+) does: a partition of a deleted (or replaced) topic must not be served, and its
    data stays on disk for the operator. Call with the log dirs locked. Returns the new paths."""
    moved: list[Path] = []
    for sub, target in plan.strays:
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


def security_protocol_of(config: BrokerConfig, listener: str) -> str:
    """The security protocol of a listener name (listener.security.protocol.map, else the name itself)."""
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
