"""Harness around the real Apache Kafka: the oracle Odradek is compared against.

Everything here runs official Apache Kafka jars that ``.ci/fetch-tools.sh`` resolved with Maven
(``compat-tests/pom.xml``) into ``.cache/m2``; the runtime classpath of each Kafka release is a
file ``.cache/kafka-<version>.classpath``.

What it offers:

* :class:`KafkaBroker`: a single-node KRaft broker+controller as a subprocess on free loopback
  ports, with ``start`` / ``stop`` (SIGTERM, clean shutdown) / ``kill`` (SIGKILL) / ``restart`` on
  the same log dir. It shares the :class:`BrokerProcess` interface with ``odradek_broker.OdradekBroker``
  so one scenario can run against either broker.
* :func:`dump_log_segments`: ``kafka.tools.DumpLogSegments`` from the same jars.
* :class:`JavaClient`: drives the small Java program in ``compat-tests/java/`` (compiled lazily
  against ``kafka-clients``) to produce, consume and administer through the stock Java client.
* :func:`require_tool`: skip loudly outside CI, fail under ``CI=true`` when a tool is missing.

Run ``python3 compat-tests/kafka_oracle.py --help`` for command-line helpers (``warm-up``: build
the Java driver and record class-data archives; ``serve``: run a real Kafka by hand).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

COMPAT_DIR = Path(__file__).resolve().parent
REPO_ROOT = COMPAT_DIR.parent
#: Where Maven's local repository, classpath files and compiled helpers live (gitignored).
CACHE_DIR = Path(os.environ.get("ODRADEK_CACHE_DIR", REPO_ROOT / ".cache"))
JAVA_SRC_DIR = COMPAT_DIR / "java"

#: The current Apache Kafka release, the oracle tests compare Odradek with.
KAFKA_4_4 = "4.4.0"
DEFAULT_KAFKA_VERSION = KAFKA_4_4
#: 3.9.1 is the older reference (the last 3.x); 4.1.1 stays for tests that name it.
KAFKA_VERSIONS = ("4.4.0", "4.1.1", "3.9.1")

#: Fixed cluster id so formatted log dirs (meta.properties) are reproducible across runs.
#: It is the URL-safe base64 (no padding) of the 16 bytes ``b"Odradek-Oracle-1"``.
CLUSTER_ID = base64.urlsafe_b64encode(b"Odradek-Oracle-1").decode().rstrip("=")

#: Generous: two shared cores and other engineers' test runs can slow a JVM start a lot.
DEFAULT_START_TIMEOUT = 60.0
DEFAULT_STOP_TIMEOUT = 60.0

#: JVM flags chosen for start-up time, not throughput: the oracle handles tiny workloads.
#: C1 only (TieredStopAtLevel=1) and SerialGC start measurably faster than the defaults, and a
#: small heap keeps two or three JVMs on a 24 GiB / 2 core machine cheap.
FAST_JVM_OPTS: tuple[str, ...] = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
    # The JVM's own warnings go to stdout by default, where they would corrupt the output of
    # tools and the driver that tests parse: send them to stderr, and silence the class-data
    # sharing chatter entirely (a stale archive is simply not used, see _cds_args).
    "-Xlog:disable",
    "-Xlog:all=warning:stderr",
    "-Xlog:cds*=off:stderr",
)
BROKER_HEAP = ("-Xms64m", "-Xmx512m")
TOOL_HEAP = ("-Xmx256m",)


def in_ci() -> bool:
    """True when running under CI (``CI=true``), where a missing tool is a failure, not a skip."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


# ---------------------------------------------------------------------------------------------
# Tools and classpaths
# ---------------------------------------------------------------------------------------------


class ToolMissing(RuntimeError):
    """A tool the harness needs (java, the Kafka jars, kcat...) is not installed."""


