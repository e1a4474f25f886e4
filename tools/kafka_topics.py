"""`odradek topics`: create, list, describe, alter and delete topics, like kafka-topics.sh.

Output follows kafka-topics.sh: ``Created topic NAME.``, one name per line for --list, and
for --describe a topic line (``Topic: ... PartitionCount: ... Configs: ...``, where Configs are
every value not at its default: topic overrides and broker settings) followed by one tab-indented line per partition.
"""

from __future__ import annotations

import argparse
import sys

from ..wire.errors import ErrorCode
from ..wire.protocol import request_class
from .cli_common import add_bootstrap_argument, add_command_config_argument, parse_key_values, run_with_client
from .client import KafkaClient, KafkaError, TopicInfo, check

CREATE_TOPICS = 19
DELETE_TOPICS = 20
DESCRIBE_CONFIGS = 32
CREATE_PARTITIONS = 37
INCREMENTAL_ALTER_CONFIGS = 44

TOPIC_RESOURCE = 2
DEFAULT_CONFIG = 5  # DescribeConfigs source of a value nobody set (kafka-topics.sh leaves these out)
OP_SET = 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a new topic")
    action.add_argument("--list", action="store_true", help="list all topics")
    action.add_argument("--describe", action="store_true", help="describe topics (all, or --topic)")
    action.add_argument("--alter", action="store_true", help="add partitions (--partitions) or set --config")
    action.add_argument("--delete", action="store_true", help="delete a topic")
    parser.add_argument("--topic", help="the topic to create, alter, describe or delete")
    parser.add_argument("--partitions", type=int, help="partition count for --create, new total for --alter")
    parser.add_argument("--replication-factor", type=int, help="replication factor for --create (default: broker's)")
    parser.add_argument(
        "--config", action="append", metavar="name=value", help="a topic config override (repeatable)"
    )
    parser.add_argument("--if-not-exists", action="store_true", help="with --create: no error if it exists")
    parser.add_argument("--if-exists", action="store_true", help="with --alter/--delete/--describe: no error if missing")
    parser.add_argument("--exclude-internal", action="store_true", help="leave internal topics out of --list/--describe")


def run(args: argparse.Namespace) -> int:
    if (args.create or args.alter or args.delete) and not args.topic:
        print("Error: --topic is required with --create, --alter and --delete", file=sys.stderr)
        return 1
    if args.alter and args.partitions is None and not args.config:
        print("Error: --alter needs --partitions or --config", file=sys.stderr)
        return 1
    return run_with_client(args, lambda client: _dispatch(client, args), prog="odradek-topics")


