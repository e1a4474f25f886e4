"""Unit tests of odradek.security: config lookups, SCRAM credentials, the SASL state machine, PEM input."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from odradek.config import BrokerConfig
from odradek.security import Session, listener_config, listener_security_protocol
from odradek.security.sasl import (
    PlainServer,
    SaslAuthenticationFailed,
    SaslServerAuthenticator,
    parse_jaas_options,
)
from odradek.security.scram import (
    ScramError,
    ScramServer,
    credential_from_salted,
    parse_add_scram,
    salted_password,
)
from odradek.security.ssl_context import SslConfigError, normalize_pem
from odradek.wire.errors import ErrorCode


def test_protocol_map_and_listener_prefix() -> None:
    cfg = BrokerConfig({"listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:SSL",
                        "ssl.client.auth": "none", "listener.name.external.ssl.client.auth": "required"})
    assert listener_security_protocol(cfg, "INTERNAL") == "SASL_SSL"
    assert listener_security_protocol(cfg, "SSL") == "SSL"  # Kafka's default entries stay
    assert listener_security_protocol(cfg, "OTHER") is None
    assert listener_config(cfg, "EXTERNAL", "ssl.client.auth") == "required"
    assert listener_config(cfg, "INTERNAL", "ssl.client.auth") == "none"
    assert "listener.name.external.ssl.client.auth" not in cfg.unknown


def test_add_scram_syntax() -> None:
    creds = parse_add_scram('SCRAM-SHA-256=[name=alice,password=alice-secret];'
                            'SCRAM-SHA-512=[name="bob",password="p,w",iterations=8192]')
    alice = creds[("SCRAM-SHA-256", "alice")]
    assert alice.iterations == 4096 and len(alice.salt) == 16
    salted = salted_password("SCRAM-SHA-256", b"alice-secret", alice.salt, 4096)
    assert credential_from_salted("SCRAM-SHA-256", salted, alice.salt, 4096) == alice
    assert creds[("SCRAM-SHA-512", "bob")].iterations == 8192
    # the RFC 7677 test vector (user/pencil) through the salted-password form
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    fixed = parse_add_scram("SCRAM-SHA-256=[name=user,salt=W22ZaJ0SNY7soEsUEjb6gQ==,"
                            "saltedpassword=" + base64.b64encode(
                                hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)).decode() + "]")
    assert fixed[("SCRAM-SHA-256", "user")].salt == salt
    with pytest.raises(ValueError):
        parse_add_scram("SCRAM-SHA-256=[name=x,password=y,iterations=100]")


def test_scram_rfc7677_vector() -> None:
    """RFC 7677 section 3: the server's answers for user "user", password "pencil"."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = credential_from_salted("SCRAM-SHA-256", salted_password("SCRAM-SHA-256", b"pencil", salt, 4096), salt, 4096)
    server = ScramServer("SCRAM-SHA-256", lambda m, u: cred)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first.startswith(b"r=rOprNGfwEbeRWgbNEkqO") and first.endswith(b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    nonce = first.split(b",")[0][2:].decode()
    # compute the client proof for the server's own nonce
    salted = salted_password("SCRAM-SHA-256", b"pencil", salt, 4096)
    without_proof = f"c=biws,r={nonce}"
    auth = f"n=user,r=rOprNGfwEbeRWgbNEkqO,{first.decode()},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    sig = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True))).decode()
    final = server.evaluate(f"{without_proof},p={proof}".encode())
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    assert final == b"v=" + base64.b64encode(hmac.new(server_key, auth, "sha256").digest())
    bad = ScramServer("SCRAM-SHA-256", lambda m, u: cred)
    bad.evaluate(b"n,,n=user,r=abc")
    with pytest.raises(ScramError):
        bad.evaluate(b"c=biws,r=wrong-nonce,p=AAAA")
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-256", lambda m, u: None).evaluate(b"n,,n=nobody,r=abc")


def test_plain_messages() -> None:
    server = PlainServer({"alice": "pw"})
    for token, message in [
        (b"\x00alice\x00bad", "Authentication failed: Invalid username or password"),
        (b"\x00\x00pw", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
        (b"bob\x00alice\x00pw", "Authentication failed: Client requested an authorization id that is different from username"),
    ]:
        with pytest.raises(SaslAuthenticationFailed, match=message):
            PlainServer({"alice": "pw"}).evaluate(token)
    server.evaluate(b"alice\x00alice\x00pw")
    assert server.complete and server.username == "alice"


def test_jaas_options() -> None:
    opts = parse_jaas_options('org.apache.kafka.common.security.plain.PlainLoginModule required '
                              'username="admin" password="a\\"b" user_admin="x" user_bob-1="y";')
    assert opts == {"username": "admin", "password": 'a"b', "user_admin": "x", "user_bob-1": "y"}


class _Broker:
    def __init__(self, props: dict[str, str]) -> None:
        self.config = BrokerConfig(props)


def test_authenticator_state_machine() -> None:
    broker = _Broker({"sasl.enabled.mechanisms": "PLAIN,GSSAPI",
                      "sasl.jaas.config": 'x required user_alice="pw";'})
    make = SaslServerAuthenticator.factory(broker, "SASL_PLAINTEXT")
    session = Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", peer="10.0.0.1:5000")
    auth = make(session)
    assert auth.enabled == ["PLAIN"]  # GSSAPI is not offered: not implemented
    assert auth.authenticate(b"x")[0] is ErrorCode.ILLEGAL_SASL_STATE  # before the handshake
    assert auth.handshake("SCRAM-SHA-256", 1) is ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert auth.handshake("PLAIN", 1) is ErrorCode.NONE
    assert auth.handshake("PLAIN", 1) is ErrorCode.ILLEGAL_SASL_STATE
    code, message, _ = auth.authenticate(b"\x00alice\x00pw")
    assert code is ErrorCode.NONE and message is None and auth.complete
    assert session.principal == "User:alice"
    legacy = make(Session("SASL_PLAINTEXT", "SASL_PLAINTEXT"))
    assert legacy.handshake("PLAIN", 0) is ErrorCode.NONE and legacy.expects_raw_token
    assert legacy.evaluate_raw(b"\x00alice\x00nope") is None


def test_normalize_pem_forms() -> None:
    body = base64.b64encode(bytes(range(200))).decode()
    lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    pem = f"-----BEGIN CERTIFICATE-----\n{lines}\n-----END CERTIFICATE-----\n"
    assert normalize_pem(pem) == pem.encode()
    assert normalize_pem(pem.replace("\n", "")) == pem.encode()
    assert normalize_pem(pem.replace("\n", "\\n")) == pem.encode()
    with pytest.raises(SslConfigError):
        normalize_pem("not a pem")
