"""`odradek storage format | info | random-uuid`: Odradek's kafka-storage.sh.

`format -t <cluster id> -c <server.properties> [--override k=v] [--ignore-formatted]
[--release-version 4.4] [--feature name=level] [--add-scram 'SCRAM-SHA-256=[name=alice,password=...]']`
writes meta.properties into every log dir and the bootstrap metadata into the metadata log dir
(kraft/bootstrap.py: bootstrap.checkpoint for now, which Kafka 4.4 reads too), so either broker
can start on the result. The feature levels
are Kafka 4.4's defaults for the release's metadata.version (4.4-IV2 without --release-version),
each --feature overriding one. `--add-scram` (repeatable) adds a UserScramCredentialRecord after
the feature levels; the broker copies it into the metadata log on its first start.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..security.scram import MECHANISM_TYPES, ScramFormatError, parse_scram_argument
from ..wire.schema import message_def
from .bootstrap import bootstrap_path, write_bootstrap
from .features import RELEASE_METADATA_VERSIONS, FeatureLevelError, bootstrap_levels, metadata_version_name
from .records import new_record


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the storage subcommands to `parser`."""
    sub = parser.add_subparsers(dest="storage_command", required=True, metavar="ACTION")
    fmt = sub.add_parser("format", help="format the log dirs (meta.properties, bootstrap.checkpoint)")
    fmt.add_argument("-t", "--cluster-id", required=True, help="the cluster id (e.g. from random-uuid)")
    info = sub.add_parser("info", help="show the meta.properties of the log dirs")
    for p in (fmt, info):
        p.add_argument("-c", "--config", help="a Kafka server.properties file")
        p.add_argument("--override", action="append", metavar="key=value", help="override a config (repeatable)")
    fmt.add_argument("-g", "--ignore-formatted", action="store_true",
                     help="skip dirs that are already formatted instead of failing")
    fmt.add_argument("-r", "--release-version", default=None,
                     help="release whose metadata.version (and default feature levels) to use, e.g. 4.4 or "
                          f"4.4-IV2 ({', '.join(r for r in RELEASE_METADATA_VERSIONS if '-' not in r)}, or a level name)")
    fmt.add_argument("-f", "--feature", action="append", metavar="name=level", help="a feature level (repeatable)")
    fmt.add_argument("-S", "--add-scram", action="append", metavar="MECHANISM=[name=...,password=...]",
                     help="a SCRAM credential for the bootstrap metadata, e.g. "
                          "'SCRAM-SHA-256=[name=alice,password=alice-secret]'; keys: name, password or "
                          "saltedpassword+salt (base64), salt, iterations (repeatable)")
    sub.add_parser("random-uuid", help="print a random cluster id")


def main(args: argparse.Namespace) -> int:
    """Run one storage subcommand; 0 on success, 1 with a message on stderr otherwise."""
    from ..cluster_metadata import random_uuid
    from ..config import BrokerConfig, ConfigError
    from ..storage import StorageError, format_storage, metadata_log_dir, storage_info

    if args.storage_command == "random-uuid":
        print(random_uuid().to_base64())
        return 0
    try:
        config = BrokerConfig.load(args.config, args.override or [])
    except (ConfigError, OSError) as exc:
        print(f"odradek storage: {exc}", file=sys.stderr)
        return 1
    if args.storage_command == "info":
        print(storage_info(config))
        return 0
    features: dict[str, int] = {}
    for item in args.feature or []:
        name, sep, level = item.partition("=")
        if not sep or not level.strip().isdigit():
            print(f"odradek storage: --feature {item!r} is not name=level", file=sys.stderr)
            return 1
        features[name.strip()] = int(level)
    try:
        levels = bootstrap_levels(args.release_version, features)
    except FeatureLevelError as exc:
        print(f"odradek storage: {exc}", file=sys.stderr)
        return 1
    try:
        scram_records = scram_bootstrap_records(args.add_scram or [])
    except ScramFormatError as exc:
        print(f"odradek storage: {exc}", file=sys.stderr)
        return 1
    meta_dir = metadata_log_dir(config)
    had_bootstrap = bootstrap_path(meta_dir).exists()
    try:
        format_storage(config, args.cluster_id, levels, ignore_formatted=args.ignore_formatted)
    except StorageError as exc:
        print(f"odradek storage: {exc}", file=sys.stderr)
        return 1
    if scram_records and not had_bootstrap and bootstrap_path(meta_dir).exists():
        # this run wrote the bootstrap metadata: the credentials go in with the feature levels
        write_bootstrap(meta_dir, levels, extra_records=scram_records)
    records = [("FeatureLevelRecord", new_record("FeatureLevelRecord", name=n, feature_level=v))
               for n, v in levels.items()] + scram_records
    print("Bootstrap metadata: BootstrapMetadata(records=["
          + ", ".join(f"ApiMessageAndVersion({java_string(n, r)} at version 0)" for n, r in records)
          + f"], metadataVersionLevel={levels['metadata.version']}, source=format command)")
    print(f"Formatting metadata directory {metadata_log_dir(config)} with metadata.version "
          f"{metadata_version_name(levels['metadata.version'])}.")
    return 0


def java_string(name: str, message: Any) -> str:
    """What Kafka's generated toString() of a record prints: every field in schema order, strings
    quoted, bytes as Java's signed-byte array (records of primitive fields only)."""
    parts = []
    for f in message_def(name).root.fields:
        value = getattr(message, f.attr)
        if value is None:
            text = "null"
        elif f.type == "string":
            text = f"'{value}'"
        elif f.type == "bytes":
            text = "[" + ", ".join(str(b - 256 if b > 127 else b) for b in bytes(value)) + "]"
        elif f.type == "bool":
            text = "true" if value else "false"
        elif f.type == "uuid":
            text = value.to_base64()
        else:
            text = str(value)
        parts.append(f"{f.name[0].lower()}{f.name[1:]}={text}")
    return f"{name}({', '.join(parts)})"


def scram_bootstrap_records(arguments: list[str]) -> list[tuple[str, Any]]:
    """The UserScramCredentialRecords for `--add-scram` arguments, in argument order (Kafka's
    ScramParser); raises ScramFormatError with Kafka's message for a bad argument."""
    records = []
    for argument in arguments:
        mechanism, name, cred = parse_scram_argument(argument)
        records.append(("UserScramCredentialRecord", new_record(
            "UserScramCredentialRecord", name=name, mechanism=MECHANISM_TYPES[mechanism], salt=cred.salt,
            stored_key=cred.stored_key, server_key=cred.server_key, iterations=cred.iterations)))
    return records
