"""End-to-end broker benchmark: Odradek next to Apache Kafka (and any other broker) on one machine.

Run::

    python benchmarks/runner.py --quick                 # a few minutes: a subset, one run each
    python benchmarks/runner.py --full --output docs/performance.md   # the committed report
    python benchmarks/runner.py --report-only benchmarks/results/perf-full.json --output docs/performance.md

Every broker is a separate process started by the runner; load comes from other processes at C
speed: ``kcat`` (librdkafka) producers and consumers, one process per connection, and for the
paced latency test ``benchmarks/latency_client`` (Go, franz-go; built with ``go build`` when Go is
installed) or else two confluent-kafka processes (``ODRADEK_BENCH_LATENCY_CLIENT=go|python``
forces one). ``--only latency`` runs just start-up and the latency test. Per broker and run:

* starts the broker on a fresh log dir and times process start -> first answered ApiVersions;
  reads its idle RSS (/proc/<pid>/status) a second later;
* runs the produce matrix (record size, acks, partitions, compression, connections; one factor
  varied at a time around a 1 KiB / acks=1 / 6 partitions / no compression / 1 connection base),
  each on a new topic, with a fixed number of bytes: records/s, MB/s (payload bytes, 10^6),
  broker CPU seconds per GB from /proc/<pid>/stat;
* produces the catch-up topic and times a consumer reading it from offset 0 to its end;
* kills the broker (SIGKILL) and times the restart until ListOffsets shows the whole topic again
  (recovery of the unclean log);
* a mixed steady state (producer and a tailing consumer together) and a latency test (paced
  producer, consumer timing producer timestamp -> receipt);
* peak RSS (VmHWM) and, for Odradek, event-loop stalls (``odradek.loop_monitor``) per workload.

Brokers are run one after the other within each repetition (odradek, kafka, odradek, ...), so
slow drifts of the shared machine's load hit all of them alike; figures are medians over runs.
A physical baseline (loopback TCP between two processes, sequential file append/read of the same
number of bytes) is measured in every repetition too. ``--broker-cmd NAME=CMD`` adds any broker:
CMD is a shell command with ``{port}`` and ``{log_dir}`` placeholders.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "compat-tests"))

MB = 1_000_000
MIB = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")
KCAT = shutil.which("kcat") or shutil.which("kafkacat") or "kcat"

# Kafka's own start scripts (kafka-server-start.sh / kafka-run-class.sh) use these JVM settings;
# the compat-test oracle trades them for start-up speed, which would not be a fair comparison.
KAFKA_STOCK_JVM_OPTS = (
    "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
)


# ---------------------------------------------------------------------------------------------
# Workloads and profiles
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Produce:
    """One produce workload: `bytes_` payload bytes of `size`-byte records over `conns` kcats."""

    name: str
    size: int = 1024
    acks: str = "1"
    partitions: int = 6
    compression: str = "none"
    conns: int = 1
    mbytes: float = 1.0  # multiple of the profile's produce_bytes


BASE = Produce("1KiB base")
PRODUCE_MATRIX = (
    BASE,
    Produce("100B", size=100),
    Produce("100KiB", size=100 * 1024),
    Produce("acks=all", acks="all"),
    Produce("1 partition", partitions=1),
    Produce("100 partitions", partitions=100),
    Produce("lz4", compression="lz4"),
    Produce("50 connections", conns=50),
)
QUICK_MATRIX = (BASE, Produce("100B", size=100), Produce("100KiB", size=100 * 1024), Produce("lz4", compression="lz4"))


@dataclass(frozen=True)
class WireProduce:
    """A produce workload driven by benchmarks/wire_load.py: one prebuilt Produce request (one
    batch of about `batch_bytes` per partition, all partitions) sent again and again, pipelined."""

    name: str
    batch_bytes: int = 256 * 1024
    acks: int = 1
    partitions: int = 6
    conns: int = 1  # one process per connection
    in_flight: int = 5
    size: int = 1024
    mbytes: float = 1.0


WIRE_BASE = WireProduce("wire 1KiB base")
WIRE_MATRIX = (
    WIRE_BASE,
    WireProduce("wire acks=all", acks=-1),
    WireProduce("wire 16KiB batches", batch_bytes=16 * 1024),
    WireProduce("wire 2 connections", conns=2),
)
QUICK_WIRE_MATRIX = (WIRE_BASE, WireProduce("wire acks=all", acks=-1))


@dataclass
class Profile:
    """How much work each part of a run does."""

    runs: int
    produce_bytes: int
    catchup_bytes: int
    mixed_bytes: int
    latency_seconds: float
    latency_rate: int
    matrix: tuple[Produce, ...]
    baseline_bytes: int
    wire_matrix: tuple[WireProduce, ...] = ()


PROFILES = {
    "full": Profile(runs=3, produce_bytes=128 * MIB, catchup_bytes=1024 * MIB, mixed_bytes=128 * MIB,
                    latency_seconds=10, latency_rate=10_000, matrix=PRODUCE_MATRIX, baseline_bytes=1024 * MIB,
                    wire_matrix=WIRE_MATRIX),
    "quick": Profile(runs=1, produce_bytes=48 * MIB, catchup_bytes=192 * MIB, mixed_bytes=48 * MIB,
                     latency_seconds=6, latency_rate=10_000, matrix=QUICK_MATRIX, baseline_bytes=192 * MIB,
                     wire_matrix=QUICK_WIRE_MATRIX),
}


# ---------------------------------------------------------------------------------------------
# Process helpers
# ---------------------------------------------------------------------------------------------

def _proc_stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (state first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def live_children(pid: int) -> list[int]:
    """The running child processes of ``pid`` (Odradek's sender processes, for instance)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_proc_stat(int(entry.name))[1]) == pid:
                    children.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return children


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process, its running children and its reaped ones (Linux /proc, clock
    ticks -> s): a broker's work done in child processes is the broker's too."""
    fields = _proc_stat(pid)
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    for child in live_children(pid):
        try:
            child_fields = _proc_stat(child)
        except OSError:  # ended meanwhile: its time is in the parent's cutime once reaped
            continue
        ticks += int(child_fields[11]) + int(child_fields[12])
    return ticks / CLK_TCK


def children_cpu_seconds() -> float:
    """utime + stime of this process's reaped children: a load generator's CPU is the difference
    around its run (the broker, also a child, is only reaped when a workload is over)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def proc_status_kb(pid: int, key: str) -> int:
    """A kB value of /proc/<pid>/status (VmRSS, VmHWM), summed over the process and its running
    children."""
    total = 0
    for p in (pid, *live_children(pid)):
        try:
            lines = Path(f"/proc/{p}/status").read_text().splitlines()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in lines if line.startswith(key + ":")), 0)
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 5) + b"bench"


