"""ACL bindings are part of the metadata image (Kafka's AclsImage): replayed from the log and from
snapshots, removed by RemoveAccessControlEntryRecord, dropped with an aborted metadata transaction,
and written back by ``MetadataImage.acl_records`` so a snapshot of the image keeps them (#13)."""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.kraft.image import MetadataImage
from odradek.kraft.log import MetadataLog
from odradek.kraft.records import MetadataRecord, new_record
from odradek.kraft.snapshot import SnapshotId, build_snapshot, read_snapshot, write_atomically
from odradek.kraft.store import MetadataStore
from odradek.security.acl import (
    OP_READ,
    OP_WRITE,
    PERM_ALLOW,
    PT_LITERAL,
    PT_PREFIXED,
    RT_GROUP,
    RT_TOPIC,
    AclBinding,
    AclFilter,
    Authorizer,
)
from odradek.wire.primitives import Uuid

DIR_ID = Uuid.from_base64("yYuMrFRVQVSX0VVQPcMSrA")


def _acl(name: str, op: int = OP_READ, acl_id: bytes | None = None) -> MetadataRecord:
    return MetadataRecord("AccessControlEntryRecord", 0, new_record(
        "AccessControlEntryRecord", id=Uuid(acl_id or uuid.uuid4().bytes), resource_type=RT_TOPIC,
        resource_name=name, pattern_type=PT_LITERAL, principal="User:alice", host="*", operation=op,
        permission_type=PERM_ALLOW))


def test_image_replays_acl_records() -> None:
    image = MetadataImage()
    keep, gone = _acl("keep"), _acl("gone")
    image.replay_all([keep, gone, MetadataRecord("RemoveAccessControlEntryRecord", 0, new_record(
        "RemoveAccessControlEntryRecord", id=gone.message.id))])
    # records of an aborted metadata transaction never apply
    image.replay_all([MetadataRecord("BeginTransactionRecord", 0, new_record("BeginTransactionRecord", name="x")),
                      _acl("aborted"), MetadataRecord("AbortTransactionRecord", 0,
                                                      new_record("AbortTransactionRecord", reason="test"))])
    assert [m.resource_name for _n, m in image.acl_records()] == ["keep"]
    # a snapshot of the image's ACL records rebuilds the same ACLs
    again = MetadataImage()
    again.replay_all(read_snapshot_bytes(build_snapshot(image.acl_records(), epoch=1, timestamp=0)))
    assert {bytes(k): m.resource_name for k, m in again.acls.items()} == {bytes(keep.message.id.bytes): "keep"}


def read_snapshot_bytes(data: bytes) -> list[MetadataRecord]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.checkpoint"
        path.write_bytes(data)
        return list(read_snapshot(path))


class _Config:
    def __init__(self, values: dict[str, object]) -> None:
        self.values = values

    def get(self, key: str) -> object:
        return self.values.get(key)


class _Broker:
    def __init__(self, store: MetadataStore) -> None:
        self.config = _Config({"authorizer.class.name": "StandardAuthorizer"})
        self.metadata_store = store


def _store(path: Path) -> MetadataStore:
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    store = MetadataStore(path, 1, {path: DIR_ID}, lambda: next(clock))
    store.listeners = [("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    store.start()
    return store


def test_acls_survive_a_metadata_snapshot(tmp_path: Path) -> None:
    store = _store(tmp_path)
    auth = Authorizer(_Broker(store))
    kept = AclBinding(RT_TOPIC, "orders", PT_LITERAL, "User:alice", "*", OP_WRITE, PERM_ALLOW)
    removed = AclBinding(RT_GROUP, "g", PT_PREFIXED, "User:alice", "*", OP_READ, PERM_ALLOW)
    auth.create([kept, removed])
    auth.delete(AclFilter(RT_GROUP, "g", PT_PREFIXED, None, None, 1, 1))
    assert [m.resource_name for _n, m in store.image.acl_records()] == ["orders"]
    store.close()

    # compact the log into a snapshot as a controller would: every non-ACL record of the log, then the
    # image's ACL state (no RemoveAccessControlEntryRecord, no deleted binding)
    md = MetadataLog.open(tmp_path)
    others = [(r.name, r.message) for r in md.replay_records()
              if r.message is not None and "AccessControlEntry" not in r.name]
    end, epoch = md.log_end_offset, md.last_epoch()
    md.plog.close_handlers()
    image = MetadataImage()
    image.replay_all(MetadataRecord(n, 0, m) for n, m in others)
    image.acls = dict(store.image.acls)
    data = build_snapshot(others + image.acl_records(), epoch=epoch, timestamp=0)
    write_atomically(md.dir / SnapshotId(end, epoch).file_name, data)
    assert sum(r.name == "AccessControlEntryRecord" for r in read_snapshot(md.dir / SnapshotId(end, epoch).file_name)) == 1

    again = _store(tmp_path)
    assert again.log.latest_snapshot() == SnapshotId(end, epoch)
    auth = Authorizer(_Broker(again))
    assert list(auth.bindings) == [kept]
    assert auth.authorize("User:alice", "h", OP_WRITE, RT_TOPIC, "orders")
    # the next change still appends to the log on top of the snapshot
    auth.delete(AclFilter(RT_TOPIC, "orders", PT_LITERAL, None, None, 1, 1))
    again.close()
    third = _store(tmp_path)
    assert Authorizer(_Broker(third)).bindings == {}
    third.close()
