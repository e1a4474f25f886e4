"""Kafka's text checkpoint files (CheckpointFile): offset checkpoints and leader-epoch-checkpoint.

Format: `<version>\\n<count>\\n<entry>\\n...`, every line ending in `\\n`. Writes go to `<file>.tmp`,
are fsynced and renamed over the file, then the directory is fsynced (Kafka's atomicMoveWithFallback).
A 0-byte file is legal (Kafka creates it empty before the first write) and reads as no entries.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from .java_hash import anyrefmap_order, hashmap_order, scala_trie_order, topic_partition_hash

CURRENT_VERSION = 0


class CheckpointFormatError(Exception):
    """A checkpoint file does not follow the version/count/entries format."""


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename inside it is durable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, sync: bool = True) -> None:
    """Write `data` to `<path>.tmp`, fsync, rename over `path`, fsync the directory."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


class CheckpointFile:
    """A `version / count / lines` text file; subclasses format and parse the entry lines."""

    def __init__(self, path: Path, version: int = CURRENT_VERSION, create: bool = True) -> None:
        self.path = Path(path)
        self.version = version
        if create and not self.path.exists():
            # Kafka's CheckpointFile constructor creates an empty file; it stays 0 bytes until written.
            self.path.touch()

    def write_lines(self, lines: list[str], sync: bool = True) -> None:
        text = f"{self.version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        atomic_write(self.path, text.encode("utf-8"), sync)

    def read_lines(self) -> list[str]:
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return []
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            return []
        try:
            version = int(lines[0])
        except ValueError as e:
            raise CheckpointFormatError(f"Malformed version line in {self.path}: {lines[0]!r}") from e
        if version != self.version:
            raise CheckpointFormatError(f"Unrecognized version {version} of checkpoint file {self.path}")
        if len(lines) == 1:
            return []
        try:
            count = int(lines[1])
        except ValueError as e:
            raise CheckpointFormatError(f"Malformed count line in {self.path}: {lines[1]!r}") from e
        entries = lines[2:]
        if len(entries) != count:
            raise CheckpointFormatError(
                f"Expected {count} entries in checkpoint file {self.path}, but found {len(entries)}"
            )
        return entries


TopicPartition = tuple[str, int]

# Line-order models (see the spec §1.9): which Kafka map the entries came from.
ORDER_HASHMAP_COPY = "hashmap"      # recovery-point / log-start-offset / cleaner (3.9, 4.1)
ORDER_ANYREFMAP = "anyrefmap"       # replication-offset-checkpoint (3.7 .. 4.1)
ORDER_SORTED = "sorted"


def kafka_line_order(entries: Mapping[TopicPartition, int], model: str) -> list[tuple[TopicPartition, int]]:
    """Entries in the order Kafka's maps would write them, so files can be byte-identical."""
    items = sorted(entries.items())

    def h(item):
        return topic_partition_hash(*item[0])

    if model == ORDER_HASHMAP_COPY:
        # Kafka copies a Scala immutable map into a java.util.HashMap, so entries sharing a
        # bucket keep the Scala map's order: hash-trie order above four entries (checked
        # against Kafka 3.9 and 4.1); Scala's Map1..Map4 keep their insertion order.
        source = scala_trie_order(items, h) if len(items) > 4 else items
        return hashmap_order(source, h, copied=True)
    if model == ORDER_ANYREFMAP:
        # inserted in the iteration order of ReplicaManager's partition ConcurrentHashMap
        chm = hashmap_order(items, h, max_size_ever=len(items))
        return anyrefmap_order(chm, h)
    return items


class OffsetCheckpointFile(CheckpointFile):
    """`recovery-point-offset-checkpoint` & co: lines `<topic> <partition> <offset>`."""

    def __init__(self, path: Path, order: str = ORDER_HASHMAP_COPY, create: bool = True) -> None:
        super().__init__(path, CURRENT_VERSION, create)
        self.order = order

    def write(self, offsets: Mapping[TopicPartition, int], sync: bool = True) -> None:
        lines = [f"{t} {p} {o}" for (t, p), o in kafka_line_order(offsets, self.order)]
        self.write_lines(lines, sync)

    def read(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for line in self.read_lines():
            parts = line.split(" ")
            if len(parts) != 3:
                raise CheckpointFormatError(f"Malformed line in checkpoint file {self.path}: {line!r}")
            out[(parts[0], int(parts[1]))] = int(parts[2])
        return out


class LeaderEpochCheckpointFile(CheckpointFile):
    """`leader-epoch-checkpoint`: lines `<epoch> <start offset>` in epoch order."""

    def write(self, entries: Iterable[tuple[int, int]], sync: bool = True) -> None:
        self.write_lines([f"{e} {o}" for e, o in entries], sync)

    def read(self) -> list[tuple[int, int]]:
        out = []
        for line in self.read_lines():
            parts = line.split()
            if len(parts) != 2:
                raise CheckpointFormatError(f"Malformed line in checkpoint file {self.path}: {line!r}")
            out.append((int(parts[0]), int(parts[1])))
        return out
