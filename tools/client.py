"""A small synchronous Kafka client on Odradek's own wire layer, for the command-line tools.

It speaks to any Kafka broker (Odradek or Apache Kafka): one blocking socket per broker,
ApiVersions negotiation on connect, then one request at a time. Connections are PLAINTEXT,
SSL, SASL_PLAINTEXT or SASL_SSL as Kafka's client properties say (:mod:`.client_security`):
TLS is set up before ApiVersions, SASL right after it. It knows just enough of the
cluster to route requests: the brokers and partition leaders from Metadata. Nothing here
is used by the broker itself, so it favours plainness over speed.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..wire.errors import ErrorCode
from ..wire.frames import FrameSplitter
from ..wire.protocol import (
    API_NAMES,
    decode_response,
    encode_request,
    request_class,
    response_class,
    supported_versions,
)
from ..wire.records import FileSlice, Record, iter_batches
from .client_security import AuthenticationError, ClientConfigError, ClientSecurity

API_VERSIONS = 18
METADATA = 3
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2

# Highest version the tools ask for, where a later version changes the request's shape in a way
# the tools do not fill in (e.g. topic ids instead of names in Fetch v13+ / Produce v13+).
VERSION_CAPS: dict[int, int] = {
    PRODUCE: 12,
    FETCH: 12,
    METADATA: 12,
    8: 9,  # OffsetCommit v10 names topics by id
    9: 7,  # OffsetFetch v8 batches groups
    10: 3,  # FindCoordinator v4 batches keys
    20: 5,  # DeleteTopics v6 names topics by id
}

# ListOffsets special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

_RECEIVE_SIZE = 256 * 1024
_MAX_RESPONSE = 1 << 30


class KafkaError(Exception):
    """A Kafka error code answered by the broker (or a client-side failure with a code)."""

    def __init__(self, code: int | ErrorCode, message: str | None = None) -> None:
        self.code = ErrorCode(code) if code in ErrorCode._value2member_map_ else code
        name = self.code.name if isinstance(self.code, ErrorCode) else f"error {code}"
        super().__init__(f"{name}: {message}" if message else name)

    @property
    def retriable(self) -> bool:
        return isinstance(self.code, ErrorCode) and self.code.retriable


def check(code: int, message: str | None = None) -> None:
    """Raise :class:`KafkaError` unless `code` is NONE."""
    if code:
        raise KafkaError(code, message)


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` (as --bootstrap-server takes it) -> address list."""
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise ValueError("no bootstrap server given")
    return out


