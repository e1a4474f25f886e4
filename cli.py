"""The `odradek` command: `serve` (like kafka-server-start.sh) and the tools.

Subcommands are shaped like Kafka's scripts so Kafka users recognise them.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def _serve(args: argparse.Namespace) -> int:
    import trio

    from .broker import Broker
    from .config import BrokerConfig, ConfigError
    from .handlers.registry import load_handlers
    from .logging_setup import apply_logging
    from .server import run_broker

    try:
        config = BrokerConfig.load(args.properties, args.override or [])
    except (ConfigError, OSError) as exc:
        print(f"odradek serve: {exc}", file=sys.stderr)
        return 1
    apply_logging(config)  # odradek.log.levels / odradek.log.format
    from .kraft.log import MetadataLogError
    from .kraft.store import UnservableMetadataError
    from .storage import StorageError

    load_handlers()
    broker = Broker(config)
    console = _start_console(args, config)
    # Worker threads (fsync, log creation, codec compilation) hold the GIL for up to the switch
    # interval while the event loop waits for it: 1 ms instead of CPython's 5 ms keeps that wait
    # under the loop's stall budget. Only the broker process is changed, not an embedding one.
    sys.setswitchinterval(0.001)
    try:
        trio.run(run_broker, broker)
    except KeyboardInterrupt:
        pass
    except (StorageError, UnservableMetadataError, MetadataLogError) as exc:
        # the log dirs cannot be served: say why in one line, like Kafka's fatal start-up errors
        print(f"odradek serve: {exc}", file=sys.stderr)
        return 1
    finally:
        if console is not None:
            from .console.main import stop_child

            stop_child(console)
    return 0


def _start_console(args: argparse.Namespace, config: object) -> object | None:
    """`serve --console`: the web console as a child process (never in the broker's event loop)."""
    if args.console is None:
        return None
    from .console.main import console_bootstrap, start_child

    bootstrap = console_bootstrap(config)
    if bootstrap is None:
        print("odradek serve: --console needs a PLAINTEXT listener; run `odradek console --command-config ...` "
              "for a secured one", file=sys.stderr)
        return None
    return start_child(bootstrap, args.console)


def _console(args: argparse.Namespace) -> int:
    from .console.main import run

    return run(args)


def _add_console(sub: argparse._SubParsersAction, selected: str | None) -> None:
    help_text = "a web console for topics, messages, groups and lag (any Kafka cluster; docs/console.md)"
    if selected != "console":
        sub.add_parser("console", help=help_text, add_help=False)
        return
    from .console.main import add_arguments

    console = sub.add_parser("console", help=help_text, description=help_text)
    add_arguments(console)
    console.set_defaults(func=_console)


def _dump_log(args: argparse.Namespace, rest: list[str]) -> int:
    from .tools.dump_log import main as dump_log_main

    return dump_log_main(rest)


def _storage(args: argparse.Namespace) -> int:
    from .kraft.storage_tool import main as storage_main

    return storage_main(args)


# Client tools shaped like Kafka's scripts: (subcommand, module in odradek.tools, help).
CLIENT_TOOLS = (
    ("topics", "kafka_topics", "create, list, describe, alter or delete topics (like kafka-topics.sh)"),
    ("console-producer", "console_producer", "send lines of standard input as records (like kafka-console-producer.sh)"),
    ("console-consumer", "console_consumer", "print records of a topic (like kafka-console-consumer.sh)"),
    ("consumer-groups", "consumer_groups", "list, describe and reset consumer groups (like kafka-consumer-groups.sh)"),
    ("share-groups", "share_groups", "list, describe, reset and delete share groups (like kafka-share-groups.sh)"),
    ("streams-groups", "streams_groups", "list, describe and delete streams groups (like kafka-streams-groups.sh)"),
    ("get-offsets", "get_offsets", "show partition offsets at a time (like kafka-get-offsets.sh)"),
    ("broker-api-versions", "broker_api_versions", "list the APIs a broker serves (like kafka-broker-api-versions.sh)"),
    ("configs", "kafka_configs", "describe or alter topic and broker configs and SCRAM users (like kafka-configs.sh)"),
)


def _add_client_tools(sub: argparse._SubParsersAction, selected: str | None) -> None:
    """One subcommand per client tool; each module has `add_arguments(parser)` and `run(args)`.

    Only the selected tool's module is imported: `odradek serve` must not pay for the client
    tools' imports at start-up.
    """
    import importlib

    for command, module_name, help_text in CLIENT_TOOLS:
        if command != selected:
            sub.add_parser(command, help=help_text, add_help=False)
            continue
        module = importlib.import_module(f"{__package__}.tools.{module_name}")
        tool = sub.add_parser(
            command,
            help=help_text,
            description=(module.__doc__ or help_text).strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(tool)
        tool.set_defaults(func=module.run)


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The `odradek` parser; `selected` is the client tool about to run (its module is imported)."""
    parser = argparse.ArgumentParser(
        prog="odradek",
        description="Odradek: a Kafka broker in Python that stock Kafka clients talk to unmodified.",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        help="root log level (DEBUG, INFO, WARN, ERROR), like log4j.rootLogger",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser(
        "serve",
        help="start the broker (like kafka-server-start.sh)",
        description="Start the broker. With no arguments: PLAINTEXT on 127.0.0.1:9092, data in ./odradek-data.",
    )
    serve.add_argument("properties", nargs="?", help="a Kafka server.properties file")
    serve.add_argument(
        "--override",
        action="append",
        metavar="key=value",
        help="override a config from the properties file (repeatable)",
    )
    serve.add_argument(
        "--console",
        nargs="?",
        type=int,
        const=8080,
        default=None,
        metavar="PORT",
        help="also start the web console on 127.0.0.1:PORT (default 8080), stopped with the broker",
    )
    serve.set_defaults(func=_serve)
    storage = sub.add_parser(
        "storage",
        help="format or inspect log dirs (like kafka-storage.sh format / info / random-uuid)",
        description="Format log dirs (meta.properties, bootstrap.checkpoint) or show what they hold.",
    )
    from .kraft.storage_tool import add_arguments as add_storage_arguments

    add_storage_arguments(storage)
    storage.set_defaults(func=_storage)
    dump = sub.add_parser(
        "dump-log",
        help="print Kafka log segments, indexes and snapshots (like kafka-dump-log.sh)",
        add_help=False,
    )
    dump.set_defaults(func=None, passthrough=_dump_log)
    _add_client_tools(sub, selected)
    _add_console(sub, selected)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    tool_names = {command for command, _, _ in CLIENT_TOOLS} | {"console"}
    parser = build_parser(next((a for a in argv if a in tool_names), None))
    args, rest = parser.parse_known_args(argv)
    level = getattr(logging, str(args.log_level).upper().replace("WARN", "WARNING"), logging.INFO)
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    if getattr(args, "passthrough", None) is not None:
        return args.passthrough(args, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args.func(args)
