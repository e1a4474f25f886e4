"""Record key/value decoders of ``odradek dump-log`` (Kafka's DumpLogSegments ``MessageParser``s).

* key/value decoder classes: ``StringDecoder`` (the default: UTF-8 with U+FFFD for malformed
  input), ``IntegerDecoder``, ``LongDecoder`` (also their deprecated ``kafka.serializer`` names);
* ``--offsets-decoder``: ``__consumer_offsets`` records as ``{"type":"<record type>","data":{..}}``
  keys and ``{"version":"<v>","data":{..}}`` values (``<DELETE>`` for tombstones), with the
  consumer-protocol subscription/assignment of classic groups decoded too;
* ``--transaction-log-decoder``: ``__transaction_state`` records as Kafka 3.9 prints them;
* ``--cluster-metadata-decoder``: KRaft metadata records as
  ``{"type":"<RECORD_TYPE>","version":N,"data":{..}}``.

All record schemas come from ``odradek.wire.messages`` through ``wire.schema.codec``; the JSON
comes from :mod:`odradek.tools.json_converter`.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from odradek.logstore.java_hash import topic_partition_hash
from odradek.wire.errors import ProtocolError
from odradek.wire.messages.defs import MESSAGES
from odradek.wire.schema import codec, message_def

from .dump_log_java import JavaException, java_utf8, scala_hash_order
from .json_converter import join_object, struct_fields_json, to_json, to_json_value

if TYPE_CHECKING:
    from .dump_log import DumpOptions

__all__ = ["MessageParser", "make_parser"]

Bytes = bytes | bytearray | memoryview


class MessageParser(Protocol):
    """Turns a record's key and value into the texts printed after ``key:`` and ``payload:``
    (None = that part is not printed)."""

    def parse(self, offset: int, key: Bytes | None, value: Bytes | None) -> tuple[str | None, str | None]: ...


# ---------------------------------------------------------------------------------------------
# key/value decoder classes

_DEPRECATED = {
    "kafka.serializer.StringDecoder": "org.apache.kafka.tools.api.StringDecoder",
    "kafka.serializer.LongDecoder": "org.apache.kafka.tools.api.LongDecoder",
    "kafka.serializer.IntegerDecoder": "org.apache.kafka.tools.api.IntegerDecoder",
    "kafka.serializer.DefaultDecoder": "org.apache.kafka.tools.api.DefaultDecoder",
}


def _string_decoder(b: Bytes) -> str:
    return java_utf8(b)


def _int_decoder(b: Bytes) -> str:
    if len(b) < 4:
        raise JavaException("java.nio.BufferUnderflowException", None)
    return str(struct.unpack_from(">i", bytes(b), 0)[0])


def _long_decoder(b: Bytes) -> str:
    if len(b) < 8:
        raise JavaException("java.nio.BufferUnderflowException", None)
    return str(struct.unpack_from(">q", bytes(b), 0)[0])


_DECODERS: dict[str, Callable[[Bytes], str]] = {
    "org.apache.kafka.tools.api.StringDecoder": _string_decoder,
    "org.apache.kafka.tools.api.IntegerDecoder": _int_decoder,
    "org.apache.kafka.tools.api.LongDecoder": _long_decoder,
}


def _decoder(class_name: str, println: Callable[[str], None]) -> Callable[[Bytes], str]:
    new = _DEPRECATED.get(class_name)
    if new is not None:
        println(f"{class_name} is deprecated. Please use {new} instead")
        class_name = new
    fn = _DECODERS.get(class_name)
    if fn is None:
        # DefaultDecoder prints a JVM object identity ([B@1b2c3d) that cannot be reproduced;
        # unknown classes cannot be loaded here either.
        raise JavaException("java.lang.ClassNotFoundException", class_name)
    return fn


class DecoderMessageParser:
    """``--key-decoder-class`` / ``--value-decoder-class`` (default: StringDecoder for both)."""

    def __init__(self, key_decoder: Callable[[Bytes], str], value_decoder: Callable[[Bytes], str]) -> None:
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder

    def parse(self, offset: int, key: Bytes | None, value: Bytes | None) -> tuple[str | None, str | None]:
        """Decode key and value when present."""
        k = self.key_decoder(key) if key is not None else None
        v = self.value_decoder(value) if value is not None else None
        return k, v


# ---------------------------------------------------------------------------------------------
# __consumer_offsets

#: Record types Kafka 3.9's offsets decoder knows (GroupCoordinatorRecordSerde + DumpLogSegments):
#: type -> (key message, value message). Types 0 and 1 are both offset commits.
_GROUP_TYPES_39 = {
    0: ("LegacyOffsetCommitKey", "OffsetCommitValue"),
    1: ("OffsetCommitKey", "OffsetCommitValue"),
    2: ("GroupMetadataKey", "GroupMetadataValue"),
    3: ("ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue"),
    4: ("ConsumerGroupPartitionMetadataKey", "ConsumerGroupPartitionMetadataValue"),
    5: ("ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataValue"),
    6: ("ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue"),
    7: ("ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue"),
    8: ("ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue"),
}


class _Unknown(Exception):
    def __init__(self, record_type: int) -> None:
        super().__init__(record_type)
        self.record_type = record_type


def _read_version(buf: bytes, what: str) -> int:
    if len(buf) < 2:
        raise RuntimeError(f"Could not read version from {what}'s buffer.")
    return struct.unpack_from(">h", buf, 0)[0]


def _read_message(name: str, buf: bytes, version: int, what: str) -> object:
    try:
        msg, _ = codec(name, version).decode(memoryview(buf), 2)
    except KeyError:
        raise RuntimeError(
            f"Could not read record with version {version} from {what}'s buffer due to: "
            f"Can't read version {version} of {name}."
        ) from None
    except ProtocolError as e:
        raise RuntimeError(f"Could not read record with version {version} from {what}'s buffer due to: {e}.") from None
    return msg


def _key_version(name: str) -> int:
    # Kafka 3.9 read a key at version = record type; the 4.x definitions used here give keys the
    # single version 0 with the same fields, so the key is read and printed at version 0.
    return message_def(name).valid[0]  # type: ignore[index]


class OffsetsMessageParser:
    """``--offsets-decoder``."""

    types = _GROUP_TYPES_39
    topic_decoder = "offset topic decoder"

    def parse(self, offset: int, key: Bytes | None, value: Bytes | None) -> tuple[str | None, str | None]:
        """Key and value JSON, ``<DELETE>`` for a tombstone, or Kafka's skip messages."""
        if key is None:
            raise JavaException(
                "java.lang.RuntimeException",
                f"Failed to decode message at offset {offset} using {self.topic_decoder} (message had a missing key)",
            )
        try:
            kbuf = bytes(key)
            record_type = _read_version(kbuf, "key")
            names = self.types.get(record_type)
            if names is None:
                raise _Unknown(record_type)
            key_name, value_name = names
            kmsg = _read_message(key_name, kbuf, _key_version(key_name), "key")
            key_text = join_object({"type": f'"{record_type}"', "data": to_json(key_name, kmsg, _key_version(key_name))})
            if value is None:
                return key_text, "<DELETE>"
            vbuf = bytes(value)
            vversion = _read_version(vbuf, "value")
            vmsg = _read_message(value_name, vbuf, vversion, "value")
            if value_name == "GroupMetadataValue":
                data = _group_metadata_json(vmsg, vversion)
            else:
                data = to_json(value_name, vmsg, vversion)
            return key_text, join_object({"version": f'"{vversion}"', "data": data})
        except _Unknown as u:
            return f"Unknown record type {u.record_type} at offset {offset}, skipping.", None
        except RuntimeError as e:
            return f"Error at offset {offset}, skipping. {e}", None


