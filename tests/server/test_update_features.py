"""UpdateFeatures on one node, as Kafka 4.4's controller: a change is a FeatureLevelRecord in the
metadata log (so it survives a restart and the record versions follow metadata.version), a
validate-only request changes nothing, one refused feature refuses the whole request, and a
kraft.version upgrade (KIP-853) turns the static voter set into a VotersRecord, which stays."""

from __future__ import annotations

from pathlib import Path

from odradek.testing import running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import request_class

U = request_class(57)


def _update(running, updates: list[tuple[str, int, int]], validate_only: bool = False, version: int = 1):
    conn = BrokerConnection(running.host, running.port)
    try:
        return conn.send(57, U(timeout_ms=30000, validate_only=validate_only, feature_updates=[
            U.FeatureUpdateKey(feature=n, max_version_level=level, upgrade_type=kind) for n, level, kind in updates]),
            version)
    finally:
        conn.close()


def _features(running) -> dict[str, int]:
    return dict(running.broker.metadata_store.image.features)


def test_update_features_persists_and_refuses_as_kafka(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_broker(log_dir=data) as running:
        before = _features(running)
        assert before["metadata.version"] == 33 and before["transaction.version"] == 2
        r = _update(running, [("transaction.version", 1, 2)], validate_only=True)
        assert (r.error_code, [(x.feature, x.error_code) for x in r.results]) == (0, [("transaction.version", 0)])
        assert _features(running) == before
        # a downgrade of metadata.version across a level that changed the records is refused
        r = _update(running, [("metadata.version", 29, 2), ("group.version", 0, 2)])
        assert r.error_code == ErrorCode.INVALID_UPDATE_VERSION and r.results == []
        assert "Refusing to perform the requested downgrade" in r.error_message
        assert _features(running) == before
        assert _update(running, [("share.version", 0, 2), ("group.version", 0, 2)]).error_code == 0
        assert "share.version" not in _features(running) and "group.version" not in _features(running)
        # the voter set's format (the Raft layer's control records, not a FeatureLevelRecord)
        assert _update(running, [("kraft.version", 1, 1)], validate_only=True).error_code == 0
        assert running.broker.metadata_store.log.kraft_version() == 0
        assert _update(running, [("kraft.version", 1, 1)]).error_code == 0
        r = _update(running, [("kraft.version", 0, 2)])
        assert r.error_code == ErrorCode.INVALID_UPDATE_VERSION and "kraft.version" in r.error_message
    with running_broker(log_dir=data) as running:
        after = _features(running)
        assert "share.version" not in after and "group.version" not in after and after["metadata.version"] == 33
        assert running.broker.metadata_store.log.kraft_version() == 1
        from odradek.handlers.quorum import _read_quorum

        quorum = _read_quorum(running.broker.metadata_store.log)
        assert [(voter_id, endpoints[0][0]) for voter_id, _dir, endpoints in quorum.voters] == [(1, "PLAINTEXT")]
