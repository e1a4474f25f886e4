"""`odradek console-consumer`: print a topic's records, like kafka-console-consumer.sh.

Without --group the consumer assigns itself every partition (or --partition) and starts at
the end, or the beginning with --from-beginning, or at --offset. With --group it joins the
consumer group (classic protocol, range assignment), starts at the group's committed offsets
and commits what it printed. The output format is Kafka's DefaultMessageFormatter: optional
``CreateTime:<ms>``, ``Partition:<n>``, ``Offset:<n>``, headers and key, each followed by
key.separator, then the value and line.separator; ``null`` for a missing key or value.
At exit it reports ``Processed a total of N messages`` on standard error.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from .cli_common import (
    add_bootstrap_argument,
    add_command_config_argument,
    client_properties,
    parse_key_values,
    run_with_client,
    unescape,
)
from .client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, FetchedRecord, KafkaClient, TopicInfo
from .client_security import ClientConfigError
from .group_client import GroupMember, fetch_committed

AUTO_COMMIT_INTERVAL_S = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    parser.add_argument("--topic", required=True, help="the topic to consume")
    parser.add_argument("--group", help="consumer group id: join the group, resume from and commit its offsets")
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset when there is no committed offset (default: latest)",
    )
    parser.add_argument("--partition", type=int, help="consume only this partition (no group)")
    parser.add_argument("--offset", default=None, help="with --partition: earliest, latest or an offset")
    parser.add_argument("--max-messages", type=int, help="exit after this many messages")
    parser.add_argument("--timeout-ms", type=int, help="exit when no message arrived for this long")
    parser.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"], default="read_uncommitted")
    parser.add_argument(
        "--property",
        action="append",
        metavar="name=value",
        help="formatter properties: print.key, print.value, print.timestamp, print.partition, print.offset, "
        "print.headers (true/false); key.separator, line.separator, headers.separator, null.literal",
    )
    parser.add_argument("--formatter-property", action="append", metavar="name=value",
                        help="the formatter properties (Kafka 4.4's name of --property)")
    parser.add_argument(
        "--consumer-property",
        action="append",
        metavar="name=value",
        help="consumer configs: group.id, client.id and the security keys of --consumer.config; these win over "
        "the file",
    )
    parser.add_argument("--command-property", action="append", metavar="name=value",
                        help="consumer configs (Kafka 4.4's name of --consumer-property)")
    add_command_config_argument(parser, "--consumer.config", "consumer")


class MessageFormatter:
    """Kafka's DefaultMessageFormatter: which fields to print and how they are separated."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool) -> bool:
            return props.get(name, str(default)).lower() == "true"

        self.print_timestamp = flag("print.timestamp", False)
        self.print_partition = flag("print.partition", False)
        self.print_offset = flag("print.offset", False)
        self.print_headers = flag("print.headers", False)
        self.print_key = flag("print.key", False)
        self.print_value = flag("print.value", True)
        self.key_separator = unescape(props.get("key.separator", "\t"))
        self.line_separator = unescape(props.get("line.separator", "\n"))
        self.headers_separator = unescape(props.get("headers.separator", ","))
        self.null_literal = props.get("null.literal", "null")

    def _text(self, data: bytes | None) -> str:
        return self.null_literal if data is None else data.decode("utf-8", "replace")

    def format(self, record: FetchedRecord) -> str:
        fields = []
        if self.print_timestamp:
            fields.append(f"{record.timestamp_type}:{record.timestamp}")
        if self.print_partition:
            fields.append(f"Partition:{record.partition}")
        if self.print_offset:
            fields.append(f"Offset:{record.offset}")
        if self.print_headers:
            headers = [f"{k}:{self._text(v)}" for k, v in record.headers]
            fields.append(self.headers_separator.join(headers) if headers else "NO_HEADERS")
        if self.print_key:
            fields.append(self._text(record.key))
        text = self.key_separator.join(fields)
        if self.print_value:
            text = text + self.key_separator + self._text(record.value) if fields else self._text(record.value)
        return text + self.line_separator


def _renamed_options(args: argparse.Namespace) -> str | None:
    """Kafka 4.4's renamed options: the old name still works with a notice on stdout, both together
    are refused (the message Kafka's tool exits with)."""
    if args.consumer_property and args.command_property:
        return "Options --consumer-property and --command-property cannot be specified together."
    if args.property and args.formatter_property:
        return "Options --property and --formatter-property cannot be specified together."
    if args.consumer_property:
        print("Option --consumer-property is deprecated and will be removed in a future version. "
              "Use --command-property instead.")
    if args.property:
        print("Option --property is deprecated and will be removed in a future version. "
              "Use --formatter-property instead.")
    args.consumer_property = args.consumer_property or args.command_property
    args.property = args.property or args.formatter_property
    return None


