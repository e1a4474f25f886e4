"""Real traffic: every captured frame (Java 3.9 clients / Spark 4.0 <-> Kafka 3.9) decodes and
re-encodes to the identical bytes."""

from __future__ import annotations

import base64
import glob
import json
import os

import pytest

from odradek.wire.protocol import (
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    join_pieces,
)

CAPTURES = "/work/shared/wire-captures"
FILES = sorted(glob.glob(os.path.join(CAPTURES, "*", "conn-*.jsonl")))

pytestmark = pytest.mark.skipif(not FILES, reason="wire captures not available")


def _frames():
    for path in FILES:
        with open(path) as fh:
            for line in fh:
                yield json.loads(line)


def test_capture_count() -> None:
    assert sum(1 for _ in _frames()) == 818


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(p, CAPTURES) for p in FILES])
def test_capture_frames_reencode_identically(path: str) -> None:
    with open(path) as fh:
        records = [json.loads(line) for line in fh]
    for r in records:
        frame = base64.b64decode(r["frame_b64"])
        where = f"{path} #{r['index']} {r['direction']} {r['api_name']} v{r['api_version']}"
        if r["direction"] == "request":
            header, _ = decode_request_header(frame)
            assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
                r["api_key"], r["api_version"], r["correlation_id"], r["client_id"]), where
            req = decode_request(frame)
            out = encode_request(header.api_version, header.correlation_id, req.body,
                                 client_id=header.client_id, api_key=header.api_key)
        else:
            corr, body = decode_response(frame, r["api_key"], r["api_version"])
            assert corr == r["correlation_id"], where
            out = encode_response(r["api_key"], r["api_version"], corr, body)
        data = join_pieces(out)
        assert int.from_bytes(data[:4], "big") == len(frame), where
        assert data[4:] == frame, where
