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

``running_cluster(brokers=N)`` starts a KRaft cluster of N brokers (in-process, or as processes
with ``in_process=False``); its :class:`RunningCluster` injects faults for failover tests: kill,
stop, pause, resume and restart a node (processes only), partition two brokers from each other
and slow a node's disk (both modes; see ``odradek.faults`` and docs/testing-fixture.md).

The pytest plugin (registered as the ``pytest11`` entry point ``odradek``) provides:

* ``odradek_bootstrap`` -- session-scoped: one broker for the whole test session; the value is
  the ``host:port`` bootstrap string;
* ``odradek_fresh_broker`` -- a new broker (a :class:`RunningBroker`) for one test.

They are deliberately not called ``odradek_broker``, the name of the subprocess fixture of
Odradek's own compat-tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
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
    too), the others are brokers (process.roles=broker) under it.

    Faults for failover tests: :meth:`partition` / :meth:`heal` and :meth:`slow_disk` work in both
    modes; :meth:`kill`, :meth:`restart`, :meth:`pause`, :meth:`resume` and :meth:`stop` need the
    nodes to be processes (``running_cluster(in_process=False)``)."""

    brokers: list[RunningBroker]
    cluster_id: str
    in_process: bool = True
    #: each node's settings (node id order), to start it again
    node_settings: list[dict[str, str]] = field(default_factory=list)
    #: where subprocess nodes write their logs and read their faults files
    work_dir: Path | None = None
    _partitioned: set[frozenset[int]] = field(default_factory=set)
    _slow_disks: dict[int, float] = field(default_factory=dict)
    _paused: set[int] = field(default_factory=set)
    _fault_version: int = 0

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ``host:port``, comma-separated (any one of them is enough for a client)."""
        return ",".join(b.bootstrap_servers for b in self.brokers)

    @property
    def controller(self) -> RunningBroker:
        return self.brokers[0]

    def node(self, node_id: int) -> RunningBroker:
        """The broker with this node id (1..N)."""
        if not 1 <= node_id <= len(self.brokers):
            raise ValueError(f"no node {node_id} in this cluster of {len(self.brokers)}")
        return self.brokers[node_id - 1]

    def log_file(self, node_id: int) -> Path:
        """The log of a subprocess node (its stderr, kept across restarts)."""
        if self.work_dir is None:
            raise RuntimeError("in-process nodes log through this process' logging")
        return self.work_dir / f"node{node_id}.log"

    # ------------------------------------------------------------------ processes

    def _process(self, node_id: int) -> subprocess.Popen:
        proc = self.node(node_id).process
        if self.in_process or proc is None:
            raise RuntimeError("kill/restart/pause/resume/stop need running_cluster(in_process=False): "
                               "in-process nodes share this process")
        return proc

    def is_running(self, node_id: int) -> bool:
        """Whether the node's process is alive (paused counts as alive)."""
        return self._process(node_id).poll() is None

    def kill(self, node_id: int) -> None:
        """SIGKILL the node: no controlled shutdown, no flush; what it acknowledged with acks=all
        is on the other replicas. Its data dir stays for :meth:`restart`."""
        proc = self._process(node_id)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        self._paused.discard(node_id)

    def stop(self, node_id: int, timeout: float = START_TIMEOUT_S) -> None:
        """SIGTERM the node and wait for its clean exit (Kafka's controlled shutdown: the controller
        moves its leaderships away first). SIGKILL after `timeout` seconds."""
        proc = self._process(node_id)
        if proc.poll() is not None:
            return
        if node_id in self._paused:
            self.resume(node_id)
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def pause(self, node_id: int) -> None:
        """SIGSTOP the node: its connections stay open but nothing answers (a hung process or a
        long GC pause); the controller fences it after broker.session.timeout.ms."""
        proc = self._process(node_id)
        if proc.poll() is None:
            proc.send_signal(signal.SIGSTOP)
            self._paused.add(node_id)

    def resume(self, node_id: int) -> None:
        """SIGCONT a paused node."""
        proc = self._process(node_id)
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
        self._paused.discard(node_id)

    def restart(self, node_id: int, wait: bool = True) -> None:
        """Start the node again on its ports and data dir (stopped cleanly first if still running);
        with `wait`, return once it is registered and unfenced again."""
        self.stop(node_id)
        broker = self.node(node_id)
        broker.process = _start_node_process(self.node_settings[node_id - 1], self.log_file(node_id))
        if wait:
            _wait_node_ready(broker, [node_id])

    # ------------------------------------------------------------------ faults (both modes)

    def partition(self, a: int, b: int) -> None:
        """Cut replication between brokers `a` and `b` (both ways): neither fetches from the
        other as a follower, and each drops the other's replica fetches as a leader. Both stay
        registered with the controller and serve clients, so a follower of the other's leader
        leaves the ISR after replica.lag.time.max.ms, as in a network split between brokers."""
        if a == b:
            raise ValueError("a broker cannot be partitioned from itself")
        self.node(a), self.node(b)
        self._partitioned.add(frozenset((a, b)))
        self._apply_faults({a, b})

    def heal(self) -> None:
        """End every partition made by :meth:`partition` (slow disks stay)."""
        touched = set().union(*self._partitioned) if self._partitioned else set()
        self._partitioned.clear()
        self._apply_faults(touched)

    def slow_disk(self, node_id: int, delay_ms: float) -> None:
        """Make every log segment write and fsync of this node wait `delay_ms` first (0: a normal
        disk again). The wait happens in the worker thread that writes, never on the event loop."""
        self.node(node_id)
        if delay_ms:
            self._slow_disks[node_id] = float(delay_ms)
        else:
            self._slow_disks.pop(node_id, None)
        self._apply_faults({node_id})

    def fault_counters(self, node_id: int) -> dict[str, int]:
        """What the faults did on this node so far: ``dropped_fetches`` (replica fetches it dropped
        as a leader), ``skipped_fetches`` (fetches it did not send as a follower), ``disk_waits``
        (writes and fsyncs slowed). A subprocess node reports them every 100 ms."""
        broker = self.node(node_id)
        if self.in_process:
            return broker.broker.faults.counters()
        state = self._state(node_id)
        return {k: int(state.get(k, 0)) for k in ("dropped_fetches", "skipped_fetches", "disk_waits")}

    def _partners(self, node_id: int) -> list[int]:
        return sorted(x for pair in self._partitioned if node_id in pair for x in pair if x != node_id)

    def _apply_faults(self, nodes: set[int]) -> None:
        if self.in_process:
            for node_id in nodes:
                self.node(node_id).broker.faults.update(partitioned=self._partners(node_id),
                                                        slow_disk_ms=self._slow_disks.get(node_id, 0.0))
            return
        self._fault_version += 1
        for node_id in nodes:
            _write_faults_file(self._faults_file(node_id), self._fault_version, self._partners(node_id),
                               self._slow_disks.get(node_id, 0.0))
        # a fault is in force once each running node has applied it (a stopped or paused node
        # takes it when it starts or resumes)
        deadline = time.monotonic() + 10.0
        for node_id in sorted(nodes):
            while self.is_running(node_id) and node_id not in self._paused and \
                    int(self._state(node_id).get("version", 0)) < self._fault_version:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {node_id} did not apply its faults file within 10 s")
                time.sleep(0.02)

    def _faults_file(self, node_id: int) -> Path:
        return Path(self.node_settings[node_id - 1]["odradek.faults.file"])

    def _state(self, node_id: int) -> dict[str, Any]:
        from .faults import state_path  # noqa: PLC0415

        try:
            return json.loads(state_path(self._faults_file(node_id)).read_text())
        except (OSError, ValueError):
            return {}


