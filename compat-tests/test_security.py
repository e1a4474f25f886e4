"""SSL and SASL listeners with stock clients (kafka-python, confluent-kafka) and raw protocol checks (#13).

Certificates are generated here with ``cryptography`` (a CA, a server certificate for 127.0.0.1
and localhost, a client certificate for mutual TLS): nothing comes from the network.

* SSL: PEM key store as a file (with an encrypted key), inline PEM keys, PKCS12; clients verify the
  broker's certificate and host name with their default settings; ``ssl.client.auth=required``
  refuses a client without a certificate.
* SASL_PLAINTEXT / SASL_SSL: PLAIN (JAAS ``user_<name>``), SCRAM-SHA-256 and SCRAM-SHA-512
  (``odradek.sasl.scram.credentials``); wrong passwords get SASL_AUTHENTICATION_FAILED with
  Kafka's message and the connection is closed; requests before authentication close the
  connection; the legacy SaslHandshake v0 flow (bare tokens) works.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka_oracle import free_port, port_accepts, recv_frame

from odradek.security.scram import ScramServer, make_credential
from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import decode_response, encode_request, join_pieces, request_class

JAAS_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_USERS = ("SCRAM-SHA-256=[name=alice,password=alice-secret];SCRAM-SHA-512=[name=alice,password=alice-secret];"
               "SCRAM-SHA-256=[name=bob,password=bob-secret,iterations=8192]")


# ------------------------------------------------------------------------------------------------
# certificates
# ------------------------------------------------------------------------------------------------

def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Odradek tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool = False,
          san: list | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


class Pki:
    """A test CA with a server and a client certificate, written as PEM and PKCS12 files."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _cert(_name("Odradek test CA"), ca_key, _name("Odradek test CA"), ca_key, ca=True)
        server_key = ec.generate_private_key(ec.SECP256R1())
        server = _cert(_name("localhost"), server_key, ca.subject, ca_key,
                       san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        client_key = ec.generate_private_key(ec.SECP256R1())
        client = _cert(_name("client-1"), client_key, ca.subject, ca_key)
        pem = serialization.Encoding.PEM
        self.ca_pem = ca.public_bytes(pem)
        self.server_cert_pem = server.public_bytes(pem)
        self.server_key_pem = server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption())
        self.ca_file = root / "ca.pem"
        self.ca_file.write_bytes(self.ca_pem)
        # a PEM key store: chain + encrypted key in one file (ssl.key.password)
        self.server_pem_file = root / "server.pem"
        self.server_pem_file.write_bytes(self.server_cert_pem + server_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"key-secret")))
        self.server_p12 = root / "server.p12"
        self.server_p12.write_bytes(pkcs12.serialize_key_and_certificates(
            b"server", server_key, server, [ca], serialization.BestAvailableEncryption(b"store-secret")))
        self.client_cert = root / "client.pem"
        self.client_cert.write_bytes(client.public_bytes(pem))
        self.client_key = root / "client.key"
        self.client_key.write_bytes(client_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def start_with_listener(factory, protocol: str, extra: dict[str, object]):
    """A broker with its PLAINTEXT listener (readiness) plus one `protocol` listener; returns (broker, bootstrap)."""
    broker = factory(start=False, overrides=extra)
    port = free_port("127.0.0.1")
    broker.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},{protocol}://127.0.0.1:{port}"
    broker.start()
    wait_for_port(port)
    return broker, f"127.0.0.1:{port}"


def wait_for_port(port: int, timeout: float = 15.0) -> None:
    """The harness waits for the PLAINTEXT port; the second listener must accept too."""
    deadline = time.time() + timeout
    while not port_accepts("127.0.0.1", port):
        assert time.time() < deadline, f"port {port} never accepted"
        time.sleep(0.05)


def roundtrip_kafka_python(bootstrap: str, topic: str, **security) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **security)
    offsets = [producer.send(topic, value=b"kp-%d" % i).get(30).offset for i in range(5)]
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, **security)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek(TopicPartition(topic, 0), offsets[0])
    got = []
    deadline = time.time() + 30
    while len(got) < 5 and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got += [m.value for m in batch]
    consumer.close()
    assert got[:5] == [b"kp-%d" % i for i in range(5)]


