"""DescribeClientQuotas (API 48) and AlterClientQuotas (API 49), as a KRaft Kafka 4.4 serves them.

Quotas are ClientQuotaRecords in the KRaft metadata log: Alter validates each entity as Kafka's
controller does (ClientQuotaControlManager), writes one batch of records (only changed values) and
answers once it is fsynced; the metadata image (``MetadataImage.client_quotas``) holds them, so they
survive a restart and the quota managers (``odradek.quota``) enforce them at once.

Alter's per-entity errors, all INVALID_REQUEST with Kafka's messages: an empty entity, an entity
type other than user / client-id / ip, an empty name, ip combined with user or client-id, an ip
that is no address or resolvable host, a key the entity cannot have, a value that is not finite,
not above 0, fractional for a long or int key, or too large for it; a key named twice in one
entity, an entity named twice in one request. ``validate_only`` checks without writing.

Describe matches entities as Kafka's ClientQuotasImage does: each filter component names an
entity type and EXACT (a name), DEFAULT (the type's default) or SPECIFIED (any name or the
default); with ``strict`` an entity must have exactly the filtered types. A bad filter is
INVALID_REQUEST (UNSUPPORTED_VERSION for an unknown entity type) with Kafka's message.

Entries come in the order of Kafka's hash maps. The ACL checks (DESCRIBE_CONFIGS / ALTER_CONFIGS
on the cluster) are in :func:`odradek.security.acl.enforce`.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
from typing import Any

import trio

from ..logstore.java_hash import hashmap_order, spread, string_hash, to_int32
from ..quota import quota_managers
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

DESCRIBE_CLIENT_QUOTAS_KEY = 48
ALTER_CLIENT_QUOTAS_KEY = 49
DescribeClientQuotasResponse = response_class(DESCRIBE_CLIENT_QUOTAS_KEY)
AlterClientQuotasResponse = response_class(ALTER_CLIENT_QUOTAS_KEY)

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

MATCH_TYPE_EXACT, MATCH_TYPE_DEFAULT, MATCH_TYPE_SPECIFIED = 0, 1, 2

#: Quota keys of user / client-id entities and of ip entities, with their config types (QuotaConfig).
USER_AND_CLIENT_QUOTA_KEYS = {"producer_byte_rate": "LONG", "consumer_byte_rate": "LONG",
                              "request_percentage": "DOUBLE", "controller_mutation_rate": "DOUBLE"}
IP_QUOTA_KEYS = {"connection_creation_rate": "INT"}

_INT_MAX = 2**31 - 1
_LONG_MAX = float(2**63 - 1)

#: An entity: (type, name or None for the default) pairs, in the order Kafka's HashMap gives them.
Entity = tuple[tuple[str, str | None], ...]


class InvalidRequest(Exception):
    """A request Kafka refuses as a whole (its ApiError), with the error code."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------------------------------
# Java's hash-map orders and printing
# ------------------------------------------------------------------------------------------------

def _java_order(keys: list[str], initial_capacity: int | None = None) -> list[str]:
    """String keys in the order a java.util.HashMap put them in that order iterates them;
    `initial_capacity` as given to its constructor (None: the default 16)."""
    cap = 16
    if initial_capacity is not None:
        cap = 1
        while cap < initial_capacity:
            cap *= 2
    for size in range(1, len(keys) + 1):
        if size > cap * 0.75:
            cap *= 2
    keyed = sorted(enumerate(keys), key=lambda item: (spread(string_hash(item[1])) & (cap - 1), item[0]))
    return [k for _, k in keyed]


def _entity(pairs: dict[str, str | None], initial_capacity: int | None = None) -> Entity:
    """A HashMap<String, String> of entity type -> name, as Kafka iterates it."""
    return tuple((t, pairs[t]) for t in _java_order(list(pairs), initial_capacity))


def _entity_hash(entity: Entity) -> int:
    # ClientQuotaEntity.hashCode: Objects.hash(entries), entries' hash the sum of key ^ value
    h = 0
    for t, name in entity:
        h += string_hash(t) ^ (string_hash(name) if name is not None else 0)
    return to_int32(31 + to_int32(h))


