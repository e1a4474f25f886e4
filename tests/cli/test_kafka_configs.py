"""Unit tests of `odradek configs` (kafka-configs.sh): --add-config parsing by Kafka's rules, SCRAM
credential values, the checks of the arguments, and the output lines (text of Kafka 4.1's ConfigCommand)."""

from __future__ import annotations

import argparse
import hashlib
import hmac
from types import SimpleNamespace

import pytest

from odradek.cli import main
from odradek.security.scram import salted_password
from odradek.tools.kafka_configs import (
    ConfigCommandError,
    Entity,
    add_arguments,
    describe_header,
    entity_from_args,
    format_config_entry,
    format_quota_entries,
    format_scram_description,
    java_double,
    new_salt,
    parse_add_config,
    parse_delete_config,
    scala_set,
    scram_iterations_and_password,
    validate_topic_name,
)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--bootstrap-server", "127.0.0.1:1", *argv])


# ------------------------------------------------------------------ --add-config / --delete-config

def test_add_config_groups_values_in_brackets() -> None:
    assert parse_add_config("k1=v1,k2=[v2,v3],k3=v3") == {"k1": "v1", "k2": "v2,v3", "k3": "v3"}


def test_add_config_scram_values_keep_their_inner_commas_and_equals() -> None:
    text = "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=p=w,x]"
    assert parse_add_config(text) == {"SCRAM-SHA-256": "iterations=8192,password=alice-secret",
                                      "SCRAM-SHA-512": "password=p=w,x"}


def test_add_config_trims_and_allows_empty_values_and_drops_every_bracket() -> None:
    # Kafka removes every '[' and ']' of a value, trims keys and values, keeps `k=` as an empty value
    assert parse_add_config(" a = 1 , b= , c=[x]y[z] ,") == {"a": "1", "b": "", "c": "xyz"}
    assert parse_add_config("a=1,a=2") == {"a": "2"}  # a later key wins, as in a Properties


def test_add_config_quotes_are_part_of_the_value() -> None:
    # kafka-configs.sh does no quote processing: the shell's quoting is all there is
    assert parse_add_config("x='a b',y=\"c\"") == {"x": "'a b'", "y": '"c"'}
    with pytest.raises(ConfigCommandError, match="Invalid entity config"):
        parse_add_config('ssl.cipher.suites="A,B"')  # quotes do not group: only brackets do


@pytest.mark.parametrize("text", ["novalue", "a=b=c", "a=1,,b=2", ""])
def test_add_config_without_one_equals_sign_is_refused_with_kafkas_message(text: str) -> None:
    with pytest.raises(ConfigCommandError, match=r'^requirement failed: Invalid entity config: all configs to be '
                                                 r'added must be in the format "key=val" or  "key=\[val1,val2\]"'):
        parse_add_config(text)


def test_add_config_key_characters() -> None:
    with pytest.raises(ConfigCommandError, match=r"^Invalid character found for config key: bad key$"):
        parse_add_config("bad key=1")
    assert parse_add_config("Inner$Class_x.y-z=1") == {"Inner$Class_x.y-z": "1"}


def test_delete_config_splits_every_option_at_commas() -> None:
    assert parse_delete_config(["a, b", "c"]) == ["a", "b", "c"]
    assert parse_delete_config(None) == []


# ------------------------------------------------------------------ SCRAM credentials

def test_scram_iterations_default_and_minimum() -> None:
    assert scram_iterations_and_password("SCRAM-SHA-256", "password=s3cret") == (4096, b"s3cret")
    assert scram_iterations_and_password("SCRAM-SHA-512", "iterations=-1,password=x") == (4096, b"x")
    assert scram_iterations_and_password("SCRAM-SHA-256", "iterations=8192,password=a,b=c") == (8192, b"a,b=c")
    with pytest.raises(ConfigCommandError, match=r"^Iterations 100 is less than the minimum 4096 required for "
                                                 r"SCRAM-SHA-256$"):
        scram_iterations_and_password("SCRAM-SHA-256", "iterations=100,password=x")