class ShareGroupStateMessageParser(OffsetsMessageParser):
    """``--share-group-state-decoder``: ``__share_group_state`` records (ShareSnapshot = type 0,
    ShareUpdate = type 1) printed like the offsets decoder prints its records."""

    types = {0: ("ShareSnapshotKey", "ShareSnapshotValue"), 1: ("ShareUpdateKey", "ShareUpdateValue")}
    topic_decoder = "share group state topic decoder"


def _group_metadata_json(msg: object, version: int) -> str:
    """GroupMetadataValue JSON with each member's subscription/assignment decoded when the group
    uses the consumer protocol (kept as base64 bytes when they do not parse)."""
    fields = to_json_value("GroupMetadataValue", msg, version)
    if getattr(msg, "protocol_type", None) == "consumer" and "members" in fields:
        members = []
        for m in msg.members:  # type: ignore[attr-defined]
            mf = struct_fields_json("GroupMetadataValue", "MemberMetadata", m, version)
            for fname, proto in (("subscription", "ConsumerProtocolSubscription"), ("assignment", "ConsumerProtocolAssignment")):
                raw = getattr(m, fname, None)
                if fname in mf and raw is not None:
                    rendered = _consumer_protocol_json(proto, bytes(raw))
                    if rendered is not None:
                        mf[fname] = rendered
            members.append(join_object(mf))
        fields["members"] = "[" + ",".join(members) + "]"
    return join_object(fields)


