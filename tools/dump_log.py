"""``odradek dump-log``: Kafka's DumpLogSegments (``kafka-dump-log.sh``), line for line, in Python.

Prints ``.log`` segments, KRaft ``.checkpoint`` snapshots, ``.index``, ``.timeindex``,
``.snapshot`` (producer state) and ``.txnindex`` files exactly as Kafka 3.9's tool does: the same
options, the same lines on stdout, the same summaries on stderr after the last file, the same exit
codes. Where Kafka dies with an uncaught exception, this tool prints the same first line
(``Exception in thread "main" <class>: <message>``) without the JVM stack trace and exits 1.

Files are streamed: a ``.log`` is read through a bounded window with ``os.pread``, one batch at a
time, so dumping a 1 GiB segment needs only a few MiB of memory.

Usage: ``odradek dump-log --files A,B[,...] [--deep-iteration] [--print-data-log] ...``
or ``python -m odradek.tools.dump_log ...``; see ``docs/dump-log.md``.
"""

from __future__ import annotations

import os
import re
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

from odradek.logstore.offset_index import OffsetIndex
from odradek.logstore.time_index import TimeIndex
from odradek.wire.errors import ProtocolError
from odradek.wire.records import (
    BATCH_OVERHEAD,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MIN_ENTRY_SIZE,
    BatchHeader,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    LegacyMessage,
    Record,
    RecordBatch,
    TimestampType,
    iter_log_entries,
    legacy_inner_messages,
    parse_batch_header,
    parse_control_record_key,
    parse_end_txn_marker,
)
from odradek.wire.schema import codec

from .dump_log_decoders import MessageParser, make_parser
from .dump_log_java import (
    JavaException,
    java_file_name,
    java_file_string,
    java_parse_long,
    scala_hash_order,
    string_hash,
)
from .dump_log_snapshot import dump_producer_snapshot
from .json_converter import to_json

__all__ = ["DumpOptions", "main", "parse_args"]

INT_MAX = 2**31 - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
#: Bytes read per ``os.pread`` while scanning a ``.log`` (a batch bigger than this is read alone).
WINDOW = 4 * 1024 * 1024

_OFFSET_SIZE = struct.Struct(">qi")

_CONTROL_NAMES = {t.value: t.name for t in ControlRecordType}
#: KRaft control records DumpLogSegments 3.9 prints as JSON: type -> (label, message name).
_CONTROL_JSON = {
    ControlRecordType.SNAPSHOT_HEADER: ("SnapshotHeader", "SnapshotHeaderRecord"),
    ControlRecordType.SNAPSHOT_FOOTER: ("SnapshotFooter", "SnapshotFooterRecord"),
    ControlRecordType.KRAFT_VERSION: ("KRaftVersion", "KRaftVersionRecord"),
    ControlRecordType.KRAFT_VOTERS: ("KRaftVoters", "VotersRecord"),
}


@dataclass
class DumpOptions:
    """The parsed command line, with Kafka's implications already applied
    (any decoder turns on print-data-log, print-data-log turns on deep iteration).

    ``--max-bytes`` and ``--max-message-size`` are converted when first used, as Kafka's lazy
    options are (a bad value fails after the ``Dumping`` line of the first file that needs it).
    """

    files: list[str]
    print_data_log: bool
    deep_iteration: bool
    verify_index_only: bool
    index_sanity_check: bool
    skip_record_metadata: bool
    decoder: str  # "offsets", "transaction", "cluster-metadata", "remote-metadata" or "classes"
    key_decoder_class: str
    value_decoder_class: str
    raw: dict[str, list[str | None]] = field(default_factory=dict)

    @property
    def max_bytes(self) -> int:
        """``--max-bytes`` (default Integer.MAX_VALUE)."""
        return _int_option(self.raw, "max-bytes", INT_MAX)

    @property
    def max_message_size(self) -> int:
        """``--max-message-size`` (default 5 MiB)."""
        return _int_option(self.raw, "max-message-size", DEFAULT_MAX_MESSAGE_SIZE)


def _single(raw: dict[str, list[str | None]], name: str) -> str | None:
    values = raw.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise JavaException(
            "joptsimple.MultipleArgumentsForOptionException",
            f"Found multiple arguments for option {name}, but you asked for only one",
        )
    return values[0]


def _int_option(raw: dict[str, list[str | None]], name: str, default: int) -> int:
    value = _single(raw, name)
    if value is None:
        return default
    try:
        return java_parse_long(value, bits=32)
    except JavaException as e:
        raise JavaException(
            "joptsimple.OptionArgumentConversionException",
            f"Cannot parse argument '{value}' of option {name}",
            causes=[f"joptsimple.internal.ReflectionException: {e.java_text()}", e.java_text()],
        ) from None


