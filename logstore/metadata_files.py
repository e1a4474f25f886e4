"""Small per-dir and per-partition files: partition.metadata, meta.properties, .kafka_cleanshutdown, .lock."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import files
from .checkpoints import atomic_write
from .errors import LogDirLockedError
from .java_hash import hashmap_order, string_hash

# -- Uuid text form ------------------------------------------------------------------------


def uuid_to_str(u: bytes | uuid.UUID) -> str:
    """Kafka's Uuid.toString: 22-char base64url of the 16 bytes, no padding."""
    raw = u.bytes if isinstance(u, uuid.UUID) else bytes(u)
    if len(raw) != 16:
        raise ValueError("a Kafka Uuid is 16 bytes")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def uuid_from_str(s: str) -> bytes:
    raw = base64.urlsafe_b64decode(s + "==")
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {s!r}")
    return raw


ZERO_UUID = bytes(16)
METADATA_TOPIC_ID = bytes(15) + b"\x01"  # AAAAAAAAAAAAAAAAAAAAAQ, used by __cluster_metadata

# -- partition.metadata ---------------------------------------------------------------------


class PartitionMetadataFile:
    """`partition.metadata`: exactly `version: 0\\ntopic_id: <Uuid>` with no trailing newline."""

    def __init__(self, dir_: Path) -> None:
        self.path = Path(dir_) / files.PARTITION_METADATA_FILE

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, topic_id: bytes | uuid.UUID, sync: bool = True) -> None:
        raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else bytes(topic_id)
        if raw == ZERO_UUID:
            raise ValueError("the zero Uuid is not a valid topic id")
        atomic_write(self.path, f"version: 0\ntopic_id: {uuid_to_str(raw)}".encode(), sync)

    def read(self) -> bytes:
        """Topic id (16 bytes); ValueError on a malformed file."""
        text = self.path.read_text("utf-8")
        fields = {}
        for line in text.split("\n"):
            if not line:
                continue
            key, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"Malformed line in {self.path}: {line!r}")
            fields[key.strip()] = value.strip()
        version = int(fields.get("version", "-1"))
        if version < 0:
            raise ValueError(f"Invalid version in {self.path}")
        topic_id = uuid_from_str(fields["topic_id"])
        if topic_id == ZERO_UUID:
            raise ValueError(f"Zero topic id in {self.path}")
        return topic_id


# -- meta.properties ------------------------------------------------------------------------

_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
            "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}


