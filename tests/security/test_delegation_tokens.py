"""Delegation tokens (#23): the four APIs through dispatch, the metadata log records, a restart,
SCRAM logins with a token, and the describe filter with ACLs."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio

from odradek.config import BrokerConfig
from odradek.handlers.registry import RequestContext, dispatch, load_handlers
from odradek.kraft.log import MetadataLog
from odradek.kraft.store import MetadataStore
from odradek.security import Session
from odradek.security.acl import PERM_ALLOW, PT_LITERAL, RT_USER, AclBinding, Authorizer
from odradek.security.delegation_tokens import DelegationTokenManager, token_hmac
from odradek.security.sasl import SaslServerAuthenticator
from odradek.security.scram import salted_password
from odradek.wire.errors import ErrorCode
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class

load_handlers()

DIR_ID = Uuid.from_base64("yYuMrFRVQVSX0VVQPcMSrA")
SECRET = "s3cr3t"
CreateRequest, RenewRequest, ExpireRequest, DescribeRequest = (request_class(k) for k in (38, 39, 40, 41))


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def _broker(path: Path, clock: Clock, **props: str) -> SimpleNamespace:
    store = MetadataStore(path, 1, {path: DIR_ID}, clock)
    store.listeners = [("SASL_PLAINTEXT", "127.0.0.1", 9092, "SASL_PLAINTEXT")]
    store.start()
    settings = {"delegation.token.secret.key": SECRET, "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}
    settings.update(props)
    broker = SimpleNamespace(config=BrokerConfig({k: v for k, v in settings.items() if v is not None}),
                             metadata_store=store, forwarding=None, metrics=None)
    broker.delegation_tokens = DelegationTokenManager(broker, clock)
    return broker


def call(broker: Any, api_key: int, version: int, principal: str = "User:alice", protocol: str = "SASL_PLAINTEXT",
         token_authenticated: bool = False, **fields: Any) -> Any:
    async def run() -> Any:
        body = request_class(api_key)(**fields)
        frame = join_pieces(encode_request(version, 7, body, client_id="dt-test"))[4:]
        session = Session(protocol, protocol, principal=principal, peer="127.0.0.1:5555")
        session.authenticator = SimpleNamespace(token_authenticated=token_authenticated)
        ctx = RequestContext(broker=broker, peer="127.0.0.1:5555", listener_name=protocol, session=session)
        pieces = await dispatch(ctx, memoryview(bytearray(frame)))
        return decode_response(join_pieces(pieces)[4:], api_key, version)[1]

    return trio.run(run)


def _renewer(name: str) -> Any:
    return CreateRequest.CreatableRenewers(principal_type="User", principal_name=name)


def test_create_renew_expire_describe_and_the_records(tmp_path: Path) -> None:
    clock = Clock()
    broker = _broker(tmp_path, clock, **{"delegation.token.max.lifetime.ms": "100000",
                                         "delegation.token.expiry.time.ms": "10000"})
    r = call(broker, 38, 3, owner_principal_type=None, owner_principal_name=None, renewers=[_renewer("bob")],
             max_lifetime_ms=-1)
    assert r.error_code == 0
    assert (r.principal_type, r.principal_name, r.token_requester_principal_name) == ("User", "alice", "alice")
    now = clock.now
    assert (r.issue_timestamp_ms, r.expiry_timestamp_ms, r.max_timestamp_ms) == (now, now + 10000, now + 100000)
    # Kafka's HMAC: HmacSHA512 over the token id keyed by the secret
    assert r.hmac == hmac.new(SECRET.encode(), r.token_id.encode(), hashlib.sha512).digest()
    assert len(Uuid.from_base64(r.token_id).bytes) == 16
    token_id, mac = r.token_id, r.hmac

    # a renewer renews, with a shorter period; a stranger may not
    clock.now += 1000
    assert call(broker, 39, 2, principal="User:carol", hmac=mac, renew_period_ms=5000).error_code == \
        ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    r = call(broker, 39, 2, principal="User:bob", hmac=mac, renew_period_ms=5000)
    assert (r.error_code, r.expiry_timestamp_ms) == (0, clock.now + 5000)
    assert call(broker, 39, 2, hmac=b"nope", renew_period_ms=5000).error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND

    d = call(broker, 41, 3, owners=None)
    assert [(t.token_id, t.principal_name, t.expiry_timestamp, [x.principal_name for x in t.renewers], t.hmac)
            for t in d.tokens] == [(token_id, "alice", clock.now + 5000, ["bob"], mac)]
    # owners filter: the owner, the requester or a renewer matches; an empty list asks for nothing
    owner = DescribeRequest.DescribeDelegationTokenOwner
    assert len(call(broker, 41, 3, owners=[owner(principal_type="User", principal_name="bob")]).tokens) == 1
    assert call(broker, 41, 3, owners=[owner(principal_type="User", principal_name="zed")]).tokens == []
    assert call(broker, 41, 3, owners=[]).tokens == []

    # the records are in the metadata log and come back after a restart
    broker.metadata_store.close()
    again = _broker(tmp_path, clock)
    assert list(again.metadata_store.image.delegation_tokens) == [token_id]
    rec = again.metadata_store.image.delegation_tokens[token_id]
    assert (rec.owner, rec.requester, list(rec.renewers), rec.expiration_timestamp) == (
        "User:alice", "User:alice", ["User:bob"], clock.now + 5000)

    # expire now: a RemoveDelegationTokenRecord, the token is gone
    r = call(again, 40, 2, hmac=mac, expiry_time_period_ms=-1)
    assert (r.error_code, r.expiry_timestamp_ms) == (0, clock.now)
    assert again.metadata_store.image.delegation_tokens == {}
    assert call(again, 41, 3, owners=None).tokens == []
    again.metadata_store.close()
    names = [rec.name for rec in MetadataLog.open(tmp_path).replay_records()]
    assert names.count("DelegationTokenRecord") == 2 and names.count("RemoveDelegationTokenRecord") == 1


def test_lifetimes_are_capped_and_expired_tokens_swept(tmp_path: Path) -> None:
    clock = Clock()
    broker = _broker(tmp_path, clock, **{"delegation.token.max.lifetime.ms": "100000",
                                         "delegation.token.expiry.time.ms": "10000",
                                         "delegation.token.expiry.check.interval.ms": "60000"})
    r = call(broker, 38, 3, owner_principal_type=None, owner_principal_name=None, renewers=[], max_lifetime_ms=3000)
    assert (r.expiry_timestamp_ms, r.max_timestamp_ms) == (clock.now + 3000, clock.now + 3000)
    mac = r.hmac
    # renew never passes the max timestamp
    r = call(broker, 39, 2, hmac=mac, renew_period_ms=-1)
    assert r.expiry_timestamp_ms == clock.now + 3000
    # expire with a period moves the expiry; once expired, renew and expire say so
    r = call(broker, 40, 2, hmac=mac, expiry_time_period_ms=1000)
    assert (r.error_code, r.expiry_timestamp_ms) == (0, clock.now + 1000)
    clock.now += 2000
    assert call(broker, 39, 2, hmac=mac, renew_period_ms=1).error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert call(broker, 40, 2, hmac=mac, expiry_time_period_ms=1).error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED
    # still described until the sweep, which runs once the check interval has passed
    assert len(call(broker, 41, 3, owners=None).tokens) == 1
    clock.now += 60000
    assert call(broker, 41, 3, owners=None).tokens == []
    assert broker.metadata_store.image.delegation_tokens == {}


def test_requests_not_allowed_and_disabled(tmp_path: Path) -> None:
    clock = Clock()
    broker = _broker(tmp_path, clock)
    create = {"owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1}
    for kwargs in ({"protocol": "PLAINTEXT", "principal": "User:ANONYMOUS"}, {"token_authenticated": True},
                   {"protocol": "SSL", "principal": "User:ANONYMOUS"}):
        r = call(broker, 38, 3, **kwargs, **create)
        assert (r.error_code, r.issue_timestamp_ms, r.token_id) == (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                                                     -1, "")
        r = call(broker, 39, 2, **kwargs, hmac=b"x", renew_period_ms=1)
        assert (r.error_code, r.expiry_timestamp_ms) == (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
        r = call(broker, 40, 2, **kwargs, hmac=b"x", expiry_time_period_ms=1)
        assert (r.error_code, r.expiry_timestamp_ms) == (ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
        assert call(broker, 41, 3, **kwargs, owners=None).error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    # a client certificate's principal on SSL may
    assert call(broker, 38, 3, protocol="SSL", principal="User:CN=client", **create).error_code == 0
    r = call(broker, 38, 3, renewers=[CreateRequest.CreatableRenewers(principal_type="Group", principal_name="g")],
             owner_principal_type=None, owner_principal_name=None, max_lifetime_ms=-1)
    assert (r.error_code, r.max_timestamp_ms) == (ErrorCode.INVALID_PRINCIPAL_TYPE, -1)
    broker.metadata_store.close()

    off = _broker(tmp_path / "off", clock, **{"delegation.token.secret.key": None})
    r = call(off, 38, 3, **create)
    assert (r.error_code, r.issue_timestamp_ms, r.principal_name) == (ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0,
                                                                       "alice")
    assert call(off, 39, 2, hmac=b"x", renew_period_ms=1).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert call(off, 40, 2, hmac=b"x", expiry_time_period_ms=1).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert call(off, 41, 3, owners=None).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    off.metadata_store.close()


def test_acls_create_for_others_and_describe(tmp_path: Path) -> None:
    clock = Clock()
    broker = _broker(tmp_path, clock, **{"authorizer.class.name": "x.StandardAuthorizer",
                                         "super.users": "User:admin"})
    broker.authorizer = Authorizer(broker)
    create = {"renewers": [], "max_lifetime_ms": -1}
    r = call(broker, 38, 3, principal="User:carol", owner_principal_type="User", owner_principal_name="alice", **create)
    assert (r.error_code, r.principal_name, r.token_requester_principal_name) == (
        ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, "alice", "carol")
    broker.authorizer.create([AclBinding(RT_USER, "User:alice", PT_LITERAL, "User:carol", "*", 13, PERM_ALLOW)])
    r = call(broker, 38, 3, principal="User:carol", owner_principal_type="User", owner_principal_name="alice", **create)
    assert (r.error_code, r.principal_name, r.token_requester_principal_name) == (0, "alice", "carol")
    mine = call(broker, 38, 3, principal="User:dave", owner_principal_type=None, owner_principal_name=None, **create)
    # the requester (carol) and owner (alice) see their token; eve sees nothing until DESCRIBE_TOKENS on dave
    assert [t.token_id for t in call(broker, 41, 3, principal="User:carol", owners=None).tokens] == [r.token_id]
    assert [t.token_id for t in call(broker, 41, 3, principal="User:alice", owners=None).tokens] == [r.token_id]
    assert call(broker, 41, 3, principal="User:eve", owners=None).tokens == []
    broker.authorizer.create([AclBinding(RT_USER, "User:dave", PT_LITERAL, "User:eve", "*", 14, PERM_ALLOW)])
    assert [t.token_id for t in call(broker, 41, 3, principal="User:eve", owners=None).tokens] == [mine.token_id]
    assert len(call(broker, 41, 3, principal="User:admin", owners=None).tokens) == 2
    # the requester may not renew (only owner and renewers may)
    assert call(broker, 39, 2, principal="User:carol", hmac=r.hmac, renew_period_ms=1).error_code == \
        ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    broker.metadata_store.close()


def _scram_login(broker: Any, mechanism: str, user: str, password: str, extensions: str) -> tuple[Any, Any]:
    """A client's SCRAM exchange against the broker's authenticator; (error, authenticator)."""
    algorithm = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    session = Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", peer="127.0.0.1:1")
    auth = SaslServerAuthenticator.factory(broker, "SASL_PLAINTEXT")(session)
    assert auth.handshake(mechanism, 1) == ErrorCode.NONE
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={nonce}" + extensions
    code, _msg, reply = auth.authenticate(("n,," + first_bare).encode())
    if code != ErrorCode.NONE:
        return code, auth
    fields = dict(p.split("=", 1) for p in reply.decode().split(","))
    salted = salted_password(mechanism, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored = hashlib.new(algorithm, client_key).digest()
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={fields['r']}"
    auth_message = f"{first_bare},{reply.decode()},{without_proof}".encode()
    signature = hmac.new(stored, auth_message, algorithm).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    code, _msg, _reply = auth.authenticate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    return code, auth


def test_scram_login_with_a_token(tmp_path: Path) -> None:
    clock = Clock()
    broker = _broker(tmp_path, clock)
    r = call(broker, 38, 3, principal="User:bob", owner_principal_type="User", owner_principal_name="alice",
             renewers=[], max_lifetime_ms=-1)
    password = base64.b64encode(r.hmac).decode()
    assert password == base64.b64encode(token_hmac(SECRET, r.token_id)).decode()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        code, auth = _scram_login(broker, mechanism, r.token_id, password, ",tokenauth=true")
        assert code == ErrorCode.NONE
        assert (auth.session.principal, auth.token_authenticated) == ("User:alice", True)
    # a wrong HMAC, a token id without the extension, an unknown token: refused
    assert _scram_login(broker, "SCRAM-SHA-256", r.token_id, "AAAA", ",tokenauth=true")[0] == \
        ErrorCode.SASL_AUTHENTICATION_FAILED
    assert _scram_login(broker, "SCRAM-SHA-256", r.token_id, password, "")[0] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert _scram_login(broker, "SCRAM-SHA-256", "nope", password, ",tokenauth=true")[0] == \
        ErrorCode.SASL_AUTHENTICATION_FAILED
    # expired at once: the login fails
    assert call(broker, 40, 2, principal="User:alice", hmac=r.hmac, expiry_time_period_ms=-1).error_code == 0
    assert _scram_login(broker, "SCRAM-SHA-256", r.token_id, password, ",tokenauth=true")[0] == \
        ErrorCode.SASL_AUTHENTICATION_FAILED
    broker.metadata_store.close()


def test_the_secret_is_sensitive_in_describe_configs(tmp_path: Path) -> None:
    clock = Clock()
    broker = _broker(tmp_path, clock)
    broker.node_id = 1
    cls = request_class(32)
    r = call(broker, 32, 4, resources=[cls.DescribeConfigsResource(
        resource_type=4, resource_name="1", configuration_keys=["delegation.token.secret.key",
                                                                "delegation.token.max.lifetime.ms"])],
        include_synonyms=False, include_documentation=False)
    assert sorted((c.name, c.value, c.is_sensitive) for c in r.results[0].configs) == [
        ("delegation.token.max.lifetime.ms", "604800000", False), ("delegation.token.secret.key", None, True)]
    broker.metadata_store.close()


def test_older_versions_have_no_requester_fields(tmp_path: Path) -> None:
    clock = Clock()
    broker = _broker(tmp_path, clock)
    for version in (1, 2):
        r = call(broker, 38, version, renewers=[_renewer("bob")], max_lifetime_ms=-1)
        assert (r.error_code, r.principal_name, r.token_requester_principal_name) == (0, "alice", "")
        r = call(broker, 38, version, principal="User:ANONYMOUS", protocol="PLAINTEXT", renewers=[],
                 max_lifetime_ms=-1)
        assert r.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        d = call(broker, 41, version, owners=None)
        assert sorted((t.principal_name, t.token_requester_principal_name) for t in d.tokens) == \
            [("alice", "")] * version
    d = call(broker, 41, 3, owners=None)
    assert [t.token_requester_principal_name for t in d.tokens] == ["alice", "alice"]
    broker.metadata_store.close()


def test_a_cluster_broker_logs_in_with_a_token_from_the_controllers_records() -> None:
    """A broker-only node has no metadata log of its own: the tokens are the records it follows."""
    from odradek.kraft.image import MetadataImage
    from odradek.kraft.records import new_record

    clock = Clock()
    image = MetadataImage()
    image.delegation_tokens["tok-1"] = new_record(
        "DelegationTokenRecord", owner="User:alice", requester="User:alice", renewers=[],
        issue_timestamp=clock.now, max_timestamp=clock.now + 10_000_000, expiration_timestamp=clock.now + 1_000_000,
        token_id="tok-1")
    broker = SimpleNamespace(config=BrokerConfig({"delegation.token.secret.key": SECRET}),
                             metadata_store=SimpleNamespace(image=MetadataImage(), log=None),
                             broker_role=SimpleNamespace(image=image))
    manager = DelegationTokenManager(broker, clock)
    login = manager.scram_login("SCRAM-SHA-256", "tok-1")
    assert login is not None and login[1] == "alice"
    assert manager.token_for_hmac(token_hmac(SECRET, "tok-1")).token_id == "tok-1"
    del image.delegation_tokens["tok-1"]  # a RemoveDelegationTokenRecord from the controller
    assert manager.scram_login("SCRAM-SHA-256", "tok-1") is None
