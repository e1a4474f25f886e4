"""Render decoded Kafka messages as JSON text the way Kafka's generated ``*JsonConverter`` classes do.

DumpLogSegments prints KRaft control records, ``__consumer_offsets`` keys/values and KRaft
metadata records through Kafka's generated JSON converters and Jackson's compact ``toString``.
This module walks the message definitions of ``odradek.wire.messages`` (the same data the wire
codecs are compiled from), so every message is handled by one schema-driven function, not by
per-message code.

Rules followed (facts about Kafka's generator and Jackson):

* object keys are the field names with the first letter lower-cased, in definition order;
* a field is written only if the version has it; a tagged field only if it differs from its default;
* int/bool as JSON literals, int64/uint32 too; float64 as Java's ``Double.toString``;
* strings and uuids as JSON strings (uuids in Kafka's base64url form), bytes/records as base64
  with padding (Jackson's ``BinaryNode``), null for null strings/bytes/arrays/structs;
* Jackson's string escaping: ``"`` and ``\\``, the short escapes for \\b \\t \\n \\f \\r, ``\\u00XX``
  (upper-case hex) for the other control characters, everything else as it is.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from odradek.wire.primitives import Uuid
from odradek.wire.schema import FieldDef, MessageDef, StructDef, message_def

__all__ = ["java_double", "join_object", "json_string", "struct_fields_json", "to_json", "to_json_value"]

_SHORT_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\"}
# Jackson's output escape table for the first 128 code points; others are written as they are.
_ESCAPE_TABLE = {c: _SHORT_ESCAPES.get(c, f"\\u{c:04X}") for c in range(0x20)}
_ESCAPE_TABLE.update({0x22: '\\"', 0x5C: "\\\\"})


def json_string(s: str) -> str:
    """A JSON string literal escaped like Jackson's default generator."""
    return '"' + s.translate(_ESCAPE_TABLE) + '"'


def java_double(v: float) -> str:
    """Java's ``Double.toString`` (what Jackson writes for a DoubleNode).

    Plain notation with at least one fractional digit for 1e-3 <= |v| < 1e7, otherwise
    computerized scientific notation ``d.dddE±n``; shortest repr digits (both Java 19+ and
    Python use the shortest round-tripping digits).
    """
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    a = abs(v)
    sign = "-" if v < 0 else ""
    digits, exp = _shortest_digits(a)
    if 1e-3 <= a < 1e7:
        point = exp + 1  # position of the decimal point in the digit string
        if point <= 0:
            text = "0." + "0" * (-point) + digits
        elif point >= len(digits):
            text = digits + "0" * (point - len(digits)) + ".0"
        else:
            text = digits[:point] + "." + digits[point:]
        return sign + text
    mant = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mant}E{exp}"


def _shortest_digits(a: float) -> tuple[str, int]:
    # repr gives the shortest round-tripping digits; turn it into (digits, decimal exponent)
    s = repr(a)
    if "e" in s or "E" in s:
        mant, _, e = s.lower().partition("e")
        exp = int(e)
    else:
        mant, exp = s, None
    if exp is None:
        int_part, _, frac = mant.partition(".")
        frac = frac.rstrip("0")
        if int_part != "0":
            digits = (int_part + frac).rstrip("0") or "0"
            exp = len(int_part) - 1
        else:
            stripped = frac.lstrip("0")
            exp = -(len(frac) - len(stripped)) - 1
            digits = stripped.rstrip("0") or "0"
        return digits, exp
    int_part, _, frac = mant.partition(".")
    digits = (int_part + frac).rstrip("0") or "0"
    return digits, exp


def _field_key(name: str) -> str:
    return name[:1].lower() + name[1:]


def _in(r: tuple[int, int] | None, v: int) -> bool:
    return r is not None and r[0] <= v <= r[1]