def _dispatch(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.create:
        return create(client, args)
    if args.list:
        for name in list_topics(client, exclude_internal=args.exclude_internal):
            print(name)
        return 0
    if args.describe:
        return describe(client, args)
    if args.alter:
        return alter(client, args)
    return delete(client, args)


def list_topics(client: KafkaClient, *, exclude_internal: bool = False) -> list[str]:
    topics = client.metadata(None)
    return sorted(n for n, t in topics.items() if not (exclude_internal and t.internal))


def create(client: KafkaClient, args: argparse.Namespace) -> int:
    cls = request_class(CREATE_TOPICS)
    configs = parse_key_values(args.config, "config")
    topic = cls.CreatableTopic(
        name=args.topic,
        num_partitions=args.partitions if args.partitions is not None else -1,
        replication_factor=args.replication_factor if args.replication_factor is not None else -1,
        configs=[cls.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
    )
    controller = _controller(client)
    response = client.send(CREATE_TOPICS, cls(topics=[topic], timeout_ms=30000), controller)
    result = response.topics[0]
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return 0
    check(result.error_code, result.error_message or f"creating topic {args.topic}")
    print(f"Created topic {args.topic}.")
    return 0


def _controller(client: KafkaClient) -> int | None:
    # Admin requests go to the node Metadata names as controller (any broker forwards them).
    client.metadata([])
    return client.controller_id if client.controller_id in client.brokers else None


def _topic_configs(client: KafkaClient, names: list[str]) -> dict[str, dict[str, str]]:
    cls = request_class(DESCRIBE_CONFIGS)
    req = cls(
        resources=[cls.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=n, configuration_keys=None)
                   for n in names],
        include_synonyms=False,
    )
    response = client.send(DESCRIBE_CONFIGS, req)
    out: dict[str, dict[str, str]] = {}
    for result in response.results:
        if result.error_code:
            continue
        out[result.resource_name] = {
            c.name: c.value for c in result.configs if c.config_source != DEFAULT_CONFIG and c.value is not None
        }
    return out


def describe(client: KafkaClient, args: argparse.Namespace) -> int:
    topics = client.metadata([args.topic] if args.topic else None)
    chosen = [t for n, t in sorted(topics.items()) if not (args.exclude_internal and t.internal)]
    missing = [t for t in chosen if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    if missing and not args.if_exists:
        print(f"Error: Topic '{args.topic}' does not exist as expected", file=sys.stderr)
        return 1
    chosen = [t for t in chosen if not t.error_code]
    configs = _topic_configs(client, [t.name for t in chosen]) if chosen else {}
    for topic in chosen:
        print(format_topic(topic, configs.get(topic.name, {})))
    return 0


def format_topic(topic: TopicInfo, configs: dict[str, str]) -> str:
    """kafka-topics.sh --describe text of one topic."""
    replication = len(next(iter(topic.partitions.values())).replicas) if topic.partitions else 0
    config_text = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
    lines = [
        f"Topic: {topic.name}\tTopicId: {topic.topic_id.to_base64()}\tPartitionCount: {len(topic.partitions)}\t"
        f"ReplicationFactor: {replication}\tConfigs: {config_text}"
    ]
    for index in sorted(topic.partitions):
        p = topic.partitions[index]
        lines.append(
            f"\tTopic: {topic.name}\tPartition: {index}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\tElr: \tLastKnownElr: "
        )
    return "\n".join(lines)


def alter(client: KafkaClient, args: argparse.Namespace) -> int:
    topics = client.metadata([args.topic])
    info = topics.get(args.topic)
    if info is None or info.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        if args.if_exists:
            return 0
        print(f"Error: Topic '{args.topic}' does not exist as expected", file=sys.stderr)
        return 1
    controller = _controller(client)
    if args.partitions is not None:
        cls = request_class(CREATE_PARTITIONS)
        req = cls(topics=[cls.CreatePartitionsTopic(name=args.topic, count=args.partitions, assignments=None)],
                  timeout_ms=30000, validate_only=False)
        response = client.send(CREATE_PARTITIONS, req, controller)
        for r in response.results:
            check(r.error_code, r.error_message or f"adding partitions to {args.topic}")
    configs = parse_key_values(args.config, "config")
    if configs:
        cls = request_class(INCREMENTAL_ALTER_CONFIGS)
        req = cls(resources=[cls.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE,
            resource_name=args.topic,
            configs=[cls.AlterableConfig(name=k, config_operation=OP_SET, value=v) for k, v in configs.items()],
        )], validate_only=False)
        response = client.send(INCREMENTAL_ALTER_CONFIGS, req, controller)
        for r in response.responses:
            check(r.error_code, r.error_message or f"altering configs of {args.topic}")
    return 0


def delete(client: KafkaClient, args: argparse.Namespace) -> int:
    cls = request_class(DELETE_TOPICS)
    controller = _controller(client)
    response = client.send(DELETE_TOPICS, cls(topic_names=[args.topic], timeout_ms=30000), controller)
    result = response.responses[0]
    if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        if args.if_exists:
            return 0
        print(f"Error: Topic '{args.topic}' does not exist as expected", file=sys.stderr)
        return 1
    if result.error_code:
        raise KafkaError(result.error_code, getattr(result, "error_message", None) or f"deleting {args.topic}")
    return 0
