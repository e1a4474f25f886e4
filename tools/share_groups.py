"""`odradek share-groups`: list, describe, reset and delete share groups, like kafka-share-groups.sh.

--describe prints Kafka's tables: offsets ``GROUP TOPIC PARTITION START-OFFSET LAG`` (with
``LEADER-EPOCH`` under --verbose), --members ``GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS
ASSIGNMENT`` (``MEMBER-EPOCH`` under --verbose) and --state ``GROUP COORDINATOR (ID) STATE
#MEMBERS``. --reset-offsets sets a share group's start offsets (only while it has no members;
a dry run unless --execute); --delete deletes groups, --delete-offsets a group's state of topics.
"""

from __future__ import annotations

import argparse
import sys

from ..wire.errors import ErrorCode
from ..wire.protocol import request_class
from .cli_common import add_bootstrap_argument, add_command_config_argument, run_with_client
from .client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, KafkaClient, check
from .consumer_groups import _table
from .group_client import find_coordinator, list_groups_of_type, selected_groups

LIST_GROUPS, DELETE_GROUPS = 16, 42
SHARE_GROUP_DESCRIBE = 77
DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 90, 91, 92


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list all share groups")
    action.add_argument("--describe", action="store_true", help="describe a share group (start offsets and lag)")
    action.add_argument("--reset-offsets", action="store_true", help="reset a share group's start offsets")
    action.add_argument("--delete", action="store_true", help="delete share groups")
    action.add_argument("--delete-offsets", action="store_true", help="delete a share group's state of topics")
    parser.add_argument("--group", action="append", help="the group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every share group")
    parser.add_argument("--members", action="store_true", help="with --describe: the members")
    parser.add_argument("--state", action="store_true", help="with --describe (or --list): the group state")
    parser.add_argument("--offsets", action="store_true", help="with --describe: start offsets (the default)")
    parser.add_argument("--verbose", action="store_true", help="with --describe: more columns")
    parser.add_argument("--topic", action="append", help="topic[:p1,p2] (repeatable)")
    parser.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every topic of the group")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true", help="reset to the earliest offset")
    target.add_argument("--to-latest", action="store_true", help="reset to the latest offset")
    target.add_argument("--to-offset", type=int, help="reset to this offset")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="apply the new start offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show the new start offsets (the default)")


def run(args: argparse.Namespace) -> int:
    return run_with_client(args, lambda client: _dispatch(client, args), prog="share-groups")


def list_share_groups(client: KafkaClient) -> list[tuple[str, str]]:
    """(group id, state) of every share group."""
    return list_groups_of_type(client, "share")


def _groups(client: KafkaClient, args: argparse.Namespace) -> list[str]:
    return selected_groups(client, args, "share")


def _dispatch(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.list:
        groups = list_share_groups(client)
        if args.state:
            print(_table(["GROUP", "STATE"], [[g, s] for g, s in groups], [15]))
        else:
            for g, _ in groups:
                print(g)
        return 0
    if args.describe:
        for group in _groups(client, args):
            describe(client, group, args)
        return 0
    if args.delete:
        return delete(client, _groups(client, args))
    if args.delete_offsets:
        return delete_offsets(client, _groups(client, args)[0], [t.split(":")[0] for t in args.topic or []])
    return reset(client, args)


def _describe_group(client: KafkaClient, group: str) -> tuple[int, object]:
    node = find_coordinator(client, group)
    response = client.send(SHARE_GROUP_DESCRIBE, request_class(SHARE_GROUP_DESCRIBE)(
        group_ids=[group], include_authorized_operations=False), node)
    return node, response.groups[0]


def _offsets(client: KafkaClient, node: int, group: str) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, leader epoch, start offset, lag) of the group's share-partitions."""
    cls = request_class(DESCRIBE_SHARE_GROUP_OFFSETS)
    response = client.send(DESCRIBE_SHARE_GROUP_OFFSETS, cls(groups=[cls.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=None)]), node)
    g = response.groups[0]
    check(g.error_code, g.error_message)
    return sorted((t.topic_name, p.partition_index, p.leader_epoch, p.start_offset, p.lag)
                  for t in g.topics for p in t.partitions)


