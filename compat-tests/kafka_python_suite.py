"""Run kafka-python's own integration tests (from its PyPI sdist) against an external broker.

``suite_dir(version)`` fetches the sdist once into ``.cache/kafka-python-<version>/`` with pip.
Its ``test/integration`` tests run against a broker they are told about with ``KAFKA_URI``;
the sdist leaves out ``test/__init__.py`` and ``test/service.py`` (the process helpers its
fixtures import, used only for brokers it starts itself), and Python's own ``test`` package
would shadow a ``test`` directory without ``__init__.py``. Run as a script, this module fills
those two gaps in ``sys.modules`` and then runs pytest on the sdist's files, unchanged and with
the sdist's own ``kafka`` package first on the path:

    python kafka_python_suite.py <sdist dir> <pytest args...>
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path

# as kafka_oracle.CACHE_DIR (this file also runs as a script, without the harness on its path)
CACHE_DIR = Path(os.environ.get("ODRADEK_CACHE_DIR", Path(__file__).resolve().parent.parent / ".cache"))


class SuiteMissing(RuntimeError):
    """The sdist could not be fetched (no network, no pip)."""


def suite_dir(version: str) -> Path:
    """The unpacked kafka-python ``version`` sdist (fetched with ``pip download`` the first time)."""
    dest = CACHE_DIR / f"kafka-python-{version}"
    if (dest / "test" / "integration" / "conftest.py").is_file():
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", f"kafka-python=={version}", "--no-binary", ":all:",
             "--no-deps", "--quiet", "-d", tmp],
            capture_output=True, text=True, timeout=300)
        archives = list(Path(tmp).glob("kafka_python-*.tar.gz"))
        if proc.returncode != 0 or not archives:
            raise SuiteMissing(f"pip download kafka-python=={version} failed: {proc.stderr.strip()[-500:]}")
        with tarfile.open(archives[0]) as tar:
            tar.extractall(tmp, filter="data")
        unpacked = Path(tmp) / f"kafka_python-{version}"
        if not (unpacked / "test" / "integration" / "conftest.py").is_file():
            raise SuiteMissing(f"the kafka-python {version} sdist has no test/integration/conftest.py")
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        staging = CACHE_DIR / f".kafka-python-{version}.{os.getpid()}"
        unpacked.rename(staging)
        try:
            staging.rename(dest)
        except OSError:  # another run got there first
            pass
    return dest


def run(suite: Path, bootstrap: str, kafka_version: str, pytest_args: list[str],
        timeout: float = 900.0) -> subprocess.CompletedProcess[str]:
    """Run the sdist's tests (``pytest_args``, paths relative to the sdist) against ``bootstrap``."""
    env = {
        **os.environ,
        "KAFKA_URI": f"PLAINTEXT://{bootstrap}",
        "KAFKA_VERSION": kafka_version,
        # the fixtures insist on a Kafka install dir even for an external broker; never used then
        "KAFKA_ROOT": str(suite),
    }
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(suite), "-p", "no:cacheprovider", "-o", "addopts=",
         "-W", "ignore::pytest.PytestUnraisableExceptionWarning", "-rA", "-p", "no:logging", *pytest_args],
        cwd=suite, env=env, capture_output=True, text=True, timeout=timeout)


class _ExternalService:
    """What the fixtures keep for a broker they did not start: nothing to stop or dump."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    def stop(self) -> None:
        pass

    def dump_logs(self) -> None:
        pass


class _SpawnedService:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("this harness runs kafka-python's tests against an external broker (KAFKA_URI) only")


def _main(argv: list[str]) -> int:
    suite = argv[0]
    sys.path.insert(0, suite)
    package = types.ModuleType("test")
    package.__path__ = [str(Path(suite) / "test")]
    sys.modules["test"] = package
    service = types.ModuleType("test.service")
    service.ExternalService = _ExternalService  # type: ignore[attr-defined]
    service.SpawnedService = _SpawnedService  # type: ignore[attr-defined]
    sys.modules["test.service"] = service
    import pytest  # noqa: PLC0415 - after the path is set up

    return int(pytest.main(argv[1:]))


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
