"""`odradek streams-groups`: list, describe and delete streams groups, like kafka-streams-groups.sh.

--list (``GROUP STATE`` with --state); --describe --state ``GROUP COORDINATOR (ID) ASSIGNOR STATE
#MEMBERS`` (``GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH`` under --verbose); --describe --members
``GROUP MEMBER PROCESS CLIENT-ID ASSIGNMENTS`` (epochs and target assignments under --verbose);
--describe [--offsets] ``GROUP TOPIC PARTITION OFFSET-LAG`` of the group's input topics;
--delete deletes empty groups.
"""

from __future__ import annotations

import argparse
import sys

from ..logstore.java_hash import hashmap_order, topic_partition_hash
from ..wire.errors import ErrorCode
from ..wire.protocol import request_class
from .cli_common import add_bootstrap_argument, add_command_config_argument, run_with_client
from .client import LATEST_TIMESTAMP, KafkaClient, check
from .consumer_groups import _table
from .group_client import fetch_committed, find_coordinator, list_groups_of_type, selected_groups

LIST_GROUPS, DELETE_GROUPS = 16, 42
STREAMS_GROUP_DESCRIBE = 89


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list all streams groups")
    action.add_argument("--describe", action="store_true", help="describe a streams group")
    action.add_argument("--delete", action="store_true", help="delete streams groups")
    parser.add_argument("--group", action="append", help="the group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every streams group")
    parser.add_argument("--members", action="store_true", help="with --describe: the members")
    parser.add_argument("--state", action="store_true", help="with --describe (or --list): the group state")
    parser.add_argument("--offsets", action="store_true", help="with --describe: committed offsets (the default)")
    parser.add_argument("--verbose", action="store_true", help="with --describe: more columns")


def run(args: argparse.Namespace) -> int:
    return run_with_client(args, lambda client: _dispatch(client, args), prog="streams-groups")


def list_streams_groups(client: KafkaClient) -> list[tuple[str, str]]:
    """(group id, state) of every streams group."""
    return list_groups_of_type(client, "streams")


def _groups(client: KafkaClient, args: argparse.Namespace) -> list[str]:
    return selected_groups(client, args, "streams")


def _dispatch(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.list:
        groups = list_streams_groups(client)
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
    return delete(client, _groups(client, args))


def _describe_group(client: KafkaClient, group: str) -> tuple[int, object]:
    node = find_coordinator(client, group)
    response = client.send(STREAMS_GROUP_DESCRIBE, request_class(STREAMS_GROUP_DESCRIBE)(
        group_ids=[group], include_authorized_operations=False), node)
    return node, response.groups[0]


def _tasks(assignment: object, prefix: str = "") -> str:
    """Kafka's ASSIGNMENTS cell: ``ACTIVE: 0:[0,2]; 1:[1]; STANDBY: 1:[0,2]; `` (empty kinds left out)."""
    out = ""
    for kind in ("active", "standby", "warmup"):
        ids = getattr(assignment, f"{kind}_tasks")
        if ids:
            out += f"{prefix}{kind.upper()}: " + "".join(
                f"{t.subtopology_id}:[{','.join(str(p) for p in sorted(t.partitions))}]; "
                for t in sorted(ids, key=lambda t: t.subtopology_id))
    return out


def describe(client: KafkaClient, group: str, args: argparse.Namespace) -> None:
    node, desc = _describe_group(client, group)
    if desc.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        print(f"Error: Streams group '{group}' does not exist.", file=sys.stderr)
        return
    check(desc.error_code, desc.error_message)
    print()
    if not desc.members:
        print(f"Error: Streams group '{group}' has no active members.")
    if args.state:
        host, port = client.brokers.get(node, ("?", 0))
        coordinator = f"{host}:{port} ({node})"
        if args.verbose:
            print(_table(["GROUP", "COORDINATOR (ID)", "ASSIGNOR", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH",
                          "#MEMBERS"],
                         [[group, coordinator, desc.assignor_name or "", desc.group_state, str(desc.group_epoch),
                           str(desc.assignment_epoch), str(len(desc.members))]], [15, 25, 15, 25, 15, 25]))
        else:
            print(_table(["GROUP", "COORDINATOR (ID)", "ASSIGNOR", "STATE", "#MEMBERS"],
                         [[group, coordinator, desc.assignor_name or "", desc.group_state, str(len(desc.members))]],
                         [15, 25, 15, 25]))
        return
    if args.members:
        rows = []
        for m in desc.members:
            if args.verbose:
                rows.append([group, str(desc.assignment_epoch), str(m.topology_epoch), m.member_id,
                             "classic" if m.is_classic else "streams", str(m.member_epoch), m.process_id,
                             m.client_id, _tasks(m.assignment) + _tasks(m.target_assignment, "TARGET-")])
            else:
                rows.append([group, m.member_id, m.process_id, m.client_id, _tasks(m.assignment)])
        if args.verbose:
            print(_table(["GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER", "MEMBER-PROTOCOL",
                          "MEMBER-EPOCH", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"], rows,
                         [15, 25, 15, 15, 15, 15, 15, 15]))
        else:
            print(_table(["GROUP", "MEMBER", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"], rows, [15, 15, 15, 15]))
        return
    print(_table(["GROUP", "TOPIC", "PARTITION", "OFFSET-LAG"], _offset_rows(client, node, group, desc), [15, 15, 10]))


def _offset_rows(client: KafkaClient, node: int, group: str, desc: object) -> list[list[str]]:
    """The group's committed offsets of its input topics, with the lag to the log end."""
    # the partitions in the order of the tool's HashMap, repartition topics put in first
    topics: list[str] = []
    if desc.topology is not None:
        for s in desc.topology.subtopologies or []:
            topics += [i.name for i in s.repartition_source_topics]
        for s in desc.topology.subtopologies or []:
            topics += list(s.source_topics)
    committed = fetch_committed(client, group)
    lags: dict[tuple[str, int], str] = {}
    for name in dict.fromkeys(topics):
        info = client.topic(name)
        ends = client.list_offsets(info, sorted(info.partitions), LATEST_TIMESTAMP)
        for p in sorted(info.partitions):
            offset = committed.get((name, p), -1)
            lags[(name, p)] = "-" if offset < 0 else str(max(ends[p] - offset, 0))
    order = hashmap_order(list(lags), lambda tp: topic_partition_hash(*tp))
    return [[group, t, str(p), lags[(t, p)]] for t, p in order]


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
        print(f"Deletion of requested streams groups ({', '.join(repr(g) for g in done)}) was successful.")
    for group, error in failed.items():
        print(f"Error: Deletion of streams group '{group}' failed due to {error}.", file=sys.stderr)
    return 1 if failed else 0
