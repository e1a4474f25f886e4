"""Compile the message definitions (``wire.messages.defs``) into classes, encoders and decoders.

* ``message_class(name)`` builds, once, the Python class of a message (e.g. ``"ProduceRequest"``)
  and of each nested struct (``ProduceRequest.TopicProduceData``, ...): ``__slots__``, snake_case
  attributes holding the union of the fields of all versions, every field defaulted, ``__eq__``
  and ``__repr__``.
* ``codec(name, version)`` compiles, once and lazily, the encoder and decoder of one message
  version into straight-line Python (generated source, ``exec``): no version checks at run time,
  runs of fixed-width fields packed/unpacked with one precompiled ``struct.Struct``.

Wire rules implemented here (Kafka's): classic vs compact (flexible-version) lengths, nullable
strings/bytes/arrays/structs (a nullable struct is preceded by an int8 marker, -1 = null),
tagged fields written only when different from their default and only when the version has
them, unknown tagged fields kept and re-emitted in tag order, ``records`` as a zero-copy
``memoryview`` on decode and as separate output chunks on encode.
"""

from __future__ import annotations

import keyword
import re
import struct
from collections.abc import Callable
from typing import Any

from . import primitives as P
from .errors import ProtocolError
from .messages.defs import MESSAGES
from .records_types import FileSlice

MAXV = 32767

#: Records payloads at least this big are not copied into the encode buffer but passed on as
#: their own output chunk (so a Produce/Fetch body is copied at most once, by the socket layer).
INLINE_RECORDS_MAX = 8192

_FIXED = P.FIXED_FORMATS | {"bool": "?"}
_PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "string", "bytes",
               "records", "uuid"}


def parse_versions(text: str | None) -> tuple[int, int] | None:
    """Kafka version range text ("3+", "0-7", "5", "none") as an inclusive (lo, hi), or None."""
    if text is None or text == "none":
        return None
    if text.endswith("+"):
        return int(text[:-1]), MAXV
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def snake_case(name: str) -> str:
    """Kafka field name to Python attribute: ``PartitionIndex`` -> ``partition_index``,
    ``V3AndBelowProducerId`` -> ``v3_and_below_producer_id``, ``ISR`` -> ``isr``."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return s + "_" if keyword.iskeyword(s) else s


def _in(r: tuple[int, int] | None, v: int) -> bool:
    return r is not None and r[0] <= v <= r[1]


class FieldDef:
    """One field of a struct as the compiler sees it (parsed from the data module)."""

    __slots__ = ("name", "attr", "type", "versions", "nullable", "tagged", "tag", "default", "has_default",
                 "ignorable", "flexible", "elem", "is_array", "struct")

    def __init__(self, spec: tuple, structs: dict) -> None:
        name, ftype, versions = spec[:3]
        attrs = spec[3] if len(spec) > 3 else {}
        self.name = name
        self.attr = snake_case(name)
        self.type = ftype
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(attrs.get("nullable"))
        self.tagged = parse_versions(attrs.get("tagged"))
        self.tag = attrs.get("tag")
        self.has_default = "default" in attrs
        self.default = attrs.get("default")
        self.ignorable = attrs.get("ignorable", False)
        self.flexible = parse_versions(attrs["flexible"]) if "flexible" in attrs else "inherit"
        self.is_array = ftype.startswith("[]")
        self.elem = ftype[2:] if self.is_array else ftype
        self.struct = self.elem if self.elem not in _PRIMITIVES else None
        if self.struct is not None and self.struct not in structs:
            raise ValueError(f"unknown struct type {self.struct}")

    def default_value(self) -> Any:
        """The Python default (fresh object for mutable ones); struct defaults need the class."""
        if self.is_array:
            return None if self.has_default and self.default is None else []
        t = self.type
        if t in ("string",):
            if self.has_default:
                return self.default
            return ""
        if t == "bytes":
            return None if self.has_default and self.default is None else b""
        if t == "records":
            return None
        if t == "uuid":
            return P.Uuid.ZERO
        if t == "bool":
            return bool(self.default) if self.has_default else False
        if t == "float64":
            return float(self.default) if self.has_default else 0.0
        if t in _FIXED:
            return int(self.default) if self.has_default else 0
        return None  # struct: handled by the caller


class StructDef:
    """A message or nested struct: its name and fields."""

    __slots__ = ("name", "fields", "cls")

    def __init__(self, name: str, fields: list[FieldDef]) -> None:
        self.name = name
        self.fields = fields
        self.cls: type | None = None


class MessageDef:
    """A message definition: kind, API key, valid/flexible versions, root struct, nested structs."""

    def __init__(self, name: str, spec: dict) -> None:
        self.name = name
        self.kind = spec["type"]
        self.api_key = spec.get("api_key")
        self.valid = parse_versions(spec["valid"])
        self.flexible = parse_versions(spec["flexible"])
        self.unstable_latest = spec.get("unstable_latest", False)
        raw_structs = spec.get("structs", {})
        self.structs: dict[str, StructDef] = {}
        for sname in raw_structs:
            self.structs[sname] = StructDef(sname, [])
        for sname, sfields in raw_structs.items():
            self.structs[sname].fields = [FieldDef(f, raw_structs) for f in sfields]
        self.root = StructDef(name, [FieldDef(f, raw_structs) for f in spec["fields"]])

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)

    def versions(self) -> range:
        return range(self.valid[0], self.valid[1] + 1) if self.valid else range(0)


_DEFS: dict[str, MessageDef] = {}


def message_def(name: str) -> MessageDef:
    """The parsed definition of a message by name (KeyError if unknown)."""
    d = _DEFS.get(name)
    if d is None:
        d = _DEFS[name] = MessageDef(name, MESSAGES[name])
    return d


def message_names() -> list[str]:
    """All message names in the data module."""
    return list(MESSAGES)


# -- classes ------------------------------------------------------------------------------------

_MISSING = object()


class Struct:
    """Base of every generated message/struct class.

    Instances are plain mutable records. ``_unknown_tagged_fields`` holds ``(tag, bytes)`` pairs
    of tags this build does not know (kept so that re-encoding gives the same bytes).
    """

    __slots__ = ("_unknown_tagged_fields",)
    _fields: tuple[str, ...] = ()
    _def: StructDef
    _message: MessageDef

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for a in self._fields:
            if getattr(self, a) != getattr(other, a):
                return False
        return (self._unknown_tagged_fields or None) == (other._unknown_tagged_fields or None)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{a}={_short_repr(getattr(self, a))}" for a in self._fields)
        return f"{type(self).__qualname__}({inner})"


def _short_repr(value: Any) -> str:
    # record payloads can be megabytes: show their size, not their bytes
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) > 64:
        return f"<{type(value).__name__} of {len(value)} bytes>"
    return repr(value)


def _default_source(f: FieldDef, ns: dict) -> str:
    """Python expression building a field's default (fresh for mutable values)."""
    if f.struct is not None and not f.is_array:
        if f.has_default and f.default is None:
            return "None"
        return f"C_{f.struct}()"
    value = f.default_value()
    if isinstance(value, list):
        return "[]"
    if isinstance(value, P.Uuid):
        return "_ZU"
    return repr(value)


