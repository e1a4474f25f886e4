"""Generate ``wire/messages/defs.py`` from Kafka's JSON message definitions.

Kafka's message JSON files (shipped inside its jars) are the source of truth for the wire
format and for the internal record schemas. This tool reads them straight from the jars in
the local Maven cache and writes a compact, committed Python data module in Odradek's own
format; ``wire/schema.py`` compiles that data into encoders/decoders.

Only facts are kept (names, types, version ranges, tags, defaults, ignorable); Kafka's
comments and ``about`` prose are dropped.

Versions: the 4.4.0 definitions are the base. Versions that older kafka-clients jars still
had below the base's minimum are merged back in, newest jar first (4.1.1, then 3.9.1: Produce
v0-2, Fetch v0-3, ...), so that the clients of those releases keep working. The merge is
verified: at every version, the merged field list is the same as the one of the jar that
version came from. Versions both the base and an older jar define must have the same fields
in both, except a version the older jar marked unstable (Kafka may still change those).

Usage: ``python tools/gen_messages.py [--m2 ~/.m2/repository] [--out wire/messages/defs.py]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile
from pathlib import Path

MAXV = 32767  # "N+" version ranges are open; 32767 is Kafka's own upper bound (Short.MAX_VALUE)

KAFKA = "org/apache/kafka"
BASE = ("kafka-clients", "4.4.0")
# Older jars whose lower versions are kept, newest first (each fills in below what is merged so far).
OLDER = (("kafka-clients", "4.1.1"), ("kafka-clients", "3.9.1"))
# Jars with internal record schemas: __consumer_offsets, __transaction_state, KRaft metadata,
# share-group state, raft quorum state, tiered-storage metadata.
EXTRA = (
    "kafka-group-coordinator",
    "kafka-transaction-coordinator",
    "kafka-metadata",
    "kafka-raft",
    "kafka-share-coordinator",
    "kafka-storage",
)
EXTRA_VERSION = "4.4.0"


def strip_comments(text: str) -> str:
    """Remove ``//`` comments (outside of string literals) so the text parses as JSON."""
    out = []
    for line in text.splitlines():
        in_str = False
        esc = False
        cut = len(line)
        for i, c in enumerate(line):
            if esc:
                esc = False
                continue
            if c == "\\":
                esc = True
            elif c == '"':
                in_str = not in_str
            elif not in_str and c == "/" and line[i + 1 : i + 2] == "/":
                cut = i
                break
        out.append(line[:cut])
    return "\n".join(out)


def read_jar(path: Path) -> dict[str, dict]:
    """All message definitions in one jar, by message name."""
    defs = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if not name.endswith(".json") or "/" not in name:
                continue
            top = name.split("/")
            if not (("message" in top) or ("metadata" in top)):
                continue
            try:
                spec = json.loads(strip_comments(z.read(name).decode()))
            except ValueError:
                continue
            if isinstance(spec, dict) and "validVersions" in spec and "name" in spec:
                defs[spec["name"]] = spec
    return defs


def parse_range(text: str | None) -> tuple[int, int] | None:
    """Kafka version range text ("3+", "0-7", "5", "none") as (lo, hi) or None."""
    if text is None:
        return None
    text = str(text).strip()
    if text == "none" or text == "":
        return None
    if text.endswith("+"):
        return (int(text[:-1]), MAXV)
    if "-" in text:
        lo, hi = text.split("-")
        return (int(lo), int(hi))
    return (int(text), int(text))


def fmt_range(r: tuple[int, int] | None) -> str:
    if r is None:
        return "none"
    lo, hi = r
    if hi == MAXV:
        return f"{lo}+"
    if lo == hi:
        return str(lo)
    return f"{lo}-{hi}"


def clip(r: tuple[int, int] | None, lo: int, hi: int) -> tuple[int, int] | None:
    if r is None:
        return None
    a, b = max(r[0], lo), min(r[1], hi)
    return (a, b) if a <= b else None


