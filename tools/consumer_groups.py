"""`odradek consumer-groups`: list, describe (with lag) and reset consumer groups, like kafka-consumer-groups.sh.

--describe prints Kafka's table ``GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
CONSUMER-ID HOST CLIENT-ID`` (``-`` where there is no value), --members and --state their own
tables; --reset-offsets prints ``GROUP TOPIC PARTITION NEW-OFFSET`` and commits only with
--execute (the default is a dry run, as in Kafka), and only while the group has no members.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .cli_common import add_bootstrap_argument, add_command_config_argument, run_with_client
from .client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, KafkaClient, KafkaError
from .group_client import GroupDescription, commit_offsets, describe_group, fetch_committed, list_groups

TopicPartition = tuple[str, int]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list all consumer groups")
    action.add_argument("--describe", action="store_true", help="describe a group: offsets and lag per partition")
    action.add_argument("--reset-offsets", action="store_true", help="reset a group's committed offsets")
    parser.add_argument("--group", action="append", help="the group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group (with --describe or --reset-offsets)")
    parser.add_argument("--members", action="store_true", help="with --describe: list the members")
    parser.add_argument("--state", action="store_true", help="with --describe (or --list): show the group state")
    parser.add_argument("--topic", action="append", help="with --reset-offsets: topic[:p1,p2] (repeatable)")
    parser.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every topic the group has offsets for")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="reset to the earliest offset")
    target.add_argument("--to-latest", action="store_true", help="reset to the latest offset")
    target.add_argument("--to-offset", type=int, help="reset to this offset")
    target.add_argument("--shift-by", type=int, help="move the committed offset by N (may be negative)")
    target.add_argument("--to-datetime", help="reset to the first offset at or after a time in ms since the epoch")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")


def run(args: argparse.Namespace) -> int:
    return run_with_client(args, lambda client: _dispatch(client, args), prog="consumer-groups")


def _groups(client: KafkaClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in list_groups(client)]
    if not args.group:
        raise ValueError("--group or --all-groups is required")
    return list(args.group)


def _dispatch(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.list:
        groups = list_groups(client)
        if args.state:
            print(_table(["GROUP", "STATE"], [[g.group_id, g.state] for g in groups], [15]))
        else:
            for g in groups:
                print(g.group_id)
        return 0
    if args.describe:
        for group in _groups(client, args):
            describe(client, group, args)
        return 0
    return reset(client, args)


def _table(header: Sequence[str], rows: list[list[str]], min_widths: Sequence[int]) -> str:
    """Kafka's layout: each column left-aligned to max(its minimum, widest cell) plus one space;
    the last column unpadded."""
    widths = [
        max([min_widths[i], *(len(str(r[i])) for r in rows)]) for i in range(len(header) - 1)
    ]
    lines = []
    for row in [list(header), *rows]:
        cells = [str(c).ljust(widths[i]) for i, c in enumerate(row[:-1])] + [str(row[-1])]
        lines.append(" ".join(cells))
    return "\n".join(lines)


def describe(client: KafkaClient, group: str, args: argparse.Namespace) -> None:
    desc = describe_group(client, group)
    if desc.state == "Dead":
        print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
        return
    if not desc.members and not args.state:
        # Kafka prints this note on standard error, before the table.
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    print()
    if args.state:
        host, port = client.brokers.get(desc.coordinator, ("?", 0))
        print(_table(
            ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [[group, f"{host}:{port}  ({desc.coordinator})", desc.protocol or "-", desc.state,
              str(len(desc.members))]],
            [15, 25, 20, 20],
        ))
        return
    if args.members:
        print(_table(
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
            [[group, m.member_id, m.client_host, m.client_id, str(len(m.assignment))] for m in desc.members],
            [15, 15, 15, 15],
        ))
        return
    rows = [
        [group, t, str(p), _dash(current), _dash(end), _dash(lag), member_id, host, client_id]
        for (t, p), (current, end, lag, member_id, host, client_id) in sorted(offset_rows(client, desc).items())
    ]
    print(_table(
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
        rows,
        [15, 15, 10, 15, 15, 15, 15, 15],
    ))


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def offset_rows(client: KafkaClient, desc: GroupDescription) -> dict[TopicPartition, tuple]:
    """(current, log end, lag, member, host, client) per partition the group owns or has offsets for."""
    committed = fetch_committed(client, desc.group_id)
    owners = {tp: m for m in desc.members for tp in m.assignment}
    partitions = set(committed) | set(owners)
    ends = log_end_offsets(client, partitions)
    out = {}
    for tp in partitions:
        current = committed.get(tp)
        end = ends.get(tp)
        lag = end - current if current is not None and end is not None else None
        m = owners.get(tp)
        out[tp] = (current, end, lag, m.member_id if m else "-", m.client_host if m else "-", m.client_id if m else "-")
    return out


def log_end_offsets(client: KafkaClient, partitions: set[TopicPartition], timestamp: int = LATEST_TIMESTAMP) -> dict[TopicPartition, int]:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    if not by_topic:
        return {}
    out = {}
    for name, info in client.metadata(sorted(by_topic)).items():
        if info.error_code:
            continue
        parts = [p for p in by_topic[name] if p in info.partitions]
        for p, offset in client.list_offsets(info, parts, timestamp).items():
            out[(name, p)] = offset
    return out


def _reset_partitions(client: KafkaClient, group: str, args: argparse.Namespace) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(fetch_committed(client, group))
    if not args.topic:
        raise ValueError("--reset-offsets needs --topic or --all-topics")
    out = []
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        info = client.topic(name)
        chosen = [int(p) for p in parts.split(",")] if parts else sorted(info.partitions)
        out.extend((name, p) for p in chosen)
    return out


def reset(client: KafkaClient, args: argparse.Namespace) -> int:
    if not any([args.to_earliest, args.to_latest, args.to_offset is not None, args.shift_by is not None,
                args.to_datetime]):
        raise ValueError("--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime")
    for group in _groups(client, args):
        desc = describe_group(client, group)
        if args.execute and desc.state not in ("Empty", "Dead"):
            raise KafkaError(
                25, f"Assignments can only be reset if the group '{group}' is inactive, but the current state is {desc.state}."
            )
        partitions = set(_reset_partitions(client, group, args))
        earliest = log_end_offsets(client, partitions, EARLIEST_TIMESTAMP)
        latest = log_end_offsets(client, partitions, LATEST_TIMESTAMP)
        committed = fetch_committed(client, group) if args.shift_by is not None else {}
        at_time = log_end_offsets(client, partitions, int(args.to_datetime)) if args.to_datetime else {}
        new: dict[TopicPartition, int] = {}
        for tp in sorted(partitions):
            if args.to_earliest:
                target = earliest[tp]
            elif args.to_latest:
                target = latest[tp]
            elif args.to_offset is not None:
                target = args.to_offset
            elif args.shift_by is not None:
                target = committed.get(tp, latest[tp]) + args.shift_by
            else:
                target = at_time[tp] if at_time.get(tp, -1) >= 0 else latest[tp]
            # Kafka clamps a target outside the log to its start or end.
            new[tp] = min(max(target, earliest[tp]), latest[tp])
        if args.execute:
            commit_offsets(client, group, new)
        print()
        # Kafka 4.4's GroupOffsetsResetter: group and topic columns as wide as their longest value (15 at least)
        group_width = max(15, len(group))
        topic_width = max([15, *(len(t) for t, _p in new)])
        for row in [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), *((group, t, str(p), str(o)) for (t, p), o in new.items())]:
            print(f"{row[0]:<{group_width}} {row[1]:<{topic_width}} {row[2]:<10} {row[3]}")
    return 0