# ---------------------------------------------------------------------------------------------
# command line (Kafka uses jopt-simple; the accepted syntax and the errors follow it)

_FLAGS = {
    "print-data-log", "verify-index-only", "index-sanity-check", "deep-iteration", "offsets-decoder",
    "transaction-log-decoder", "cluster-metadata-decoder", "remote-log-metadata-decoder",
    "skip-record-metadata", "help", "version", "share-group-state-decoder",
}
_REQUIRED_ARG = {"files", "max-message-size", "max-bytes"}
_OPTIONAL_ARG = {"key-decoder-class", "value-decoder-class"}
_STRING_DECODER = "org.apache.kafka.tools.api.StringDecoder"

_HELP = """\
Parse Kafka log segments, indexes and snapshots and print their contents (like kafka-dump-log.sh).
Option                               Description
------                               -----------
--cluster-metadata-decoder           Decode record values as KRaft cluster metadata records.
--deep-iteration                     Print every record, not only the batches (implied by
                                       --print-data-log).
--files <String: file1, file2, ...>  REQUIRED: comma separated .log/.index/.timeindex/.snapshot/
                                       .txnindex/.checkpoint files to dump.
--help                               Print this text.
--index-sanity-check                 Only run the start-up sanity check of index files.
--key-decoder-class [String]         Decoder of record keys (default:
                                       org.apache.kafka.tools.api.StringDecoder).
--max-bytes <Integer: size>          Read at most this many bytes of each .log (default:
                                       2147483647).
--max-message-size <Integer: size>   Largest batch expected when checking an index (default:
                                       5242880).
--offsets-decoder                    Decode records as __consumer_offsets keys and values.
--print-data-log                     Print record keys and values (implied by any decoder option).
--remote-log-metadata-decoder        Not supported by odradek (tiered storage metadata).
--share-group-state-decoder          Decode records as __share_group_state keys and values.
--skip-record-metadata               Do not print the offset/timestamp/size part of record lines.
--transaction-log-decoder            Decode records as __transaction_state keys and values.
--value-decoder-class [String]       Decoder of record values (default:
                                       org.apache.kafka.tools.api.StringDecoder).
--verify-index-only                  Check index entries against the log without printing them.
--version                            Print the version.
"""


class UsageError(Exception):
    """A command-line problem: Kafka prints the message (if any) and the help, exit code 1."""


def parse_args(argv: list[str]) -> DumpOptions:
    """Parse DumpLogSegments' command line with jopt-simple's rules as Kafka configures them
    (``--opt value`` or ``--opt=value``, no abbreviations, stray words ignored).
    Raises :class:`UsageError` or :class:`JavaException`."""
    raw: dict[str, list[str | None]] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        if name not in _FLAGS and name not in _REQUIRED_ARG and name not in _OPTIONAL_ARG:
            raise JavaException("joptsimple.UnrecognizedOptionException", f"{name} is not a recognized option")
        if name in _FLAGS:
            if eq:
                raise JavaException(
                    "joptsimple.UnexpectedArgumentException", f"Option {name} does not take an argument"
                )
            raw.setdefault(name, []).append(None)
        elif name in _REQUIRED_ARG:
            if not eq:
                if i >= len(argv):
                    raise JavaException(
                        "joptsimple.OptionMissingRequiredArgumentException", f"Option {name} requires an argument"
                    )
                value = argv[i]
                i += 1
            raw.setdefault(name, []).append(value)
        else:
            if not eq and i < len(argv) and not argv[i].startswith("-"):
                value = argv[i]
                i += 1
                eq = "="
            raw.setdefault(name, []).append(value if eq else None)
    if not argv or "help" in raw:
        raise UsageError("")
    if "version" in raw:
        raise UsageError("__version__")
    if "files" not in raw:
        raise UsageError('Missing required argument "[files]"')

    if "offsets-decoder" in raw:
        decoder = "offsets"
    elif "transaction-log-decoder" in raw:
        decoder = "transaction"
    elif "share-group-state-decoder" in raw:
        decoder = "share-group-state"
    elif "cluster-metadata-decoder" in raw:
        decoder = "cluster-metadata"
    elif "remote-log-metadata-decoder" in raw:
        decoder = "remote-metadata"
    else:
        decoder = "classes"
    print_data = bool(
        {"print-data-log", "offsets-decoder", "transaction-log-decoder", "cluster-metadata-decoder",
         "share-group-state-decoder",
         "remote-log-metadata-decoder", "value-decoder-class", "key-decoder-class"} & raw.keys()
    )
    files_arg = _single(raw, "files") or ""
    return DumpOptions(
        files=_java_split(files_arg, ","),
        print_data_log=print_data,
        deep_iteration=print_data or "deep-iteration" in raw,
        verify_index_only="verify-index-only" in raw,
        index_sanity_check="index-sanity-check" in raw,
        skip_record_metadata="skip-record-metadata" in raw,
        decoder=decoder,
        key_decoder_class=(raw.get("key-decoder-class") or [None])[0] or _STRING_DECODER,
        value_decoder_class=(raw.get("value-decoder-class") or [None])[0] or _STRING_DECODER,
        raw=raw,
    )


