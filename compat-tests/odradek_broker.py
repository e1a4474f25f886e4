"""Odradek as a broker subprocess, with the same interface as the real-Kafka :class:`KafkaBroker`.

Both derive from :class:`kafka_oracle.BrokerProcess` (``bootstrap``, ``log_dirs``, ``start``,
``stop``, ``kill``, ``restart``), so a scenario written once runs against either broker.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from kafka_oracle import BrokerProcess, port_accepts


class OdradekBroker(BrokerProcess):
    """``python -m odradek serve --override k=v ...`` on a free loopback port with its own log dir.

    ``overrides`` are extra broker configs passed as ``--override``; ``listeners`` and
    ``log.dirs`` are always set here (an override of ``log.dirs`` moves ``log_dirs``).
    ``command`` replaces ``[python, -m, odradek, serve]`` (the harness's own tests use it).
    Ready means the PLAINTEXT port accepts TCP connections.
    """

    name = "odradek"

    def __init__(
        self,
        workdir: str | Path,
        *,
        overrides: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        super().__init__(workdir, host=host, port=port)
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        if "log.dirs" in self.overrides:
            self.log_dirs = [Path(p) for p in self.overrides["log.dirs"].split(",")]
        self.base_command = (
            list(command) if command is not None else [sys.executable, "-m", "odradek", "serve"]
        )

    def configs(self) -> dict[str, str]:
        """Every ``--override`` this broker is started with."""
        return {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            **self.overrides,
        }

    def _prepare(self) -> None:
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)

    def _command(self) -> list[str]:
        cmd = list(self.base_command)
        for k, v in self.configs().items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def _env(self) -> dict[str, str]:
        env = super()._env()
        # Tracebacks and log lines reach console.log at once, not when a buffer fills.
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _is_ready(self) -> bool:
        return port_accepts(self.host, self.port)
