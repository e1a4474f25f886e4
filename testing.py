"""Embedding Odradek in tests: a real broker on a free port, and a pytest plugin.

``running_broker()`` starts a broker with its own temporary log dir and yields a
:class:`RunningBroker` whose ``bootstrap_servers`` any Kafka client can use::

    from odradek.testing import running_broker

    with running_broker(num_partitions=3) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

Config overrides are Kafka's keys, given as a mapping (``configs={"num.partitions": "3"}``)
or as keyword arguments with dots written as underscores (Kafka keys have no underscores).

By default the broker runs **in this process**, on a Trio event loop in a daemon thread: it
starts several times faster than a ``python -m odradek serve`` subprocess, which must start an
interpreter and import everything again (see ``benchmarks/bench_startup.py`` and
docs/testing-fixture.md). ``in_process=False`` runs the subprocess instead, for tests that
kill the broker or need it isolated from the test's own threads and logging.

The pytest plugin (registered as the ``pytest11`` entry point ``odradek``) provides:

* ``odradek_bootstrap`` -- session-scoped: one broker for the whole test session; the value is
  the ``host:port`` bootstrap string;
* ``odradek_fresh_broker`` -- a new broker (a :class:`RunningBroker`) for one test.

They are deliberately not called ``odradek_broker``, the name of the subprocess fixture of
Odradek's own compat-tests.
"""

from __future__ import annotations

