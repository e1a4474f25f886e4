"""Odradek's group coordinator: consumer groups and committed offsets, stored as Kafka stores them.

See ``docs/groups.md``. The broker owns one :class:`GroupCoordinator` as
``broker.coordinators["groups"]``; the handlers in ``handlers/groups.py`` call it.
"""

from .coordinator import GroupCoordinator

__all__ = ["GroupCoordinator"]