class BrokerConnection:
    """One blocking connection to one broker, with the API versions both sides speak."""

    def __init__(self, host: str, port: int, *, client_id: str = "odradek-tools", timeout: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._splitter = FrameSplitter(_MAX_RESPONSE)
        self._correlation = itertools.count(1)
        self.api_ranges: dict[int, tuple[int, int]] = {}
        try:
            if security is not None and security.uses_ssl:
                self.sock = security.wrap(self.sock, host)
                try:
                    self._negotiate()
                except (ConnectionError, ssl.SSLError) as exc:
                    # TLS 1.3: a broker that refuses the client's certificate (or its lack of one)
                    # says so only after the handshake, by closing the connection.
                    raise AuthenticationError(
                        f"SSL handshake failed with {host}: the broker closed the connection after the TLS "
                        f"handshake ({exc}); does the listener require a client certificate (ssl.keystore.*)?"
                    ) from None
            else:
                self._negotiate()
            if security is not None and security.uses_sasl:
                security.authenticate(self._sasl_roundtrip, self.version_for)
        except BaseException:
            self.close()
            raise

    def _sasl_roundtrip(self, api_key: int, version: int, body: Any) -> Any:
        try:
            return self._roundtrip(api_key, version, body)
        except ConnectionError as exc:
            # Kafka's brokers close the connection after a refused handshake or token; say so
            # instead of reporting an unreachable broker.
            raise AuthenticationError(f"the broker closed the connection during SASL authentication ({exc})",
                                      ErrorCode.SASL_AUTHENTICATION_FAILED) from None

    def _negotiate(self) -> None:
        # Ask with the newest ApiVersions we know; a broker that does not know it answers in v0
        # with its ranges and UNSUPPORTED_VERSION, and the client retries with a version it takes.
        version = supported_versions(API_VERSIONS)[1]
        body = request_class(API_VERSIONS)(client_software_name="odradek-tools", client_software_version="1")
        for _ in range(2):
            response = self._roundtrip(API_VERSIONS, version, body)
            ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION and API_VERSIONS in ranges:
                version = min(version, ranges[API_VERSIONS][1])
                continue
            check(response.error_code, "ApiVersions")
            self.api_ranges = ranges
            return
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "ApiVersions negotiation failed")

    def version_for(self, api_key: int) -> int:
        """The highest version of `api_key` both this client and the broker support."""
        ours_lo, ours_hi = supported_versions(api_key)
        ours_hi = min(ours_hi, VERSION_CAPS.get(api_key, ours_hi))
        if api_key not in self.api_ranges:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"the broker does not serve {API_NAMES[api_key]}")
        lo, hi = self.api_ranges[api_key]
        version = min(hi, ours_hi)
        if version < max(lo, ours_lo):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"no common version of {API_NAMES[api_key]}")
        return version

    def supports(self, api_key: int) -> bool:
        return api_key in self.api_ranges

    def send(self, api_key: int, body: Any, version: int | None = None, *, expect_response: bool = True) -> Any:
        """Send one request (at the negotiated version unless given) and return the decoded response."""
        if version is None:
            version = self.version_for(api_key)
        if not expect_response:
            self._write(api_key, version, body)
            return None
        return self._roundtrip(api_key, version, body)

    def _write(self, api_key: int, version: int, body: Any) -> int:
        correlation_id = next(self._correlation)
        pieces = encode_request(version, correlation_id, body, client_id=self.client_id, api_key=api_key)
        if any(isinstance(p, FileSlice) for p in pieces):
            raise TypeError("requests from the tools never carry file slices")
        self.sock.sendall(b"".join(bytes(p) for p in pieces))
        return correlation_id

    def _roundtrip(self, api_key: int, version: int, body: Any) -> Any:
        correlation_id = self._write(api_key, version, body)
        frame = self._read_frame()
        got, response = decode_response(frame, api_key, version)
        if got != correlation_id:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"correlation id {got}, expected {correlation_id}")
        return response

    def _read_frame(self) -> memoryview:
        while True:
            frame = self._splitter.next_frame()
            if frame is not None:
                return frame
            data = self.sock.recv(_RECEIVE_SIZE)
            if not data:
                raise ConnectionError(f"{self.host}:{self.port} closed the connection")
            self._splitter.feed(data)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


