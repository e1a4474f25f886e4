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
