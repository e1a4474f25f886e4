"""Fixtures for the pipeline unit tests: one local SparkSession for the whole test session.

``pipelines/`` is a folder of scripts, not a package; its directory goes on ``sys.path`` so the
tests import ``clickstream``, ``generator``, ... as the scripts do. Without pyspark (or Java) the
tests skip with a reason starting ``SPARK MISSING``; under ``CI=true`` they fail instead, because
CI installs both (the ``test`` extra and ``.ci/fetch-tools.sh``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
sys.path.insert(0, str(PIPELINES))


def require_spark() -> None:
    """Skip (or fail under CI=true) when pyspark or a Java runtime is missing."""
    missing = [name for name, ok in (("pyspark", importlib.util.find_spec("pyspark") is not None),
                                     ("java", shutil.which("java") is not None)) if not ok]
    if missing:
        msg = f"SPARK MISSING: {', '.join(missing)} (pip install -e '.[test]'; bash .ci/fetch-tools.sh)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local[2] SparkSession with 2 shuffle partitions (also carries the Kafka connector if fetched)."""
    require_spark()
    from spark_env import FAST_LOCAL_CONF, build_session

    session = build_session("pipelines-unit-tests", conf=FAST_LOCAL_CONF)
    yield session
    # Left running on purpose: a later compat test in the same pytest process reuses the JVM
    # (getOrCreate), which is only possible while the session is alive.
