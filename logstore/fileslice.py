"""`FileSlice`: a region of an open file, handed to the server for `sendfile`.

The wire layer owns the canonical definition (`odradek.wire.records.FileSlice`, per
docs/architecture.md). Until it exists there, this compatible NamedTuple is used.
"""

from __future__ import annotations

from typing import Any, NamedTuple

try:  # pragma: no cover - depends on the wire module's progress
    from odradek.wire.records import FileSlice  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover

    class FileSlice(NamedTuple):  # type: ignore[no-redef]
        """`size` bytes of `file` (anything with fileno()) starting at byte `position`."""

        file: Any
        position: int
        size: int


__all__ = ["FileSlice"]