def _write_faults_file(path: Path, version: int, partitioned: list[int], slow_disk_ms: float) -> None:
    """Write a node's faults file atomically, its mtime always newer than the last one's (the
    broker looks at the mtime)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"version": version, "partitioned": partitioned, "slow_disk_ms": slow_disk_ms}))
    try:
        before = path.stat().st_mtime_ns
    except OSError:
        before = 0
    stamp = max(time.time_ns(), before + 1_000_000)
    os.utime(tmp, ns=(stamp, stamp))
    os.replace(tmp, path)


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_cluster(
    brokers: int = 3,
    configs: Mapping[str, object] | None = None,
    *,
    in_process: bool = True,
    host: str = "127.0.0.1",
    **overrides: object,
) -> Iterator[RunningCluster]:
    """Start a cluster of `brokers` Odradek brokers, yield it once every broker is registered and
    unfenced, shut it down at exit (brokers first, then the controller).

    Node 1 is a combined broker and controller with a controller listener, the single voter of
    the cluster's KRaft quorum; nodes 2..N follow its metadata log as Kafka brokers do. Topics
    are spread over all brokers; clients may bootstrap from any of them. Config overrides are
    given as in :func:`running_broker` and apply to every node. Each node has its own temporary
    log dir, removed afterwards.

    In this process by default (one Trio loop in a thread). ``in_process=False`` runs each node
    as an ``odradek serve`` process on fixed loopback ports, so that a test can kill, pause,
    stop and restart nodes (a restarted node keeps its ports and data dir).
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
            # a process restarts on the port it had: clients and the other brokers find it there
            port = 0 if in_process else _free_port(host)
            settings.update({"process.roles": "broker", "listeners": f"PLAINTEXT://{host}:{port}"})
        if not in_process:
            settings["odradek.faults.file"] = str(Path(temp) / f"node{node_id}.faults.json")
        nodes.append(settings)
    try:
        if in_process:
            with _run_cluster_in_thread(nodes) as running:
                yield RunningCluster(running, cluster_id, True, nodes)
        else:
            with _run_cluster_processes(nodes, host, Path(temp)) as cluster:
                cluster.cluster_id = cluster_id
                yield cluster
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _node_port(settings: dict[str, str]) -> int:
    return int(settings["listeners"].split(",")[0].rsplit(":", 1)[1])