def _is_default(f: FieldDef, value: Any) -> bool:
    if f.is_array:
        return value is None if (f.has_default and f.default is None) else (value is not None and len(value) == 0)
    default = f.default_value()
    if f.type == "uuid":
        return value is None or bytes(_uuid_bytes(value)) == bytes(16)
    if f.type == "bytes":
        if default is None:
            return value is None
        return value is not None and len(value) == 0
    if f.struct is not None:
        return False  # Kafka compares with a fresh default struct; rare in tagged fields
    return value == default


def _uuid_bytes(u: Any) -> bytes:
    if isinstance(u, Uuid):
        return base64.urlsafe_b64decode(u.to_base64() + "==")
    return bytes(u)


def _scalar(ftype: str, value: Any) -> str:
    if value is None:
        return "null"
    if ftype == "bool":
        return "true" if value else "false"
    if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return str(int(value))
    if ftype == "float64":
        return java_double(float(value))
    if ftype == "string":
        return json_string(value)
    if ftype == "uuid":
        return json_string(value.to_base64() if isinstance(value, Uuid) else Uuid(value).to_base64())
    if ftype in ("bytes", "records"):
        return json_string(base64.b64encode(bytes(value)).decode("ascii"))
    raise ValueError(f"no JSON form for field type {ftype}")


def _struct_json(mdef: MessageDef, sd: StructDef, obj: Any, version: int) -> str:
    parts = []
    for f in sd.fields:
        if not _in(f.versions, version):
            continue
        value = getattr(obj, f.attr)
        if _in(f.tagged, version) and mdef.is_flexible(version) and _is_default(f, value):
            continue
        parts.append(json_string(_field_key(f.name)) + ":" + _field_json(mdef, f, value, version))
    return "{" + ",".join(parts) + "}"


def _element_json(mdef: MessageDef, f: FieldDef, value: Any, version: int) -> str:
    if f.struct is not None:
        if value is None:
            return "null"
        return _struct_json(mdef, mdef.structs[f.struct], value, version)
    elem_type = f.type[2:] if f.type.startswith("[]") else f.type
    return _scalar(elem_type, value)


def _field_json(mdef: MessageDef, f: FieldDef, value: Any, version: int) -> str:
    if f.is_array:
        if value is None:
            return "null"
        return "[" + ",".join(_element_json(mdef, f, v, version) for v in value) + "]"
    return _element_json(mdef, f, value, version)


def to_json(name: str, obj: Any, version: int) -> str:
    """Compact JSON text of message ``name`` (an object decoded by ``wire.schema.codec``) at ``version``,
    as Kafka's ``<name>JsonConverter.write(obj, version).toString()`` prints it."""
    mdef = message_def(name)
    return _struct_json(mdef, mdef.root, obj, version)


def to_json_value(name: str, obj: Any, version: int) -> dict[str, str]:
    """The JSON text of each top-level field of ``obj`` (key -> JSON text), for callers that
    replace one field by another rendering (Kafka's offsets decoder does that for the
    consumer-protocol subscription/assignment bytes)."""
    mdef = message_def(name)
    out: dict[str, str] = {}
    for f in mdef.root.fields:
        if not _in(f.versions, version):
            continue
        value = getattr(obj, f.attr)
        if _in(f.tagged, version) and mdef.is_flexible(version) and _is_default(f, value):
            continue
        out[_field_key(f.name)] = _field_json(mdef, f, value, version)
    return out


def struct_fields_json(name: str, struct_name: str, obj: Any, version: int) -> dict[str, str]:
    """Like :func:`to_json_value` for a nested struct ``struct_name`` of message ``name``."""
    mdef = message_def(name)
    sd = mdef.structs[struct_name]
    out: dict[str, str] = {}
    for f in sd.fields:
        if not _in(f.versions, version):
            continue
        value = getattr(obj, f.attr)
        if _in(f.tagged, version) and mdef.is_flexible(version) and _is_default(f, value):
            continue
        out[_field_key(f.name)] = _field_json(mdef, f, value, version)
    return out


def join_object(fields: dict[str, str]) -> str:
    """``{"k":v,...}`` from already rendered values, keys in insertion order."""
    return "{" + ",".join(json_string(k) + ":" + v for k, v in fields.items()) + "}"

