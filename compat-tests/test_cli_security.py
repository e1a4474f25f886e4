"""The CLI tools against SSL, SASL_PLAINTEXT and SASL_SSL listeners of a real Odradek (#13).

The tools take Kafka's client properties files (``--command-config`` for topics,
consumer-groups, get-offsets and broker-api-versions; ``--producer.config`` /
``--consumer.config`` for the console producer and consumer), so the same client.properties
serves Kafka's scripts and Odradek's. Certificates and listener set-up come from
test_security.py (generated with ``cryptography``, nothing from the network).

* SSL with mutual TLS: trust store as a PEM file, client key store as a PEM file; without the
  client certificate, or without the CA, the tools fail with a clear message and exit code 1.
* SASL_PLAINTEXT with PLAIN and SCRAM-SHA-512: topics --create / --list; a wrong password
  prints the broker's SaslAuthenticate message and exits 1 (checked in a real subprocess).
* SASL_SSL with SCRAM-SHA-512: console-producer -> console-consumer (with a group) round trip.
* Kafka's own kafka-topics (TopicCommand, from the Kafka jars) with the very same
  client.properties file against the Odradek SASL_SSL listener.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from test_security import JAAS_PLAIN, Pki, sasl_overrides, start_with_listener

from odradek.cli import main

ODRADEK_ROOT = Path(__file__).resolve().parents[1]

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
              'password="{password}";')
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
              'password="{password}";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("cli-pki"))


def write_properties(path: Path, props: dict[str, object]) -> Path:
    # the JAAS value on continuation lines, as people write it in client.properties
    lines = []
    for key, value in props.items():
        text = str(value)
        if key == "sasl.jaas.config":
            text = text.replace(" username=", " \\\n    username=").replace(" password=", " \\\n    password=")
        lines.append(f"{key}={text}")
    path.write_text("# written by test_cli_security\n" + "\n".join(lines) + "\n")
    return path


def sasl_properties(tmp: Path, name: str, protocol: str, mechanism: str, password: str = "alice-secret",
                    pki: Pki | None = None) -> Path:
    jaas = (PLAIN_JAAS if mechanism == "PLAIN" else SCRAM_JAAS).format(password=password)
    props: dict[str, object] = {"security.protocol": protocol, "sasl.mechanism": mechanism, "sasl.jaas.config": jaas}
    if pki is not None:
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca_file})
    return write_properties(tmp / name, props)


def run_cli(capsys: pytest.CaptureFixture, *argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    capsys.readouterr()
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = main([str(a) for a in argv])
    finally:
        sys.stdin = saved
    out, err = capsys.readouterr()
    return code, out, err


def run_subprocess(*argv: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *(str(a) for a in argv)], capture_output=True,
                          text=True, timeout=60, cwd=ODRADEK_ROOT.parent)


# ------------------------------------------------------------------------------------------------
# SSL (mutual TLS)
# ------------------------------------------------------------------------------------------------

def test_tools_over_ssl_with_client_certificate(odradek_broker_factory, pki: Pki, tmp_path: Path, capsys) -> None:
    _, bootstrap = start_with_listener(odradek_broker_factory, "SSL", {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_pem_file, "ssl.key.password": "key-secret",
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca_file,
    })
    keystore = tmp_path / "client-keystore.pem"
    keystore.write_bytes(pki.client_cert.read_bytes() + pki.client_key.read_bytes())
    config = write_properties(tmp_path / "ssl.properties", {
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca_file,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": keystore,
    })
    b = ["--bootstrap-server", bootstrap]
    assert run_cli(capsys, "topics", *b, "--command-config", config, "--create", "--topic", "tls-cli",
                   "--partitions", "2")[:2] == (0, "Created topic tls-cli.\n")
    code, out, _ = run_cli(capsys, "topics", *b, "--command-config", config, "--list")
    assert code == 0 and "tls-cli" in out.splitlines()
    code, out, _ = run_cli(capsys, "broker-api-versions", *b, "--command-config", config)
    assert code == 0 and out.startswith(f"{bootstrap} (id: ") and "SaslHandshake(17)" in out
    assert run_cli(capsys, "get-offsets", *b, "--command-config", config, "--topic", "tls-cli")[:2] == (
        0, "tls-cli:0:0\ntls-cli:1:0\n")

    # without the client certificate the broker refuses the handshake (ssl.client.auth=required)
    no_cert = write_properties(tmp_path / "no-cert.properties", {
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca_file})
    code, _, err = run_cli(capsys, "topics", *b, "--command-config", no_cert, "--list")
    assert code == 1 and "Error: SSL handshake failed with 127.0.0.1" in err and "client certificate" in err, err
    # without the CA the broker's certificate does not verify (the system CAs do not know it)
    no_ca = write_properties(tmp_path / "no-ca.properties", {"security.protocol": "SSL"})
    code, _, err = run_cli(capsys, "topics", *b, "--command-config", no_ca, "--list")
    assert code == 1 and "SSL handshake failed with 127.0.0.1" in err and "certificate verify failed" in err, err
    # a PLAINTEXT client on the SSL port fails instead of hanging forever
    code, _, err = run_cli(capsys, "topics", *b, "--request-timeout-ms", "3000", "--list")
    assert code == 1 and err.startswith("Error: cannot reach") and "--command-config" in err, err


# ------------------------------------------------------------------------------------------------
# SASL_PLAINTEXT
# ------------------------------------------------------------------------------------------------

def test_tools_over_sasl_plaintext(odradek_broker_factory, tmp_path: Path, capsys) -> None:
    _, bootstrap = start_with_listener(odradek_broker_factory, "SASL_PLAINTEXT", sasl_overrides("PLAIN,SCRAM-SHA-512"))
    b = ["--bootstrap-server", bootstrap]
    assert "user_alice" in JAAS_PLAIN  # the broker's PLAIN users (test_security.py)
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        config = sasl_properties(tmp_path, f"{mechanism}.properties", "SASL_PLAINTEXT", mechanism)
        topic = f"sasl-cli-{mechanism.lower()}"
        assert run_cli(capsys, "topics", *b, "--command-config", config, "--create", "--topic", topic)[:2] == (
            0, f"Created topic {topic}.\n")
        code, out, err = run_cli(capsys, "topics", *b, "--command-config", config, "--list")
        assert code == 0 and topic in out.splitlines(), err
        assert run_cli(capsys, "consumer-groups", *b, "--command-config", config, "--list")[0] == 0

    # a wrong password: the broker's SaslAuthenticate message, exit code 1 (a real process)
    for mechanism, message in (
        ("PLAIN", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-512", "Authentication failed during authentication due to invalid credentials with SASL "
                          "mechanism SCRAM-SHA-512"),
    ):
        wrong = sasl_properties(tmp_path, f"wrong-{mechanism}.properties", "SASL_PLAINTEXT", mechanism, "nope")
        proc = run_subprocess("topics", *b, "--command-config", wrong, "--list")
        assert proc.returncode == 1, proc
        assert proc.stderr.strip().splitlines()[-1] == f"Error: SASL_AUTHENTICATION_FAILED: {message}", proc.stderr
        assert proc.stdout == ""

    # a mechanism the listener does not enable
    other = sasl_properties(tmp_path, "sha256.properties", "SASL_PLAINTEXT", "SCRAM-SHA-256")
    code, _, err = run_cli(capsys, "topics", *b, "--command-config", other, "--list")
    assert code == 1 and "UNSUPPORTED_SASL_MECHANISM: Client SASL mechanism 'SCRAM-SHA-256' not enabled" in err, err
    # no --command-config on a SASL listener: the broker closes the connection, the tool says so
    code, _, err = run_cli(capsys, "topics", *b, "--request-timeout-ms", "5000", "--list")
    assert code == 1 and err.startswith("Error: cannot reach") and "--command-config" in err, err
    # a config that cannot work is refused before connecting
    missing = tmp_path / "missing.properties"
    code, _, err = run_cli(capsys, "topics", *b, "--command-config", missing, "--list")
    assert code == 1 and f"cannot read {missing}" in err


# ------------------------------------------------------------------------------------------------
# SASL_SSL: producer -> consumer, and Kafka's own kafka-topics with the same file
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def sasl_ssl(odradek_broker_factory, pki: Pki) -> str:
    _, bootstrap = start_with_listener(odradek_broker_factory, "SASL_SSL", {
        **sasl_overrides("SCRAM-SHA-512"), "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": pki.server_p12, "ssl.keystore.password": "store-secret"})
    return bootstrap


def test_console_roundtrip_over_sasl_ssl_scram(sasl_ssl: str, pki: Pki, tmp_path: Path, capsys) -> None:
    b = ["--bootstrap-server", sasl_ssl]
    producer = sasl_properties(tmp_path, "producer.properties", "SASL_SSL", "SCRAM-SHA-512", pki=pki)
    with producer.open("a") as f:
        f.write("acks=all\n")
    consumer = sasl_properties(tmp_path, "consumer.properties", "SASL_SSL", "SCRAM-SHA-512", pki=pki)
    with consumer.open("a") as f:
        f.write("group.id=cli-secure-group\n")
    lines = "".join(f"k{i}:v{i}\n" for i in range(10))
    code, _, err = run_cli(capsys, "console-producer", *b, "--producer.config", producer, "--topic", "secure-cli",
                           "--reader-property", "parse.key=true", "--reader-property", "key.separator=:", stdin=lines)
    assert code == 0, err
    code, out, err = run_cli(capsys, "console-consumer", *b, "--consumer.config", consumer, "--topic", "secure-cli",
                             "--from-beginning", "--max-messages", "10", "--timeout-ms", "20000",
                             "--formatter-property", "print.key=true")
    assert code == 0, err
    assert sorted(out.splitlines()) == sorted(f"k{i}\tv{i}" for i in range(10))
    assert "Processed a total of 10 messages" in err
    # the group (from consumer.config's group.id) committed its offsets
    code, out, err = run_cli(capsys, "consumer-groups", *b, "--command-config", consumer, "--describe",
                             "--group", "cli-secure-group")
    assert code == 0 and "secure-cli" in out, err
    code, out, _ = run_cli(capsys, "get-offsets", *b, "--command-config", consumer, "--topic", "secure-cli")
    assert code == 0 and out == "secure-cli:0:10\n"

    # --producer-property overrides the file (Kafka's order): a wrong password there fails
    proc = run_subprocess("console-producer", *b, "--producer.config", producer, "--topic", "secure-cli",
                          "--producer-property", "sasl.jaas.config=" + SCRAM_JAAS.format(password="wrong"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "Error: SASL_AUTHENTICATION_FAILED: Authentication failed during authentication due to invalid credentials "
        "with SASL mechanism SCRAM-SHA-512"), proc.stderr
    # and --consumer-property likewise
    code, _, err = run_cli(capsys, "console-consumer", *b, "--consumer.config", consumer, "--topic", "secure-cli",
                           "--consumer-property", "sasl.mechanism=PLAIN", "--max-messages", "1")
    assert code == 1 and "UNSUPPORTED_SASL_MECHANISM" in err, err


def test_kafka_topics_takes_the_same_client_properties(sasl_ssl: str, pki: Pki, tmp_path: Path, capsys) -> None:
    from kafka_oracle import require_tool, run_java_tool

    require_tool("kafka")
    config = sasl_properties(tmp_path, "client.properties", "SASL_SSL", "SCRAM-SHA-512", pki=pki)
    b = ["--bootstrap-server", sasl_ssl, "--command-config", str(config)]
    assert run_cli(capsys, "topics", *b, "--create", "--topic", "from-odradek-cli", "--partitions", "2")[0] == 0
    proc = run_java_tool("org.apache.kafka.tools.TopicCommand", [*b, "--create", "--topic", "from-kafka-cli",
                                                                 "--partitions", "3"])
    assert proc.returncode == 0, proc.stderr
    assert "Created topic from-kafka-cli." in proc.stdout
    proc = run_java_tool("org.apache.kafka.tools.TopicCommand", [*b, "--list"])
    assert proc.returncode == 0, proc.stderr
    assert {"from-odradek-cli", "from-kafka-cli"} <= set(proc.stdout.splitlines())
    code, out, _ = run_cli(capsys, "topics", *b, "--list")
    assert code == 0 and {"from-odradek-cli", "from-kafka-cli"} <= set(out.splitlines())
    # Kafka's describe and ours print the same text for the same topic
    mine = run_cli(capsys, "topics", *b, "--describe", "--topic", "from-kafka-cli")[1]
    theirs = run_java_tool("org.apache.kafka.tools.TopicCommand", [*b, "--describe", "--topic", "from-kafka-cli"])
    assert mine == theirs.stdout