def join(low: tuple[int, int] | None, high: tuple[int, int] | None) -> tuple[int, int] | None:
    """Union of a range from the old jar (below the cut) and one from the new jar (at/above it)."""
    if low is None:
        return high
    if high is None:
        return low
    if low[1] + 1 < high[0]:
        raise ValueError(f"non-contiguous version ranges {low} {high}")
    return (min(low[0], high[0]), max(low[1], high[1]))


def norm_default(ftype: str, value):
    """Kafka's ``default`` attribute as a Python value (None = null)."""
    if value is None:
        return None
    s = str(value).strip()
    if s in ("null", "None"):
        return None
    if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(s, 0)
    if ftype == "float64":
        return float(s)
    if ftype == "bool":
        return s.lower() == "true"
    return s


def convert_fields(fields: list[dict], structs: dict, owner: str) -> list[dict]:
    """Fields of one struct in an intermediate form (ranges as tuples), collecting nested structs."""
    out = []
    for f in fields:
        tagged = parse_range(f.get("taggedVersions"))
        versions = parse_range(f.get("versions")) if "versions" in f else tagged
        ftype = f["type"]
        item = {
            "name": f["name"],
            "type": ftype,
            "versions": versions,
            "nullable": parse_range(f.get("nullableVersions")),
            "tagged": tagged,
            "tag": f.get("tag"),
            "ignorable": bool(f.get("ignorable", False)),
            "flexible": parse_range(f["flexibleVersions"]) if "flexibleVersions" in f else "inherit",
        }
        if "default" in f:
            item["default"] = norm_default(ftype, f["default"])
        if "fields" in f:
            sname = ftype[2:] if ftype.startswith("[]") else ftype
            if sname in structs:
                raise ValueError(f"{owner}: struct {sname} defined twice")
            structs[sname] = convert_fields(f["fields"], structs, owner)
        out.append(item)
    return out


def convert(spec: dict) -> dict:
    structs: dict[str, list] = {}
    for cs in spec.get("commonStructs", []):
        structs[cs["name"]] = convert_fields(cs["fields"], structs, spec["name"])
    fields = convert_fields(spec.get("fields", []), structs, spec["name"])
    return {
        "name": spec["name"],
        "type": spec["type"],
        "api_key": spec.get("apiKey"),
        "valid": parse_range(spec["validVersions"]),
        "flexible": parse_range(spec.get("flexibleVersions", "none")),
        "unstable_latest": bool(spec.get("latestVersionUnstable", False)),
        "fields": fields,
        "structs": structs,
    }


def merge_fields(old: list[dict], new: list[dict], cut: int, where: str) -> list[dict]:
    """Merge the old jar's fields (valid below ``cut``) into the new jar's (valid from ``cut``)."""
    old_low = []
    for f in old:
        g = dict(f)
        for k in ("versions", "nullable", "tagged"):
            g[k] = clip(f[k], 0, cut - 1)
        if g["flexible"] != "inherit":
            g["flexible"] = clip(f["flexible"], 0, cut - 1) if f["flexible"] else None
        old_low.append(g)
    by_name_new = {f["name"]: f for f in new}
    result = []
    for f in new:
        g = dict(f)
        for k in ("versions", "nullable", "tagged"):
            g[k] = clip(f[k], cut, MAXV)
        result.append(g)
    names = [f["name"] for f in result]
    prev = None
    for g in old_low:
        if g["versions"] is None:
            prev = g["name"] if g["name"] in by_name_new else prev
            continue
        if g["name"] in by_name_new:
            r = result[names.index(g["name"])]
            if r["type"] != g["type"]:
                raise ValueError(f"{where}.{g['name']}: type changed {g['type']} -> {r['type']}")
            for k in ("versions", "nullable", "tagged"):
                r[k] = join(g[k], r[k])
            if r.get("tag") is None:
                r["tag"] = g.get("tag")
            if "default" not in r and "default" in g:
                r["default"] = g["default"]
            prev = g["name"]
        else:
            pos = names.index(prev) + 1 if prev is not None else 0
            result.insert(pos, g)
            names.insert(pos, g["name"])
            prev = g["name"]
    return result


