"""AlterClientQuotas / DescribeClientQuotas on a running broker: Kafka 4.4's validation and errors,
the filter rules, persistence in the metadata log across a restart, and the throttle a client over
its quota gets (compat-tests/test_client_quotas_44.py compares kafka-configs.sh with Kafka's)."""

from __future__ import annotations

import time
from pathlib import Path

from odradek.testing import running_broker
from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class
from odradek.wire.records import SimpleRecord, build_batch

DESCRIBE, ALTER = 48, 49
A = request_class(ALTER)
D = request_class(DESCRIBE)


def alter(conn: BrokerConnection, entries: list[tuple[dict, list[tuple[str, float | None]]]],
          validate_only: bool = False, version: int = 1):
    body = A(validate_only=validate_only, entries=[
        A.EntryData(entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                    ops=[A.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops])
        for entity, ops in entries])
    response = conn.send(ALTER, body, version)
    return {tuple((e.entity_type, e.entity_name) for e in r.entity): (r.error_code, r.error_message)
            for r in response.entries}


def describe(conn: BrokerConnection, components: list[tuple[str, int, str | None]], strict: bool = False):
    response = conn.send(DESCRIBE, D(components=[D.ComponentData(entity_type=t, match_type=m, match=s)
                                                 for t, m, s in components], strict=strict), 1)
    if response.error_code:
        return response.error_code, response.error_message
    return sorted((tuple(sorted((e.entity_type, e.entity_name or "") for e in entry.entity)),
                   {v.key: v.value for v in entry.values}) for entry in response.entries)


