"""What the broker-talking subcommands share: --bootstrap-server, --property parsing, error exits."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .client import KafkaClient, KafkaError


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="the Kafka (or Odradek) server(s) to connect to, as in Kafka's tools",
    )
    parser.add_argument(
        "--request-timeout-ms",
        type=int,
        default=30000,
        metavar="MS",
        help="socket timeout of each request (default 30000)",
    )


def parse_key_values(items: Sequence[str] | None, what: str) -> dict[str, str]:
    """`["k=v", ...]` (repeatable --config / --property options) -> dict; a missing '=' is an error."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"Invalid {what} {item!r}: expected key=value")
        out[key.strip()] = value
    return out


def unescape(text: str) -> str:
    r"""Turn `\t`, `\n` in a --property value into the characters (the shell keeps them literal)."""
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


def run_with_client(args: argparse.Namespace, body: Callable[[KafkaClient], int], *, prog: str) -> int:
    """Open a client on --bootstrap-server, run `body`, turn Kafka errors into an exit code 1."""
    try:
        with KafkaClient(
            args.bootstrap_server, client_id=prog, timeout=args.request_timeout_ms / 1000
        ) as client:
            return body(client)
    except KafkaError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except (ConnectionError, OSError) as exc:
        print(f"Error: cannot reach {args.bootstrap_server}: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130  # the shell's code for SIGINT; no traceback for a Ctrl-C