def _build_classes(mdef: MessageDef) -> type:
    ns: dict[str, Any] = {"_M": _MISSING, "_ZU": P.Uuid.ZERO}
    all_structs = [mdef.root, *mdef.structs.values()]
    for sd in all_structs:
        cls = type(sd.name, (Struct,), {
            "__slots__": tuple(f.attr for f in sd.fields),
            "_fields": tuple(f.attr for f in sd.fields),
            "_def": sd,
            "_message": mdef,
            "__module__": "odradek.wire.messages",
        })
        sd.cls = cls
        ns[f"C_{sd.name}"] = cls
    for sd in all_structs:
        params = []
        body = []
        for f in sd.fields:
            d = _default_source(f, ns)
            if not (d == "[]" or d.startswith("C_")):  # immutable default: a plain parameter default
                params.append(f"{f.attr}={d}")
                body.append(f"    self.{f.attr} = {f.attr}")
            else:
                params.append(f"{f.attr}=_M")
                body.append(f"    self.{f.attr} = {d} if {f.attr} is _M else {f.attr}")
        params.append("_unknown_tagged_fields=None")
        body.append("    self._unknown_tagged_fields = _unknown_tagged_fields")
        src = f"def __init__(self, *, {', '.join(params)}):\n" + "\n".join(body) + "\n"
        exec(compile(src, f"<init {sd.name}>", "exec"), ns)
        init = ns.pop("__init__")
        init.__qualname__ = f"{sd.name}.__init__"
        sd.cls.__init__ = init
    root = mdef.root.cls
    for sd in mdef.structs.values():
        sd.cls.__qualname__ = f"{mdef.name}.{sd.name}"
        setattr(root, sd.name, sd.cls)
    root.API_KEY = mdef.api_key
    root.VERSIONS = (mdef.valid[0], mdef.valid[1]) if mdef.valid else None
    root.__doc__ = (f"Kafka {mdef.name} ({mdef.kind}"
                    + (f", API key {mdef.api_key}" if mdef.api_key is not None else "")
                    + f", versions {root.VERSIONS[0]}-{root.VERSIONS[1]}). Generated; fields in snake_case.")
    return root


