"""ACLs: a StandardAuthorizer-like store and checks, persisted as metadata records (docs/security.md).

Enabled by ``authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (any
non-empty value naming an authorizer). ACL bindings are written to the KRaft metadata log as
AccessControlEntryRecord / RemoveAccessControlEntryRecord, as Kafka's controller does, and read
back from it at start.

Decision rules (Kafka's): ``super.users`` may do everything; a matching DENY wins over any ALLOW;
an ALLOW for the operation, for ALL, or for an operation that implies it (READ, WRITE, DELETE and
ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows; a resource with no ACL at all
is allowed only with ``allow.everyone.if.no.acl.found=true``. Bindings match by resource type, by
name (LITERAL equal or ``*``, PREFIXED prefix), by principal (or ``User:*``) and host (or ``*``).

:func:`enforce` is the dispatch hook: it checks a request before its handler, removes the topics
the principal may not use and adds Kafka's per-topic / per-group errors to the answer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class

log = logging.getLogger(__name__)

# Kafka's codes (org.apache.kafka.common.resource / acl)
RT_ANY, RT_TOPIC, RT_GROUP, RT_CLUSTER, RT_TRANSACTIONAL_ID, RT_DELEGATION_TOKEN, RT_USER = 1, 2, 3, 4, 5, 6, 7
PT_ANY, PT_MATCH, PT_LITERAL, PT_PREFIXED = 1, 2, 3, 4
OP_ANY, OP_ALL, OP_READ, OP_WRITE, OP_CREATE, OP_DELETE, OP_ALTER, OP_DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
OP_CLUSTER_ACTION, OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS, OP_IDEMPOTENT_WRITE = 9, 10, 11, 12
PERM_ANY, PERM_DENY, PERM_ALLOW = 1, 2, 3
CLUSTER_NAME = "kafka-cluster"
_IMPLIES = {OP_DESCRIBE: {OP_READ, OP_WRITE, OP_DELETE, OP_ALTER}, OP_DESCRIBE_CONFIGS: {OP_ALTER_CONFIGS}}
_VALID_RESOURCE_TYPES = {RT_TOPIC, RT_GROUP, RT_CLUSTER, RT_TRANSACTIONAL_ID, RT_DELEGATION_TOKEN, RT_USER}


@dataclass(frozen=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def matches_resource(self, resource_type: int, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PT_LITERAL:
            return self.resource_name in (name, "*")
        return self.pattern_type == PT_PREFIXED and name.startswith(self.resource_name)


def binding_of(m: Any) -> AclBinding:
    """The binding of an AccessControlEntryRecord."""
    return AclBinding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                      m.permission_type)


@dataclass(frozen=True)
class AclFilter:
    """A DescribeAcls / DeleteAcls filter (ANY / None match everything)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != RT_ANY and b.resource_type != self.resource_type:
            return False
        if self.pattern_type == PT_MATCH:
            # the bindings that would apply to this exact name
            if self.resource_name is not None and not b.matches_resource(b.resource_type, self.resource_name):
                return False
        else:
            if self.pattern_type != PT_ANY and b.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and b.resource_name != self.resource_name:
                return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation != OP_ANY and b.operation != self.operation:
            return False
        return self.permission_type == PERM_ANY or b.permission_type == self.permission_type


def validate_binding(b: AclBinding) -> str | None:
    """Why a binding cannot be created (Kafka answers INVALID_REQUEST), or None."""
    if b.resource_type not in _VALID_RESOURCE_TYPES:
        return "Invalid resource type"
    if b.pattern_type not in (PT_LITERAL, PT_PREFIXED):
        return "Invalid pattern type"
    if b.operation < OP_ALL or b.operation > 14:
        return "Invalid operation"
    if b.permission_type not in (PERM_ALLOW, PERM_DENY):
        return "Invalid permission type"
    if b.resource_type == RT_CLUSTER and b.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if ":" not in b.principal:
        return f"Could not parse principal from `{b.principal}` (no colon is present separating the principal type from the principal name)"
    if not b.resource_name:
        return "Resource name must not be empty"
    return None


