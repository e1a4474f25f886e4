"""ApiVersions: advertise exactly the APIs and versions the registered handlers serve, and the
features as a Kafka 4.4 node reports them (KafkaApis.handleApiVersionsRequest); UpdateFeatures:
change them as Kafka 4.4's controller does (FeatureControlManager) on a single node."""

from __future__ import annotations

import re
from typing import Any

from ..kraft.features import FEATURE_DEPENDENCIES, METADATA_CHANGED, supported_feature_ranges
from ..kraft.image import RESOURCE_BROKER
from ..kraft.records import new_record
from ..logstore.java_hash import copied_hashmap_capacity, hashmap_order, spread, string_hash
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class
from .registry import (
    API_VERSIONS_KEY,
    REGISTRY,
    RequestContext,
    advertised_versions,
    handles,
    is_controller_listener,
)

ApiVersionsResponse = response_class(API_VERSIONS_KEY)

#: Finalized levels reported no higher than Odradek serves (clients turn on what a level means);
#: the metadata log keeps what was finalized. Empty: every level Kafka 4.4 finalizes is served
#: (transaction.version 2, Transactions V2, since the coordinator serves KIP-890 part 2).
SERVED_FEATURE_LEVELS: dict[str, int] = {}

#: ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN (v3+ client software name and version).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _key(key: int, lo: int, hi: int) -> Any:
    return ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)


def api_versions_body(version: int, error: ErrorCode = ErrorCode.NONE, controller_listener: bool = False) -> Any:
    """An ApiVersions answer without features: the UNSUPPORTED_VERSION reply (as v0) lists only
    ApiVersions' own range, the way Kafka tells the client which version to retry with; other
    errors list nothing (ApiVersionsRequest.getErrorResponse)."""
    if error == ErrorCode.UNSUPPORTED_VERSION:
        own = REGISTRY[API_VERSIONS_KEY]
        keys = [_key(API_VERSIONS_KEY, own.advertised_min, own.max_version)]
    elif error != ErrorCode.NONE:
        keys = []
    else:
        keys = [_key(key, lo, hi) for key, lo, hi in advertised_versions(controller_listener)]
    return ApiVersionsResponse(error_code=int(error), api_keys=keys, throttle_time_ms=0)


def _finalized_order(levels: dict[str, int]) -> list[str]:
    """The order Kafka lists finalized features in: a HashMap of the non-metadata.version
    features copied into a new HashMap (FinalizedFeatures) that then gets metadata.version."""
    others = hashmap_order([n for n in sorted(levels) if n != "metadata.version"], string_hash)
    cap = copied_hashmap_capacity(len(others))
    names = others + (["metadata.version"] if "metadata.version" in levels else [])
    while len(names) > cap * 3 // 4:
        cap *= 2
    return [n for _, _, n in sorted((spread(string_hash(n)) & (cap - 1), i, n) for i, n in enumerate(names))]


def features_of(ctx: RequestContext, version: int, body: Any) -> None:
    """Fill in the supported and finalized features (v3+): what this node supports (features
    whose minimum is 0 are left out below v4, KAFKA-17011) and what the metadata log finalized."""
    if version < 3:
        return
    ranges = supported_feature_ranges()
    body.supported_features = [
        ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=ranges[name][0], max_version=ranges[name][1])
        for name in hashmap_order(sorted(ranges), string_hash) if version >= 4 or ranges[name][0] > 0]
    store = getattr(ctx.broker, "metadata_store", None)
    log = getattr(store, "log", None)
    if store is None or log is None:
        return  # features unknown: epoch -1 and none finalized, as a Kafka node before its metadata loads
    levels = {name: min(level, SERVED_FEATURE_LEVELS.get(name, level))
              for name, level in store.image.features.items() if level > 0}
    kraft = log.kraft_version()
    if kraft > 0:
        levels["kraft.version"] = kraft
    body.finalized_features_epoch = log.log_end_offset - 1
    body.finalized_features = [
        ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=levels[name],
                                                min_version_level=levels[name])
        for name in _finalized_order(levels)]


def _invalid(version: int, request: Any) -> bool:
    """ApiVersionsRequest.isValid: v5 names both cluster and node or neither; v3+ software name
    and version match Kafka's pattern."""
    if version >= 5 and (request.cluster_id is None) != (request.node_id == -1):
        return True
    if version >= 3:
        return not (_SOFTWARE.fullmatch(request.client_software_name or "")
                    and _SOFTWARE.fullmatch(request.client_software_version or ""))
    return False