def describe(client: KafkaClient, group: str, args: argparse.Namespace) -> None:
    node, desc = _describe_group(client, group)
    if desc.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        print(f"Error: Share group '{group}' does not exist.", file=sys.stderr)
        return
    check(desc.error_code, desc.error_message)
    print()
    if args.state:
        host, port = client.brokers.get(node, ("?", 0))
        print(_table(["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"],
                     [[group, f"{host}:{port}  ({node})", desc.group_state, str(len(desc.members))]], [15, 25, 15]))
        return
    if args.members:
        header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        rows = []
        for m in desc.members:
            tps = m.assignment.topic_partitions
            assignment = ";".join(f"{t.topic_name}:{','.join(str(p) for p in sorted(t.partitions))}"
                                  for t in sorted(tps, key=lambda t: t.topic_name))
            row = [group, m.member_id, m.client_host, m.client_id, str(sum(len(t.partitions) for t in tps))]
            if args.verbose:
                row.append(str(m.member_epoch))
            rows.append([*row, assignment or "-"])
        print(_table([*header, *(["MEMBER-EPOCH"] if args.verbose else []), "ASSIGNMENT"], rows,
                     [15, 22, 15, 15, 12, *([13] if args.verbose else [])]))
        return
    rows = []
    for topic, partition, epoch, start, lag in _offsets(client, node, group):
        row = [group, topic, str(partition)]
        if args.verbose:
            row.append("-" if epoch < 0 else str(epoch))
        rows.append([*row, "-" if start < 0 else str(start), "-" if lag < 0 else str(lag)])
    header = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if args.verbose else []), "START-OFFSET", "LAG"]
    print(_table(header, rows, [15, 15, 10, *([13] if args.verbose else []), 13]))


def reset(client: KafkaClient, args: argparse.Namespace) -> int:
    """--reset-offsets: the new start offsets, applied with --execute while the group is empty."""
    group = _groups(client, args)[0]
    node, desc = _describe_group(client, group)
    if desc.error_code == 0 and desc.members:
        print(f"Error: Share group '{group}' is not empty.", file=sys.stderr)
        return 1
    wanted: dict[str, list[int] | None] = {}
    if args.all_topics:
        for topic, partition, *_ in _offsets(client, node, group):
            wanted.setdefault(topic, []).append(partition)  # type: ignore[union-attr]
    for spec in args.topic or []:
        name, _, parts = spec.partition(":")
        wanted[name] = [int(p) for p in parts.split(",")] if parts else None
    new: dict[tuple[str, int], int] = {}
    for name, parts in wanted.items():
        info = client.topic(name)
        indexes = sorted(info.partitions) if parts is None else parts
        if args.to_offset is not None:
            new.update({(name, p): args.to_offset for p in indexes})
        else:
            at = EARLIEST_TIMESTAMP if args.to_earliest else LATEST_TIMESTAMP
            new.update({(name, p): o for p, o in client.list_offsets(info, indexes, at).items()})
    print()
    print(_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                 [[group, t, str(p), str(o)] for (t, p), o in sorted(new.items())], [15, 15, 10]))
    if not args.execute:
        return 0
    cls = request_class(ALTER_SHARE_GROUP_OFFSETS)
    topics: dict[str, list] = {}
    for (t, p), o in sorted(new.items()):
        topics.setdefault(t, []).append(cls.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o))
    response = client.send(ALTER_SHARE_GROUP_OFFSETS, cls(group_id=group, topics=[
        cls.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in topics.items()]), node)
    check(response.error_code, response.error_message)
    for t in response.responses:
        for p in t.partitions:
            check(p.error_code, p.error_message)
    return 0


def delete(client: KafkaClient, groups: list[str]) -> int:
    failed = {}
    for group in groups:
        node = find_coordinator(client, group)
        response = client.send(DELETE_GROUPS, request_class(DELETE_GROUPS)(groups_names=[group]), node)
        for r in response.results:
            if r.error_code:
                failed[r.group_id] = ErrorCode(r.error_code).name
    done = [g for g in groups if g not in failed]
    if done:
        print(f"Deletion of requested share groups ({', '.join(repr(g) for g in done)}) was successful.")
    for group, error in failed.items():
        print(f"Error: Deletion of share group '{group}' failed due to {error}.", file=sys.stderr)
    return 1 if failed else 0


def delete_offsets(client: KafkaClient, group: str, topics: list[str]) -> int:
    node = find_coordinator(client, group)
    cls = request_class(DELETE_SHARE_GROUP_OFFSETS)
    response = client.send(DELETE_SHARE_GROUP_OFFSETS, cls(group_id=group, topics=[
        cls.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]), node)
    check(response.error_code, response.error_message)
    print()
    print(_table(["TOPIC", "STATUS"], [[t.topic_name, "Error" if t.error_code else "Successful"]
                                       for t in response.responses], [15]))
    return 0
