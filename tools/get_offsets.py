"""`odradek get-offsets`: offsets of topic partitions at a time, like kafka-get-offsets.sh.

Prints ``topic:partition:offset`` lines sorted by topic and partition, as Kafka's GetOffsetShell
does (an empty offset when the broker has none, e.g. max-timestamp of an empty partition).
"""

from __future__ import annotations

import argparse
import re

from .cli_common import add_bootstrap_argument, add_command_config_argument, run_with_client
from .client import KafkaClient

# --time names Kafka's tool accepts besides a millisecond timestamp.
TIME_NAMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    parser.add_argument("--topic", help="topic name or regular expression (default: all topics)")
    parser.add_argument("--partitions", help="comma-separated partition ids (default: all)")
    parser.add_argument(
        "--time",
        default="latest",
        help="-1/latest, -2/earliest, -3/max-timestamp, -4/earliest-local, -5/latest-tiered, "
        "or a timestamp in ms: the first offset whose timestamp is at least that (default latest)",
    )
    parser.add_argument("--exclude-internal-topics", action="store_true", help="leave internal topics out")


def parse_time(text: str) -> int:
    if text in TIME_NAMES:
        return TIME_NAMES[text]
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--time {text!r} is not a timestamp or one of {', '.join(TIME_NAMES)}") from None


def run(args: argparse.Namespace) -> int:
    return run_with_client(args, lambda client: _run(client, args), prog="odradek-get-offsets")


def _run(client: KafkaClient, args: argparse.Namespace) -> int:
    timestamp = parse_time(args.time)
    wanted = {int(p) for p in args.partitions.split(",")} if args.partitions else None
    pattern = re.compile(args.topic) if args.topic else None
    exact = [args.topic] if args.topic and re.fullmatch(r"[A-Za-z0-9._-]+", args.topic) else None
    topics = client.metadata(exact)
    for name in sorted(topics):
        info = topics[name]
        if info.error_code or (args.exclude_internal_topics and info.internal):
            continue
        if pattern is not None and not pattern.fullmatch(name):
            continue
        parts = sorted(p for p in info.partitions if wanted is None or p in wanted)
        if not parts:
            continue
        offsets = client.list_offsets(info, parts, timestamp)
        for p in parts:
            offset = offsets.get(p, -1)
            print(f"{name}:{p}:{offset if offset >= 0 else ''}")
    return 0