def _consumer_protocol_json(name: str, raw: bytes) -> str | None:
    if len(raw) < 2:
        return None
    version = struct.unpack_from(">h", raw, 0)[0]
    try:
        msg, _ = codec(name, version).decode(memoryview(raw), 2)
    except (KeyError, ProtocolError):
        return None
    return to_json(name, msg, version)


# ---------------------------------------------------------------------------------------------
# __transaction_state

_TXN_STATES_39 = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
                  "PrepareEpochFence")


class TransactionLogMessageParser:
    """``--transaction-log-decoder`` (Kafka 3.9's ``TransactionLog.formatRecordKeyAndValue``)."""

    def parse(self, offset: int, key: Bytes | None, value: Bytes | None) -> tuple[str | None, str | None]:
        """``transaction_metadata::transactionalId=<id>`` and the metadata summary (or ``<DELETE>``)."""
        if key is None:
            raise JavaException("java.lang.NullPointerException", None)
        kbuf = bytes(key)
        if len(kbuf) < 2:
            raise JavaException("java.nio.BufferUnderflowException", None)
        kversion = struct.unpack_from(">h", kbuf, 0)[0]
        if kversion != 0:
            return f"unknown::version={kversion}", None
        try:
            kmsg, _ = codec("TransactionLogKey", 0).decode(memoryview(kbuf), 2)
        except ProtocolError as e:
            raise JavaException("java.lang.RuntimeException", str(e)) from None
        txn_id = kmsg.transactional_id
        key_text = f"transaction_metadata::transactionalId={txn_id}"
        if value is None:
            return key_text, "<DELETE>"
        vbuf = bytes(value)
        if len(vbuf) < 2:
            raise JavaException("java.nio.BufferUnderflowException", None)
        vversion = struct.unpack_from(">h", vbuf, 0)[0]
        if not 0 <= vversion <= 1:
            raise JavaException(
                "java.lang.IllegalStateException", f"Unknown version {vversion} from the transaction log message value"
            )
        try:
            v, _ = codec("TransactionLogValue", vversion).decode(memoryview(vbuf), 2)
        except ProtocolError as e:
            raise JavaException("java.lang.RuntimeException", str(e)) from None
        status = v.transaction_status
        if not 0 <= status < len(_TXN_STATES_39):
            raise JavaException(
                "java.lang.IllegalStateException", f"Unknown transaction state id {status} from the transaction status message"
            )
        state = _TXN_STATES_39[status]
        parts = _txn_partitions(v.transaction_partitions if state != "Empty" else None)
        text = (
            f"producerId:{v.producer_id},producerEpoch:{v.producer_epoch},state={state},"
            f"partitions=[{','.join(parts)}],txnLastUpdateTimestamp={v.transaction_last_update_timestamp_ms},"
            f"txnTimeoutMs={v.transaction_timeout_ms}"
        )
        return key_text, text


