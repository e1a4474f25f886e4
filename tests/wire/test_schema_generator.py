"""The committed generated definitions are what tools/gen_messages.py makes from Kafka's jars."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
M2 = Path(os.path.expanduser("~/.m2/repository"))


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
