"""Differential test against kafka-python 3.0.12's independent JSON-driven protocol classes.

For every (API, version) both implementations know (kafka-python's own validVersions intersected
with ours), in both directions:
* Odradek encodes a sample -> kafka-python decodes -> kafka-python re-encodes: same bytes, and
  the values kafka-python sees equal Odradek's;
* a kafka-python object built from the same values -> kafka-python encodes -> Odradek decodes:
  equal to the sample, and Odradek re-encodes the same bytes.
A mismatch is a failure, never a skip.
"""

from __future__ import annotations

import importlib
import pkgutil
import uuid

import pytest

from odradek.wire.primitives import Uuid
from odradek.wire.sample import sample
from odradek.wire.schema import Struct, _in, codec, message_def

kp = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_message import ApiMessage  # noqa: E402
from kafka.protocol.data_container import DataContainer  # noqa: E402
from kafka.protocol.schemas.fields.codecs import BitField  # noqa: E402

INT32_MIN = -(2**31)


def _is_bitfield(kfield) -> bool:
    # kafka-python exposes int32 authorized-operations fields as sets of bit numbers (None = INT32_MIN)
    return getattr(kfield, "_type", None) is BitField


def _kafka_python_classes() -> dict[str, type]:
    for m in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        try:
            importlib.import_module(m.name)
        except Exception:  # pragma: no cover - optional submodules
            pass
    out = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        c = stack.pop()
        stack.extend(c.__subclasses__())
        if getattr(c, "_class_version", 1) is None and getattr(c, "_json", None):
            out[c.__name__] = c
    return out


KCLASSES = _kafka_python_classes()


def _cases() -> list[tuple[str, int]]:
    cases = []
    for name, kc in sorted(KCLASSES.items()):
        lo = int(str(kc._json["validVersions"]).split("-")[0].rstrip("+"))
        hi = kc._valid_versions[1]
        md = message_def(name)
        for v in range(max(lo, md.valid[0]), min(hi, md.valid[1]) + 1):
            cases.append((name, v))
    return cases


CASES = _cases()


def test_coverage() -> None:
    names = {n for n, _ in CASES}
    assert len(KCLASSES) >= 100 and len(CASES) >= 400
    for api in ("Produce", "Fetch", "Metadata", "ApiVersions", "JoinGroup", "OffsetCommit", "TxnOffsetCommit"):
        assert f"{api}Request" in names and f"{api}Response" in names


# Fields are compared by position (kafka-python renames a few, e.g. cluster_authorized_operations
# -> authorized_operations, and turns those bitfields into sets of operations).


def _ours_present(obj, version: int) -> list:
    return [f for f in obj._def.fields if _in(f.versions, version)]


def _theirs_present(kstruct, version: int) -> list:
    return [f for f in kstruct._fields if f.for_version_q(version)]


def _plain_ours(obj, version: int):
    """Our object as nested lists of the fields present at ``version``, neutral value types."""
    if isinstance(obj, Struct):
        return [_plain_ours(getattr(obj, f.attr), version) for f in _ours_present(obj, version)]
    if isinstance(obj, list):
        return [_plain_ours(x, version) for x in obj]
    if isinstance(obj, Uuid):
        return obj.bytes
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    return obj


def _plain_theirs(obj, version: int):
    if hasattr(obj, "_struct"):
        return [INT32_MIN if _is_bitfield(f) and getattr(obj, f.name) is None
                else _plain_theirs(getattr(obj, f.name), version)
                for f in _theirs_present(obj._struct, version)]
    if isinstance(obj, (set, frozenset)):  # authorized-operations bitfield as a set of bit numbers
        bits = sum(1 << int(op) for op in obj)
        return bits - (1 << 32) if bits >= 1 << 31 else bits
    if isinstance(obj, list):
        return [_plain_theirs(x, version) for x in obj]
    if isinstance(obj, uuid.UUID):
        return obj.bytes
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    return obj


def _to_theirs(obj, kstruct, version: int, top_cls=None):
    """Build a kafka-python object with our values, using kafka-python's field metadata."""
    kwargs = {}
    ours = _ours_present(obj, version)
    theirs = _theirs_present(kstruct, version)
    assert len(ours) == len(theirs), (type(obj).__qualname__, [f.attr for f in ours], [f.name for f in theirs])
    for mine, f in zip(ours, theirs, strict=True):
        value = getattr(obj, mine.attr)
        if value is not None and (f.is_struct_array() or f.is_struct()):
            if f.is_struct_array():
                value = [_to_theirs(x, f, version) for x in value]
            else:
                value = _to_theirs(value, f, version)
        elif _is_bitfield(f):
            value = None if value == INT32_MIN else BitField.from_32_bit_field(value)
        elif isinstance(value, Uuid):
            value = uuid.UUID(bytes=value.bytes)
        elif isinstance(value, list):
            value = [uuid.UUID(bytes=x.bytes) if isinstance(x, Uuid) else x for x in value]
        kwargs[f.name] = value
    if top_cls is not None:
        return top_cls(version=version, **kwargs)
    if kstruct.data_class is None:
        # kafka-python attaches nested data classes lazily (on first decode); do the same
        kstruct.set_data_class(type(kstruct.type_str, (DataContainer,), {"_struct": kstruct}))
    return kstruct(**kwargs)


def _samples(name: str, version: int):
    for seed in range(3):
        for nulls in (False, True):
            obj = sample(name, version, seed=seed, nulls=nulls)
            if name == "ApiVersionsResponse":
                # kafka-python (like Java clients) reads any ApiVersions answer with an error as v0
                obj.error_code = 0
            yield seed, nulls, obj


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_odradek_to_kafka_python(name: str, version: int) -> None:
    kc = KCLASSES[name]
    c = codec(name, version)
    for seed, nulls, obj in _samples(name, version):
        data = c.encode_bytes(obj)
        theirs = kc.decode(data, version=version)
        theirs._header = None  # decode bypasses __init__; encode looks at the header slot
        assert _plain_theirs(theirs, version) == _plain_ours(obj, version), (seed, nulls)
        assert bytes(theirs.encode(version=version)) == data, (seed, nulls)


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_kafka_python_to_odradek(name: str, version: int) -> None:
    kc = KCLASSES[name]
    c = codec(name, version)
    for seed, nulls, obj in _samples(name, version):
        theirs = _to_theirs(obj, kc._struct, version, top_cls=kc)
        data = bytes(theirs.encode(version=version))
        ours, end = c.decode(data)
        assert end == len(data)
        assert ours == obj, (seed, nulls)
        assert c.encode_bytes(ours) == data, (seed, nulls)