def run(args: argparse.Namespace) -> int:
    refused = _renamed_options(args)
    if refused is not None:
        print(refused, file=sys.stderr)
        return 1
    try:
        consumer_props = client_properties(args, parse_key_values(args.consumer_property, "consumer property"))
    except ClientConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    if args.group is None and "group.id" in consumer_props:
        args.group = consumer_props["group.id"]
    if args.group and args.partition is not None:
        print("Error: --group cannot be used with --partition", file=sys.stderr)
        return 1
    if args.offset is not None and args.partition is None:
        print("Error: --offset needs --partition", file=sys.stderr)
        return 1
    return run_with_client(args, lambda client: consume(client, args, sys.stdout), prog="console-consumer",
                           properties=consumer_props)


def _start_offset(client: KafkaClient, topic: TopicInfo, partitions: list[int], args: argparse.Namespace) -> dict[int, int]:
    if args.offset not in (None, "earliest", "latest"):
        return {p: int(args.offset) for p in partitions}
    earliest = args.offset == "earliest" or (args.offset is None and args.from_beginning)
    return client.list_offsets(topic, partitions, EARLIEST_TIMESTAMP if earliest else LATEST_TIMESTAMP)


def consume(client: KafkaClient, args: argparse.Namespace, out: TextIO) -> int:
    formatter = MessageFormatter(parse_key_values(args.property, "property"))
    topic = client.topic(args.topic)
    member: GroupMember | None = None
    if args.group:
        member = GroupMember(client, args.group, [args.topic])
        positions = _group_positions(client, topic, member, args)
    else:
        parts = [args.partition] if args.partition is not None else sorted(topic.partitions)
        positions = _start_offset(client, topic, parts, args)
    count = 0
    last_message = time.monotonic()
    last_commit = time.monotonic()
    # Nothing counts as committed yet: the first commit writes every assigned position, so a
    # partition without records shows offset 0 in kafka-consumer-groups (Kafka's auto-commit).
    committed: dict[int, int] = {}
    try:
        while args.max_messages is None or count < args.max_messages:
            if args.timeout_ms is not None and (time.monotonic() - last_message) * 1000 >= args.timeout_ms:
                break
            if member is not None:
                if member.heartbeat_due() and not member.heartbeat():
                    _commit(member, topic, positions, committed)
                    positions = _group_positions(client, topic, member, args)
                    committed = {}
                if time.monotonic() - last_commit > AUTO_COMMIT_INTERVAL_S:
                    _commit(member, topic, positions, committed)
                    last_commit = time.monotonic()
            if not positions:
                time.sleep(0.1)
                continue
            wait_ms = 500 if args.timeout_ms is None else max(1, min(500, args.timeout_ms))
            for record in client.fetch(topic, positions, max_wait_ms=wait_ms,
                                       read_committed=args.isolation_level == "read_committed"):
                # Counted before the write: Ctrl-C is handled right after a write returns, so a
                # record that reached the output is always counted (and committed: the fetch
                # already moved the position past it).
                count += 1
                out.write(formatter.format(record))
                last_message = time.monotonic()
                if args.max_messages is not None and count >= args.max_messages:
                    # Resume after the last printed record, not after the whole fetched batch.
                    positions[record.partition] = record.offset + 1
                    break
            out.flush()
    except KeyboardInterrupt:
        # Ctrl-C may land mid-response: drop the connections so the final commit and
        # LeaveGroup start on fresh ones instead of reading a half-read answer.
        client.close()
    finally:
        if member is not None:
            _commit(member, topic, positions, committed)
            member.leave()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _group_positions(client: KafkaClient, topic: TopicInfo, member: GroupMember, args: argparse.Namespace) -> dict[int, int]:
    assigned = [p for t, p in member.join() if t == topic.name]
    if not assigned:
        return {}
    committed = fetch_committed(client, member.group, [(topic.name, p) for p in assigned])
    positions = {p: committed[(topic.name, p)] for p in assigned if (topic.name, p) in committed}
    missing = [p for p in assigned if p not in positions]
    if missing:
        positions.update(_start_offset(client, topic, missing, args))
    return positions


def _commit(member: GroupMember, topic: TopicInfo, positions: dict[int, int], committed: dict[int, int]) -> None:
    changed = {(topic.name, p): o for p, o in positions.items() if committed.get(p) != o}
    if changed:
        member.commit(changed)
        committed.update(positions)
