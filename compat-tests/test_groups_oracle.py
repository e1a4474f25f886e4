"""The same raw group requests against real Kafka 4.1.1 and Odradek: every error code, state and
generation must be the same (issue #5: "errors exactly as Kafka returns them")."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class
from odradek.wire.schema import codec, message_class, message_def

FIND, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, COMMIT, FETCH, DELETE, OFFSET_DELETE = (
    10, 11, 12, 13, 14, 15, 16, 8, 9, 42, 47)
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def _strip(obj: Any, fields: list, structs: dict, version: int) -> Any:
    for f in fields:
        present = f.versions is not None and f.versions[0] <= version <= f.versions[1]
        value = getattr(obj, f.attr)
        if not present:
            setattr(obj, f.attr, type(obj)().__getattribute__(f.attr))
        elif f.struct is not None and value is not None:
            for item in value if f.is_array else [value]:
                _strip(item, structs[f.struct].fields, structs, version)
    return obj


class RawClient:
    """One connection, one request at a time, bodies built from Odradek's generated classes."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.corr = 0

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        cls = request_class(api_key)
        mdef = message_def(cls.__name__)
        body = _strip(cls(**fields), mdef.root.fields, mdef.structs, version)
        self.corr += 1
        self.sock.sendall(join_pieces(encode_request(version, self.corr, body, client_id="oracle")))
        size = struct.unpack(">i", self._read(4))[0]
        corr, response = decode_response(self._read(size), api_key, version)
        assert corr == self.corr
        return response

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


def _subscription(*topics: str) -> bytes:
    cls = message_class("ConsumerProtocolSubscription")
    return b"\x00\x00" + codec("ConsumerProtocolSubscription", 0).encode_bytes(cls(topics=list(topics)))


