"""Lint of docker/ without a Docker engine (none runs here, and Debian has no hadolint).

The Dockerfile is parsed into instructions (continuations and comments handled) and checked
for the rules the image promises: a slim Python base, a non-root user before the entrypoint,
a data volume, an ApiVersions health check in exec form, COPY sources that exist. The compose
file is parsed as YAML and its references checked. The entrypoint's KAFKA_CFG_* mapping is
checked, and its command plus the HEALTHCHECK command are run against a real broker.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"

# Instructions of the Dockerfile reference (https://docs.docker.com/reference/dockerfile/).
INSTRUCTIONS = {
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
    "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
}


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs; backslash continuations joined, comment lines dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # comments inside a continued instruction are ignored by Docker too
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return out


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    return parse_dockerfile((DOCKER / "Dockerfile").read_text())


def test_dockerfile_instructions_are_known_and_ordered(instructions) -> None:
    unknown = [k for k, _ in instructions if k not in INSTRUCTIONS]
    assert not unknown
    assert instructions[0][0] == "FROM" and instructions[0][1].startswith("python:") and "-slim" in instructions[0][1]
    keywords = [k for k, _ in instructions]
    for once in ("ENTRYPOINT", "HEALTHCHECK", "USER", "VOLUME"):
        assert keywords.count(once) == 1, once
    # Non-root from USER on, and the process starts after it.
    assert keywords.index("USER") < keywords.index("ENTRYPOINT")
    user = dict(instructions)["USER"]
    assert user not in ("root", "0") and not user.startswith("0:")


def test_dockerfile_exec_forms_volume_and_exposed_ports(instructions) -> None:
    args = dict(instructions)
    entrypoint = json.loads(args["ENTRYPOINT"])
    assert entrypoint[-1] == "/opt/odradek/entrypoint.py"
    assert json.loads(args["VOLUME"]) == ["/var/lib/odradek/data"]
    assert set(args["EXPOSE"].split()) == {"9092", "9404"}
    health = args["HEALTHCHECK"]
    assert "--interval=" in health and " CMD " in f" {health} "
    probe = json.loads(health.split(" CMD ", 1)[1])
    assert probe[:2] == ["odradek", "broker-api-versions"] and "--bootstrap-server" in probe


def test_copy_sources_exist(instructions) -> None:
    for keyword, arg in instructions:
        if keyword == "COPY":
            parts = [p for p in shlex.split(arg) if not p.startswith("--")]
            for source in parts[:-1]:
                assert (ROOT / source).exists(), source
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    assert ".git" in ignore and ".cache" in ignore


def test_compose_file_references_resolve() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = compose["services"]
    broker = services["odradek"]
    assert (DOCKER / broker["build"]["context"] / broker["build"]["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    named_volumes = set(compose.get("volumes") or {})
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert source in named_volumes or source.startswith(("../", "./", "/")), volume
        for dependency in service.get("depends_on", {}):
            assert dependency in services
        for port in service.get("ports", []):
            host, container = str(port).split(":")
            assert host.isdigit() and container.isdigit()
    env = broker["environment"]
    assert all(k.startswith("KAFKA_CFG_") for k in env)
    # Every listener is advertised and mapped to PLAINTEXT.
    names = {u.split("://")[0] for u in env["KAFKA_CFG_LISTENERS"].split(",")}
    assert names == {u.split("://")[0] for u in env["KAFKA_CFG_ADVERTISED_LISTENERS"].split(",")}
    assert names == {m.split(":")[0] for m in env["KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")}
    assert services["spark-job"]["profiles"] == ["pipeline"]


def _entrypoint(env: dict[str, str], *args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, str(DOCKER / "entrypoint.py"), "--print", *args],
        env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, check=True,
    ).stdout
    return out.split()


def test_entrypoint_maps_kafka_cfg_variables() -> None:
    cmd = _entrypoint({"KAFKA_CFG_NUM_PARTITIONS": "3", "KAFKA_CFG_LOG_DIRS": "/data", "ODRADEK_LOG_LEVEL": "WARN",
                       "OTHER": "x"}, "/etc/server.properties")
    assert cmd[:5] == ["odradek", "--log-level", "WARN", "serve", "/etc/server.properties"]
    overrides = dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "--override")
    assert overrides["num.partitions"] == "3" and overrides["log.dirs"] == "/data"
    assert overrides["listeners"] == "PLAINTEXT://0.0.0.0:9092"
    assert not any(k.startswith("other") for k in overrides)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_entrypoint_command_serves_and_the_healthcheck_probe_passes(tmp_path) -> None:
    port, internal, metrics = _free_port(), _free_port(), _free_port()
    env = {
        "KAFKA_CFG_LISTENERS": f"EXTERNAL://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal}",
        "KAFKA_CFG_ADVERTISED_LISTENERS": f"EXTERNAL://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal}",
        "KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
        "KAFKA_CFG_LOG_DIRS": str(tmp_path / "data"),
        "KAFKA_CFG_ODRADEK_METRICS_PORT": str(metrics),
        "KAFKA_CFG_ODRADEK_METRICS_HOST": "127.0.0.1",
    }
    cmd = _entrypoint(env)
    cmd[0:1] = [sys.executable, "-m", "odradek"]
    health = json.loads(dict(parse_dockerfile((DOCKER / "Dockerfile").read_text()))["HEALTHCHECK"].split(" CMD ", 1)[1])
    health[0:1] = [sys.executable, "-m", "odradek"]

    def probe(p: int) -> int:
        argv = [a if a != "127.0.0.1:9092" else f"127.0.0.1:{p}" for a in health]
        return subprocess.run(argv, capture_output=True).returncode

    assert probe(port) != 0  # nothing listens yet: the probe fails
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while probe(port) != 0:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
        assert probe(internal) == 0
    finally:
        proc.terminate()
        proc.wait(timeout=60)
