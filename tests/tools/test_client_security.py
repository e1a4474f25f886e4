"""The tools' client-side security (odradek.tools.client_security): Kafka's client properties,
sasl.jaas.config parsed as Kafka's JaasConfig parses it, and the SASL client exchanges run
in-process against the broker's own SASL / SCRAM server code."""

from __future__ import annotations

import base64
import ssl

import pytest

from odradek.security import Session
from odradek.security.sasl import PlainServer, SaslServerAuthenticator
from odradek.security.scram import ScramError, ScramServer, make_credential
from odradek.tools.client_security import (
    AuthenticationError,
    ClientConfigError,
    ClientSecurity,
    ScramClient,
    jaas_credentials,
    parse_jaas_config,
    parse_properties,
    plain_token,
)
from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import response_class

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";'


# ------------------------------------------------------------------------------------------------
# properties and jaas
# ------------------------------------------------------------------------------------------------

def test_properties_file_like_java() -> None:
    text = (
        "# comment\n! also a comment\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism : SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        "    username=\"alice\" \\\n"
        "    password=\"alice-secret\";\n"
        "ssl.truststore.certificates=-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----\n"
        "client.id odradek\\u0021\n"
        "path=C:\\\\temp\n"
    )
    props = parse_properties(text)
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                         'username="alice" password="alice-secret";')
    assert props["ssl.truststore.certificates"] == "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"
    assert props["client.id"] == "odradek!"
    assert props["path"] == "C:\\temp"


def test_jaas_config_parsing() -> None:
    [entry] = parse_jaas_config(SCRAM_JAAS)
    assert entry.login_module == "org.apache.kafka.common.security.scram.ScramLoginModule"
    assert entry.control_flag == "required"
    assert entry.options == {"username": "alice", "password": "alice-secret"}
    # bare words, single quotes, escapes inside quotes, comments, any case of the flag
    [entry] = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule REQUIRED /* the user */ username=bob\n"
        "  // a comment line\n"
        "  password='p\\\"w;=x' tokenauth=\"a\\\\b\";"
    )
    assert entry.options == {"username": "bob", "password": 'p"w;=x', "tokenauth": "a\\b"}
    # several modules parse; the client property wants exactly one
    two = SCRAM_JAAS + " " + SCRAM_JAAS.replace("alice", "bob")
    assert [e.options["username"] for e in parse_jaas_config(two)] == ["alice", "bob"]
    with pytest.raises(ClientConfigError, match="contains 2 login modules, should be 1 module"):
        jaas_credentials(two)
    assert jaas_credentials(SCRAM_JAAS) == ("alice", "alice-secret")


@pytest.mark.parametrize("text, message", [
    ("", "Login module not specified in JAAS config"),
    ("org.apache.kafka.common.security.plain.PlainLoginModule", "Login module control flag not specified"),
    ("org.apache.kafka.common.security.plain.PlainLoginModule mandatory username=\"a\";",
     "Invalid login module control flag 'mandatory'"),
    ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\"",
     "JAAS config entry not terminated by semi-colon"),
    ("org.apache.kafka.common.security.plain.PlainLoginModule required username;",
     "Value not specified for key 'username'"),
    # a bare value starting with a digit is a number token to Java's StreamTokenizer: no string value
    ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=123;",
     "Value not specified for key 'password'"),
])
def test_jaas_config_errors_as_kafka_words_them(text: str, message: str) -> None:
    with pytest.raises(ClientConfigError, match=message):
        parse_jaas_config(text)


def test_jaas_credentials_need_user_and_password_of_a_known_module() -> None:
    with pytest.raises(ClientConfigError, match="needs username"):
        jaas_credentials('org.apache.kafka.common.security.plain.PlainLoginModule required username="a";')
    with pytest.raises(ClientConfigError, match="not supported"):
        jaas_credentials("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;")


