"""`odradek broker-api-versions`: the APIs and versions a broker serves, like kafka-broker-api-versions.sh.

Prints, per broker, ``host:port (id: N rack: null) -> (`` then one line per API Kafka's client
knows, ``Name(key): min to max [usable: v]`` (``UNSUPPORTED`` when the broker does not serve
it), then ``)``. The exit code is 0 only when every broker answered ApiVersions, so it doubles
as a health probe (the Docker image's HEALTHCHECK uses it).
"""

from __future__ import annotations

import argparse

from ..wire.protocol import API_NAMES, supported_versions
from .cli_common import add_bootstrap_argument, add_command_config_argument, run_with_client
from .client import KafkaClient


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    parser.add_argument("--quiet", action="store_true", help="print nothing; only the exit code tells")


def run(args: argparse.Namespace) -> int:
    return run_with_client(args, lambda client: _run(client, args), prog="broker-api-versions")


def _run(client: KafkaClient, args: argparse.Namespace) -> int:
    client.metadata([])
    for node_id in sorted(client.brokers):
        conn = client.connection(node_id)
        if args.quiet:
            continue
        print(f"{conn.host}:{conn.port} (id: {node_id} rack: null) -> (")
        lines = []
        for key in sorted(API_NAMES):
            name = API_NAMES[key]
            if key not in conn.api_ranges:
                lines.append(f"\t{name}({key}): UNSUPPORTED")
                continue
            lo, hi = conn.api_ranges[key]
            ours_lo, ours_hi = supported_versions(key)
            usable = min(hi, ours_hi)
            usable_text = str(usable) if usable >= max(lo, ours_lo) else "NONE"
            lines.append(f"\t{name}({key}): {lo} to {hi} [usable: {usable_text}]")
        print(",\n".join(lines))
        print(")")
    return 0
