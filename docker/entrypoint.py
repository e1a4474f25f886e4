"""Container entrypoint: turn KAFKA_CFG_* environment variables into `odradek serve --override`s.

KAFKA_CFG_<NAME>=<value> becomes `--override <name>=<value>` with NAME lower-cased and `_`
turned into `.` (the convention of common Kafka images): KAFKA_CFG_NUM_PARTITIONS=3 ->
num.partitions=3, KAFKA_CFG_ODRADEK_METRICS_PORT=9404 -> odradek.metrics.port=9404.
Container defaults (listen on all interfaces, data in the volume, metrics on 9404) come first,
so any KAFKA_CFG_* variable overrides them. Arguments given to the container are passed on to
`odradek serve` (e.g. a server.properties path). ODRADEK_LOG_LEVEL sets the root log level.
`--print` shows the command instead of running it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

PREFIX = "KAFKA_CFG_"

DEFAULTS = {
    "listeners": "PLAINTEXT://0.0.0.0:9092",
    "advertised.listeners": "PLAINTEXT://localhost:9092",
    "log.dirs": "/var/lib/odradek/data",
    "odradek.metrics.port": "9404",
    "odradek.metrics.host": "0.0.0.0",
}


def overrides_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """The broker configs the environment asks for, on top of the container defaults."""
    configs = dict(DEFAULTS)
    for name, value in sorted(env.items()):
        if name.startswith(PREFIX) and len(name) > len(PREFIX):
            configs[name[len(PREFIX):].lower().replace("_", ".")] = value
    return configs


def command(env: Mapping[str, str], args: list[str]) -> list[str]:
    cmd = ["odradek", "--log-level", env.get("ODRADEK_LOG_LEVEL", "INFO"), "serve", *args]
    for key, value in overrides_from_env(env).items():
        cmd += ["--override", f"{key}={value}"]
    return cmd


def main() -> None:
    args = sys.argv[1:]
    dry_run = "--print" in args
    args = [a for a in args if a != "--print"]
    cmd = command(os.environ, args)
    if dry_run:
        print(" ".join(cmd))
        return
    # exec: the broker becomes PID 1's process and gets `docker stop`'s SIGTERM directly.
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
