"""Kafka request/response framing on top of the compiled schemas (sans-IO).

Server side: ``decode_request_header`` (enough to answer UNSUPPORTED_VERSION without touching
the body), ``decode_request`` and ``encode_response``. Client side (CLI tools, tests):
``encode_request`` and ``decode_response``. Version tables: ``API_NAMES``, ``request_class``,
``response_class``, ``supported_versions``, ``api_versions``.

Header versions follow Kafka's rules: request header v2 for flexible API versions, else v1;
response header v1 for flexible versions, else v0, except that ApiVersions responses always use
v0 (a client must be able to read the answer before it knows which versions the broker has).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any, NamedTuple

from . import primitives as P
from .errors import ProtocolError, UnsupportedVersionError
from .messages.defs import MESSAGES
from .records_types import FileSlice
from .schema import Codec, codec, message_class, message_def

__all__ = [
    "API_KEYS",
    "API_NAMES",
    "FileSlice",
    "Request",
    "RequestHeader",
    "api_versions",
    "decode_request",
    "decode_request_body",
    "decode_request_header",
    "decode_response",
    "decode_response_header",
    "encode_request",
    "encode_response",
    "frame_size",
    "join_pieces",
    "request_class",
    "request_header_version",
    "response_class",
    "response_header_version",
    "supported_versions",
]

API_VERSIONS_KEY = 18

#: API key -> API name ("Produce", "Fetch", ...), for every API with request+response definitions
API_NAMES: dict[int, str] = {}
for _name, _spec in MESSAGES.items():
    if _spec["type"] == "request" and _name.endswith("Request"):
        _api = _name[: -len("Request")]
        if f"{_api}Response" in MESSAGES:
            API_NAMES[_spec["api_key"]] = _api
API_NAMES = dict(sorted(API_NAMES.items()))
#: API name -> API key
API_KEYS: dict[str, int] = {v: k for k, v in API_NAMES.items()}

_HEAD = struct.Struct(">hhi")
_CORR = struct.Struct(">i")
_SIZE = struct.Struct(">i")


def _api_name(api_key: int) -> str:
    try:
        return API_NAMES[api_key]
    except KeyError:
        raise ProtocolError(f"unknown API key {api_key}") from None


def request_class(api_key: int) -> type:
    """Generated request class of an API (``request_class(0)`` is ``ProduceRequest``)."""
    return message_class(_api_name(api_key) + "Request")


def response_class(api_key: int) -> type:
    """Generated response class of an API."""
    return message_class(_api_name(api_key) + "Response")


def supported_versions(api_key: int, include_unstable: bool = False) -> tuple[int, int]:
    """(min, max) versions this build can decode and encode for an API.

    The union of Kafka 3.9.1's, 4.1.1's and 4.4.0's ranges (so Produce starts at v0). Unless
    ``include_unstable``, a latest version Kafka marks unstable (not advertised by a default
    broker, e.g. InitProducerId v6 in 4.4) is left out. What the broker serves is each
    handler's own range (handlers/registry.py), not this.
    """
    name = _api_name(api_key)
    req = message_def(name + "Request")
    resp = message_def(name + "Response")
    lo = max(req.valid[0], resp.valid[0])
    hi = min(req.valid[1], resp.valid[1])
    if not include_unstable and (req.unstable_latest or resp.unstable_latest):
        hi -= 1
    return lo, hi


def api_versions(include_unstable: bool = False) -> dict[int, tuple[int, int]]:
    """API key -> (min, max) for every API with a usable version range (for ApiVersions)."""
    out = {}
    for key in API_NAMES:
        lo, hi = supported_versions(key, include_unstable)
        if lo <= hi:
            out[key] = (lo, hi)
    return out


def request_header_version(api_key: int, api_version: int) -> int:
    """2 if the request version is flexible, else 1 (Kafka's rule; v0 is long gone)."""
    return 2 if message_def(_api_name(api_key) + "Request").is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 if the response version is flexible, else 0; ApiVersions responses are always 0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if message_def(_api_name(api_key) + "Response").is_flexible(api_version) else 0


class RequestHeader:
    """A decoded request header (v1/v2).

    ``tagged_fields`` are the header's raw ``(tag, bytes)`` tagged fields (v2), normally None.
    """

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "header_version", "tagged_fields")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None = None,
                 header_version: int | None = None, tagged_fields: list | None = None) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        if header_version is None:
            header_version = request_header_version(api_key, api_version)
        self.header_version = header_version
        self.tagged_fields = tagged_fields

    @property
    def api_name(self) -> str:
        return API_NAMES.get(self.api_key, f"Unknown{self.api_key}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"RequestHeader(api_key={self.api_key} ({self.api_name}), api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


class Request(NamedTuple):
    """A decoded request: its header and the body (an instance of the generated request class)."""

    header: RequestHeader
    body: Any


def _as_view(frame) -> memoryview:
    mv = frame if isinstance(frame, memoryview) else memoryview(frame)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def decode_request_header(frame) -> tuple[RequestHeader, int]:
    """Decode a request frame's header; returns it and the offset where the body starts.

    Raises ``ProtocolError`` for a truncated header or an unknown API key. An unsupported
    version of a known API is NOT an error here (the server answers UNSUPPORTED_VERSION);
    its header version is derived from the API's flexible range, as Kafka does.
    """
    mv = _as_view(frame)
    if len(mv) < 8:
        raise ProtocolError(f"request header truncated ({len(mv)} bytes)")
    api_key, api_version, correlation_id = _HEAD.unpack_from(mv, 0)
    name = API_NAMES.get(api_key)
    if name is None:
        raise ProtocolError(f"unknown API key {api_key}")
    hv = 2 if message_def(name + "Request").is_flexible(api_version) else 1
    # the client id keeps its classic int16 length even in header v2 (old brokers must read it)
    client_id, pos = P.read_string(mv, 8, False, True)
    tagged = None
    if hv >= 2:
        tagged, pos = P.read_tagged_fields(mv, pos)
        tagged = tagged or None
    return RequestHeader(api_key, api_version, correlation_id, client_id, hv, tagged), pos


def _request_codec(header: RequestHeader) -> Codec:
    name = API_NAMES[header.api_key] + "Request"
    try:
        return codec(name, header.api_version)
    except KeyError:
        raise UnsupportedVersionError(f"{name} v{header.api_version} is not supported") from None


def decode_request_body(header: RequestHeader, frame, offset: int) -> Any:
    """Decode the body of a request whose header ``decode_request_header`` returned."""
    body, _ = _request_codec(header).decode(_as_view(frame), offset)
    return body


def decode_request(frame) -> Request:
    """Decode a whole request frame (without its size prefix).

    ``ProtocolError`` for anything malformed; its subclass ``UnsupportedVersionError`` when the
    API version has no schema here (the header is then fine: see ``decode_request_header``).
    ``records`` fields are zero-copy ``memoryview`` slices of ``frame``.
    """
    mv = _as_view(frame)
    header, pos = decode_request_header(mv)
    body, _ = _request_codec(header).decode(mv, pos)
    return Request(header, body)


def _finish(chunks: list) -> list:
    """Write the 4-byte size prefix reserved at the start of the first chunk."""
    total = 0
    for c in chunks:
        if isinstance(c, FileSlice):
            total += c.size
        elif isinstance(c, memoryview):
            total += c.nbytes
        else:
            total += len(c)
    _SIZE.pack_into(chunks[0], 0, total - 4)
    return chunks


def encode_response(api_key, api_version: int | None = None, correlation_id: int | None = None,
                    body: Any = None) -> list[bytes | bytearray | memoryview | FileSlice]:
    """Encode a response frame, 4-byte size prefix included, as a list of output pieces.

    ``api_key`` may be a ``RequestHeader`` (its api key, version and correlation id are used
    unless given). ``body`` is an instance of the API's response class. The pieces, written in
    order, are the frame: buffers (``bytearray``/``bytes``/``memoryview``) and ``FileSlice``
    items (from ``records`` fields) that the server should ``os.sendfile``.
    """
    if isinstance(api_key, RequestHeader):
        header = api_key
        api_key = header.api_key
        api_version = header.api_version if api_version is None else api_version
        correlation_id = header.correlation_id if correlation_id is None else correlation_id
    if api_version is None or correlation_id is None or body is None:
        raise TypeError("encode_response needs api_key, api_version, correlation_id and body")
    name = _api_name(api_key) + "Response"
    if getattr(type(body), "_message", None) is None or type(body)._message.name != name:
        raise TypeError(f"body is a {type(body).__name__}, expected {name}")
    c = codec(name, api_version)
    out = bytearray(4)
    out += _CORR.pack(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        out.append(0)  # no tagged fields in the response header
    chunks: list = []
    out = c.encode_into(body, out, chunks)
    if out or not chunks:
        chunks.append(out)
    return _finish(chunks)


def encode_request(api_version: int, correlation_id: int, body: Any, client_id: str | None = "odradek",
                   api_key: int | None = None) -> list[bytes | bytearray | memoryview | FileSlice]:
    """Client side: encode a request frame (size prefix included) from a generated request body."""
    mdef = getattr(type(body), "_message", None)
    if mdef is None or mdef.kind != "request":
        raise TypeError(f"body is a {type(body).__name__}, not a generated request")
    if api_key is None:
        api_key = mdef.api_key
    c = codec(mdef.name, api_version)
    out = bytearray(4)
    out += _HEAD.pack(api_key, api_version, correlation_id)
    P.write_string(out, client_id, False)
    if request_header_version(api_key, api_version) >= 2:
        out.append(0)
    chunks: list = []
    out = c.encode_into(body, out, chunks)
    if out or not chunks:
        chunks.append(out)
    return _finish(chunks)


def decode_response_header(frame, api_key: int, api_version: int) -> tuple[int, int]:
    """Client side: (correlation_id, body_offset) of a response frame."""
    mv = _as_view(frame)
    if len(mv) < 4:
        raise ProtocolError("response header truncated")
    (corr,) = _CORR.unpack_from(mv, 0)
    pos = 4
    if response_header_version(api_key, api_version) >= 1:
        _, pos = P.read_tagged_fields(mv, pos)
    return corr, pos


def decode_response(frame, api_key: int, api_version: int) -> tuple[int, Any]:
    """Client side: decode a response frame (no size prefix) -> (correlation_id, body)."""
    mv = _as_view(frame)
    corr, pos = decode_response_header(mv, api_key, api_version)
    try:
        c = codec(_api_name(api_key) + "Response", api_version)
    except KeyError:
        raise UnsupportedVersionError(f"{API_NAMES[api_key]}Response v{api_version} is not supported") from None
    try:
        body, _ = c.decode(mv, pos)
    except ProtocolError:
        if api_key != API_VERSIONS_KEY or api_version == 0:
            raise
        # A broker that lacks this ApiVersions version answers UNSUPPORTED_VERSION in a v0 body;
        # Kafka's client reads it as v0 when the newer layout does not parse.
        body, _ = codec(_api_name(api_key) + "Response", 0).decode(mv, pos)
    return corr, body


def frame_size(pieces: Iterable) -> int:
    """Total bytes of an encoded piece list (FileSlices count their size)."""
    return sum(p.size if isinstance(p, FileSlice) else (p.nbytes if isinstance(p, memoryview) else len(p))
               for p in pieces)


def join_pieces(pieces: Iterable) -> bytes:
    """Concatenate encoded buffer pieces into bytes (tests/tools; no I/O, so no FileSlices)."""
    parts = list(pieces)
    if any(isinstance(p, FileSlice) for p in parts):
        raise TypeError("join_pieces cannot read a FileSlice (wire/ does no I/O)")
    return b"".join(parts)