def _entity_str(entity: Entity) -> str:
    """ClientQuotaEntity.toString."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n if n is not None else 'null'}"
                                                     for t, n in entity) + "})"


def _image_key(entity: Entity) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(entity))


def _image(broker: Any) -> Any:
    role = getattr(broker, "broker_role", None)
    if role is not None and getattr(role, "image", None) is not None:
        return role.image
    store = getattr(broker, "metadata_store", None)
    return getattr(store, "image", None)


def _quotas(broker: Any) -> dict:
    image = _image(broker)
    return getattr(image, "client_quotas", {}) if image is not None else {}


# ------------------------------------------------------------------------------------------------
# Describe
# ------------------------------------------------------------------------------------------------

def parse_filter(components: list[Any]) -> tuple[dict[str, str | None], set[str]]:
    """(exact matches, type matches) of a filter; InvalidRequest as Kafka's ClientQuotasImage.describe."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise InvalidRequest("Invalid empty entity type.")
        if kind in exact or kind in typed:
            raise InvalidRequest(f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in ENTITY_TYPES:
            raise InvalidRequest(f"Unsupported entity type {kind}", ErrorCode.UNSUPPORTED_VERSION)
        if c.match_type == MATCH_TYPE_EXACT:
            if c.match is None:
                raise InvalidRequest("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = c.match
        elif c.match_type == MATCH_TYPE_DEFAULT:
            if c.match is not None:
                raise InvalidRequest("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[kind] = None
        elif c.match_type == MATCH_TYPE_SPECIFIED:
            if c.match is not None:
                raise InvalidRequest("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(kind)
        else:
            raise InvalidRequest(f"Unknown match type {c.match_type}")
    if (IP in exact or IP in typed) and (USER in exact or USER in typed or CLIENT_ID in exact or CLIENT_ID in typed):
        raise InvalidRequest("Invalid entity filter component combination. IP filter component should not be "
                             "used with user or clientId filter component.")
    return exact, typed


def matches(entity: dict[str, str | None], exact: dict[str, str | None], typed: set[str], strict: bool) -> bool:
    """Whether an entity passes a filter (ClientQuotasImage.matches)."""
    if strict and len(entity) != len(exact) + len(typed):
        return False
    for kind, name in exact.items():
        if kind not in entity or entity[kind] != name:
            return False
    return all(kind in entity for kind in typed)


def describe(quotas: dict, components: list[Any], strict: bool) -> Any:
    """The DescribeClientQuotas response body for a filter over the image's quotas."""
    try:
        exact, typed = parse_filter(components)
    except InvalidRequest as e:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=int(e.code), error_message=str(e),
                                            entries=None)
    found = [_entity(dict(key)) for key, values in quotas.items() if values and matches(dict(key), exact, typed,
                                                                                         strict)]
    entries = []
    for entity in hashmap_order(found, _entity_hash, max_size_ever=len(quotas)):
        values = quotas[_image_key(entity)]
        entries.append(DescribeClientQuotasResponse.EntryData(
            entity=[DescribeClientQuotasResponse.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[DescribeClientQuotasResponse.ValueData(key=k, value=float(values[k]))
                    for k in hashmap_order(list(values), string_hash)]))
    # the response data's default message is "", not null
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=0, error_message="", entries=entries)


@handles(DESCRIBE_CLIENT_QUOTAS_KEY, 0, supported_versions(DESCRIBE_CLIENT_QUOTAS_KEY)[1])
async def handle_describe_client_quotas(ctx: RequestContext, header, request) -> object:
    return describe(_quotas(ctx.broker), list(request.components or []), bool(request.strict))


# ------------------------------------------------------------------------------------------------
# Alter
# ------------------------------------------------------------------------------------------------

def _is_valid_ip_entity(name: str | None) -> bool:
    """InetAddress.getByName succeeds: an address literal or a host name that resolves."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name.strip("[]"))
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


def _check_value(keys: dict[str, str], key: str, value: float) -> str | None:
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not math.isfinite(value):
        return f"Quota {key} must be a finite number"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "DOUBLE":
        return None
    if kind == "INT" and value > _INT_MAX:
        return f"Proposed value for {key} is too large for an INT."
    if kind == "LONG" and value > _LONG_MAX:
        return f"Proposed value for {key} is too large for a LONG."
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


def _entity_error(entity: Entity, ip_valid: bool) -> tuple[str | None, dict[str, str]]:
    """Kafka's complaint about an entity (None if fine) and the quota keys it may have."""
    if not entity:
        return "Invalid empty client quota entity", {}
    for kind, name in entity:
        if kind not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {kind}", {}
        if name is not None and name == "":
            return f"Empty {kind} not supported", {}
    kinds = {kind for kind, _ in entity}
    if IP in kinds:
        if USER in kinds or CLIENT_ID in kinds:
            # (sic: Kafka's message lacks the space)
            return "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId", {}
        if not ip_valid:
            return f"{dict(entity)[IP]} is not a valid IP or resolvable host.", {}
        return None, IP_QUOTA_KEYS
    return None, USER_AND_CLIENT_QUOTA_KEYS


def alter(quotas: dict, alterations: list[tuple[Entity, list[tuple[str, float | None]]]],
          ip_valid: dict[str | None, bool] | None = None) -> tuple[dict[Entity, tuple[int, str | None]], list[Any]]:
    """Validate alterations as Kafka's controller does: (result per entity, ClientQuotaRecords to write).

    `alterations` are (entity, [(key, value or None to remove)]) in request order; `ip_valid` says
    which ip names resolve (looked up beforehand, off the event loop)."""
    from ..kraft.records import new_record  # noqa: PLC0415 - metadata records only when quotas change

    ip_valid = ip_valid or {}
    results: dict[Entity, tuple[int, str | None]] = {}
    records: list[Any] = []
    invalid = int(ErrorCode.INVALID_REQUEST)
    for entity, ops in alterations:
        changes: dict[str, float | None] = {}
        for key, value in ops:
            if key in changes:
                results[entity] = (invalid, f"Duplicate quota key {key} not updating quota for this entity "
                                            f"{_entity_str(entity)}")
            else:
                changes[key] = value
        if entity in results:
            results[entity] = (invalid, f"Ignoring duplicate entity {_entity_str(entity)}")
            continue
        problem, keys = _entity_error(entity, ip_valid.get(dict(entity).get(IP), True))
        if problem is not None:
            results[entity] = (invalid, problem)
            continue
        current = quotas.get(_image_key(entity), {})
        new: list[Any] = []
        for key in _java_order(list(changes), len(ops)):
            value = changes[key]
            if value is None:
                if key in current:
                    new.append(_record(new_record, entity, key, None))
                continue
            problem = _check_value(keys, key, value)
            if problem is not None:
                break
            if current.get(key) != value:
                new.append(_record(new_record, entity, key, value))
        if problem is not None:
            results[entity] = (invalid, problem)
            continue
        records += new
        results[entity] = (0, None)
    return results, records


def _record(new_record, entity: Entity, key: str, value: float | None) -> Any:
    cls = type(new_record("ClientQuotaRecord"))
    # the controller's validated entity map (a HashMap of 3) orders the record's entity data
    ordered = _entity(dict(entity), 3)
    return new_record("ClientQuotaRecord", entity=[cls.EntityData(entity_type=t, entity_name=n) for t, n in ordered],
                      key=key, value=0.0 if value is None else float(value), remove=value is None)


def _response(results: dict[Entity, tuple[int, str | None]]) -> Any:
    entries = []
    for entity in hashmap_order(list(results), _entity_hash):
        code, message = results[entity]
        entries.append(AlterClientQuotasResponse.EntryData(
            error_code=code, error_message=message,
            entity=[AlterClientQuotasResponse.EntityData(entity_type=t, entity_name=n) for t, n in entity]))
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=entries)


@handles(ALTER_CLIENT_QUOTAS_KEY, 0, supported_versions(ALTER_CLIENT_QUOTAS_KEY)[1])
async def handle_alter_client_quotas(ctx: RequestContext, header, request) -> object:
    alterations: list[tuple[Entity, list[tuple[str, float | None]]]] = []
    for entry in request.entries or []:
        pairs: dict[str, str | None] = {}
        for e in entry.entity or []:
            pairs[e.entity_type] = e.entity_name  # a HashMap: a type named twice keeps its last name
        # AlterClientQuotasRequest.entries: a HashMap sized for the request's entity data
        alterations.append((_entity(pairs, len(entry.entity or [])), [(op.key, None if op.remove else float(op.value))
                                             for op in entry.ops or []]))
    names = {dict(entity).get(IP) for entity, _ in alterations if IP in dict(entity)}
    ip_valid = {}
    for name in names:
        # a host name is resolved like InetAddress.getByName (a lookup may block: off the loop)
        ip_valid[name] = await trio.to_thread.run_sync(_is_valid_ip_entity, name)
    broker = ctx.broker
    results, records = alter(_quotas(broker), alterations, ip_valid)
    if records and not request.validate_only:
        store = getattr(broker, "metadata_store", None)
        if store is None or getattr(store, "log", None) is None:
            # nowhere to persist the change: refuse it all rather than pretend
            for entity, (code, _message) in results.items():
                if code == 0:
                    results[entity] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), None)
            return _response(results)
        # persisted (one batch, fsynced) before the answer, as Kafka's controller commits first
        store.append_records([("ClientQuotaRecord", r) for r in records])
        quota_managers(broker)  # enforced from the next request on
        log.info("%s altered client quotas: %s", ctx.principal, ", ".join(
            f"{dict((e.entity_type, e.entity_name) for e in r.entity)} {r.key}="
            f"{'(removed)' if r.remove else r.value}" for r in records))
    return _response(results)
