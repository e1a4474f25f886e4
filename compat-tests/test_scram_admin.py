"""SCRAM users managed the KRaft way (#13): AlterUserScramCredentials / DescribeUserScramCredentials
from stock admin clients, `odradek storage format --add-scram`, persistence across restarts, and
the same answers as Apache Kafka 4.4.0 (the harness default) for the same requests.

* (a) confluent-kafka's AdminClient creates a user; kafka-python and confluent-kafka producers and
  consumers log in as that user with SCRAM-SHA-256 and SCRAM-SHA-512; describe lists it; after a
  deletion the next login fails with an authentication error;
* (b) after a broker restart the user still logs in (the records are in the metadata log);
* (c) `odradek storage format --add-scram ...`, then serve: the user logs in;
* (d) raw Describe/Alter requests with good and bad input get the same per-user error codes,
  messages and result order from Odradek and from Kafka 4.4.0 (both on a PLAINTEXT listener, no
  authorizer).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaProducer
from kafka.errors import KafkaError
from test_security import roundtrip_confluent, roundtrip_kafka_python, start_with_listener

from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
SASL_ONLY = {"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _alter(admin: AdminClient, alterations) -> None:
    for _user, future in admin.alter_user_scram_credentials(alterations).items():
        future.result(30)  # raises KafkaException on a per-user error


def _described(admin: AdminClient) -> dict[str, dict[str, int]]:
    descriptions = admin.describe_user_scram_credentials().result(30)
    return {user: {info.mechanism.name: info.iterations for info in d.scram_credential_infos}
            for user, d in descriptions.items()}


def _login_both(bootstrap: str, user: str, password: str, mechanism: str, topic: str) -> None:
    roundtrip_kafka_python(bootstrap, topic, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                           sasl_plain_username=user, sasl_plain_password=password)
    roundtrip_confluent(bootstrap, topic + "-ck", {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
                                                   "sasl.username": user, "sasl.password": password})


def _confluent_login_error(bootstrap: str, user: str, password: str, mechanism: str) -> list[str]:
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password,
                         "error_cb": lambda e: errors.append(str(e))})
    deadline = time.time() + 15
    while not errors and time.time() < deadline:
        producer.poll(0.2)
    return errors


def test_admin_created_user_logs_in_and_survives_restart(odradek_broker_factory) -> None:
    broker, sasl = start_with_listener(odradek_broker_factory, "SASL_PLAINTEXT", SASL_ONLY)
    admin = _admin(broker.bootstrap)  # the PLAINTEXT listener (no authorizer: anyone may alter)
    _alter(admin, [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                                b"alice-secret"),
                   UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                                b"bob-secret", salt=b"fixed-salt-bytes")])
    _alter(admin, [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                                b"alice-secret")])
    assert _described(admin) == {"alice": {"SCRAM_SHA_256": 4096, "SCRAM_SHA_512": 8192},
                                 "bob": {"SCRAM_SHA_512": 8192}}
    for mechanism in MECHANISMS:
        _login_both(sasl, "alice", "alice-secret", mechanism, f"scram-admin-{mechanism.lower()}")
    _login_both(sasl, "bob", "bob-secret", "SCRAM-SHA-512", "scram-admin-bob")
    # describing a user that does not exist: the admin client reports RESOURCE_NOT_FOUND
    with pytest.raises(KafkaException) as missing:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(30)
    assert "RESOURCE_NOT_FOUND" in str(missing.value.args[0].name())

    # (b) a restart replays the credentials from the metadata log
    broker.restart()
    admin = _admin(broker.bootstrap)
    assert _described(admin)["alice"] == {"SCRAM_SHA_256": 4096, "SCRAM_SHA_512": 8192}
    _login_both(sasl, "alice", "alice-secret", "SCRAM-SHA-256", "scram-admin-restarted")

    # deleting the credential: the next login with it fails with an authentication error
    _alter(admin, [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_256)])
    errors = _confluent_login_error(sasl, "alice", "alice-secret", "SCRAM-SHA-256")
    assert any("Authentication failed during authentication due to invalid credentials with SASL mechanism "
               "SCRAM-SHA-256" in e for e in errors), errors
    # kafka-python: authentication fails (SaslAuthenticationFailedError, or the close right after
    # it, in its log), the producer never bootstraps
    failures = broker.console_log.read_text().count("Failed authentication with /127.0.0.1")
    with pytest.raises(KafkaError):
        producer = KafkaProducer(bootstrap_servers=sasl, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                                 sasl_plain_password="alice-secret", max_block_ms=5000)
        producer.send("scram-admin-gone", b"x").get(10)
    assert broker.console_log.read_text().count("Failed authentication with /127.0.0.1") > failures
    # the other mechanism of the same user still works, and the deletion survives a restart
    _login_both(sasl, "alice", "alice-secret", "SCRAM-SHA-512", "scram-admin-512-left")
    broker.restart()
    assert _described(_admin(broker.bootstrap))["alice"] == {"SCRAM_SHA_512": 8192}
    assert _confluent_login_error(sasl, "alice", "alice-secret", "SCRAM-SHA-256")


def test_storage_format_add_scram_then_serve(odradek_broker_factory) -> None:
    broker = odradek_broker_factory(start=False, overrides=SASL_ONLY)
    data = broker.log_dirs[0]
    cluster_id = subprocess.run([sys.executable, "-m", "odradek", "storage", "random-uuid"], check=True,
                                capture_output=True, text=True).stdout.strip()
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", "storage", "format", "-t", cluster_id, "--override", f"log.dirs={data}",
         "--add-scram", "SCRAM-SHA-256=[name=carol,password=carol-secret]",
         "--add-scram", "SCRAM-SHA-512=[name=carol,password=carol-secret,iterations=8192]"],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (data / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").is_file()
    from kafka_oracle import free_port

    port = free_port("127.0.0.1")
    broker.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{port}"
    broker.start()
    from test_security import wait_for_port

    wait_for_port(port)
    sasl = f"127.0.0.1:{port}"
    _login_both(sasl, "carol", "carol-secret", "SCRAM-SHA-512", "scram-format-512")
    _login_both(sasl, "carol", "carol-secret", "SCRAM-SHA-256", "scram-format-256")
    assert _described(_admin(broker.bootstrap)) == {"carol": {"SCRAM_SHA_256": 4096, "SCRAM_SHA_512": 8192}}
    assert _confluent_login_error(sasl, "carol", "wrong", "SCRAM-SHA-256")


# ------------------------------------------------------------------------------------------------
# (d) the same requests against Apache Kafka 4.4.0
# ------------------------------------------------------------------------------------------------

Alter = request_class(51)
Describe = request_class(50)
SALT = b"0123456789abcdef"


def _up(name: str, mechanism: int = 1, iterations: int = 4096):
    return Alter.ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=SALT,
                                          salted_password=b"s" * (32 if mechanism == 1 else 64))


def _del(name: str, mechanism: int = 1):
    return Alter.ScramCredentialDeletion(name=name, mechanism=mechanism)


SCENARIO = [
    ("alter", Alter(upsertions=[_up("alice"), _up("bob", 2, 8192)])),
    ("describe", Describe(users=[Describe.UserName(name="alice"), Describe.UserName(name="nobody"),
                                 Describe.UserName(name="bob"), Describe.UserName(name="bob")])),
    ("describe", Describe(users=None)),
    ("describe", Describe(users=[])),
    ("alter", Alter(deletions=[_del(""), _del("ghost"), _del("alice", 3), _del("alice", 2)],
                    upsertions=[_up("few", 1, 4095), _up("many", 2, 16385), _up("mech", 0), _up("twice"),
                                _up("twice", 2), _up("edge", 2, 16384)])),
    ("alter", Alter(deletions=[_del("bob", 2)], upsertions=[_up("bob", 2)])),
    ("alter", Alter(deletions=[_del("alice")], upsertions=[_up("carol", 2)])),
    ("describe", Describe(users=[Describe.UserName(name="alice"), Describe.UserName(name="carol"),
                                 Describe.UserName(name="edge")])),
    ("alter", Alter(deletions=[_del("alice")])),
]


def _run_scenario(bootstrap: str) -> list[object]:
    host, port = bootstrap.split(":")
    conn = BrokerConnection(host, int(port))
    out: list[object] = []
    try:
        assert conn.version_for(50) == 0 and conn.version_for(51) == 0
        for kind, body in SCENARIO:
            if kind == "alter":
                response = conn.send(51, body)
                out.append(sorted((r.user, r.error_code, r.error_message) for r in response.results))
                out.append([r.user for r in response.results])  # the order of Kafka's hash maps
                # Kafka's broker answers Describe from its metadata cache, which follows the
                # controller's commit a moment later
                time.sleep(0.5)
            else:
                response = conn.send(50, body)
                out.append((response.error_code, response.error_message, sorted(
                    (r.user, r.error_code, r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
                    for r in response.results)))
                out.append([r.user for r in response.results])
    finally:
        conn.close()
    return out


def test_same_answers_as_kafka(odradek_broker_factory, kafka_broker) -> None:
    odradek = odradek_broker_factory()
    ours = _run_scenario(odradek.bootstrap)
    theirs = _run_scenario(kafka_broker.bootstrap)
    for step, (mine, kafka) in enumerate(zip(ours, theirs, strict=True)):
        assert mine == kafka, f"check {step} (step {step // 2}): odradek {mine} != kafka {kafka}"