class Authorizer:
    """ACL bindings of the broker (with their metadata-record ids) and the authorization decision."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.super_users = {p.strip() for p in (broker.config.get("super.users") or "").split(";") if p.strip()}
        self.allow_if_no_acl = bool(broker.config.get("allow.everyone.if.no.acl.found"))
        self.bindings: dict[AclBinding, bytes] = {}
        self._load()

    # -- persistence --------------------------------------------------------------------------
    def _store(self) -> Any:
        return getattr(self.broker, "metadata_store", None)

    def _load(self) -> None:
        store = self._store()
        image_acls = getattr(getattr(store, "image", None), "acls", None)
        if image_acls is not None and getattr(store, "log", None) is not None:
            # the replayed metadata image (snapshot + log, metadata transactions applied or dropped)
            self.bindings = {binding_of(m): acl_id for acl_id, m in image_acls.items()}
            if self.bindings:
                log.info("Loaded %d ACL bindings from the metadata image", len(self.bindings))
            return
        log_ = getattr(store, "log", None)
        if log_ is None:
            return
        by_id: dict[bytes, AclBinding] = {}
        for rec in log_.replay_records():
            if rec.name == "AccessControlEntryRecord" and rec.message is not None:
                m = rec.message
                by_id[bytes(m.id.bytes if hasattr(m.id, "bytes") else m.id)] = AclBinding(
                    m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                    m.permission_type)
            elif rec.name == "RemoveAccessControlEntryRecord" and rec.message is not None:
                by_id.pop(bytes(rec.message.id.bytes if hasattr(rec.message.id, "bytes") else rec.message.id), None)
        self.bindings = {b: i for i, b in by_id.items()}
        if self.bindings:
            log.info("Loaded %d ACL bindings from the metadata log", len(self.bindings))

    def _append(self, records: list[tuple[str, Any]]) -> None:
        store = self._store()
        if store is not None and getattr(store, "log", None) is not None and records:
            # the controller's write path (kraft.store): the records land in __cluster_metadata-0
            store._append(records)

    def create(self, bindings: list[AclBinding]) -> None:
        from ..kraft.records import new_record  # noqa: PLC0415 - metadata records only when ACLs change
        from ..wire.primitives import Uuid  # noqa: PLC0415

        records = []
        for b in bindings:
            if b in self.bindings:
                continue
            acl_id = uuid.uuid4().bytes
            self.bindings[b] = acl_id
            records.append(("AccessControlEntryRecord", new_record(
                "AccessControlEntryRecord", id=Uuid(acl_id), resource_type=b.resource_type,
                resource_name=b.resource_name, pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                operation=b.operation, permission_type=b.permission_type)))
        self._append(records)

    def delete(self, flt: AclFilter) -> list[AclBinding]:
        from ..kraft.records import new_record  # noqa: PLC0415
        from ..wire.primitives import Uuid  # noqa: PLC0415

        gone = [b for b in self.bindings if flt.matches(b)]
        records = [("RemoveAccessControlEntryRecord",
                    new_record("RemoveAccessControlEntryRecord", id=Uuid(self.bindings.pop(b)))) for b in gone]
        self._append(records)
        return gone

    def describe(self, flt: AclFilter) -> list[AclBinding]:
        return [b for b in self.bindings if flt.matches(b)]

    # -- decisions ----------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        matching = [b for b in self.bindings if b.matches_resource(resource_type, name)]
        if not matching:
            return self.allow_if_no_acl
        applicable = [b for b in matching if b.principal in (principal, "User:*") and b.host in (host, "*")]
        if any(b.permission_type == PERM_DENY and b.operation in (operation, OP_ALL) for b in applicable):
            return False
        allowed_ops = {operation, OP_ALL} | _IMPLIES.get(operation, set())
        return any(b.permission_type == PERM_ALLOW and b.operation in allowed_ops for b in applicable)

    def authorize_by_resource_type(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Whether `principal` may do `operation` on some resource of the type (Kafka's
        Authorizer.authorizeByResourceType): allowed for whoever may use an arbitrary name of the type
        (super users; no ACL at all with allow.everyone.if.no.acl.found), then if an ALLOW binding
        (the operation itself or ALL, no implied operations) exists that no DENY dominates: a
        wildcard LITERAL DENY denies everything, a wildcard LITERAL ALLOW allows, a LITERAL ALLOW
        is dominated by a LITERAL DENY of the same name or a PREFIXED DENY of one of its prefixes."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[int, str]] = []
        wildcard_allow = False
        for b in self.bindings:
            if b.resource_type != resource_type or b.host not in (host, "*"):
                continue
            if b.principal not in (principal, "User:*") or b.operation not in (operation, OP_ALL):
                continue
            if b.permission_type == PERM_DENY:
                if b.pattern_type == PT_LITERAL and b.resource_name == "*":
                    return False
                (deny_literal if b.pattern_type == PT_LITERAL else deny_prefixed).add(b.resource_name)
            elif b.permission_type == PERM_ALLOW:
                if b.pattern_type == PT_LITERAL and b.resource_name == "*":
                    wildcard_allow = True
                else:
                    allow.append((b.pattern_type, b.resource_name))
        if wildcard_allow:
            return True
        for pattern_type, name in allow:
            if pattern_type == PT_LITERAL and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str,
                              operations: tuple[int, ...]) -> int:
        """The bit set (1 << operation) of the `operations` allowed on a resource (DescribeGroups'
        authorized_operations)."""
        return sum(1 << op for op in operations if self.authorize(principal, host, op, resource_type, name))


def authorizer_for(broker: Any) -> Authorizer | None:
    """The broker's authorizer when ``authorizer.class.name`` is set (created on first use)."""
    if not (broker.config.get("authorizer.class.name") or "").strip():
        return None
    auth = getattr(broker, "authorizer", None)
    if auth is None:
        auth = broker.authorizer = Authorizer(broker)
    return auth