def message_class(name: str) -> type:
    """The generated class of a message; nested struct classes are attributes of it."""
    mdef = message_def(name)
    if mdef.root.cls is None:
        _build_classes(mdef)
    return mdef.root.cls  # type: ignore[return-value]


# -- codecs ---------------------------------------------------------------------------------------


class Codec:
    """Compiled encoder/decoder of one message version.

    ``encode(obj) -> list`` of output chunks (``bytearray`` / ``bytes`` / ``memoryview`` /
    ``FileSlice``; concatenated they are the encoding); ``encode_into(obj, out, chunks)``
    appends to an existing buffer and returns the buffer to continue with;
    ``decode(buf, pos) -> (obj, new_pos)`` with ``buf`` a ``memoryview``.
    """

    __slots__ = ("name", "version", "encode_into", "decode_from", "cls")

    def __init__(self, name: str, version: int, encode_into: Callable, decode_from: Callable,
                 cls: type) -> None:
        self.name = name
        self.version = version
        self.encode_into = encode_into
        self.decode_from = decode_from
        self.cls = cls

    def encode(self, obj: Any) -> list:
        out = bytearray()
        chunks: list = []
        out = self.encode_into(obj, out, chunks)
        if out or not chunks:
            chunks.append(out)
        return chunks

    def encode_bytes(self, obj: Any) -> bytes:
        """Encode to one ``bytes`` (FileSlice records not allowed)."""
        parts = self.encode(obj)
        if any(isinstance(p, FileSlice) for p in parts):
            raise ValueError("encode_bytes cannot inline a FileSlice")
        return b"".join(parts)

    def decode(self, buf, pos: int = 0) -> tuple[Any, int]:
        """Decode at ``pos``; any malformation raises ``ProtocolError``."""
        if not isinstance(buf, memoryview):
            buf = memoryview(buf)
        try:
            return self.decode_from(buf, pos)
        except ProtocolError:
            raise
        except (struct.error, IndexError, ValueError, UnicodeDecodeError, OverflowError, MemoryError,
                RecursionError, TypeError) as e:
            raise ProtocolError(f"malformed {self.name} v{self.version}: {type(e).__name__}: {e}") from None


_CODECS: dict[tuple[str, int], Codec] = {}
_TOP_LEVEL_DEF = re.compile(r"\ndef ")


def codec(name: str, version: int) -> Codec:
    """The compiled codec of ``name`` at ``version`` (KeyError if the version is not valid)."""
    c = _CODECS.get((name, version))
    if c is None:
        mdef = message_def(name)
        if not _in(mdef.valid, version):
            raise KeyError(f"{name} has no version {version}")
        message_class(name)
        c = _CODECS[(name, version)] = _Compiler(mdef, version).build()
    return c


# helpers the generated code calls -------------------------------------------------------------

def _trunc(what: str, pos: int) -> ProtocolError:
    return ProtocolError(f"truncated {what}", offset=pos)


def _records_size(v) -> int:
    # FileSlice is tested before list/tuple: it is a NamedTuple
    if isinstance(v, (bytes, bytearray)):
        return len(v)
    if isinstance(v, memoryview):
        return v.nbytes
    if isinstance(v, FileSlice):
        return v.size
    if isinstance(v, (list, tuple)):
        return sum(_records_size(x) for x in v)
    raise TypeError(f"records field holds {type(v).__name__}")


def _records_parts(out: bytearray, chunks: list, v) -> bytearray:
    """Append records payload ``v``: small buffers inline, big ones and FileSlices as own chunks."""
    if isinstance(v, FileSlice):  # before the list/tuple case: a FileSlice is a NamedTuple
        if v.size:
            chunks.append(out)
            chunks.append(v)
            return bytearray()
        return out
    if isinstance(v, (list, tuple)):
        for x in v:
            out = _records_parts(out, chunks, x)
        return out
    n = v.nbytes if isinstance(v, memoryview) else len(v)
    if n <= INLINE_RECORDS_MAX:
        out += v
        return out
    chunks.append(out)
    chunks.append(v)
    return bytearray()