def merge(old: dict, new: dict) -> dict:
    """A definition valid for old-jar versions below new's minimum plus all of new's versions."""
    cut = new["valid"][0]
    low = clip(old["valid"], 0, cut - 1)
    if low is None:
        return new
    out = dict(new)
    out["valid"] = join(low, new["valid"])
    out["flexible"] = join(clip(old["flexible"], 0, cut - 1), clip(new["flexible"], cut, MAXV))
    out["fields"] = merge_fields(old["fields"], new["fields"], cut, new["name"])
    structs = dict(new["structs"])
    for sname, sfields in old["structs"].items():
        if sname in structs:
            structs[sname] = merge_fields(sfields, structs[sname], cut, f"{new['name']}.{sname}")
        else:
            structs[sname] = merge_fields(sfields, [], cut, f"{new['name']}.{sname}")
    out["structs"] = structs
    return out


def shape(defn: dict, fields: list[dict], version: int, depth: int = 0) -> list:
    """What is on the wire at one version (for verifying the merge)."""
    if depth > 20:
        return ["..."]
    out = []
    for f in fields:
        if f["versions"] is None or not (f["versions"][0] <= version <= f["versions"][1]):
            continue
        nullable = f["nullable"] is not None and f["nullable"][0] <= version <= f["nullable"][1]
        tagged = f["tagged"] is not None and f["tagged"][0] <= version <= f["tagged"][1]
        t = f["type"]
        sname = t[2:] if t.startswith("[]") else t
        sub = shape(defn, defn["structs"][sname], version, depth + 1) if sname in defn["structs"] else None
        out.append((f["name"], t, nullable, f["tag"] if tagged else None, f.get("default"), sub))
    return out


def in_range(r, v) -> bool:
    return r is not None and r[0] <= v <= r[1]


def verify(merged: dict, old: dict, new: dict) -> None:
    for v in range(merged["valid"][0], merged["valid"][1] + 1):
        src = new if in_range(new["valid"], v) else old
        if in_range(merged["flexible"], v) != in_range(src["flexible"], v):
            raise AssertionError(f"{merged['name']} v{v}: flexible mismatch")
        if shape(merged, merged["fields"], v) != shape(src, src["fields"], v):
            raise AssertionError(f"{merged['name']} v{v}: merged fields differ from the source jar")


def emit_field(f: dict) -> tuple:
    """One field as (name, type, versions, attrs) with only non-default attributes."""
    attrs = {}
    if f["nullable"] is not None:
        attrs["nullable"] = fmt_range(f["nullable"])
    if f["tagged"] is not None:
        attrs["tagged"] = fmt_range(f["tagged"])
        attrs["tag"] = f["tag"]
    if "default" in f:
        attrs["default"] = f["default"]
    if f["ignorable"]:
        attrs["ignorable"] = True
    if f["flexible"] != "inherit":
        attrs["flexible"] = fmt_range(f["flexible"])
    t = (f["name"], f["type"], fmt_range(f["versions"]))
    return t + (attrs,) if attrs else t


def emit(defn: dict, source: str) -> dict:
    out = {
        "type": defn["type"],
        "valid": fmt_range(defn["valid"]),
        "flexible": fmt_range(defn["flexible"]),
        "fields": tuple(emit_field(f) for f in defn["fields"]),
    }
    if defn["api_key"] is not None:
        out["api_key"] = defn["api_key"]
    if defn["unstable_latest"]:
        out["unstable_latest"] = True
    if defn["structs"]:
        out["structs"] = {k: tuple(emit_field(f) for f in v) for k, v in sorted(defn["structs"].items())}
    out["source"] = source
    return out


def jar_path(m2: Path, artifact: str, version: str) -> Path:
    return m2 / KAFKA / artifact / version / f"{artifact}-{version}.jar"


def check_overlap(old: dict, new: dict, old_spec: dict) -> None:
    """Versions both jars define are the same on the wire (a published version never changes)."""
    both = clip(old["valid"], *new["valid"])
    if both is None:
        return
    lo, hi = both
    if old_spec.get("latestVersionUnstable") and hi == old["valid"][1]:
        hi -= 1  # an unstable latest version may still change until it is released
    for v in range(lo, hi + 1):
        if in_range(old["flexible"], v) != in_range(new["flexible"], v) or wire_shape(
            shape(old, old["fields"], v)
        ) != wire_shape(shape(new, new["fields"], v)):
            raise AssertionError(f"{new['name']} v{v}: fields differ between the old and the new jar")


