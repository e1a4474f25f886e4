"""Memory maps of index files that hold no file descriptor, as Java's MappedByteBuffer does.

Python's ``mmap.mmap`` keeps a duplicate of the descriptor it was given for as long as the map
lives. An index kept open that way costs two descriptors (its own and the map's), so every
partition cost five (the log and two indexes) where Kafka's costs one (the log's channel: Kafka
closes an index's RandomAccessFile right after mapping it). At 10,000 partitions that was 50,000
descriptors and Odradek failed with EMFILE under a 20,000 limit Kafka runs fine under.

`map_file` maps with libc's ``mmap`` through ctypes, so the caller can close its descriptor at
once; the map is unmapped when the last reference to it (the returned buffer or any memoryview of
it) is gone, so a reader that still holds it can never touch unmapped memory. Where libc's mmap
is not reachable (Windows), it falls back to ``mmap.mmap``.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import weakref
from typing import Any

_libc: Any = None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.mmap.restype = ctypes.c_void_p
    _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                           ctypes.c_int64]
    _libc.munmap.restype = ctypes.c_int
    _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    _libc.msync.restype = ctypes.c_int
    _libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if not hasattr(mmap, "MAP_SHARED") or ctypes.sizeof(ctypes.c_void_p) != 8:
        _libc = None
except (OSError, AttributeError):
    _libc = None

_MAP_FAILED = ctypes.c_void_p(-1).value
_MS_SYNC = 0x10 if sys.platform == "darwin" else 4


def holds_descriptor() -> bool:
    """True if maps fall back to ``mmap.mmap`` (which keeps a descriptor per map)."""
    return _libc is None


def map_file(fd: int, length: int, writable: bool) -> Any:
    """Map `length` bytes of the file open as `fd` (shared); the result is a buffer (struct's
    pack_into/unpack_from work on it) and `fd` may be closed right after."""
    if _libc is None:
        return mmap.mmap(fd, length, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    addr = _libc.mmap(None, length, prot, mmap.MAP_SHARED, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    buf = (ctypes.c_char * length).from_address(addr)
    weakref.finalize(buf, _libc.munmap, addr, length)
    # a read-only map must refuse writes as mmap.ACCESS_READ does (a store would be a SIGSEGV)
    return buf if writable else memoryview(buf).cast("B").toreadonly()


def flush(mapped: Any) -> None:
    """Write the map's dirty pages to disk and wait (msync MS_SYNC, as ``mmap.flush``)."""
    if isinstance(mapped, mmap.mmap):
        mapped.flush()
        return
    if isinstance(mapped, memoryview):
        return  # read-only: nothing to write
    if _libc.msync(ctypes.addressof(mapped), ctypes.sizeof(mapped), _MS_SYNC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def release(mapped: Any) -> None:
    """Give up the caller's reference: an ``mmap.mmap`` is closed, a libc map is unmapped as soon
    as nothing else refers to it."""
    if isinstance(mapped, mmap.mmap):
        mapped.close()