def _write_records(out: bytearray, chunks: list, v, compact: bool) -> bytearray:
    t = type(v)
    # fast paths for what handlers actually put here: one FileSlice or one bytes object
    if t is FileSlice or t is bytes:
        n = v.size if t is FileSlice else len(v)
        if compact:
            if n < 127:
                out.append(n + 1)
            else:
                P.write_uvarint(out, n + 1)
        else:
            out += P.INT32.pack(n)
        if n == 0:
            return out
        if t is bytes and n <= INLINE_RECORDS_MAX:
            out += v
            return out
        chunks.append(out)
        chunks.append(v)
        return bytearray()
    if v is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return out
    n = _records_size(v)
    if compact:
        P.write_uvarint(out, n + 1)
    else:
        out += P.INT32.pack(n)
    return _records_parts(out, chunks, v)


def _not_at_version(cls_name: str, field: str, version: int) -> ValueError:
    return ValueError(f"{cls_name}.{field} has a non-default value but does not exist at version {version}")


def _uvarint_fast(buf, pos):
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    return P.read_uvarint(buf, pos)


class Encoded:
    """A struct (an element of an array field) encoded ahead of time for one message version, to
    be put in a message in place of the object (`encode_struct`): a Metadata response for every
    topic reuses its topics' bytes instead of encoding ~1000 partition entries (~4 ms) again.
    At another message or version the encoder encodes `obj` as usual; reading an attribute
    reads it from `obj`, so code that inspects the message still works."""

    __slots__ = ("key", "data", "obj")

    def __init__(self, key: tuple[str, int, str], data: bytes, obj: Any) -> None:
        self.key = key
        self.data = data
        self.obj = obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self.obj, name)


def encode_struct(message: str, version: int, struct_name: str, obj: Any) -> Encoded:
    """`obj`, a `struct_name` of message `message`, encoded for `version` (see `Encoded`).
    Only structs without records, outside tagged fields, take the pre-encoded bytes."""
    c = codec(message, version)
    out = c.encode_into.__globals__[f"e_{struct_name}"](obj, bytearray(), None)
    return Encoded((message, version, struct_name), bytes(out), obj)


_NS_BASE: dict[str, Any] = {
    "_rs": P.read_string, "_rb": P.read_bytes, "_rv": P.read_bytes_view, "_ral": P.read_array_length,
    "_ru": P.read_uuid, "_ruv": _uvarint_fast, "_ws": P.write_string, "_wb": P.write_bytes,
    "_wal": P.write_array_length, "_wuv": P.write_uvarint, "_wrec": _write_records, "_trunc": _trunc,
    "_nav": _not_at_version, "_ZU": P.Uuid.ZERO,
    "_unpack_from": struct.unpack_from, "_pack": struct.pack, "_new": object.__new__, "_sorted": sorted,
    "_I8": P.INT8, "S_h": P.INT16, "S_i": P.INT32, "_Encoded": Encoded,
}