def _escape(s: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(s):
        if ch == " " and (i == 0 or is_key):
            out.append("\\ ")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def java_date_string(t: float | None = None, tz_name: str = "UTC", utc_offset_s: int = 0) -> str:
    """java.util.Date.toString(): `EEE MMM dd HH:mm:ss zzz yyyy` (English names), in the zone given
    by its short name and offset (the JVM's default zone; UTC unless told otherwise)."""
    tm = time.gmtime((time.time() if t is None else t) + utc_offset_s)
    days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    return (f"{days[tm.tm_wday]} {months[tm.tm_mon - 1]} {tm.tm_mday:02d} "
            f"{tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d} {tz_name} {tm.tm_year}")


@dataclass
class MetaProperties:
    """Contents of `meta.properties` (KRaft v1: cluster.id, node.id, directory.id)."""

    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = 1

    def to_props(self) -> dict[str, str]:
        props = {"version": str(self.version), "cluster.id": self.cluster_id}
        props["node.id" if self.version == 1 else "broker.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        return props

    def render(self, now: float | None = None, key_order: str = "sorted", tz_name: str = "UTC",
               utc_offset_s: int = 0) -> bytes:
        """The file text as Properties.store writes it: `#`, `#<Date.toString()>`, then key=value lines.

        key_order "sorted" is JDK 18+ (store() sorts keys); "chm" is JDK 9-17 (ConcurrentHashMap
        iteration order of the String hash codes).
        """
        props = self.to_props()
        keys = sorted(props) if key_order == "sorted" else hashmap_order(list(props), string_hash)
        lines = ["#", "#" + java_date_string(now, tz_name, utc_offset_s)]
        lines += [f"{_escape(k, True)}={_escape(props[k], False)}" for k in keys]
        return ("\n".join(lines) + "\n").encode("utf-8")

    def write(self, dir_: Path, now: float | None = None, sync: bool = True, key_order: str = "sorted") -> None:
        """Write `meta.properties` via `.tmp` + fsync + rename (JDK 18+ sorted key order by default)."""
        atomic_write(Path(dir_) / files.META_PROPERTIES_FILE, self.render(now, key_order), sync)

    @classmethod
    def read(cls, dir_: Path) -> MetaProperties:
        props = read_properties(Path(dir_) / files.META_PROPERTIES_FILE)
        version = int(props.get("version", "0"))
        node = props.get("node.id") if version == 1 else props.get("broker.id")
        return cls(props.get("cluster.id", ""), int(node) if node is not None else -1,
                   props.get("directory.id"), version)


def read_properties(path: Path) -> dict[str, str]:
    """Minimal java.util.Properties reader (comments, key=value / key:value, backslash escapes)."""
    out: dict[str, str] = {}
    for raw in Path(path).read_text("utf-8").splitlines():
        line = raw.lstrip()
        if not line or line[0] in "#!":
            continue
        key_chars, i = [], 0
        while i < len(line) and line[i] not in "=:" and not (line[i] == " "):
            if line[i] == "\\" and i + 1 < len(line):
                i += 1
                key_chars.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(line[i], line[i]))
            else:
                key_chars.append(line[i])
            i += 1
        rest = line[i:].lstrip(" ")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" ")
        val = (rest.replace("\\=", "=").replace("\\:", ":").replace("\\#", "#").replace("\\!", "!")
               .replace("\\ ", " ").replace("\\\\", "\\"))
        out["".join(key_chars)] = val
    return out


# -- .kafka_cleanshutdown -------------------------------------------------------------------


def write_clean_shutdown_file(dir_: Path, broker_epoch: int = -1, sync: bool = True) -> None:
    """`{"version":0,"brokerEpoch":N}` with no newline (Kafka 3.7+), fsynced."""
    path = Path(dir_) / files.CLEAN_SHUTDOWN_FILE
    data = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_clean_shutdown_file(dir_: Path) -> int | None:
    """Broker epoch in the marker, -1 for an old empty marker, None when there is no marker."""
    path = Path(dir_) / files.CLEAN_SHUTDOWN_FILE
    try:
        text = path.read_text("utf-8").strip()
    except FileNotFoundError:
        return None
    if not text:
        return -1
    try:
        return int(json.loads(text).get("brokerEpoch", -1))
    except (ValueError, AttributeError):
        return -1


# -- .lock ----------------------------------------------------------------------------------


_LOCKED_IN_PROCESS: set[str] = set()


class FileLock:
    """`<dir>/.lock`: 0-byte file held with an exclusive POSIX lock (conflicts with Java's tryLock).

    POSIX record locks do not conflict within one process, so locks taken by this process are also
    tracked in a set (Java's FileChannel.tryLock fails in-JVM as well).
    """

    def __init__(self, dir_: Path) -> None:
        self.path = Path(dir_) / files.LOCK_FILE
        self._fd = -1

    def _error(self) -> LogDirLockedError:
        return LogDirLockedError(
            f"Failed to acquire lock on file .lock in {self.path.parent}. A Kafka instance in another "
            "process or thread is using this directory."
        )

    def try_lock(self) -> None:
        """Take the lock or raise LogDirLockedError (Kafka: "Failed to acquire lock on file .lock")."""
        key = os.path.realpath(self.path)
        if key in _LOCKED_IN_PROCESS:
            raise self._error()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            raise self._error() from e
        self._fd = fd
        self._key = key
        _LOCKED_IN_PROCESS.add(key)

    @property
    def locked(self) -> bool:
        return self._fd >= 0

    def unlock(self) -> None:
        if self._fd >= 0:
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = -1
                _LOCKED_IN_PROCESS.discard(self._key)

    def destroy(self) -> None:
        """Unlock and delete the file (what Kafka does at clean shutdown)."""
        self.unlock()
        self.path.unlink(missing_ok=True)