import contextlib
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The fixtures exist only when pytest is running (it imports this module as a plugin, after
# importing itself); running_broker() alone must not pay pytest's ~0.3 s import.
pytest: Any = sys.modules.get("pytest")

__all__ = ["RunningBroker", "RunningCluster", "running_broker", "running_cluster", "odradek_bootstrap",
           "odradek_fresh_broker"]

START_TIMEOUT_S = 60.0


@dataclass
class RunningBroker:
    """A started broker: where to reach it and where its data lives."""

    host: str
    port: int
    log_dir: Path
    configs: dict[str, str] = field(default_factory=dict)
    in_process: bool = True
    #: The in-process :class:`odradek.broker.Broker` (None for a subprocess).
    broker: Any = None
    #: The subprocess (None when in-process).
    process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port``: the value of ``bootstrap_servers`` / ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """The Prometheus endpoint of an in-process broker started with ``odradek_metrics_port=0``
        (or any port); None when metrics are off or the broker is a subprocess."""
        metrics = getattr(self.broker, "metrics", None)
        if metrics is None or metrics.port is None:
            return None
        return f"http://{self.broker.config.get('odradek.metrics.host')}:{metrics.port}/metrics"


def _config_overrides(configs: Mapping[str, object] | None, overrides: Mapping[str, object]) -> dict[str, str]:
    out = {k: str(v) for k, v in (configs or {}).items()}
    out.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return out


@contextlib.contextmanager
def running_broker(
    configs: Mapping[str, object] | None = None,
    *,
    in_process: bool = True,
    host: str = "127.0.0.1",
    log_dir: str | Path | None = None,
    **overrides: object,
) -> Iterator[RunningBroker]:
    """Start an Odradek broker on a free port, yield it, shut it down cleanly at exit.

    The log dir is a fresh temporary directory (removed afterwards) unless `log_dir` is given.
    `group.initial.rebalance.delay.ms` defaults to 0 here so consumer groups form at once,
    as test brokers usually want; pass it to override.
    """
    settings = {"group.initial.rebalance.delay.ms": "0", **_config_overrides(configs, overrides)}
    temp = None
    if log_dir is None:
        temp = tempfile.mkdtemp(prefix="odradek-")
        log_dir = Path(temp) / "data"
    log_dir = Path(log_dir)
    settings.setdefault("log.dirs", str(log_dir))
    try:
        runner = _run_in_thread if in_process else _run_subprocess
        with runner(host, settings) as running:
            running.log_dir = log_dir
            yield running
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def _trio_thread(main: Any, name: str, what: str) -> Iterator[Any]:
    """Run ``main(ready)`` on a Trio loop in a daemon thread. ``await ready(value)`` hands ``value``
    to the ``with`` block and returns when the block exits; ``main`` then stops what it started.
    An exception before ``ready`` (or after it) is raised here as RuntimeError naming ``what``."""
    import trio

    started: queue.Queue = queue.Queue()

    async def wrapper() -> None:
        async def ready(value: Any) -> None:
            stop = trio.Event()
            started.put((trio.lowlevel.current_trio_token(), stop, value))
            await stop.wait()

        await main(ready)

    def thread_main() -> None:
        try:
            trio.run(wrapper)
        except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
            started.put(exc)

    thread = threading.Thread(target=thread_main, name=name, daemon=True)
    thread.start()
    item = started.get(timeout=START_TIMEOUT_S)
    if isinstance(item, BaseException):
        raise RuntimeError(f"the in-process Odradek {what} failed to start") from item
    token, stop, value = item
    try:
        yield value
    finally:
        trio.from_thread.run_sync(stop.set, trio_token=token)
        thread.join(timeout=START_TIMEOUT_S)
        if not started.empty():
            exc = started.get()
            raise RuntimeError(f"the in-process Odradek {what} failed") from exc


async def _serve_node(broker: Any, ready: Any, task_status: Any = None) -> None:
    """Start one broker, serve until `ready(bound addresses)` returns, then shut it down cleanly
    (`task_status`: hand the bound addresses to a parent nursery's `start` instead)."""
    import trio

    from .server import serve_listeners

    await broker.startup()
    try:
        async with trio.open_nursery() as nursery:
            bound = await nursery.start(serve_listeners, broker)
            nursery.start_soon(broker.run_background_tasks)
            if task_status is not None:
                task_status.started(bound)
            await ready(bound)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await broker.shutdown()


@contextlib.contextmanager
def _run_in_thread(host: str, settings: dict[str, str]) -> Iterator[RunningBroker]:
    from .broker import Broker
    from .config import BrokerConfig
    from .handlers.registry import load_handlers

    # Port 0: the OS picks a free port at bind time (no race with other tests); Metadata
    # advertises the bound port.
    config = BrokerConfig.load(None, [f"listeners=PLAINTEXT://{host}:0", *(f"{k}={v}" for k, v in settings.items())])
    load_handlers()
    broker = Broker(config)

    async def main(ready: Any) -> None:
        await _serve_node(broker, ready)

    with _trio_thread(main, "odradek-broker", "broker") as bound:
        yield RunningBroker(bound[0][0], bound[0][1], Path(), dict(settings), True, broker=broker)


@dataclass
class RunningCluster:
    """A started KRaft cluster of Odradek nodes: node 1 is the controller (a combined node, a broker
    too), the others are brokers (process.roles=broker) under it."""

    brokers: list[RunningBroker]
    cluster_id: str

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ``host:port``, comma-separated (any one of them is enough for a client)."""
        return ",".join(b.bootstrap_servers for b in self.brokers)

    @property
    def controller(self) -> RunningBroker:
        return self.brokers[0]


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_cluster(
    brokers: int = 3,
    configs: Mapping[str, object] | None = None,
    *,
    host: str = "127.0.0.1",
    **overrides: object,
) -> Iterator[RunningCluster]:
    """Start a cluster of `brokers` Odradek brokers in this process, yield it once every broker is
    registered and unfenced, shut it down at exit (brokers first, then the controller).

    Node 1 is a combined broker and controller with a controller listener, the single voter of
    the cluster's KRaft quorum; nodes 2..N follow its metadata log as Kafka brokers do. Topics
    are spread over all brokers; clients may bootstrap from any of them. Config overrides are
    given as in :func:`running_broker` and apply to every node. Each node has its own temporary
    log dir, removed afterwards.
    """
    import base64  # noqa: PLC0415
    import uuid  # noqa: PLC0415

    if brokers < 1:
        raise ValueError("a cluster needs at least one broker")
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    common = {"group.initial.rebalance.delay.ms": "0", "broker.heartbeat.interval.ms": "100",
              "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
              **_config_overrides(configs, overrides)}
    # the controller's ports are chosen first: every node's controller.quorum.voters names them
    broker_port, controller_port = _free_port(host), _free_port(host)
    voters = f"1@{host}:{controller_port}"
    temp = tempfile.mkdtemp(prefix="odradek-cluster-")
    nodes: list[dict[str, str]] = []
    for node_id in range(1, brokers + 1):
        settings = {**common, "node.id": str(node_id), "cluster.id": cluster_id,
                    "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
                    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    "log.dirs": str(Path(temp) / f"node{node_id}")}
        if node_id == 1:
            settings.update({"process.roles": "broker,controller",
                             "listeners": f"PLAINTEXT://{host}:{broker_port},CONTROLLER://{host}:{controller_port}",
                             "advertised.listeners": f"PLAINTEXT://{host}:{broker_port}"})
        else:
            settings.update({"process.roles": "broker", "listeners": f"PLAINTEXT://{host}:0"})
        nodes.append(settings)
    try:
        with _run_cluster_in_thread(nodes) as running:
            yield RunningCluster(running, cluster_id)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def _run_cluster_in_thread(nodes: list[dict[str, str]]) -> Iterator[list[RunningBroker]]:
    import trio

    from .broker import Broker
    from .config import BrokerConfig
    from .handlers.registry import load_handlers

    load_handlers()
    objects = [Broker(BrokerConfig.load(None, [f"{k}={v}" for k, v in settings.items()])) for settings in nodes]

    async def main(ready: Any) -> None:
        controller_stop, brokers_stop = trio.Event(), trio.Event()

        def until(event: trio.Event) -> Any:
            async def wait(_bound: Any) -> None:
                await event.wait()
            return wait

        async with trio.open_nursery() as outer:
            bound = [await outer.start(_serve_node, objects[0], until(controller_stop))]
            async with trio.open_nursery() as inner:
                for broker in objects[1:]:
                    bound.append(await inner.start(_serve_node, broker, until(brokers_stop)))
                # ready once the controller has every broker registered and unfenced
                image = objects[0].metadata_store.image
                while len(image.alive_brokers()) < len(objects):
                    await trio.sleep(0.01)
                await ready(bound)
                brokers_stop.set()  # the brokers' controlled shutdowns need the controller
            controller_stop.set()

    with _trio_thread(main, "odradek-cluster", "cluster") as bound:
        running = []
        for broker, addresses, settings in zip(objects, bound, nodes, strict=True):
            host, port = next((a for a, lst in zip(addresses, broker.config.listeners, strict=False)
                               if lst.name == "PLAINTEXT"), addresses[0])
            running.append(RunningBroker(host, port, Path(settings["log.dirs"]), dict(settings), True, broker=broker))
        yield running


_LISTENING = re.compile(r"Listening on (\S+):(\d+) ")


@contextlib.contextmanager
def _run_subprocess(host: str, settings: dict[str, str]) -> Iterator[RunningBroker]:
    cmd = [sys.executable, "-m", "odradek", "serve", "--override", f"listeners=PLAINTEXT://{host}:0"]
    for key, value in settings.items():
        cmd += ["--override", f"{key}={value}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        address = wait_listening(proc)
        yield RunningBroker(address[0], address[1], Path(), dict(settings), False, process=proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_listening(proc: subprocess.Popen) -> tuple[str, int]:
    """(host, port) of an ``odradek serve`` subprocess started with ``stderr=PIPE, text=True``:
    reads its log until it says where it listens (it may bind port 0), then keeps the pipe drained."""
    assert proc.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("odradek serve exited during start-up:\n" + "".join(lines[-20:]))
        lines.append(line)
        match = _LISTENING.search(line)
        if match:
            # Keep draining the log so the broker never blocks on a full pipe.
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return match.group(1), int(match.group(2))
    proc.kill()
    raise RuntimeError("odradek serve did not start listening in time")


def port_accepts(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------- pytest plugin

if pytest is not None:

    @pytest.fixture(scope="session")
    def odradek_bootstrap() -> Iterator[str]:
        """Bootstrap servers (``host:port``) of an in-process Odradek broker shared by the session."""
        with running_broker() as broker:
            yield broker.bootstrap_servers

    @pytest.fixture
    def odradek_fresh_broker() -> Iterator[RunningBroker]:
        """A new in-process Odradek broker (empty log dir) for one test; ``.bootstrap_servers``."""
        with running_broker() as broker:
            yield broker
