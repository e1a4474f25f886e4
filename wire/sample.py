"""Schema-driven sample messages (for tests, fuzzing seeds and benchmarks).

``sample(name, version, seed=...)`` builds an instance of a generated message class in which
every field that exists at ``version`` holds a pseudo-random NON-default value (so a codec that
drops or mangles any field is caught by a round trip), fields absent at that version keep their
defaults. With ``nulls=True`` nullable fields are set to None instead.
"""

from __future__ import annotations

import random
from typing import Any

from .primitives import Uuid
from .schema import FieldDef, MessageDef, StructDef, _in, message_class, message_def

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _int(rnd: random.Random, t: str, default: Any) -> int:
    lo, hi = _INT_RANGES[t]
    while True:
        # mostly small values (what real traffic has), sometimes the extremes
        r = rnd.random()
        if r < 0.1:
            v = lo
        elif r < 0.2:
            v = hi
        elif r < 0.6:
            v = rnd.randint(max(lo, -300), min(hi, 300))
        else:
            v = rnd.randint(lo, hi)
        if v != default:
            return v


def _scalar(rnd: random.Random, f: FieldDef, t: str, default: Any) -> Any:
    if t in _INT_RANGES:
        return _int(rnd, t, default)
    if t == "bool":
        return not default
    if t == "float64":
        return rnd.choice([0.5, -1.25, 1e300, 3.141592653589793, 2.0**-1074])
    if t == "string":
        s = f"{f.attr}-{rnd.randrange(10**6)}" + rnd.choice(["", "é", "☃", "x" * rnd.randrange(1, 200)])
        return s
    if t in ("bytes", "records"):
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40)))
    if t == "uuid":
        while True:
            u = Uuid(rnd.getrandbits(128))
            if u != Uuid.ZERO:
                return u
    raise ValueError(t)


def _fill(mdef: MessageDef, sd: StructDef, version: int, rnd: random.Random, nulls: bool, depth: int) -> Any:
    obj = sd.cls()
    for f in sd.fields:
        if not _in(f.versions, version):
            continue
        if nulls and _in(f.nullable, version):
            setattr(obj, f.attr, None)
            continue
        default = getattr(obj, f.attr)
        if f.struct is not None:
            sub = mdef.structs[f.struct]
            if f.is_array:
                n = 0 if depth > 4 else rnd.randint(1, 2)
                value = [_fill(mdef, sub, version, rnd, nulls, depth + 1) for _ in range(n)]
                if not value and default == []:
                    value = None if _in(f.nullable, version) else value
            else:
                value = _fill(mdef, sub, version, rnd, nulls, depth + 1)
        elif f.is_array:
            value = [_scalar(rnd, f, f.elem, None) for _ in range(rnd.randint(1, 3))]
        else:
            value = _scalar(rnd, f, f.type, default)
        setattr(obj, f.attr, value)
    return obj


def sample(name: str, version: int, *, seed: int = 0, nulls: bool = False) -> Any:
    """A ``name`` message for ``version`` with every present field set to a non-default value."""
    message_class(name)
    mdef = message_def(name)
    return _fill(mdef, mdef.root, version, random.Random(f"{name}/{version}/{seed}/{nulls}"), nulls, 0)