def _java_split(s: str, sep: str) -> list[str]:
    # String.split drops trailing empty strings (and returns [""] for "")
    parts = s.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


# ---------------------------------------------------------------------------------------------
# output


class Output:
    """stdout/stderr as Java's PrintStreams write them: UTF-8 text, ``\\n`` line ends, stdout
    flushed before anything goes to stderr (so a terminal shows them in order)."""

    def __init__(self, out: IO[bytes], err: IO[bytes]) -> None:
        self._out = out
        self._err = err
        self._buf: list[str] = []
        self._size = 0

    def write(self, text: str) -> None:
        """Append ``text`` to stdout (Java ``print``)."""
        self._buf.append(text)
        self._size += len(text)
        if self._size > 1 << 16:
            self.flush()

    def line(self, text: str = "") -> None:
        """Java ``println`` on stdout."""
        self.write(text + "\n")

    def err(self, text: str) -> None:
        """``System.err.println``."""
        self.flush()
        self._err.write((text + "\n").encode("utf-8", "surrogatepass"))
        self._err.flush()

    def flush(self) -> None:
        """Write out the buffered stdout text."""
        if self._buf:
            self._out.write("".join(self._buf).encode("utf-8", "surrogatepass"))
            self._buf.clear()
            self._size = 0
        self._out.flush()


class Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal (never in pipes or tests)."""

    def __init__(self, err: IO[bytes], enabled: bool) -> None:
        self._err = err
        self._enabled = enabled
        self._last = 0.0
        self._shown = False

    def update(self, name: str, done: int, total: int) -> None:
        """Redraw at most 5 times a second."""
        if not self._enabled or total <= 0:
            return
        now = time.monotonic()
        if now - self._last < 0.2:
            return
        self._last = now
        pct = min(100.0, 100.0 * done / total)
        width = 30
        filled = int(width * pct / 100)
        bar = "#" * filled + "-" * (width - filled)
        self._err.write(f"\r[{bar}] {pct:5.1f}% {name[-40:]}".encode())
        self._err.flush()
        self._shown = True

    def clear(self) -> None:
        """Erase the bar (before normal stderr output or at the end of a file)."""
        if self._shown:
            self._err.write(b"\r\x1b[K")
            self._err.flush()
            self._shown = False


# ---------------------------------------------------------------------------------------------
# summaries kept until after the last file (Kafka keeps them in Scala mutable HashMaps keyed by
# the absolute path; their iteration order decides the order of the blocks)


class Summaries:
    """The stderr blocks DumpLogSegments prints after all files."""

    def __init__(self) -> None:
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.ts_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.ts_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.ts_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}

    def print(self, out: Output) -> None:
        """Print the blocks in Kafka's order: index mismatches, time-index errors, non-consecutive offsets."""
        for path in _map_order(self.index_mismatches):
            out.err(f"Mismatches in :{path}")
            # Kafka prepends to an immutable List: newest first
            for idx, log in reversed(self.index_mismatches[path]):
                out.err(f"  Index offset: {idx}, log offset: {log}")
        for path in _map_order(self.ts_mismatches):
            out.err(f"Found timestamp mismatch in :{path}")
            for idx, log in self.ts_mismatches[path]:
                out.err(f"  Index timestamp: {idx}, log timestamp: {log}")
        for path in _map_order(self.ts_out_of_order):
            out.err(f"Found out of order timestamp in :{path}")
            for idx, prev in self.ts_out_of_order[path]:
                out.err(f"  Index timestamp: {idx}, Previously indexed timestamp: {prev}")
        for path in _map_order(self.ts_not_found):
            out.err("The following indexed offsets are not found in the log.")
            for idx, log in self.ts_not_found[path]:
                out.err(f"Indexed offset: {idx}, found log offset: {log}")
        for path in _map_order(self.non_consecutive):
            out.err(f"Non-consecutive offsets in {path}")
            for first, second in reversed(self.non_consecutive[path]):
                out.err(f"  {first} is followed by {second}")


def _map_order(m: dict[str, list[tuple[int, int]]]) -> list[str]:
    return scala_hash_order(list(m), string_hash)


# ---------------------------------------------------------------------------------------------
# reading a .log through a window