@handles(API_VERSIONS_KEY, 0, 5)
async def handle_api_versions(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    if _invalid(version, request):
        return api_versions_body(version, ErrorCode.INVALID_REQUEST)
    if version >= 3 and ctx.session is not None:
        # the connection's client software (Kafka's ClientInformation), which KIP-714 subscriptions match on
        ctx.session.client_software = (request.client_software_name, request.client_software_version)
    broker = ctx.broker
    if version >= 5 and request.cluster_id is not None and (
            request.cluster_id != broker.cluster_id or request.node_id != broker.node_id):
        # KIP-1242: the client reached a different cluster or node than it meant to
        return api_versions_body(version, ErrorCode.REBOOTSTRAP_REQUIRED)
    body = api_versions_body(version, controller_listener=is_controller_listener(ctx))
    features_of(ctx, version, body)
    return body


# ====================================================================== UpdateFeatures

UPDATE_FEATURES_KEY = 57
UpdateFeaturesResponse = response_class(UPDATE_FEATURES_KEY)
_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE = 1, 2, 3
_FAILED = "The update failed for all features since the following feature had an error: "
#: marks a kraft.version upgrade among the records UpdateFeatures collects
KRAFT_VERSION_UPGRADE = "kraft.version upgrade"


def _metadata_changed(low: int, high: int) -> bool:
    """MetadataVersion.checkIfMetadataChanged: a level in (low, high] changed what the log holds."""
    return any(level in METADATA_CHANGED for level in range(low + 1, high + 1))


def _update_feature(ctx: RequestContext, name: str, level: int, kind: int, proposed: dict[str, int],
                    records: list) -> str | None:
    """FeatureControlManager.updateFeature for one node: None, or why the update is refused."""
    store = ctx.broker.metadata_store
    invalid = f"Invalid update version {level} for feature {name}. "
    if kind not in (_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE):
        return invalid + "The controller does not support the given upgrade type."
    if name == "kraft.version":
        current = store.log.kraft_version()
    else:
        current = store.image.features.get(name, 0)
    if level < 0:
        return invalid + "A feature version cannot be less than 0."
    ranges = supported_feature_ranges()
    node = ctx.broker.node_id
    if name not in ranges:
        return invalid + f"Local controller {node} does not support this feature."
    lo, hi = ranges[name]
    if not lo <= level <= hi:
        return invalid + f"Local controller {node} only supports versions {lo}-{hi}"
    if level < current and kind == _UPGRADE:
        return invalid + ("Can't downgrade the version of this feature without setting the upgrade type to "
                          "either safe or unsafe downgrade.")
    if level > current and kind != _UPGRADE:
        return invalid + "Can't downgrade to a newer version."
    if name == "metadata.version":
        if level < current and _metadata_changed(level, current):
            why = ("Unsafe metadata downgrade is not supported in this version." if kind == _UNSAFE_DOWNGRADE
                   else "Refusing to perform the requested downgrade because it might delete metadata information.")
            return f"Unsupported metadata.version downgrade from {current} to {level}. {why}"
    elif name == "kraft.version":
        if level < current:
            return invalid + "Can't downgrade the version of this feature."
        if kind == _UPGRADE:
            if level > current:
                # not a FeatureLevelRecord: the Raft layer rewrites the voter set (handlers.quorum)
                records.append((KRAFT_VERSION_UPGRADE, level))
            # Kafka's controller still writes a record for the update (the finalized epoch moves)
            records.append(("NoOpRecord", new_record("NoOpRecord")))
        return None
    else:
        for dep, need in FEATURE_DEPENDENCIES.get((name, level), {}).items():
            if proposed.get(dep, 0) < need:
                return invalid + f"{name} level {level} requires {dep} level {need} or higher."
    records.append(("FeatureLevelRecord", new_record("FeatureLevelRecord", name=name, feature_level=level)))
    return None


def _elr_safety_records(ctx: RequestContext) -> list:
    """ConfigurationControlManager's records when ELR is turned on: the cluster-wide min.insync.replicas
    the controller runs with, unless the cluster already has one."""
    store = ctx.broker.metadata_store
    if "min.insync.replicas" in store.image.configs.get((RESOURCE_BROKER, ""), {}):
        return []
    try:
        value = str(ctx.broker.config.get("min.insync.replicas"))
    except KeyError:
        value = "1"  # Kafka's default
    return [("ConfigRecord", new_record("ConfigRecord", resource_type=RESOURCE_BROKER, resource_name="",
                                        name="min.insync.replicas", value=value))]


@handles(UPDATE_FEATURES_KEY, 0, 2)
async def handle_update_features(ctx: RequestContext, header, request) -> object:
    version = header.api_version
    R = UpdateFeaturesResponse
    store = getattr(ctx.broker, "metadata_store", None)
    if store is None or getattr(store, "log", None) is None:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.NOT_CONTROLLER), error_message=None)
    # the request as QuorumController reads it: a map by feature (v0's AllowDowngrade is not looked at)
    wanted: dict[str, tuple[int, int]] = {}
    for u in request.feature_updates:
        wanted[u.feature] = (u.max_version_level, u.upgrade_type if version >= 1 else _UPGRADE)
    proposed = dict(store.image.features)
    proposed.update({name: level for name, (level, _) in wanted.items()})
    records: list = []
    for name in hashmap_order(list(wanted), string_hash):  # FeatureControlManager walks a HashMap
        level, kind = wanted[name]
        error = _update_feature(ctx, name, level, kind, proposed, records)
        if error is not None:
            return R(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_UPDATE_VERSION),
                     error_message=_FAILED + error, results=[])
    validate_only = version >= 1 and request.validate_only
    raft = [level for name, level in records if name == KRAFT_VERSION_UPGRADE]
    records = [r for r in records if r[0] != KRAFT_VERSION_UPGRADE]
    if raft and not validate_only:
        from .quorum import upgrade_kraft_version  # noqa: PLC0415 - handlers.quorum imports this module

        upgrade_kraft_version(ctx, raft[0])
    if records and not validate_only:
        if wanted.get("eligible.leader.replicas.version", (0, 0))[0] > 0:
            records = _elr_safety_records(ctx) + records
        store.append_records(records)  # one batch, committed before the answer as Kafka's controller
    results = [] if version >= 2 else [
        R.UpdatableFeatureResult(feature=u.feature, error_code=0, error_message="NONE")
        for u in request.feature_updates]
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)
