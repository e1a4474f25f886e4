"""`odradek console-producer`: each line of standard input becomes a record, like kafka-console-producer.sh.

With ``--property parse.key=true`` a line is ``key<key.separator>value`` (separator default a
tab). Keyed records go to Kafka's murmur2 partition of the key, so they land where a Java
producer would put them. Lines are sent in batches: as many as are already waiting on stdin
(up to --batch-size), so piping a file is fast and typing a line sends it at once.
"""

from __future__ import annotations

import argparse
import select
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from ..wire.compression import CompressionType
from ..wire.records import SimpleRecord, build_batch
from .cli_common import (
    add_bootstrap_argument,
    add_command_config_argument,
    client_properties,
    parse_key_values,
    run_with_client,
    unescape,
)
from .client import KafkaClient, TopicInfo
from .client_security import ClientConfigError
from .partitioner import RoundRobin, partition_for_key

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", required=True, help="the topic to produce to (created if the broker auto-creates)")
    parser.add_argument(
        "--property",
        action="append",
        metavar="name=value",
        help="reader properties: parse.key=true, key.separator=<sep> (default tab), "
        "ignore.error=true (skip lines without a separator)",
    )
    parser.add_argument("--reader-property", action="append", metavar="name=value",
                        help="the reader properties (Kafka 4.4's name of --property)")
    parser.add_argument(
        "--producer-property",
        action="append",
        metavar="name=value",
        help="producer configs: acks=all|1|0, client.id and the security keys of --producer.config; "
        "these win over the file",
    )
    parser.add_argument("--command-property", action="append", metavar="name=value",
                        help="producer configs (Kafka 4.4's name of --producer-property)")
    add_command_config_argument(parser, "--producer.config", "producer")
    parser.add_argument("--request-required-acks", default=None, help="acks: all (-1), 1 or 0 (default all)")
    parser.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        default="none",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        help="compress record batches (default none; gzip if given without a value)",
    )
    parser.add_argument("--batch-size", type=int, default=200, help="most lines sent in one request (default 200)")


class LineReader:
    """Turns input lines into (key, value) pairs the way Kafka's LineMessageReader does."""

    def __init__(self, properties: dict[str, str]) -> None:
        self.parse_key = properties.get("parse.key", "false").lower() == "true"
        self.separator = unescape(properties.get("key.separator", "\t"))
        self.ignore_error = properties.get("ignore.error", "false").lower() == "true"

    def parse(self, line: str) -> tuple[bytes | None, bytes]:
        if not self.parse_key:
            return None, line.encode()
        key, sep, value = line.partition(self.separator)
        if not sep:
            if self.ignore_error:
                return None, line.encode()
            raise ValueError(f"No key separator found on line: {line!r}")
        return key.encode(), value.encode()


def _ready(stream: TextIO) -> bool:
    """True when another line can be read without waiting (so the batch can grow)."""
    try:
        readable, _, _ = select.select([stream], [], [], 0)
    except (ValueError, OSError, TypeError):
        return True  # not a real file (e.g. a test's StringIO): reading never blocks
    return bool(readable)


def read_batches(stream: TextIO, batch_size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    while True:
        line = stream.readline()
        if not line:
            break
        batch.append(line.rstrip("\r\n"))
        if len(batch) >= batch_size or not _ready(stream):
            yield batch
            batch = []
    if batch:
        yield batch


def _renamed_options(args: argparse.Namespace) -> str | None:
    """Kafka 4.4's renamed options: the old name still works with a warning on stdout, both together
    are refused (the message Kafka's tool exits with)."""
    if args.command_property and args.producer_property:
        return "Options --command-property and --producer-property cannot be specified together."
    if args.reader_property and args.property:
        return "Options --reader-property and --property cannot be specified together."
    if args.producer_property:
        print("Warning: --producer-property is deprecated and will be removed in a future version. "
              "Use --command-property instead.")
    if args.property:
        print("Warning: --property is deprecated and will be removed in a future version. "
              "Use --reader-property instead.")
    args.producer_property = args.producer_property or args.command_property
    args.property = args.property or args.reader_property
    return None


def run(args: argparse.Namespace) -> int:
    refused = _renamed_options(args)
    if refused is not None:
        print(refused, file=sys.stderr)
        return 1
    try:
        args.producer_props = client_properties(args, parse_key_values(args.producer_property, "producer property"))
    except ClientConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return run_with_client(args, lambda client: produce_lines(client, args, sys.stdin), prog="console-producer",
                           properties=args.producer_props)


def produce_lines(client: KafkaClient, args: argparse.Namespace, stream: TextIO) -> int:
    reader = LineReader(parse_key_values(args.property, "property"))
    producer_props = getattr(args, "producer_props", None)
    if producer_props is None:
        producer_props = parse_key_values(args.producer_property, "producer property")
    acks_text = args.request_required_acks or producer_props.get("acks", "all")
    if acks_text not in ACKS:
        raise ValueError(f"acks must be all, -1, 1 or 0, not {acks_text!r}")
    acks = ACKS[acks_text]
    compression = CompressionType[args.compression_codec.upper()]
    topic = client.topic(args.topic, auto_create=True)
    spread = RoundRobin()
    for lines in read_batches(stream, max(1, args.batch_size)):
        now = int(time.time() * 1000)
        per_partition: dict[int, list[SimpleRecord]] = {}
        for line in lines:
            key, value = reader.parse(line)
            count = len(topic.partitions)
            partition = partition_for_key(key, count) if key is not None else spread.next(count)
            per_partition.setdefault(partition, []).append(SimpleRecord(value, key, (), now))
        send(client, topic, per_partition, acks, compression)
    return 0


def send(client: KafkaClient, topic: TopicInfo, records: dict[int, list[SimpleRecord]], acks: int,
         compression: CompressionType) -> dict[int, int]:
    batches = {p: build_batch(recs, compression=compression) for p, recs in records.items()}
    leaders = {p: topic.partitions[p].leader for p in batches}
    return client.produce(topic.name, batches, acks=acks, leaders=leaders)
