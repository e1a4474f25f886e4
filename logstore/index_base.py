"""Shared machinery of `.index` and `.timeindex` files (Kafka's AbstractIndex).

An index is a memory-mapped file of fixed-size big-endian entries. A new file is preallocated to
`roundDown(max_index_size, entry_size)` bytes (sparse zeros, 10485760 for `.index` and 10485756 for
`.timeindex` with the default segment.index.bytes); an existing file is assumed to be entirely valid,
entries = length // entry_size. That is why Kafka, and we, trim to `entries * entry_size` on roll,
close and end of recovery, and resize back to the maximum when a segment becomes active again.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from pathlib import Path
from typing import Any

from . import mapped_file

log = logging.getLogger(__name__)

_PAGE = mmap.PAGESIZE
_ZERO_PAGES = bytes(8 * _PAGE)


class CorruptIndexError(Exception):
    """An index file fails its sanity check (bad length or entries below the base offset)."""


class IndexFullError(Exception):
    """Attempt to append to an index that has no free slot left."""


class IndexOffsetError(Exception):
    """An entry would break the index's ordering (Kafka's InvalidOffsetException)."""


class IndexFile:
    """Base class: owns the file, the mmap, and the entry count. Subclasses define the entry layout."""

    ENTRY_SIZE = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10 * 1024 * 1024,
                 writable: bool = True) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._mm: Any = None
        # No descriptor is kept (as Kafka's AbstractIndex): the map needs none, and resize and
        # materialize open the file by path for their rare writes (see mapped_file).
        self._closed = False
        # flush() may run in a worker thread while the owner trims/remaps the file
        self._remap_lock = threading.Lock()
        self._open()

    # -- file/mmap management -------------------------------------------------------------
    def _open(self) -> None:
        flags = os.O_RDWR | os.O_CREAT if self.writable else os.O_RDONLY
        existed = self.path.exists()
        fd = os.open(self.path, flags, 0o644)
        try:
            if not existed:
                # Kafka preallocates a new index to its maximum size; the file stays sparse on disk.
                os.ftruncate(fd, self._round(self.max_index_size))
            length = os.fstat(fd).st_size
            self._map(fd, length)
        finally:
            os.close(fd)
        # An existing file is assumed to be completely valid: entries = length / entry size.
        self._entries = 0 if not existed else length // self.ENTRY_SIZE
        # Pages below this offset are in the page cache with their blocks allocated (or hold data);
        # the ones above are holes of the sparse preallocated file.
        self._materialized = -(-length // _PAGE) * _PAGE if existed else 0
        self._load_last()

    def _map(self, fd: int, length: int) -> None:
        self._length = length
        if length == 0:
            self._mm = None
            return
        self._mm = mapped_file.map_file(fd, length, self.writable)

    def _unmap(self) -> None:
        if self._mm is not None:
            mapped_file.release(self._mm)
            self._mm = None

    def allocate(self, start: int, length: int) -> None:
        """posix_fallocate the blocks of [start, start + length) of the file."""
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, start, length)
        finally:
            os.close(fd)

    def _round(self, n: int) -> int:
        return n - n % self.ENTRY_SIZE

    def _materialize(self, pos: int, size: int) -> None:
        """Make the pages of [pos, pos + size) real before an entry is stored there through the map.

        The first store into a hole of a shared file mapping faults into the file system (ext4's
        page_mkwrite allocates the block under a journal handle): ~0.8 ms of CPU and several ms of
        wall clock per page on the benchmark machine, once per new segment and every 341-512
        entries, on the event loop. Writing the page's zeros with pwrite first (it holds no entry
        yet, so the bytes do not change) costs a few microseconds, and the store then is a plain
        memory write.
        """
        end = pos + size
        if end <= self._materialized:
            return
        start = max(self._materialized, pos - pos % _PAGE)
        stop = min(-(-end // _PAGE) * _PAGE + 3 * _PAGE, self._length)  # a few pages ahead at once
        if stop > start:
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.pwrite(fd, _ZERO_PAGES[:stop - start], start)
            finally:
                os.close(fd)
        self._materialized = max(stop, end)

    def _load_last(self) -> None:
        """Refresh the cached last entry after the entry count changed."""

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    @property
    def length(self) -> int:
        """Current file length in bytes (preallocated or trimmed)."""
        return self._length

    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def resize(self, new_size: int) -> bool:
        """Set the file length to `new_size` rounded down to whole entries; True if it changed."""
        rounded = self._round(new_size)
        if rounded == self._length:
            return False
        # a read-only index is never resized (its old descriptor would have refused the truncate)
        fd = os.open(self.path, os.O_RDWR if self.writable else os.O_RDONLY)
        with self._remap_lock:
            self._unmap()
            try:
                os.ftruncate(fd, rounded)
                self._map(fd, rounded)
            finally:
                os.close(fd)
        # cut pages are gone; when the file grows again, they come back as holes
        self._materialized = min(self._materialized, -(-rounded // _PAGE) * _PAGE)
        self._entries = min(self._entries, rounded // self.ENTRY_SIZE)
        self._load_last()
        return True

    def trim_to_valid_size(self) -> None:
        """Cut the file to exactly `entries * entry_size` bytes (what Kafka leaves on disk when inactive)."""
        self.resize(self._entries * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Empty the index and preallocate it again (used before rebuilding it)."""
        self.truncate()
        self.resize(self.max_index_size)

    def truncate(self) -> None:
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, n: int) -> None:
        self._entries = n
        self._load_last()

    def flush(self) -> None:
        """Write the mapped pages to disk (msync); blocking, call it off the event loop."""
        with self._remap_lock:
            if self._mm is not None and self.writable:
                mapped_file.flush(self._mm)

    def close(self) -> None:
        """Trim to the valid size and release the file (Kafka's AbstractIndex.close)."""
        if self._closed:
            return
        if self.writable:
            self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        """Release the mmap and descriptor without trimming."""
        with self._remap_lock:
            self._unmap()
            self._closed = True

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            self.path.unlink()
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, new_path: Path) -> None:
        try:
            os.rename(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = Path(new_path)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the file cannot be a valid index (length not whole entries)."""
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {self._length} bytes which is neither "
                f"positive nor a multiple of {self.ENTRY_SIZE}."
            )
