"""The README's two set-up commands work as written (issue #4, item 5).

The first command is run verbatim in a fresh virtualenv, in an empty directory, and must
bring up a broker on 127.0.0.1:9092 that answers a real client. The second command is the
one `.ci/run` executes, so CI itself runs it on every submission; this test checks they
stay the same.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import venv
from pathlib import Path

import pytest
from kafka import KafkaProducer

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    """The shell commands in the README's set-up section, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_readme_has_exactly_two_setup_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2
    assert all("\n" not in c for c in commands)


def test_ci_runs_the_readme_test_command() -> None:
    test_command = readme_commands()[1]
    ci = (ROOT / ".ci" / "run").read_text()
    for step in test_command.split(" && "):
        assert step in ci, step


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_readme_serve_command_in_fresh_venv(tmp_path: Path) -> None:
    if not _port_free(9092):
        if os.environ.get("CI") == "true":
            pytest.fail("port 9092 is taken; the README's serve command cannot be tested")
        pytest.skip("port 9092 is taken on this machine; the README's serve command uses it")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(env_dir)}
    env.pop("PYTHONPATH", None)
    command = readme_commands()[0].replace("-e .", f"-e {ROOT}")
    workdir = tmp_path / "work"
    workdir.mkdir()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(["bash", "-c", command], cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", 9092), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.5)
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
        producer = KafkaProducer(bootstrap_servers="127.0.0.1:9092")
        assert producer.send("readme", value=b"hello").get(20).offset == 0
        producer.close()
        assert (workdir / "odradek-data" / "meta.properties").exists()
        assert Path(bin_dir / "odradek").exists()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    assert (workdir / "odradek-data" / ".kafka_cleanshutdown").exists()
