"""Share groups' metrics on the Prometheus endpoint, under Kafka 4.4's names, after one member
acquired and acknowledged records on the wire."""

from __future__ import annotations

import time
import urllib.request
import uuid

import odradek.metrics  # noqa: F401 - registers the odradek.metrics.* config keys
from odradek.testing import running_broker
from odradek.tools.client import KafkaClient
from odradek.wire.protocol import request_class
from odradek.wire.records import SimpleRecord, build_batch

HEARTBEAT, SHARE_FETCH, SHARE_ACK, FIND_COORDINATOR = 76, 78, 79, 10


def _heartbeat(client: KafkaClient, member: str, epoch: int) -> object:
    cls = request_class(HEARTBEAT)
    deadline = time.monotonic() + 20
    while True:
        r = client.send(HEARTBEAT, cls(group_id="m", member_id=member, member_epoch=epoch, rack_id=None,
                                       subscribed_topic_names=["t"] if epoch == 0 else None))
        if r.error_code not in (14, 15, 16) or time.monotonic() > deadline:
            return r
        client.send(FIND_COORDINATOR, request_class(FIND_COORDINATOR)(key="m", key_type=0))
        time.sleep(0.1)


def _metrics(url: str) -> dict[str, float]:
    out = {}
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_share_group_metrics_count_acknowledgements_and_writes():
    with running_broker(odradek_metrics_port=0) as broker, KafkaClient(broker.bootstrap_servers) as client:
        create = request_class(19)
        client.send(19, create(topics=[create.CreatableTopic(name="t", num_partitions=1, replication_factor=1,
                                                             assignments=[], configs=[])],
                               timeout_ms=30000, validate_only=False))
        info = client.topic("t", wait_s=10)
        member = str(uuid.uuid4())
        r = _heartbeat(client, member, 0)
        # the partition is assigned once its share state is initialized (the next heartbeat)
        while r.error_code == 0 and not (r.assignment and r.assignment.topic_partitions):
            time.sleep(0.05)
            r = _heartbeat(client, member, r.member_epoch)
        assert r.error_code == 0
        tid = r.assignment.topic_partitions[0].topic_id
        f = request_class(SHARE_FETCH)

        def fetch(epoch: int, acks: list) -> object:
            return client.send(SHARE_FETCH, f(
                group_id="m", member_id=member, share_session_epoch=epoch, max_wait_ms=500, min_bytes=1,
                max_bytes=1 << 20, max_records=10, batch_size=10, share_acquire_mode=0,
                topics=[f.FetchTopic(topic_id=tid, partitions=[f.FetchPartition(
                    partition_index=0, acknowledgement_batches=[f.AcknowledgementBatch(
                        first_offset=a, last_offset=b, acknowledge_types=t) for a, b, t in acks])])],
                forgotten_topics_data=[]))

        fetch(0, [])  # the share-partition starts at the end of the log (latest)
        batch = build_batch([SimpleRecord(key=None, value=b"v", headers=(), timestamp=1) for _ in range(4)])
        client.produce("t", {0: bytes(batch)}, leaders={p: i.leader for p, i in info.partitions.items()})
        got = fetch(1, [])
        acquired = [(a.first_offset, a.last_offset) for a in got.responses[0].partitions[0].acquired_records]
        assert acquired == [(0, 3)]
        fetch(2, [(0, 2, [1]), (3, 3, [2])])  # three accepted, one released
        m = _metrics(broker.metrics_url)
    assert m['kafka_server_group_coordinator_metrics_group_count{protocol="share"}'] == 1
    assert m['kafka_server_group_coordinator_metrics_share_group_count{state="stable"}'] == 1
    assert m['kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="Accept",group="m"}'] == 3
    assert m['kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="Release",group="m"}'] == 1
    # the released record is in flight again: start offset 3, end offset 4
    assert m['kafka_server_sharepartitionmetrics_inflightmessagecount{group="m",partition="0",topic="t"}'] == 1
    # the initializing snapshot and one update
    assert m["kafka_server_share_coordinator_metrics_write_total"] == 2