@dataclass
class PartitionInfo:
    """A partition as Metadata describes it."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    error_code: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: Any
    internal: bool
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    error_code: int = 0


@dataclass
class FetchedRecord:
    """One record as a consumer sees it."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str  # "CreateTime" or "LogAppendTime"
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class KafkaClient:
    """A cluster client: bootstrap, metadata, and requests routed to the right broker."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "odradek-tools", timeout: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.timeout = timeout
        self.security = security
        self.brokers: dict[int, tuple[str, int]] = {}
        self._connections: dict[Any, BrokerConnection] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1

    # ------------------------------------------------------------------ connections

    def any_connection(self) -> BrokerConnection:
        """A connection to some broker: an open one, else the first bootstrap server that answers."""
        if self._connections:
            return next(iter(self._connections.values()))
        errors = []
        for address in self.bootstrap:
            try:
                return self._connect(address, address)
            except OSError as exc:
                errors.append(f"{address[0]}:{address[1]}: {exc}")
        raise ConnectionError("no bootstrap server reachable (" + "; ".join(errors) + ")")

    def connection(self, node_id: int) -> BrokerConnection:
        """The connection to broker `node_id` (as named in Metadata)."""
        if node_id in self._connections:
            return self._connections[node_id]
        if node_id not in self.brokers:
            self.metadata([])
        if node_id not in self.brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id} is not in the cluster metadata")
        address = self.brokers[node_id]
        for conn in self._connections.values():
            # A bootstrap connection to the same address serves as this node's connection.
            if (conn.host, conn.port) == address:
                self._connections[node_id] = conn
                return conn
        return self._connect(node_id, address)

    def _connect(self, key: Any, address: tuple[str, int]) -> BrokerConnection:
        conn = BrokerConnection(address[0], address[1], client_id=self.client_id, timeout=self.timeout,
                                security=self.security)
        self._connections[key] = conn
        return conn

    def close(self) -> None:
        for conn in {id(c): c for c in self._connections.values()}.values():
            conn.close()
        self._connections.clear()

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, body: Any, node_id: int | None = None) -> Any:
        conn = self.any_connection() if node_id is None else self.connection(node_id)
        return conn.send(api_key, body)

    # ------------------------------------------------------------------ metadata

    def metadata(self, topics: Iterable[str] | None, *, auto_create: bool = False) -> dict[str, TopicInfo]:
        """Metadata for `topics` (None: every topic); refreshes the broker list."""
        cls = request_class(METADATA)
        names = None if topics is None else [cls.MetadataRequestTopic(name=t) for t in topics]
        response = self.send(METADATA, cls(topics=names, allow_auto_topic_creation=auto_create))
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        out = {}
        for t in response.topics:
            info = TopicInfo(t.name, t.topic_id, bool(t.is_internal), error_code=t.error_code)
            for p in t.partitions:
                info.partitions[p.partition_index] = PartitionInfo(
                    t.name, p.partition_index, p.leader_id, p.leader_epoch,
                    list(p.replica_nodes), list(p.isr_nodes), p.error_code,
                )
            out[t.name] = info
        return out

    def topic(self, name: str, *, auto_create: bool = False, wait_s: float = 10.0) -> TopicInfo:
        """One topic's metadata, retrying while its leaders are being elected (or it is being created)."""
        deadline = time.monotonic() + wait_s
        while True:
            info = self.metadata([name], auto_create=auto_create).get(name)
            code = info.error_code if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ready = info is not None and not code and info.partitions and all(
                p.leader >= 0 for p in info.partitions.values()
            )
            if ready:
                return info
            retriable = code in (ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NONE) or (
                auto_create and code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            if not retriable or time.monotonic() > deadline:
                raise KafkaError(code or ErrorCode.LEADER_NOT_AVAILABLE, f"topic {name}")
            time.sleep(0.1)

    def _by_leader(self, topic: TopicInfo, partitions: Iterable[int]) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for p in partitions:
            if p not in topic.partitions:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic.name}-{p}")
            groups.setdefault(topic.partitions[p].leader, []).append(p)
        return groups

    # ------------------------------------------------------------------ offsets

    def list_offsets(self, topic: TopicInfo, partitions: Iterable[int], timestamp: int,
                     wait_s: float = 15.0) -> dict[int, int]:
        """Offset per partition for a timestamp (or LATEST/EARLIEST/MAX_TIMESTAMP); -1 when none.

        Retriable errors (a new partition's leader still loading it) are retried with fresh
        metadata until `wait_s` has passed.
        """
        deadline = time.monotonic() + wait_s
        partitions = list(partitions)
        while True:
            try:
                return self._list_offsets_once(topic, partitions, timestamp)
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
            topic = self.metadata([topic.name]).get(topic.name, topic)

    def _list_offsets_once(self, topic: TopicInfo, partitions: list[int], timestamp: int) -> dict[int, int]:
        cls = request_class(LIST_OFFSETS)
        out = {}
        for leader, parts in self._by_leader(topic, partitions).items():
            req = cls(
                replica_id=-1,
                isolation_level=0,
                topics=[cls.ListOffsetsTopic(
                    name=topic.name,
                    partitions=[cls.ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in parts],
                )],
            )
            response = self.send(LIST_OFFSETS, req, leader)
            for t in response.topics:
                for p in t.partitions:
                    check(p.error_code, f"ListOffsets {topic.name}-{p.partition_index}")
                    out[p.partition_index] = p.offset
        return out

    # ------------------------------------------------------------------ produce and fetch

    def produce(self, topic: str, partition_batches: dict[int, bytes], *, acks: int = -1, leaders: dict[int, int],
                timeout_ms: int = 30000) -> dict[int, int]:
        """Send one record batch per partition; returns each partition's base offset (-1 for acks=0).

        Partitions answered with a retriable error (a leader that is still loading a new
        partition: NOT_LEADER_OR_FOLLOWER, ...) are sent again after a metadata refresh, as
        Kafka's producer does, until `timeout_ms` has passed.
        """
        deadline = time.monotonic() + timeout_ms / 1000
        out: dict[int, int] = {}
        pending = dict(partition_batches)
        while True:
            failed = self._produce_once(topic, pending, acks, leaders, timeout_ms, out)
            if not failed:
                return out
            if time.monotonic() > deadline:
                raise next(iter(failed.values()))
            time.sleep(0.2)
            info = self.metadata([topic]).get(topic)
            if info is not None:
                leaders = {**leaders, **{p: i.leader for p, i in info.partitions.items()}}
            pending = {p: pending[p] for p in failed}

    def _produce_once(self, topic: str, batches: dict[int, bytes], acks: int, leaders: dict[int, int],
                      timeout_ms: int, out: dict[int, int]) -> dict[int, KafkaError]:
        """One Produce per leader; fills `out`, returns the partitions that failed retriably."""
        cls = request_class(PRODUCE)
        by_leader: dict[int, list[int]] = {}
        for p in batches:
            by_leader.setdefault(leaders[p], []).append(p)
        failed: dict[int, KafkaError] = {}
        for leader, parts in by_leader.items():
            req = cls(
                transactional_id=None,
                acks=acks,
                timeout_ms=timeout_ms,
                topic_data=[cls.TopicProduceData(
                    name=topic,
                    partition_data=[cls.PartitionProduceData(index=p, records=batches[p]) for p in parts],
                )],
            )
            conn = self.connection(leader)
            if acks == 0:
                conn.send(PRODUCE, req, expect_response=False)
                out.update((p, -1) for p in parts)
                continue
            response = conn.send(PRODUCE, req)
            for t in response.responses:
                for p in t.partition_responses:
                    if p.error_code:
                        error = KafkaError(p.error_code, p.error_message or f"Produce {topic}-{p.index}")
                        if not error.retriable:
                            raise error
                        failed[p.index] = error
                    else:
                        out[p.index] = p.base_offset
        return failed

    def fetch(self, topic: TopicInfo, positions: dict[int, int], *, max_wait_ms: int = 500,
              max_bytes: int = 4 * 1024 * 1024, read_committed: bool = False) -> Iterator[FetchedRecord]:
        """One Fetch round per leader from `positions` (partition -> next offset), yielding records.

        `positions` is advanced past what is returned, so calling again continues. Control
        records (transaction markers) are skipped, as consumers do.
        """
        cls = request_class(FETCH)
        for leader, parts in self._by_leader(topic, positions).items():
            req = cls(
                replica_id=-1,
                max_wait_ms=max_wait_ms,
                min_bytes=1,
                max_bytes=max_bytes,
                isolation_level=1 if read_committed else 0,
                session_id=0,
                session_epoch=-1,
                topics=[cls.FetchTopic(
                    topic=topic.name,
                    partitions=[
                        cls.FetchPartition(partition=p, fetch_offset=positions[p], partition_max_bytes=max_bytes)
                        for p in parts
                    ],
                )],
            )
            response = self.send(FETCH, req, leader)
            check(response.error_code, "Fetch")
            for t in response.responses:
                for pdata in t.partitions:
                    if pdata.error_code:
                        error = KafkaError(pdata.error_code, f"Fetch {topic.name}-{pdata.partition_index}")
                        if not error.retriable:
                            raise error
                        # A leader change or a partition still loading: the caller's next
                        # round asks again, as consumers do.
                        time.sleep(0.1)
                        continue
                    yield from _records_of(topic.name, pdata.partition_index, pdata.records, positions)


