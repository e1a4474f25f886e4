"""`.txnindex` files (Kafka's TransactionIndex / AbortedTxn): 34-byte entries of aborted transactions.

The log store appends an entry when an ABORT marker ends a transaction; READ_COMMITTED fetches read
them back, so the entries are kept in memory after the first read (every change goes through this
class). The file is created when the first entry is appended (no preallocation).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    """One aborted transaction: its producer, first/last offsets and the LSO when it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


class CorruptTxnIndexError(Exception):
    """The file length is not a whole number of entries or an entry has an unknown version."""


class TransactionIndex:
    """Append-only list of aborted transactions of one segment."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._last_offset: int | None = None
        self._cache: list[AbortedTxn] | None = None
        for txn in self.all_entries():
            self._last_offset = txn.last_offset

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; last offsets must strictly increase (Kafka checks the same)."""
        if self._last_offset is not None and self._last_offset >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended log entry must increase sequentially, but {txn.last_offset}"
                f" is not greater than current last offset {self._last_offset} of index {self.path}"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, txn.to_bytes())
        finally:
            os.close(fd)
        self._last_offset = txn.last_offset
        if self._cache is not None:
            self._cache.append(txn)

    def all_entries(self) -> list[AbortedTxn]:
        """Every entry, in file order (a copy; read from the file once, then kept)."""
        if self._cache is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            out = []
            for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
                version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
                out.append(AbortedTxn(pid, first, last, lso, version))
            self._cache = out
        return list(self._cache)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset)."""
        if self._cache is None:
            self.all_entries()
        return [t for t in self._cache or ()
                if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose last offset is >= `offset`."""
        keep = [t for t in self.all_entries() if t.last_offset < offset]
        if not self.path.exists():
            return
        with open(self.path, "r+b") as f:
            f.truncate(len(keep) * ENTRY_SIZE)
        self._last_offset = keep[-1].last_offset if keep else None
        self._cache = keep

    def reset(self) -> None:
        self.path.unlink(missing_ok=True)
        self._last_offset = None
        self._cache = []

    def sanity_check(self) -> None:
        if not self.path.exists():
            return
        size = self.path.stat().st_size
        if size % ENTRY_SIZE != 0:
            raise CorruptTxnIndexError(f"Transaction index {self.path} has size {size}, not a multiple of 34")
        for t in self.all_entries():
            if t.version != CURRENT_VERSION:
                raise CorruptTxnIndexError(f"Transaction index {self.path} has unknown version {t.version}")

    def rename_to(self, new_path: Path) -> None:
        try:
            os.rename(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = Path(new_path)

    def delete_if_exists(self) -> bool:
        self._cache = []
        try:
            self.path.unlink()
            return True
        except FileNotFoundError:
            return False

    def flush(self) -> None:
        if self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
