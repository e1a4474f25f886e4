"""FindCoordinator key type 2 (SHARE) in a cluster: the share coordinator of a share-partition's
state is the leader of its ``__share_group_state`` partition, found as Kafka 4.4's KafkaApis
finds it (v6+, key "group:topicId:partition", CLUSTER_ACTION)."""

from __future__ import annotations

import time

from odradek.share_coordinator import records as rec
from odradek.testing import running_cluster
from odradek.tools.client import KafkaClient
from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import request_class

FIND_COORDINATOR = 10


def _find(client: KafkaClient, keys: list[str], version: int = 6) -> list:
    cls = request_class(FIND_COORDINATOR)
    body = cls(key_type=2, coordinator_keys=keys) if version >= 4 else cls(key=keys[0], key_type=2)
    answer = client.any_connection().send(FIND_COORDINATOR, body, version=version)
    return answer.coordinators if version >= 4 else [answer]


def test_find_coordinator_share_key_names_the_leader_of_the_state_partition():
    with running_cluster(brokers=3) as cluster, KafkaClient(cluster.bootstrap_servers) as client:
        admin = request_class(19)
        client.send(19, admin(topics=[admin.CreatableTopic(name="q", num_partitions=3, replication_factor=1,
                                                           assignments=[], configs=[])],
                              timeout_ms=30000, validate_only=False))
        tid = client.topic("q", wait_s=10).topic_id
        keys = [rec.coordinator_key("workers", tid, p) for p in range(3)]
        deadline = time.monotonic() + 20
        while True:
            # the first lookup creates __share_group_state (COORDINATOR_NOT_AVAILABLE until it exists)
            found = _find(client, keys)
            if all(c.error_code == 0 for c in found) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert [c.error_code for c in found] == [0, 0, 0], found
        state = client.metadata([rec.SHARE_STATE_TOPIC])[rec.SHARE_STATE_TOPIC]
        assert len(state.partitions) == 50
        for key, c in zip(keys, found, strict=True):
            leader = state.partitions[rec.partition_for(key, 50)].leader
            assert (c.key, c.node_id) == (key, leader)
        assert len({state.partitions[p].leader for p in state.partitions}) == 3  # spread over the brokers
        # as Kafka: SHARE keys need v6, and a key that is not group:topicId:partition is refused
        assert _find(client, [keys[0]], version=5)[0].error_code == ErrorCode.INVALID_REQUEST
        bad = _find(client, ["workers", "workers:not-a-uuid:0", f"workers:{tid.to_base64()}:x"])
        assert [c.error_code for c in bad] == [ErrorCode.INVALID_REQUEST] * 3
