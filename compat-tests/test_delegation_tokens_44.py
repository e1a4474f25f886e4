"""Delegation tokens (#23) with Kafka 4.4.0's own kafka-delegation-tokens.sh and a Java client, against
Odradek and against a live Kafka 4.4.0 configured the same way.

Both brokers have a PLAINTEXT listener and a SASL_PLAINTEXT listener with SCRAM-SHA-256/512 users
alice, bob and carol, ``delegation.token.secret.key`` set, tokens that live 1 h before renewal and at
most 2 days, and no authorizer. The same sequence runs against each:

* create on the PLAINTEXT listener (refused), create as alice with renewer bob, create as alice
  for owner carol with a 2 h max lifetime; describe all, and by owner; renew by the renewer, by a
  stranger (owner mismatch) and with an unknown HMAC;
* Kafka 4.4's console producer and consumer log in with the token (SCRAM, the token id as user,
  the base64 HMAC as password, ``tokenauth=true``) and produce / consume three records; a
  token-authenticated connection may not describe tokens;
* restart the broker: the tokens are still described (they are in the metadata log);
* expire the token now, describe again, and a login with the expired token fails.

The tool output is compared after masking what differs by nature (token ids, HMACs, dates, ports);
the dates printed are compared as the minutes between issue, expiry and max date.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path

import pytest
from kafka_oracle import BrokerProcess, free_port, port_accepts, require_tool, run_java_tool

from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

KAFKA = "4.4.0"
TOPIC = "dt-topic"
SECRET = "delegation-secret-for-tests"
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
TOKEN_SETTINGS = {"delegation.token.secret.key": SECRET, "delegation.token.expiry.time.ms": "3600000",
                  "delegation.token.max.lifetime.ms": "172800000"}
SCRAM_SERVER_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


def _sasl_settings() -> dict[str, str]:
    return {"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_SERVER_JAAS,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_SERVER_JAAS,
            **TOKEN_SETTINGS}


def _wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while not port_accepts("127.0.0.1", port):
        assert time.time() < deadline, f"port {port} never accepted"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def brokers(_module_factory) -> dict[str, tuple[BrokerProcess, str]]:
    require_tool(f"kafka-{KAFKA}")
    out: dict[str, tuple[BrokerProcess, str]] = {}
    # Kafka: the SCRAM users go into the bootstrap metadata (kafka-storage format --add-scram)
    kafka = _module_factory("kafka", start=False, version=KAFKA)
    sasl = free_port()
    kafka.overrides.update(_sasl_settings())
    kafka.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},CONTROLLER://127.0.0.1:{kafka.controller_port},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kafka.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    })
    for user, password in USERS.items():
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            kafka.format_args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
    kafka.start()
    _wait_for_port(sasl)
    out["kafka"] = (kafka, f"127.0.0.1:{sasl}")
    # Odradek: the same settings; its SCRAM users come from odradek.sasl.scram.credentials
    odradek = _module_factory("odradek", start=False)
    sasl = free_port()
    odradek.overrides.update(_sasl_settings())
    odradek.overrides["odradek.sasl.scram.credentials"] = ";".join(
        f"{m}=[name={u},password={p}]" for u, p in USERS.items() for m in ("SCRAM-SHA-256", "SCRAM-SHA-512"))
    odradek.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{odradek.port},SASL_PLAINTEXT://127.0.0.1:{sasl}"
    odradek.start()
    _wait_for_port(sasl)
    out["odradek"] = (odradek, f"127.0.0.1:{sasl}")
    for broker, _ in out.values():
        host, port = broker.bootstrap.rsplit(":", 1)
        conn = BrokerConnection(host, int(port))
        try:
            cls = request_class(19)
            created = conn.send(19, cls(topics=[cls.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
                                        timeout_ms=30000))
            assert [t.error_code for t in created.topics] == [0], created
        finally:
            conn.close()
    return out


def _client_config(path: Path, user: str, password: str, *, token: bool = False) -> Path:
    extra = ' tokenauth="true"' if token else ""
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{password}"{extra};\n')
    return path


def _clean(stderr: str) -> str:
    # the tools' own lines, without log4j's start-up noise and JVM warnings
    return "\n".join(line for line in stderr.splitlines()
                     if "log4j" not in line.lower() and "SLF4J" not in line and not line.startswith("WARNING"))


class Run:
    """The tool runs against one broker, masked, in order."""

    def __init__(self, broker: BrokerProcess, sasl: str, workdir: Path) -> None:
        self.broker, self.sasl, self.workdir = broker, sasl, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.secrets: dict[str, str] = {}
        self.raw: list[tuple[str, tuple[int, str, str]]] = []
        self.configs = {u: _client_config(workdir / f"{u}.properties", u, p) for u, p in USERS.items()}
        self.plaintext = workdir / "plaintext.properties"
        self.plaintext.write_text("security.protocol=PLAINTEXT\n")

    def mask(self, text: str) -> str:
        for value, name in self.secrets.items():
            text = text.replace(value, name)
        text = re.sub(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ", "[<time>] ", text, flags=re.MULTILINE)
        text = DATE.sub("<date>", text)
        return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", text)

    def tool(self, label: str, config: Path, *args: str, bootstrap: str | None = None) -> str:
        proc = run_java_tool("org.apache.kafka.tools.DelegationTokenCommand",
                             ["--bootstrap-server", bootstrap or self.sasl, "--command-config", str(config), *args],
                             version=KAFKA)
        self.raw.append((label, (proc.returncode, proc.stdout, _clean(proc.stderr))))
        return proc.stdout

    @property
    def runs(self) -> list[tuple[str, tuple[int, str, str]]]:
        """Every run, masked with the secrets known by now; a describe table's rows sorted (the
        order of the broker's token map follows the random token ids)."""
        out = []
        for label, (code, stdout, stderr) in self.raw:
            stdout = self.mask(stdout)
            if label.startswith("describe"):
                stdout = "\n".join(sorted(stdout.splitlines()))
            out.append((label, (code, stdout, self.mask(stderr))))
        return out

    def created(self, label: str, out: str) -> tuple[str, str]:
        """Token id and HMAC from the create output; masked as <label-id> / <label-hmac> from now on."""
        row = _rows(out)[0]
        token_id, mac = row[0], row[1]
        self.secrets[token_id] = f"<{label}-id>"
        self.secrets[mac] = f"<{label}-hmac>"
        return token_id, mac