def test_validation_errors_are_kafkas() -> None:
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            got = alter(conn, [
                ({}, [("producer_byte_rate", 1.0)]),
                ({"group": "g"}, [("producer_byte_rate", 1.0)]),
                ({"user": ""}, [("producer_byte_rate", 1.0)]),
                ({"ip": "1.2.3.4", "user": "u"}, [("connection_creation_rate", 1.0)]),
                ({"ip": "no-such-host.invalid"}, [("connection_creation_rate", 1.0)]),
                ({"user": "a"}, [("connection_creation_rate", 1.0)]),
                ({"ip": "1.2.3.4"}, [("producer_byte_rate", 1.0)]),
                ({"user": "b"}, [("producer_byte_rate", 0.0)]),
                ({"user": "c"}, [("producer_byte_rate", 1.5)]),
                ({"user": "d"}, [("producer_byte_rate", float("nan"))]),
                ({"ip": "1.2.3.5"}, [("connection_creation_rate", 3e9)]),
                ({"user": "e"}, [("request_percentage", 1.5), ("request_percentage", 2.0)]),
                ({"client-id": "f"}, [("consumer_byte_rate", 1024.0)]),
            ])
        finally:
            conn.close()
    assert got == {
        (): (42, "Invalid empty client quota entity"),
        (("group", "g"),): (42, "Unhandled client quota entity type: group"),
        (("user", ""),): (42, "Empty user not supported"),
        (("user", "u"), ("ip", "1.2.3.4")): (
            42, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
        (("ip", "no-such-host.invalid"),): (42, "no-such-host.invalid is not a valid IP or resolvable host."),
        (("user", "a"),): (42, "Invalid configuration key connection_creation_rate"),
        (("ip", "1.2.3.4"),): (42, "Invalid configuration key producer_byte_rate"),
        (("user", "b"),): (42, "Quota producer_byte_rate must be greater than 0"),
        (("user", "c"),): (42, "producer_byte_rate cannot be a fractional value."),
        (("user", "d"),): (42, "Quota producer_byte_rate must be a finite number"),
        (("ip", "1.2.3.5"),): (42, "Proposed value for connection_creation_rate is too large for an INT."),
        (("user", "e"),): (42, "Ignoring duplicate entity ClientQuotaEntity(entries={user=e})"),
        (("client-id", "f"),): (0, None),
    }


def test_describe_matching_rules_and_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_broker(log_dir=data) as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            assert alter(conn, [({"user": "alice"}, [("producer_byte_rate", 1024.0)])], validate_only=True) == {
                (("user", "alice"),): (0, None)}
            assert describe(conn, []) == []
            results = alter(conn, [
                ({"user": "alice"}, [("producer_byte_rate", 1024.0), ("request_percentage", 50.5)]),
                ({"user": None}, [("consumer_byte_rate", 2048.0)]),
                ({"user": "alice", "client-id": "c1"}, [("producer_byte_rate", 10.0)]),
                ({"client-id": None}, [("producer_byte_rate", 20.0)]),
                ({"ip": "127.0.0.1"}, [("connection_creation_rate", 100.0)]),
                ({"ip": None}, [("connection_creation_rate", 200.0)]),
            ])
            assert set(results.values()) == {(0, None)}
            alice = (("user", "alice"),)
            everything = describe(conn, [])
            assert len(everything) == 6
            assert describe(conn, [("user", 0, "alice")]) == [
                ((("client-id", "c1"), ("user", "alice")), {"producer_byte_rate": 10.0}),
                (alice, {"producer_byte_rate": 1024.0, "request_percentage": 50.5})]
            assert describe(conn, [("user", 0, "alice")], strict=True) == [
                (alice, {"producer_byte_rate": 1024.0, "request_percentage": 50.5})]
            assert describe(conn, [("user", 1, None)]) == [((("user", ""),), {"consumer_byte_rate": 2048.0})]
            assert [e for e, _ in describe(conn, [("user", 2, None)], strict=True)] == [(("user", ""),), alice]
            assert [e for e, _ in describe(conn, [("ip", 2, None)])] == [(("ip", ""),), (("ip", "127.0.0.1"),)]
            assert describe(conn, [("ip", 0, None)]) == (
                42, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            assert describe(conn, [("ip", 2, None), ("user", 2, None)]) == (
                42, "Invalid entity filter component combination. IP filter component should not be used with "
                    "user or clientId filter component.")
            assert describe(conn, [("group", 2, None)]) == (35, "Unsupported entity type group")
            assert describe(conn, [("user", 2, None), ("user", 1, None)]) == (
                42, "Entity type user cannot appear more than once in the filter.")
            # removing one key keeps the other; removing a key that is not set is no error
            assert alter(conn, [({"user": "alice"}, [("request_percentage", None), ("consumer_byte_rate", None)])]) \
                == {alice: (0, None)}
        finally:
            conn.close()
    with running_broker(log_dir=data) as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            after = describe(conn, [])
        finally:
            conn.close()
    assert dict(after)[alice] == {"producer_byte_rate": 1024.0}
    assert len(after) == 6


def test_a_producer_over_its_quota_is_throttled() -> None:
    with running_broker(auto_create_topics_enable="true") as running:
        conn = BrokerConnection(running.host, running.port, client_id="slow-producer")
        try:
            assert alter(conn, [({"client-id": "slow-producer"}, [("producer_byte_rate", 10000.0)])]) == {
                (("client-id", "slow-producer"),): (0, None)}
            create = request_class(19)
            conn.send(19, create(topics=[create.CreatableTopic(name="q", num_partitions=1, replication_factor=1)],
                                 timeout_ms=30000))
            P = request_class(0)
            batch = build_batch([SimpleRecord(value=b"x" * 60000)])
            body = P(acks=1, timeout_ms=30000, topic_data=[P.TopicProduceData(name="q", partition_data=[
                P.PartitionProduceData(index=0, records=batch)])])
            first = conn.send(0, body, 9)
            assert first.responses[0].partition_responses[0].error_code == 0
            # 60 kB over the 10 s span: 6000/s, under 10000/s; the second one is over
            assert first.throttle_time_ms == 0
            second = conn.send(0, body, 9)
            assert second.throttle_time_ms > 0
            # ~ (12000 - 10000) / 10000 * 10 s
            assert 1500 <= second.throttle_time_ms <= 2500
            # the channel is muted for the throttle time: the next answer comes after it
            started = time.monotonic()
            conn.send(18, request_class(18)(), 0)
            assert time.monotonic() - started >= second.throttle_time_ms / 1000 * 0.9
        finally:
            conn.close()


def test_connections_over_an_ip_rate_are_closed_unserved() -> None:
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port)
        try:
            assert alter(conn, [({"ip": "127.0.0.1"}, [("connection_creation_rate", 1.0)])]) == {
                (("ip", "127.0.0.1"),): (0, None)}
        finally:
            conn.close()
        served, refused = 0, 0
        # 1 connection/s over the 10 s span the rate starts with: the first 10 are served (the one
        # above was counted before the quota existed), the next ones are held, then closed
        for _ in range(12):
            try:
                c = BrokerConnection(running.host, running.port, timeout=5)
                c.send(18, request_class(18)(), 0)
                c.close()
                served += 1
            except (OSError, ConnectionError, EOFError):
                refused += 1
        assert (served, refused) == (10, 2)


def test_a_consumer_over_its_quota_gets_an_empty_throttled_fetch() -> None:
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port, client_id="slow-consumer")
        try:
            create = request_class(19)
            conn.send(19, create(topics=[create.CreatableTopic(name="f", num_partitions=1, replication_factor=1)],
                                 timeout_ms=30000))
            P = request_class(0)

            def produce() -> None:
                body = P(acks=1, timeout_ms=30000, topic_data=[P.TopicProduceData(name="f", partition_data=[
                    P.PartitionProduceData(index=0, records=build_batch([SimpleRecord(value=b"y" * 40000)]))])])
                assert conn.send(0, body, 9).responses[0].partition_responses[0].error_code == 0

            for _ in range(3):
                produce()
            assert alter(conn, [({"client-id": "slow-consumer"}, [("consumer_byte_rate", 20000.0)])]) == {
                (("client-id", "slow-consumer"),): (0, None)}
            F = request_class(1)

            def fetch(offset: int):
                return conn.send(1, F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                      session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic="f", partitions=[
                                          F.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                                                           current_leader_epoch=-1, log_start_offset=-1)])],
                                      forgotten_topics_data=[], rack_id=""), 11)

            first = fetch(0)
            # 120 kB over the 10 s span the rate starts with: 12000 B/s, within 20000
            assert first.throttle_time_ms == 0
            assert 120000 < len(first.responses[0].partitions[0].records) < 121000
            for _ in range(3):
                produce()
            second = fetch(3)
            # another 120 kB would make it 24000 B/s: answered empty, throttled ~ (24000 - 20000) / 20000 * 10 s
            assert second.responses == []
            assert 1500 <= second.throttle_time_ms <= 2500
        finally:
            conn.close()


