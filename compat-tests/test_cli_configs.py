"""`odradek configs` (kafka-configs.sh) against a real Odradek, and next to Kafka 4.4's own ConfigCommand.

* topic configs: --alter sets and deletes overrides, --describe prints them; the text is byte for byte
  what Kafka's ConfigCommand prints for the same Odradek broker (dynamic, --all, a missing topic, the
  brokers);
* SCRAM users: --alter --add-config creates credentials (salt and salted password computed by the
  tool), kafka-python then logs in over SASL_PLAINTEXT SCRAM-SHA-256 with that password; --describe
  lists them; --delete-config removes one and the login with it fails; the tool itself logs in as
  the new user through --command-config;
* users --describe is compared with Kafka's tool on a real Kafka 4.4 broker and on Odradek (Kafka's
  tool describes client quotas first: Odradek stores and enforces client quotas, see docs/quotas.md,
  and AlterClientQuotas needs ALTER_CONFIGS on the cluster).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaError
from kafka_oracle import require_tool, run_java_tool
from test_security import roundtrip_kafka_python, start_with_listener

from odradek.cli import main

CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # where Kafka 4.4 keeps kafka-configs.sh's class
SASL_ONLY = {"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}


def ours(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["configs", *argv]) == code, capsys.readouterr()
    return capsys.readouterr()


def kafka(*args: str, code: int = 0) -> tuple[str, str]:
    require_tool("kafka")
    proc = run_java_tool(CONFIG_COMMAND, list(args))
    assert proc.returncode == code, proc.stderr
    err = "\n".join(line for line in proc.stderr.splitlines() if "log4j" not in line.lower() and "SLF4J" not in line)
    return proc.stdout, err


@pytest.fixture
def sasl_broker(odradek_broker_factory):
    """Odradek with PLAINTEXT (the admin side, no authorizer) and a SASL_PLAINTEXT SCRAM listener."""
    return start_with_listener(odradek_broker_factory, "SASL_PLAINTEXT", SASL_ONLY)


def test_topic_configs_alter_and_describe_like_kafkas_tool(sasl_broker, capsys) -> None:
    broker, _ = sasl_broker
    b = ["--bootstrap-server", broker.bootstrap]
    capsys.readouterr()
    assert main(["topics", *b, "--create", "--topic", "cfg", "--partitions", "2"]) == 0

    mine, _ = ours(capsys, *b, "--alter", "--entity-type", "topics", "--entity-name", "cfg",
                   "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete],segment.ms=600000")
    assert mine == "Completed updating config for topic cfg.\n"
    mine, _ = ours(capsys, *b, "--alter", "--topic", "cfg", "--delete-config", "segment.ms")
    assert mine == "Completed updating config for topic cfg.\n"
    mine, _ = ours(capsys, *b, "--describe", "--topic", "cfg")
    assert mine == (
        "Dynamic configs for topic cfg are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}\n"
    )
    # the broker really holds the change: kafka-topics' view agrees
    capsys.readouterr()
    assert main(["topics", *b, "--describe", "--topic", "cfg"]) == 0
    # min.insync.replicas is the cluster-wide config ELR writes at format (a dynamic default, not a
    # DEFAULT_CONFIG), so Kafka 4.4's kafka-topics.sh lists it too
    assert "Configs: cleanup.policy=compact,delete,min.insync.replicas=1,retention.ms=3600000\n" in capsys.readouterr().out

    # Kafka's own tool, same broker, same text
    for args in (["--describe", "--entity-type", "topics", "--entity-name", "cfg"],
                 ["--describe", "--all", "--topic", "cfg"],
                 ["--describe", "--entity-type", "topics"],
                 ["--describe", "--topic", "missing"],
                 ["--describe", "--entity-type", "brokers"],
                 ["--describe", "--all", "--broker", "1"]):
        assert ours(capsys, *b, *args)[0] == kafka(*b, *args)[0], args

    # deleting what is not set is no error for Kafka 4.4's tool (4.1's refused it); a value the broker
    # refuses: exit 1, one line
    mine, _ = ours(capsys, *b, "--alter", "--topic", "cfg", "--delete-config", "segment.bytes")
    assert mine == kafka(*b, "--alter", "--topic", "cfg", "--delete-config", "segment.bytes")[0] == \
        "Completed updating config for topic cfg.\n"
    _, err = ours(capsys, *b, "--alter", "--topic", "cfg", "--add-config", "retention.ms=soon", code=1)
    assert err.startswith("Error: INVALID_CONFIG: Invalid value soon for configuration retention.ms") and \
        err.count("\n") == 1
    _, err = ours(capsys, *b, "--alter", "--topic", "missing", "--add-config", "retention.ms=1", code=1)
    assert err == "Error: UNKNOWN_TOPIC_OR_PARTITION: Topic missing does not exist\n"


def test_scram_users_added_listed_deleted_and_used_to_log_in(sasl_broker, capsys, tmp_path: Path) -> None:
    broker, sasl = sasl_broker
    b = ["--bootstrap-server", broker.bootstrap]
    mine, _ = ours(capsys, *b, "--alter", "--entity-type", "users", "--entity-name", "alice",
                   "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
    assert mine == "Completed updating config for user alice.\n"
    ours(capsys, *b, "--alter", "--user", "alice", "--add-config", "SCRAM-SHA-512=[password=alice-512]")
    ours(capsys, *b, "--alter", "--user", "bob", "--add-config", "SCRAM-SHA-512=[password=bob-secret]")

    mine, _ = ours(capsys, *b, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert mine == ("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
                    "SCRAM-SHA-512=iterations=4096\n")
    everyone, _ = ours(capsys, *b, "--describe", "--entity-type", "users")
    assert sorted(everyone.splitlines()) == [
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096",
    ]
    assert ours(capsys, *b, "--describe", "--user", "nobody")[0] == ""  # as Kafka: no line for no credential

    # the password the tool salted and hashed is the one the broker checks
    roundtrip_kafka_python(sasl, "cfg-scram-256", security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                           sasl_plain_username="alice", sasl_plain_password="alice-secret")
    roundtrip_kafka_python(sasl, "cfg-scram-512", security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                           sasl_plain_username="bob", sasl_plain_password="bob-secret")
    # ... and the tool itself logs in with it (--command-config, as Kafka's tools)
    props = tmp_path / "alice.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     'username="alice" password="alice-secret";\n')
    mine, _ = ours(capsys, "--bootstrap-server", sasl, "--command-config", str(props), "--describe", "--user", "bob")
    assert mine == "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096\n"

    # two mechanisms in one --alter: Kafka's KRaft controller refuses it, and so does Odradek
    _, err = ours(capsys, *b, "--alter", "--user", "carol",
                  "--add-config", "SCRAM-SHA-256=[password=c],SCRAM-SHA-512=[password=c]", code=1)
    assert err.startswith("Error: DUPLICATE_RESOURCE: A user credential cannot be altered twice in the same request")

    mine, _ = ours(capsys, *b, "--alter", "--user", "alice", "--delete-config", "SCRAM-SHA-256")
    assert mine == "Completed updating config for user alice.\n"
    assert ours(capsys, *b, "--describe", "--user", "alice")[0] == \
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096\n"
    with pytest.raises(KafkaError):
        producer = KafkaProducer(bootstrap_servers=sasl, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                                 sasl_plain_password="alice-secret", max_block_ms=5000)
        producer.send("cfg-scram-gone", b"x").get(10)
    _, err = ours(capsys, *b, "--alter", "--user", "alice", "--delete-config", "SCRAM-SHA-256", code=1)
    assert err == "Error: RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist\n"


def test_users_describe_matches_kafkas_tool_on_odradek(sasl_broker, capsys) -> None:
    broker, _ = sasl_broker
    b = ["--bootstrap-server", broker.bootstrap]
    ours(capsys, *b, "--alter", "--user", "alice", "--add-config", "SCRAM-SHA-256=[password=x]")
    outputs = {}
    for args in (["--describe", "--user", "alice"], ["--describe", "--entity-type", "users"],
                 ["--describe", "--user", "nobody"]):
        outputs[args[-1]] = theirs = kafka(*b, *args)[0]
        assert ours(capsys, *b, *args)[0] == theirs, args
    assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096" in outputs["alice"]


def test_users_alter_and_describe_match_kafkas_tool_on_kafka(kafka_broker, capsys) -> None:
    b = ["--bootstrap-server", kafka_broker.bootstrap]
    ours(capsys, *b, "--alter", "--user", "dora", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=d]")
    ours(capsys, *b, "--alter", "--user", "dora", "--add-config", "SCRAM-SHA-512=[password=d]")
    kafka(*b, "--alter", "--user", "eve", "--add-config", "SCRAM-SHA-512=[iterations=5000,password=e]")
    for args in (["--describe", "--user", "dora"], ["--describe", "--entity-type", "users"],
                 ["--describe", "--user", "nobody"]):
        assert ours(capsys, *b, *args)[0] == kafka(*b, *args)[0], args
    # the same failure for two mechanisms in one command
    _, theirs = kafka(*b, "--alter", "--user", "fay", "--add-config",
                      "SCRAM-SHA-256=[password=f],SCRAM-SHA-512=[password=f]", code=1)
    assert "DuplicateResourceException: A user credential cannot be altered twice in the same request" in theirs
    _, err = ours(capsys, *b, "--alter", "--user", "fay", "--add-config",
                  "SCRAM-SHA-256=[password=f],SCRAM-SHA-512=[password=f]", code=1)
    assert "DUPLICATE_RESOURCE: A user credential cannot be altered twice in the same request" in err
    # topics on a real Kafka: the same text too
    assert main(["topics", *b, "--create", "--topic", "cfg-kafka"]) == 0
    ours(capsys, *b, "--alter", "--topic", "cfg-kafka", "--add-config", "retention.ms=604800000")
    for args in (["--describe", "--topic", "cfg-kafka"], ["--describe", "--all", "--topic", "cfg-kafka"]):
        assert ours(capsys, *b, *args)[0] == kafka(*b, *args)[0], args