def test_security_from_properties() -> None:
    assert ClientSecurity.from_properties({}).protocol == "PLAINTEXT"
    sec = ClientSecurity.from_properties({"security.protocol": "sasl_plaintext", "sasl.mechanism": "SCRAM-SHA-256",
                                          "sasl.jaas.config": SCRAM_JAAS})
    assert (sec.protocol, sec.mechanism, sec.username, sec.password, sec.ssl_context) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-secret", None)
    with pytest.raises(ClientConfigError, match="String must be one of"):
        ClientSecurity.from_properties({"security.protocol": "TLS"})
    with pytest.raises(ClientConfigError, match="GSSAPI"):  # Kafka's default mechanism
        ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": SCRAM_JAAS})
    with pytest.raises(ClientConfigError, match="sasl.jaas.config is required"):
        ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"})
    with pytest.raises(ClientConfigError, match="ssl.truststore.type=JKS"):
        ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"})
    with pytest.raises(ClientConfigError, match="Failed to load trust store /nonexistent.pem"):
        ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                        "ssl.truststore.location": "/nonexistent.pem"})


def test_ssl_endpoint_identification() -> None:
    https = ClientSecurity.from_properties({"security.protocol": "SSL"}).ssl_context
    assert https is not None and https.check_hostname and https.verify_mode == ssl.CERT_REQUIRED
    none = ClientSecurity.from_properties({"security.protocol": "SSL",
                                           "ssl.endpoint.identification.algorithm": ""}).ssl_context
    assert none is not None and not none.check_hostname and none.verify_mode == ssl.CERT_REQUIRED
    only13 = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.3"})
    assert only13.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_3


# ------------------------------------------------------------------------------------------------
# SCRAM against the broker's ScramServer
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_server(mechanism: str) -> None:
    cred = make_credential(mechanism, "alice-secret", 4096)
    server = ScramServer(mechanism, lambda m, u: cred if (m, u) == (mechanism, "alice") else None)
    client = ScramClient(mechanism, "alice", "alice-secret")
    first = client.first()
    assert first.startswith(b"n,,n=alice,r=")
    client.verify(server.evaluate(client.final(server.evaluate(first))))
    assert client.complete and server.complete and server.username == "alice"


def test_scram_wrong_password_fails_at_the_server() -> None:
    cred = make_credential("SCRAM-SHA-512", "alice-secret")
    server = ScramServer("SCRAM-SHA-512", lambda m, u: cred)
    client = ScramClient("SCRAM-SHA-512", "alice", "wrong")
    with pytest.raises(ScramError, match="Invalid client credentials"):
        server.evaluate(client.final(server.evaluate(client.first())))


def test_scram_user_names_are_escaped() -> None:
    cred = make_credential("SCRAM-SHA-256", "pw")
    seen = []
    server = ScramServer("SCRAM-SHA-256", lambda m, u: seen.append(u) or cred)
    client = ScramClient("SCRAM-SHA-256", "a=b,c", "pw")
    assert b"n=a=3Db=2Cc," in client.first()
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert seen == ["a=b,c"]


def test_scram_client_checks_the_server() -> None:
    cred = make_credential("SCRAM-SHA-256", "pw")
    # a server that knows another password: its signature does not verify
    other = make_credential("SCRAM-SHA-256", "other", salt=cred.salt)
    server = ScramServer("SCRAM-SHA-256", lambda m, u: cred)
    client = ScramClient("SCRAM-SHA-256", "u", "pw")
    server_first = server.evaluate(client.first())
    server.evaluate(client.final(server_first))  # the proof is right
    from odradek.security.scram import _hmac  # noqa: PLC0415 - test-only forgery

    forged = b"v=" + base64.b64encode(_hmac("sha256", other.server_key, client.auth_message))
    with pytest.raises(AuthenticationError, match="Invalid server signature"):
        client.verify(forged)
    # a server nonce that does not extend the client's
    client = ScramClient("SCRAM-SHA-256", "u", "pw", nonce="abc")
    client.first()
    with pytest.raises(AuthenticationError, match="does not start with client nonce"):
        client.final(b"r=xyz123,s=" + base64.b64encode(b"salt") + b",i=4096")
    # too few iterations (Kafka's client refuses fewer than 4096)
    with pytest.raises(AuthenticationError, match="Requested iterations 1000 is less than the minimum 4096"):
        client.final(b"r=abc123,s=" + base64.b64encode(b"salt") + b",i=1000")
    with pytest.raises(AuthenticationError, match="failed with error: other-error"):
        client.final(b"e=other-error")


