"""Requirement 5: crash recovery keeps exactly the valid prefix, and the rebuilt indexes equal those
of a log that got the same batches cleanly. Plus the other LogLoader rules (missing/bad indexes,
leftover .deleted/.cleaned/.swap files, recovery point)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logstore_testutil import make_batch

from odradek.logstore import LogConfig, PartitionLog

PROPS = {"index.interval.bytes": "300", "segment.bytes": "6000"}


def build(dir_: Path, batches: list[bytes], clean: bool) -> PartitionLog:
    lg = PartitionLog.open(dir_, LogConfig.from_props(PROPS), "t", 0)
    lg.become_leader(0)
    for b in batches:
        lg.append_as_leader(bytearray(b), 0, 0)
    # where every batch sits, read back from disk before the files are closed
    lg.layout = [(s.log_path, pos, h.batch_length + 12) for s in lg.segments for pos, h in s.iter_headers(0)]
    if clean:
        lg.close()
    else:
        lg.close_handlers()  # crash: nothing trimmed, no snapshot, no final time-index entry
    return lg


def files_of(dir_: Path, suffixes=(".log", ".index", ".timeindex")) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(dir_.iterdir()) if p.suffix in suffixes}


batch_specs = st.lists(
    st.tuples(st.integers(1, 5), st.integers(0, 700), st.integers(0, 50_000)), min_size=1, max_size=25)


def make_batches(specs) -> list[bytes]:
    # timestamps go up and down so the time index only takes strictly larger ones
    return [bytes(make_batch(n, value_size=v, ts=1_700_000_000_000 + t)) for n, v, t in specs]


def check_recovered(tmp: Path, batches: list[bytes], keep: int) -> None:
    """Reopen the crashed log in tmp/crash; compare with a clean log of batches[:keep] in tmp/ref."""
    crashed = PartitionLog.open(tmp / "crash", LogConfig.from_props(PROPS), "t", 0,
                                recovery_point=0, had_clean_shutdown=False)
    expected_leo = sum(int.from_bytes(b[57:61], "big") for b in batches[:keep])
    assert crashed.log_end_offset == expected_leo
    # running again: the active segment's indexes are preallocated
    assert crashed.active_segment.offset_index_path.stat().st_size == 10485760
    crashed.close()
    ref = build(tmp / "ref", batches[:keep], clean=True)
    got, want = files_of(tmp / "crash"), files_of(ref.dir)
    for name, data in want.items():
        assert got.get(name) == data, name
    extra = set(got) - set(want)
    # a cut right at a segment boundary leaves the (empty) next segment in place, as Kafka does
    for name in extra:
        assert got[name] == b"", name


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=batch_specs, which=st.floats(0, 1), cut=st.floats(0, 1))
def test_cut_log_recovers_valid_prefix(specs, which, cut) -> None:
    batches = make_batches(specs)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        lg = build(tmp / "crash", batches, clean=False)
        where = lg.layout
        assert len(where) == len(batches)
        # torn write: the log is cut inside (or at the start of) batch k
        k = min(int(which * len(batches)), len(batches) - 1)
        path, pos, size = where[k]
        os.truncate(path, pos + int(cut * (size - 1)))
        if path != where[-1][0]:
            # Kafka only recovers from the recovery point on, and a crash mid-write can only tear the
            # active segment; emulate that: drop the later segments' files
            for p2 in {w[0] for w in where[k + 1:] if w[0] != path}:
                for f in p2.parent.glob(p2.stem + ".*"):
                    f.unlink()
        check_recovered(tmp, batches, k)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=batch_specs, which=st.floats(0, 1), where_=st.floats(0, 1), flip=st.integers(1, 255))
def test_corrupt_byte_recovers_valid_prefix(specs, which, where_, flip) -> None:
    batches = make_batches(specs)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        lg = build(tmp / "crash", batches, clean=False)
        where = lg.layout
        k = min(int(which * len(batches)), len(batches) - 1)
        path, pos, size = where[k]
        # a byte covered by the magic check or the CRC (bytes 16.. of the batch); corruption in any
        # segment: recovery from offset 0 cuts there and deletes every later segment
        byte = pos + 16 + min(int(where_ * (size - 16)), size - 17)
        with open(path, "r+b") as f:
            f.seek(byte)
            v = f.read(1)[0]
            f.seek(byte)
            f.write(bytes([v ^ flip]))
        check_recovered(tmp, batches, k)


def test_recovery_logs_what_was_cut(tmp_path: Path, caplog) -> None:
    batches = make_batches([(2, 100, 0)] * 5)
    lg = build(tmp_path / "t-0", batches, clean=False)
    path = lg.segments[-1].log_path
    os.truncate(path, path.stat().st_size - 7)
    with caplog.at_level(logging.WARNING):
        lg2 = PartitionLog.open(tmp_path / "t-0", LogConfig.from_props(PROPS), had_clean_shutdown=False)
    msgs = [r.getMessage() for r in caplog.records if "Truncated" in r.getMessage()]
    assert msgs and path.name in msgs[0] and f"{len(batches[-1]) - 7} invalid bytes" in msgs[0]
    assert lg2.log_end_offset == 8
    lg2.close()


def test_missing_indexes_after_clean_shutdown_are_handled_as_kafka_4_handles_them(tmp_path: Path, caplog) -> None:
    # Kafka 4.x LogLoader: a missing offset index is rebuilt (ERROR after a clean shutdown); a
    # missing time index is created empty (timeIndexFileNewlyCreated -> resize(0)); the contents
    # of existing offset/time indexes are not sanity-checked at load
    batches = make_batches([(3, 400, i * 7 % 5) for i in range(30)])
    ref = build(tmp_path / "ref", batches, clean=True)
    want = files_of(ref.dir)
    work = tmp_path / "t-0"
    shutil.copytree(ref.dir, work)
    names = sorted(n for n in want if n.endswith(".index"))
    (work / names[0]).unlink()  # missing offset index
    missing_time = names[1].replace(".index", ".timeindex")
    (work / missing_time).unlink()
    with open(work / names[-1], "ab") as f:
        f.write(b"\x01\x02\x03")  # length not a multiple of 8: not looked at
    with caplog.at_level(logging.WARNING):
        lg = PartitionLog.open(work, LogConfig.from_props(PROPS), had_clean_shutdown=True)
        lg.close()
    got = files_of(work)
    assert got[names[0]] == want[names[0]]
    assert got[missing_time] == b""
    assert got[names[-1]][: len(want[names[-1]])] == want[names[-1]]
    assert not [r for r in caplog.records if "corrupted index" in r.getMessage()]
    assert any("Could not find index file" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
    assert {k: v for k, v in got.items() if k not in (missing_time, names[-1])} == {
        k: v for k, v in want.items() if k not in (missing_time, names[-1])}


def test_leftover_temp_files(tmp_path: Path) -> None:
    batches = make_batches([(3, 400, 0) for _ in range(20)])
    ref = build(tmp_path / "ref", batches, clean=True)
    work = tmp_path / "t-0"
    shutil.copytree(ref.dir, work)
    (work / "00000000000000000999.log.deleted").write_bytes(b"x")
    (work / "00000000000000000999.index.cleaned").write_bytes(b"x")
    (work / "00000000000000000998.timeindex").write_bytes(b"")  # orphan index
    # an interrupted cleaner swap: the first segment's data as a .swap, replacing segment 0
    first = sorted(work.glob("*.log"))[0]
    shutil.copy(first, str(first) + ".swap")
    lg = PartitionLog.open(work, LogConfig.from_props(PROPS), had_clean_shutdown=True)
    names = {p.name for p in work.iterdir()}
    assert not any(n.endswith((".deleted", ".cleaned", ".swap")) for n in names)
    assert "00000000000000000998.timeindex" not in names
    assert lg.log_end_offset == 60
    lg.close()
    assert files_of(work) == files_of(ref.dir)


def test_clean_load_does_not_touch_rolled_segments_and_recovery_point(tmp_path: Path) -> None:
    batches = make_batches([(3, 400, 0) for _ in range(20)])
    lg = build(tmp_path / "t-0", batches, clean=True)
    lg2 = PartitionLog.open(lg.dir, LogConfig.from_props(PROPS), recovery_point=12, had_clean_shutdown=True)
    assert lg2.recovery_point == 60
    lg2.close_handlers()
    lg3 = PartitionLog.open(lg.dir, LogConfig.from_props(PROPS), recovery_point=12, had_clean_shutdown=False)
    assert lg3.recovery_point == 12 and lg3.log_end_offset == 60
    assert lg3.flush() == 60
    lg3.close()


def test_a_crashed_active_segment_is_recovered_without_a_warning(tmp_path: Path, caplog) -> None:
    # after kill -9 the active segment's indexes are still preallocated and zero-filled; Kafka 4.x
    # does not sanity-check their contents at load (recovery rebuilds them anyway), so it logs no
    # "corrupted index" WARNING; a missing index of a segment above the recovery point is rebuilt
    # silently (ERROR only after a clean shutdown)
    batches = make_batches([(2, 300, i) for i in range(40)])
    lg = build(tmp_path / "t-0", batches, clean=False)
    active = lg.segments[-1]
    assert active.time_index_path.stat().st_size > 12 * 40  # still preallocated
    (tmp_path / "t-0" / lg.segments[-2].offset_index_path.name).unlink()
    with caplog.at_level(logging.INFO):
        lg2 = PartitionLog.open(tmp_path / "t-0", LogConfig.from_props(PROPS), had_clean_shutdown=False)
    assert lg2.log_end_offset == 80
    assert lg2.fetch_offset_by_timestamp(39) is not None
    lg2.close()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
