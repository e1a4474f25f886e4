"""Kafka's topic name rules (cluster_metadata.validate_topic_name), used by CreateTopics and auto-creation."""

from __future__ import annotations

import pytest

from odradek.cluster_metadata import validate_topic_name


@pytest.mark.parametrize("name", ["t", "a.b_c-D9", "x" * 249])
def test_legal_names(name: str) -> None:
    assert validate_topic_name(name) is None


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "a b", "ä", "abc\n", "a/b"])
def test_illegal_names(name: str) -> None:
    # "abc\n" too: a regex `$` also matches before a final newline, Kafka's check does not
    assert validate_topic_name(name) is not None
