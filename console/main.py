"""`odradek console`: arguments, start-up, and the child process `odradek serve --console` runs."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from typing import Any

from ..tools.cli_common import add_command_config_argument, client_properties
from ..tools.client import parse_bootstrap
from ..tools.client_security import ClientConfigError, ClientSecurity

DEFAULT_PORT = 8080
DEFAULT_HOST = "127.0.0.1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT]",
                        help="the Kafka (or Odradek) server(s) to connect to (default 127.0.0.1:9092)")
    add_command_config_argument(parser)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help="address the web server binds to (default 127.0.0.1: only this machine; the "
                        "console has no login of its own, so think twice before opening it wider)")
    parser.add_argument("--request-timeout-ms", type=int, default=15000, metavar="MS",
                        help="socket timeout of each Kafka request (default 15000)")
    parser.add_argument("--threads", type=int, default=8, help="web server worker threads (default 8)")
    # Used by `odradek serve --console`: the console exits when the broker process is gone.
    parser.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)


def connection_info(bootstrap: str, properties: dict[str, str]) -> dict[str, Any]:
    """How the console connects, for the cluster page: never a password, key or token."""
    info: dict[str, Any] = {
        "bootstrap": bootstrap,
        "security_protocol": properties.get("security.protocol", "PLAINTEXT").upper(),
    }
    if "SASL" in info["security_protocol"]:
        info["sasl_mechanism"] = properties.get("sasl.mechanism", "GSSAPI")
    return info


def run(args: argparse.Namespace) -> int:
    from waitress import create_server

    from .app import LOOPBACK_NAMES, create_app
    from .pool import ClientPool

    try:
        parse_bootstrap(args.bootstrap_server)
        properties = client_properties(args)
        security = ClientSecurity.from_properties(properties)
    except (ClientConfigError, ValueError, OSError) as exc:
        print(f"odradek console: {exc}", file=sys.stderr)
        return 1
    pool = ClientPool(args.bootstrap_server, security, timeout=args.request_timeout_ms / 1000)
    # Bound to loopback, the console answers only to loopback names; bound wider, to any.
    allowed = LOOPBACK_NAMES if args.host in LOOPBACK_NAMES else None
    app = create_app(pool, connection_info=connection_info(args.bootstrap_server, properties), allowed_hosts=allowed)
    try:
        server = create_server(app, host=args.host, port=args.port, threads=max(2, args.threads),
                               ident="odradek-console")
    except OSError as exc:
        print(f"odradek console: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    if args.parent_pid:
        threading.Thread(target=_exit_with_parent, args=(args.parent_pid, server), daemon=True).start()
    print(f"odradek console: http://{args.host}:{server.effective_port}/ for {args.bootstrap_server}",
          file=sys.stderr, flush=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        pool.close()
    return 0


def _exit_with_parent(parent_pid: int, server: Any) -> None:
    # A broker killed with SIGKILL cannot stop its console: the console notices instead.
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    server.close()
    os._exit(0)


# ------------------------------------------------------------------------------ odradek serve --console

def console_bootstrap(config: Any) -> str | None:
    """A PLAINTEXT listener of the broker about to start, as host:port; None when it has none."""
    protocol_map = {}
    for item in config.get("listener.security.protocol.map") or []:
        name, _, protocol = str(item).partition(":")
        protocol_map[name.strip().upper()] = protocol.strip().upper()
    controllers = {str(n).upper() for n in (config.get("controller.listener.names") or [])}
    for listener in config.listeners:
        if listener.name in controllers:
            continue
        if protocol_map.get(listener.name, listener.name) == "PLAINTEXT":
            return f"{listener.advertised_host}:{listener.port}"
    return None


def start_child(bootstrap: str, port: int) -> subprocess.Popen[bytes]:
    """`odradek console` as a child process of the broker (its own interpreter, not the broker's loop)."""
    cmd = [sys.executable, "-m", "odradek", "console", "--bootstrap-server", bootstrap, "--port", str(port),
           "--parent-pid", str(os.getpid())]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL)


def stop_child(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