class LogReader:
    """Random reads of a file through one bounded buffer (``os.pread``), so scanning a segment
    batch by batch costs one system call per ``WINDOW`` bytes and constant memory."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self._start = 0
        self._data = b""

    def read(self, pos: int, n: int) -> memoryview:
        """Up to ``n`` bytes at ``pos`` (fewer only at the end of the file)."""
        end = self._start + len(self._data)
        if pos < self._start or pos + n > end:
            want = max(n, WINDOW)
            self._data = os.pread(self.fd, want, pos)
            self._start = pos
        off = pos - self._start
        return memoryview(self._data)[off : off + n]


class Entry(NamedTuple):
    """One shallow entry of a segment: a v2 batch or a legacy (v0/v1) message, with its position."""

    position: int
    size: int
    magic: int
    batch: RecordBatch | None  # v2 batches of at least 61 bytes
    header: BatchHeader | None  # v2 header (also for too-small v2 batches)
    legacy: LegacyMessage | None

    @property
    def last_offset(self) -> int:
        """Kafka's ``batch.lastOffset``."""
        if self.header is not None:
            return self.header.last_offset
        assert self.legacy is not None
        return self.legacy.offset


def iter_entries(reader: LogReader, start: int, end: int, file_label: str) -> Iterator[Entry]:
    """Kafka's ``FileLogInputStream`` over ``[start, end)``: stops at a tail of 17 bytes or less or
    at an incomplete batch; a declared size below 14 is a CorruptRecordException."""
    pos = start
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        head = reader.read(pos, HEADER_SIZE_UP_TO_MAGIC)
        _, length = _OFFSET_SIZE.unpack_from(head, 0)
        if length < MIN_ENTRY_SIZE:
            raise JavaException(
                "org.apache.kafka.common.errors.CorruptRecordException",
                f"Found record size {length} smaller than minimum record overhead ({MIN_ENTRY_SIZE}) in file {file_label}.",
            )
        size = length + LOG_OVERHEAD
        if pos > end - size:
            return
        magic = head[16] - 256 if head[16] > 127 else head[16]
        if magic >= 2:
            data = reader.read(pos, size)
            if size >= BATCH_OVERHEAD:
                batch = RecordBatch(data)
                yield Entry(pos, size, magic, batch, batch.header(), None)
            else:
                # Kafka reads the 61-byte header from the file even past the batch's end
                hdr_bytes = reader.read(pos, BATCH_OVERHEAD)
                if len(hdr_bytes) < BATCH_OVERHEAD:
                    raise JavaException(
                        "java.io.EOFException",
                        f"Failed to read `record batch header` from file channel. Expected to read "
                        f"{BATCH_OVERHEAD} bytes, but reached end of file after reading {len(hdr_bytes)} bytes. "
                        f"Started read from position {pos}.",
                    )
                yield Entry(pos, size, magic, None, parse_batch_header(hdr_bytes), None)
        else:
            data = reader.read(pos, size)
            try:
                (msg,) = list(iter_log_entries(bytes(data)))
            except (CorruptRecordError, ValueError) as e:
                raise _corrupt(e) from None
            yield Entry(pos, size, magic, None, None, msg._replace(position=pos))
        pos += size


_WIRE_RECORD_SIZE = re.compile(r"invalid record size (\d+): only (\d+) bytes are available")


def _corrupt(e: Exception) -> JavaException:
    """A wire.records error as the Kafka exception the tool would die with. Messages are Odradek's
    own except where the wording of Kafka's is known for the same condition."""
    msg = str(e)
    if isinstance(e, InvalidRecordError):
        m = _WIRE_RECORD_SIZE.fullmatch(msg)
        if m:
            msg = (
                f"Invalid record size: expected {m.group(1)} bytes in record payload, but instead the buffer has "
                f"only {m.group(2)} remaining bytes."
            )
        return JavaException("org.apache.kafka.common.InvalidRecordException", msg)
    return JavaException("org.apache.kafka.common.errors.CorruptRecordException", msg)


def _bool(b: bool) -> str:
    return "true" if b else "false"


def _ts_name(t: TimestampType) -> str:
    return t.display_name


# ---------------------------------------------------------------------------------------------
# .log / .checkpoint


def _records_of(entry: Entry) -> Iterator[Record | LegacyMessage]:
    """Deep iteration of one entry (Kafka's ``batch.asScala``): the records of a v2 batch, or the
    message(s) of a legacy entry (the inner ones of a compressed wrapper); errors as Java exceptions."""
    try:
        if entry.legacy is not None:
            msg = entry.legacy
            yield from (legacy_inner_messages(msg) if msg.attributes & 0x07 else [msg])
            return
        if entry.batch is None:
            raise JavaException(
                "org.apache.kafka.common.errors.CorruptRecordException",
                f"Record batch is corrupt (the size {entry.size} is smaller than the minimum allowed overhead {BATCH_OVERHEAD})",
            )
        yield from entry.batch.records()
    except (CorruptRecordError, InvalidRecordError) as e:
        raise _corrupt(e) from None