# ------------------------------------------------------------------------------------------------
# the whole SaslHandshake + SaslAuthenticate flow against the broker's authenticator
# ------------------------------------------------------------------------------------------------

class _Broker:
    """The broker's SaslServerAuthenticator behind a roundtrip(api_key, version, body) callable."""

    def __init__(self, mechanisms: list[str]) -> None:
        cred = make_credential("SCRAM-SHA-512", "alice-secret")

        def make_server(mechanism: str):
            if mechanism == "PLAIN":
                return PlainServer({"alice": "alice-secret"})
            return ScramServer(mechanism, lambda m, u: cred if u == "alice" else None)

        self.session = Session("SASL_PLAINTEXT", "SASL_PLAINTEXT")
        self.auth = SaslServerAuthenticator(self.session, mechanisms, make_server)
        self.calls: list[tuple[int, int]] = []

    def roundtrip(self, api_key: int, version: int, body):
        self.calls.append((api_key, version))
        if api_key == 17:
            code = self.auth.handshake(body.mechanism, version)
            return response_class(17)(error_code=code, mechanisms=list(self.auth.enabled))
        code, message, reply = self.auth.authenticate(bytes(body.auth_bytes))
        return response_class(36)(error_code=code, error_message=message, auth_bytes=reply, session_lifetime_ms=0)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_sasl_flow_authenticates(mechanism: str) -> None:
    broker = _Broker(["PLAIN", "SCRAM-SHA-512"])
    sec = ClientSecurity("SASL_PLAINTEXT", mechanism=mechanism, username="alice", password="alice-secret")
    sec.authenticate(broker.roundtrip, {17: 1, 36: 2}.__getitem__)
    assert broker.session.principal == "User:alice"
    assert broker.calls[0] == (17, 1) and all(c == (36, 2) for c in broker.calls[1:])
    assert len(broker.calls) == (2 if mechanism == "PLAIN" else 3)


@pytest.mark.parametrize("mechanism, message", [
    ("PLAIN", "Authentication failed: Invalid username or password"),
    ("SCRAM-SHA-512", "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                      "SCRAM-SHA-512"),
])
def test_sasl_flow_reports_the_brokers_message(mechanism: str, message: str) -> None:
    broker = _Broker(["PLAIN", "SCRAM-SHA-512"])
    sec = ClientSecurity("SASL_PLAINTEXT", mechanism=mechanism, username="alice", password="wrong")
    with pytest.raises(AuthenticationError) as info:
        sec.authenticate(broker.roundtrip, {17: 1, 36: 2}.__getitem__)
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert info.value.broker_message == message
    assert str(info.value) == f"SASL_AUTHENTICATION_FAILED: {message}"


def test_sasl_flow_unsupported_mechanism() -> None:
    broker = _Broker(["PLAIN"])
    sec = ClientSecurity("SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", username="alice", password="alice-secret")
    with pytest.raises(AuthenticationError, match=r"UNSUPPORTED_SASL_MECHANISM: Client SASL mechanism "
                                                  r"'SCRAM-SHA-256' not enabled in the server, enabled mechanisms "
                                                  r"are \['PLAIN'\]"):
        sec.authenticate(broker.roundtrip, {17: 1, 36: 2}.__getitem__)


def test_plain_token() -> None:
    assert plain_token("alice", "pw") == b"\x00alice\x00pw"