def classpath_file(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """Path of the runtime classpath file that ``.ci/fetch-tools.sh`` writes for ``version``."""
    return CACHE_DIR / f"kafka-{version}.classpath"


def kafka_classpath(version: str = DEFAULT_KAFKA_VERSION) -> str:
    """The broker's runtime classpath for ``version``; raises :class:`ToolMissing` if not fetched."""
    path = classpath_file(version)
    if not path.is_file():
        raise ToolMissing(f"no classpath file {path}: run `bash .ci/fetch-tools.sh`")
    cp = path.read_text().strip()
    entries = [e for e in cp.split(os.pathsep) if e]
    missing = [e for e in entries if not Path(e).is_file()]
    if not entries or missing:
        raise ToolMissing(f"{path} names missing jars (e.g. {missing[:1]}): run `bash .ci/fetch-tools.sh`")
    return cp


def java_bin(name: str = "java") -> str:
    """Path to ``java`` / ``javac``: ``$JAVA_HOME/bin`` first, then ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise ToolMissing(f"`{name}` not found: install a JDK (Java 17) or run `bash .ci/fetch-tools.sh`")
    return found


def tool_path(name: str) -> str:
    """Resolve a tool by name, raising :class:`ToolMissing` with a fix-it hint if absent.

    Names: ``java``, ``javac``, ``kcat``, ``kafka`` (default version's jars), ``kafka-<version>``
    (e.g. ``kafka-3.9.1``), ``java-driver`` / ``java-driver-<version>`` (compiles on demand).
    Returns a path (binary, classpath file or the driver jar).
    """
    if name in ("java", "javac"):
        return java_bin(name)
    if name == "kcat":
        found = shutil.which("kcat") or shutil.which("kafkacat")
        if not found:
            raise ToolMissing("`kcat` not found: `apt-get install kcat` (done by `bash .ci/fetch-tools.sh`)")
        return found
    if name == "kafka" or name.startswith("kafka-"):
        version = DEFAULT_KAFKA_VERSION if name == "kafka" else name.removeprefix("kafka-")
        java_bin("java")
        kafka_classpath(version)
        return str(classpath_file(version))
    if name == "java-driver" or name.startswith("java-driver-"):
        version = DEFAULT_KAFKA_VERSION if name == "java-driver" else name.removeprefix("java-driver-")
        return str(build_java_driver(version))
    raise ValueError(f"unknown tool {name!r}")


def require_tool(name: str) -> str:
    """Return :func:`tool_path` for ``name``; if missing, skip the test (fail it under ``CI=true``).

    The skip reason is deliberately loud: a quietly skipped oracle test proves nothing, so CI
    must never skip for a missing tool (``.ci/run`` installs them all).
    """
    import pytest  # local: this module is also usable as a plain script

    try:
        return tool_path(name)
    except ToolMissing as exc:
        msg = f"ORACLE TOOL MISSING: {name}: {exc}"
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    raise AssertionError("unreachable")  # pytest.skip/fail raise


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` unless ``path`` already holds it.

    Shared config files are read by JVMs that other tests start concurrently; rewriting an
    identical file would briefly truncate it under their feet.
    """
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _log_config_args(version: str, dest: Path | None, *, level: str = "INFO") -> list[str]:
    """JVM system properties that point Kafka's logging backend at a config we write.

    ``dest`` is a log file; ``None`` sends WARN+ to stderr (for tools whose stdout we parse).
    Kafka 4.x logs through log4j2, Kafka 3.x through reload4j (log4j 1.2 API), so the config
    format depends on the major version. The stderr variant is shared, in ``.cache/logging``.
    """
    log4j2 = int(version.split(".")[0]) >= 4
    if dest is None:
        conf_dir = CACHE_DIR / "logging"
        level = "WARN"
    else:
        conf_dir = dest.parent
    conf_dir.mkdir(parents=True, exist_ok=True)
    if log4j2:
        if dest is None:
            appender = [
                "appender.main.type = Console",
                "appender.main.target = SYSTEM_ERR",
            ]
        else:
            appender = ["appender.main.type = File", f"appender.main.fileName = {dest}"]
        text = "\n".join(
            [
                "status = warn",
                *appender,
                "appender.main.name = MAIN",
                "appender.main.layout.type = PatternLayout",
                "appender.main.layout.pattern = [%d] %p %m (%c)%n",
                f"rootLogger.level = {level}",
                "rootLogger.appenderRef.main.ref = MAIN",
                "",
            ]
        )
        conf = conf_dir / ("log4j2-stderr.properties" if dest is None else "log4j2.properties")
        _write_if_changed(conf, text)
        return [f"-Dlog4j2.configurationFile={conf}"]
    if dest is None:
        appender = [
            "log4j.appender.main=org.apache.log4j.ConsoleAppender",
            "log4j.appender.main.Target=System.err",
        ]
    else:
        appender = ["log4j.appender.main=org.apache.log4j.FileAppender", f"log4j.appender.main.File={dest}"]
    text = "\n".join(
        [
            f"log4j.rootLogger={level}, main",
            *appender,
            "log4j.appender.main.layout=org.apache.log4j.PatternLayout",
            "log4j.appender.main.layout.ConversionPattern=[%d] %p %m (%c)%n",
            "",
        ]
    )
    conf = conf_dir / ("log4j-stderr.properties" if dest is None else "log4j.properties")
    _write_if_changed(conf, text)
    return [f"-Dlog4j.configuration=file:{conf}"]


def _cds_archive(kind: str, classpath: str) -> Path:
    """Where the class-data archive of ``kind`` for this JVM and ``classpath`` lives."""
    java = Path(java_bin("java")).resolve()
    key = hashlib.sha256(f"{java}\0{java.stat().st_mtime_ns}\0{classpath}".encode()).hexdigest()[:16]
    return CACHE_DIR / "cds" / f"{kind}-{key}.jsa"


def _cds_args(kind: str, classpath: str, *, record: bool) -> tuple[list[str], Path | None]:
    """JVM flags for a dynamic AppCDS archive of ``kind`` on ``classpath``, and a pending path.

    Class-data sharing maps the classes a previous run loaded from an archive instead of
    parsing and verifying them again; measured here it takes 30-40 % off a broker start and
    about as much off a DumpLogSegments run. If the archive exists it is used. Otherwise, with
    ``record``, this run records one into a pending file that :func:`_publish_cds` renames to
    ``.cache/cds/<kind>-<key>.jsa`` after a normal exit. Only processes whose stdout nobody
    parses record (the broker, the persistent driver), because a failed dump at exit may print
    to stdout; archives for the tools are recorded by :func:`warm_up` (``fetch-tools.sh``).
    The key covers the JVM and the classpath, which an archive is only valid for; a stale or
    broken archive is harmless (the JVM silently runs without it). ``ODRADEK_NO_CDS=1`` turns
    all of this off.
    """
    if os.environ.get("ODRADEK_NO_CDS"):
        return [], None
    archive = _cds_archive(kind, classpath)
    if archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}"], None
    if not record:
        return [], None
    archive.parent.mkdir(parents=True, exist_ok=True)
    pending = archive.with_name(f"{archive.stem}.{os.getpid()}-{time.monotonic_ns()}.pending")
    return [f"-XX:ArchiveClassesAtExit={pending}"], pending


def _publish_cds(pending: Path | None, ok: bool) -> None:
    """Move a recorded archive into place if its JVM exited normally; else drop it."""
    if pending is None or not pending.exists():
        return
    if ok and pending.stat().st_size > 0:
        pending.replace(pending.with_name(pending.name.split(".")[0] + ".jsa"))
    else:
        pending.unlink(missing_ok=True)


def run_java_tool(
    main_class: str,
    args: Sequence[str],
    *,
    version: str = DEFAULT_KAFKA_VERSION,
    timeout: float = 120.0,
    extra_classpath: Sequence[str | Path] = (),
    record_cds: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``main_class`` from the Kafka ``version`` jars; stdout/stderr captured as text.

    ``record_cds`` is for :func:`warm_up` only: it records the class-data archive later runs use.
    """
    cp = os.pathsep.join([*(str(p) for p in extra_classpath), kafka_classpath(version)])
    cds_args, pending = _cds_args(f"tool-{main_class.rsplit('.', 1)[-1]}", cp, record=record_cds)
    cmd = [
        java_bin("java"),
        *FAST_JVM_OPTS,
        *TOOL_HEAP,
        *cds_args,
        *_log_config_args(version, None),
        "-cp",
        cp,
        main_class,
        *args,
    ]
    ok = False
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        ok = proc.returncode == 0
        return proc
    finally:
        _publish_cds(pending, ok)


def dump_log_segments(
    files: str | Path | Iterable[str | Path],
    *flags: str,
    version: str = DEFAULT_KAFKA_VERSION,
    timeout: float = 120.0,
) -> tuple[str, str, int]:
    """Run Kafka's ``kafka.tools.DumpLogSegments --files <files> <flags>``.

    ``files`` is one path or several (joined with commas, as the tool expects); ``flags`` are
    passed as they are, e.g. ``"--deep-iteration"``, ``"--print-data-log"``.
    Returns ``(stdout, stderr, returncode)``.
    """
    if isinstance(files, str | Path):
        files = [files]
    joined = ",".join(str(f) for f in files)
    proc = run_java_tool(dump_log_segments_class(version), ["--files", joined, *flags], version=version,
                         timeout=timeout)
    return proc.stdout, proc.stderr, proc.returncode


def group_records(log_dir: Path, groups: Iterable[str], version: str = DEFAULT_KAFKA_VERSION) -> list[dict]:
    """The ``__consumer_offsets`` records of `groups` in a log dir, in log order, as Kafka's
    DumpLogSegments ``--offsets-decoder`` decodes them: ``{"key": ..., "value": ... or None}``."""
    import re  # noqa: PLC0415

    files = [str(f) for f in sorted(Path(log_dir).glob("__consumer_offsets-*/*.log")) if f.stat().st_size]
    out, err, rc = dump_log_segments(files, "--offsets-decoder", version=version)
    assert rc == 0 and "Exception" not in out + err, err[-3000:]
    wanted = set(groups)
    records = []
    for line in out.splitlines():
        m = re.search(r"key: (\{.*\}) payload: (.*)$", line)
        if m:
            payload = m.group(2).strip()
            record = {"key": json.loads(m.group(1)), "value": None if payload == "<DELETE>" else json.loads(payload)}
            if record["key"]["data"].get("groupId") in wanted:
                records.append(record)
    return records


def dump_log_segments_class(version: str = DEFAULT_KAFKA_VERSION) -> str:
    """DumpLogSegments' main class in ``version``: it moved from core (Scala) to kafka-tools in Kafka 4.2."""
    major, minor = (int(x) for x in version.split(".")[:2])
    return "org.apache.kafka.tools.DumpLogSegments" if (major, minor) >= (4, 2) else "kafka.tools.DumpLogSegments"


# ---------------------------------------------------------------------------------------------
# Ports and readiness probes
# ---------------------------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it; a tiny race is accepted)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    """True if a TCP connect to ``host:port`` succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> bytes:
    """One size-prefixed Kafka frame (without the size) from a blocking socket; ConnectionError
    if the peer closes first. For tests that speak the protocol over raw sockets."""
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


def metadata_broker_count(host: str, port: int, timeout: float = 2.0) -> int:
    """Send one Metadata v12 request and return how many brokers the response lists.

    A KRaft broker lists itself only once it has registered with the controller and been
    unfenced, which is exactly "ready for clients". v12 is served by both Kafka 3.9 and 4.1.
    Written by hand so readiness does not depend on a client library under test.
    """
    client_id = b"odradek-oracle-probe"
    # Request header v2: api_key, api_version, correlation_id, client_id (int16 string), no tags.
    header = struct.pack(">hhih", 3, 12, 1, len(client_id)) + client_id + b"\x00"
    # Body: topics = null (compact array length 0), allow_auto_topic_creation=false,
    # include_topic_authorized_operations=false, no tagged fields.
    body = b"\x00\x00\x00\x00"
    payload = header + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        resp = recv_frame(sock)
    # Response header v1: correlation_id + tagged fields (one varint 0); body: throttle_time_ms,
    # then the brokers compact array whose unsigned varint length is N + 1.
    pos = 4
    if resp[pos] != 0:
        raise ValueError("unexpected tagged fields in Metadata response header")
    pos += 1 + 4
    n, shift = 0, 0
    while True:
        b = resp[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return max(n - 1, 0)


# ---------------------------------------------------------------------------------------------
# Broker processes
# ---------------------------------------------------------------------------------------------


class BrokerStartError(RuntimeError):
    """A broker process exited or did not become ready in time; the message has its log tail."""


class BrokerProcess:
    """One broker subprocess with a fixed work dir, ports and log dir(s), restartable in place.

    The common interface of :class:`KafkaBroker` and ``odradek_broker.OdradekBroker``:

    * ``bootstrap`` -- ``"127.0.0.1:<port>"`` for clients;
    * ``host``, ``port``;
    * ``log_dirs`` -- the broker's ``log.dirs`` (list of paths);
    * ``start(timeout)``, ``stop(timeout) -> returncode``, ``kill()``, ``restart(timeout)``;
    * ``running``, ``last_start_seconds`` (wall time of the last successful start).

    Subclasses implement :meth:`_command`, :meth:`_prepare` and :meth:`_is_ready`.
    """

    name = "broker"

    def __init__(self, workdir: str | Path, *, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = port if port is not None else free_port(host)
        self._auto_ports = port is None
        self._started = False
        self.log_dirs: list[Path] = [self.workdir / "data"]
        self.proc: subprocess.Popen[bytes] | None = None
        self.last_start_seconds: float | None = None
        #: Captures the process's own stdout+stderr (JVM crashes, Python tracebacks).
        self.console_log = self.workdir / "console.log"

    # -- interface --------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the PLAINTEXT listener."""
        return f"{self.host}:{self.port}"

    @property
    def log_dir(self) -> Path:
        """The first (usually only) log dir."""
        return self.log_dirs[0]

    @property
    def running(self) -> bool:
        """True while the subprocess is alive."""
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """Start the broker (formatting storage first if needed) and wait until it is ready.

        :func:`free_port` can race with other processes (a client's outgoing connection may take
        the port before the broker binds it), so a first start that fails on "Address already in
        use" with harness-chosen ports is retried on new ones. Later starts keep their ports.
        """
        for attempt in range(3):
            try:
                self._start_once(timeout)
                self._started = True
                return
            except BrokerStartError as exc:
                if (
                    self._started
                    or not self._auto_ports
                    or attempt == 2
                    or "Address already in use" not in str(exc)
                ):
                    raise
                self._pick_ports()

    def _start_once(self, timeout: float) -> None:
        if self.running:
            raise RuntimeError(f"{self.name} already running (pid {self.proc.pid if self.proc else '?'})")
        t0 = time.monotonic()
        self._prepare()
        with self.console_log.open("ab") as out:
            out.write(f"\n===== start {time.strftime('%H:%M:%S')} =====\n".encode())
            out.flush()
            # Own session: a Ctrl-C in the terminal running pytest must not hit the broker
            # before the fixture stops it, and signals go to the broker's pid only.
            self.proc = subprocess.Popen(
                self._command(),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self._env(),
            )
        deadline = t0 + timeout
        while True:
            if self.proc.poll() is not None:
                raise BrokerStartError(
                    f"{self.name} exited with {self.proc.returncode} during start\n{self.log_tail()}"
                )
            try:
                if self._is_ready():
                    break
            except (OSError, ValueError):
                pass  # not listening yet, or answered before it was fully up
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(f"{self.name} not ready after {timeout:.0f}s\n{self.log_tail()}")
            time.sleep(0.1)
        self.last_start_seconds = time.monotonic() - t0

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT, sig: int = signal.SIGTERM) -> int | None:
        """Ask the broker to shut down cleanly (SIGTERM) and wait; SIGKILL after ``timeout``.

        Returns the exit code (a JVM ended by SIGTERM exits with 143), or ``None`` if not running.
        """
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._exited()
                raise BrokerStartError(
                    f"{self.name} ignored signal {sig} for {timeout:.0f}s; killed"
                ) from None
        self._exited()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the broker (simulated crash: no clean-shutdown marker is written)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._exited()

    def restart(self, timeout: float = DEFAULT_START_TIMEOUT) -> None:
        """Clean stop (if running) and start again on the same ports and log dirs."""
        self.stop()
        self.start(timeout)

    def log_tail(self, lines: int = 40) -> str:
        """Last lines of the console log (and of the broker's own log, if it has one)."""
        parts = []
        for path in self._log_files():
            if path.is_file():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path} ---\n" + "\n".join(text))
        return "\n".join(parts)

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.kill()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} {self.bootstrap} {state} {self.workdir}>"

    # -- hooks ------------------------------------------------------------------------------

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _prepare(self) -> None:
        """Write configs / format storage before each start (idempotent)."""

    def _is_ready(self) -> bool:
        return port_accepts(self.host, self.port)

    def _exited(self) -> None:
        """Called once the process is known to be gone (after stop or kill)."""

    def _pick_ports(self) -> None:
        """Choose new free ports (only before the first successful start)."""
        self.port = free_port(self.host)

    def _env(self) -> dict[str, str]:
        return dict(os.environ)

    def _log_files(self) -> list[Path]:
        return [self.console_log]


class KafkaBroker(BrokerProcess):
    """The real Apache Kafka as a single-node KRaft broker+controller subprocess.

    ``overrides`` are extra ``server.properties`` entries (they win over the defaults here).
    Storage is formatted once with :data:`CLUSTER_ID`; later starts reuse the log dir, so
    ``restart`` / ``kill`` + ``start`` exercise recovery exactly as in production.
    ``last_format_seconds`` and ``last_start_seconds`` record how long those took.
    """

    name = "kafka"

    def __init__(
        self,
        workdir: str | Path,
        *,
        version: str = DEFAULT_KAFKA_VERSION,
        overrides: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        controller_port: int | None = None,
        jvm_opts: Sequence[str] = (),
    ) -> None:
        super().__init__(workdir, host=host, port=port)
        self.version = version
        self.controller_port = controller_port if controller_port is not None else free_port(host)
        self._auto_ports = port is None and controller_port is None
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.jvm_opts = list(jvm_opts)
        self.properties_file = self.workdir / "server.properties"
        self.server_log = self.workdir / "server.log"
        self.last_format_seconds: float | None = None
        #: extra ``kafka-storage format`` arguments, e.g. ``["--feature", "transaction.version=1"]``
        self.format_args: list[str] = []
        self._cds_pending: Path | None = None
        if "log.dirs" in self.overrides:
            self.log_dirs = [Path(p) for p in self.overrides["log.dirs"].split(",")]

    def properties(self) -> dict[str, str]:
        """The full ``server.properties`` this broker runs with (defaults, then overrides)."""
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            # A static voter set works the same on 3.9 and 4.1 and needs no --standalone format.
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        if int(self.version.split(".")[0]) >= 4:
            # Share groups' state topic (Kafka 4.x) also defaults to RF 3.
            props["share.coordinator.state.topic.replication.factor"] = "1"
            props["share.coordinator.state.topic.min.isr"] = "1"
        props.update(self.overrides)
        return props

    def _write_properties(self) -> None:
        lines = [f"{k}={v}" for k, v in self.properties().items()]
        self.properties_file.write_text(
            "# written by compat-tests/kafka_oracle.py\n" + "\n".join(lines) + "\n"
        )

    def _prepare(self) -> None:
        self._write_properties()
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        if all((d / "meta.properties").is_file() for d in self.log_dirs):
            return
        t0 = time.monotonic()
        proc = run_java_tool(
            "kafka.tools.StorageTool",
            ["format", "-t", CLUSTER_ID, "-c", str(self.properties_file), "--ignore-formatted", *self.format_args],
            version=self.version,
        )
        self.last_format_seconds = time.monotonic() - t0
        if proc.returncode != 0:
            raise BrokerStartError(
                f"StorageTool format failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )

    def _command(self) -> list[str]:
        cds_args, self._cds_pending = _cds_args("broker", kafka_classpath(self.version), record=True)
        return [
            java_bin("java"),
            *FAST_JVM_OPTS,
            *BROKER_HEAP,
            *cds_args,
            *self.jvm_opts,
            *_log_config_args(self.version, self.server_log),
            "-cp",
            kafka_classpath(self.version),
            "kafka.Kafka",
            str(self.properties_file),
        ]

    def _is_ready(self) -> bool:
        return metadata_broker_count(self.host, self.port) > 0

    def _pick_ports(self) -> None:
        super()._pick_ports()
        self.controller_port = free_port(self.host)

    def _exited(self) -> None:
        # The JVM writes the class-data archive only when it exits normally (SIGTERM included).
        pending, self._cds_pending = self._cds_pending, None
        _publish_cds(pending, self.proc is not None and self.proc.returncode in (0, 143))

    def _log_files(self) -> list[Path]:
        return [self.console_log, self.server_log]


# ---------------------------------------------------------------------------------------------
# Java client driver
# ---------------------------------------------------------------------------------------------


def _clients_jar(version: str) -> str:
    for entry in kafka_classpath(version).split(os.pathsep):
        if Path(entry).name == f"kafka-clients-{version}.jar":
            return entry
    raise ToolMissing(f"kafka-clients-{version}.jar not in {classpath_file(version)}")


def build_java_driver(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """Compile ``compat-tests/java/*.java`` against kafka-clients ``version`` into a jar.

    Returns ``.cache/java-driver/<version>/kafka-driver-<source hash>.jar``; rebuilt only when a
    source file changes, so the first test pays ~2-4 s of javac and later runs nothing. A jar,
    not a class directory, because class-data sharing refuses directories on the classpath.
    """
    sources = sorted(JAVA_SRC_DIR.glob("*.java"))
    if not sources:
        raise ToolMissing(f"no Java sources in {JAVA_SRC_DIR}")
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    jar = CACHE_DIR / "java-driver" / version / f"kafka-driver-{digest.hexdigest()[:16]}.jar"
    if jar.is_file():
        return jar
    javac = java_bin("javac")
    with tempfile.TemporaryDirectory(prefix="kafka-driver-") as tmp:
        classes = Path(tmp) / "classes"
        proc = subprocess.run(
            [javac, "-nowarn", "--release", "17", "-cp", _clients_jar(version), "-d", str(classes)]
            + [str(src) for src in sources],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"javac failed:\n{proc.stdout}\n{proc.stderr}")
        jar.parent.mkdir(parents=True, exist_ok=True)
        # A jar on a classpath is a plain zip of the class tree; no manifest is needed.
        partial = Path(tmp) / jar.name
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(classes.rglob("*.class")):
                zf.write(path, path.relative_to(classes).as_posix())
        # Copy, then rename into place: a concurrent build never sees half a jar.
        staged = jar.with_name(f"{jar.name}.{os.getpid()}.tmp")
        shutil.copyfile(partial, staged)
        staged.replace(jar)
    return jar


@dataclass
class ConsumedRecord:
    """One record as the Java consumer returned it (keys/values/header values as raw bytes)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    leader_epoch: int | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, object]) -> ConsumedRecord:
        """Decode the driver's JSON line (base64 for bytes)."""

        def b(v: object) -> bytes | None:
            return None if v is None else base64.b64decode(str(v))

        return cls(
            topic=str(obj["topic"]),
            partition=int(obj["partition"]),  # type: ignore[arg-type]
            offset=int(obj["offset"]),  # type: ignore[arg-type]
            timestamp=int(obj["timestamp"]),  # type: ignore[arg-type]
            timestamp_type=str(obj["timestamp_type"]),
            key=b(obj.get("key")),
            value=b(obj.get("value")),
            headers=[(str(h[0]), b(h[1])) for h in obj.get("headers", [])],  # type: ignore[union-attr]
            leader_epoch=obj.get("leader_epoch"),  # type: ignore[arg-type]
        )


class JavaClientError(RuntimeError):
    """The Java driver exited non-zero; ``result`` holds its JSON error object if it printed one."""

    def __init__(self, message: str, result: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.result = result


class JavaClient:
    """Drives ``compat-tests/java/KafkaDriver.java`` (the stock Java client) against ``bootstrap``.

    By default one JVM stays up (``KafkaDriver serve``) and runs the commands one after the
    other, so only the first call pays the JVM start and class loading (~1-3 s here); each
    command still creates and closes its own producer / consumer / admin client.
    ``persistent=False`` starts a JVM per call instead. Output is JSON: one object per line;
    the last line is the summary / result. See ``compat-tests/java/KafkaDriver.java`` for every
    option. Call :meth:`close` (or use ``with``) to end the JVM.
    """

    def __init__(
        self, bootstrap: str, *, version: str = DEFAULT_KAFKA_VERSION, persistent: bool = True
    ) -> None:
        self.bootstrap = bootstrap
        self.version = version
        self.persistent = persistent
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._buf = b""
        self._cds_pending: Path | None = None

    def command(self, *args: str, jvm_opts: Sequence[str] = ()) -> list[str]:
        """The java command line for ``KafkaDriver <args>`` (no ``--bootstrap`` added)."""
        return [
            java_bin("java"),
            *FAST_JVM_OPTS,
            *TOOL_HEAP,
            *jvm_opts,
            *_log_config_args(self.version, None),
            "-cp",
            self._classpath(),
            "KafkaDriver",
            *args,
        ]

    def _classpath(self) -> str:
        return os.pathsep.join([str(build_java_driver(self.version)), kafka_classpath(self.version)])

    def run(self, *args: str, timeout: float = 120.0) -> list[dict[str, object]]:
        """Run one driver command and return its JSON lines; :class:`JavaClientError` on failure."""
        full = [*args, "--bootstrap", self.bootstrap]
        if self.persistent:
            rc, lines, stderr = self._run_in_server(full, timeout)
        else:
            cds_args, pending = _cds_args("driver", self._classpath(), record=False)
            rc = -1
            try:
                proc = subprocess.run(
                    self.command(*full, jvm_opts=cds_args),
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    stdin=subprocess.DEVNULL,
                )
                rc, stderr = proc.returncode, proc.stderr
            finally:
                # Exit codes 0 and 1 both come from System.exit: the archive was written.
                _publish_cds(pending, rc in (0, 1))
            lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        if rc != 0:
            last = lines[-1] if lines else None
            raise JavaClientError(f"KafkaDriver {' '.join(args)} exited {rc}: {last}\n{stderr[-4000:]}", last)
        return lines

    def _run_in_server(self, args: list[str], timeout: float) -> tuple[int, list[dict[str, object]], str]:
        if any("\t" in a or "\n" in a for a in args):
            raise ValueError("driver arguments may not contain tabs or newlines")
        if self._proc is None or self._proc.poll() is not None:
            self._start_server()
        assert self._proc is not None and self._proc.stdin is not None
        deadline = time.monotonic() + timeout
        lines: list[dict[str, object]] = []
        try:
            self._proc.stdin.write(("\t".join(args) + "\n").encode())
            self._proc.stdin.flush()
            while True:
                obj = json.loads(self._readline(deadline))
                if obj.keys() == {"done"}:
                    return int(obj["done"]), lines, self._stderr_tail()  # type: ignore[call-overload]
                lines.append(obj)
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            # A hung or dead driver JVM is replaced on the next call.
            tail = self._stderr_tail()
            self.close(kill=True)
            raise JavaClientError(f"KafkaDriver {' '.join(args)} failed: {exc!r}\n{tail}") from exc

    def _start_server(self) -> None:
        self.close(kill=True)
        self._stderr = tempfile.TemporaryFile()
        self._buf = b""
        cds_args, self._cds_pending = _cds_args("driver", self._classpath(), record=True)
        self._proc = subprocess.Popen(
            self.command("serve", jvm_opts=cds_args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )

    def _readline(self, deadline: float) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no answer from the Java driver in time")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError("Java driver exited")
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def _stderr_tail(self, size: int = 4000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        end = self._stderr.tell()
        self._stderr.seek(max(0, end - size))
        return self._stderr.read().decode(errors="replace")

    def close(self, kill: bool = False) -> None:
        """End the persistent driver JVM (EOF on its stdin, SIGKILL if it lingers or ``kill``)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if not kill and proc.stdin is not None:
                try:
                    proc.stdin.close()
                    # Generous: a JVM recording its class-data archive writes it at exit.
                    proc.wait(30)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            pending, self._cds_pending = self._cds_pending, None
            _publish_cds(pending, proc.returncode == 0)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None and not stream.closed:
                    stream.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> JavaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- produce / consume ------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        count: int,
        *,
        acks: str = "all",
        compression: str = "none",
        key_format: str | None = "key-%d",
        value_format: str = "value-%d",
        headers: Mapping[str, str] | None = None,
        idempotence: bool | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        value_size: int | None = None,
        linger_ms: int | None = None,
        batch_size: int | None = None,
        transactional_id: str | None = None,
        config: Mapping[str, object] | None = None,
        timeout: float = 120.0,
    ) -> dict[str, object]:
        """Produce ``count`` records; ``%d`` in formats becomes the record's index (0-based).

        ``key_format=None`` sends null keys. ``headers`` maps header name to a value format.
        ``idempotence=None`` keeps the Java client's default: on, unless ``acks`` is not ``all``.
        ``timestamp`` sets record i's timestamp to ``timestamp + i`` (else the producer's clock).
        Returns the summary ``{"produced", "acks": [{"partition", "offset", "timestamp"}, ...]}``.
        """
        args = [
            "produce",
            "--topic",
            topic,
            "--count",
            str(count),
            "--acks",
            acks,
            "--compression",
            compression,
        ]
        args += ["--value-format", value_format]
        if idempotence is not None:
            args += ["--idempotence", str(idempotence).lower()]
        args += ["--key-format", key_format] if key_format is not None else ["--null-keys"]
        for name, fmt in (headers or {}).items():
            args += ["--header", f"{name}={fmt}"]
        for opt, val in (
            ("--partition", partition),
            ("--timestamp", timestamp),
            ("--value-size", value_size),
            ("--linger-ms", linger_ms),
            ("--batch-size", batch_size),
            ("--transactional-id", transactional_id),
        ):
            if val is not None:
                args += [opt, str(val)]
        for k, v in (config or {}).items():
            args += ["--config", f"{k}={v}"]
        lines = self.run(*args, timeout=timeout)
        summary = dict(lines[-1])
        summary["acks"] = lines[:-1]
        return summary

    def consume(
        self,
        topic: str,
        *,
        start: str = "earliest",
        max_records: int | None = None,
        idle_timeout_ms: int = 5000,
        total_timeout_ms: int = 60_000,
        partitions: Sequence[int] | None = None,
        group: str | None = None,
        isolation: str = "read_uncommitted",
        config: Mapping[str, object] | None = None,
        timeout: float = 120.0,
    ) -> list[ConsumedRecord]:
        """Read records. ``start`` is ``earliest``, ``latest``, ``offset:N`` or ``timestamp:MS``.

        Without ``group`` the driver assigns partitions itself (no rebalance delay); it stops
        after ``max_records``, when ``idle_timeout_ms`` passes with nothing new (time spent
        joining ``group`` does not count), or after ``total_timeout_ms``.
        """
        args = ["consume", "--topic", topic, "--from", start, "--idle-timeout-ms", str(idle_timeout_ms)]
        args += ["--timeout-ms", str(total_timeout_ms)]
        args += ["--isolation", isolation]
        if max_records is not None:
            args += ["--max-records", str(max_records)]
        if partitions is not None:
            args += ["--partitions", ",".join(map(str, partitions))]
        if group is not None:
            args += ["--group", group]
        for k, v in (config or {}).items():
            args += ["--config", f"{k}={v}"]
        lines = self.run(*args, timeout=timeout)
        return [ConsumedRecord.from_json(obj) for obj in lines if "offset" in obj]

    # -- admin ------------------------------------------------------------------------------

    def admin(self, op: str, *args: str, timeout: float = 120.0) -> dict[str, object]:
        """Run ``admin <op> <args>`` and return its single JSON result object."""
        return self.run("admin", op, *args, timeout=timeout)[-1]

    def create_topic(
        self,
        topic: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, object] | None = None,
    ) -> dict[str, object]:
        """CreateTopics with topic ``config``; returns ``{"topic", "topic_id", "partitions"}``."""
        args = [
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--replication-factor",
            str(replication_factor),
        ]
        for k, v in (config or {}).items():
            args += ["--topic-config", f"{k}={v}"]
        return self.admin("create-topic", *args)

    def list_topics(self, internal: bool = False) -> list[str]:
        """Names of all topics (``internal=True`` includes ``__consumer_offsets`` etc.)."""
        res = self.admin("list-topics", *(["--internal"] if internal else []))
        return list(res["topics"])  # type: ignore[call-overload]

    def describe_topic(self, topic: str) -> dict[str, object]:
        """``{"topic", "topic_id", "internal", "partitions": [{"partition", "leader", "replicas", "isr"}]}``."""
        return self.admin("describe-topic", "--topic", topic)

    def delete_topic(self, topic: str) -> dict[str, object]:
        """DeleteTopics."""
        return self.admin("delete-topic", "--topic", topic)

    def describe_configs(
        self, topic: str | None = None, broker: int | None = None
    ) -> dict[str, dict[str, object]]:
        """Config name -> ``{"value", "source", "default", "read_only", "sensitive"}`` of a topic or broker."""
        args = (
            ["--topic", topic]
            if topic is not None
            else ["--broker", str(broker if broker is not None else 1)]
        )
        return self.admin("describe-configs", *args)["configs"]  # type: ignore[return-value]

    def list_offsets(self, topic: str, spec: str = "latest") -> dict[int, dict[str, object]]:
        """ListOffsets for every partition; ``spec``: earliest, latest, max-timestamp, timestamp:MS.

        Returns partition -> ``{"offset", "timestamp", "leader_epoch"}``.
        """
        res = self.admin("list-offsets", "--topic", topic, "--spec", spec)
        return {int(k): v for k, v in res["offsets"].items()}  # type: ignore[union-attr]


def warm_up(version: str = DEFAULT_KAFKA_VERSION) -> None:
    """Compile the Java driver and record the tools' class-data archives for ``version``.

    Run by ``.ci/fetch-tools.sh`` so that tests never pay for recording (and never parse the
    output of a recording run). Each step is skipped when its result already exists.
    """
    build_java_driver(version)
    cp = kafka_classpath(version)
    tools = ("DumpLogSegments", "StorageTool")
    if os.environ.get("ODRADEK_NO_CDS") or all(_cds_archive(f"tool-{t}", cp).is_file() for t in tools):
        return
    with tempfile.TemporaryDirectory(prefix="kafka-warm-up-") as tmp:
        segment = Path(tmp) / "t-0" / "00000000000000000000.log"
        segment.parent.mkdir()
        segment.write_bytes(b"")
        run_java_tool(
            dump_log_segments_class(version),
            ["--files", str(segment), "--deep-iteration", "--print-data-log"],
            version=version,
            record_cds=True,
        )
        broker = KafkaBroker(Path(tmp) / "broker", version=version)
        broker._write_properties()
        run_java_tool(
            "kafka.tools.StorageTool",
            ["format", "-t", CLUSTER_ID, "-c", str(broker.properties_file), "--ignore-formatted"],
            version=version,
            record_cds=True,
        )


# ---------------------------------------------------------------------------------------------
# Command line (manual use and .ci/fetch-tools.sh)
# ---------------------------------------------------------------------------------------------


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser(
        "warm-up", help="compile compat-tests/java against kafka-clients, record tool CDS archives"
    )
    b.add_argument("--version", action="append", help="Kafka version(s); default: all fetched")
    s = sub.add_parser("serve", help="run a real Kafka broker in the foreground until Ctrl-C")
    s.add_argument("--version", default=DEFAULT_KAFKA_VERSION)
    s.add_argument("--workdir", required=True)
    s.add_argument("--port", type=int)
    s.add_argument("--override", action="append", default=[], metavar="K=V")
    args = parser.parse_args(argv)
    if args.cmd == "warm-up":
        versions = args.version or [v for v in KAFKA_VERSIONS if classpath_file(v).is_file()]
        for v in versions:
            t0 = time.monotonic()
            warm_up(v)
            print(f"kafka {v}: java driver {build_java_driver(v)}; warm-up {time.monotonic() - t0:.1f}s")
        return 0
    overrides = dict(o.split("=", 1) for o in args.override)
    broker = KafkaBroker(args.workdir, version=args.version, port=args.port, overrides=overrides)
    broker.start()
    print(
        f"Kafka {args.version} ready at {broker.bootstrap} in {broker.last_start_seconds:.1f}s "
        f"(format {broker.last_format_seconds or 0:.1f}s); logs in {broker.workdir}",
        flush=True,
    )
    try:
        while broker.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        print(f"stopped: exit {broker.stop()}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