def api_versions_answered(port: int, timeout: float = 0.5) -> bool:
    """True if the broker answers an ApiVersions v0 request (any error code counts: it answered)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0)
            head = b""
            while len(head) < 8:
                chunk = s.recv(8 - len(head))
                if not chunk:
                    return False
                head += chunk
            return struct.unpack(">ii", head)[1] == 7
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# Brokers under test
# ---------------------------------------------------------------------------------------------

class Target:
    """A broker subprocess: start (timed to the first ApiVersions answer), kill, restart, stop."""

    name = "broker"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir = workdir / "data"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.console = workdir / "console.log"
        self.loop_file: Path | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Anything that must exist before the process starts (not timed)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)


    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self, timeout: float = 180.0) -> float:
        """Start and return seconds from process start to the first answered ApiVersions."""
        self.prepare()
        with self.console.open("ab") as out:
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env(), cwd=self.workdir,
                                         start_new_session=True)
        while True:
            if api_versions_answered(self.port):
                return time.perf_counter() - t0
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited during start; see {self.console}")
            if time.perf_counter() - t0 > timeout:
                self.kill()
                raise RuntimeError(f"{self.name} did not answer ApiVersions in {timeout}s")
            time.sleep(0.002)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 120.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def compile_package(src: Path | None) -> Path:
    """Byte-compile the odradek package to run (an installed package ships .pyc files; without
    them, e.g. under PYTHONDONTWRITEBYTECODE=1, every start would compile all modules again)."""
    import compileall
    import importlib.util

    if src is None:
        spec = importlib.util.find_spec("odradek")
        assert spec is not None and spec.submodule_search_locations
        src = Path(list(spec.submodule_search_locations)[0])
    compileall.compile_dir(str(src), quiet=1, rx=__import__("re").compile(r"/(tests|compat-tests|artifacts|docs)/"))
    return src


class OdradekTarget(Target):
    name = "odradek"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.loop_file = workdir / "loop.jsonl"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "odradek", "serve",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.log_dir}"]

    #: A directory named ``odradek`` holding the package to run instead of the installed one
    #: (e.g. an exported commit, so other people's uncommitted edits do not end up measured).
    src: Path | None = None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["ODRADEK_LOOP_MONITOR"] = str(self.loop_file)
        if self.src is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.src.parent), env.get("PYTHONPATH")]))
        return env


class KafkaTarget(Target):
    """Apache Kafka (jars from .cache via compat-tests/kafka_oracle.py) with its stock JVM options."""

    name = "kafka"

    def __init__(self, workdir: Path, version: str = "4.1.1") -> None:
        super().__init__(workdir)
        from kafka_oracle import KafkaBroker

        self.oracle = KafkaBroker(workdir, version=version, port=self.port,
                                  overrides={"log.dirs": str(self.log_dir)})

    def prepare(self) -> None:
        self.oracle._prepare()  # server.properties + storage format (not part of the start-up time)

    def command(self) -> list[str]:
        from kafka_oracle import _log_config_args, java_bin, kafka_classpath

        version = self.oracle.version
        return [java_bin("java"), *KAFKA_STOCK_JVM_OPTS,
                *_log_config_args(version, self.workdir / "server.log"),
                "-cp", kafka_classpath(version), "kafka.Kafka", str(self.oracle.properties_file)]


class CommandTarget(Target):
    """Any broker started by a shell command with {port} and {log_dir} placeholders."""

    def __init__(self, workdir: Path, name: str, template: str) -> None:
        super().__init__(workdir)
        self.name = name
        self.template = template

    def command(self) -> list[str]:
        return shlex.split(self.template.format(port=self.port, log_dir=self.log_dir))


# ---------------------------------------------------------------------------------------------
# Load generation
# ---------------------------------------------------------------------------------------------

def payload_file(cache: Path, size: int, count: int) -> Path:
    """`count` newline-separated records of `size` bytes of word-like text (lz4 gets ~2x on it)."""
    path = cache / f"records-{size}-{count}.txt"
    if path.is_file() and path.stat().st_size == (size + 1) * count:
        return path
    rng = random.Random(size)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(2000)]
    pool = b" ".join(rng.choice(words) for _ in range(400_000))
    pool = pool * (1 + (2 * size) // len(pool))
    limit = len(pool) - size
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as out:
        chunk: list[bytes] = []
        for i in range(count):
            start = rng.randrange(limit)
            chunk.append(pool[start:start + size])
            if len(chunk) >= 4096 or i == count - 1:
                out.write(b"\n".join(chunk) + b"\n")
                chunk = []
    tmp.rename(path)
    return path


def admin_create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Create a topic and wait until every partition has a leader in Metadata."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        fut = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic]
        try:
            fut.result(30)
            break
        except Exception as exc:  # a just-started broker may not be able to create topics yet
            if "TOPIC_ALREADY_EXISTS" in str(exc) or time.monotonic() > deadline:
                if "TOPIC_ALREADY_EXISTS" in str(exc):
                    break
                raise
            time.sleep(0.5)
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} has no leaders after {timeout}s")


def warm_up_group_coordinator(bootstrap: str) -> None:
    """Find a group coordinator once, so that creating __consumer_offsets (50 partitions, on first
    use in both brokers) happens before, not during, a measured workload."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-warm-up"})
    try:
        c.list_topics(timeout=30)
        # OffsetFetch goes to the group coordinator, which makes the broker create the topic;
        # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while it loads the new partitions
        deadline = time.monotonic() + 120
        while True:
            try:
                c.committed([TopicPartition("bench-warm-up", 0)], timeout=30)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        while time.monotonic() < deadline:
            md = c.list_topics("__consumer_offsets", timeout=10).topics.get("__consumer_offsets")
            if md is not None and md.error is None and md.partitions:
                break
            time.sleep(0.5)
    finally:
        c.close()


