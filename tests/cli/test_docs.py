"""The documentation site builds cleanly and its generated reference pages match the code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from odradek.config import BROKER_CONFIGS
from odradek.handlers.registry import REGISTRY, load_handlers
from odradek.tools import gen_docs
from odradek.wire.protocol import API_NAMES

ROOT = Path(__file__).resolve().parents[2]


def test_generated_pages_are_current() -> None:
    stale = gen_docs.stale_pages()
    assert not stale, f"stale generated docs {stale}: run `python -m odradek.tools.gen_docs`"


def test_configuration_page_lists_every_key_with_its_default() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): line for line in text.splitlines() if line.startswith("| `")}
    for name in ("odradek.metrics.port", "odradek.log.levels", "log.retention.hours", "listeners"):
        assert name in BROKER_CONFIGS
    for name in BROKER_CONFIGS:
        assert name in rows, name
    assert "| `168` |" in rows["log.retention.hours"]


def test_protocol_page_has_one_row_per_api_with_the_served_range() -> None:
    load_handlers()
    text = (ROOT / "docs" / "protocol.md").read_text()
    rows = [line.split("|") for line in text.splitlines() if line[:2] == "| " and line[2].isdigit()]
    assert [int(r[1]) for r in rows] == sorted(API_NAMES)
    for r in rows:
        handler = REGISTRY.get(int(r[1]))
        if handler is None:
            assert r[5].strip() == "not served"
        else:
            assert r[4].strip().startswith(f"{handler.min_version}–{handler.max_version}")


def test_nav_names_existing_pages() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(items):
        for item in items:
            for value in item.values():
                yield from (pages(value) if isinstance(value, list) else [value])

    for page in pages(config["nav"]):
        assert (ROOT / "docs" / page).exists(), page


def test_mkdocs_build_strict(tmp_path) -> None:
    # mkdocs and mkdocs-material come with the test extra (pip install -e '.[test]'), as in CI.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").exists()