def _records_of(topic: str, partition: int, records: Any, positions: dict[int, int]) -> Iterator[FetchedRecord]:
    if not records:
        return
    data = bytes(records)
    for batch in iter_batches(data):
        start = positions[partition]
        if batch.is_control:
            positions[partition] = max(start, batch.next_offset)
            continue
        ts_type = batch.timestamp_type.display_name
        for record in batch.records():
            if record.offset < start:
                continue  # a fetch returns the whole batch holding the fetch offset
            positions[partition] = record.offset + 1
            yield _fetched(topic, partition, record, ts_type)
        positions[partition] = max(positions[partition], batch.next_offset)


def _fetched(topic: str, partition: int, record: Record, ts_type: str) -> FetchedRecord:
    return FetchedRecord(
        topic, partition, record.offset, record.timestamp, ts_type,
        None if record.key is None else bytes(record.key),
        None if record.value is None else bytes(record.value),
        list(record.headers),
    )


__all__ = [
    "AuthenticationError",
    "BrokerConnection",
    "ClientConfigError",
    "ClientSecurity",
    "EARLIEST_TIMESTAMP",
    "FetchedRecord",
    "KafkaClient",
    "KafkaError",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "PartitionInfo",
    "TopicInfo",
    "check",
    "parse_bootstrap",
    "response_class",
]