def settle() -> None:
    """Start a workload on a quiet disk and past the loop monitor's next one-second line.

    `sync` first: the page cache may still hold dirty pages of the workload before, possibly the
    other broker's, and their writeback would slow whatever comes next (a 3 GB backlog cost a
    produce run ~20%). Then the wait, so that a topic creation just before (one long step for
    many partitions) is not counted in the workload that follows it."""
    os.sync()
    time.sleep(1.1)


def end_offsets(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    """Sum of the partitions' latest offsets (ListOffsets), or -1 if the broker cannot answer yet."""
    from odradek.tools.client import KafkaClient

    try:
        with KafkaClient(bootstrap, timeout=timeout) as client:
            info = client.topic(topic, wait_s=0)
            offsets = client.list_offsets(info, range(len(info.partitions)), -1)
            return sum(int(getattr(v, "offset", v)) for v in offsets.values())
    except Exception:
        return -1


def kcat_producers(bootstrap: str, topic: str, w: Produce, total_bytes: int, cache: Path,
                   logs: Path) -> tuple[float, int]:
    """Run `w.conns` kcat producers to completion; (seconds, records acknowledged by count)."""
    records = max(w.conns, total_bytes // w.size)
    per = records // w.conns
    records = per * w.conns
    data = payload_file(cache, w.size, per)
    cmd = [KCAT, "-P", "-b", bootstrap, "-t", topic, "-l", "-c", str(per),
           "-X", f"acks={w.acks}", "-X", f"compression.codec={w.compression}",
           "-X", "queue.buffering.max.kbytes=262144", str(data)]
    procs = []
    t0 = time.perf_counter()
    for i in range(w.conns):
        err = (logs / f"kcat-p{i}.err").open("w")
        procs.append((subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err), err))
    failed = 0
    for p, err in procs:
        failed += p.wait() != 0
        err.close()
    elapsed = time.perf_counter() - t0
    if failed:
        raise RuntimeError(f"{failed} kcat producers failed; see {logs}/kcat-p*.err")
    return elapsed, records


def kcat_consumer(bootstrap: str, topic: str, count: int, logs: Path, tail: bool = False) -> subprocess.Popen[bytes]:
    """A kcat consumer from offset 0: to the end of the topic (-e) or, tailing, until `count` records."""
    cmd = [KCAT, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-q"]
    cmd += ["-c", str(count)] if tail else ["-e"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=(logs / "kcat-c.err").open("w"))


WIRE_LOAD = Path(__file__).resolve().parent / "wire_load.py"
KAFKA_PYTHON_LOAD = Path(__file__).resolve().parent / "kafka_python_load.py"
# kafka-python moves 20-50 MB/s (it is the bottleneck): small amounts keep its rows short
KAFKA_PYTHON_PRODUCE_BYTES = 32 * MIB
KAFKA_PYTHON_CONSUME_BYTES = 64 * MIB


def wire_processes(mode: str, bootstrap: str, topic: str, per_process: list[list[str]],
                   logs: Path) -> tuple[float, list[dict[str, Any]]]:
    """Run benchmarks/wire_load.py processes: each sets up (connection, prebuilt requests, end
    offsets), says ready; then all are told to go at once. (seconds from go until the last has
    finished, each process's stats: its CPU seconds, records, bytes.)"""
    procs = []
    for i, extra in enumerate(per_process):
        err = (logs / f"wire-{mode}-{i}.err").open("w")
        procs.append(subprocess.Popen([sys.executable, str(WIRE_LOAD), mode, "--bootstrap", bootstrap, "--topic", topic,
                                       "--wait-go", *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=err, text=True))
        err.close()
    try:
        for p in procs:
            assert p.stdout is not None
            if not p.stdout.readline():
                raise RuntimeError(f"wire {mode} generator failed to start; see {logs}/wire-{mode}-*.err")
        t0 = time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        stats = []
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if p.wait() != 0 or not line:
                raise RuntimeError(f"wire {mode} generator failed; see {logs}/wire-{mode}-*.err")
            stats.append(json.loads(line))
        return time.perf_counter() - t0, stats
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


# ---------------------------------------------------------------------------------------------
# Latency: paced confluent-kafka producer + consumer in their own processes
# ---------------------------------------------------------------------------------------------

# Client settings of the latency test: what a user who cares about latency would set. Nagle off
# (librdkafka leaves it on), acks=1, and the clients' default linger.ms=5 (librdkafka's, and the
# Java producer's since Kafka 4.0): at 10k records/s a 1 ms linger makes ~5x as many requests,
# and on a shared 2-core machine the broker's per-request CPU then builds queues of hundreds of
# ms for either broker (measured: p50 60-340 ms with linger 1 against 10-45 ms with linger 5 at
# load average ~20). The consumer keeps librdkafka's fetch defaults (fetch.min.bytes=1,
# fetch.wait.max.ms=500): a broker answers a waiting Fetch as soon as a record arrives, so the
# wait only shows up in the figures if the broker fails to do that.
LATENCY_PRODUCER_CONFIG = {"linger.ms": int(os.environ.get("ODRADEK_BENCH_LINGER_MS", "5")), "acks": 1,
                           "socket.nagle.disable": True}
LATENCY_CONSUMER_CONFIG = {"fetch.min.bytes": 1, "fetch.wait.max.ms": 500, "socket.nagle.disable": True,
                           "enable.auto.commit": False}


def _percentiles(samples_ns: list[int], prefix: str = "") -> dict[str, float]:
    skip = len(samples_ns) // 20  # the first 5%: connection set-up and client warm-up
    data = sorted(samples_ns[skip:])

    def pct(q: float) -> float:
        return data[min(len(data) - 1, int(q * len(data)))] / 1e6 if data else float("nan")

    return {f"{prefix}p50_ms": pct(0.5), f"{prefix}p99_ms": pct(0.99), f"{prefix}p999_ms": pct(0.999),
            f"{prefix}max_ms": data[-1] / 1e6 if data else float("nan")}


def latency_producer(bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> None:
    """Produce `rate` records/s for `seconds`; each value starts with time.time_ns() at produce().

    The connection to the leader is set up (one warm-up record, acknowledged) before pacing
    starts, so the first timed records do not wait for bootstrap and metadata. Delivery reports
    give the produce round trip (produce() -> acknowledgement) of every record.
    """
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, **LATENCY_PRODUCER_CONFIG})
    sent, seconds, acked = paced_acks(p, topic, rate, seconds, size)
    print(json.dumps({"sent": sent, "seconds": seconds, **_percentiles(acked, "ack_")}))


def paced_acks(p: Any, topic: str, rate: int, seconds: float, size: int) -> tuple[int, float, list[int]]:
    """Produce `rate` records/s of `size` bytes for `seconds` with the confluent-kafka producer `p`
    after one acknowledged warm-up record; (records sent, the pacing period, produce() to
    acknowledgement of each in ns). Each value is b"L", time.time_ns() at produce(), padding."""
    p.produce(topic, b"warm-up")
    p.flush(30)
    acked: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(time.time_ns() - struct.unpack_from(">q", msg.value(), 1)[0])

    pad = b"x" * (size - 9)
    total = int(rate * seconds)
    t0 = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - t0) * rate) + 1)
        while sent < due:
            p.produce(topic, b"L" + struct.pack(">q", time.time_ns()) + pad, on_delivery=delivered)
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    seconds = time.perf_counter() - t0  # the pacing period; the final flush is not part of the rate
    p.flush(30)
    return sent, seconds, acked