def scenario(bootstrap: str) -> list[tuple[str, Any]]:
    """Error codes (and a few states) of a fixed sequence of group requests."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("ot", 2, 1)])
    admin.close()
    c = RawClient(bootstrap)
    out: list[tuple[str, Any]] = []
    Join, Sync, Leave = request_class(JOIN), request_class(SYNC), request_class(LEAVE)
    Commit, Fetch, ODel = request_class(COMMIT), request_class(FETCH), request_class(OFFSET_DELETE)
    deadline = time.monotonic() + 60
    while True:  # Kafka creates and loads __consumer_offsets first
        found = c.call(FIND, 4, key_type=0, coordinator_keys=["og"])
        if found.coordinators[0].error_code not in RETRIABLE or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out.append(("find", found.coordinators[0].error_code))
    protocols = [Join.JoinGroupRequestProtocol(name="range", metadata=_subscription("ot"))]
    join = dict(group_id="og", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                protocol_type="consumer", protocols=protocols)
    while True:
        first = c.call(JOIN, 9, **join)
        if first.error_code not in RETRIABLE or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out.append(("join new member", first.error_code))
    out.append(("join bad session timeout", c.call(JOIN, 9, **{**join, "session_timeout_ms": 1}).error_code))
    out.append(("join empty group id", c.call(JOIN, 9, **{**join, "group_id": ""}).error_code))
    out.append(("join unknown member", c.call(JOIN, 9, **{**join, "member_id": "nobody"}).error_code))
    joined = c.call(JOIN, 9, **{**join, "member_id": first.member_id})
    member = joined.member_id
    out.append(("join", (joined.error_code, joined.generation_id, joined.leader == member, len(joined.members))))
    out.append(("join other protocol type", c.call(JOIN, 9, **{**join, "protocol_type": "connect"}).error_code))

    def sync(**kw: Any) -> int:
        args = dict(group_id="og", generation_id=1, member_id=member, protocol_type="consumer",
                    protocol_name="range", assignments=[])
        args.update(kw)
        return c.call(SYNC, 5, **args).error_code

    out.append(("sync unknown group", sync(group_id="nope")))
    out.append(("sync unknown member", sync(member_id="nobody")))
    out.append(("sync wrong generation", sync(generation_id=7)))
    out.append(("sync other protocol", sync(protocol_name="roundrobin")))
    out.append(("commit while completing", c.call(COMMIT, 9, group_id="og", generation_id_or_member_epoch=1,
                                                  member_id=member, topics=[Commit.OffsetCommitRequestTopic(
                                                      name="ot", partitions=[Commit.OffsetCommitRequestPartition(
                                                          partition_index=0, committed_offset=1)])]
                                                  ).topics[0].partitions[0].error_code))
    out.append(("sync", sync(assignments=[Sync.SyncGroupRequestAssignment(member_id=member, assignment=b"")])))

    def beat(**kw: Any) -> int:
        args = dict(group_id="og", generation_id=1, member_id=member)
        args.update(kw)
        return c.call(HEARTBEAT, 4, **args).error_code

    out += [("heartbeat", beat()), ("heartbeat wrong generation", beat(generation_id=3)),
            ("heartbeat unknown member", beat(member_id="x")), ("heartbeat unknown group", beat(group_id="nope")),
            ("heartbeat empty group id", beat(group_id=""))]

    def commit(version: int, group: str, generation: int, member_id: str, topic: str = "ot", partition: int = 0,
               metadata: str | None = "m") -> list[int]:
        r = c.call(COMMIT, version, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                   retention_time_ms=-1, topics=[Commit.OffsetCommitRequestTopic(name=topic, partitions=[
                       Commit.OffsetCommitRequestPartition(partition_index=partition, committed_offset=5,
                                                           committed_metadata=metadata)])])
        return [p.error_code for t in r.topics for p in t.partitions]

    out += [
        ("commit", commit(9, "og", 1, member)),
        ("commit unknown topic", commit(9, "og", 1, member, topic="nope")),
        ("commit stale generation", commit(9, "og", 0, member)),
        ("commit unknown member", commit(9, "og", 1, "x")),
        ("commit without generation to a live group", commit(9, "og", -1, "")),
        ("commit to missing group v9", commit(9, "missing", 3, "m")),
        ("commit to missing group v8", commit(8, "missing", 3, "m")),
        ("commit simple group", commit(8, "simple", -1, "")),
        ("commit metadata too large", commit(8, "simple", -1, "", metadata="x" * 5000)),
        ("commit empty group id", commit(8, "", -1, "")),
    ]
    fetched = c.call(FETCH, 9, groups=[
        Fetch.OffsetFetchRequestGroup(group_id="og", topics=[Fetch.OffsetFetchRequestTopics(name="ot",
                                                                                               partition_indexes=[0, 1])]),
        Fetch.OffsetFetchRequestGroup(group_id="nope", topics=None),
        Fetch.OffsetFetchRequestGroup(group_id="", topics=None)])
    out.append(("fetch", [(g.group_id, g.error_code, [(t.name, [(p.partition_index, p.committed_offset, p.metadata,
                                                                  p.error_code) for p in t.partitions])
                                                      for t in g.topics]) for g in fetched.groups]))
    for version in (5, 6):
        d = c.call(DESCRIBE, version, groups=["og", "nope", ""])
        out.append((f"describe v{version}", [(g.group_id, g.error_code, g.group_state, g.protocol_type,
                                              g.protocol_data, len(g.members)) for g in d.groups]))
    listed = c.call(LIST, 5, states_filter=["stable"])
    out.append(("list stable", sorted(g.group_id for g in listed.groups)))
    deleted = c.call(DELETE, 2, groups_names=["og", "nope"])
    out.append(("delete live", [(r.group_id, r.error_code) for r in deleted.results]))
    odel = c.call(OFFSET_DELETE, 0, group_id="og", topics=[ODel.OffsetDeleteRequestTopic(
        name="ot", partitions=[ODel.OffsetDeleteRequestPartition(partition_index=0)])])
    out.append(("offset delete subscribed", (odel.error_code, odel.topics[0].partitions[0].error_code)))
    odel = c.call(OFFSET_DELETE, 0, group_id="nope", topics=[])
    out.append(("offset delete missing group", odel.error_code))
    leave = c.call(LEAVE, 5, group_id="nope", members=[Leave.MemberIdentity(member_id="x")])
    out.append(("leave unknown group", (leave.error_code, [m.error_code for m in leave.members])))
    leave = c.call(LEAVE, 5, group_id="og", members=[Leave.MemberIdentity(member_id=member),
                                                     Leave.MemberIdentity(member_id="x")])
    out.append(("leave", (leave.error_code, [m.error_code for m in leave.members])))
    leave = c.call(LEAVE, 2, group_id="og", member_id=member)
    out.append(("leave v2 again", leave.error_code))
    d = c.call(DESCRIBE, 5, groups=["og"])
    out.append(("describe after leave", [(g.group_state, g.protocol_type, g.protocol_data) for g in d.groups]))
    out.append(("heartbeat after leave", beat()))
    out.append(("sync after leave", sync()))
    deleted = c.call(DELETE, 2, groups_names=["og", "simple", ""])
    # (sorted: Kafka 4.1's order of successful deletions across partitions is not modelled)
    out.append(("delete empty", sorted((r.group_id, r.error_code) for r in deleted.results)))
    listed = c.call(LIST, 5)
    out.append(("list after delete", sorted(g.group_id for g in listed.groups)))
    names = [f"g{i}" for i in range(12)]
    out.append(("describe order", [g.group_id for g in c.call(DESCRIBE, 5, groups=names).groups]))
    out.append(("delete order", [(r.group_id, r.error_code) for r in c.call(DELETE, 2, groups_names=names).results]))
    c.close()
    return out


def test_group_error_codes_match_kafka(kafka_broker_factory, odradek_broker_factory):
    kafka = kafka_broker_factory(overrides={"offsets.topic.num.partitions": "3"})
    expected = scenario(kafka.bootstrap)
    odradek = odradek_broker_factory(overrides={"group.initial.rebalance.delay.ms": "0",
                                                "offsets.topic.num.partitions": "3"})
    got = scenario(odradek.bootstrap)
    mismatches = [(e[0], e[1], g[1]) for e, g in zip(expected, got, strict=True) if e != g]
    assert not mismatches, "\n".join(f"{label}: kafka {k!r} odradek {o!r}" for label, k, o in mismatches)