def _batch_line(entry: Entry, position: int, out: Output) -> None:
    """``printBatchLevel``: the first half is printed before the second is built, so an unknown
    codec id leaves a half line behind, like Kafka."""
    h = entry.header
    if h is not None:
        out.write(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} deleteHorizonMs: "
            + ("OptionalLong.empty" if not h.has_delete_horizon else f"OptionalLong[{h.base_timestamp}]")
        )
        codec_id = h.attributes & 0x07
        if codec_id > 4:
            raise JavaException("java.lang.IllegalArgumentException", f"Unknown compression type id: {codec_id}")
        tname = _ts_name(h.timestamp_type)
        if entry.batch is not None:
            valid = entry.batch.is_valid()
        else:
            valid = False
        out.line(
            f" position: {position} {tname}: {h.max_timestamp} size: {entry.size} magic: {entry.magic} "
            f"compresscodec: {_CODEC_NAMES[codec_id]} crc: {h.crc} isvalid: {_bool(valid)}"
        )
        return
    m = entry.legacy
    assert m is not None
    out.write(f"offset: {m.offset}")
    codec_id = m.attributes & 0x07
    if codec_id > 4:
        raise JavaException("java.lang.IllegalArgumentException", f"Unknown compression type id: {codec_id}")
    out.line(
        f" position: {position} {_ts_name(m.timestamp_type)}: {m.timestamp} size: {entry.size} magic: {m.magic} "
        f"compresscodec: {_CODEC_NAMES[codec_id]} crc: {m.crc} isvalid: {_bool(m.is_valid)}"
    )


_CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


def _control_text(rec: Record) -> str:
    """The control-record part of a record line (3.9)."""
    try:
        _, ctype = parse_control_record_key(rec.key)
    except InvalidRecordError as e:
        if rec.key is None:
            raise JavaException("java.lang.NullPointerException", "") from None
        raise JavaException("org.apache.kafka.common.InvalidRecordException", str(e)) from None
    type_id = int(ctype)
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        try:
            marker = parse_end_txn_marker(rec)
        except InvalidRecordError as e:
            raise JavaException("org.apache.kafka.common.InvalidRecordException", str(e)) from None
        return f" endTxnMarker: {ControlRecordType(ctype).name} coordinatorEpoch: {marker.coordinator_epoch}"
    spec = _CONTROL_JSON.get(ctype) if isinstance(ctype, ControlRecordType) else None
    if spec is not None:
        label, name = spec
        try:
            msg, _ = codec(name, 0).decode(rec.value if rec.value is not None else b"")
        except ProtocolError as e:
            raise JavaException("java.lang.RuntimeException", str(e)) from None
        return f" {label} {to_json(name, msg, msg.version)}"
    name = _CONTROL_NAMES.get(type_id, "UNKNOWN")
    return f" controlType: {name}({type_id})"


def dump_log(
    file_str: str,
    opts: DumpOptions,
    parser: MessageParser | None,
    sums: Summaries,
    out: Output,
    progress: Progress,
) -> None:
    """Kafka's ``dumpLog`` for a ``.log`` or ``.checkpoint`` file."""
    name = java_file_name(file_str)
    if name.endswith(".log"):
        start_offset = java_parse_long(name.split(".")[0])
        out.line(f"Log starting offset: {start_offset}")
    elif name.endswith(".checkpoint"):
        if name == "bootstrap.checkpoint":
            out.line("KRaft bootstrap snapshot")
        else:
            m = re.fullmatch(r"(\d{20})-(\d{10})\.checkpoint", name)
            if m is None:
                raise JavaException("java.util.NoSuchElementException", "No value present")
            out.line(f"Snapshot end offset: {int(m.group(1))}, epoch: {int(m.group(2))}")
    fd = _open_log(file_str)
    try:
        size = os.fstat(fd).st_size
        end = size if opts.max_bytes >= size else max(opts.max_bytes, 0)
        reader = LogReader(fd, size)
        valid_bytes = 0
        last_offset = -1
        abs_path = _absolute(file_str)
        for entry in iter_entries(reader, 0, end, file_str):
            _batch_line(entry, valid_bytes, out)
            if opts.deep_iteration:
                is_control = entry.header is not None and entry.header.is_control
                tname = _ts_name(entry.header.timestamp_type) if entry.header is not None else _ts_name(
                    entry.legacy.timestamp_type  # type: ignore[union-attr]
                )
                for rec in _records_of(entry):
                    if last_offset == -1:
                        last_offset = rec.offset
                    elif rec.offset != last_offset + 1:
                        sums.non_consecutive.setdefault(abs_path, []).append((last_offset, rec.offset))
                    last_offset = rec.offset
                    _record_line(rec, entry, tname, is_control, opts, parser, out)
            valid_bytes += entry.size
            progress.update(name, valid_bytes, end)
        progress.clear()
        trailing = end - valid_bytes
        if trailing > 0 and opts.max_bytes == INT_MAX:
            out.line(f"Found {trailing} invalid bytes at the end of {name}")
    finally:
        os.close(fd)