def latency_consumer(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float) -> None:
    """Read from offset 0 until `expected` records; print latency percentiles (ms) as JSON.

    Each record's receipt time is taken when poll() hands it over; poll() returns as soon as one
    record is there (``consume(num_messages=N, timeout=T)`` would wait for N records or T, adding
    up to T to every latency).
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency", **LATENCY_CONSUMER_CONFIG})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    lat: list[int] = []
    deadline = time.monotonic() + timeout
    print("assigned", flush=True)
    # Only once a first record (the runner's "hello") has arrived is the consumer really fetching;
    # records produced before that would measure the consumer's start-up, not the broker.
    hello = False
    while not hello and time.monotonic() < deadline:
        m = c.poll(0.1)
        hello = m is not None and m.error() is None
    print("ready", flush=True)
    while len(lat) < expected and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is None:
            continue
        now = time.time_ns()
        if m.error() is None and m.value()[:1] == b"L":
            lat.append(now - struct.unpack_from(">q", m.value(), 1)[0])
    c.close()
    print(json.dumps({"received": len(lat), **_percentiles(lat)}))


# The Go latency client (benchmarks/latency_client, franz-go): one process doing what the two
# Python processes above do for about half their CPU (measured at 10k records/s: 1.7 s against
# 3.4 s per 10 s run), so that the load generator takes less of the 2 cores it shares with the
# broker. Used when `go` is there; ODRADEK_BENCH_LATENCY_CLIENT=go|python forces one.
LATENCY_CLIENT_SRC = REPO / "benchmarks" / "latency_client"


def go_tool() -> str | None:
    """The `go` command: on PATH, else the official tarball's place."""
    return shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)


def latency_client_kind() -> str:
    """'go' or 'python': the environment's choice, else Go when a Go toolchain is installed."""
    forced = os.environ.get("ODRADEK_BENCH_LATENCY_CLIENT", "").strip().lower()
    if forced not in ("", "go", "python"):
        raise SystemExit(f"ODRADEK_BENCH_LATENCY_CLIENT={forced!r}: use go or python")
    return forced or ("go" if go_tool() else "python")


_built: dict[Path, Path] = {}


def build_latency_client(out_dir: Path) -> Path:
    """`go build` benchmarks/latency_client into `out_dir` (once per process; Go's build cache
    makes a rebuild of unchanged sources quick). Modules come from the Go proxy if not cached."""
    if out_dir in _built:
        return _built[out_dir]
    go = go_tool()
    if go is None:
        raise RuntimeError("the Go latency client needs `go` (ODRADEK_BENCH_LATENCY_CLIENT=python uses Python)")
    exe = out_dir / "latency_client"
    out_dir.mkdir(parents=True, exist_ok=True)
    env = os.environ | {"GOFLAGS": (os.environ.get("GOFLAGS", "") + " -mod=mod").strip()}
    proc = subprocess.run([go, "build", "-buildvcs=false", "-o", str(exe), "."], cwd=LATENCY_CLIENT_SRC, env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"go build of {LATENCY_CLIENT_SRC} failed:\n{proc.stdout}{proc.stderr}")
    _built[out_dir] = exe
    return exe


