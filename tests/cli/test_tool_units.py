"""Unit tests of the CLI tools' pure parts: partitioner, formatter, line reader, consumer
protocol codec, range assignment, log-level parsing."""

from __future__ import annotations

import argparse
import io
import json
import logging

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from odradek.logging_setup import JsonFormatter, parse_levels
from odradek.tools.client import FetchedRecord, parse_bootstrap
from odradek.tools.console_consumer import MessageFormatter
from odradek.tools.console_producer import LineReader, read_batches
from odradek.tools.group_client import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)
from odradek.tools.partitioner import RoundRobin, murmur2, partition_for_key


@pytest.mark.parametrize(
    "key, java",
    # Values of Java's Utils.murmur2 (signed int) for these keys.
    [(b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
     (b"a-little-bit-longer-string", -1486304829), (b"abc", 479470107)],
)
def test_murmur2_matches_java(key: bytes, java: int) -> None:
    assert murmur2(key) == java


def test_murmur2_matches_kafka_python_for_every_tail_length() -> None:
    for n in range(0, 40):
        data = bytes((i * 37 + n) & 0xFF for i in range(n))
        assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data) & 0xFFFFFFFF
        assert 0 <= partition_for_key(data, 7) < 7


def test_round_robin_cycles() -> None:
    rr = RoundRobin()
    assert [rr.next(3) for _ in range(5)] == [0, 1, 2, 0, 1]


def _record(key: bytes | None = b"k", value: bytes | None = b"v") -> FetchedRecord:
    return FetchedRecord("t", 2, 7, 1_700_000_000_123, "CreateTime", key, value, [("h", b"x")])


def test_formatter_defaults_to_the_value_only() -> None:
    assert MessageFormatter({}).format(_record()) == "v\n"
    assert MessageFormatter({}).format(_record(value=None)) == "null\n"


def test_formatter_field_order_and_separators_follow_kafka() -> None:
    props = {p: "true" for p in ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key")}
    assert MessageFormatter(props).format(_record()) == "CreateTime:1700000000123\tPartition:2\tOffset:7\th:x\tk\tv\n"
    props = {"print.key": "true", "key.separator": " => ", "line.separator": "\\n--\\n", "null.literal": "-"}
    assert MessageFormatter(props).format(_record(key=None)) == "- => v\n--\n"
    assert MessageFormatter({"print.key": "true", "print.value": "false"}).format(_record()) == "k\n"


def test_line_reader_keys_and_errors() -> None:
    assert LineReader({}).parse("a:b") == (None, b"a:b")
    assert LineReader({"parse.key": "true", "key.separator": ":"}).parse("a:b:c") == (b"a", b"b:c")
    with pytest.raises(ValueError, match="No key separator"):
        LineReader({"parse.key": "true"}).parse("no tab here")
    assert LineReader({"parse.key": "true", "ignore.error": "true"}).parse("x") == (None, b"x")


def test_read_batches_respects_the_batch_size() -> None:
    batches = list(read_batches(io.StringIO("".join(f"{i}\n" for i in range(5))), 2))
    assert batches == [["0", "1"], ["2", "3"], ["4"]]


def test_consumer_protocol_roundtrip_and_kafka_layout() -> None:
    data = encode_subscription(["a", "b"])
    # version int16, then an array of strings: Kafka's ConsumerProtocolSubscription v0.
    assert data[:2] == b"\x00\x00" and data[2:6] == b"\x00\x00\x00\x02"
    assert decode_subscription(data) == ["a", "b"]
    assignment = [("a", 0), ("a", 2), ("b", 1)]
    assert decode_assignment(encode_assignment(assignment)) == assignment
    assert decode_assignment(b"") == []


def test_range_assign_like_kafka() -> None:
    plan = range_assign({"m2": ["t"], "m1": ["t", "u"]}, {"t": 5, "u": 2})
    assert plan == {"m1": [("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1)], "m2": [("t", 3), ("t", 4)]}


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    with pytest.raises(ValueError):
        parse_bootstrap("nohost")


def test_log_levels_and_json_format() -> None:
    assert parse_levels("odradek.server=WARN, odradek.handlers=trace") == {
        "odradek.server": logging.WARNING, "odradek.handlers": logging.DEBUG,
    }
    with pytest.raises(ValueError):
        parse_levels("odradek.server=LOUD")
    record = logging.LogRecord("odradek.x", logging.INFO, __file__, 1, "hello %s", ("world",), None)
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "hello world" and entry["level"] == "INFO" and entry["logger"] == "odradek.x"


def test_every_tool_registers_its_arguments() -> None:
    from odradek.cli import CLIENT_TOOLS, build_parser

    for command, _, _ in CLIENT_TOOLS:
        parser = build_parser(command)  # the selected tool's module is the one imported
        args = parser.parse_args([command, "--bootstrap-server", "h:1", *(["--list"] if command in (
            "topics", "consumer-groups", "share-groups", "streams-groups") else []),
            *(["--topic", "t"] if "console" in command else [])])
        assert isinstance(args, argparse.Namespace) and callable(args.func)
