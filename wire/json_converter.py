"""Kafka-style JSON of generated messages (what Kafka's ``*JsonConverter.write`` prints).

``DumpLogSegments --offsets-decoder`` / ``--cluster-metadata-decoder`` and the request log print
records this way; ``to_json`` follows the same rules so Odradek's tools print the same text:

* only fields that exist at the given version, in definition order, named in camelCase as in the
  JSON definitions (first letter lowercased: ``ErrorCode`` -> ``errorCode``);
* integers and floats as JSON numbers (int64 too), bools as booleans, null as ``null``;
* ``uuid`` as Kafka's 22-char base64url string, ``bytes`` as standard base64 (padded);
* ``records``: ``"recordsSizeInBytes": n`` by default, or (``serialize_records=True``) an empty
  base64 string under ``"records"``, as Kafka does (it never prints record bytes here);
* tagged fields only when they differ from their default.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .primitives import Uuid
from .records_types import FileSlice
from .schema import FieldDef, MessageDef, Struct, _in, message_def


def camel_case(name: str) -> str:
    """Kafka's JSON key for a field: the definition name with its first letter lowercased."""
    return name[:1].lower() + name[1:]


def _records_size(v) -> int:
    if isinstance(v, FileSlice):
        return v.size
    if isinstance(v, memoryview):
        return v.nbytes
    if isinstance(v, (list, tuple)):
        return sum(_records_size(x) for x in v)
    return len(v)


def _is_default(f: FieldDef, value: Any, mdef: MessageDef) -> bool:
    if f.struct is not None and not f.is_array:
        if f.has_default and f.default is None:
            return value is None
        return value == mdef.structs[f.struct].cls()
    if f.is_array:
        return value is None if (f.has_default and f.default is None) else value == []
    if f.type in ("bytes", "records"):
        d = f.default_value()
        return value is None if d is None else (value is not None and len(value) == 0)
    return value == f.default_value()


def _scalar(t: str, value: Any) -> Any:
    if value is None:
        return None
    if t == "uuid":
        return value.to_base64() if isinstance(value, Uuid) else str(value)
    if t == "bytes":
        return base64.b64encode(bytes(value)).decode("ascii")
    if t == "float64":
        return float(value)
    return value


def _struct_json(obj: Struct, version: int, mdef: MessageDef, serialize_records: bool) -> dict:
    out: dict[str, Any] = {}
    flexible = mdef.is_flexible(version)
    for f in obj._def.fields:
        if not _in(f.versions, version):
            continue
        value = getattr(obj, f.attr)
        if flexible and _in(f.tagged, version) and _is_default(f, value, mdef):
            continue
        key = camel_case(f.name)
        if f.type == "records":
            if value is None:
                out[key] = None
            elif serialize_records:
                out[key] = ""
            else:
                out[key + "SizeInBytes"] = _records_size(value)
        elif f.struct is not None:
            if value is None:
                out[key] = None
            elif f.is_array:
                out[key] = [_struct_json(x, version, mdef, serialize_records) for x in value]
            else:
                out[key] = _struct_json(value, version, mdef, serialize_records)
        elif f.is_array:
            out[key] = None if value is None else [_scalar(f.elem, x) for x in value]
        else:
            out[key] = _scalar(f.type, value)
    return out


def to_json(obj: Struct, version: int, serialize_records: bool = False) -> dict:
    """The JSON object (as Python dict) Kafka's converter writes for ``obj`` at ``version``."""
    mdef = type(obj)._message
    if not _in(mdef.valid, version):
        raise ValueError(f"{mdef.name} has no version {version}")
    return _struct_json(obj, version, message_def(mdef.name), serialize_records)


def to_json_text(obj: Struct, version: int, serialize_records: bool = False) -> str:
    """``to_json`` as compact JSON text (Jackson's default: no spaces, UTF-8 kept as is)."""
    return json.dumps(to_json(obj, version, serialize_records), separators=(",", ":"), ensure_ascii=False)