def machine_cpu_seconds() -> tuple[float, float]:
    """(busy, steal): CPU seconds all processes have used since boot (user+nice+system+irq+softirq)
    and the time a hypervisor kept this VM's CPUs from running anything (/proc/stat)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq) / CLK_TCK, steal / CLK_TCK


def go_latency(exe: Path, bootstrap: str, topic: str, partitions: int, rate: int, seconds: float,
               size: int = 1024) -> dict[str, Any]:
    """Run the Go latency client; its JSON line (the Python pair's keys plus client_cpu_s)."""
    args = [str(exe), "-bootstrap", bootstrap, "-topic", topic, "-partitions", str(partitions), "-rate", str(rate),
            "-seconds", str(seconds), "-size", str(size), "-linger-ms", str(LATENCY_PRODUCER_CONFIG["linger.ms"]),
            "-acks", str(LATENCY_PRODUCER_CONFIG["acks"]), "-timeout", str(seconds + 90)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"latency client failed ({proc.returncode}): {proc.stderr[-2000:]}")
    if proc.stderr:
        print(proc.stderr.rstrip(), file=sys.stderr, flush=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# Physical baseline
# ---------------------------------------------------------------------------------------------

def _loopback_receiver(port: int, total: int, append_to: str | None = None) -> None:
    """Receive `total` bytes; with `append_to`, also append each piece to that file (one thread:
    the two copies a broker's produce path makes, and nothing else)."""
    fd = os.open(append_to, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644) if append_to else -1
    with socket.create_server(("127.0.0.1", port)) as srv:
        print("ready", flush=True)
        conn, _ = srv.accept()
        buf = bytearray(4 * MIB)
        view = memoryview(buf)
        got = 0
        while got < total:
            n = conn.recv_into(buf)
            if not n:
                break
            if fd >= 0:
                os.write(fd, view[:n])
            got += n
        conn.close()
    if fd >= 0:
        os.close(fd)


def _loopback_seconds(total: int, append_to: Path | None = None) -> float:
    """Seconds to send `total` bytes over loopback TCP to a receiver process (appending them to a
    file too with `append_to`), from the first send until the receiver has everything."""
    port = free_port()
    recv = subprocess.Popen([sys.executable, __file__, "_loopback", str(port), str(total),
                             *([str(append_to)] if append_to else [])], stdout=subprocess.PIPE, text=True)
    assert recv.stdout is not None
    recv.stdout.readline()
    chunk = memoryview(os.urandom(MIB))
    with socket.create_connection(("127.0.0.1", port)) as s:
        t0 = time.perf_counter()
        for _ in range(total // MIB):
            s.sendall(chunk)
        s.shutdown(socket.SHUT_WR)
        recv.wait()
        return time.perf_counter() - t0


def physical_baseline(total: int, workdir: Path) -> dict[str, float]:
    """MB/s of loopback TCP between two processes, of sequential file append / read (no fsync),
    and of loopback into a receiver that appends what it receives to a file in the same thread."""
    loop_s = _loopback_seconds(total)
    path = workdir / "baseline.bin"
    chunk = memoryview(os.urandom(MIB))
    os.sync()  # as before every workload (settle)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for _ in range(total // MIB):
        os.write(fd, chunk)
    os.close(fd)
    append_s = time.perf_counter() - t0
    buf = bytearray(MIB)
    fd = os.open(path, os.O_RDONLY)
    t0 = time.perf_counter()
    while os.readv(fd, [buf]):
        pass
    read_s = time.perf_counter() - t0
    os.close(fd)
    path.unlink()
    os.sync()
    # last, so that its dirty pages do not slow the plain append and read above
    to_file_s = _loopback_seconds(total, path)
    path.unlink()
    return {"loopback_mbs": total / loop_s / MB, "append_mbs": total / append_s / MB, "read_mbs": total / read_s / MB,
            "loopback_to_file_mbs": total / to_file_s / MB}


# ---------------------------------------------------------------------------------------------
# One broker, one repetition
# ---------------------------------------------------------------------------------------------

@dataclass
class Result:
    broker: str
    run: int
    workload: str
    kind: str
    metrics: dict[str, Any] = field(default_factory=dict)


class Session:
    """Drives one broker through every workload of a repetition, collecting Results."""

    only: str | None = None  # "latency": start-up and the latency test only (--only)

    def __init__(self, target: Target, profile: Profile, run: int, cache: Path, scale: float) -> None:
        self.t = target
        self.p = profile
        self.run = run
        self.cache = cache
        self.scale = scale
        self.results: list[Result] = []
        self.logs = target.workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.topic_seq = 0

    def _bytes(self, n: int) -> int:
        return max(64 * 1024, int(n * self.scale))

    def _topic(self, label: str) -> str:
        self.topic_seq += 1
        return f"bench-{self.topic_seq}-" + "".join(c if c.isalnum() else "-" for c in label)

    def _loop_stats(self, start: float, end: float) -> dict[str, Any]:
        if self.t.loop_file is None:
            return {}
        from odradek.loop_monitor import read_window, summarize

        time.sleep(1.1)  # let the monitor write the line covering the end of the window
        return {"loop": summarize(read_window(self.t.loop_file, start, end))}

    def add(self, workload: str, kind: str, **metrics: Any) -> None:
        self.results.append(Result(self.t.name, self.run, workload, kind, metrics))
        shown = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in metrics.items() if k != "loop"}
        if "loop" in metrics:
            shown["loop_max_ms"] = metrics["loop"]["max_ms"]
        print(f"  [{self.t.name} run {self.run}] {workload}: {shown}", flush=True)

    def produce(self, w: Produce, total: int | None = None, topic: str | None = None) -> None:
        total = self._bytes(int(self.p.produce_bytes * w.mbytes)) if total is None else total
        topic = topic or self._topic(w.name)
        admin_create_topic(self.t.bootstrap, topic, w.partitions)
        settle()
        cpu0, wall0, gen0 = proc_cpu_seconds(self.t.pid), time.time(), children_cpu_seconds()
        elapsed, records = kcat_producers(self.t.bootstrap, topic, w, total, self.cache, self.logs)
        cpu = proc_cpu_seconds(self.t.pid) - cpu0
        gen = children_cpu_seconds() - gen0
        nbytes = records * w.size
        stored = end_offsets(self.t.bootstrap, topic)
        if stored != records:
            raise RuntimeError(f"{self.t.name}: {topic} holds {stored} records, {records} were produced")
        self.add(w.name, "produce", mbs=nbytes / elapsed / MB, rps=records / elapsed, seconds=elapsed,
                 cpu_s_per_gb=cpu / (nbytes / 1e9), gen_cpu_s_per_gb=gen / (nbytes / 1e9), bytes=nbytes,
                 **self._loop_stats(wall0, time.time()))

    def wire_produce(self, w: WireProduce) -> None:
        """A produce workload from benchmarks/wire_load.py processes (prebuilt requests)."""
        from wire_load import records_per_batch

        topic = self._topic(w.name)
        admin_create_topic(self.t.bootstrap, topic, w.partitions)
        per_request = records_per_batch(w.batch_bytes, w.size) * w.partitions
        total = self._bytes(int(self.p.produce_bytes * w.mbytes))
        per_proc = max(1, round(total / (per_request * w.size) / w.conns))
        args = ["--requests", str(per_proc), "--batch-bytes", str(w.batch_bytes), "--record-size", str(w.size),
                "--acks", str(w.acks), "--in-flight", str(w.in_flight)]
        settle()
        cpu0, wall0 = proc_cpu_seconds(self.t.pid), time.time()
        elapsed, stats = wire_processes("produce", self.t.bootstrap, topic, [args] * w.conns, self.logs)
        cpu = proc_cpu_seconds(self.t.pid) - cpu0
        wall1 = time.time()
        records = sum(s["records"] for s in stats)
        nbytes = sum(s["bytes"] for s in stats)
        stored = end_offsets(self.t.bootstrap, topic)
        if stored != records:
            raise RuntimeError(f"{self.t.name}: {topic} holds {stored} records, {records} were produced")
        self.add(w.name, "produce", mbs=nbytes / elapsed / MB, rps=records / elapsed, seconds=elapsed,
                 cpu_s_per_gb=cpu / (nbytes / 1e9), gen_cpu_s_per_gb=sum(s["cpu_seconds"] for s in stats) / (nbytes / 1e9),
                 bytes=nbytes, **self._loop_stats(wall0, wall1))

    def wire_consume(self, topic: str, connections: int = 1) -> None:
        """benchmarks/wire_load.py reading the catch-up topic from offset 0: one connection for all
        partitions, or `connections` processes splitting the partitions like a consumer group's
        members (so one connection's request/response gaps do not leave the link idle)."""
        partitions = Produce("catch-up").partitions  # the catch-up topic is made like the base workload
        if connections == 1:
            per_process: list[list[str]] = [[]]
        else:
            per_process = [["--partitions", ",".join(str(p) for p in range(i, partitions, connections))]
                           for i in range(connections)]
        cpu0, wall0 = proc_cpu_seconds(self.t.pid), time.time()
        elapsed, stats = wire_processes("consume", self.t.bootstrap, topic, per_process, self.logs)
        cpu = proc_cpu_seconds(self.t.pid) - cpu0
        wall1 = time.time()
        records = sum(s["records"] for s in stats)  # the generator checked it against ListOffsets
        nbytes = records * 1024
        name = "wire consumer catch-up from 0" + ("" if connections == 1 else f", {connections} connections")
        self.add(name, "consume", mbs=nbytes / elapsed / MB, rps=records / elapsed,
                 seconds=elapsed, cpu_s_per_gb=cpu / (nbytes / 1e9),
                 gen_cpu_s_per_gb=sum(s["cpu_seconds"] for s in stats) / (nbytes / 1e9), bytes=nbytes,
                 **self._loop_stats(wall0, wall1))

    def kafka_python(self, mode: str, topic: str, records: int, name: str) -> None:
        """A kafka-python process (benchmarks/kafka_python_load.py) producing or consuming `records`
        1 KiB records: the pure-Python client next to the kcat rows, for comparison."""
        cpu0, wall0 = proc_cpu_seconds(self.t.pid), time.time()
        proc = subprocess.run([sys.executable, str(KAFKA_PYTHON_LOAD), mode, "--bootstrap", self.t.bootstrap,
                               "--topic", topic, "--records", str(records)],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"kafka-python {mode} failed: {proc.stderr[-2000:]}")
        cpu = proc_cpu_seconds(self.t.pid) - cpu0
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if mode == "produce" and end_offsets(self.t.bootstrap, topic) != out["records"]:
            raise RuntimeError(f"{self.t.name}: {topic} does not hold the {out['records']} records produced")
        nbytes = out["bytes"]
        self.add(name, mode, mbs=nbytes / out["seconds"] / MB, rps=out["records"] / out["seconds"],
                 seconds=out["seconds"], cpu_s_per_gb=cpu / (nbytes / 1e9),
                 gen_cpu_s_per_gb=out["cpu_seconds"] / (nbytes / 1e9), bytes=nbytes,
                 **self._loop_stats(wall0, time.time()))

    def catchup(self) -> str:
        """Produce the catch-up topic, then time a consumer reading all of it from offset 0."""
        w = Produce("catch-up produce (1KiB, 6p)")
        topic = self._topic("catchup")
        total = self._bytes(self.p.catchup_bytes)
        self.produce(w, total, topic)
        records = total // w.size
        settle()
        cpu0, wall0, gen0 = proc_cpu_seconds(self.t.pid), time.time(), children_cpu_seconds()
        t0 = time.perf_counter()
        c = kcat_consumer(self.t.bootstrap, topic, records, self.logs)
        if c.wait() != 0:
            raise RuntimeError(f"catch-up consumer failed; see {self.logs}/kcat-c.err")
        elapsed = time.perf_counter() - t0
        cpu = proc_cpu_seconds(self.t.pid) - cpu0
        gen = children_cpu_seconds() - gen0
        nbytes = records * w.size
        self.add("consumer catch-up from 0", "consume", mbs=nbytes / elapsed / MB, rps=records / elapsed,
                 seconds=elapsed, cpu_s_per_gb=cpu / (nbytes / 1e9), gen_cpu_s_per_gb=gen / (nbytes / 1e9),
                 bytes=nbytes, **self._loop_stats(wall0, time.time()))
        if self.p.wire_matrix:
            self.wire_consume(topic)
            self.wire_consume(topic, connections=2)
        self.kafka_python("consume", topic, self._bytes(KAFKA_PYTHON_CONSUME_BYTES) // 1024,
                          "kafka-python consumer from 0")
        return topic

    def recovery(self, topic: str) -> None:
        """kill -9, restart on the same log dir; time to ApiVersions and to the topic's full end offsets."""
        expected = self._bytes(self.p.catchup_bytes) // 1024
        self.t.kill()
        t0 = time.perf_counter()
        api = self.t.start()
        while end_offsets(self.t.bootstrap, topic, timeout=2) != expected:
            if time.perf_counter() - t0 > 600:
                raise RuntimeError("recovery did not complete in 600 s")
            time.sleep(0.01)
        self.add("recovery after kill -9", "recovery", seconds=time.perf_counter() - t0, api_seconds=api,
                 log_bytes=expected * 1024)

    def mixed(self) -> None:
        """Producer at full speed and a consumer tailing the same topic, started together."""
        w = Produce("mixed")
        topic = self._topic("mixed")
        total = self._bytes(self.p.mixed_bytes)
        records = total // w.size
        admin_create_topic(self.t.bootstrap, topic, w.partitions)
        settle()
        cpu0, wall0 = proc_cpu_seconds(self.t.pid), time.time()
        t0 = time.perf_counter()
        c = kcat_consumer(self.t.bootstrap, topic, records, self.logs, tail=True)
        p_elapsed, _ = kcat_producers(self.t.bootstrap, topic, w, total, self.cache, self.logs)
        if c.wait(timeout=600) != 0:
            raise RuntimeError("mixed consumer failed")
        c_elapsed = time.perf_counter() - t0
        cpu = proc_cpu_seconds(self.t.pid) - cpu0
        nbytes = records * w.size
        self.add("mixed produce+consume", "mixed", mbs=nbytes / p_elapsed / MB, consume_mbs=nbytes / c_elapsed / MB,
                 rps=records / p_elapsed, cpu_s_per_gb=cpu / (2 * nbytes / 1e9), bytes=nbytes,
                 **self._loop_stats(wall0, time.time()))

    def latency(self, warm_up: bool = False) -> None:
        """The paced latency test; `warm_up`: a 5 s pass that records nothing (--only latency runs
        one first, so that Kafka's JIT is not compiling its request path during the measured pass,
        as it is not in a full run, where the latency test comes last)."""
        topic = self._topic("latency warm-up" if warm_up else "latency")
        partitions = 6
        admin_create_topic(self.t.bootstrap, topic, partitions)
        settle()
        seconds = 5.0 if warm_up else max(2.0, self.p.latency_seconds * min(1.0, self.scale * 4))
        rate = self.p.latency_rate
        client = latency_client_kind()
        wall0 = time.time()
        cpu0, gen0, (busy0, steal0) = proc_cpu_seconds(self.t.pid), children_cpu_seconds(), machine_cpu_seconds()
        if client == "go":
            res = go_latency(build_latency_client(self.cache), self.t.bootstrap, topic, partitions, rate, seconds)
            out = {k: v for k, v in res.items() if k not in ("sent", "seconds", "produce_errors", "client_cpu_s")}
        else:
            sent, out = self._python_latency(topic, partitions, rate, seconds)
            res = sent | {"client_cpu_s": children_cpu_seconds() - gen0}  # both processes are reaped
            out |= {k: v for k, v in sent.items() if k.startswith("ack_")}
        if warm_up:
            return
        wall = time.time() - wall0
        # broker CPU share while paced: per-request costs, not bytes, dominate at this rate
        cpu = proc_cpu_seconds(self.t.pid) - cpu0
        # what everything else on the machine used meanwhile (other people's jobs on a shared box)
        busy1, steal1 = machine_cpu_seconds()
        others = (busy1 - busy0 - cpu - res["client_cpu_s"]) / wall
        self.add(f"latency 1KiB @ {rate // 1000}k rec/s", "latency", achieved_rps=res["sent"] / res["seconds"],
                 broker_cpu_share=cpu / wall, latency_client=client, sent=res["sent"],
                 client_cpu_s=res["client_cpu_s"], others_cpu_share=max(0.0, others),
                 steal_share=(steal1 - steal0) / wall, **out,
                 **self._loop_stats(wall0, time.time()))

    def _python_latency(self, topic: str, partitions: int, rate: int,
                        seconds: float) -> tuple[dict[str, Any], dict[str, Any]]:
        """The confluent-kafka producer and consumer processes: (producer's JSON, consumer's JSON)."""
        expected = int(rate * seconds)
        cons = subprocess.Popen([sys.executable, __file__, "_lat-consumer", self.t.bootstrap, topic, str(partitions),
                                 str(expected), str(seconds + 60)], stdout=subprocess.PIPE, text=True)
        assert cons.stdout is not None
        cons.stdout.readline()  # assigned
        hello = subprocess.run([KCAT, "-P", "-b", self.t.bootstrap, "-t", topic], input=b"hello", capture_output=True)
        if hello.returncode != 0:
            raise RuntimeError(f"kcat hello failed: {hello.stderr.decode(errors='replace')}")
        cons.stdout.readline()  # ready: the consumer has received the hello record
        prod = subprocess.run([sys.executable, __file__, "_lat-producer", self.t.bootstrap, topic, str(rate),
                               str(seconds), "1024"], capture_output=True, text=True, check=True)
        out = json.loads(cons.communicate(timeout=seconds + 90)[0].strip().splitlines()[-1])
        return json.loads(prod.stdout.strip().splitlines()[-1]), out

    def run_all(self) -> None:
        t = self.t
        start_s = t.start()
        # CPU the start took: on a busy machine wall-clock start-up mostly measures waiting for a core
        start_cpu = proc_cpu_seconds(t.pid)
        time.sleep(1.0)
        idle = proc_status_kb(t.pid, "VmRSS")
        self.add("start-up", "startup", seconds=start_s, cpu_seconds=start_cpu, idle_rss_mb=idle / 1024)
        warm_up_group_coordinator(t.bootstrap)
        hwm = 0
        try:
            if self.only != "latency":
                topic = self.catchup()
                hwm = proc_status_kb(t.pid, "VmHWM")
                self.recovery(topic)
                for w in self.p.matrix:
                    self.produce(w)
                for ww in self.p.wire_matrix:
                    self.wire_produce(ww)
                topic = self._topic("kafka-python")
                admin_create_topic(t.bootstrap, topic, BASE.partitions)
                settle()
                self.kafka_python("produce", topic, self._bytes(KAFKA_PYTHON_PRODUCE_BYTES) // 1024,
                                  "kafka-python 1KiB")
                self.mixed()
            else:
                self.latency(warm_up=True)
            self.latency()
            hwm = max(hwm, proc_status_kb(t.pid, "VmHWM"))
            self.add("peak RSS", "rss", peak_rss_mb=hwm / 1024, idle_rss_mb=idle / 1024)
        finally:
            t.stop()
            t.kill()


# ---------------------------------------------------------------------------------------------
# Orchestration, aggregation, report
# ---------------------------------------------------------------------------------------------

def machine_info() -> dict[str, Any]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    kcat_v = subprocess.run([KCAT, "-V"], capture_output=True, text=True).stdout.splitlines()
    try:
        import confluent_kafka

        lib = confluent_kafka.libversion()[0]
    except ImportError:
        lib = "?"
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {"cpu": cpu, "nproc": os.cpu_count(), "mem_mb": mem, "kernel": platform.release(),
            "python": platform.python_version(), "kcat": " ".join(kcat_v[:1]), "librdkafka_py": lib,
            "java": java[0] if java else "?", "load_start": os.getloadavg()}


def aggregate(results: list[dict]) -> dict[str, dict[str, dict[str, Any]]]:
    """broker -> workload -> metric -> median over runs (dicts such as 'loop': max of maxima, median p99)."""
    grouped: dict[str, dict[str, list[dict]]] = {}
    for r in results:
        grouped.setdefault(r["broker"], {}).setdefault(r["workload"], []).append(r["metrics"])
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for broker, wl in grouped.items():
        for workload, runs in wl.items():
            merged: dict[str, Any] = {"runs": len(runs)}
            for key in runs[0]:
                vals = [m[key] for m in runs if key in m]
                if key == "loop":
                    merged[key] = {"max_ms": max(v["max_ms"] for v in vals),
                                   "max_cpu_ms": max(v.get("max_cpu_ms", 0.0) for v in vals),
                                   "max_cpu_task": max(vals, key=lambda v: v.get("max_cpu_ms", 0.0)).get("max_cpu_task", ""),
                                   "max_held_ms": max(v.get("max_held_ms", v["max_ms"]) for v in vals),
                                   "max_held_task": max(vals, key=lambda v: v.get("max_held_ms", v["max_ms"])).get(
                                       "max_held_task", ""),
                                   "gc_max_ms": max(v.get("gc_max_ms", 0.0) for v in vals),
                                   "p99_ms": statistics.median(v["p99_ms"] for v in vals),
                                   "p999_ms": statistics.median(v["p999_ms"] for v in vals),
                                   "max_task": max(vals, key=lambda v: v["max_ms"])["max_task"]}
                elif all(isinstance(v, (int, float)) for v in vals):
                    merged[key] = statistics.median(vals)
            out.setdefault(broker, {})[workload] = merged
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("_"):
        return _child(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="subset, one run (a few minutes)")
    mode.add_argument("--full", action="store_true", help="whole matrix, 3 runs (~30-40 min on 2 cores)")
    ap.add_argument("--brokers", default="odradek,kafka", help="comma list of odradek, kafka (and --broker-cmd names)")
    ap.add_argument("--broker-cmd", action="append", default=[], metavar="NAME=CMD",
                    help="another broker: shell command with {port} and {log_dir}")
    ap.add_argument("--kafka-version", default="4.1.1")
    ap.add_argument("--odradek-src", type=Path, metavar="DIR",
                    help="run the odradek package in DIR (named odradek), e.g. `git archive HEAD` unpacked")
    ap.add_argument("--runs", type=int, help="repetitions (default: profile's)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every data size (smoke tests: 0.01)")
    ap.add_argument("--workdir", type=Path, help="where brokers' log dirs go (default: a temp dir, removed)")
    ap.add_argument("--json", type=Path, help="write raw results here (default: benchmarks/results/perf-<mode>.json)")
    ap.add_argument("--output", type=Path, help="write the Markdown report (and plots next to it)")
    ap.add_argument("--only", choices=["latency"],
                    help="run only this part (plus start-up; no physical baseline), e.g. to compare latency clients")
    ap.add_argument("--report-only", type=Path, metavar="JSON", help="only regenerate the report from saved results")
    args = ap.parse_args(argv)
    if args.report_only:
        from report import write_report

        data = json.loads(args.report_only.read_text())
        write_report(data, args.output or REPO / "docs" / "performance.md")
        return 0
    mode_name = "full" if args.full else "quick"
    profile = PROFILES[mode_name]
    runs = args.runs or profile.runs
    extra = dict(item.split("=", 1) for item in args.broker_cmd)
    brokers = [b for b in args.brokers.split(",") if b] + [n for n in extra if n not in args.brokers.split(",")]
    workroot = args.workdir or Path(tempfile.mkdtemp(prefix="odradek-bench-"))
    workroot.mkdir(parents=True, exist_ok=True)
    cache = REPO / ".cache" / "bench"
    cache.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/runner.py " + " ".join(shlex.quote(a) for a in argv)
    data: dict[str, Any] = {"mode": mode_name, "command": command, "profile": asdict(profile) | {"runs": runs},
                            "scale": args.scale, "machine": machine_info(), "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            "results": [], "baseline": []}
    if "odradek" in brokers:
        compile_package(args.odradek_src)
    if latency_client_kind() == "go":
        build_latency_client(cache)  # before any broker runs; Session.latency() reuses the binary
    t_begin = time.perf_counter()
    try:
        for run in range(runs):
            if args.only is None:
                print(f"run {run + 1}/{runs}: physical baseline", flush=True)
                base = physical_baseline(max(MIB, int(profile.baseline_bytes * args.scale) // MIB * MIB), workroot)
                print(f"  {base}", flush=True)
                data["baseline"].append(base)
            # alternate the order between runs so neither broker always goes first
            order = brokers if run % 2 == 0 else list(reversed(brokers))
            for name in order:
                wd = workroot / f"{name}-{run}"
                if name == "odradek":
                    target: Target = OdradekTarget(wd)
                    target.src = args.odradek_src
                elif name == "kafka":
                    target = KafkaTarget(wd, args.kafka_version)
                else:
                    target = CommandTarget(wd, name, extra[name])
                print(f"run {run + 1}/{runs}: {name}", flush=True)
                session = Session(target, profile, run, cache, args.scale)
                session.only = args.only
                try:
                    session.run_all()
                finally:
                    data["results"].extend(asdict(r) for r in session.results)
                    shutil.rmtree(wd / "data", ignore_errors=True)
    finally:
        data["seconds"] = time.perf_counter() - t_begin
        data["machine"]["load_end"] = os.getloadavg()
        data["aggregate"] = aggregate(data["results"])
        out_json = args.json or REPO / "benchmarks" / "results" / f"perf-{mode_name}.json"
        out_json.parent.mkdir(parents=True, exist_ok=True)
        out_json.write_text(json.dumps(data, indent=1) + "\n")
        print(f"raw results: {out_json} ({data['seconds']:.0f} s)")
        if args.workdir is None:
            shutil.rmtree(workroot, ignore_errors=True)
    from report import summary_text, write_report

    print(summary_text(data))
    if args.output:
        write_report(data, args.output)
        print(f"report: {args.output}")
    return 0


def _child(argv: list[str]) -> int:
    """Entry points of the helper processes the runner starts (names begin with '_')."""
    cmd, rest = argv[0], argv[1:]
    if cmd == "_loopback":
        _loopback_receiver(int(rest[0]), int(rest[1]), rest[2] if len(rest) > 2 else None)
    elif cmd == "_lat-producer":
        latency_producer(rest[0], rest[1], int(rest[2]), float(rest[3]), int(rest[4]))
    elif cmd == "_lat-consumer":
        latency_consumer(rest[0], rest[1], int(rest[2]), int(rest[3]), float(rest[4]))
    else:
        raise SystemExit(f"unknown helper {cmd}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