def _record_line(
    rec: Record | LegacyMessage,
    entry: Entry,
    tname: str,
    is_control: bool,
    opts: DumpOptions,
    parser: MessageParser | None,
    out: Output,
) -> None:
    """One record line (built as one string: this runs once per record)."""
    key = rec.key
    value = rec.value
    prefix = "| "
    parts = []
    if not opts.skip_record_metadata:
        parts.append(
            f"| offset: {rec.offset} {tname}: {rec.timestamp} keySize: {-1 if key is None else len(key)} "
            f"valueSize: {-1 if value is None else len(value)}"
        )
        prefix = " "
        if isinstance(rec, Record):
            headers = rec.headers
            keys = ",".join([h[0] for h in headers]) if headers else ""
            parts.append(f" sequence: {rec.sequence} headerKeys: [{keys}]")
        else:
            # Kafka 3.x prints a stray "}" after the legacy CRC
            parts.append(f" isValid: {_bool(rec.is_valid)} crc: {rec.crc}}}")
    try:
        if is_control and not opts.skip_record_metadata:
            parts.append(_control_text(rec))  # type: ignore[arg-type]
        if opts.print_data_log and not is_control and parser is not None:
            k, payload = parser.parse(rec.offset, key, value)
        else:
            k = payload = None
    except JavaException:
        # Kafka has already printed the start of the line when decoding fails
        out.write("".join(parts))
        raise
    if k is not None:
        parts.append(f"{prefix}key: {k}")
    if payload is not None:
        parts.append(f" payload: {payload}")
    parts.append("\n")
    out.write("".join(parts))


def _open_log(file_str: str) -> int:
    try:
        fd = os.open(file_str, os.O_RDONLY)
    except FileNotFoundError:
        raise JavaException("java.nio.file.NoSuchFileException", file_str) from None
    except IsADirectoryError:
        raise JavaException("java.nio.file.FileSystemException", f"{file_str}: Is a directory") from None
    except PermissionError:
        raise JavaException("java.nio.file.AccessDeniedException", file_str) from None
    if os.path.isdir(file_str):
        os.close(fd)
        raise JavaException("java.io.IOException", "Is a directory")
    return fd


def _absolute(file_str: str) -> str:
    """java.io.File.getAbsolutePath: resolved against the working directory, not normalised."""
    if file_str.startswith("/"):
        return file_str
    cwd = os.getcwd()
    if not file_str:
        return cwd
    return cwd.rstrip("/") + "/" + file_str


def _parent_abs(file_str: str) -> str:
    abs_path = _absolute(file_str)
    return abs_path.rsplit("/", 1)[0] or "/"


def _number_part(name: str) -> str:
    # Scala: file.getName.split("\\.")(0); Java's split of ".index" gives "" first
    return name.split(".")[0]


# ---------------------------------------------------------------------------------------------
# .index / .timeindex


def _open_index(cls: type, path: str, base: int) -> OffsetIndex | TimeIndex:
    """Open an index read-only like Kafka's AbstractIndex.

    Kafka calls ``File.createNewFile()`` even for a read-only index; for a file that did not exist
    it then fails on the tool's max index size of -1 (leaving an empty file behind, so a second
    run reports it as empty). Both effects are reproduced.
    """
    if not os.path.exists(path):
        try:
            with open(path, "xb"):
                pass
        except FileExistsError:
            pass
        except OSError as e:
            raise JavaException("java.io.IOException", e.strerror) from None
        raise JavaException("java.lang.IllegalArgumentException", "Invalid max index size: -1")
    try:
        return cls(Path(path), base, writable=False)
    except OSError as e:
        raise JavaException("java.io.FileNotFoundException", f"{path} ({e.strerror})") from None