@pytest.mark.parametrize("value", ["pw=x", "password", "iterations=4096", "password=x,iterations=4096x"])
def test_scram_credential_without_password_is_refused_as_kafka_names_it(value: str) -> None:
    if value == "password=x,iterations=4096x":
        # everything after password= is the password
        assert scram_iterations_and_password("SCRAM-SHA-256", value) == (4096, b"x,iterations=4096x")
        return
    with pytest.raises(ConfigCommandError, match=rf"^Invalid credential property SCRAM_SHA_256={value}$"):
        scram_iterations_and_password("SCRAM-SHA-256", value)


def test_salt_is_a_base36_number_of_130_bits_like_kafkas() -> None:
    salts = {new_salt() for _ in range(50)}
    assert len(salts) == 50
    for salt in salts:
        assert int(salt.decode(), 36) < 2**130
        assert salt.decode() == salt.decode().lower()


def test_salted_password_is_rfc5802_hi() -> None:
    # Hi(password, salt, i) with one iteration is HMAC(password, salt || INT(1))
    expected = hmac.new(b"pw", b"salt" + b"\x00\x00\x00\x01", hashlib.sha256).digest()
    assert salted_password("SCRAM-SHA-256", b"pw", b"salt", 1) == expected


# ------------------------------------------------------------------ argument checks

@pytest.mark.parametrize("argv, message", [
    ([], "Command must include exactly one action: --describe, --alter"),
    (["--describe", "--alter", "--topic", "t"], "Command must include exactly one action: --describe, --alter"),
    (["--describe", "--topic", "t", "--add-config", "a=b"], 'Option "[describe]" can\'t be used with option "[add-config]"'),
    (["--describe"], "At least one entity type must be specified"),
    (["--describe", "--entity-type", "foo"], "Invalid entity type foo, the entity type must be one of topics, clients, "
     "users, brokers, ips, client-metrics, groups, broker-loggers with a --bootstrap-server or --bootstrap-controller "
     "argument"),
    (["--describe", "--entity-type", "clients"], "Entity type clients is not handled by odradek configs"),
    (["--describe", "--topic", "t", "--entity-type", "topics"], "Duplicate entity type(s) specified: topics"),
    (["--describe", "--topic", "t", "--entity-name", "t"], "--entity-{type,name,default} should not be used in "
     "conjunction with specific entity flags"),
    (["--describe", "--entity-type", "topics", "--entity-type", "users"],
     "Only 'users' and 'clients' entity types may be specified together"),
    (["--describe", "--broker", "x"], "The entity name for brokers must be a valid integer broker id, but it is: x"),
    (["--describe", "--entity-type", "topics", "--entity-default"], "--entity-default must not be specified with "
     "--describe of topics"),
    (["--alter", "--entity-type", "topics", "--add-config", "a=b"], "An entity name must be specified with --alter "
     "of topics"),
    (["--alter", "--entity-type", "users", "--add-config", "a=b"], "An entity-name or default entity must be "
     "specified with --alter of users, clients, brokers or ips"),
    (["--alter", "--topic", "t"], "At least one of --add-config, --add-config-file, or --delete-config must be "
     "specified with --alter"),
])
def test_argument_errors_use_kafkas_messages(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigCommandError) as error:
        entity_from_args(_args(*argv))
    assert str(error.value).startswith(message)


def test_entities_from_long_and_short_options() -> None:
    assert entity_from_args(_args("--describe", "--topic", "t")) == Entity("topics", "t")
    assert entity_from_args(_args("--describe", "--entity-type", "topics")) == Entity("topics", None)
    assert entity_from_args(_args("--describe", "--entity-type", "brokers", "--entity-default")) == Entity("brokers", "")
    assert entity_from_args(_args("--alter", "--broker-defaults", "--delete-config", "x")) == Entity("brokers", "")
    assert entity_from_args(_args("--describe", "--user", "alice")) == Entity("users", "alice")
    assert entity_from_args(_args("--describe", "--entity-type", "users")) == Entity("users", None)


