"""`odradek configs`: describe and alter topic and broker configs, and SCRAM users, like kafka-configs.sh.

Options and output follow Kafka 4.1's ConfigCommand:

* ``--describe --entity-type topics --entity-name t`` (or ``--topic t``) prints ``Dynamic configs for
  topic t are:`` then one ``  name=value sensitive=false synonyms={SOURCE:name=value, ...}`` line per
  topic override; ``--all`` prints every config (``All configs for topic t are:``). Without a name,
  every topic (or every broker, then the cluster defaults) is described.
* ``--alter --add-config 'k1=v1,k2=[v2,v3]' --delete-config k3,k4`` sends one IncrementalAlterConfigs
  (deletions, then sets) and prints ``Completed updating config for topic t.``; deleting a config the
  entity does not override is not an error (Kafka 4.4).
* ``--entity-type users``: ``--add-config 'SCRAM-SHA-256=[iterations=8192,password=secret]'`` stores
  a SCRAM credential (AlterUserScramCredentials, with a random salt and the salted password computed
  here, as Kafka's admin client does), ``--delete-config SCRAM-SHA-256`` removes it, and
  ``--describe`` prints ``SCRAM credential configs for user-principal 'alice' are
  SCRAM-SHA-256=iterations=8192`` (after any ``Quota configs for ...`` lines, when the broker serves
  DescribeClientQuotas).
"""

from __future__ import annotations

import argparse
import re
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..cluster_metadata import LEGAL_TOPIC_NAME, MAX_TOPIC_NAME_LENGTH
from ..logstore.java_hash import hashmap_capacity, hashmap_order, spread, string_hash, to_int32
from ..security.scram import (
    DEFAULT_ITERATIONS,
    MECHANISM_NAMES,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    salted_password,
)
from ..wire.errors import ErrorCode
from ..wire.protocol import request_class
from .cli_common import add_bootstrap_argument, add_command_config_argument, run_with_client
from .client import KafkaClient, KafkaError

DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44
DESCRIBE_CLIENT_QUOTAS = 48
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51

TOPICS, BROKERS, USERS = "topics", "brokers", "users"
SUPPORTED_ENTITY_TYPES = (TOPICS, BROKERS, USERS)
#: Kafka 4.1's entity types (ConfigType values, then broker-loggers), in the order its errors list them
KAFKA_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips", "client-metrics", "groups", "broker-loggers")
DEFAULT_ENTITY = ""  # the entity name of the defaults (--entity-default), as in Kafka

# ConfigResource.Type ids
RESOURCE_TYPES = {TOPICS: 2, BROKERS: 4}
# DescribeConfigs source ids -> the names Kafka's admin client (ConfigEntry.ConfigSource) prints
CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG",
}
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
OP_SET, OP_DELETE = 0, 1
# DescribeClientQuotas match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

#: Kafka's user quota configs (QuotaConfig): valid for kafka-configs, not set by this tool
USER_QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
# Kafka's regexes: a comma or '=' separates only outside [...] (the lookahead sees no ']' before the next '[').
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_ITEM_SEPARATOR = re.compile("," + _OUTSIDE_BRACKETS)
_KEY_VALUE_SEPARATOR = re.compile(r"\s*=\s*" + _OUTSIDE_BRACKETS)
_VALID_KEY = re.compile(r"[$a-zA-Z0-9._-]*")
_SCRAM_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)")


class ConfigCommandError(ValueError):
    """Input Kafka's ConfigCommand refuses with this message (its IllegalArgumentException or
    InvalidConfigurationException); the tool prints it and exits 1."""