# ------------------------------------------------------------------------------------------------
# enforcement in dispatch
# ------------------------------------------------------------------------------------------------

# APIs every authenticated principal may call: ApiVersions, SASL, DescribeCluster and telemetry (not
# checked by Kafka either)
_FREE = {18, 17, 36, 60, 71, 72}
# APIs whose handlers check each resource themselves with :func:`permits` (per-group, per-topic,
# per-transactional-id errors in the middle of their answers): FindCoordinator, OffsetFetch,
# DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, ConsumerGroupDescribe, the config APIs,
# AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeProducers,
# DescribeTransactions, ListTransactions, the delegation token APIs (CREATE_TOKENS / DESCRIBE_TOKENS
# on the user, owner and renewer checks)
_IN_HANDLER = {10, 9, 15, 16, 42, 47, 69, 32, 33, 44, 24, 25, 26, 28, 61, 65, 66, 38, 39, 40, 41}
# APIs guarded here with Kafka's resource-level errors
_GROUP_READ = {11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup", 68: "ConsumerGroupHeartbeat"}

Post = Callable[[Any], Any]


class Denied(Exception):
    """The request must be answered with `body` without running its handler."""

    def __init__(self, body: Any) -> None:
        super().__init__("denied")
        self.body = body


def _topic_name(broker: Any, t: Any) -> str | None:
    name = getattr(t, "name", None) or getattr(t, "topic", None)
    if name:
        return name
    topic_id = getattr(t, "topic_id", None)
    topic = broker.metadata.by_id(topic_id) if topic_id is not None and broker.metadata is not None else None
    return topic.name if topic is not None else None


def enforce(ctx: Any, header: Any, body: Any) -> Post | None:
    """Check one request; may filter `body` in place. Returns a post-processor of the response body
    (adds the refused topics back with their error) or None; raises :class:`Denied` to refuse it all."""
    auth = authorizer_for(ctx.broker)
    if auth is None:
        return None
    principal = ctx.principal
    host = ctx.session.peer_ip if ctx.session is not None else "*"
    key = header.api_key

    def allowed(op: int, rtype: int, name: str) -> bool:
        return auth.authorize(principal, host, op, rtype, name)

    cls = response_class(key)
    if key in _FREE or key in _IN_HANDLER:
        return None
    if key == 22:  # InitProducerId
        tid = getattr(body, "transactional_id", None)
        if tid is not None:  # WRITE on the transactional id
            if not allowed(OP_WRITE, RT_TRANSACTIONAL_ID, tid):
                raise Denied(cls(error_code=int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), producer_id=-1,
                                 producer_epoch=-1))
        elif not allowed(OP_IDEMPOTENT_WRITE, RT_CLUSTER, CLUSTER_NAME) and \
                not auth.authorize_by_resource_type(principal, host, OP_WRITE, RT_TOPIC):
            # an idempotent producer: IDEMPOTENT_WRITE on the cluster or WRITE on any topic
            raise Denied(cls(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), producer_id=-1,
                             producer_epoch=-1))
        return None
    if key == 0:
        # transactional records need WRITE on the transactional id, or the whole request is refused
        if _has_transactional_records(body):
            tid = body.transactional_id
            if tid is None or not allowed(OP_WRITE, RT_TRANSACTIONAL_ID, tid):
                if body.acks == 0:  # no response is due: Kafka closes the connection instead
                    from ..wire.errors import ProtocolError  # noqa: PLC0415

                    raise ProtocolError(f"{principal} may not write transactional id {tid}")
                raise Denied(_produce_error(cls, body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        return _filter_topics(ctx, body, "topic_data", "partition_data", OP_WRITE, allowed, _produce_denied(cls))
    if key == 1:
        return _filter_topics(ctx, body, "topics", "partitions", OP_READ, allowed, _fetch_denied(cls))
    if key == 2:
        return _filter_topics(ctx, body, "topics", "partitions", OP_DESCRIBE, allowed, _list_offsets_denied(cls))
    if key == 3:
        return _metadata(ctx, body, allowed, cls)
    if key == 23:  # OffsetForLeaderEpoch: CLUSTER_ACTION on the cluster (replicas), else DESCRIBE per topic
        if allowed(OP_CLUSTER_ACTION, RT_CLUSTER, CLUSTER_NAME):
            return None
        return _filter_topics(ctx, body, "topics", "partitions", OP_DESCRIBE, allowed, _epoch_denied(cls))
    if key == 75:
        return _describe_topic_partitions(body, allowed, cls)
    if key in _GROUP_READ:
        if not allowed(OP_READ, RT_GROUP, body.group_id):
            raise Denied(_error_body(cls, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        return None
    if key == 8:  # OffsetCommit: READ on the group, READ on each topic
        if not allowed(OP_READ, RT_GROUP, body.group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            raise Denied(cls(topics=[cls.OffsetCommitResponseTopic(name=t.name, partitions=[
                cls.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=int(code))
                for p in t.partitions]) for t in body.topics]))
        return None
    if key == 19:  # CreateTopics: CREATE on the cluster or the topic
        if allowed(OP_CREATE, RT_CLUSTER, CLUSTER_NAME):
            return None
        refused = [t.name for t in body.topics if not allowed(OP_CREATE, RT_TOPIC, t.name)]
        body.topics = [t for t in body.topics if t.name not in refused]
        return _append_results(cls, "topics", "CreatableTopicResult", refused)
    if key == 20:  # DeleteTopics: DELETE on the topic
        names = list(getattr(body, "topic_names", None) or [t.name for t in getattr(body, "topics", [])])
        refused = [n for n in names if not allowed(OP_DELETE, RT_TOPIC, n)]
        if hasattr(body, "topic_names") and body.topic_names:
            body.topic_names = [n for n in body.topic_names if n not in refused]
        if getattr(body, "topics", None):
            body.topics = [t for t in body.topics if t.name not in refused]
        return _append_results(cls, "responses", "DeletableTopicResult", refused)
    if key == 29:
        if not allowed(OP_DESCRIBE, RT_CLUSTER, CLUSTER_NAME):
            raise Denied(cls(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                             error_message="Cluster authorization failed.", resources=[]))
        return None
    if key in (30, 31):
        if not allowed(OP_ALTER, RT_CLUSTER, CLUSTER_NAME):
            code = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            if key == 30:
                raise Denied(cls(results=[cls.AclCreationResult(error_code=code,
                                                                 error_message="Cluster authorization failed.")
                                          for _ in body.creations]))
            raise Denied(cls(filter_results=[cls.DeleteAclsFilterResult(
                error_code=code, error_message="Cluster authorization failed.") for _ in body.filters]))
        return None
    if key == 48:  # DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster; Kafka drops the message
        if not allowed(OP_DESCRIBE_CONFIGS, RT_CLUSTER, CLUSTER_NAME):
            raise Denied(cls(throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                             error_message=None, entries=None))
        return None
    if key == 49:  # AlterClientQuotas: ALTER_CONFIGS on the cluster (ControllerApis); Errors' own message
        if not allowed(OP_ALTER_CONFIGS, RT_CLUSTER, CLUSTER_NAME):
            raise Denied(cls(throttle_time_ms=0, entries=[cls.EntryData(
                error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), error_message="Cluster authorization failed.",
                entity=[cls.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
                for entry in body.entries]))
        return None
    if key == 50:  # DescribeUserScramCredentials: DESCRIBE on the cluster (KafkaApis)
        if not allowed(OP_DESCRIBE, RT_CLUSTER, CLUSTER_NAME):
            code = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            # Kafka's error response: one result (no user name) per requested user
            raise Denied(cls(error_code=code, error_message=None, results=[
                cls.DescribeUserScramCredentialsResult(error_code=code, error_message=None)
                for _ in body.users or []]))
        return None
    if key == 51:  # AlterUserScramCredentials: ALTER on the cluster (ControllerApis)
        if not allowed(OP_ALTER, RT_CLUSTER, CLUSTER_NAME):
            users = sorted({u.name for u in body.deletions} | {u.name for u in body.upsertions})
            raise Denied(cls(results=[cls.AlterUserScramCredentialsResult(
                user=name, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                error_message=f"Request AlterUserScramCredentials from {principal} is not authorized.")
                for name in users]))
        return None
    if key in _CLUSTER_ADMIN:
        op = _CLUSTER_ADMIN[key]
        if not allowed(op, RT_CLUSTER, CLUSTER_NAME):
            raise Denied(_cluster_admin_denied(key, cls, body, header.api_name or "", _OP_NAMES[op]))
        return None
    # everything else: describing APIs need DESCRIBE on the cluster, the others ALTER
    api = header.api_name or ""
    op = OP_DESCRIBE if api.startswith(("Describe", "List", "Get")) or key == 32 else OP_ALTER
    if allowed(op, RT_CLUSTER, CLUSTER_NAME):
        return None
    body_out = _error_body(cls, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if body_out is None:
        log.info("Closing connection from %s: %s may not call %s", ctx.peer, principal, api)
        from ..wire.errors import ProtocolError  # noqa: PLC0415

        raise ProtocolError(f"{principal} is not authorized for {api}")
    raise Denied(body_out)


def permits(ctx: Any) -> Callable[[int, int, str], bool]:
    """``allowed(operation, resource type, name)`` for the principal of a request: the check the
    handlers of :data:`_IN_HANDLER` make per resource (always True when ACLs are off)."""
    auth = authorizer_for(ctx.broker)
    if auth is None:
        return _allow_all
    principal = ctx.principal
    host = ctx.session.peer_ip if ctx.session is not None else "*"
    return lambda op, rtype, name: auth.authorize(principal, host, op, rtype, name)


def _allow_all(op: int, rtype: int, name: str) -> bool:
    return True


def authorized_operations(ctx: Any, resource_type: int, name: str, operations: tuple[int, ...]) -> int | None:
    """The bits of the `operations` the request's principal may do on a resource (None: ACLs off)."""
    auth = authorizer_for(ctx.broker)
    if auth is None:
        return None
    host = ctx.session.peer_ip if ctx.session is not None else "*"
    return auth.authorized_operations(ctx.principal, host, resource_type, name, operations)


def _has_transactional_records(body: Any) -> bool:
    """Whether a Produce request holds a transactional batch (attributes bit 4 of a v2 batch header)."""
    for t in body.topic_data or []:
        for p in t.partition_data or []:
            records = p.records
            if records is not None and len(records) >= 23 and records[16] >= 2 and records[22] & 0x10:
                return True
    return False


def _produce_error(cls: Any, body: Any, code: ErrorCode) -> Any:
    """Kafka's Produce error response: every partition of the request with `code`."""
    return cls(throttle_time_ms=0, responses=[
        cls.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
            cls.PartitionProduceResponse(index=p.index, error_code=int(code), base_offset=-1,
                                         log_append_time_ms=-1, log_start_offset=-1)
            for p in t.partition_data])
        for t in body.topic_data])


# Controller and replica admin APIs (issue #23): the cluster operation each needs, and the error
# answer Kafka builds for a refusal (each request's getErrorResponse)
_CLUSTER_ADMIN = {43: OP_ALTER, 45: OP_ALTER, 46: OP_DESCRIBE, 55: OP_DESCRIBE, 64: OP_ALTER, 80: OP_ALTER,
                  81: OP_ALTER, 34: OP_ALTER, 74: OP_DESCRIBE_CONFIGS}
_OP_NAMES = {OP_ALTER: "ALTER", OP_DESCRIBE: "DESCRIBE", OP_DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS"}
_CLUSTER_DENIED = "Cluster authorization failed."


def _cluster_admin_denied(key: int, cls: Any, body: Any, api: str, op: str) -> Any:
    code = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    # AuthHelper.authorizeClusterOperation's message names the request (its connection details
    # are Kafka's own) and the operation
    message = f"Request {api} needs {op} permission."
    if key == 43:  # ElectLeaders
        return cls(error_code=code, replica_election_results=[cls.ReplicaElectionResult(topic=t.topic, partition_result=[
            cls.PartitionResult(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
            for t in body.topic_partitions or []])
    if key == 45:  # AlterPartitionReassignments
        return cls(error_code=code, error_message=message, responses=[cls.ReassignableTopicResponse(
            name=t.name, partitions=[cls.ReassignablePartitionResponse(partition_index=p.partition_index,
                                                                        error_code=code, error_message=message)
                                     for p in t.partitions]) for t in body.topics])
    if key == 46:  # ListPartitionReassignments
        return cls(error_code=code, error_message=message, topics=[cls.OngoingTopicReassignment(
            name=t.name, partitions=[cls.OngoingPartitionReassignment(partition_index=i) for i in t.partition_indexes])
            for t in body.topics or []])
    if key == 34:  # AlterReplicaLogDirs: every partition, no message
        return cls(results=[cls.AlterReplicaLogDirTopicResult(topic_name=t.name, partitions=[
            cls.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code) for p in t.partitions])
            for d in body.dirs for t in d.topics])
    if key == 64:  # UnregisterBroker: the exception's own message
        return cls(error_code=code, error_message=message)
    if key == 74:  # ListConfigResources
        return cls(error_code=code)
    # DescribeQuorum, AddRaftVoter, RemoveRaftVoter: the error's default message
    return cls(error_code=code, error_message=_CLUSTER_DENIED)


def _error_body(cls: Any, code: ErrorCode) -> Any:
    if "error_code" in getattr(cls, "__slots__", ()):
        return cls(error_code=int(code))
    return None


def _filter_topics(ctx: Any, body: Any, topics_attr: str, parts_attr: str, op: int, allowed, make_denied) -> Post | None:
    topics = getattr(body, topics_attr) or []
    refused = []
    kept = []
    for t in topics:
        name = _topic_name(ctx.broker, t)
        if name is not None and not allowed(op, RT_TOPIC, name):
            refused.append(t)
        else:
            kept.append(t)
    if not refused:
        return None
    setattr(body, topics_attr, kept)

    def post(resp: Any) -> Any:
        if resp is not None:
            make_denied(resp, refused, parts_attr)
        return resp

    return post


def _produce_denied(cls: Any):
    def add(resp: Any, refused: list, parts_attr: str) -> None:
        for t in refused:
            resp.responses.append(cls.TopicProduceResponse(name=t.name, topic_id=getattr(t, "topic_id", None) or
                                                           cls.TopicProduceResponse().topic_id, partition_responses=[
                cls.PartitionProduceResponse(index=p.index, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                             base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
                for p in getattr(t, parts_attr)]))
    return add


def _fetch_denied(cls: Any):
    def add(resp: Any, refused: list, parts_attr: str) -> None:
        for t in refused:
            kwargs = {"topic": t.topic} if getattr(t, "topic", None) else {}
            if getattr(t, "topic_id", None) is not None:
                kwargs["topic_id"] = t.topic_id
            resp.responses.append(cls.FetchableTopicResponse(**kwargs, partitions=[
                cls.PartitionData(partition_index=p.partition, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                  high_watermark=-1, last_stable_offset=-1, log_start_offset=-1, records=None)
                for p in getattr(t, parts_attr)]))
    return add


def _list_offsets_denied(cls: Any):
    def add(resp: Any, refused: list, parts_attr: str) -> None:
        for t in refused:
            resp.topics.append(cls.ListOffsetsTopicResponse(name=t.name, partitions=[
                cls.ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                                 error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                                 timestamp=-1, offset=-1)
                for p in getattr(t, parts_attr)]))
    return add


def _epoch_denied(cls: Any):
    def add(resp: Any, refused: list, parts_attr: str) -> None:
        for t in refused:
            resp.topics.append(cls.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
                cls.EpochEndOffset(partition=p.partition, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                   leader_epoch=-1, end_offset=-1)
                for p in getattr(t, parts_attr)]))
    return add


def _describe_topic_partitions(body: Any, allowed, cls: Any) -> Post:
    """DESCRIBE per topic (Kafka's DescribeTopicPartitionsRequestHandler): a listing of all topics
    leaves the others out; named ones come last with TOPIC_AUTHORIZATION_FAILED and no topic id."""
    if not body.topics:
        def post_all(resp: Any) -> Any:
            resp.topics = [t for t in resp.topics if allowed(OP_DESCRIBE, RT_TOPIC, t.name)]
            return resp
        return post_all
    refused = sorted({t.name for t in body.topics if not allowed(OP_DESCRIBE, RT_TOPIC, t.name)})
    kept = [t for t in body.topics if t.name not in refused]

    def post(resp: Any) -> Any:
        resp.topics.extend(cls.DescribeTopicPartitionsResponseTopic(
            error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name, is_internal=False, partitions=[])
            for name in refused)
        return resp
    if refused and not kept:  # an empty list would mean "all topics" to the handler
        raise Denied(post(cls(throttle_time_ms=0, topics=[], next_cursor=None)))
    body.topics = kept
    return post


def _metadata(ctx: Any, body: Any, allowed, cls: Any) -> Post | None:
    if body.topics is None:  # all topics: the ones not describable are left out
        def post_all(resp: Any) -> Any:
            resp.topics = [t for t in resp.topics if t.name is None or allowed(OP_DESCRIBE, RT_TOPIC, t.name)]
            return resp
        return post_all
    refused = [t for t in body.topics if t.name and not allowed(OP_DESCRIBE, RT_TOPIC, t.name)]
    if not refused:
        return None
    body.topics = [t for t in body.topics if t not in refused]

    def post(resp: Any) -> Any:
        for t in refused:
            resp.topics.append(cls.MetadataResponseTopic(
                error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=t.name, is_internal=False, partitions=[]))
        return resp
    return post


def _append_results(cls: Any, attr: str, struct: str, refused: list[str]) -> Post | None:
    if not refused:
        return None
    result_cls = getattr(cls, struct)

    def post(resp: Any) -> Any:
        for name in refused:
            kwargs = {"name": name, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
            if "error_message" in result_cls.__slots__:
                kwargs["error_message"] = "Authorization failed."
            getattr(resp, attr).append(result_cls(**kwargs))
        return resp
    return post
