"""What the broker-talking subcommands share: --bootstrap-server, --command-config, --property
parsing, error exits."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .client import KafkaClient, KafkaError
from .client_security import AuthenticationError, ClientConfigError, ClientSecurity, load_properties


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


def add_command_config_argument(parser: argparse.ArgumentParser, flag: str = "--command-config",
                                what: str = "admin client") -> None:
    """Kafka's client properties file option (--command-config, --producer.config, --consumer.config)."""
    parser.add_argument(
        flag,
        dest="client_config",
        metavar="FILE",
        help=f"a Kafka {what} properties file: security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), "
        "ssl.truststore.*, ssl.keystore.*, ssl.endpoint.identification.algorithm, sasl.mechanism (PLAIN, "
        "SCRAM-SHA-256, SCRAM-SHA-512), sasl.jaas.config",
    )


def client_properties(args: argparse.Namespace, overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The properties file named by the tool's config option, then `overrides` (--producer-property
    and the like win over the file, as in Kafka's tools)."""
    path = getattr(args, "client_config", None)
    props = load_properties(path) if path else {}
    props.update(overrides or {})
    return props


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


def run_with_client(args: argparse.Namespace, body: Callable[[KafkaClient], int], *, prog: str,
                    properties: dict[str, str] | None = None) -> int:
    """Open a client on --bootstrap-server, run `body`, turn Kafka errors into an exit code 1.

    `properties` are Kafka client properties (default: the tool's --command-config file); their
    security.* / ssl.* / sasl.* keys secure the connections.
    """
    try:
        if properties is None:
            properties = client_properties(args)
        security = ClientSecurity.from_properties(properties)
    except ClientConfigError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    try:
        with KafkaClient(
            args.bootstrap_server, client_id=properties.get("client.id") or prog,
            timeout=args.request_timeout_ms / 1000, security=security,
        ) as client:
            return body(client)
    except AuthenticationError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except (ConnectionError, OSError) as exc:
        hint = ""
        if security.protocol == "PLAINTEXT" and "closed the connection" in str(exc):
            hint = (" (an SSL or SASL listener? give its client properties with --command-config, "
                    "--producer.config or --consumer.config)")
        print(f"Error: cannot reach {args.bootstrap_server}: {exc}{hint}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130  # the shell's code for SIGINT; no traceback for a Ctrl-C
