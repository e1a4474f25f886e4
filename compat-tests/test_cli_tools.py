"""The Kafka-shaped CLI tools (`odradek topics`, `console-producer`, `console-consumer`,
`consumer-groups`, `get-offsets`) against a live broker: real Apache Kafka and Odradek.

Each scenario runs once per broker (``any_broker``), so the tools are checked to speak plain
Kafka, and their output formats are checked line by line.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import time

import pytest

from odradek.cli import main
from odradek.tools.partitioner import partition_for_key


def run_cli(capsys: pytest.CaptureFixture, *argv: str, stdin: str | None = None,
            monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    """Run `odradek <argv>` in-process; (exit code, stdout, stderr)."""
    capsys.readouterr()
    if stdin is not None:
        assert monkeypatch is not None
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _wait_until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.3)


def test_topics_create_list_describe_alter_delete(any_broker, capsys) -> None:
    b = ["--bootstrap-server", any_broker.bootstrap]
    code, out, _ = run_cli(capsys, "topics", *b, "--create", "--topic", "cli-topic", "--partitions", "3",
                           "--config", "retention.ms=86400000")
    assert (code, out) == (0, "Created topic cli-topic.\n")
    code, out, err = run_cli(capsys, "topics", *b, "--create", "--topic", "cli-topic", "--partitions", "3")
    assert code == 1 and "TOPIC_ALREADY_EXISTS" in err
    assert run_cli(capsys, "topics", *b, "--create", "--topic", "cli-topic", "--if-not-exists")[:2] == (0, "")
    code, out, _ = run_cli(capsys, "topics", *b, "--list")
    assert code == 0 and "cli-topic" in out.splitlines()

    code, out, _ = run_cli(capsys, "topics", *b, "--describe", "--topic", "cli-topic")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4
    m = re.fullmatch(
        r"Topic: cli-topic\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: (.*)",
        lines[0],
    )
    # Configs lists every value not at its default (the broker's own settings too), sorted.
    assert m and "retention.ms=86400000" in m.group(1).split(","), lines[0]
    assert m.group(1).split(",") == sorted(m.group(1).split(","))
    for p, line in enumerate(lines[1:]):
        assert re.fullmatch(
            rf"\tTopic: cli-topic\tPartition: {p}\tLeader: \d+\tReplicas: \d+\tIsr: \d+\tElr: \tLastKnownElr: ", line
        ), line

    assert run_cli(capsys, "topics", *b, "--alter", "--topic", "cli-topic", "--partitions", "4")[0] == 0
    assert run_cli(capsys, "topics", *b, "--alter", "--topic", "cli-topic", "--config", "cleanup.policy=compact")[0] == 0

    def described() -> str:
        return run_cli(capsys, "topics", *b, "--describe", "--topic", "cli-topic")[1]

    _wait_until(lambda: "PartitionCount: 4" in described() and "cleanup.policy=compact" in described())
    assert "retention.ms=86400000" in described()

    assert run_cli(capsys, "topics", *b, "--delete", "--topic", "cli-topic") == (0, "", "")
    _wait_until(lambda: "cli-topic" not in run_cli(capsys, "topics", *b, "--list")[1].splitlines())
    code, _, err = run_cli(capsys, "topics", *b, "--describe", "--topic", "cli-topic")
    assert code == 1 and "Topic 'cli-topic' does not exist as expected" in err
    assert run_cli(capsys, "topics", *b, "--delete", "--topic", "cli-topic", "--if-exists")[0] == 0


def test_console_producer_consumer_and_get_offsets(any_broker, capsys, monkeypatch) -> None:
    b = ["--bootstrap-server", any_broker.bootstrap]
    assert run_cli(capsys, "topics", *b, "--create", "--topic", "cli-console", "--partitions", "3")[0] == 0
    keys = [f"user-{i}" for i in range(12)]
    lines = "".join(f"{k}:value {i}\n" for i, k in enumerate(keys))
    code, out, err = run_cli(capsys, "console-producer", *b, "--topic", "cli-console", "--reader-property", "parse.key=true",
                             "--reader-property", "key.separator=:", stdin=lines, monkeypatch=monkeypatch)
    assert (code, out) == (0, ""), err
    # Keys land on Kafka's murmur2 partition, as with the Java producer.
    expected_counts = {p: 0 for p in range(3)}
    for k in keys:
        expected_counts[partition_for_key(k.encode(), 3)] += 1

    code, out, _ = run_cli(capsys, "get-offsets", *b, "--topic", "cli-console")
    assert code == 0 and out == "".join(f"cli-console:{p}:{expected_counts[p]}\n" for p in range(3))
    code, out, _ = run_cli(capsys, "get-offsets", *b, "--topic", "cli-console", "--time", "-2", "--partitions", "0,2")
    assert out == "cli-console:0:0\ncli-console:2:0\n"

    code, out, err = run_cli(
        capsys, "console-consumer", *b, "--topic", "cli-console", "--from-beginning", "--max-messages", "12",
        "--formatter-property", "print.key=true", "--formatter-property", "print.partition=true",
        "--formatter-property", "print.offset=true", "--formatter-property", "print.timestamp=true",
        "--formatter-property", "key.separator=|",
    )
    assert code == 0 and err.strip().endswith("Processed a total of 12 messages")
    seen = {}
    for line in out.splitlines():
        m = re.fullmatch(r"CreateTime:(\d{13})\|Partition:(\d)\|Offset:(\d+)\|(user-\d+)\|value (\d+)", line)
        assert m, line
        seen[m.group(4)] = (int(m.group(2)), int(m.group(3)), int(m.group(5)))
    assert sorted(seen) == sorted(keys)
    for i, k in enumerate(keys):
        assert seen[k][0] == partition_for_key(k.encode(), 3) and seen[k][2] == i

    # Assign mode on one partition from an offset: only the values print (Kafka's default).
    p0 = partition_for_key(keys[0].encode(), 3)
    code, out, _ = run_cli(capsys, "console-consumer", *b, "--topic", "cli-console", "--partition", str(p0),
                           "--offset", "1", "--timeout-ms", "3000")
    expected = [f"value {i}" for i, k in enumerate(keys) if partition_for_key(k.encode(), 3) == p0][1:]
    assert out.splitlines() == expected


def test_consumer_groups_describe_lag_and_reset(any_broker, capsys, monkeypatch) -> None:
    b = ["--bootstrap-server", any_broker.bootstrap]
    assert run_cli(capsys, "topics", *b, "--create", "--topic", "cli-groups", "--partitions", "2")[0] == 0
    run_cli(capsys, "console-producer", *b, "--topic", "cli-groups", stdin="".join(f"m{i}\n" for i in range(6)),
            monkeypatch=monkeypatch)
    code, out, err = run_cli(capsys, "console-consumer", *b, "--topic", "cli-groups", "--group", "cli-group",
                             "--from-beginning", "--max-messages", "6")
    assert code == 0 and sorted(out.splitlines()) == [f"m{i}" for i in range(6)], err
    assert "cli-group" in run_cli(capsys, "consumer-groups", *b, "--list")[1].splitlines()

    def describe() -> list[list[str]]:
        code, out, err = run_cli(capsys, "consumer-groups", *b, "--describe", "--group", "cli-group")
        assert code == 0 and err.strip() == "Consumer group 'cli-group' has no active members."
        rows = [line.split() for line in out.splitlines() if line.strip()]
        assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                           "CONSUMER-ID", "HOST", "CLIENT-ID"]
        return rows[1:]

    # The consumer left the group after committing: no members, lag 0 on both partitions.
    _wait_until(lambda: len(describe()) == 2)
    rows = describe()
    assert [r[:3] for r in rows] == [["cli-group", "cli-groups", "0"], ["cli-group", "cli-groups", "1"]]
    assert sum(int(r[3]) for r in rows) == 6 and all(r[3] == r[4] and r[5] == "0" for r in rows)
    assert all(r[6:] == ["-", "-", "-"] for r in rows)

    run_cli(capsys, "console-producer", *b, "--topic", "cli-groups", stdin="x\ny\n", monkeypatch=monkeypatch)
    assert sum(int(r[5]) for r in describe()) == 2

    code, out, _ = run_cli(capsys, "consumer-groups", *b, "--reset-offsets", "--group", "cli-group", "--topic",
                           "cli-groups", "--to-earliest", "--execute")
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert code == 0 and rows == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                                  ["cli-group", "cli-groups", "0", "0"], ["cli-group", "cli-groups", "1", "0"]]
    assert [r[3] for r in describe()] == ["0", "0"] and sum(int(r[5]) for r in describe()) == 8

    code, out, _ = run_cli(capsys, "consumer-groups", *b, "--reset-offsets", "--group", "cli-group", "--topic",
                           "cli-groups:1", "--shift-by", "1", "--dry-run")
    assert code == 0 and out.split()[-4:] == ["cli-group", "cli-groups", "1", "1"]
    assert [r[3] for r in describe()] == ["0", "0"]  # a dry run commits nothing

    # The group resumes from the reset offsets.
    code, out, _ = run_cli(capsys, "console-consumer", *b, "--topic", "cli-groups", "--group", "cli-group",
                           "--max-messages", "8")
    assert sorted(out.splitlines()) == sorted([f"m{i}" for i in range(6)] + ["x", "y"])


def test_console_script_help_speaks_kafka() -> None:
    # The installed `odradek` command, as a user runs it.
    out = subprocess.run([sys.executable, "-m", "odradek", "--help"], capture_output=True, text=True, check=True).stdout
    for command in ("topics", "console-producer", "console-consumer", "consumer-groups", "get-offsets"):
        assert command in out
    topics_help = subprocess.run([sys.executable, "-m", "odradek", "topics", "--help"],
                                 capture_output=True, text=True, check=True).stdout
    assert "kafka-topics.sh" in topics_help and "--bootstrap-server" in topics_help


def test_unreachable_bootstrap_is_a_clear_error(capsys) -> None:
    code, _, err = run_cli(capsys, "topics", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert code == 1 and "cannot reach 127.0.0.1:1" in err


def test_consumer_groups_describe_shows_active_members(any_broker, capsys) -> None:
    from kafka import KafkaConsumer

    b = ["--bootstrap-server", any_broker.bootstrap]
    assert run_cli(capsys, "topics", *b, "--create", "--topic", "cli-members", "--partitions", "2")[0] == 0
    consumer = KafkaConsumer(bootstrap_servers=any_broker.bootstrap, group_id="cli-live",
                             client_id="live-client", auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        # kafka-python may join before its first Metadata answer names a just-created topic (then the
        # leader assigns nothing, with Kafka too): subscribe once the consumer knows the partitions
        _wait_until(lambda: len(consumer.partitions_for_topic("cli-members") or ()) == 2)
        consumer.subscribe(["cli-members"])
        _wait_until(lambda: consumer.poll(timeout_ms=200) is not None and len(consumer.assignment()) == 2)
        code, out, _ = run_cli(capsys, "consumer-groups", *b, "--describe", "--group", "cli-live", "--members")
        rows = [line.split() for line in out.splitlines() if line.strip()]
        assert code == 0 and rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert len(rows) == 2 and rows[1][0] == "cli-live" and rows[1][3:] == ["live-client", "2"]
        assert rows[1][1].startswith("live-client-")
        code, out, _ = run_cli(capsys, "consumer-groups", *b, "--describe", "--group", "cli-live", "--state")
        rows = [line.split() for line in out.splitlines() if line.strip()]
        assert rows[1][0] == "cli-live" and rows[1][-3:] == ["range", "Stable", "1"]
        code, out, _ = run_cli(capsys, "consumer-groups", *b, "--describe", "--group", "cli-live")
        rows = [line.split() for line in out.splitlines() if line.strip()]
        # Nothing committed yet: CURRENT-OFFSET and LAG are "-", the owner is the live member.
        assert [r[:6] for r in rows[1:]] == [["cli-live", "cli-members", str(p), "-", "0", "-"] for p in range(2)]
        assert all(r[6].startswith("live-client-") and r[8] == "live-client" for r in rows[1:])
        code, _, err = run_cli(capsys, "consumer-groups", *b, "--reset-offsets", "--group", "cli-live",
                               "--topic", "cli-members", "--to-latest", "--execute")
        assert code == 1 and "inactive" in err
    finally:
        consumer.close()


def test_broker_api_versions_lists_what_the_broker_serves(any_broker, capsys) -> None:
    code, out, _ = run_cli(capsys, "broker-api-versions", "--bootstrap-server", any_broker.bootstrap)
    lines = out.splitlines()
    assert code == 0 and re.fullmatch(r"127\.0\.0\.1:\d+ \(id: \d+ rack: null\) -> \(", lines[0]) and lines[-1] == ")"
    entries = {}
    for line in lines[1:-1]:
        m = re.fullmatch(r"\t(\w+)\((\d+)\): (?:(\d+) to (\d+) \[usable: (\d+|NONE)\]|UNSUPPORTED),?", line)
        assert m, line
        entries[m.group(1)] = m.groups()[2:]
    assert entries["ApiVersions"][0] == "0" and entries["Produce"][2] != "NONE"
    unsupported = {name for name, versions in entries.items() if versions == (None, None, None)}
    assert unsupported  # both leave controller-only APIs (BrokerHeartbeat, ...) to the controller listener
    if any_broker.name == "odradek":
        from odradek.handlers.registry import CONTROLLER_ONLY_APIS, REGISTRY, load_handlers
        from odradek.wire.protocol import API_NAMES

        load_handlers()
        # not served, or served to brokers on a controller listener only
        assert unsupported == {API_NAMES[k] for k in API_NAMES if k not in REGISTRY or k in CONTROLLER_ONLY_APIS}
    assert run_cli(capsys, "broker-api-versions", "--bootstrap-server", any_broker.bootstrap, "--quiet")[:2] == (0, "")


def test_console_consumer_ctrl_c_commits_and_leaves(any_broker, capsys, monkeypatch) -> None:
    import signal

    b = ["--bootstrap-server", any_broker.bootstrap]
    assert run_cli(capsys, "topics", *b, "--create", "--topic", "cli-sigint", "--partitions", "2")[0] == 0
    run_cli(capsys, "console-producer", *b, "--topic", "cli-sigint", stdin="one\ntwo\nthree\n", monkeypatch=monkeypatch)
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "console-consumer", *b, "--topic", "cli-sigint", "--group", "cli-sigint",
         "--from-beginning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A shell without job control starts background jobs with SIGINT ignored; undo that so
        # the tool sees Ctrl-C as a terminal user would send it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert sorted(lines) == ["one", "three", "two"]
    assert proc.returncode == 0 and err.strip().endswith("Processed a total of 3 messages")
    code, out, err = run_cli(capsys, "consumer-groups", *b, "--describe", "--group", "cli-sigint")
    rows = [line.split() for line in out.splitlines()[2:]]
    # Left the group (no members) with every assigned partition committed at its end.
    assert "has no active members" in err
    assert sum(int(r[3]) for r in rows) == 3 and len(rows) == 2 and all(r[5] == "0" for r in rows)
