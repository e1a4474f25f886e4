"""Open indexes hold no file descriptor, as Kafka's (which closes an index's file once mapped): a
partition costs one descriptor (its log), so 10,000 partitions fit a 20,000 descriptor limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from logstore_testutil import make_batch

from odradek.logstore import LogConfig, PartitionLog, mapped_file
from odradek.logstore.offset_index import OffsetIndex
from odradek.logstore.time_index import TimeIndex


def open_paths() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return out


pytestmark = pytest.mark.skipif(mapped_file.holds_descriptor() or not os.path.isdir("/proc/self/fd"),
                                reason="needs libc mmap and /proc")


def test_partitions_hold_one_descriptor_each(tmp_path: Path) -> None:
    logs = [PartitionLog.open(tmp_path / f"t-{p}", LogConfig(), topic_id=bytes(range(1, 17))) for p in range(20)]
    try:
        for lg in logs:
            lg.become_leader(0)
            for _ in range(3):
                lg.append_as_leader(make_batch(50, value_size=200))
        held = [p for p in open_paths() if p.startswith(str(tmp_path))]
        assert sorted(Path(p).suffix for p in held) == [".log"] * 20
    finally:
        for lg in logs:
            lg.close()


def test_index_written_resized_flushed_and_reopened_without_a_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, max_index_size=8192)
    for i in range(600):  # past the first pages made real by materialize
        index.append(100 + i * 3, i * 4096)
    assert not [p for p in open_paths() if p == str(path)]
    index.flush()
    index.trim_to_valid_size()
    assert path.stat().st_size == 600 * 8
    assert index.lookup(100 + 301 * 3 + 1) == (100 + 301 * 3, 301 * 4096)
    index.resize(8192)
    index.append(100 + 600 * 3, 600 * 4096)
    index.close()
    assert path.stat().st_size == 601 * 8
    again = OffsetIndex(path, 100, writable=False)
    assert again.entries == 601
    assert again.entry(600) == (100 + 600 * 3, 600 * 4096)
    with pytest.raises(TypeError):  # a read-only map refuses stores, as mmap.ACCESS_READ does
        again._mm[0:1] = b"x"
    again.close()


def test_a_map_outlives_close_while_a_reader_holds_it(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, max_index_size=1200)
    index.maybe_append(1_700_000_000_000, 5)
    held = memoryview(index._mm)
    index.close()
    assert bytes(held[:8]) == (1_700_000_000_000).to_bytes(8, "big")