def test_request_percentage_throttles_any_request_for_at_most_one_window() -> None:
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port, client_id="busy")
        try:
            assert alter(conn, [({"client-id": "busy"}, [("request_percentage", 0.0001)])]) == {
                (("client-id", "busy"),): (0, None)}
            M = request_class(3)
            # any request takes well over 0.0001 % of a second's thread time over the 10 s span
            answer = conn.send(3, M(topics=None, allow_auto_topic_creation=False), 12)
            assert 0 < answer.throttle_time_ms <= 1000
        finally:
            conn.close()


def test_a_default_user_quota_applies_to_the_anonymous_principal() -> None:
    # without authentication the principal is User:ANONYMOUS; the <default> user quota is its
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port, client_id="anyone")
        try:
            assert alter(conn, [({"user": None}, [("producer_byte_rate", 10000.0)])]) == {
                (("user", None),): (0, None)}
            create = request_class(19)
            conn.send(19, create(topics=[create.CreatableTopic(name="u", num_partitions=1, replication_factor=1)],
                                 timeout_ms=30000))
            P = request_class(0)
            body = P(acks=1, timeout_ms=30000, topic_data=[P.TopicProduceData(name="u", partition_data=[
                P.PartitionProduceData(index=0, records=build_batch([SimpleRecord(value=b"z" * 60000)]))])])
            assert conn.send(0, body, 9).throttle_time_ms == 0
            assert conn.send(0, body, 9).throttle_time_ms > 0
            # a user quota for ANONYMOUS itself is more specific: a far larger one lifts the throttle
            assert alter(conn, [({"user": "ANONYMOUS"}, [("producer_byte_rate", 1e9)])]) == {
                (("user", "ANONYMOUS"),): (0, None)}
            assert conn.send(0, body, 9).throttle_time_ms == 0
        finally:
            conn.close()


def test_request_percentage_counts_handling_not_waiting() -> None:
    with running_broker() as running:
        conn = BrokerConnection(running.host, running.port, client_id="poller")
        try:
            create = request_class(19)
            conn.send(19, create(topics=[create.CreatableTopic(name="w", num_partitions=1, replication_factor=1)],
                                 timeout_ms=30000))
            # 5 % of a thread: 0.5 s of handling over the 10 s span the rate starts with
            assert alter(conn, [({"client-id": "poller"}, [("request_percentage", 5.0)])]) == {
                (("client-id", "poller"),): (0, None)}
            F = request_class(1)
            body = F(replica_id=-1, max_wait_ms=1500, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                     session_epoch=-1, topics=[F.FetchTopic(topic="w", partitions=[F.FetchPartition(
                         partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                         log_start_offset=-1)])], forgotten_topics_data=[], rack_id="")
            started = time.monotonic()
            for _ in range(2):
                answer = conn.send(1, body, 11)
                # 1.5 s of long poll each (30 % of the span if it counted), a millisecond of work
                assert answer.throttle_time_ms == 0
            assert time.monotonic() - started >= 2.9
        finally:
            conn.close()
