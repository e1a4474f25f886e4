"""Unit tests of the dump-log helpers: JVM behaviours, JSON rendering, options, streaming."""

from __future__ import annotations

import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from dumplog_util import run_dump

from odradek.logstore.java_hash import string_hash
from odradek.tools.dump_log import LogReader, iter_entries, parse_args
from odradek.tools.dump_log_java import (
    JavaException,
    java_file_string,
    java_parse_long,
    java_utf8,
    scala_hash_order,
)
from odradek.tools.json_converter import java_double, json_string, to_json
from odradek.wire.records import CompressionType, SimpleRecord, build_batch
from odradek.wire.schema import codec


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"plain", "plain"),
        ("\u20ac\U0001f600".encode(), "\u20ac\U0001f600"),
        (b"\xed\xa0\x80", "\ufffd"),  # encoded surrogate: one U+FFFD in Java, three in Python
        (b"\xed\xa0", "\ufffd"),  # truncated surrogate at the end: one (Python: two)
        (b"\xed\xa0A", "\ufffdA"),
        (b"\xe0\x80\x80", "\ufffd\ufffd\ufffd"),  # overlong
        (b"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"),  # above U+10FFFF
        (b"\xe2\x82A", "\ufffdA"),
        (b"\xf0\x9f\x98", "\ufffd"),
        (b"\xc0\xaf", "\ufffd\ufffd"),
        (b"\xff", "\ufffd"),
    ],
)
def test_java_utf8(raw: bytes, text: str) -> None:
    assert java_utf8(raw) == text


def test_java_file_string_and_parse_long() -> None:
    assert java_file_string("a//b///c/") == "a/b/c"
    assert java_parse_long("00000000000000000042") == 42
    assert java_parse_long("+7") == 7
    with pytest.raises(JavaException) as e:
        java_parse_long("1_000")
    assert e.value.java_text() == 'java.lang.NumberFormatException: For input string: "1_000"'
    with pytest.raises(JavaException):
        java_parse_long("2147483648", bits=32)


def test_scala_hash_order_is_bucket_then_hash() -> None:
    names = [f"/d/p-{i}/00000000000000000000.log" for i in range(5)]
    order = scala_hash_order(names, string_hash)
    assert sorted(order) == sorted(names)

    def key(s: str) -> tuple[int, int]:
        h = string_hash(s) & 0xFFFFFFFF
        h = h ^ (h >> 16)
        signed = h - (1 << 32) if h & 0x80000000 else h
        return (h & 15, signed)

    assert order == sorted(names, key=key)


def test_json_rendering_like_jackson() -> None:
    assert json_string('a"b\\c\n\t\x01\u20ac/') == '"a\\"b\\\\c\\n\\t\\u0001\u20ac/"'
    assert [java_double(v) for v in (1.0, 0.00015, 1e7, 123.5, -0.0)] == ["1.0", "1.5E-4", "1.0E7", "123.5", "-0.0"]
    voters = bytes.fromhex(
        "0000"  # Version
        "02"  # 1 voter
        "00000001" + "c9838cac55155257d1554570f7122ac0"  # id, directory id
        + "02" + "0b" + b"CONTROLLER".hex() + "0a" + b"localhost".hex() + "2385" + "00"  # endpoints
        + "0000" + "0001" + "00"  # kraft version feature
        + "00"  # voter tags
        + "00"  # message tags
    )
    msg, _ = codec("VotersRecord", 0).decode(voters)
    assert to_json("VotersRecord", msg, 0) == (
        '{"version":0,"voters":[{"voterId":1,"voterDirectoryId":"yYOMrFUVUlfRVUVw9xIqwA","endpoints":'
        '[{"name":"CONTROLLER","host":"localhost","port":9093}],"kRaftVersionFeature":'
        '{"minSupportedVersion":0,"maxSupportedVersion":1}}]}'
    )


def test_options_imply_each_other() -> None:
    o = parse_args(["--files", "a.log", "--offsets-decoder"])
    assert (o.print_data_log, o.deep_iteration, o.decoder) == (True, True, "offsets")
    o = parse_args(["--files=a.log,b.index,", "--key-decoder-class"])
    assert o.files == ["a.log", "b.index"]
    assert o.print_data_log
    assert parse_args(["--files", "x", "--max-bytes", "10"]).max_bytes == 10


def test_usage_and_errors() -> None:
    out, err, rc = run_dump([])
    assert (out, rc) == (b"", 1) and b"--files" in err
    out, err, rc = run_dump(["--deep-iteration"])
    assert rc == 1 and err.startswith(b'Missing required argument "[files]"\n')
    out, err, rc = run_dump(["--fil", "x.log"])
    assert rc == 1 and err == b'Exception in thread "main" joptsimple.UnrecognizedOptionException: fil is not a recognized option\n'


def _big_segment(path: Path, batches: int) -> None:
    recs = [SimpleRecord(value=b"x" * 600, key=b"k%d" % i, timestamp=1_700_000_000_000 + i) for i in range(100)]
    batch = bytearray(build_batch(recs, compression=CompressionType.NONE))
    with open(path, "wb") as f:
        for n in range(batches):
            struct.pack_into(">q", batch, 0, n * 100)
            f.write(batch)


def test_streams_a_segment_in_bounded_memory(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.log"
    _big_segment(seg, 800)  # about 50 MiB, every byte of it read (CRCs are checked)
    size = seg.stat().st_size
    tracemalloc.start()
    try:
        out, err, rc = run_dump(["--files", str(seg)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rc == 0 and err == b""
    assert out.count(b"\nbaseOffset: ") == 800
    # a 4 MiB read window and one batch at a time: the file is never held whole
    assert peak < 12 * 2**20 < size


def test_reader_window_and_entries(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.log"
    _big_segment(seg, 30)
    import os

    fd = os.open(seg, os.O_RDONLY)
    try:
        reader = LogReader(fd, seg.stat().st_size)
        entries = list(iter_entries(reader, 0, reader.size, str(seg)))
    finally:
        os.close(fd)
    assert [e.last_offset for e in entries] == [n * 100 + 99 for n in range(30)]
    assert entries[1].position == entries[0].size


def test_module_entry_points(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.log"
    _big_segment(seg, 2)
    for cmd in (["-m", "odradek.tools.dump_log"], ["-m", "odradek", "dump-log"]):
        proc = subprocess.run([sys.executable, *cmd, "--files", str(seg)], capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[:2] == [f"Dumping {seg}".encode(), b"Log starting offset: 0"]
        assert proc.stderr == b""  # no progress bar when stderr is not a terminal


def test_progress_bar_only_when_enabled() -> None:
    import io

    from odradek.tools.dump_log import Progress

    silent = io.BytesIO()
    p = Progress(silent, enabled=False)
    p.update("x.log", 50, 100)
    p.clear()
    assert silent.getvalue() == b""
    shown = io.BytesIO()
    p = Progress(shown, enabled=True)
    p.update("x.log", 50, 100)
    p.clear()
    text = shown.getvalue()
    assert b" 50.0% x.log" in text and text.endswith(b"\r\x1b[K")


def test_broken_pipe_stops_quietly(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.log"
    _big_segment(seg, 300)
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek.tools.dump_log", "--files", str(seg), "--deep-iteration"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert first.startswith(b"Dumping ")
    assert b"Traceback" not in err and proc.returncode == 1