class _Compiler:
    """Writes the Python source of one message version's encode/decode functions."""

    def __init__(self, mdef: MessageDef, version: int) -> None:
        self.mdef = mdef
        self.v = version
        self.flex = mdef.is_flexible(version)
        self.ns: dict[str, Any] = dict(_NS_BASE)
        for sd in [mdef.root, *mdef.structs.values()]:
            self.ns[f"C_{sd.name}"] = sd.cls
        self.src: list[str] = []
        self.done: set[str] = set()
        self.n_structs = 0
        self._has_records: dict[str, bool] = {}
        self.tmp = 0
        self.z_done: set[str] = set()
        self.z_src: list[str] = []

    # which fields are on the wire at this version
    def present(self, f: FieldDef) -> bool:
        return _in(f.versions, self.v)

    def is_tagged(self, f: FieldDef) -> bool:
        return self.flex and _in(f.tagged, self.v)

    def compact(self, f: FieldDef) -> bool:
        if f.flexible != "inherit":
            return _in(f.flexible, self.v)
        return self.flex

    def nullable(self, f: FieldDef) -> bool:
        return _in(f.nullable, self.v)

    def struct_def(self, name: str) -> StructDef:
        return self.mdef.structs[name]

    def has_records(self, sd: StructDef) -> bool:
        r = self._has_records.get(sd.name)
        if r is None:
            self._has_records[sd.name] = False  # recursion guard
            r = False
            for f in sd.fields:
                if not self.present(f) or self.is_tagged(f):
                    continue
                if f.type == "records" or (f.struct and self.has_records(self.struct_def(f.struct))):
                    r = True
            self._has_records[sd.name] = r
        return r

    def fresh(self, prefix: str) -> str:
        self.tmp += 1
        return f"{prefix}{self.tmp}"

    def struct_const(self, fmt: str) -> str:
        name = f"S_{re.sub(r'[^A-Za-z0-9]', '_', fmt)}"
        self.ns[name] = struct.Struct(">" + fmt)
        return name

    def build(self) -> Codec:
        self.emit_struct(self.mdef.root)
        source = "\n".join(self.src + self.z_src) + "\n"
        filename = f"<codec {self.mdef.name} v{self.v}>"
        # One compile() per function: compile() holds the GIL throughout, and the broker compiles
        # codecs in a worker thread while its event loop serves other connections; the biggest
        # codecs take ~20 ms in one piece. Leading newlines keep tracebacks' line numbers right.
        starts = [0] + [m.start() + 1 for m in _TOP_LEVEL_DEF.finditer(source)]
        for start, end in zip(starts, [*starts[1:], len(source)], strict=True):
            if start < end:
                chunk = "\n" * source.count("\n", 0, start) + source[start:end]
                exec(compile(chunk, filename, "exec"), self.ns)
        self.ns["__source__"] = source
        return Codec(self.mdef.name, self.v, self.ns[f"e_{self.mdef.root.name}"],
                     self.ns[f"d_{self.mdef.root.name}"], self.mdef.root.cls)

    def emit_struct(self, sd: StructDef) -> None:
        if sd.name in self.done:
            return
        self.done.add(sd.name)
        for f in sd.fields:
            if f.struct and self.present(f):
                self.emit_struct(self.struct_def(f.struct))
        self.src.extend(self.gen_decoder(sd))
        self.src.extend(self.gen_encoder(sd))

    # ---- decoding ----

    def gen_decoder(self, sd: StructDef) -> list[str]:
        L = [f"def d_{sd.name}(buf, pos):", f"    o = _new(C_{sd.name})"]
        regular = [f for f in sd.fields if self.present(f) and not self.is_tagged(f)]
        tagged = [f for f in sd.fields if self.present(f) and self.is_tagged(f)]
        absent = [f for f in sd.fields if not self.present(f) or self.is_tagged(f)]
        # fields not read from the wire start at their defaults (tagged ones may be overwritten)
        for f in absent:
            L.append(f"    o.{f.attr} = {_default_source(f, self.ns)}")
        i = 0
        while i < len(regular):
            f = regular[i]
            if f.type in _FIXED and not f.is_array:
                group = []
                while i < len(regular) and regular[i].type in _FIXED and not regular[i].is_array:
                    group.append(regular[i])
                    i += 1
                fmt = "".join(_FIXED[g.type] for g in group)
                s = self.struct_const(fmt)
                targets = ", ".join(f"o.{g.attr}" for g in group)
                comma = "," if len(group) == 1 else ""
                L.append(f"    {targets}{comma} = {s}.unpack_from(buf, pos)")
                L.append(f"    pos += {self.ns[s].size}")
                continue
            L.extend(self.gen_read(f, f"o.{f.attr}", "    "))
            i += 1
        if self.flex:
            # nearly every struct has no tagged fields on the wire: one byte, 0
            L.append("    if buf[pos] == 0:")
            L.append("        pos += 1")
            L.append("        o._unknown_tagged_fields = None")
            L.append("    else:")
            L.append("        ntag, pos = _ruv(buf, pos)")
            L.append("        unknown = None")
            L.append("        for _ in range(ntag):")
            L.append("            tag, pos = _ruv(buf, pos)")
            L.append("            size, pos = _ruv(buf, pos)")
            L.append("            end = pos + size")
            L.append("            if end > len(buf):")
            L.append("                raise _trunc('tagged field', pos)")
            kw = "if"
            for f in sorted(tagged, key=lambda f: f.tag):
                L.append(f"            {kw} tag == {f.tag}:")
                L.append("                tbuf = buf[:end]")
                L.extend(self.gen_read(f, f"o.{f.attr}", "                ", bufname="tbuf"))
                kw = "elif"
            if tagged:
                L.append("            else:")
                ind = "                "
            else:
                ind = "            "
            L.append(f"{ind}if unknown is None:")
            L.append(f"{ind}    unknown = []")
            L.append(f"{ind}unknown.append((tag, bytes(buf[pos:end])))")
            L.append("            pos = end")
            L.append("        o._unknown_tagged_fields = unknown")
        else:
            L.append("    o._unknown_tagged_fields = None")
        L.append("    return o, pos")
        return L

    def gen_read(self, f: FieldDef, target: str, ind: str, bufname: str = "buf") -> list[str]:
        c = self.compact(f)
        n = self.nullable(f)
        b = bufname
        t = f.elem
        if not f.is_array:
            if t in _FIXED:
                s = self.struct_const(_FIXED[t])
                return [f"{ind}{target}, = {s}.unpack_from({b}, pos)", f"{ind}pos += {self.ns[s].size}"]
            if t == "string":
                return self.read_string(target, ind, b, c, n)
            if t == "bytes":
                return [f"{ind}{target}, pos = _rb({b}, pos, {c}, {n})"]
            if t == "records":
                return [f"{ind}{target}, pos = _rv({b}, pos, {c}, {n})"]
            if t == "uuid":
                return [f"{ind}{target}, pos = _ru({b}, pos)"]
            # struct
            if n:
                m = self.fresh("m")
                # Kafka marks a null struct -1, but 0 inside a tagged field (an unsigned varint)
                null = "<= 0" if b == "tbuf" else "< 0"
                return [f"{ind}{m}, = _I8.unpack_from({b}, pos)", f"{ind}pos += 1",
                        f"{ind}if {m} {null}:", f"{ind}    {target} = None", f"{ind}else:",
                        f"{ind}    {target}, pos = d_{t}({b}, pos)"]
            return [f"{ind}{target}, pos = d_{t}({b}, pos)"]
        cnt = self.fresh("n")
        L = self.read_count(cnt, ind, b, c, n)
        if n:
            L += [f"{ind}if {cnt} < 0:", f"{ind}    {target} = None", f"{ind}else:"]
            ind2 = ind + "    "
        else:
            ind2 = ind
        if t in _FIXED:
            size = struct.calcsize(">" + _FIXED[t])
            L += [f"{ind2}{target} = list(_unpack_from('>%d{_FIXED[t]}' % {cnt}, {b}, pos))",
                  f"{ind2}pos += {cnt} * {size}"]
            return L
        lst = self.fresh("l")
        e = self.fresh("e")
        L += [f"{ind2}{lst} = []", f"{ind2}for _ in range({cnt}):"]
        if t == "string":
            L.extend(self.read_string(e, ind2 + "    ", b, c, False))
        elif t == "uuid":
            L.append(f"{ind2}    {e}, pos = _ru({b}, pos)")
        elif t == "bytes":
            L.append(f"{ind2}    {e}, pos = _rb({b}, pos, {c}, False)")
        elif t in _PRIMITIVES:
            raise ValueError(f"array of {t} unsupported")
        else:
            L.append(f"{ind2}    {e}, pos = d_{t}({b}, pos)")
        L += [f"{ind2}    {lst}.append({e})", f"{ind2}{target} = {lst}"]
        return L

    def read_string(self, target: str, ind: str, b: str, compact: bool, nullable: bool) -> list[str]:
        """Inline fast path for the common short non-null string; the helper does the rest."""
        n = self.fresh("sn")
        e = self.fresh("se")
        if compact:
            return [f"{ind}{n} = {b}[pos]",
                    f"{ind}if 0 < {n} < 128:",
                    f"{ind}    {e} = pos + {n}",
                    f"{ind}    if {e} > len({b}):",
                    f"{ind}        raise _trunc('string', pos)",
                    f"{ind}    {target} = str({b}[pos + 1:{e}], 'utf-8')",
                    f"{ind}    pos = {e}",
                    f"{ind}else:",
                    f"{ind}    {target}, pos = _rs({b}, pos, True, {nullable})"]
        return [f"{ind}{n}, = S_h.unpack_from({b}, pos)",
                f"{ind}if {n} >= 0:",
                f"{ind}    {e} = pos + 2 + {n}",
                f"{ind}    if {e} > len({b}):",
                f"{ind}        raise _trunc('string', pos)",
                f"{ind}    {target} = str({b}[pos + 2:{e}], 'utf-8')",
                f"{ind}    pos = {e}",
                f"{ind}else:",
                f"{ind}    {target}, pos = _rs({b}, pos, False, {nullable})"]

    def read_count(self, cnt: str, ind: str, b: str, compact: bool, nullable: bool) -> list[str]:
        """Array element count; the inline path only takes counts that cannot over-allocate."""
        if compact:
            return [f"{ind}{cnt} = {b}[pos]",
                    f"{ind}if 0 < {cnt} < 128:",
                    f"{ind}    {cnt} -= 1",
                    f"{ind}    pos += 1",
                    f"{ind}else:",
                    f"{ind}    {cnt}, pos = _ral({b}, pos, True, {nullable})"]
        return [f"{ind}{cnt}, = S_i.unpack_from({b}, pos)",
                f"{ind}if 0 <= {cnt} < 128:",
                f"{ind}    pos += 4",
                f"{ind}else:",
                f"{ind}    {cnt}, pos = _ral({b}, pos, False, {nullable})"]

    # ---- encoding ----

    def gen_encoder(self, sd: StructDef) -> list[str]:
        L = [f"def e_{sd.name}(o, out, chunks):"]
        if sd is not self.mdef.root and not self.has_records(sd):
            key = (self.mdef.name, self.v, sd.name)
            L += ["    if o.__class__ is _Encoded:",
                  f"        if o.key == {key!r}:",
                  "            out += o.data",
                  "            return out",
                  "        o = o.obj"]
        regular = [f for f in sd.fields if self.present(f) and not self.is_tagged(f)]
        tagged = sorted((f for f in sd.fields if self.present(f) and self.is_tagged(f)), key=lambda f: f.tag)
        # Kafka refuses to silently drop a non-default value of a field the version lacks,
        # unless the field is marked ignorable.
        for f in sd.fields:
            if self.present(f) or f.ignorable:
                continue
            L.append(f"    if {self.non_default_test(f, 'o.' + f.attr)}:")
            L.append(f"        raise _nav({sd.name!r}, {f.attr!r}, {self.v})")
        i = 0
        while i < len(regular):
            f = regular[i]
            if f.type in _FIXED and not f.is_array:
                group = []
                while i < len(regular) and regular[i].type in _FIXED and not regular[i].is_array:
                    group.append(regular[i])
                    i += 1
                s = self.struct_const("".join(_FIXED[g.type] for g in group))
                L.append(f"    out += {s}.pack({', '.join('o.' + g.attr for g in group)})")
                continue
            L.extend(self.gen_write(f, f"o.{f.attr}", "    ", "out"))
            i += 1
        if self.flex:
            if not tagged:
                L += ["    u = o._unknown_tagged_fields",
                      "    if u:",
                      "        _wuv(out, len(u))",
                      "        for tag, data in _sorted(u, key=lambda x: x[0]):",
                      "            _wuv(out, tag)",
                      "            _wuv(out, len(data))",
                      "            out += data",
                      "    else:",
                      "        out.append(0)"]
            else:
                L.append("    tags = []")
                for f in tagged:
                    val = self.fresh("t")
                    L.append(f"    {val} = o.{f.attr}")
                    L.append(f"    if {self.non_default_test(f, val)}:")
                    L.append("        tb = bytearray()")
                    L.extend(self.gen_write(f, val, "        ", "tb", tagged=True))
                    L.append(f"        tags.append(({f.tag}, tb))")
                L += ["    u = o._unknown_tagged_fields",
                      "    if u:",
                      "        tags = _sorted(tags + list(u), key=lambda x: x[0])",
                      "    if tags:",
                      "        _wuv(out, len(tags))",
                      "        for tag, data in tags:",
                      "            _wuv(out, tag)",
                      "            _wuv(out, len(data))",
                      "            out += data",
                      "    else:",
                      "        out.append(0)"]
        L.append("    return out")
        return L

    def non_default_test(self, f: FieldDef, v: str) -> str:
        """Python condition: the value differs from the field's default (Kafka's rules)."""
        if f.is_array:
            if f.has_default and f.default is None:
                return f"{v} is not None"
            return f"({v} is None or len({v}) > 0)"
        if f.struct:
            if f.has_default and f.default is None:
                return f"{v} is not None"
            self.need_default_test(f.struct)
            return f"not z_{f.struct}({v})"
        t = f.type
        if t in ("bytes", "records"):
            if f.default_value() is None:
                return f"{v} is not None"
            return f"({v} is None or len({v}) > 0)"
        if t == "uuid":
            return f"{v} != _ZU"
        return f"{v} != {f.default_value()!r}"

    def gen_write(self, f: FieldDef, v: str, ind: str, out: str, tagged: bool = False) -> list[str]:
        c = self.compact(f)
        t = f.elem
        if not f.is_array:
            if t in _FIXED:
                s = self.struct_const(_FIXED[t])
                return [f"{ind}{out} += {s}.pack({v})"]
            if t == "string":
                return self.write_string(v, ind, out, c, self.nullable(f), f.attr)
            if t == "bytes":
                if self.nullable(f):
                    return [f"{ind}_wb({out}, {v}, {c})"]
                x = self.fresh("y")
                return [f"{ind}{x} = {v}", f"{ind}if {x} is None:",
                        f"{ind}    raise ValueError('{f.attr} is not nullable at version {self.v}')",
                        f"{ind}_wb({out}, {x}, {c})"]
            if t == "uuid":
                return [f"{ind}{out} += {v}._bytes"]
            if t == "records":
                if tagged:
                    raise ValueError("records in a tagged field")
                return [f"{ind}{out} = _wrec({out}, chunks, {v}, {c})"]
            call = self.struct_call(t, v, out, ind + ("    " if self.nullable(f) else ""), tagged)
            if self.nullable(f):
                x = self.fresh("x")
                return [f"{ind}{x} = {v}", f"{ind}if {x} is None:", f"{ind}    {out}.append({0 if tagged else 255})",
                        f"{ind}else:", f"{ind}    {out}.append(1)"] + self.struct_call(
                            t, x, out, ind + "    ", tagged)
            return call
        x = self.fresh("a")
        ind2 = ind + "    "
        if self.nullable(f):
            null = f"{ind}    _wal({out}, None, {c})"
        else:
            null = f"{ind}    raise ValueError('{f.attr} is not nullable at version {self.v}')"
        L = [f"{ind}{x} = {v}", f"{ind}if {x} is None:", null, f"{ind}else:"]
        if c:
            k = self.fresh("k")
            L += [f"{ind2}{k} = len({x})", f"{ind2}if {k} < 127:", f"{ind2}    {out}.append({k} + 1)",
                  f"{ind2}else:", f"{ind2}    _wuv({out}, {k} + 1)"]
        else:
            L.append(f"{ind2}{out} += S_i.pack(len({x}))")
        if t in _FIXED:
            L.append(f"{ind2}{out} += _pack('>%d{_FIXED[t]}' % len({x}), *{x})")
            return L
        e = self.fresh("e")
        L.append(f"{ind2}for {e} in {x}:")
        if t == "string":
            L.extend(self.write_string(e, ind2 + "    ", out, c, False, f.attr))
        elif t == "uuid":
            L.append(f"{ind2}    {out} += {e}._bytes")
        elif t == "bytes":
            L.append(f"{ind2}    _wb({out}, {e}, {c})")
        else:
            L.extend(self.struct_call(t, e, out, ind2 + "    ", tagged))
        return L

    def need_default_test(self, sname: str) -> None:
        """Emit ``z_<struct>(o)``: o equals a default-constructed struct (all fields, all versions).

        Kafka writes a tagged struct only when it differs from ``new Struct()``; comparing
        field by field in generated code avoids building a default object on every encode.
        """
        if sname in self.z_done:
            return
        self.z_done.add(sname)
        sd = self.struct_def(sname)
        conds = []
        for f in sd.fields:
            a = f"o.{f.attr}"
            if f.struct and not f.is_array:
                if f.has_default and f.default is None:
                    conds.append(f"{a} is None")
                else:
                    self.need_default_test(f.struct)
                    conds.append(f"({a} is not None and z_{f.struct}({a}))")
            elif f.is_array:
                conds.append(f"{a} is None" if f.has_default and f.default is None else f"{a} == []")
            elif f.type == "uuid":
                conds.append(f"{a} == _ZU")
            elif f.type in ("bytes", "records"):
                d = f.default_value()
                conds.append(f"{a} is None" if d is None else f"({a} is not None and len({a}) == 0)")
            else:
                conds.append(f"{a} == {f.default_value()!r}")
        conds.append("not o._unknown_tagged_fields")
        self.z_src.append(f"def z_{sname}(o):\n    return " + " and ".join(conds))

    def write_string(self, v: str, ind: str, out: str, compact: bool, nullable: bool, attr: str) -> list[str]:
        x = self.fresh("s")
        bb = self.fresh("b")
        nb = self.fresh("k")
        L = [f"{ind}{x} = {v}", f"{ind}if {x} is None:"]
        if nullable:
            null = repr(b"\x00" if compact else b"\xff\xff")
            L.append(f"{ind}    {out} += {null}")
        else:
            L.append(f"{ind}    raise ValueError('{attr} is not nullable at version {self.v}')")
        L += [f"{ind}else:", f"{ind}    {bb} = {x}.encode('utf-8')", f"{ind}    {nb} = len({bb})"]
        if compact:
            L += [f"{ind}    if {nb} < 127:", f"{ind}        {out}.append({nb} + 1)", f"{ind}    else:",
                  f"{ind}        _wuv({out}, {nb} + 1)"]
        else:
            L.append(f"{ind}    {out} += S_h.pack({nb})")
        L.append(f"{ind}    {out} += {bb}")
        return L

    def struct_call(self, sname: str, v: str, out: str, ind: str, tagged: bool) -> list[str]:
        if tagged:
            # a tagged struct is sized before it is written, so it must not split into chunks
            if self.has_records(self.struct_def(sname)):
                raise ValueError("records inside a tagged struct")
            return [f"{ind}e_{sname}({v}, {out}, None)"]
        if self.has_records(self.struct_def(sname)):
            return [f"{ind}{out} = e_{sname}({v}, {out}, chunks)"]
        return [f"{ind}e_{sname}({v}, {out}, chunks)"]
