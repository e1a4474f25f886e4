"""The controller of a cluster on a real metadata log: registration, unfencing, fencing on an expired
session, controlled shutdown, placement, and the metadata log served to observers (Fetch)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from odradek.cluster_metadata import Topic, random_uuid
from odradek.kraft.log import METADATA_TOPIC, METADATA_TOPIC_ID, MetadataLog
from odradek.kraft.quorum_controller import QuorumController
from odradek.kraft.store import MetadataStore, supported_feature_ranges
from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import request_class
from odradek.wire.records import iter_batches

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
Registration = request_class(62)
Heartbeat = request_class(63)
Fetch = request_class(1)


def _controller(path: Path) -> tuple[MetadataStore, QuorumController]:
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    store = MetadataStore(path, 1, {path: random_uuid()}, lambda: next(clock))
    store.is_broker = False
    store.serves_brokers = True
    store.start()
    return store, QuorumController(store, CLUSTER, 1, session_timeout_ms=9000)


def _register(controller: QuorumController, broker_id: int, incarnation=None) -> tuple[ErrorCode, int]:
    req = Registration(
        broker_id=broker_id, cluster_id=CLUSTER, incarnation_id=incarnation or random_uuid(),
        listeners=[Registration.Listener(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id,
                                         security_protocol=0)],
        features=[Registration.Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                  for n, (lo, hi) in supported_feature_ranges().items()],
        rack=None, log_dirs=[random_uuid()], previous_broker_epoch=-1)
    error, epoch, _ = controller.cluster.register(req)
    return error, epoch


def _beat(controller: QuorumController, broker_id: int, epoch: int, offset: int, **flags) -> tuple:
    req = Heartbeat(broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=offset,
                    want_fence=flags.get("want_fence", False), want_shut_down=flags.get("want_shut_down", False),
                    offline_log_dirs=[])
    return controller.cluster.heartbeat(req)


def _run(func) -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    trio.run(func, clock=clock)


def test_a_broker_registers_fenced_and_is_unfenced_once_caught_up(tmp_path: Path) -> None:
    async def main() -> None:
        store, controller = _controller(tmp_path)
        error, epoch = _register(controller, 2)
        assert error == ErrorCode.NONE and epoch >= 0
        assert store.image.brokers[2].fenced
        # not caught up with its own registration yet: stays fenced
        assert _beat(controller, 2, epoch, epoch - 1) == (ErrorCode.NONE, False, True, False)
        assert _beat(controller, 2, epoch, epoch) == (ErrorCode.NONE, True, False, False)
        assert not store.image.brokers[2].fenced
        assert _beat(controller, 2, epoch + 1, epoch)[0] == ErrorCode.STALE_BROKER_EPOCH
        assert _beat(controller, 7, 0, 0)[0] == ErrorCode.BROKER_ID_NOT_REGISTERED
        store.close()

    _run(main)


def test_a_second_incarnation_is_refused_while_the_first_is_alive(tmp_path: Path) -> None:
    async def main() -> None:
        store, controller = _controller(tmp_path)
        _e, epoch = _register(controller, 2)
        _beat(controller, 2, epoch, epoch)
        assert _register(controller, 2)[0] == ErrorCode.DUPLICATE_BROKER_REGISTRATION
        store.close()

    _run(main)


def test_partitions_are_spread_and_follow_their_broker_through_fencing(tmp_path: Path) -> None:
    async def main() -> None:
        store, controller = _controller(tmp_path)
        epochs = {}
        for b in (2, 3, 4):
            _e, epochs[b] = _register(controller, b)
        for b in (2, 3, 4):
            _beat(controller, b, epochs[b], store.log.log_end_offset)
        store.record("create", Topic("t", random_uuid(), 6, {}))
        parts = store.image.topic("t").partitions
        assert {p.leader for p in parts.values()} == {2, 3, 4}
        mine = [i for i, p in parts.items() if p.leader == 3]
        # broker 3 goes quiet: fenced once its session expires, its partitions without a leader
        await trio.sleep(5)
        for b in (2, 4):
            _beat(controller, b, epochs[b], store.log.log_end_offset)
        await trio.sleep(5)
        controller.cluster.expire_sessions()
        assert store.image.brokers[3].fenced and not store.image.brokers[2].fenced
        assert all(parts[i].leader == -1 for i in mine)
        # it comes back (same registration) and leads them again
        _beat(controller, 3, epochs[3], store.log.log_end_offset)
        assert all(parts[i].leader == 3 for i in mine)
        store.close()

    _run(main)


def test_controlled_shutdown_moves_leadership_then_lets_the_broker_go(tmp_path: Path) -> None:
    async def main() -> None:
        store, controller = _controller(tmp_path)
        epochs = {b: _register(controller, b)[1] for b in (2, 3)}
        for b in (2, 3):
            _beat(controller, b, epochs[b], store.log.log_end_offset)
        store.record("create", Topic("t", random_uuid(), 4, {}))
        mine = [i for i, p in store.image.topic("t").partitions.items() if p.leader == 2]
        assert mine
        _e, _c, fenced, go = _beat(controller, 2, epochs[2], store.log.log_end_offset, want_shut_down=True)
        assert not go and not fenced  # broker 3 has not seen the change yet
        assert all(store.image.topic("t").partitions[i].leader == -1 for i in mine)
        _beat(controller, 3, epochs[3], store.log.log_end_offset - 1)
        _e, _c, fenced, go = _beat(controller, 2, epochs[2], store.log.log_end_offset, want_shut_down=True)
        assert go and fenced
        store.close()

    _run(main)


def _fetch(offset: int, last_epoch: int, epoch: int, wait_ms: int = 0):
    part = Fetch.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=offset,
                                last_fetched_epoch=last_epoch, log_start_offset=-1, partition_max_bytes=0)
    return Fetch(cluster_id=CLUSTER, replica_id=-1, replica_state=Fetch.ReplicaState(replica_id=2, replica_epoch=-1),
                 max_wait_ms=wait_ms, min_bytes=0, max_bytes=8 << 20, isolation_level=0, session_id=0,
                 session_epoch=-1, topics=[Fetch.FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID,
                                                            partitions=[part])])


def _records(part) -> bytes:
    out = b""
    for s in part.records or []:
        out += __import__("os").pread(s.file.fileno(), s.size, s.position)
    return out


def test_the_metadata_log_is_served_as_it_is_on_disk(tmp_path: Path) -> None:
    async def main() -> None:
        store, controller = _controller(tmp_path)
        _e, broker_epoch = _register(controller, 2)
        _beat(controller, 2, broker_epoch, store.log.log_end_offset)
        epoch = store.epoch
        stale = (await controller.raft.fetch(_fetch(0, 0, epoch - 1), 17, [])).responses[0].partitions[0]
        assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH and stale.current_leader.leader_id == 1
        future = (await controller.raft.fetch(_fetch(0, 0, epoch + 1), 17, [])).responses[0].partitions[0]
        assert future.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        part = (await controller.raft.fetch(_fetch(0, 0, epoch), 17, [])).responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == store.log.log_end_offset
        got = [(b.header().base_offset, bytes(b._mv)) for b in iter_batches(_records(part))]  # noqa: SLF001
        md = MetadataLog.open(tmp_path)
        try:
            on_disk = [(b.header().base_offset, bytes(b._mv))  # noqa: SLF001
                       for seg in sorted(md.dir.glob("*.log")) for b in iter_batches(seg.read_bytes())]
        finally:
            md.plog.close_handlers()
        assert got == on_disk
        # a fetcher that ended an epoch the leader never had is told where to truncate
        end = store.log.log_end_offset
        diverged = (await controller.raft.fetch(_fetch(end + 5, epoch, epoch), 17, [])).responses[0].partitions[0]
        assert diverged.diverging_epoch.epoch == epoch and diverged.diverging_epoch.end_offset == end
        # caught up: the fetch waits for the next append, then returns it
        async with trio.open_nursery() as nursery:
            result = {}

            async def wait() -> None:
                resp = await controller.raft.fetch(_fetch(end, epoch, epoch, wait_ms=500), 17, [])
                result["part"] = resp.responses[0].partitions[0]

            nursery.start_soon(wait)
            await trio.sleep(0.1)
            store.record("create", Topic("late", random_uuid(), 1, {}))
        assert result["part"].records and result["part"].high_watermark == store.log.log_end_offset
        store.close()

    _run(main)