def _txn_partitions(schemas: list | None) -> list[str]:
    """The partitions in the order of Kafka 3.9's ``mutable.Set[TopicPartition]`` (a Scala HashSet:
    grown by ``sizeHint`` per topic group, then iterated in hash-bucket order)."""
    if not schemas:
        return []
    items: list[tuple[str, int]] = []
    table = 16
    for s in schemas:
        group = {(s.topic, p) for p in s.partition_ids}
        new = [tp for tp in group if tp not in items]
        # addAll's sizeHint(known size of the added set) may grow the table first
        target = _table_size_for(int((len(items) + len(group) + 1) / 0.75)) if group else table
        table = max(table, target)
        for tp in new:
            if len(items) + 1 >= int(table * 0.75):
                table *= 2
            items.append(tp)
    ordered = scala_hash_order(items, lambda tp: topic_partition_hash(tp[0], tp[1]), table)
    return [f"{t}-{p}" for t, p in ordered]


def _table_size_for(cap: int) -> int:
    n = 1
    while n < cap:
        n <<= 1
    return max(n, 1)


# ---------------------------------------------------------------------------------------------
# KRaft metadata

def _metadata_types() -> dict[int, str]:
    out = {}
    for name, spec in MESSAGES.items():
        if spec["type"] == "metadata" and spec.get("source", "").startswith("kafka-metadata"):
            out[spec["api_key"]] = name
    return out


_META_TYPES = _metadata_types()


def _upper_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise RuntimeError("Error reading varint: not enough bytes")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise RuntimeError("Varint is too long, the most significant bit in the 5th byte is set")


class ClusterMetadataLogMessageParser:
    """``--cluster-metadata-decoder``: no key; the value as metadata-record JSON or an error text."""

    def parse(self, offset: int, key: Bytes | None, value: Bytes | None) -> tuple[str | None, str | None]:
        """``{"type":..,"version":..,"data":..}`` or ``Error at <offset>, skipping. <message>``."""
        try:
            if value is None:
                raise RuntimeError("null")
            buf = bytes(value)
            frame, pos = _uvarint(buf, 0)
            if frame != 1:
                raise RuntimeError(f"Could not deserialize metadata record due to unknown frame version {frame}(only frame version 1 is supported)")
            api_key, pos = _uvarint(buf, pos)
            version, pos = _uvarint(buf, pos)
            name = _META_TYPES.get(api_key)
            if name is None:
                raise RuntimeError(f"Unknown metadata id {api_key}")
            try:
                msg, end = codec(name, version).decode(memoryview(buf), pos)
            except KeyError:
                raise RuntimeError(f"Can't read version {version} of {name}") from None
            except ProtocolError as e:
                raise RuntimeError(f"Failed to deserialize record with type {name}: {e}") from None
            if end != len(buf):
                raise RuntimeError(f"Found {len(buf) - end} byte(s) of garbage after {name}")
            data = to_json(name, msg, version)
            return None, join_object({"type": f'"{_upper_snake(name)}"', "version": str(version), "data": data})
        except RuntimeError as e:
            return None, f"Error at {offset}, skipping. {e}"


# ---------------------------------------------------------------------------------------------


def make_parser(opts: DumpOptions, println: Callable[[str], None]) -> MessageParser:
    """The parser Kafka's ``opts.messageParser`` builds (evaluated once per ``.log`` file, so the
    deprecated-decoder notice is printed per file, value decoder first, as Kafka does)."""
    if opts.decoder == "offsets":
        return OffsetsMessageParser()
    if opts.decoder == "share-group-state":
        return ShareGroupStateMessageParser()
    if opts.decoder == "transaction":
        return TransactionLogMessageParser()
    if opts.decoder == "cluster-metadata":
        return ClusterMetadataLogMessageParser()
    if opts.decoder == "remote-metadata":
        raise JavaException(
            "java.lang.UnsupportedOperationException", "--remote-log-metadata-decoder is not supported by odradek"
        )
    value = _decoder(opts.value_decoder_class, println)
    key = _decoder(opts.key_decoder_class, println)
    return DecoderMessageParser(key, value)
