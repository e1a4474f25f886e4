"""The console's pieces that need no cluster: rendering of keys and values, what it says about
its connection, the listener `serve --console` picks, its command line, and its web app's
static pages and answers when the cluster cannot be reached (a real closed port)."""

from __future__ import annotations

import json
import socket

import pytest

from odradek.cli import build_parser
from odradek.config import BrokerConfig
from odradek.console.app import create_app
from odradek.console.main import connection_info, console_bootstrap
from odradek.console.messages import SHOW_BYTES, render
from odradek.console.pool import ClientPool


def test_render_text_json_and_hex() -> None:
    assert render(None) is None
    plain = render(b"hello")
    assert plain == {"size": 5, "truncated": False, "text": "hello", "json": None, "hex": "68 65 6c 6c 6f"}
    doc = render(b'{"a": [1, 2], "b": "\xc3\xa9"}')
    assert doc["json"] == json.dumps({"a": [1, 2], "b": "é"}, indent=2, ensure_ascii=False)
    assert render(b"{not json")["json"] is None
    # A bare number is text, not something to pretty-print.
    assert render(b"42")["json"] is None and render(b"42")["text"] == "42"


def test_render_binary_is_hex_only() -> None:
    binary = render(bytes([0, 159, 255, 1]))
    assert binary["text"] is None and binary["json"] is None and binary["hex"] == "00 9f ff 01"


def test_render_cuts_long_values_but_keeps_utf8_whole() -> None:
    data = "é".encode() * SHOW_BYTES  # the cut falls in the middle of a two-byte character
    shown = render(data)
    assert shown["truncated"] and shown["size"] == len(data)
    assert shown["text"] == "é" * (SHOW_BYTES // 2)
    assert len(shown["hex"].split()) == SHOW_BYTES
    # Invalid UTF-8 early on is not text, cut or not.
    assert render(b"\xff" + b"a" * SHOW_BYTES)["text"] is None


def test_connection_info_never_carries_secrets() -> None:
    props = {
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="s3cret";',
        "ssl.keystore.password": "kspass",
        "ssl.key.password": "keypass",
    }
    info = connection_info("h:9093", props)
    assert info == {"bootstrap": "h:9093", "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512"}
    text = json.dumps(info)
    for secret in ("s3cret", "kspass", "keypass", "jaas"):
        assert secret not in text


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, "127.0.0.1:9092"),
        ({"listeners": "PLAINTEXT://0.0.0.0:19092"}, "127.0.0.1:19092"),
        ({"listeners": "SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9094"}, "127.0.0.1:9094"),
        ({"listeners": "INSIDE://127.0.0.1:9095", "listener.security.protocol.map": "INSIDE:PLAINTEXT"},
         "127.0.0.1:9095"),
        ({"listeners": "SSL://127.0.0.1:9093"}, None),
    ],
)
def test_serve_console_picks_a_plaintext_listener(overrides: dict[str, str], expected: str | None) -> None:
    config = BrokerConfig.load(None, [f"{k}={v}" for k, v in overrides.items()])
    assert console_bootstrap(config) == expected


def test_command_line() -> None:
    args = build_parser("console").parse_args(["console", "--bootstrap-server", "h:1", "--port", "9000"])
    assert (args.bootstrap_server, args.port, args.host) == ("h:1", 9000, "127.0.0.1")
    assert build_parser().parse_args(["serve"]).console is None
    assert build_parser().parse_args(["serve", "--console"]).console == 8080
    assert build_parser().parse_args(["serve", "--console", "8181"]).console == 8181


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_web_app_serves_its_own_assets_and_reports_an_unreachable_cluster() -> None:
    pool = ClientPool(f"127.0.0.1:{_closed_port()}", timeout=2)
    app = create_app(pool).test_client()
    index = app.get("/")
    assert index.status_code == 200 and b"/static/console.js" in index.data
    # Nothing is fetched from elsewhere: every script and stylesheet is the console's own.
    assert b"http://" not in index.data and b"https://" not in index.data
    js = app.get("/static/console.js")
    assert js.status_code == 200 and b"fetch(\"/api\"" in js.data
    assert b"http://" not in js.data.replace(b"http://www.w3.org/2000/svg", b"")
    assert app.get("/static/console.css").status_code == 200
    down = app.get("/api/topics")
    assert down.status_code == 502 and "cannot reach the cluster" in down.get_json()["error"]
    bad = app.get("/api/topics/t/messages?limit=many")
    assert bad.status_code == 400 and "whole number" in bad.get_json()["error"]


def test_other_sites_cannot_drive_the_console() -> None:
    """No login, so: JSON bodies only (a cross-site form or text/plain post is refused), no
    changing request from another Origin, no Host outside loopback (DNS rebinding)."""
    pool = ClientPool(f"127.0.0.1:{_closed_port()}", timeout=2)
    app = create_app(pool).test_client()
    local = {"Host": "127.0.0.1:8080"}
    form = app.post("/api/topics", data="name=evil", content_type="text/plain", headers=local)
    assert form.status_code == 400 and "application/json" in form.get_json()["error"]
    cross = app.post("/api/topics", json={"name": "evil"}, headers={**local, "Origin": "http://evil.example"})
    assert cross.status_code == 403
    rebound = app.get("/api/topics", headers={"Host": "evil.example:8080"})
    assert rebound.status_code == 403
    # The console's own page (same origin) gets through to the cluster (unreachable here: 502).
    own = app.post("/api/topics", json={"name": "t"}, headers={**local, "Origin": "http://127.0.0.1:8080"})
    assert own.status_code == 502
    assert app.get("/", headers={"Host": "localhost:8080"}).status_code == 200