def _sanity(index: OffsetIndex | TimeIndex, file_str: str) -> None:
    """``OffsetIndex.sanityCheck`` / ``TimeIndex.sanityCheck`` with Kafka's messages and order."""
    abs_path = _absolute(file_str)
    length = index.length
    if isinstance(index, TimeIndex):
        if index.entries:
            first_ts = index.entry(0)[0]
            last_ts, last_off = index.last_entry
            if last_ts < first_ts:
                raise JavaException(
                    _CORRUPT_INDEX,
                    f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last "
                    f"timestamp is {last_ts} which is less than the first timestamp {first_ts}",
                )
            if last_off < index.base_offset:
                raise JavaException(
                    _CORRUPT_INDEX,
                    f"Corrupt time index found, time index file ({abs_path}) has non-zero size but the last "
                    f"offset is {last_off} which is less than the first offset {index.base_offset}",
                )
        if length % 12 != 0:
            raise JavaException(
                _CORRUPT_INDEX,
                f"Time index file {abs_path} is corrupt, found {length} bytes which is neither positive nor a "
                f"multiple of 12",
            )
        return
    if index.entries and index.last_offset < index.base_offset:
        raise JavaException(
            _CORRUPT_INDEX,
            f"Corrupt index found, index file {abs_path} has non-zero size but the last offset is "
            f"{index.last_offset} which is less than the base offset {index.base_offset}",
        )
    if length % 8 != 0:
        raise JavaException(
            _CORRUPT_INDEX,
            f"Index file {abs_path} is corrupt, found {length} bytes which is neither positive nor a multiple of 8",
        )


_CORRUPT_INDEX = "org.apache.kafka.storage.internals.log.CorruptIndexException"


def _file_records(reader: LogReader, log_path: str) -> str:
    # FileRecords.toString of a whole file opened by the tool (end = Integer.MAX_VALUE)
    return f"FileRecords(size={reader.size}, file={log_path}, start=0, end={INT_MAX})"


def _first_batch_last_offset(reader: LogReader, position: int, size: int, file_str: str) -> int:
    """``fileRecords.slice(position, size).batches.iterator.next().lastOffset``."""
    if position < 0:
        raise JavaException(
            "java.lang.IllegalArgumentException",
            f"Invalid position: {position} in read from {_file_records(reader, file_str)}",
        )
    if position > reader.size:
        raise JavaException(
            "java.lang.IllegalArgumentException",
            f"Slice from position {position} exceeds end position of {_file_records(reader, file_str)}",
        )
    end = reader.size if size > reader.size - position else position + size
    for entry in iter_entries(reader, position, end, file_str):
        return entry.last_offset
    raise JavaException("java.util.NoSuchElementException", "")


def dump_index(file_str: str, opts: DumpOptions, sums: Summaries, out: Output) -> None:
    """Kafka's ``dumpIndex``."""
    name = java_file_name(file_str)
    number = _number_part(name)
    base = java_parse_long(number)
    parent = _parent_abs(file_str)
    log_path = f"{parent}/{number}.log"
    fd = _open_log(log_path)
    try:
        reader = LogReader(fd, os.fstat(fd).st_size)
        index = _open_index(OffsetIndex, file_str, base)
        try:
            entries = index.entries
            if entries == 0:
                out.line(f"{file_str} is empty.")
                return
            if opts.index_sanity_check:
                _sanity(index, file_str)
                out.line(f"{file_str} passed sanity check.")
                return
            abs_path = _absolute(file_str)
            for i in range(entries):
                offset, position = index.entry(i)
                if offset == base and i > 0:
                    return
                last = _first_batch_last_offset(reader, position, opts.max_message_size, log_path)
                if last != offset:
                    sums.index_mismatches.setdefault(abs_path, []).append((offset, last))
                if not opts.verify_index_only:
                    out.line(f"offset: {offset} position: {position}")
        finally:
            index.close_handler()
    finally:
        os.close(fd)


def dump_time_index(file_str: str, opts: DumpOptions, sums: Summaries, out: Output) -> None:
    """Kafka's ``dumpTimeIndex``."""
    name = java_file_name(file_str)
    number = _number_part(name)
    base = java_parse_long(number)
    parent = _parent_abs(file_str)
    log_path = f"{parent}/{number}.log"
    fd = _open_log(log_path)
    try:
        reader = LogReader(fd, os.fstat(fd).st_size)
        index = _open_index(OffsetIndex, f"{parent}/{number}.index", base)
        tindex = _open_index(TimeIndex, file_str, base)
        try:
            if opts.index_sanity_check:
                _sanity(tindex, file_str)
                out.line(f"{file_str} passed sanity check.")
                return
            abs_path = _absolute(file_str)
            prev_ts = -1
            for i in range(tindex.entries):
                ts, offset = tindex.entry(i)
                if offset == base and i > 0:
                    return
                _, position = index.lookup(offset)
                found: Entry | None = None
                if 0 <= position <= reader.size:
                    for entry in iter_entries(reader, position, reader.size, log_path):
                        if entry.last_offset >= offset:
                            found = entry
                            break
                else:
                    _first_batch_last_offset(reader, position, INT_MAX, log_path)
                if found is None:
                    sums.ts_not_found.setdefault(abs_path, []).append((offset, -1))
                elif found.last_offset != offset:
                    sums.ts_not_found.setdefault(abs_path, []).append((offset, found.last_offset))
                else:
                    max_ts = -1
                    for rec in _records_of(found):
                        max_ts = max(max_ts, rec.timestamp)
                    if max_ts != ts:
                        sums.ts_mismatches.setdefault(abs_path, []).append((ts, max_ts))
                    if prev_ts >= ts:
                        sums.ts_out_of_order.setdefault(abs_path, []).append((ts, prev_ts))
                if not opts.verify_index_only:
                    out.line(f"timestamp: {ts} offset: {offset}")
                prev_ts = ts
        finally:
            index.close_handler()
            tindex.close_handler()
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# .txnindex

