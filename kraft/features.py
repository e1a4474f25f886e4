"""Feature levels as Kafka 4.4 knows them: metadata.version levels and names, the other
features' levels and the defaults `kafka-storage format` picks for a release, and the record
versions a controller writes at each metadata.version.

Facts from Kafka 4.4.0's MetadataVersion and Feature enums (kafka-server-common). A fresh
`kafka-storage format` of 4.4.0 finalizes metadata.version 4.4-IV2 (33) and, after it in name
order, eligible.leader.replicas.version 1, group.version 1, share.version 2, streams.version 1,
transaction.version 2; kraft.version is not a FeatureLevelRecord (it is 0 with a static voter
set, 1 with a KIP-853 dynamic quorum) and a feature at level 0 gets no record.
"""

from __future__ import annotations

from collections.abc import Mapping

#: metadata.version level -> Kafka's name (MetadataVersion.version()), 3.3-IV3 .. 4.4-IV2.
METADATA_VERSIONS: dict[int, str] = {
    7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1",
    14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4", 20: "3.8-IV0",
    21: "3.9-IV0", 22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3", 26: "4.1-IV0", 27: "4.1-IV1",
    28: "4.2-IV0", 29: "4.2-IV1", 30: "4.3-IV0", 31: "4.4-IV0", 32: "4.4-IV1", 33: "4.4-IV2",
}
MINIMUM_METADATA_VERSION = 7
#: MetadataVersion.LATEST_PRODUCTION of Kafka 4.4 (4.5-IV0 = 34 is not production-ready there).
LATEST_PRODUCTION = 33
#: MetadataVersion.IBP_4_1_IV1.featureLevel(): what the store assumes before any metadata.version is in.
METADATA_VERSION_4_1 = 27

#: Levels whose records differ from the level before (MetadataVersion.didMetadataChange): a
#: metadata.version downgrade across one of them could lose metadata, so Kafka refuses it.
METADATA_CHANGED = frozenset({7, 8, 11, 13, 14, 15, 17, 23, 30, 32, 33})

#: Release versions `--release-version` accepts: every level's name, and each release's short name
#: for its latest level ("4.4" = 4.4-IV2), as MetadataVersion.fromVersionString resolves them.
RELEASE_METADATA_VERSIONS: dict[str, int] = {
    **{name.split("-")[0]: level for level, name in METADATA_VERSIONS.items()},  # later levels win
    **{name: level for level, name in METADATA_VERSIONS.items()},
}

#: The features other than metadata.version: name -> {level: metadata.version that level becomes
#: the default at (FeatureVersion.bootstrapMetadataVersion)}; levels run 0..max.
FEATURE_LEVELS: dict[str, dict[int, int]] = {
    "kraft.version": {0: 7, 1: 21},
    "transaction.version": {0: 7, 1: 24, 2: 24},
    "group.version": {0: 7, 1: 22},
    "eligible.leader.replicas.version": {0: 7, 1: 26},
    "share.version": {0: 7, 1: 28, 2: 31},
    "streams.version": {0: 7, 1: 29},
}
#: A level that needs another feature at a minimum level (FeatureVersion.dependencies).
FEATURE_DEPENDENCIES: dict[tuple[str, int], dict[str, int]] = {
    ("eligible.leader.replicas.version", 1): {"metadata.version": 23},
}


def metadata_version_name(level: int) -> str:
    """Kafka's name of a metadata.version level (else the number)."""
    return METADATA_VERSIONS.get(level, str(level))


def default_level(feature: str, metadata_version: int) -> int:
    """Feature.defaultLevel: the highest level whose bootstrap metadata.version is reached."""
    return max(level for level, mv in FEATURE_LEVELS[feature].items() if mv <= metadata_version)


def default_feature_levels(metadata_version: int = LATEST_PRODUCTION) -> dict[str, int]:
    """What `kafka-storage format` of Kafka 4.4 writes for `metadata_version`: metadata.version,
    then every other feature with a non-zero default level in name order (kraft.version aside,
    which format does not write as a FeatureLevelRecord)."""
    levels = {"metadata.version": metadata_version}
    for name in sorted(FEATURE_LEVELS):
        if name != "kraft.version" and (level := default_level(name, metadata_version)) > 0:
            levels[name] = level
    return levels


