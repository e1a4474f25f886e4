"""Oracle: Odradek's CLI tools print what Kafka 4.1's own tools print for the same broker state.

Kafka's tool classes (TopicCommand, GetOffsetShell, ConsoleConsumer, ConsumerGroupCommand)
run from the Kafka jars against a real Kafka broker, next to `odradek topics`, `get-offsets`,
`console-consumer` and `consumer-groups`. Where Kafka's row order is arbitrary (hash order of
partitions), rows are compared sorted; everything else byte for byte.
"""

from __future__ import annotations

import io
import sys

import pytest
from kafka_oracle import require_tool, run_java_tool

from odradek.cli import main

TOPIC = "oracle-cli"
GROUP = "oracle-cli-group"


@pytest.fixture(scope="module")
def bootstrap(kafka_broker) -> str:
    require_tool("kafka")
    return kafka_broker.bootstrap


def ours(capsys: pytest.CaptureFixture, *argv: str, stdin: str | None = None) -> tuple[str, str]:
    capsys.readouterr()
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        assert main(list(argv)) == 0
    finally:
        sys.stdin = saved
    return capsys.readouterr()


def kafka(main_class: str, *args: str) -> tuple[str, str]:
    proc = run_java_tool(main_class, list(args))
    assert proc.returncode == 0, proc.stderr
    # Kafka's JVM may add log4j noise on stderr; keep the tool's own lines.
    err = "\n".join(line for line in proc.stderr.splitlines() if "log4j" not in line.lower() and "SLF4J" not in line)
    return proc.stdout, err


def _sorted_body(text: str, header_lines: int) -> tuple[list[str], list[str]]:
    lines = text.splitlines()
    return lines[:header_lines], sorted(lines[header_lines:])


def test_tools_match_kafkas_own_tools(bootstrap: str, capsys) -> None:
    b = ["--bootstrap-server", bootstrap]
    ours(capsys, "topics", *b, "--create", "--topic", TOPIC, "--partitions", "3", "--config", "retention.ms=123456789")
    lines = "".join(f"key-{i}:value-{i}\n" for i in range(9))
    ours(capsys, "console-producer", *b, "--topic", TOPIC, "--property", "parse.key=true",
         "--property", "key.separator=:", stdin=lines)

    # kafka-topics.sh --describe: identical text (topic id included: same topic).
    mine, _ = ours(capsys, "topics", *b, "--describe", "--topic", TOPIC)
    theirs, _ = kafka("org.apache.kafka.tools.TopicCommand", *b, "--describe", "--topic", TOPIC)
    assert mine == theirs

    # kafka-get-offsets.sh, latest and earliest.
    for time_arg in ("-1", "-2"):
        mine, _ = ours(capsys, "get-offsets", *b, "--topic", TOPIC, "--time", time_arg)
        theirs, _ = kafka("org.apache.kafka.tools.GetOffsetShell", *b, "--topic", TOPIC, "--time", time_arg)
        assert mine == theirs

    # kafka-console-consumer.sh with every print property: the same lines (partition order may differ).
    props = ["--property", "print.key=true", "--property", "print.partition=true", "--property",
             "print.offset=true", "--property", "print.timestamp=true", "--property", "print.headers=true"]
    consume = ["--topic", TOPIC, "--from-beginning", "--max-messages", "9", *props]
    mine, mine_err = ours(capsys, "console-consumer", *b, *consume)
    theirs, theirs_err = kafka("org.apache.kafka.tools.consumer.ConsoleConsumer", *b, *consume)
    assert sorted(mine.splitlines()) == sorted(theirs.splitlines())
    assert mine_err.strip().splitlines()[-1] == theirs_err.strip().splitlines()[-1] == "Processed a total of 9 messages"

    # A group that consumed part of the topic, then kafka-consumer-groups.sh.
    ours(capsys, "console-consumer", *b, "--topic", TOPIC, "--group", GROUP, "--from-beginning", "--max-messages", "9")
    ours(capsys, "console-producer", *b, "--topic", TOPIC, stdin="late-1\nlate-2\n")
    groups_tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

    mine, mine_err = ours(capsys, "consumer-groups", *b, "--describe", "--group", GROUP)
    theirs, theirs_err = kafka(groups_tool, *b, "--describe", "--group", GROUP)
    assert _sorted_body(mine, 2) == _sorted_body(theirs, 2)
    assert mine_err.strip() == theirs_err.strip() == f"Consumer group '{GROUP}' has no active members."

    mine, _ = ours(capsys, "consumer-groups", *b, "--describe", "--group", GROUP, "--state")
    theirs, _ = kafka(groups_tool, *b, "--describe", "--group", GROUP, "--state")
    assert mine == theirs

    reset = ["--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--dry-run"]
    mine, _ = ours(capsys, "consumer-groups", *b, *reset)
    theirs, _ = kafka(groups_tool, *b, *reset)
    assert _sorted_body(mine, 2) == _sorted_body(theirs, 2)

    mine, _ = ours(capsys, "consumer-groups", *b, "--list")
    theirs, _ = kafka(groups_tool, *b, "--list")
    assert sorted(mine.split()) == sorted(theirs.split())