def roundtrip_confluent(bootstrap: str, topic: str, conf: dict[str, object]) -> None:
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "error_cb": lambda e: errors.append(str(e)), **conf})
    for i in range(5):
        producer.produce(topic, value=b"ck-%d" % i)
    assert producer.flush(30) == 0, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "error_cb": lambda e: errors.append(str(e)), **conf})
    consumer.subscribe([topic])
    got = []
    deadline = time.time() + 40
    while len(got) < 5 and time.time() < deadline:
        for msg in consumer.consume(10, timeout=0.5):
            if msg.error() is None:
                got.append(msg.value())
    consumer.close()
    assert [v for v in got if v.startswith(b"ck-")][:5] == [b"ck-%d" % i for i in range(5)], errors


# ------------------------------------------------------------------------------------------------
# SSL
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("store", ["pem-file", "pem-inline", "pkcs12"])
def test_ssl_listener_with_stock_clients(odradek_broker_factory, pki: Pki, store: str) -> None:
    if store == "pem-file":
        keys = {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_pem_file,
                "ssl.key.password": "key-secret"}
    elif store == "pem-inline":
        # Kafka's inline PEM keys (per listener here, to show the listener prefix)
        keys = {"listener.name.ssl.ssl.keystore.type": "PEM",
                "listener.name.ssl.ssl.keystore.certificate.chain": pki.server_cert_pem.decode().replace("\n", "\\n"),
                "listener.name.ssl.ssl.keystore.key": pki.server_key_pem.decode().replace("\n", "\\n")}
    else:
        keys = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.server_p12,
                "ssl.keystore.password": "store-secret"}
    broker, bootstrap = start_with_listener(odradek_broker_factory, "SSL", keys)
    roundtrip_kafka_python(bootstrap, f"tls-{store}", security_protocol="SSL", ssl_cafile=str(pki.ca_file))
    roundtrip_confluent(bootstrap, f"tls-ck-{store}", {"security.protocol": "SSL",
                                                        "ssl.ca.location": str(pki.ca_file)})
    # a plaintext client on the TLS port gets nothing useful and the broker keeps serving
    with socket.create_connection(bootstrap.split(":"), timeout=5) as sock:
        sock.sendall(join_pieces(encode_request(3, 1, request_class(18)(client_software_name="probe", client_software_version="1"), client_id="plain")))
        sock.settimeout(5)
        try:
            data = sock.recv(100)
        except (ConnectionResetError, TimeoutError):
            data = b""
        assert not data.startswith(b"\x00\x00")  # not a Kafka response
    assert "Failed authentication with /127.0.0.1 (SSL handshake failed" in broker.console_log.read_text()


def test_ssl_client_auth_required(odradek_broker_factory, pki: Pki) -> None:
    broker, bootstrap = start_with_listener(odradek_broker_factory, "SSL", {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server_pem_file, "ssl.key.password": "key-secret",
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca_file,
    })
    roundtrip_kafka_python(bootstrap, "mtls", security_protocol="SSL", ssl_cafile=str(pki.ca_file),
                           ssl_certfile=str(pki.client_cert), ssl_keyfile=str(pki.client_key))
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                # TLS 1.3: the refusal arrives with the first read
                tls.sendall(join_pieces(encode_request(3, 1, request_class(18)(client_software_name="probe", client_software_version="1"), client_id="no-cert")))
                if not tls.recv(4):
                    raise ConnectionError("closed")


def test_ssl_config_errors_fail_the_start(odradek_broker_factory, pki: Pki) -> None:
    from kafka_oracle import BrokerStartError

    with pytest.raises(BrokerStartError, match="not supported; use PEM or PKCS12"):
        start_with_listener(odradek_broker_factory, "SSL", {"ssl.keystore.location": "/nonexistent.jks"})


# ------------------------------------------------------------------------------------------------
# SASL
# ------------------------------------------------------------------------------------------------

