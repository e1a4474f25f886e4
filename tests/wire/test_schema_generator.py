"""The committed generated definitions are what tools/gen_messages.py makes from Kafka's jars."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# .ci/fetch-tools.sh fills the repository's own Maven cache; a developer's ~/.m2 is the fallback.
M2 = next((p for p in (ROOT / ".cache/m2", Path(os.path.expanduser("~/.m2/repository")))
           if (p / "org/apache/kafka/kafka-clients").is_dir()), ROOT / ".cache/m2")


def _generator():
    spec = importlib.util.spec_from_file_location("gen_messages", ROOT / "tools" / "gen_messages.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_defs_are_up_to_date() -> None:
    gen = _generator()
    if not gen.jar_path(M2, *gen.BASE).exists():
        pytest.skip("Kafka jars not in the local Maven cache")
    missing = [a for a in gen.EXTRA if not gen.jar_path(M2, a, gen.EXTRA_VERSION).exists()]
    if missing:
        pytest.skip(f"jars missing: {missing}")
    text = gen.HEADER + gen.render(gen.build(M2))
    assert text == (ROOT / "wire" / "messages" / "defs.py").read_text(), "re-run tools/gen_messages.py"


def test_defs_carry_facts_only() -> None:
    text = (ROOT / "wire" / "messages" / "defs.py").read_text()
    assert "about" not in text and "Licensed to the Apache" not in text


def test_range_merge() -> None:
    gen = _generator()
    assert gen.parse_range("3+") == (3, gen.MAXV) and gen.parse_range("0-7") == (0, 7)
    assert gen.parse_range("5") == (5, 5) and gen.parse_range("none") is None
    assert gen.join((0, 2), (3, gen.MAXV)) == (0, gen.MAXV)
    with pytest.raises(ValueError):
        gen.join((0, 1), (3, 5))
    assert gen.strip_comments('{"a": "x//y"} // c') == '{"a": "x//y"} '


def _defn(fields: list[tuple[str, str, str]], valid: str, unstable: bool = False) -> tuple[dict, dict]:
    spec = {"name": "X", "type": "request", "validVersions": valid, "flexibleVersions": "none",
            "fields": [{"name": n, "type": t, "versions": v} for n, t, v in fields]}
    if unstable:
        spec["latestVersionUnstable"] = True
    return _generator().convert(spec), spec


def test_overlap_check_allows_renames_and_refuses_changed_versions() -> None:
    gen = _generator()
    old, old_spec = _defn([("GenerationId", "int32", "0+")], "0-1")
    renamed, _ = _defn([("GenerationIdOrMemberEpoch", "int32", "0+")], "0-2")
    gen.check_overlap(old, renamed, old_spec)  # same bytes under a new name
    changed, _ = _defn([("GenerationId", "int32", "0"), ("TopicId", "uuid", "1+")], "0-2")
    with pytest.raises(AssertionError, match="X v1"):
        gen.check_overlap(old, changed, old_spec)
    # the older jar's latest version was unstable: Kafka may still change it
    old_unstable, old_unstable_spec = _defn([("GenerationId", "int32", "0+")], "0-1", unstable=True)
    gen.check_overlap(old_unstable, changed, old_unstable_spec)