def _start_node_process(settings: dict[str, str], log_file: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "odradek", "serve"]
    for key, value in settings.items():
        cmd += ["--override", f"{key}={value}"]
    with open(log_file, "ab") as log:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def _metadata_brokers(host: str, port: int) -> set[int]:
    """The node ids a broker's Metadata lists (registered and unfenced, as it knows them)."""
    from .tools.client import BrokerConnection  # noqa: PLC0415
    from .wire.protocol import request_class  # noqa: PLC0415

    conn = BrokerConnection(host, port, timeout=5.0)
    try:
        response = conn.send(3, request_class(3)(topics=[], allow_auto_topic_creation=False))
        return {b.node_id for b in response.brokers}
    finally:
        conn.close()


def _wait_node_ready(broker: RunningBroker, expected: list[int]) -> None:
    """Wait until the node's process answers Metadata listing every node of `expected`."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        proc = broker.process
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"odradek serve on port {broker.port} exited during start-up "
                               f"(code {proc.returncode})")
        try:
            if set(expected) <= _metadata_brokers(broker.host, broker.port):
                return
        except Exception:  # noqa: BLE001 - not listening or not ready yet
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the node on port {broker.port} was not ready within {START_TIMEOUT_S} s")
        time.sleep(0.1)


@contextlib.contextmanager
def _run_cluster_processes(nodes: list[dict[str, str]], host: str, work_dir: Path) -> Iterator[RunningCluster]:
    running = [RunningBroker(host, _node_port(settings), Path(settings["log.dirs"]), dict(settings), False)
               for settings in nodes]
    cluster = RunningCluster(running, "", False, nodes, work_dir)
    try:
        # the controller first: the brokers register with it
        running[0].process = _start_node_process(nodes[0], cluster.log_file(1))
        for node_id, broker in enumerate(running[1:], start=2):
            broker.process = _start_node_process(nodes[node_id - 1], cluster.log_file(node_id))
        every = [int(s["node.id"]) for s in nodes]
        _wait_node_ready(running[0], every)
        for broker in running[1:]:
            _wait_node_ready(broker, [int(broker.configs["node.id"])])
        yield cluster
    finally:
        # brokers first (their controlled shutdowns need the controller), all at once, then node 1
        controller_gone = running[0].process is None or running[0].process.poll() is not None
        for group in (running[1:], running[:1]):
            procs = [b.process for b in group if b.process is not None and b.process.poll() is None]
            for proc in procs:
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGCONT)  # a paused node must be able to stop
                    # without the controller a controlled shutdown would wait for it in vain
                    proc.kill() if controller_gone else proc.terminate()
            deadline = time.monotonic() + 30.0
            for proc in procs:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


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
