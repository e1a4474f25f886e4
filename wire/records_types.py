"""Small data types shared by the wire codecs and the server for record payloads."""

from __future__ import annotations

from typing import Any, NamedTuple


class FileSlice(NamedTuple):
    """A region of an open file: ``size`` bytes at ``position`` of ``file`` (anything with ``fileno()``).

    Data only. Placed in a ``records`` field of a response body, ``encode_response`` passes it
    through as its own output item so the server can ``os.sendfile`` it instead of reading it
    into memory.
    """

    file: Any
    position: int
    size: int
