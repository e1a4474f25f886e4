"""Broker configuration: Kafka's config names, their defaults and `server.properties` parsing.

Odradek reads the same `server.properties` files Kafka does. Keys it does not know are
logged and kept (people paste their Kafka files), never fatal. Topic-level configs and
their broker-level synonyms live in `logstore.config.LogConfig`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


def parse_bool(value: str) -> bool:
    """Kafka's BOOLEAN config type: `true` or `false`, case-insensitive."""
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"expected true or false, got {value!r}")


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def parse_long(value: str) -> int:
    """Kafka's LONG config type."""
    return int(value.strip())


_bool = parse_bool
_long = parse_long


def _str(value: str) -> str:
    return value.strip()


@dataclass(frozen=True)
class ConfigKey:
    """One config key: its Kafka name, parser, default and what it means."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    kafka_type: str = "STRING"


def _keys(*items: ConfigKey) -> dict[str, ConfigKey]:
    return {k.name: k for k in items}


def _k(name: str, parse: Callable[[str], Any], default: Any, doc: str) -> ConfigKey:
    kafka_type = {
        _long: "LONG",
        _bool: "BOOLEAN",
        _list: "LIST",
        _str: "STRING",
    }.get(parse, "STRING")
    return ConfigKey(name, parse, default, doc, kafka_type)


#: Broker configs Odradek understands, with Kafka's defaults (except log.dirs, whose
#: default is an embedded data dir so `odradek serve` works with no arguments).
BROKER_CONFIGS: dict[str, ConfigKey] = _keys(
    _k("node.id", _long, 1, "The node id of this broker."),
    _k("broker.id", _long, None, "Alias of node.id (ZooKeeper-era name)."),
    _k("process.roles", _list, ["broker", "controller"],
       "Roles of this node: broker,controller (the default: one combined node, its own single-voter "
       "quorum) or broker (a broker of a KRaft cluster whose controllers are controller.quorum.voters)."),
    _k("listeners", _list, ["PLAINTEXT://127.0.0.1:9092"], "Listener URIs the broker binds to."),
    _k("advertised.listeners", _list, None, "Listener URIs given to clients in Metadata; defaults to listeners."),
    _k("listener.security.protocol.map", _list, None, "Listener name to security protocol map."),
    _k("controller.listener.names", _list, None,
       "Listener names of the controllers; a combined Odradek node has no separate controller listener."),
    _k("controller.quorum.voters", _list, None,
       "The controller quorum, id@host:port,...: with process.roles=broker, where the metadata log is fetched "
       "from and the broker registers."),
    _k("controller.quorum.bootstrap.servers", _list, None,
       "host:port,... of controllers to find the quorum leader through (instead of controller.quorum.voters)."),
    _k("broker.heartbeat.interval.ms", _long, 2000, "How often a broker of a KRaft cluster heartbeats."),
    _k("replica.selector.class", _str, None,
       "org.apache.kafka.common.replica.RackAwareReplicaSelector sends consumers that name their rack "
       "(client.rack) to an in-sync replica in it (KIP-392); unset: consumers read from the leader."),
    # read by quota/ (QuotaManagers) from the raw properties; declared so they are known keys
    ConfigKey("quota.window.num", _long, 11,
              "How many samples of each client's byte and request rates are kept for client quotas.", "INT"),
    ConfigKey("quota.window.size.seconds", _long, 1, "How long each client-quota sample spans, in seconds.",
              "INT"),
    _k("replica.lag.time.max.ms", _long, 30000,
       "A follower that has not caught up with its leader's log end for this long leaves the ISR."),
    # replication throttles: dynamic broker configs (handlers/dynamic_broker_configs.py) read by
    # cluster/replication_quota.py from the metadata log; the static defaults mean unthrottled
    _k("leader.replication.throttled.rate", _long, 9223372036854775807,
       "Bytes/s a leader sends to the out-of-sync followers of its throttled replicas (a dynamic config)."),
    _k("follower.replication.throttled.rate", _long, 9223372036854775807,
       "Bytes/s a follower fetches for its throttled out-of-sync replicas (a dynamic config)."),
    _k("replica.alter.log.dirs.io.max.bytes.per.second", _long, 9223372036854775807,
       "Bytes/s of moves between log dirs (a dynamic config; accepted, not enforced)."),
    ConfigKey("replication.quota.window.num", _long, 11,
              "How many samples of the replication rates are kept for the replication throttles.", "INT"),
    ConfigKey("replication.quota.window.size.seconds", _long, 1,
              "How long each replication-throttle sample spans, in seconds.", "INT"),
    _k("broker.session.timeout.ms", _long, 9000,
       "On the controller of a cluster: how long a broker may go without heartbeat before it is fenced."),
    _k("broker.rack", _str, None, "The rack this broker registers with."),
    _k("inter.broker.listener.name", _str, None, "Accepted for compatibility."),
    _k("log.dirs", _list, None, "Directories holding the partition logs."),
    _k("log.dir", _list, ["./odradek-data"], "Log directory, used when log.dirs is not set."),
    _k("metadata.log.dir", _str, None, "Directory of the KRaft metadata log; defaults to the first log dir."),
    _k("num.partitions", _long, 1, "Default partition count of auto-created topics."),
    _k("default.replication.factor", _long, 1, "Default replication factor (Odradek has one replica)."),
    _k("auto.create.topics.enable", _bool, True, "Create unknown topics when a client asks for their metadata."),
    _k("delete.topic.enable", _bool, True, "Allow DeleteTopics."),
    _k("log.segment.bytes", _long, 1073741824, "Maximum size of a segment file."),
    _k("log.roll.ms", _long, None, "Time after which a segment is rolled (overrides log.roll.hours)."),
    _k("log.roll.hours", _long, 168, "Time after which a segment is rolled."),
    _k("log.roll.jitter.ms", _long, None, "Maximum random jitter subtracted from the roll time."),
    _k("log.roll.jitter.hours", _long, 0, "Maximum random jitter subtracted from the roll time, in hours."),
    _k("log.index.interval.bytes", _long, 4096, "Bytes between two offset index entries."),
    _k("log.index.size.max.bytes", _long, 10485760, "Size of an active segment's offset index file."),
    _k("log.retention.ms", _long, None, "Retention time (overrides minutes and hours); -1 keeps forever."),
    _k("log.retention.minutes", _long, None, "Retention time in minutes (overrides hours)."),
    _k("log.retention.hours", _long, 168, "Retention time in hours."),
    _k("log.retention.bytes", _long, -1, "Maximum partition size before old segments are deleted; -1 = no limit."),
    _k("log.retention.check.interval.ms", _long, 300000, "How often retention is checked."),
    _k("log.initial.task.delay.ms", _long, 30000, "Delay before the first retention check after start-up."),
    _k("log.cleanup.policy", _list, ["delete"], "delete, compact or both."),
    _k("log.cleaner.enable", _bool, True, "Run the log cleaner for compacted topics."),
    _k("log.cleaner.threads", _long, 1, "Threads cleaning compacted logs (Odradek runs one cleaner)."),
    _k("log.cleaner.backoff.ms", _long, 15000, "Sleep between cleaner runs when no log is dirty enough."),
    _k("log.cleaner.dedupe.buffer.size", _long, 134217728, "Memory for the cleaner's offset map (bounds one round)."),
    _k("log.cleaner.io.buffer.size", _long, 524288, "Cleaner read/write buffer size."),
    _k("log.cleaner.io.buffer.load.factor", _str, "0.9", "Load factor of the cleaner's offset map."),
    _k("log.cleaner.io.max.bytes.per.second", _str, "1.7976931348623157E308", "Cleaner I/O throttle."),
    _k("log.cleaner.delete.retention.ms", _long, 86400000, "Default delete.retention.ms: how long tombstones stay."),
    _k("log.cleaner.min.cleanable.ratio", _str, "0.5", "Default min.cleanable.dirty.ratio."),
    _k("log.cleaner.min.compaction.lag.ms", _long, 0, "Default min.compaction.lag.ms."),
    _k("log.cleaner.max.compaction.lag.ms", _long, LONG_MAX, "Default max.compaction.lag.ms."),
    _k("odradek.log.cleaner.index.per.batch", _str, None,
       "Offset-index layout of cleaned segments: unset follows the cluster's metadata.version "
       "(Kafka 4.x layout, 3.x for 3.x versions); true/false forces one."),
    _k("odradek.log.cleaner.worker.process", _str, "true",
       "true: the log cleaner runs in a worker process (the event loop never waits for the GIL "
       "behind it); false: in a thread of the broker process."),
    _k("log.flush.interval.messages", _long, LONG_MAX, "Messages appended before the log is fsynced."),
    _k("log.flush.interval.ms", _long, None, "Maximum time data stays unflushed; defaults to log.flush.scheduler.interval.ms."),
    _k("log.flush.scheduler.interval.ms", _long, LONG_MAX, "How often logs are checked for a time-based flush."),
    _k("log.flush.offset.checkpoint.interval.ms", _long, 60000, "How often the recovery point checkpoint is written."),
    _k("log.flush.start.offset.checkpoint.interval.ms", _long, 60000, "How often the log start offset checkpoint is written."),
    _k("replica.high.watermark.checkpoint.interval.ms", _long, 5000, "How often high watermarks are checkpointed."),
    _k("log.message.timestamp.type", _str, "CreateTime", "CreateTime or LogAppendTime."),
    _k("log.message.timestamp.before.max.ms", _long, LONG_MAX, "How far in the past a record timestamp may be."),
    _k("log.message.timestamp.after.max.ms", _long, 3600000, "How far in the future a record timestamp may be."),
    _k("log.segment.delete.delay.ms", _long, 60000, "Delay before a deleted segment's files are removed."),
    _k("log.preallocate", _bool, False, "Preallocate segment files."),
    _k("message.max.bytes", _long, 1048588, "Largest record batch the broker accepts."),
    _k("compression.type", _str, "producer", "Final compression of topic data; producer keeps the producer's."),
    _k("socket.request.max.bytes", _long, 104857600, "Largest request frame the broker reads."),
    _k("connections.max.idle.ms", _long, 600000, "Idle connections are closed after this long."),
    _k("connection.failed.authentication.delay.ms", _long, 100,
       "A connection whose authentication failed is closed this long after the error answer."),
    _k("max.connections.per.ip", _long, INT_MAX, "Maximum connections from one address."),
    _k("queued.max.requests", _long, 500,
       "Requests being handled at once across the broker (each connection has at most one; docs/reliability.md)."),
    _k("max.connections", _long, INT_MAX,
       "Connections the broker holds at once; at the limit the acceptor waits for one to close."),
    _k("max.connections.per.ip.overrides", _list, None, "Per-address limits, host:count,host:count."),
    # security (docs/security.md); every ssl.* and sasl.* key may also be given per listener as
    # listener.name.<listener lower case>.<key> (mechanism-specific SASL keys with the mechanism too)
    _k("ssl.keystore.type", _str, "JKS", "Key store format: PEM or PKCS12 (JKS is not readable here)."),
    _k("ssl.keystore.location", _str, None, "Key store file (PEM: certificate chain and private key)."),
    _k("ssl.keystore.password", _str, None, "Key store password (PKCS12)."),
    _k("ssl.key.password", _str, None, "Password of the private key."),
    _k("ssl.keystore.certificate.chain", _str, None, "PEM certificate chain given inline (ssl.keystore.type=PEM)."),
    _k("ssl.keystore.key", _str, None, "PEM private key given inline (ssl.keystore.type=PEM)."),
    _k("ssl.truststore.type", _str, "JKS", "Trust store format: PEM or PKCS12."),
    _k("ssl.truststore.location", _str, None, "Trust store file (CA certificates for client authentication)."),
    _k("ssl.truststore.password", _str, None, "Trust store password (PKCS12)."),
    _k("ssl.truststore.certificates", _str, None, "PEM CA certificates given inline."),
    _k("ssl.client.auth", _str, "none", "none, requested or required: whether clients present certificates."),
    _k("ssl.enabled.protocols", _list, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted."),
    _k("ssl.cipher.suites", _list, None, "Cipher suites (OpenSSL names); default: OpenSSL's."),
    _k("sasl.enabled.mechanisms", _list, ["GSSAPI"], "SASL mechanisms offered (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."),
    _k("sasl.jaas.config", _str, None, "JAAS login config; PLAIN users as user_<name>=\"<password>\"."),
    _k("sasl.mechanism.inter.broker.protocol", _str, "GSSAPI", "Accepted for compatibility (single node)."),
    _k("security.inter.broker.protocol", _str, "PLAINTEXT", "Accepted for compatibility (single node)."),
    _k("odradek.sasl.scram.credentials", _str, None,
       "Extra SCRAM users, kafka-storage --add-scram syntax: SCRAM-SHA-256=[name=alice,password=secret];... "
       "Read at each start, never written to the metadata log; the metadata log's credentials (storage "
       "format --add-scram, AlterUserScramCredentials) win for the same user and mechanism."),
    _k("authorizer.class.name", _str, "", "org.apache.kafka.metadata.authorizer.StandardAuthorizer enables ACLs."),
    _k("super.users", _str, "", "Principals allowed everything, separated by ';' (User:admin;User:ops)."),
    _k("allow.everyone.if.no.acl.found", _bool, False, "Allow access to resources that have no ACL at all."),
    # delegation tokens (docs/security.md): disabled unless the secret is set
    _k("delegation.token.secret.key", _str, None,
       "Secret of the delegation tokens' HMACs (HMAC-SHA512); without it tokens are disabled."),
    _k("delegation.token.max.lifetime.ms", _long, 604800000, "Longest lifetime of a delegation token."),
    _k("delegation.token.expiry.time.ms", _long, 86400000, "How long a token lives before it must be renewed."),
    _k("delegation.token.expiry.check.interval.ms", _long, 3600000, "How often expired tokens are removed."),
    _k("telemetry.max.bytes", _long, 1048576, "Largest metrics payload a client may push (KIP-714 PushTelemetry)."),
    _k("offsets.topic.num.partitions", _long, 50, "Partitions of __consumer_offsets."),
    _k("offsets.topic.replication.factor", _long, 1, "Accepted for compatibility."),
    _k("offsets.topic.segment.bytes", _long, 104857600, "segment.bytes of __consumer_offsets."),
    _k("offsets.retention.minutes", _long, 10080, "How long committed offsets of empty groups are kept."),
    _k("group.initial.rebalance.delay.ms", _long, 3000, "Delay of the first rebalance of a new group."),
    _k("group.min.session.timeout.ms", _long, 6000, "Smallest session timeout a member may ask for."),
    _k("group.max.session.timeout.ms", _long, 1800000, "Largest session timeout a member may ask for."),
    _k("offsets.retention.check.interval.ms", _long, 600000, "How often expired committed offsets are removed."),
    _k("offset.metadata.max.bytes", _long, 4096, "Largest metadata string of a committed offset."),
    _k("group.max.size", _long, 2**31 - 1, "Largest number of members of a classic group."),
    _k("group.consumer.session.timeout.ms", _long, 45000, "Session timeout of consumer-protocol (KIP-848) members."),
    _k("group.consumer.heartbeat.interval.ms", _long, 5000, "Heartbeat interval of consumer-protocol members."),
    _k("group.consumer.max.size", _long, 2**31 - 1, "Largest number of members of a consumer-protocol group."),
    _k("group.consumer.assignment.interval.ms", _long, 1000,
       "Least time between two target assignments of a consumer-protocol group (Kafka 4.4)."),
    _k("group.consumer.migration.policy", _str, "bidirectional",
       "Online migration of consumer groups between the classic and consumer protocols: bidirectional, "
       "upgrade, downgrade or disabled (group_coordinator/migration.py)."),
    _k("group.coordinator.record.format", _str, "4.4",
       "Odradek: which Kafka's __consumer_offsets record layout to write (4.4, 4.1 or 3.9)."),
    _k("transaction.state.log.num.partitions", _long, 50, "Partitions of __transaction_state."),
    _k("transaction.state.log.replication.factor", _long, 1, "Accepted for compatibility."),
    _k("transaction.state.log.min.isr", _long, 1, "Accepted for compatibility."),
    _k("transaction.state.log.segment.bytes", _long, 104857600, "segment.bytes of __transaction_state."),
    _k("transaction.max.timeout.ms", _long, 900000, "Largest transaction timeout a producer may ask for."),
    _k("cluster.id", _str, None, "Cluster id used when the storage is formatted on first start."),
    _k("odradek.startup.adopt.partition.dirs", _bool, False,
       "Start on log dirs that hold partition dirs but no metadata log (Odradek before the metadata log "
       "existed, or a dir assembled by hand): adopt them as topics. Without it such a start is refused."),
    _k("odradek.startup.allow.all.stray", _bool, False,
       "Start even when the metadata log names none of the partition dirs, renaming every one of them "
       "to -stray. Without it such a start is refused: it usually means a wrong or mixed-up dir."),
    _k("odradek.record.validation", _str, "crc",
       "crc: check each produced batch's CRC-32C and header and pass it through undecoded (fast); "
       "full: also decode every record as Kafka's LogValidator does. Compacted topics are always decoded."),
    _k("odradek.faults.file", _str, None,
       "Tests only: a JSON file of injected faults (network partition from other brokers, slow disk) that "
       "the broker follows; odradek.testing writes it (see faults.py, docs/testing-fixture.md)."),
)

class ConfigError(ValueError):
    """A config value that cannot be parsed or makes no sense."""


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text (`key=value`, `key: value`, `#`/`!` comments, `\\` continuations)."""
    result: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        # An odd number of trailing backslashes continues the line.
        stripped = line.rstrip("\r")
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            pending += stripped[:-1]
            continue
        logical.append(pending + stripped)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key_chars: list[str] = []
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == "\\" and i + 1 < len(line):
                key_chars.append(line[i + 1])
                i += 2
                continue
            if ch in "=: \t":
                break
            key_chars.append(ch)
            i += 1
        rest = line[i:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        result["".join(key_chars)] = rest.replace("\\\\", "\x00").replace("\\", "").replace("\x00", "\\")
    return result


class BrokerConfig:
    """The broker's effective configuration: parsed values for known keys, raw text for the rest."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.raw: dict[str, str] = dict(props or {})
        self.values: dict[str, Any] = {}
        self.unknown: list[str] = []
        for key, text in self.raw.items():
            spec = BROKER_CONFIGS.get(key)
            if spec is None:
                # per-listener security keys (listener.name.<l>.ssl.*, ...) are read by odradek.security
                if not key.startswith("listener.name."):
                    self.unknown.append(key)
                continue
            try:
                self.values[key] = spec.parse(text)
            except ValueError as exc:
                raise ConfigError(f"Invalid value {text!r} for configuration {key}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """Read a properties file (optional) and apply `key=value` overrides, like kafka-server-start."""
        props: dict[str, str] = {}
        if path is not None:
            props.update(parse_properties(Path(path).read_text(encoding="utf-8")))
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"override {item!r} is not key=value")
            key, value = item.split("=", 1)
            props[key.strip()] = value.strip()
        config = cls(props)
        for key in config.unknown:
            log.warning("Unknown configuration %s=%s is ignored", key, config.raw[key])
        return config

    def get(self, key: str) -> Any:
        """The value of a known key: the configured one, else Kafka's default."""
        if key in self.values:
            return self.values[key]
        return BROKER_CONFIGS[key].default

    def is_set(self, key: str) -> bool:
        return key in self.values

    # Derived values, resolved the way Kafka's KafkaConfig resolves them.

    @property
    def node_id(self) -> int:
        if self.is_set("node.id"):
            return int(self.get("node.id"))
        broker_id = self.get("broker.id")
        return int(broker_id) if broker_id is not None else 1

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs") or self.get("log.dir")
        return [Path(d) for d in dirs]

    @property
    def listeners(self) -> list[Listener]:
        return [Listener.parse(u) for u in self.get("listeners")]

    @property
    def advertised_listeners(self) -> list[Listener]:
        adv = self.get("advertised.listeners")
        return [Listener.parse(u) for u in adv] if adv else self.listeners

    @property
    def log_roll_ms(self) -> int:
        if self.get("log.roll.ms") is not None:
            return int(self.get("log.roll.ms"))
        return int(self.get("log.roll.hours")) * 3600 * 1000

    @property
    def log_roll_jitter_ms(self) -> int:
        if self.get("log.roll.jitter.ms") is not None:
            return int(self.get("log.roll.jitter.ms"))
        return int(self.get("log.roll.jitter.hours")) * 3600 * 1000

    @property
    def log_retention_ms(self) -> int:
        if self.get("log.retention.ms") is not None:
            return int(self.get("log.retention.ms"))
        if self.get("log.retention.minutes") is not None:
            return int(self.get("log.retention.minutes")) * 60 * 1000
        return int(self.get("log.retention.hours")) * 3600 * 1000

    @property
    def log_flush_interval_ms(self) -> int:
        value = self.get("log.flush.interval.ms")
        return int(value if value is not None else self.get("log.flush.scheduler.interval.ms"))


def format_config_value(value: Any) -> str:
    """Render a config value the way Kafka shows it in DescribeConfigs."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Listener:
    """A listener URI such as `PLAINTEXT://127.0.0.1:9092`."""

    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, uri: str) -> Listener:
        if "://" not in uri:
            raise ConfigError(f"listener {uri!r} is not NAME://host:port")
        name, rest = uri.split("://", 1)
        host, _, port = rest.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            port_number = int(port)
        except ValueError:
            raise ConfigError(f"listener {uri!r} has no valid port") from None
        return cls(name.upper(), host, port_number)

    @property
    def bind_host(self) -> str:
        return self.host or "0.0.0.0"

    @property
    def advertised_host(self) -> str:
        return self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
