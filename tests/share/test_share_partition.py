"""SharePartition: acquisition, acknowledgement, locks, delivery counts, the start offset."""

from __future__ import annotations

from odradek.share_coordinator.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    SharePartition,
)
from odradek.wire.errors import ErrorCode
from odradek.wire.records import SimpleRecord, build_batch, iter_batches


def _log(batch_sizes: list[int]) -> bytes:
    """Back-to-back batches of the given sizes from offset 0."""
    out, offset = b"", 0
    for size in batch_sizes:
        out += bytes(build_batch([SimpleRecord(key=None, value=f"v{offset + i}".encode(), headers=(), timestamp=1)
                                  for i in range(size)], base_offset=offset))
        offset += size
    return out


def _reader(data: bytes):
    def read(offset: int) -> bytes:
        for batch in iter_batches(data):
            h = batch.header()
            if h.base_offset + h.last_offset_delta >= offset:
                return data[batch.position:]
        return b""
    return read


def _acquire(sp: SharePartition, member: str, data: bytes, hw: int, max_records: int = 500, now: float = 0.0,
             max_locks: int = 2000, record_limit: bool = False):
    # the kept count of locked records and set of available ones agree with the window
    _consistent(sp)
    got = sp.acquire(member, max_records, now, 30.0, max_locks, hw, _reader(data), record_limit=record_limit)
    _consistent(sp)
    return got


def _consistent(sp: SharePartition) -> None:
    assert sp.locked() == sum(1 for e in sp.window.values() if e.state == 1)
    assert sp.available() == {o for o, e in sp.window.items() if e.state == AVAILABLE}


def test_acquires_whole_batches_up_to_max_records_and_returns_their_bytes():
    data = _log([3, 3, 3])
    sp = SharePartition("g", "t", 0, None, 0)
    got = _acquire(sp, "a", data, 9, max_records=4)
    # batches are acquired whole: 4 wanted -> the first two batches, one range each (as Kafka answers)
    assert got.ranges == [(0, 2, 1), (3, 5, 1)]
    assert [b.header().base_offset for b in iter_batches(got.data)] == [0, 3]
    # another member gets the rest
    assert _acquire(sp, "b", data, 9).ranges == [(6, 8, 1)]
    assert _acquire(sp, "c", data, 9).ranges == []


def test_accept_moves_the_start_offset_release_redelivers_with_count_plus_one():
    data = _log([4])
    sp = SharePartition("g", "t", 0, None, 0)
    _acquire(sp, "a", data, 4)
    assert sp.check_acknowledge("a", 0, 3, [ACCEPT, RELEASE, ACCEPT, REJECT]) == ErrorCode.NONE
    assert sp.acknowledge("a", 0, 3, [ACCEPT, RELEASE, ACCEPT, REJECT], 0.0, 30.0, 5)
    # written first with the start offset from before the change, then the start moves
    assert sp.state_batches(changed_only=True)[0] == (0, 0, ACKNOWLEDGED, 1)
    sp.advance()
    assert sp.start_offset == 1  # offset 1 is available again
    assert sp.state_batches() == [(1, 1, AVAILABLE, 1), (2, 2, ACKNOWLEDGED, 1), (3, 3, ARCHIVED, 1)]
    got = _acquire(sp, "b", data, 4)
    assert got.ranges == [(1, 1, 2)]
    sp.acknowledge("b", 1, 1, [ACCEPT], 0.0, 30.0, 5)
    sp.advance()
    assert sp.start_offset == 4 and sp.state_batches() == []


