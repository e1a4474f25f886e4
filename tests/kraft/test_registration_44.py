"""At metadata.version 4.4-IV2 the store registers the broker as a Kafka 4.4 broker does:
RegisterBrokerRecord v4 (KIP-1066 cordoned log dirs, null at registration) with 4.4's feature ranges in the
order of its RegisterBrokerRecord (from a Kafka 4.4.0 metadata log)."""

from __future__ import annotations

from pathlib import Path

from odradek.cluster_metadata import random_uuid
from odradek.kraft.bootstrap import write_bootstrap
from odradek.kraft.features import default_feature_levels
from odradek.kraft.log import MetadataLog
from odradek.kraft.store import MetadataStore

#: the features of the RegisterBrokerRecord a fresh Kafka 4.4.0 node wrote
KAFKA_44_FEATURES = [("kraft.version", 0, 1), ("group.version", 0, 1), ("streams.version", 0, 1),
                     ("transaction.version", 0, 2), ("eligible.leader.replicas.version", 0, 1),
                     ("metadata.version", 7, 33), ("share.version", 0, 2)]


def _registrations(path: Path, levels: dict[str, int]) -> list:
    write_bootstrap(path, levels)
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    store = MetadataStore(path, 1, {path: random_uuid()}, lambda: next(clock))
    store.listeners = [("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    store.start()
    store.close()
    md = MetadataLog.open(path)
    try:
        return [r for r in md.replay_records() if r.name == "RegisterBrokerRecord"]
    finally:
        md.plog.close_handlers()


def test_registers_as_kafka_44(tmp_path: Path) -> None:
    [reg] = _registrations(tmp_path, default_feature_levels())
    assert reg.version == 4 and reg.message.cordoned_log_dirs is None  # null until heartbeats, as Kafka
    assert [(f.name, f.min_supported_version, f.max_supported_version) for f in reg.message.features] == \
        KAFKA_44_FEATURES


def test_registers_in_the_version_of_an_older_metadata_version(tmp_path: Path) -> None:
    # formatted for Kafka 4.1 (--release-version 4.1): what a 4.1 controller reads
    [reg] = _registrations(tmp_path, default_feature_levels(27))
    assert reg.version == 3
