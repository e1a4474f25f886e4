"""Feature levels Odradek formats a cluster with: those `kafka-storage format` of Kafka 4.1 writes.

Odradek claims Kafka 4.1, whose default metadata.version is 4.1-IV1 = level 27 (the 4.1
fixture's bootstrap.checkpoint holds exactly these four FeatureLevelRecords, in this order).
"""

from __future__ import annotations

#: MetadataVersion.IBP_4_1_IV1.featureLevel()
METADATA_VERSION_4_1 = 27


def default_feature_levels() -> dict[str, int]:
    """Feature name -> level, in the order Kafka 4.1's bootstrap.checkpoint lists them."""
    return {
        "metadata.version": METADATA_VERSION_4_1,
        "eligible.leader.replicas.version": 1,
        "group.version": 1,
        "transaction.version": 2,
    }

#: Release versions `odradek storage format --release-version` accepts and their metadata.version.
RELEASE_METADATA_VERSIONS = {"4.1": 27, "4.1-IV1": 27, "4.1-IV0": 26, "4.0": 25, "4.0-IV3": 25}


def metadata_version_name(level: int) -> str:
    """Kafka's name of a metadata.version level Odradek knows (else the number)."""
    names = {27: "4.1-IV1", 26: "4.1-IV0", 25: "4.0-IV3"}
    return names.get(level, str(level))


#: metadata.version levels where record layouts changed (Kafka's MetadataVersion).
MV_3_4_IV0 = 8  # RegisterBrokerRecord v2 (isMigratingZkBroker)
MV_3_6_IV1 = 13  # metadata transactions (Begin/End/AbortTransactionRecord)
MV_3_7_IV2 = 17  # directory assignment: PartitionRecord/PartitionChangeRecord v1, RegisterBrokerRecord v3
MV_4_0_IV1 = 23  # ELR: PartitionRecord/PartitionChangeRecord v2


def record_versions(metadata_version: int) -> dict[str, int]:
    """The record versions a Kafka controller writes at `metadata_version` (MetadataVersion's rules)."""
    if metadata_version >= MV_4_0_IV1:
        partition = 2
    elif metadata_version >= MV_3_7_IV2:
        partition = 1
    else:
        partition = 0
    if metadata_version >= MV_3_7_IV2:
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