def test_only_the_holder_may_acknowledge_and_only_acquired_records():
    data = _log([2])
    sp = SharePartition("g", "t", 0, None, 0)
    _acquire(sp, "a", data, 2)
    assert sp.check_acknowledge("b", 0, 1, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE
    assert sp.check_acknowledge("a", 0, 2, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE  # 2 not acquired
    assert sp.check_acknowledge("a", 0, 1, [ACCEPT, ACCEPT, ACCEPT]) == ErrorCode.INVALID_REQUEST
    sp.acknowledge("a", 0, 1, [ACCEPT], 0.0, 30.0, 5)
    assert sp.check_acknowledge("a", 0, 0, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE


def test_delivery_count_limit_archives_and_locks_expire():
    data = _log([1, 1])
    sp = SharePartition("g", "t", 0, None, 0)
    for delivery in range(1, 4):
        got = _acquire(sp, "a", data, 1, now=100.0 * delivery)
        assert got.ranges == [(0, 0, delivery)]
        if delivery < 3:
            sp.acknowledge("a", 0, 0, [RELEASE], 0.0, 30.0, 3)
    # the third delivery's lock runs out at the limit: archived, never delivered again
    assert not sp.expire_locks(300.0 + 29, 3)
    assert sp.expire_locks(300.0 + 30, 3)
    sp.advance()
    assert sp.start_offset == 1
    # a lock that runs out below the limit makes the record available to another member
    assert _acquire(sp, "a", data, 2, now=400.0).ranges == [(1, 1, 1)]
    sp.expire_locks(431.0, 3)
    assert _acquire(sp, "b", data, 2, now=431.0).ranges == [(1, 1, 2)]


def test_renew_extends_the_lock_and_gap_archives():
    data = _log([2])
    sp = SharePartition("g", "t", 0, None, 0)
    _acquire(sp, "a", data, 2, now=0.0)
    assert not sp.acknowledge("a", 0, 0, [RENEW], 20.0, 30.0, 5)  # nothing to persist
    sp.acknowledge("a", 1, 1, [GAP], 20.0, 30.0, 5)
    sp.expire_locks(31.0, 5)
    assert sp.check_acknowledge("a", 0, 0, [ACCEPT]) == ErrorCode.NONE  # still locked until 50
    sp.expire_locks(50.0, 5)
    assert sp.check_acknowledge("a", 0, 0, [ACCEPT]) == ErrorCode.INVALID_RECORD_STATE


def test_record_limit_mode_stops_inside_a_batch_and_leaves_the_rest_available():
    data = _log([10, 5])
    sp = SharePartition("g", "t", 0, None, 0)
    assert _acquire(sp, "a", data, 15, max_records=4, record_limit=True).ranges == [(0, 3, 1)]
    assert _acquire(sp, "b", data, 15, max_records=4, record_limit=True).ranges == [(4, 7, 1)]
    # across a batch boundary: one range per batch
    assert _acquire(sp, "b", data, 15, max_records=4, record_limit=True).ranges == [(8, 9, 1), (10, 11, 1)]
    sp.acknowledge("a", 0, 3, [RELEASE], 0.0, 30.0, 5)
    assert _acquire(sp, "a", data, 15, max_records=10, record_limit=True).ranges == [(0, 3, 2), (12, 14, 1)]


def test_max_record_locks_bounds_the_locked_records_not_the_window():
    data = _log([1] * 10)
    sp = SharePartition("g", "t", 0, None, 0)
    assert _acquire(sp, "a", data, 10, max_locks=4).ranges == [(o, o, 1) for o in range(4)]
    assert _acquire(sp, "b", data, 10, max_locks=4).ranges == []
    sp.acknowledge("a", 1, 3, [ACCEPT], 0.0, 30.0, 5)  # offset 0 stays locked: the start stays at 0
    sp.advance()
    assert _acquire(sp, "b", data, 10, max_locks=4).ranges == [(o, o, 1) for o in range(4, 7)]
    assert sp.start_offset == 0 and sp.in_flight() == 7 and sp.locked() == 4


def test_release_member_and_reload_from_state_batches():
    data = _log([3])
    sp = SharePartition("g", "t", 0, None, 0)
    _acquire(sp, "a", data, 3)
    sp.acknowledge("a", 1, 1, [ACCEPT], 0.0, 30.0, 5)
    assert sp.release_member("a", 5)
    assert sp.state_batches() == [(0, 0, AVAILABLE, 1), (1, 1, ACKNOWLEDGED, 1), (2, 2, AVAILABLE, 1)]
    again = SharePartition("g", "t", 0, None, sp.start_offset, 0, sp.state_batches())
    got = _acquire(again, "b", data, 3)
    assert got.ranges == [(0, 0, 2), (2, 2, 2)]
    assert REJECT  # the constants are the wire values


def test_read_committed_archives_aborted_transactions_and_markers():
    from odradek.wire.records import ControlRecordType, build_end_txn_marker_batch

    def txn(base: int, pid: int, n: int) -> bytes:
        return bytes(build_batch([SimpleRecord(key=None, value=b"t", headers=(), timestamp=1) for _ in range(n)],
                                 base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0,
                                 is_transactional=True))

    def marker(base: int, pid: int, kind) -> bytes:
        return build_end_txn_marker_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                          timestamp=1, base_offset=base)

    # pid 7 aborts offsets 0-1 (marker at 2); pid 8 commits 3-4 (marker at 5)
    data = (txn(0, 7, 2) + marker(2, 7, ControlRecordType.ABORT) + txn(3, 8, 2)
            + marker(5, 8, ControlRecordType.COMMIT))
    sp = SharePartition("g", "t", 0, None, 0)
    got = sp.acquire("a", 500, 0.0, 30.0, 2000, 6, _reader(data), aborted=[(7, 0)])
    assert got.ranges == [(3, 4, 1)]
    assert sp.start_offset == 3  # the aborted records and the marker are archived
    # read_uncommitted: the aborted records are delivered too, markers never
    sp = SharePartition("g", "t", 0, None, 0)
    assert _acquire(sp, "a", data, 6).ranges == [(0, 1, 1), (3, 4, 1)]