@dataclass(frozen=True)
class Entity:
    """What the command is about: an entity type and a name (None: every entity; "": the defaults)."""

    entity_type: str
    name: str | None

    @property
    def singular(self) -> str:
        # Kafka's messages drop the plural 's' ("topic t", "broker 1", "user alice").
        return self.entity_type[:-1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_argument(parser)
    add_command_config_argument(parser)
    parser.add_argument("--describe", action="store_true", help="list configs of the given entity")
    parser.add_argument("--alter", action="store_true", help="alter the configuration of the entity")
    parser.add_argument("--all", action="store_true",
                        help="with --describe of topics or brokers: every config, not only dynamic ones")
    parser.add_argument("--entity-type", action="append", metavar="TYPE", help="topics, brokers or users")
    parser.add_argument("--entity-name", metavar="NAME", help="topic name, broker id or user principal name")
    parser.add_argument("--entity-default", action="store_true", help="the cluster-wide broker defaults")
    parser.add_argument("--topic", help="the topic's name (instead of --entity-type topics --entity-name)")
    parser.add_argument("--broker", help="the broker's id (instead of --entity-type brokers --entity-name)")
    parser.add_argument("--broker-defaults", action="store_true", help="the config defaults for all brokers")
    parser.add_argument("--user", help="the user's principal name (instead of --entity-type users --entity-name)")
    parser.add_argument(
        "--add-config", metavar="k1=v1,k2=[v1,v2]",
        help="configs to set; square brackets group a value that contains commas. For users: "
        "SCRAM-SHA-256=[iterations=8192,password=secret] (and/or SCRAM-SHA-512=[...])",
    )
    parser.add_argument("--delete-config", action="append", metavar="k1,k2",
                        help="config keys to remove (for users: SCRAM-SHA-256 and/or SCRAM-SHA-512)")


# ------------------------------------------------------------------------------------------------
# Parsing
# ------------------------------------------------------------------------------------------------

def parse_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[v2,v3]`` -> ``{"k1": "v1", "k2": "v2,v3"}``, by Kafka's rules.

    Commas and '=' inside square brackets do not separate; every '[' and ']' is then dropped from
    the value (so ``password=[a]b`` gives ``ab``), keys and values are trimmed, a later key wins, an
    empty value is allowed (``k=``), and a key may only hold ``$a-zA-Z0-9._-``.
    """
    items = _ITEM_SEPARATOR.split(text)
    while len(items) > 1 and items[-1] == "":  # Java's String.split drops trailing empty strings
        items.pop()
    if items == [""] and text:
        items = []  # Java: "," splits into nothing at all
    configs: dict[str, str] = {}
    for item in items:
        pair = _KEY_VALUE_SEPARATOR.split(item)
        if len(pair) != 2:
            raise ConfigCommandError(  # Scala's require() puts "requirement failed: " first
                'requirement failed: Invalid entity config: all configs to be added must be in the format "key=val" or  '
                '"key=[val1,val2]" to group values which contain commas.')
        configs[pair[0].strip()] = re.sub(r"[\[\]]", "", pair[1]).strip()
    for key in configs:
        if not _VALID_KEY.fullmatch(key):
            raise ConfigCommandError(f"Invalid character found for config key: {key}")
    return configs


def parse_delete_config(values: Sequence[str] | None) -> list[str]:
    """Every repeated ``--delete-config k1,k2`` -> ``["k1", "k2", ...]`` (trimmed, as Kafka splits them)."""
    return [key.strip() for value in values or () for key in value.split(",")]


def scram_iterations_and_password(mechanism: str, credential: str) -> tuple[int, bytes]:
    """``iterations=8192,password=secret`` (an --add-config value of SCRAM-SHA-*) -> (8192, b"secret").

    Kafka's rules: ``password`` is required and last, ``iterations`` optional (absent or -1: 4096)
    and at least the mechanism's minimum; the password is everything after ``password=``.
    """
    match = _SCRAM_CREDENTIAL.fullmatch(credential)
    if match is None:
        # Kafka names the mechanism by its enum constant here (SCRAM_SHA_256), not by its SASL name.
        raise ConfigCommandError(f"Invalid credential property {mechanism.replace('-', '_')}={credential}")
    iterations_text, password = match.groups()
    if iterations_text is None or iterations_text == "-1":
        iterations = DEFAULT_ITERATIONS
    elif not iterations_text or iterations_text == "-":
        raise ConfigCommandError(f'Invalid iterations in credential property {mechanism}: "{iterations_text}"')
    else:
        iterations = int(iterations_text)
    if iterations < MIN_ITERATIONS[mechanism]:
        raise ConfigCommandError(
            f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS[mechanism]} required for {mechanism}")
    return iterations, password.encode()


def new_salt() -> bytes:
    """A fresh salt made as Kafka's admin client makes it (ScramFormatter.secureRandomBytes): the
    UTF-8 text of a random 130-bit number in base 36."""
    number = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, rest = divmod(number, 36)
        text = digits[rest] + text
        if number == 0:
            return text.encode()


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate, with its messages (lengths count UTF-16 units, as Java's do)."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name.encode("utf-16-le")) // 2 > MAX_TOPIC_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    elif not LEGAL_TOPIC_NAME.fullmatch(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return
    raise ConfigCommandError(f"Topic name is invalid: {reason}")


def scala_set(keys: Sequence[str]) -> str:
    """How Kafka's messages print a set of --add-config keys: Scala's Set of the keys in the order of
    the Properties (a hash table of 16 buckets for a few keys) they were parsed into."""
    return f"Set({', '.join(hashmap_order(list(dict.fromkeys(keys)), string_hash))})"


def scala_buffer(keys: Sequence[str]) -> str:
    """How Kafka's messages print the --delete-config keys: a Scala ArrayBuffer, in the given order."""
    return f"ArrayBuffer({', '.join(keys)})"


def entity_from_args(args: argparse.Namespace) -> Entity:
    """The entity of the command, checked as Kafka's ConfigCommandOptions.checkArgs checks it."""
    if int(args.describe) + int(args.alter) != 1:
        raise ConfigCommandError("Command must include exactly one action: --describe, --alter")
    if args.describe:
        for option, given in (("add-config", args.add_config is not None), ("delete-config", bool(args.delete_config))):
            if given:
                raise ConfigCommandError(f'Option "[describe]" can\'t be used with option "[{option}]"')
    flags = [(TOPICS, args.topic), (USERS, args.user), (BROKERS, args.broker)]
    types = list(args.entity_type or []) + [t for t, value in flags if value is not None]
    if args.broker_defaults:
        types.append(BROKERS)
    duplicates = [t for i, t in enumerate(types) if t in types[:i]]
    if duplicates:
        raise ConfigCommandError(f"Duplicate entity type(s) specified: {','.join(dict.fromkeys(duplicates))}")
    for entity_type in types:
        if entity_type not in KAFKA_ENTITY_TYPES:
            raise ConfigCommandError(
                f"Invalid entity type {entity_type}, the entity type must be one of {', '.join(KAFKA_ENTITY_TYPES)} "
                "with a --bootstrap-server or --bootstrap-controller argument")
        if entity_type not in SUPPORTED_ENTITY_TYPES:
            raise ConfigCommandError(f"Entity type {entity_type} is not handled by odradek configs "
                                     f"(it handles {', '.join(SUPPORTED_ENTITY_TYPES)})")
    if not types:
        raise ConfigCommandError("At least one entity type must be specified")
    if len(types) > 1:
        raise ConfigCommandError("Only 'users' and 'clients' entity types may be specified together")
    generic = args.entity_type or args.entity_name is not None or args.entity_default
    specific = any(value is not None for _, value in flags) or args.broker_defaults
    if generic and specific:
        raise ConfigCommandError("--entity-{type,name,default} should not be used in conjunction with specific "
                                 "entity flags")
    entity_type = types[0]
    name = next((value for _, value in flags if value is not None), args.entity_name)
    if name is None and (args.entity_default or args.broker_defaults):
        name = DEFAULT_ENTITY
    if name and entity_type == BROKERS and not re.fullmatch(r"[+-]?[0-9]+", name):
        raise ConfigCommandError(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
    if args.describe and args.entity_default and entity_type == TOPICS:
        raise ConfigCommandError("--entity-default must not be specified with --describe of topics")
    if args.alter:
        if entity_type == TOPICS and not name:
            raise ConfigCommandError("An entity name must be specified with --alter of topics")
        if name is None:
            raise ConfigCommandError(
                "An entity-name or default entity must be specified with --alter of users, clients, brokers or ips")
        if args.add_config is None and not args.delete_config:
            raise ConfigCommandError(
                "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter")
    return Entity(entity_type, name)


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------

def _text(value: str | None) -> str:
    return "null" if value is None else value  # Java string concatenation of a null


def format_config_entry(entry: Any) -> str:
    """One DescribeConfigs entry as ConfigCommand prints it (synonyms as the broker lists them)."""
    synonyms = ", ".join(
        f"{CONFIG_SOURCES.get(s.source, 'UNKNOWN')}:{s.name}={_text(s.value)}" for s in entry.synonyms)
    sensitive = "true" if entry.is_sensitive else "false"
    return f"  {entry.name}={_text(entry.value)} sensitive={sensitive} synonyms={{{synonyms}}}"


def describe_header(entity_type: str, name: str, describe_all: bool) -> str:
    if name == DEFAULT_ENTITY:
        return f"Default configs for {entity_type} in the cluster are:"
    return f"{'All' if describe_all else 'Dynamic'} configs for {entity_type[:-1]} {name} are:"


def format_scram_description(user: str, credential_infos: Sequence[Any]) -> str:
    """``SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, ...``"""
    text = ", ".join(f"{MECHANISM_NAMES.get(info.mechanism, 'UNKNOWN')}=iterations={info.iterations}"
                     for info in credential_infos)
    return f"SCRAM credential configs for user-principal '{user}' are {text}"


def java_double(value: float) -> str:
    """Java's Double.toString (quota values print this way: 1024.0, 2.0E7, 1.0E-4)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    mantissa = "".join(map(str, digits))
    power = exponent + len(mantissa) - 1
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{power}"


def _java_map_hash(entries: dict[str, str | None]) -> int:
    # AbstractMap.hashCode: the sum of key.hashCode() ^ value.hashCode() (a null hashes to 0)
    return to_int32(sum(string_hash(k) ^ (string_hash(v) if v is not None else 0) for k, v in entries.items()))


def _presized_hashmap_order(items: list[Any], hash_of: Any) -> list[Any]:
    # The order of `new HashMap<>(n)` filled with n items (how Kafka's client holds a quota entity's values).
    size = 1
    while size < len(items):
        size *= 2
    capacity = hashmap_capacity(len(items), initial=size)
    return sorted(items, key=lambda item: spread(hash_of(item)) & (capacity - 1))


def format_quota_entries(entries: Sequence[Any]) -> list[str]:
    """``Quota configs for user-principal 'alice' are producer_byte_rate=1024.0`` lines, in the hash
    order Kafka's admin client leaves them in."""
    entities = [({e.entity_type: e.entity_name for e in entry.entity}, entry) for entry in entries]
    lines = []
    for entity, entry in hashmap_order(entities, lambda item: _java_map_hash(item[0])):
        names = []
        for entity_type, label in (("user", "user-principal"), ("client-id", "client-id"), ("ip", "ip")):
            if entity_type in entity:
                name = entity[entity_type]
                names.append(f"{label} '{name}'" if name is not None else f"the default {label}")
        values = _presized_hashmap_order(list(entry.values), lambda v: string_hash(v.key))
        text = ", ".join(f"{v.key}={java_double(v.value)}" for v in values)
        lines.append(f"Quota configs for {', '.join(names)} are {text}")
    return lines


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    try:
        entity = entity_from_args(args)
        add_configs = parse_add_config(args.add_config) if args.add_config is not None else {}
        delete_configs = parse_delete_config(args.delete_config)
    except ConfigCommandError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return run_with_client(args, lambda client: _dispatch(client, args, entity, add_configs, delete_configs),
                           prog="odradek-configs")


def _dispatch(client: KafkaClient, args: argparse.Namespace, entity: Entity, add_configs: dict[str, str],
              delete_configs: list[str]) -> int:
    if args.describe:
        if entity.entity_type == USERS:
            describe_users(client, entity)
        else:
            describe_resources(client, entity, args.all)
        return 0
    if entity.entity_type == USERS:
        alter_user(client, entity, add_configs, delete_configs)
    else:
        alter_resource(client, entity, add_configs, delete_configs)
    if entity.name:
        print(f"Completed updating config for {entity.singular} {entity.name}.")
    else:
        print(f"Completed updating default config for {entity.entity_type} in the cluster.")
    return 0


def _broker_node(entity: Entity, name: str) -> int | None:
    # A broker's own configs are asked of that broker, as Kafka's admin client does.
    return int(name) if entity.entity_type == BROKERS and name != DEFAULT_ENTITY else None


def resource_configs(client: KafkaClient, entity: Entity, name: str, *, include_synonyms: bool,
                     describe_all: bool) -> list[Any]:
    """The DescribeConfigs entries of one topic or broker, sorted by name: only the dynamic ones
    (source DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG) unless
    `describe_all`."""
    if entity.entity_type == TOPICS:
        if name:
            validate_topic_name(name)
        dynamic_source = DYNAMIC_TOPIC_CONFIG
    else:
        dynamic_source = DYNAMIC_DEFAULT_BROKER_CONFIG if name == DEFAULT_ENTITY else DYNAMIC_BROKER_CONFIG
    cls = request_class(DESCRIBE_CONFIGS)
    request = cls(resources=[cls.DescribeConfigsResource(resource_type=RESOURCE_TYPES[entity.entity_type],
                                                         resource_name=name, configuration_keys=None)],
                  include_synonyms=include_synonyms, include_documentation=False)
    response = client.send(DESCRIBE_CONFIGS, request, _broker_node(entity, name))
    result = response.results[0]
    if result.error_code:
        raise KafkaError(result.error_code, result.error_message)
    entries = [c for c in result.configs if describe_all or c.config_source == dynamic_source]
    return sorted(entries, key=lambda c: c.name)


def _entity_names(client: KafkaClient, entity: Entity) -> list[str] | None:
    """The names to describe; None when the named entity does not exist (the caller says so)."""
    if entity.entity_type == TOPICS:
        topics = client.metadata(None)
        if entity.name is None:
            # Kafka's admin client returns topic names as a HashMap's key set.
            return hashmap_order(list(topics), string_hash)
        return [entity.name] if entity.name in topics else None
    client.metadata([])
    if entity.name is None:
        return [str(node) for node in client.brokers] + [DEFAULT_ENTITY]
    known = entity.name == DEFAULT_ENTITY or any(str(node) == entity.name for node in client.brokers)
    return [entity.name] if known else None


def describe_resources(client: KafkaClient, entity: Entity, describe_all: bool) -> None:
    """--describe of topics or brokers: a header, then one line per config, for each entity."""
    if entity.entity_type == TOPICS and entity.name is not None and not describe_all:
        validate_topic_name(entity.name)
    if describe_all and entity.name is not None:
        names: list[str] | None = [entity.name]  # Kafka checks existence only for dynamic configs
    else:
        names = _entity_names(client, entity)
    if names is None:
        print(f"The {entity.singular} '{entity.name}' doesn't exist and doesn't have dynamic config.")
        return
    for name in names:
        print(describe_header(entity.entity_type, name, describe_all))
        for entry in resource_configs(client, entity, name, include_synonyms=True, describe_all=describe_all):
            print(format_config_entry(entry))


def alter_resource(client: KafkaClient, entity: Entity, add_configs: dict[str, str],
                   delete_configs: list[str]) -> None:
    """--alter of a topic or broker: one IncrementalAlterConfigs (Kafka 4.4's tool no longer refuses
    deleting a config that is not set; the broker ignores it)."""
    name = entity.name or DEFAULT_ENTITY
    cls = request_class(INCREMENTAL_ALTER_CONFIGS)
    changes = [cls.AlterableConfig(name=key, config_operation=OP_DELETE, value="") for key in delete_configs]
    changes += [cls.AlterableConfig(name=key, config_operation=OP_SET, value=value) for key, value in add_configs.items()]
    request = cls(resources=[cls.AlterConfigsResource(resource_type=RESOURCE_TYPES[entity.entity_type],
                                                      resource_name=name, configs=changes)], validate_only=False)
    response = client.send(INCREMENTAL_ALTER_CONFIGS, request, _broker_node(entity, name))
    for result in response.responses:
        if result.error_code:
            raise KafkaError(result.error_code, result.error_message)


def _check_user_configs(keys: Sequence[str], verb: str) -> None:
    """Kafka's refusal of keys that are neither SCRAM mechanisms nor quotas; quotas Kafka would take
    are refused here too, with a message of our own, since Odradek has no client quotas to set."""
    unknown = [key for key in keys if key not in MECHANISM_TYPES and key not in USER_QUOTA_CONFIGS]
    if unknown:
        listed = scala_set(unknown) if verb == "added" else scala_buffer(unknown)
        raise ConfigCommandError(f"Only quota and SCRAM credential configs can be {verb} for 'users' using "
                                 f"--bootstrap-server. Unexpected config names: {listed}")
    quotas = [key for key in keys if key in USER_QUOTA_CONFIGS]
    if quotas:
        raise ConfigCommandError(f"odradek configs sets SCRAM credentials only, not quotas: {', '.join(quotas)}")


def alter_user(client: KafkaClient, entity: Entity, add_configs: dict[str, str], delete_configs: list[str]) -> None:
    """--alter of a user: one AlterUserScramCredentials with the deletions and the upsertions."""
    _check_user_configs(list(add_configs), "added")
    _check_user_configs(delete_configs, "deleted")
    if not entity.name:
        raise ConfigCommandError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                                 "Credentials using --bootstrap-server.")
    cls = request_class(ALTER_USER_SCRAM_CREDENTIALS)
    deletions = [cls.ScramCredentialDeletion(name=entity.name, mechanism=MECHANISM_TYPES[m]) for m in delete_configs]
    upsertions = []
    for mechanism, credential in add_configs.items():
        iterations, password = scram_iterations_and_password(mechanism, credential)
        salt = new_salt()
        upsertions.append(cls.ScramCredentialUpsertion(
            name=entity.name, mechanism=MECHANISM_TYPES[mechanism], iterations=iterations, salt=salt,
            salted_password=salted_password(mechanism, password, salt, iterations)))
    response = client.send(ALTER_USER_SCRAM_CREDENTIALS, cls(deletions=deletions, upsertions=upsertions))
    for result in response.results:
        if result.error_code:
            hint = ""
            if result.error_code == ErrorCode.DUPLICATE_RESOURCE and len(deletions) + len(upsertions) > 1:
                # Kafka's KRaft controller takes one change per user and request: Kafka's own tool fails the same way.
                hint = " (change one SCRAM mechanism per --alter command)"
            raise KafkaError(result.error_code, f"{result.error_message}{hint}")


def describe_users(client: KafkaClient, entity: Entity) -> None:
    """--describe of users: quota lines (when the broker serves DescribeClientQuotas), then SCRAM lines."""
    if client.any_connection().supports(DESCRIBE_CLIENT_QUOTAS):
        for line in format_quota_entries(_client_quotas(client, entity)):
            print(line)
    if entity.name == DEFAULT_ENTITY:
        return  # the default user has quotas only
    cls = request_class(DESCRIBE_USER_SCRAM_CREDENTIALS)
    users = None if entity.name is None else [cls.UserName(name=entity.name)]
    response = client.send(DESCRIBE_USER_SCRAM_CREDENTIALS, cls(users=users))
    if response.error_code:
        raise KafkaError(response.error_code, response.error_message)
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            continue  # Kafka lists only users that have credentials
        if result.error_code:
            error = KafkaError(result.error_code, result.error_message)
            print(f"Error retrieving SCRAM credential configs for user-principal '{result.user}': {error}")
            continue
        print(format_scram_description(result.user, result.credential_infos))


def _client_quotas(client: KafkaClient, entity: Entity) -> list[Any]:
    cls = request_class(DESCRIBE_CLIENT_QUOTAS)
    if entity.name is None:
        component = cls.ComponentData(entity_type="user", match_type=MATCH_ANY, match=None)
    elif entity.name == DEFAULT_ENTITY:
        component = cls.ComponentData(entity_type="user", match_type=MATCH_DEFAULT, match=None)
    else:
        component = cls.ComponentData(entity_type="user", match_type=MATCH_EXACT, match=entity.name)
    response = client.send(DESCRIBE_CLIENT_QUOTAS, cls(components=[component], strict=True))
    if response.error_code:
        raise KafkaError(response.error_code, response.error_message)
    return list(response.entries or [])
