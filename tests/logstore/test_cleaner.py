"""The log cleaner: what stays after compaction, tombstones and delete horizons, transactions,
the cleaner checkpoint, grouping, and crashes at every file-system step of a cleaning."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from odradek.logstore import LogConfig, LogManager, PartitionLog
from odradek.logstore.cleaner import (
    CleanerConfig,
    LogCleaner,
    SimulatedCrash,
    Throttler,
    cleanable_offsets,
)
from odradek.logstore.offset_map import OffsetMap
from odradek.wire.records import (
    ControlRecordType,
    SimpleRecord,
    build_batch,
    build_end_txn_marker_batch,
    iter_batches,
)

TOPIC_ID = bytes(range(1, 17))
T0 = 1_700_000_000_000

BASE_PROPS = {
    "cleanup.policy": "compact",
    "segment.bytes": "3000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "0",
    "index.interval.bytes": "500",
}


def open_manager(path: Path, props: dict[str, str] | None = None) -> tuple[LogManager, PartitionLog]:
    cfg = LogConfig.from_props({**BASE_PROPS, **(props or {})})
    mgr = LogManager([path], LogConfig(), topic_config=lambda _t: cfg)
    mgr.startup()
    lg = mgr.create_log("t", 0, TOPIC_ID, cfg)
    lg.become_leader(0)
    return mgr, lg


def append(lg: PartitionLog, items: list[tuple[bytes, bytes | None]], ts: int = T0) -> None:
    recs = [SimpleRecord(v, k, (), ts + i) for i, (k, v) in enumerate(items)]
    lg.append_as_leader(bytearray(build_batch(recs)), 0, ts)


def all_batches(lg: PartitionLog) -> list:
    out = []
    for seg in lg.segments:
        data = os.pread(seg.fileno(), seg.size, 0)
        out += [(seg.base_offset, b) for b in iter_batches(data)]
    return out


def all_records(lg: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _base, b in all_batches(lg) for r in b.records()]


def latest_view(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, bytes]:
    view: dict[bytes, bytes] = {}
    for _off, k, v in records:
        assert k is not None
        if v is None:
            view.pop(k, None)
        else:
            view[k] = v
    return view


def feed(lg: PartitionLog, n_keys: int = 40, rounds: int = 8, seed: int = 1, tombstone_every: int = 7,
         ts: int = T0) -> list[tuple[int, bytes | None, bytes | None]]:
    """Many updates per key in batches of 5, a tombstone now and then; the active segment is rolled
    so everything is cleanable. Returns the records as written."""
    rng = random.Random(seed)
    pending: list[tuple[bytes, bytes | None]] = []
    step = 0
    for r in range(rounds):
        keys = list(range(n_keys))
        rng.shuffle(keys)
        for k in keys:
            step += 1
            value = None if step % tombstone_every == 0 else f"v{r}-{k}-{rng.random():.6f}".encode()
            pending.append((f"key-{k}".encode(), value))
            if len(pending) == 5:
                append(lg, pending, ts + step)
                pending = []
    if pending:
        append(lg, pending, ts + step)
    lg.roll()
    return all_records(lg)


def run_clean(mgr: LogManager, now: int, **kw) -> LogCleaner:
    cleaner = LogCleaner(mgr, CleanerConfig(), **kw)
    cleaner.clean_filthiest(now)
    return cleaner


def test_compaction_keeps_the_latest_value_of_each_key(tmp_path: Path) -> None:
    mgr, lg = open_manager(tmp_path)
    before = feed(lg)
    size_before = lg.size_in_bytes()
    leo = lg.log_end_offset
    cleaner = run_clean(mgr, T0 + 10_000)
    after = all_records(lg)
    assert cleaner.rounds == 1
    # offsets unchanged and increasing; every kept record is the original one at that offset
    offsets = [o for o, _k, _v in after]
    assert offsets == sorted(set(offsets))
    original = {o: (k, v) for o, k, v in before}
    assert all(original[o] == (k, v) for o, k, v in after)
    # exactly the last record of each key, tombstones included (their horizon has not passed)
    last_of_key = {k: o for o, k, _v in before}
    assert sorted(offsets) == sorted(last_of_key.values())
    assert latest_view(after) == latest_view(before)
    assert lg.log_end_offset == leo and lg.log_start_offset == 0
    assert lg.size_in_bytes() < size_before / 3
    # cleaner-offset-checkpoint holds the next first dirty offset (the active segment's base)
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == f"0\n1\nt 0 {leo}\n"
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".cleaned", ".swap", ".deleted")]
    mgr.shutdown()


def test_tombstones_get_a_delete_horizon_then_go(tmp_path: Path) -> None:
    mgr, lg = open_manager(tmp_path)
    before = feed(lg)
    run_clean(mgr, T0 + 10_000)
    tomb_batches = [b for _s, b in all_batches(lg) if any(r.value is None for r in b.records())]
    assert tomb_batches and all(b.header().attributes & 0x40 for b in tomb_batches)
    assert all(b.header().base_timestamp == T0 + 10_000 + 1000 for b in tomb_batches)
    # batches that kept every record and hold no tombstone are the original bytes
    originals = {b.header().base_offset: bytes(b.buffer) for _s, b in all_batches(lg)}
    assert originals
    # new dirty data after the horizon: the next round drops the tombstones
    append(lg, [(b"key-0", b"late")], T0 + 20_000)
    lg.roll()
    run_clean(mgr, T0 + 20_000)
    after = all_records(lg)
    assert all(v is not None for _o, _k, v in after)
    want = latest_view(before)
    want[b"key-0"] = b"late"
    assert latest_view(after) == want
    assert len(after) == len(want)
    mgr.shutdown()


def test_fully_retained_batches_are_copied_byte_for_byte(tmp_path: Path) -> None:
    mgr, lg = open_manager(tmp_path)
    for i in range(30):
        append(lg, [(f"u{i}-{j}".encode(), f"val{j}".encode()) for j in range(4)], T0 + i)
    append(lg, [(b"u0-0", b"new")], T0 + 100)  # makes exactly one record of the first batch obsolete
    lg.roll()
    before = {b.header().base_offset: bytes(b.buffer) for _s, b in all_batches(lg)}
    run_clean(mgr, T0 + 1000)
    after = {b.header().base_offset: bytes(b.buffer) for _s, b in all_batches(lg)}
    assert set(after) == set(before)
    changed = [o for o in after if after[o] != before[o]]
    assert changed == [0]
    first = next(b for _s, b in all_batches(lg) if b.header().base_offset == 0)
    h = first.header()
    # rebuilt: same base offset and last offset delta, 3 records, offsets 1..3
    assert (h.base_offset, h.last_offset_delta, h.record_count) == (0, 3, 3)
    assert [r.offset for r in first.records()] == [1, 2, 3]
    first.ensure_valid()
    mgr.shutdown()


def test_dirty_ratio_and_compaction_lag_decide(tmp_path: Path) -> None:
    mgr, lg = open_manager(tmp_path, {"min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "60000"})
    feed(lg, ts=T0)
    cleaner = LogCleaner(mgr, CleanerConfig())
    # everything is younger than the lag: nothing is cleanable
    first_dirty, uncleanable, _ = cleanable_offsets(lg, None, T0 + 1000)
    assert first_dirty == 0 and uncleanable == 0
    assert not cleaner.clean_filthiest(T0 + 1000)
    assert cleaner.clean_filthiest(T0 + 120_000)
    # clean now: the dirty ratio is 0 until new data comes
    assert not cleaner.clean_filthiest(T0 + 130_000)
    mgr.shutdown()


def test_aborted_transactions_and_markers(tmp_path: Path) -> None:
    mgr, lg = open_manager(tmp_path)
    txn = {"producer_id": 9, "producer_epoch": 0, "is_transactional": True}
    lg.append_as_leader(bytearray(build_batch([SimpleRecord(b"aborted", b"k1", (), T0)], base_sequence=0, **txn)),
                        0, T0)
    lg.append_as_coordinator(bytearray(build_end_txn_marker_batch(
        ControlRecordType.ABORT, producer_id=9, producer_epoch=0, coordinator_epoch=1, timestamp=T0)), 0, T0)
    append(lg, [(b"k1", b"live"), (b"k2", b"x")], T0 + 1)
    lg.append_as_leader(bytearray(build_batch([SimpleRecord(b"committed", b"k3", (), T0 + 2)], base_sequence=1,
                                              **txn)), 0, T0)
    lg.append_as_coordinator(bytearray(build_end_txn_marker_batch(
        ControlRecordType.COMMIT, producer_id=9, producer_epoch=0, coordinator_epoch=1, timestamp=T0 + 3)), 0, T0)
    append(lg, [(b"k2", b"y")], T0 + 4)
    lg.roll()
    run_clean(mgr, T0 + 10_000)
    batches = [b for _s, b in all_batches(lg)]
    values = [(r.key, r.value) for b in batches if not b.header().attributes & 0x20 for r in b.records()]
    # aborted data is gone, committed and live data stay
    assert (b"k1", b"aborted") not in values
    assert values == [(b"k1", b"live"), (b"k3", b"committed"), (b"k2", b"y")]
    # both markers stay after the first round: the ABORT marker because this round still saw its
    # transaction's data (Kafka keeps it, and its .txnindex entry, until a round sees none)
    def markers() -> list:
        return [b.header() for _s, b in all_batches(lg) if b.header().attributes & 0x20]

    assert [h.base_offset for h in markers()] == [1, 5]
    txn_entries = [p.read_bytes() for p in lg.dir.glob("*.txnindex") if p.stat().st_size]
    assert len(txn_entries) == 1 and len(txn_entries[0]) == 34

    def another_round(now: int) -> None:
        append(lg, [(b"k9", b"dirty")], now)  # cleanings need new dirty data
        lg.roll()
        run_clean(mgr, now)

    # second round: no aborted data left, so the ABORT marker gets a delete horizon
    another_round(T0 + 20_000)
    abort, commit = markers()
    assert abort.attributes & 0x40 and abort.base_timestamp == T0 + 20_000 + 1000
    assert not commit.attributes & 0x40  # its transaction's data is still in the log
    # third round, after the horizon: the ABORT marker is gone, the COMMIT marker stays
    another_round(T0 + 30_000)
    assert [h.base_offset for h in markers()] == [5]
    mgr.shutdown()


def test_offset_map_capacity_limits_one_round(tmp_path: Path) -> None:
    mgr, lg = open_manager(tmp_path)
    before = feed(lg, n_keys=60, rounds=4)
    cfg = CleanerConfig(dedupe_buffer_size=50 * 24)  # 45 keys per round
    cleaner = LogCleaner(mgr, cfg)
    rounds = 0
    while cleaner.clean_filthiest(T0 + 10_000) and rounds < 50:
        rounds += 1
    assert rounds > 1
    after = all_records(lg)
    assert latest_view(after) == latest_view(before)
    last_of_key = {k: o for o, k, _v in before}
    assert sorted(o for o, _k, _v in after) == sorted(last_of_key.values())
    mgr.shutdown()


def test_offset_map_and_throttler() -> None:
    m = OffsetMap(24 * 100)
    assert m.slots == 100
    m.put(b"a", 5)
    m.put(b"a", 9)
    assert (m.get(b"a"), m.get(b"b"), m.latest_offset, m.size) == (9, -1, 9, 1)
    slept: list[float] = []
    clock = [0.0]
    t = Throttler(1000.0, check_interval_ms=100, clock=lambda: clock[0], sleep=slept.append)
    clock[0] = 0.5
    t.maybe_throttle(1000)  # 1000 bytes in 0.5 s at 1000 B/s: sleep 0.5 s
    assert slept == [pytest.approx(0.5)]


def test_compact_delete_logs_get_retention_from_the_cleaner(tmp_path: Path) -> None:
    mgr, lg = open_manager(tmp_path, {"cleanup.policy": "compact,delete", "retention.ms": "1000"})
    feed(lg, ts=T0)
    # the retention task leaves compacted logs to the cleaner, as Kafka's LogManager does
    assert mgr.cleanup_logs(T0 + 10**6) == 0
    cleaner = LogCleaner(mgr, CleanerConfig())
    assert cleaner.delete_old_segments_of_compacted(T0 + 10**6) > 0
    assert lg.log_start_offset == lg.log_end_offset
    mgr.shutdown()


# ---------------------------------------------------------------------------------------------
# crashes


def _steps_of_one_clean(src: Path, work: Path) -> list[str]:
    shutil.copytree(src, work)
    mgr, _lg = open_manager(work)
    steps: list[str] = []
    LogCleaner(mgr, CleanerConfig(), crash_hook=steps.append).clean_filthiest(T0 + 10_000)
    mgr.shutdown()
    return steps


def _check_recovered(path: Path, want: dict[bytes, bytes], original: dict[int, tuple]) -> None:
    mgr, lg = open_manager(path)
    assert not [p for p in path.rglob("*") if p.suffix in (".cleaned", ".swap", ".deleted")]
    recs = all_records(lg)
    offsets = [o for o, _k, _v in recs]
    assert offsets == sorted(set(offsets))
    assert all(original[o] == (k, v) for o, k, v in recs)
    assert latest_view(recs) == want
    # cleaning the recovered log completes and leaves exactly one record per key
    LogCleaner(mgr, CleanerConfig()).clean_filthiest(T0 + 20_000)
    recs = all_records(lg)
    keys = [k for _o, k, _v in recs]
    assert len(keys) == len(set(keys)) and latest_view(recs) == want
    mgr.shutdown()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_crash_at_every_step_of_a_cleaning_recovers(tmp_path: Path, seed: int) -> None:
    src = tmp_path / "src"
    mgr, lg = open_manager(src)
    before = feed(lg, n_keys=25, rounds=6, seed=seed)
    mgr.shutdown()
    want = latest_view(before)
    original = {o: (k, v) for o, k, v in before}
    steps = _steps_of_one_clean(src, tmp_path / "count")
    assert "rename-swap-to-final" in steps and "rename-old-to-deleted" in steps
    for k in range(len(steps) + 1):
        work = tmp_path / f"crash{k}"
        shutil.copytree(src, work)
        mgr, lg = open_manager(work)
        seen = [0]

        def hook(step: str, k=k, seen=seen) -> None:
            if seen[0] == k:
                raise SimulatedCrash(step)
            seen[0] += 1

        with pytest.raises(SimulatedCrash) if k < len(steps) else _nullcontext():
            LogCleaner(mgr, CleanerConfig(), crash_hook=hook).clean_filthiest(T0 + 10_000)
        # kill -9: nothing more is written, no clean-shutdown marker
        mgr.close_without_cleanup()
        _check_recovered(work, want, original)
        shutil.rmtree(work)


def test_crash_at_random_steps_many_runs(tmp_path: Path) -> None:
    rng = random.Random(42)
    for run in range(12):
        src = tmp_path / f"src{run}"
        mgr, lg = open_manager(src, {"segment.bytes": str(rng.choice([1500, 3000, 6000]))})
        feed(lg, n_keys=rng.randint(5, 40), rounds=rng.randint(2, 8), seed=run,
             tombstone_every=rng.randint(3, 11))
        # a second, partly cleaned generation on some runs
        if run % 2:
            LogCleaner(mgr, CleanerConfig()).clean_filthiest(T0 + 5_000)
            feed(lg, n_keys=rng.randint(5, 40), rounds=2, seed=run + 100)
        history = {o: (k, v) for o, k, v in all_records(lg)}
        want = latest_view(all_records(lg))
        mgr.shutdown()
        count = len(_steps_of_one_clean(src, tmp_path / f"count{run}"))
        k = rng.randrange(count + 1)
        work = tmp_path / f"w{run}"
        shutil.copytree(src, work)
        mgr, lg = open_manager(work)
        seen = [0]

        def hook(step: str, k=k, seen=seen) -> None:
            if seen[0] == k:
                raise SimulatedCrash(step)
            seen[0] += 1

        try:
            LogCleaner(mgr, CleanerConfig(), crash_hook=hook).clean_filthiest(T0 + 10_000)
        except SimulatedCrash:
            pass
        mgr.close_without_cleanup()
        _check_recovered(work, want, history)


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def test_crash_after_the_swap_files_exist_recovers_the_cleaned_files_exactly(tmp_path: Path) -> None:
    """Once `.swap` files exist, recovery completes the swap with the cleaner's own files (Kafka renames
    index swaps too), so the segment files equal those of an uninterrupted cleaning. One group (a
    large segment.bytes at cleaning time): a second round would see other segments and group them
    differently, which is fine but not comparable."""
    one_group = {"segment.bytes": "1000000"}
    src = tmp_path / "src"
    mgr, lg = open_manager(src)
    feed(lg, n_keys=25, rounds=6, seed=4)
    mgr.shutdown()
    ref = tmp_path / "ref"
    shutil.copytree(src, ref)
    mgr, _lg = open_manager(ref, one_group)
    steps: list[str] = []
    LogCleaner(mgr, CleanerConfig(), crash_hook=steps.append).clean_filthiest(T0 + 10_000)
    mgr.shutdown()

    def segment_files(path: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted((path / "t-0").iterdir())
                if p.suffix in (".log", ".index", ".timeindex", ".txnindex")}

    want = segment_files(ref)
    first_swap = steps.index("rename-cleaned-to-swap")
    # from the last .cleaned -> .swap rename of the first group on (its .swap set is complete)
    first_done = first_swap + [s for s in steps[first_swap:]].index("rename-old-to-deleted")
    checked = 0
    for k in range(first_done, len(steps)):
        if steps[k] not in ("rename-old-to-deleted", "rename-swap-to-final", "delete-snapshot"):
            continue
        work = tmp_path / f"k{k}"
        shutil.copytree(src, work)
        mgr, _lg = open_manager(work, one_group)
        seen = [0]

        def hook(step: str, k=k, seen=seen) -> None:
            if seen[0] == k:
                raise SimulatedCrash(step)
            seen[0] += 1

        with pytest.raises(SimulatedCrash):
            LogCleaner(mgr, CleanerConfig(), crash_hook=hook).clean_filthiest(T0 + 10_000)
        mgr.close_without_cleanup()
        mgr, _lg = open_manager(work, one_group)
        mgr.shutdown()
        assert segment_files(work) == want, k
        checked += 1
    assert checked >= 3


def test_cleaner_config_from_broker_properties(tmp_path: Path) -> None:
    import math

    from odradek.logstore.cleaner import CleanerConfig, LogCleaner

    assert CleanerConfig.from_broker_props({}) == CleanerConfig()
    assert CleanerConfig().max_io_bytes_per_second == math.inf
    cfg = CleanerConfig.from_broker_props({
        "log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "4800", "log.cleaner.io.buffer.size": "1024",
        "log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308", "log.cleaner.backoff.ms": "100",
        "odradek.log.cleaner.index.per.batch": "false"})
    assert (cfg.num_threads, cfg.dedupe_buffer_size, cfg.io_buffer_size, cfg.backoff_ms) == (2, 4800, 1024, 100)
    assert cfg.max_io_bytes_per_second == math.inf and cfg.index_per_batch is False
    mgr = LogManager([tmp_path], LogConfig())
    mgr.startup()
    cleaner = LogCleaner(mgr, cfg)
    assert cleaner.cleaner.offset_map.slots == 100  # 4800 / 2 threads / 24 bytes a slot
    assert cleaner.cleaner.io_buffer_size == 256  # half of the per-thread I/O buffer
    # the index layout follows the cluster's metadata.version unless configured
    assert LogCleaner.from_broker_config(mgr, {}, 27).cleaner.index_per_batch is True
    assert LogCleaner.from_broker_config(mgr, {}, 21).cleaner.index_per_batch is False
    assert LogCleaner.from_broker_config(
        mgr, {"odradek.log.cleaner.index.per.batch": "true"}, 21).cleaner.index_per_batch is True
    # the broker's cleaner cleans in a worker process unless told not to
    assert LogCleaner.from_broker_config(mgr, {}, 27).worker is not None
    assert LogCleaner.from_broker_config(mgr, {"odradek.log.cleaner.worker.process": "false"}, 27).worker is None
    mgr.shutdown()