def sasl_overrides(mechanisms: str) -> dict[str, object]:
    return {"sasl.enabled.mechanisms": mechanisms,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_PLAIN,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS_PLAIN,
            "odradek.sasl.scram.credentials": SCRAM_USERS}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_plaintext_with_stock_clients(odradek_broker_factory, mechanism: str) -> None:
    broker, bootstrap = start_with_listener(odradek_broker_factory, "SASL_PLAINTEXT",
                                            sasl_overrides("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"))
    topic = f"sasl-{mechanism.lower()}"
    roundtrip_kafka_python(bootstrap, topic, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                           sasl_plain_username="alice", sasl_plain_password="alice-secret")
    roundtrip_confluent(bootstrap, topic + "-ck", {"security.protocol": "SASL_PLAINTEXT",
                                                   "sasl.mechanisms": mechanism, "sasl.username": "alice",
                                                   "sasl.password": "alice-secret"})
    # a wrong password: the stock client reports Kafka's message
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanisms": mechanism, "sasl.username": "alice", "sasl.password": "wrong",
                         "error_cb": lambda e: errors.append(str(e))})
    deadline = time.time() + 15
    while not errors and time.time() < deadline:
        producer.poll(0.2)
    expected = ("Authentication failed: Invalid username or password" if mechanism == "PLAIN" else
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")
    assert any(expected in e for e in errors), errors
    assert "Failed authentication with /127.0.0.1" in broker.console_log.read_text()


def test_sasl_ssl_scram_with_stock_clients(odradek_broker_factory, pki: Pki) -> None:
    broker, bootstrap = start_with_listener(odradek_broker_factory, "SASL_SSL", {
        **sasl_overrides("SCRAM-SHA-512"), "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": pki.server_p12, "ssl.keystore.password": "store-secret"})
    roundtrip_kafka_python(bootstrap, "sasl-ssl", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                           sasl_plain_username="alice", sasl_plain_password="alice-secret",
                           ssl_cafile=str(pki.ca_file))
    roundtrip_confluent(bootstrap, "sasl-ssl-ck", {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                                                   "sasl.username": "alice", "sasl.password": "alice-secret",
                                                   "ssl.ca.location": str(pki.ca_file)})


# -- raw protocol ---------------------------------------------------------------------------------

def _call(sock: socket.socket, api_key: int, version: int, body, corr: int = 1):
    sock.sendall(join_pieces(encode_request(version, corr, body, client_id="raw", api_key=api_key)))
    return decode_response(recv_frame(sock), api_key, version)[1]


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_sasl_state_machine_raw(odradek_broker_factory) -> None:
    broker, bootstrap = start_with_listener(odradek_broker_factory, "SASL_PLAINTEXT",
                                            sasl_overrides("PLAIN,SCRAM-SHA-256"))
    host, port = bootstrap.split(":")
    Handshake, Authenticate = request_class(17), request_class(36)

    def connect() -> socket.socket:
        return socket.create_connection((host, int(port)), timeout=5)

    # 1. a request other than ApiVersions/SaslHandshake before authentication: closed
    with connect() as sock:
        sock.sendall(join_pieces(encode_request(12, 1, request_class(3)(topics=None), client_id="raw")))
        assert _closed(sock)
    # 2. an unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed
    with connect() as sock:
        assert _call(sock, 18, 3, request_class(18)(client_software_name="probe", client_software_version="1")).error_code == 0  # ApiVersions is allowed
        resp = _call(sock, 17, 1, Handshake(mechanism="GSSAPI"))
        assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert resp.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
        assert _closed(sock)
    # 3. PLAIN with a wrong password: SASL_AUTHENTICATION_FAILED + Kafka's message, then closed
    with connect() as sock:
        assert _call(sock, 17, 1, Handshake(mechanism="PLAIN")).error_code == 0
        resp = _call(sock, 36, 2, Authenticate(auth_bytes=b"\x00alice\x00nope"))
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert _closed(sock)
    # 3b. the same with more bytes behind the failing SaslAuthenticate than the broker has read
    # when it answers (a client's queued requests): the error still arrives, then an orderly close
    # (FIN). Closing with unread bytes would send a reset, and the client's kernel would drop the
    # unread error answer (kafka-python then saw "socket disconnected", not the SASL error).
    with connect() as sock:
        assert _call(sock, 17, 1, Handshake(mechanism="PLAIN")).error_code == 0
        sock.sendall(join_pieces(encode_request(2, 2, Authenticate(auth_bytes=b"\x00alice\x00nope"),
                                                client_id="raw", api_key=36)))
        sock.setblocking(False)
        queued = struct.pack(">i", 4 << 20) + bytes(4 << 20)
        sent = 0
        deadline = time.monotonic() + 2
        while sent < len(queued) and time.monotonic() < deadline:
            try:
                sent += sock.send(queued[sent:])
            except BlockingIOError:
                time.sleep(0.01)
            except (ConnectionResetError, BrokenPipeError):
                break
        sock.setblocking(True)
        sock.settimeout(5)
        time.sleep(0.5)  # the broker has answered and ended the connection by now
        resp = decode_response(recv_frame(sock), 36, 2)[1]
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert sock.recv(1) == b""  # FIN; a reset would raise ConnectionResetError here
    # 3c. the close is delayed as Kafka delays it (connection.failed.authentication.delay.ms): what
    # the client still sends right after the error is drained, not answered with a reset
    with connect() as sock:
        assert _call(sock, 17, 1, Handshake(mechanism="PLAIN")).error_code == 0
        resp = _call(sock, 36, 2, Authenticate(auth_bytes=b"\x00alice\x00nope"))
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        sock.sendall(join_pieces(encode_request(3, 3, request_class(18)(client_software_name="probe", client_software_version="1"), client_id="raw", api_key=18)))
        time.sleep(0.02)
        assert sock.recv(1) == b""  # a closed broker socket would have answered with a reset
    # 4. PLAIN right: then any API works; a second SaslAuthenticate is ILLEGAL_SASL_STATE
    with connect() as sock:
        assert _call(sock, 17, 1, Handshake(mechanism="PLAIN")).error_code == 0
        resp = _call(sock, 36, 2, Authenticate(auth_bytes=b"\x00alice\x00alice-secret"))
        assert resp.error_code == 0 and resp.session_lifetime_ms == 0
        assert _call(sock, 3, 12, request_class(3)(topics=None)).brokers
        assert _call(sock, 36, 2, Authenticate(auth_bytes=b"x")).error_code == ErrorCode.ILLEGAL_SASL_STATE
    # 5. legacy SaslHandshake v0: the SCRAM tokens follow as bare size-prefixed frames
    with connect() as sock:
        assert _call(sock, 17, 0, Handshake(mechanism="SCRAM-SHA-256")).error_code == 0
        client = _ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
        sock.sendall(struct.pack(">i", len(first := client.first())) + first)
        final = client.final(recv_frame(sock))
        sock.sendall(struct.pack(">i", len(final)) + final)
        client.verify(recv_frame(sock))
        assert _call(sock, 3, 12, request_class(3)(topics=None)).brokers
    # 6. SCRAM with a wrong password over SaslAuthenticate: Kafka's generic message
    with connect() as sock:
        assert _call(sock, 17, 1, Handshake(mechanism="SCRAM-SHA-256")).error_code == 0
        client = _ScramClient("SCRAM-SHA-256", "alice", "wrong")
        server_first = _call(sock, 36, 2, Authenticate(auth_bytes=client.first())).auth_bytes
        resp = _call(sock, 36, 2, Authenticate(auth_bytes=client.final(server_first)))
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert resp.error_message == ("Authentication failed during authentication due to invalid credentials "
                                      "with SASL mechanism SCRAM-SHA-256")
        assert _closed(sock)
    # 7. SaslHandshake on a PLAINTEXT listener: ILLEGAL_SASL_STATE
    with socket.create_connection((broker.host, broker.port), timeout=5) as sock:
        assert _call(sock, 17, 1, Handshake(mechanism="PLAIN")).error_code == ErrorCode.ILLEGAL_SASL_STATE


class _ScramClient:
    """The client side of RFC 5802, written from the RFC for the raw test (the stock clients test the rest)."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        import base64
        import os

        self.b64 = base64
        self.mechanism, self.user, self.password = mechanism, user, password
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.algorithm = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]

    def first(self) -> bytes:
        self.bare = f"n={self.user},r={self.nonce}"
        return f"n,,{self.bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        import hashlib
        import hmac

        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(self.algorithm, self.password.encode(), self.b64.b64decode(fields["s"]),
                                     int(fields["i"]))
        without_proof = f"c=biws,r={fields['r']}"
        self.auth = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", self.algorithm).digest()
        stored = hashlib.new(self.algorithm, client_key).digest()
        signature = hmac.new(stored, self.auth, self.algorithm).digest()
        self.server_key = hmac.new(salted, b"Server Key", self.algorithm).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={self.b64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        import hmac

        expected = hmac.new(self.server_key, self.auth, self.algorithm).digest()
        assert server_final == b"v=" + self.b64.b64encode(expected)


def test_scram_server_unit() -> None:
    """The SCRAM server against the RFC-written client, both mechanisms, and a replayed proof."""
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        cred = make_credential(mechanism, "pw", 4096)
        server = ScramServer(mechanism, lambda m, u, cred=cred: cred if u == "u" else None)
        client = _ScramClient(mechanism, "u", "pw")
        final = client.final(server.evaluate(client.first()))
        client.verify(server.evaluate(final))
        assert server.complete
        # a second exchange with the first exchange's proof fails (fresh server nonce)
        other = ScramServer(mechanism, lambda m, u, cred=cred: cred)
        other.evaluate(client.first())
        with pytest.raises(Exception, match="nonce|credentials"):
            other.evaluate(final)
