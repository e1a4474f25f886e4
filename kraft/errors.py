"""The error start-up raises for metadata it will not serve."""

from __future__ import annotations


class UnservableMetadataError(RuntimeError):
    """The metadata describes something a single Odradek node cannot serve (the message says what)."""