def test_bad_input_exits_1_with_one_line_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    # port 1 is never contacted: the input is refused first
    assert main(["configs", "--bootstrap-server", "127.0.0.1:1", "--alter", "--topic", "t", "--add-config", "a"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: requirement failed: Invalid entity config") and err.count("\n") == 1


def test_unreachable_broker_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["configs", "--bootstrap-server", "127.0.0.1:1", "--describe", "--topic", "t"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: cannot reach 127.0.0.1:1") and err.count("\n") == 1


@pytest.mark.parametrize("name, reason", [
    ("", "the empty string is not allowed"),
    ("..", "'..' is not allowed"),
    ("a/b", "'a/b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ("x" * 250, f"the length of '{'x' * 250}' is longer than the max allowed length 249"),
])
def test_topic_names_are_checked_like_kafkas_topic_validate(name: str, reason: str) -> None:
    with pytest.raises(ConfigCommandError, match=f"^Topic name is invalid: {reason}$".replace("(", r"\(")):
        validate_topic_name(name)
    validate_topic_name("ok.topic_1-x")


def test_unknown_user_config_names_print_like_scala_sets() -> None:
    # Kafka's order: the keys' places in a 16-bucket hash table ("bar" before "foo")
    assert scala_set(["foo", "bar"]) == "Set(bar, foo)"


# ------------------------------------------------------------------ output

def _entry(name: str, value: str | None, synonyms: list[tuple[int, str, str | None]], sensitive: bool = False):
    return SimpleNamespace(name=name, value=value, is_sensitive=sensitive,
                           synonyms=[SimpleNamespace(source=s, name=n, value=v) for s, n, v in synonyms])


def test_config_entry_lines() -> None:
    entry = _entry("retention.ms", "5", [(1, "retention.ms", "5"), (5, "log.retention.hours", "168")])
    assert format_config_entry(entry) == ("  retention.ms=5 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5,"
                                          " DEFAULT_CONFIG:log.retention.hours=168}")
    secret = _entry("ssl.key.password", None, [(2, "ssl.key.password", None)], sensitive=True)
    assert format_config_entry(secret) == ("  ssl.key.password=null sensitive=true "
                                           "synonyms={DYNAMIC_BROKER_CONFIG:ssl.key.password=null}")
    assert format_config_entry(_entry("x", "", [])) == "  x= sensitive=false synonyms={}"


def test_headers() -> None:
    assert describe_header("topics", "t", False) == "Dynamic configs for topic t are:"
    assert describe_header("topics", "t", True) == "All configs for topic t are:"
    assert describe_header("brokers", "1", False) == "Dynamic configs for broker 1 are:"
    assert describe_header("brokers", "", True) == "Default configs for brokers in the cluster are:"


def test_scram_description_line() -> None:
    infos = [SimpleNamespace(mechanism=1, iterations=8192), SimpleNamespace(mechanism=2, iterations=4096)]
    assert format_scram_description("alice", infos) == ("SCRAM credential configs for user-principal 'alice' are "
                                                        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096")


@pytest.mark.parametrize("value, text", [(1024.0, "1024.0"), (2e7, "2.0E7"), (0.5, "0.5"), (1.0e-4, "1.0E-4"),
                                         (12345678.9, "1.23456789E7"), (0.0, "0.0"), (9999999.0, "9999999.0")])
def test_quota_values_print_as_java_doubles(value: float, text: str) -> None:
    assert java_double(value) == text


def test_quota_lines() -> None:
    entry = SimpleNamespace(entity=[SimpleNamespace(entity_type="user", entity_name="alice")],
                            values=[SimpleNamespace(key="producer_byte_rate", value=2e7),
                                    SimpleNamespace(key="consumer_byte_rate", value=1024.0)])
    default = SimpleNamespace(entity=[SimpleNamespace(entity_type="user", entity_name=None)],
                              values=[SimpleNamespace(key="request_percentage", value=50.0)])
    lines = format_quota_entries([entry, default])
    # the values in the order of Java's `new HashMap<>(2)` (4 buckets once both are in)
    assert "Quota configs for user-principal 'alice' are consumer_byte_rate=1024.0, producer_byte_rate=2.0E7" in lines
    assert "Quota configs for the default user-principal are request_percentage=50.0" in lines
