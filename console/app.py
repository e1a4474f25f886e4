"""The console's web app: a JSON API over :mod:`.admin`, :mod:`.messages` and :mod:`.groups`,
and the static single-page front end.

Each API call borrows a client from the pool, so the browser's requests run on the server's
worker threads; nothing here shares state with a broker process.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, jsonify, request, send_from_directory

from ..tools.client import KafkaClient, KafkaError
from ..tools.client_security import AuthenticationError
from . import admin, groups, messages
from .pool import ClientPool

STATIC_DIR = str(resources.files(__package__) / "static")


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def create_app(pool: ClientPool, *, connection_info: dict[str, Any] | None = None,
               allowed_hosts: frozenset[str] | None = LOOPBACK_NAMES) -> Flask:
    """The WSGI app of a console that reads the cluster through `pool`.

    `connection_info` is what the cluster page says about how the console connects (bootstrap
    servers, security protocol, SASL mechanism and user name; never a password or key).
    `allowed_hosts`: the host names the browser may call the console by (None: any).
    """
    app = Flask(__name__, static_folder=None)

    @app.before_request
    def same_origin_only() -> tuple[Response, int] | None:
        # The console has no login: a web page open in the same browser must not be able to drive
        # it. A Host outside `allowed_hosts` is a DNS-rebinding attempt; a changing request from
        # another Origin is cross-site (and JSON bodies, required below, force a CORS preflight
        # that the console never grants).
        host = (request.host or "").rsplit(":", 1)[0].strip("[]")
        if allowed_hosts is not None and host not in allowed_hosts:
            return jsonify({"error": f"host {host!r} not allowed"}), 403
        origin = request.headers.get("Origin")
        if request.method != "GET" and origin and urlsplit(origin).netloc != request.host:
            return jsonify({"error": "cross-origin requests are not allowed"}), 403
        return None
    history = groups.LagHistory()
    info = dict(connection_info or {"bootstrap": pool.bootstrap})

    def api(body: Callable[[KafkaClient], Any]) -> Response | tuple[Response, int]:
        try:
            with pool.client() as client:
                return jsonify(body(client))
        except KafkaError as exc:
            return jsonify({"error": str(exc)}), 400
        except ValueError as exc:
            return jsonify({"error": str(exc)}), 400
        except AuthenticationError as exc:
            return jsonify({"error": f"authentication failed: {exc}"}), 502
        except (OSError, ConnectionError) as exc:
            return jsonify({"error": f"cannot reach the cluster: {exc}"}), 502

    @app.errorhandler(ValueError)
    def bad_value(exc: ValueError) -> tuple[Response, int]:
        return jsonify({"error": str(exc)}), 400

    @app.get("/")
    def index() -> Response:
        return send_from_directory(STATIC_DIR, "index.html")

    @app.get("/static/<path:name>")
    def static_file(name: str) -> Response:
        return send_from_directory(STATIC_DIR, name)

    @app.get("/api/connection")
    def connection() -> Response:
        return jsonify(info)

    @app.get("/api/cluster")
    def cluster() -> Any:
        return api(admin.cluster)

    @app.get("/api/topics")
    def topics() -> Any:
        return api(admin.topics)

    @app.post("/api/topics")
    def create_topic() -> Any:
        body = _json_body()
        name = str(body.get("name", "")).strip()
        if not name:
            return jsonify({"error": "a topic name is needed"}), 400
        configs = {str(k): str(v) for k, v in (body.get("configs") or {}).items()}
        return api(lambda c: admin.create_topic(c, name, _int(body.get("partitions")),
                                                _int(body.get("replication_factor")), configs) or {"created": name})

    @app.get("/api/topics/<name>")
    def topic(name: str) -> Any:
        return api(lambda c: admin.topic(c, name))

    @app.delete("/api/topics/<name>")
    def delete_topic(name: str) -> Any:
        return api(lambda c: admin.delete_topic(c, name) or {"deleted": name})

    @app.post("/api/topics/<name>/configs")
    def alter_configs(name: str) -> Any:
        body = _json_body()
        set_configs = {str(k): str(v) for k, v in (body.get("set") or {}).items()}
        delete = [str(k) for k in body.get("delete") or []]
        return api(lambda c: admin.alter_topic_configs(c, name, set_configs, delete) or {"altered": name})

    @app.get("/api/topics/<name>/messages")
    def read_messages(name: str) -> Any:
        args = request.args
        if args.get("positions"):
            positions = _positions(args["positions"])
            return api(lambda c: messages.follow(c, name, positions, _int(args.get("limit")) or 200))
        partition = args.get("partition", "")
        return api(lambda c: messages.read_page(
            c, name, partition=int(partition) if partition not in ("", "all") else None,
            mode=args.get("from", "end"), value=_int(args.get("value")), limit=_int(args.get("limit")) or 50))

    @app.post("/api/topics/<name>/produce")
    def produce(name: str) -> Any:
        body = _json_body()
        headers = [(str(h.get("key", "")), h.get("value")) for h in body.get("headers") or [] if h.get("key")]
        return api(lambda c: messages.produce(c, name, key=body.get("key"), value=body.get("value"),
                                              headers=headers, partition=_int(body.get("partition"))))

    @app.get("/api/groups")
    def list_groups() -> Any:
        return api(groups.list_groups)

    @app.get("/api/groups/<group>")
    def group(group: str) -> Any:
        def body(client: KafkaClient) -> dict[str, Any]:
            desc = groups.describe(client, group, request.args.get("type") or None)
            desc["history"] = history.add(group, desc["total_lag"])
            return desc
        return api(body)

    @app.get("/api/acls")
    def acls() -> Any:
        return api(admin.acls)

    @app.get("/api/quotas")
    def quotas() -> Any:
        return api(admin.quotas)

    return app


def _json_body() -> dict[str, Any]:
    """The request's JSON object; only `application/json` bodies (never a cross-site form post)."""
    if not request.is_json:
        raise ValueError("the body must be application/json")
    body = request.get_json()
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return body


def _int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a whole number") from None


def _positions(text: str) -> dict[int, int]:
    """`0:12,1:40` (partition:next offset) -> {0: 12, 1: 40}."""
    out = {}
    for item in text.split(","):
        p, _, o = item.partition(":")
        out[int(p)] = int(o)
    return out