_TXN_ENTRY = struct.Struct(">hqqqq")


def dump_txn_index(file_str: str, out: Output) -> None:
    """Kafka's ``dumpTxnIndex``: one line per 34-byte aborted-transaction entry (a partial last
    entry is ignored; a missing file prints nothing)."""
    name = java_file_name(file_str)
    dot = name.find(".")
    java_parse_long(name[:dot] if dot >= 0 else name)
    if not os.path.exists(file_str):
        return
    with open(file_str, "rb") as f:
        while True:
            data = f.read(_TXN_ENTRY.size)
            if len(data) < _TXN_ENTRY.size:
                break
            _, pid, first, last, lso = _TXN_ENTRY.unpack(data)
            # AbortedTxn.version() reads one byte at offset 0 of the int16 field
            version = data[0] - 256 if data[0] > 127 else data[0]
            if version > 0:
                raise JavaException(
                    "org.apache.kafka.common.KafkaException",
                    f"Unexpected aborted transaction version {version} in transaction index "
                    f"{_absolute(file_str)}, current version is 0",
                )
            out.line(f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} lastStableOffset: {lso}")


# ---------------------------------------------------------------------------------------------
# main


def run(opts: DumpOptions, out: Output, progress: Progress) -> None:
    """Dump every file of ``opts.files`` in order, then print the stderr summaries."""
    sums = Summaries()
    for arg in opts.files:
        file_str = java_file_string(arg)
        out.line(f"Dumping {file_str}")
        name = java_file_name(file_str)
        dot = name.rfind(".")
        if dot < 0:
            raise JavaException(
                "java.lang.StringIndexOutOfBoundsException", f"begin -1, end {len(name)}, length {len(name)}"
            )
        suffix = name[dot:]
        if suffix in (".log", ".checkpoint"):
            # Kafka evaluates dumpLog's arguments first: the parser (deprecation notices), then max-bytes
            parser = make_parser(opts, out.line)
            _ = opts.max_bytes
            dump_log(file_str, opts, parser, sums, out, progress)
        elif suffix == ".index":
            dump_index(file_str, opts, sums, out)
        elif suffix == ".timeindex":
            dump_time_index(file_str, opts, sums, out)
        elif suffix == ".snapshot":
            dump_producer_snapshot(file_str, out.line, out.write, out.err)
        elif suffix == ".txnindex":
            dump_txn_index(file_str, out)
        else:
            out.err(f"Ignoring unknown file {file_str}")
    sums.print(out)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``odradek dump-log`` / ``python -m odradek.tools.dump_log``; returns the exit code
    (0, or 1 where Kafka's tool would die with an exception or print its usage)."""
    args = list(sys.argv[1:] if argv is None else argv)
    stdout = sys.stdout.buffer
    stderr = sys.stderr.buffer
    out = Output(stdout, stderr)
    progress = Progress(stderr, _isatty(sys.stderr))
    try:
        opts = parse_args(args)
        run(opts, out, progress)
    except UsageError as e:
        out.flush()
        msg = str(e)
        if msg == "__version__":
            # Kafka prints its version on stdout and exits 0
            from odradek import __version__ as ver  # type: ignore[attr-defined]

            out.line(str(ver))
            out.flush()
            return 0
        if msg:
            out.err(msg)
        stderr.write(_HELP.encode())
        stderr.flush()
        return 1
    except JavaException as e:
        progress.clear()
        out.flush()
        out.err(f'Exception in thread "main" {e.java_text()}')
        for cause in e.causes:
            out.err(f"Caused by: {cause}")
        return 1
    except BrokenPipeError:
        # `odradek dump-log ... | head`: stop quietly; point stdout at devnull so the interpreter's
        # final flush does not raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    out.flush()
    return 0


def _isatty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


if __name__ == "__main__":
    sys.exit(main())
