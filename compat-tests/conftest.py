"""Fixtures for compat-tests: real Apache Kafka (the oracle), Odradek, and the Java client driver.

Brokers (all share the ``kafka_oracle.BrokerProcess`` interface: ``bootstrap``, ``log_dirs``,
``start()``, ``stop()``, ``kill()``, ``restart()``):

* ``kafka_broker`` -- one started Kafka 4.4.0 per test module;
* ``kafka_broker_factory(version=..., overrides=..., start=True)`` -- fresh brokers per test;
* ``odradek_broker`` / ``odradek_broker_factory(overrides=..., start=True)`` -- the same for Odradek;
* ``any_broker`` -- module-scoped, parametrized over ``kafka`` and ``odradek``: write a scenario
  once, run it against both;
* ``broker_factory(kind, **kwargs)`` -- ``kind`` is ``"kafka"`` or ``"odradek"``.

Tools: ``java_client(bootstrap, version=...)`` returns a ``kafka_oracle.JavaClient``; ``kcat``
is the kcat binary; ``dump_log_segments`` is ``kafka_oracle.dump_log_segments``.
Tests that use a real-Kafka fixture get the ``oracle`` marker automatically.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# compat-tests/ is not a package (its name has a dash); make its helper modules importable.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka_oracle import (  # noqa: E402
    DEFAULT_KAFKA_VERSION,
    BrokerProcess,
    JavaClient,
    KafkaBroker,
    dump_log_segments,
    require_tool,
)
from odradek_broker import OdradekBroker  # noqa: E402

#: Fixtures that need the real Kafka jars; tests using them are marked ``oracle``.
ORACLE_FIXTURES = {"kafka_broker", "kafka_broker_factory", "java_client", "dump_log_segments_tool"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a real-Kafka fixture as ``oracle`` (so ``-m "not oracle"`` works)."""
    for item in items:
        if ORACLE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.oracle)


def _make_broker(kind: str, workdir: Path, **kwargs: object) -> BrokerProcess:
    if kind == "kafka":
        version = str(kwargs.get("version", DEFAULT_KAFKA_VERSION))
        require_tool(f"kafka-{version}")
        return KafkaBroker(workdir, **kwargs)  # type: ignore[arg-type]
    if kind == "odradek":
        return OdradekBroker(workdir, **kwargs)  # type: ignore[arg-type]
    raise ValueError(f"unknown broker kind {kind!r}")


def _shutdown(broker: BrokerProcess) -> None:
    # Clean stop first so a broker's teardown is also a shutdown test; SIGKILL no matter what,
    # so a stuck JVM never outlives the test session.
    try:
        broker.stop()
    finally:
        broker.kill()


class _Factory:
    """Creates brokers of one test (or module) and tears all of them down at the end."""

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self.tmp = tmp
        self.brokers: list[BrokerProcess] = []

    def __call__(self, kind: str, *, start: bool = True, **kwargs: object) -> BrokerProcess:
        broker = _make_broker(kind, self.tmp.mktemp(kind), **kwargs)
        self.brokers.append(broker)
        if start:
            broker.start()
        return broker

    def close(self) -> None:
        errors = []
        for broker in reversed(self.brokers):
            try:
                _shutdown(broker)
            except Exception as exc:  # noqa: BLE001 - tear down the rest, then report
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., BrokerProcess]]:
    """``broker_factory("kafka" | "odradek", start=True, **kwargs)``: fresh brokers for one test."""
    factory = _Factory(tmp_path_factory)
    yield factory
    factory.close()


@pytest.fixture
def kafka_broker_factory(broker_factory: _Factory) -> Callable[..., KafkaBroker]:
    """``kafka_broker_factory(version="4.4.0", overrides=None, start=True)`` -> :class:`KafkaBroker`."""
    return lambda **kwargs: broker_factory("kafka", **kwargs)  # type: ignore[return-value]


@pytest.fixture
def odradek_broker_factory(broker_factory: _Factory) -> Callable[..., OdradekBroker]:
    """``odradek_broker_factory(overrides=None, start=True)`` -> :class:`OdradekBroker`."""
    return lambda **kwargs: broker_factory("odradek", **kwargs)  # type: ignore[return-value]


@pytest.fixture(scope="module")
def _module_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Factory]:
    factory = _Factory(tmp_path_factory)
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def kafka_broker(_module_factory: _Factory) -> KafkaBroker:
    """A running Kafka 4.4.0 broker shared by the tests of one module."""
    return _module_factory("kafka")  # type: ignore[return-value]


@pytest.fixture(scope="module")
def odradek_broker(_module_factory: _Factory) -> OdradekBroker:
    """A running Odradek broker shared by the tests of one module."""
    return _module_factory("odradek")  # type: ignore[return-value]


@pytest.fixture(
    scope="module",
    params=[pytest.param("kafka", marks=pytest.mark.oracle), "odradek"],
)
def any_broker(request: pytest.FixtureRequest) -> BrokerProcess:
    """``kafka_broker``, then ``odradek_broker``: the same scenario runs against Kafka and Odradek.

    It hands out the module's shared brokers, so a module that also uses ``kafka_broker`` or
    ``odradek_broker`` starts no extra one. Tests see ``request.param`` in their id
    (``test_x[kafka]``, ``test_x[odradek]``).
    """
    return request.getfixturevalue(f"{request.param}_broker")


@pytest.fixture(scope="session")
def java_client() -> Iterator[Callable[..., JavaClient]]:
    """``java_client(bootstrap_or_broker, version="4.4.0")`` -> :class:`JavaClient` (the stock Java client).

    Clients are cached per (bootstrap, version), so a module's tests share one driver JVM;
    all of them are closed at the end of the session.
    """
    clients: dict[tuple[str, str], JavaClient] = {}

    def make(bootstrap: str | BrokerProcess, version: str = DEFAULT_KAFKA_VERSION) -> JavaClient:
        require_tool(f"java-driver-{version}")
        if isinstance(bootstrap, BrokerProcess):
            bootstrap = bootstrap.bootstrap
        key = (bootstrap, version)
        if key not in clients:
            clients[key] = JavaClient(bootstrap, version=version)
        return clients[key]

    yield make
    for client in clients.values():
        client.close()


@pytest.fixture(scope="session")
def kcat() -> str:
    """Path of the kcat binary (librdkafka's command-line client)."""
    return require_tool("kcat")


@pytest.fixture(scope="session")
def dump_log_segments_tool() -> Callable[..., tuple[str, str, int]]:
    """:func:`kafka_oracle.dump_log_segments` once the Kafka jars are known to be there."""
    require_tool("kafka")
    return dump_log_segments
