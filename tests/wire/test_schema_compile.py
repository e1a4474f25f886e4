"""How wire.schema compiles a codec: one compile() per generated function.

compile() holds the GIL from start to end, and the broker compiles codecs in a worker thread while
its event loop runs; a whole codec in one piece kept the loop waiting up to ~20 ms.
"""

from __future__ import annotations

import re

import pytest

from odradek.wire import schema


@pytest.mark.parametrize(("name", "version"), [("FetchResponse", 17), ("ConsumerGroupDescribeResponse", 0),
                                               ("ProduceRequest", 3)])
def test_each_generated_function_is_compiled_on_its_own(monkeypatch, name, version):
    pieces: list[str] = []

    def recording_compile(source, filename, mode, *args, **kwargs):
        if filename.startswith("<codec "):
            pieces.append(source)
        return compile(source, filename, mode, *args, **kwargs)

    monkeypatch.setattr(schema, "compile", recording_compile, raising=False)
    built = schema._Compiler(schema.message_def(name), version).build()
    namespace = built.encode_into.__globals__
    source = namespace["__source__"]
    defs = re.findall(r"^def (\w+)", source, re.M)
    assert len(defs) > 1 and len(pieces) == len(defs)
    for piece in pieces:
        assert len(re.findall(r"^def ", piece, re.M)) == 1
    # line numbers (tracebacks) are those of the whole source
    lines = source.splitlines()
    for fn_name in defs:
        code = namespace[fn_name].__code__
        assert lines[code.co_firstlineno - 1].startswith(f"def {fn_name}(")


def test_a_codec_compiled_in_pieces_round_trips():
    cls = schema.message_class("FetchRequest")
    codec = schema._Compiler(schema.message_def("FetchRequest"), 12).build()
    request = cls(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                  session_id=0, session_epoch=-1, topics=[cls.FetchTopic(
                      topic="t", partitions=[cls.FetchPartition(partition=3, fetch_offset=7,
                                                                partition_max_bytes=4096)])])
    decoded, end = codec.decode(codec.encode_bytes(request))
    assert decoded.topics[0].partitions[0].fetch_offset == 7 and decoded.max_wait_ms == 500