def supported_feature_ranges() -> dict[str, tuple[int, int]]:
    """(min, max) level of every feature a Kafka 4.4 node supports (BrokerFeatures.supportedFeatures)."""
    ranges = {name: (0, max(levels)) for name, levels in FEATURE_LEVELS.items()}
    ranges["metadata.version"] = (MINIMUM_METADATA_VERSION, LATEST_PRODUCTION)
    return ranges


class FeatureLevelError(ValueError):
    """A feature level the format tool refuses (unknown feature, unsupported level, unmet dependency)."""


def bootstrap_levels(release_version: str | None = None,
                     features: Mapping[str, int] | None = None) -> dict[str, int]:
    """The levels `kafka-storage format [--release-version R] [--feature name=level ...]` writes:
    the defaults at R's metadata.version (latest production without R), overridden by each
    --feature; level-0 features get no record. Raises FeatureLevelError as Kafka's Formatter refuses."""
    features = dict(features or {})
    if release_version is not None and "metadata.version" in features:
        raise FeatureLevelError("Use --release-version instead of --feature with metadata.version.")
    if release_version is not None:
        if release_version not in RELEASE_METADATA_VERSIONS:
            raise FeatureLevelError(
                f"Unknown metadata.version '{release_version}'. Supported metadata.version are: "
                + ", ".join(METADATA_VERSIONS.values()))
        mv = RELEASE_METADATA_VERSIONS[release_version]
    else:
        mv = features.pop("metadata.version", LATEST_PRODUCTION)
    ranges = supported_feature_ranges()
    if not ranges["metadata.version"][0] <= mv <= ranges["metadata.version"][1]:
        raise FeatureLevelError(f"Unsupported metadata.version level {mv}")
    levels = default_feature_levels(mv)
    for name, level in features.items():
        if name not in ranges:
            raise FeatureLevelError(f"Unsupported feature: {name}. Supported features are: "
                                    + ", ".join(sorted(ranges)))
        lo, hi = ranges[name]
        if not lo <= level <= hi:
            raise FeatureLevelError(f"No feature:{name} with feature level {level}")
        levels[name] = level
    for name, level in levels.items():
        for dep, need in FEATURE_DEPENDENCIES.get((name, level), {}).items():
            if levels.get(dep, 0) < need:
                raise FeatureLevelError(
                    f"{name} level {level} requires {dep} at level {need} or higher, not {levels.get(dep, 0)}")
    first = {"metadata.version": levels.pop("metadata.version")}
    return first | {name: levels[name] for name in sorted(levels) if levels[name] > 0 and name != "kraft.version"}


#: metadata.version levels where record layouts changed (Kafka's MetadataVersion).
MV_3_4_IV0 = 8  # RegisterBrokerRecord v2 (isMigratingZkBroker)
MV_3_6_IV1 = 13  # metadata transactions (Begin/End/AbortTransactionRecord)
MV_3_7_IV2 = 17  # directory assignment: PartitionRecord/PartitionChangeRecord v1, RegisterBrokerRecord v3
MV_4_0_IV1 = 23  # ELR: PartitionRecord/PartitionChangeRecord v2
MV_4_3_IV0 = 30  # cordoned log dirs (KIP-1066): RegisterBrokerRecord v4, BrokerRegistrationChangeRecord v3


def record_versions(metadata_version: int) -> dict[str, int]:
    """The record versions a Kafka controller writes at `metadata_version` (MetadataVersion's rules)."""
    if metadata_version >= MV_4_0_IV1:
        partition = 2
    elif metadata_version >= MV_3_7_IV2:
        partition = 1
    else:
        partition = 0
    if metadata_version >= MV_4_3_IV0:
        register = 4
    elif metadata_version >= MV_3_7_IV2:
        register = 3
    elif metadata_version >= MV_3_4_IV0:
        register = 2
    else:
        register = 1
    return {"PartitionRecord": partition, "PartitionChangeRecord": partition, "RegisterBrokerRecord": register}


def supports_metadata_transactions(metadata_version: int) -> bool:
    return metadata_version >= MV_3_6_IV1


def supports_directory_assignment(metadata_version: int) -> bool:
    return metadata_version >= MV_3_7_IV2


def supports_cordoned_log_dirs(metadata_version: int) -> bool:
    return metadata_version >= MV_4_3_IV0