def wire_shape(fields: list) -> list:
    """A ``shape`` without field names: Kafka renames fields (GenerationId -> GenerationIdOrMemberEpoch)
    without changing the bytes; 3.9's JSON wrote some tags as strings ("0")."""
    return [
        (t, nullable, None if tag is None else int(tag), default, None if sub is None else wire_shape(sub))
        for _name, t, nullable, tag, default, sub in fields
    ]


def build(m2: Path) -> dict[str, dict]:
    new_defs = read_jar(jar_path(m2, *BASE))
    older = []
    for artifact, version in OLDER:
        jar = jar_path(m2, artifact, version)
        if jar.exists():
            older.append((f"{artifact}-{version}", read_jar(jar)))
        else:
            print(f"warning: {jar} missing; its older versions are not merged", file=sys.stderr)
    result: dict[str, dict] = {}
    for name, spec in sorted(new_defs.items()):
        if parse_range(spec["validVersions"]) is None:
            continue  # removed APIs (LeaderAndIsr, ...): nothing a 4.x broker speaks
        new = convert(spec)
        source = f"{BASE[0]}-{BASE[1]}"
        for old_source, old_defs in older:
            ospec = old_defs.get(name)
            # Share-group APIs (KIP-932) were early access in 3.9 and 4.1 redefined their v0: 3.9's
            # are neither merged back nor compared.
            if ospec is None or parse_range(ospec["validVersions"]) is None or "Share" in name:
                continue
            old = convert(ospec)
            check_overlap(old, new, ospec)
            merged = merge(old, new)
            if merged is not new:
                verify(merged, old, new)
                source += f" + {old_source} v{fmt_range(clip(old['valid'], 0, new['valid'][0] - 1))}"
            new = merged
        result[name] = emit(new, source)
    for artifact in EXTRA:
        jar = jar_path(m2, artifact, EXTRA_VERSION)
        if not jar.exists():
            print(f"warning: {jar} missing (mvn dependency:get it); skipped", file=sys.stderr)
            continue
        for name, spec in sorted(read_jar(jar).items()):
            if name in result or parse_range(spec["validVersions"]) is None:
                continue
            result[name] = emit(convert(spec), f"{artifact}-{EXTRA_VERSION}")
    return result


HEADER = '''"""Kafka message definitions as data, generated by ``tools/gen_messages.py``. Do not edit.

Source of truth: the JSON message definitions inside Kafka's jars (facts only: names, types,
version ranges; no prose). Format, per message name:
``{"type", "api_key"?, "valid", "flexible", "fields", "structs"?, "unstable_latest"?, "source"}``;
a field is ``(name, type, versions[, attrs])`` with attrs among ``nullable``, ``tagged``, ``tag``,
``default`` (Python value, None = null), ``ignorable``, ``flexible`` (field-level override).
Version ranges use Kafka's syntax: ``"3+"``, ``"0-7"``, ``"5"``, ``"none"``.
"""

# fmt: off
'''


def render(defs: dict[str, dict]) -> str:
    """The data module's text: one line per field, so diffs between Kafka versions stay readable."""
    lines = ["MESSAGES = {"]
    for name, d in defs.items():
        lines.append(f"    {name!r}: {{")
        for key, value in d.items():
            if key == "fields":
                lines.append('        "fields": (')
                lines.extend(f"            {f!r}," for f in value)
                lines.append("        ),")
            elif key == "structs":
                lines.append('        "structs": {')
                for sname, sfields in value.items():
                    lines.append(f"            {sname!r}: (")
                    lines.extend(f"                {f!r}," for f in sfields)
                    lines.append("            ),")
                lines.append("        },")
            else:
                lines.append(f"        {key!r}: {value!r},")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m2", default=os.path.expanduser("~/.m2/repository"))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "wire/messages/defs.py"))
    args = ap.parse_args(argv)
    defs = build(Path(args.m2))
    text = HEADER + render(defs)
    Path(args.out).write_text(text)
    print(f"wrote {len(defs)} message definitions to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