def _rows(out: str) -> list[list[str]]:
    """The table rows (after the TOKENID header) of the tool's create/describe output."""
    lines = out.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("TOKENID")), None)
    if header is None:
        return []
    return [line.split() for line in lines[header + 1:] if line.strip()]


def _spans(out: str) -> list[tuple[str, int, int]]:
    """(owner, expiry - issue, max - issue) in minutes for each row of a describe table."""
    spans = []
    for row in _rows(out):
        dates = [datetime.strptime(c, "%Y-%m-%dT%H:%M") for c in row if DATE.fullmatch(c)]
        issue, expiry, maximum = dates
        spans.append((row[2], int((expiry - issue).total_seconds() // 60), int((maximum - issue).total_seconds() // 60)))
    return sorted(spans)


def _java_round_trip(run: Run, token_id: str, mac: str, tag: str) -> tuple[int, list[str]]:
    """Kafka 4.4's console producer and consumer logged in with the token: (producer exit code, values read)."""
    config = _client_config(run.workdir / f"token-{tag}.properties", token_id, mac, token=True)
    values = [f"{tag}-{i}" for i in range(3)]
    producer = run_java_tool_input("org.apache.kafka.tools.ConsoleProducer",
                                   ["--bootstrap-server", run.sasl, "--topic", TOPIC, "--command-config", str(config)],
                                   "\n".join(values) + "\n")
    consumer = run_java_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
                             ["--bootstrap-server", run.sasl, "--topic", TOPIC, "--command-config", str(config),
                              "--from-beginning", "--max-messages", "3", "--timeout-ms", "20000"], version=KAFKA)
    return producer.returncode, [v for v in consumer.stdout.split() if v.startswith(tag)]


def run_java_tool_input(main_class: str, args: list[str], stdin: str):
    """run_java_tool with `stdin` as the tool's standard input (the console producer's records)."""
    import subprocess  # noqa: PLC0415

    from kafka_oracle import FAST_JVM_OPTS, TOOL_HEAP, java_bin, kafka_classpath  # noqa: PLC0415

    cmd = [java_bin("java"), *FAST_JVM_OPTS, *TOOL_HEAP, "-cp", kafka_classpath(KAFKA), main_class, *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)


def _scenario(broker: BrokerProcess, sasl: str, workdir: Path) -> tuple[Run, dict[str, object]]:
    run = Run(broker, sasl, workdir)
    facts: dict[str, object] = {}
    alice, bob = run.configs["alice"], run.configs["bob"]
    run.tool("create on PLAINTEXT", run.plaintext, "--create", "--max-life-time-period", "-1",
             bootstrap=broker.bootstrap)
    out = run.tool("create", alice, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    token_id, mac = run.created("t1", out)
    out = run.tool("create for carol", alice, "--create", "--max-life-time-period", "7200000",
                   "--owner-principal", "User:carol")
    carol_id, carol_mac = run.created("t2", out)
    time.sleep(1)  # Kafka's broker describes from its metadata cache, which follows the controller
    # without --owner-principal the tool asks for an empty list of owners: no token
    run.tool("describe without owners", alice, "--describe")
    out = run.tool("describe all", alice, "--describe", "--owner-principal", "User:alice",
                   "--owner-principal", "User:carol")
    facts["spans"] = _spans(out)
    run.tool("describe carol's", bob, "--describe", "--owner-principal", "User:carol")
    run.tool("describe nobody's", bob, "--describe", "--owner-principal", "User:nobody")
    run.tool("renew by the renewer", bob, "--renew", "--renew-time-period", "600000", "--hmac", mac)
    run.tool("renew by a stranger", bob, "--renew", "--renew-time-period", "600000", "--hmac", carol_mac)
    run.tool("renew unknown", alice, "--renew", "--renew-time-period", "600000", "--hmac", "AAAA")
    # the tokens are in the metadata log: a restarted broker still has them, and a login works
    broker.restart()
    _wait_for_port(int(sasl.rsplit(":", 1)[1]))
    time.sleep(1)
    run.tool("describe after a restart", alice, "--describe", "--owner-principal", "User:alice",
             "--owner-principal", "User:carol")
    # the tool prints the HMAC in base64: the token's SCRAM password as it is
    facts["round trip"] = _java_round_trip(run, token_id, mac, "ok")
    token_config = _client_config(workdir / "token.properties", token_id, mac, token=True)
    run.tool("describe with the token", token_config, "--describe", "--owner-principal", "User:alice")
    run.tool("expire now", alice, "--expire", "--expiry-time-period", "-1", "--hmac", mac)
    time.sleep(1)
    run.tool("describe after expiry", alice, "--describe", "--owner-principal", "User:alice")
    run.tool("describe with the expired token", token_config, "--describe", "--owner-principal", "User:alice")
    run.tool("expire again", alice, "--expire", "--expiry-time-period", "-1", "--hmac", mac)
    facts["ids"] = (len(token_id), len(carol_id))
    return run, facts


def test_delegation_tokens_same_as_kafka(brokers, tmp_path: Path) -> None:
    theirs, their_facts = _scenario(*brokers["kafka"], tmp_path / "kafka")
    ours, our_facts = _scenario(*brokers["odradek"], tmp_path / "odradek")
    assert [label for label, _ in ours.runs] == [label for label, _ in theirs.runs]
    for (label, mine), (_, kafkas) in zip(ours.runs, theirs.runs, strict=True):
        assert mine == kafkas, label
    assert our_facts == their_facts
    # what was compared says something
    printed = dict(theirs.runs)
    assert their_facts["spans"] == [("User:alice", 60, 2880), ("User:carol", 60, 120)]
    assert their_facts["round trip"] == (0, ["ok-0", "ok-1", "ok-2"])
    assert "DelegationTokenDisabledException" not in printed["create"][2]
    assert "<t1-id>" in printed["describe all"][1] and "<t2-id>" in printed["describe all"][1]
    assert printed["renew by a stranger"][0] != 0 and "DelegationTokenOwnerMismatchException" in \
        printed["renew by a stranger"][1] + printed["renew by a stranger"][2]
    assert "<t1-id>" not in printed["describe after expiry"][1]
    assert "<t1-id>" in printed["describe after a restart"][1] and "<t2-id>" in printed["describe after a restart"][1]
