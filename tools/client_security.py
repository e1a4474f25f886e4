"""Client-side security for the command-line tools: Kafka's client ``security.protocol`` keys.

The tools read Kafka's client properties (``--command-config``, ``--producer.config``,
``--consumer.config``, ``--producer-property`` / ``--consumer-property``) and connect with:

* ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
* SSL with Python's ``ssl``: the trust store as PEM (``ssl.truststore.type=PEM`` with
  ``ssl.truststore.location``, or inline ``ssl.truststore.certificates``) or PKCS12 (converted with
  ``cryptography``); no trust store = the system's CAs. A client certificate from
  ``ssl.keystore.*`` (PEM file with chain and key, inline ``ssl.keystore.certificate.chain`` /
  ``ssl.keystore.key``, or PKCS12). ``ssl.endpoint.identification.algorithm=https`` (the default)
  checks the broker's host name; an empty value checks only the certificate chain, as in Kafka;
* SASL: SaslHandshake v1 then SaslAuthenticate, mechanisms PLAIN, SCRAM-SHA-256 and
  SCRAM-SHA-512 (RFC 5802 client: the server's signature is verified), with the user name and
  password from ``sasl.jaas.config``, parsed the way Kafka's JaasConfig parses it (a login module,
  a control flag, ``key=value`` options, ``;``).

A failed authentication raises :class:`AuthenticationError` with the broker's message
(SaslAuthenticate's ``error_message``); a config that cannot work raises
:class:`ClientConfigError` before anything is sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..security.scram import MECHANISMS as SCRAM_MECHANISMS
from ..security.scram import MIN_ITERATIONS, salted_password
from ..security.ssl_context import load_cert_chain_pem, normalize_pem
from ..wire.errors import ErrorCode
from ..wire.protocol import request_class

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
# Login modules whose username/password options the tools can use (Kafka's own two).
LOGIN_MODULES = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
)


class ClientConfigError(ValueError):
    """The client properties do not describe a connection the tools can make."""


class AuthenticationError(Exception):
    """The broker refused the credentials (SASL) or the TLS handshake failed.

    ``str()`` is ``SASL_AUTHENTICATION_FAILED: <the broker's message>`` for SASL, like the tools'
    other broker errors, and ``SSL handshake failed: <reason>`` for TLS.
    """

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        self.code = code
        self.broker_message = message
        super().__init__(f"{code.name}: {message}" if code is not None else message)


# ------------------------------------------------------------------------------------------------
# properties files
# ------------------------------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape_properties(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` text as ``java.util.Properties.load`` reads it: ``key=value``,
    ``key: value`` or ``key value``; ``#`` / ``!`` comments; a line ending in an odd number of
    backslashes continues on the next (whose leading blanks are dropped); ``\\t``, ``\\n``,
    ``\\uXXXX`` escapes, any other escaped character stands for itself."""
    logical: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        logical.append((pending or "") + line)
        pending = None
    if pending is not None:
        logical.append(pending)
    result: dict[str, str] = {}
    for line in logical:
        i = 0
        while i < len(line) and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        result[_unescape_properties(key)] = _unescape_properties(rest)
    return result


def load_properties(path: str | Path) -> dict[str, str]:
    """A client properties file (``--command-config`` and friends); ClientConfigError if unreadable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_properties(text)


# ------------------------------------------------------------------------------------------------
# sasl.jaas.config
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JaasEntry:
    """One login module of a JAAS config: class name, control flag, options."""

    login_module: str
    control_flag: str
    options: dict[str, str]


_WORD_START = re.compile(r"[A-Za-z_$\u00a0-\u00ff]")
_WORD_CHAR = re.compile(r"[A-Za-z0-9_$.\-\u00a0-\u00ff]")
_NUMBER_START = re.compile(r"[0-9.\-]")
_QUOTE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _jaas_tokens(text: str) -> list[tuple[str, str | None]]:
    """Tokens as Java's StreamTokenizer makes them with Kafka's JaasConfig settings:
    ("word", text), ("quoted", text), ("number", None) or (the character, None) for any other
    character such as ``=`` and ``;``. ``//`` and ``/* */`` comments are skipped (as is the rest
    of a line after a lone ``/``)."""
    tokens: list[tuple[str, str | None]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch <= " ":
            i += 1
        elif ch == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # "//" or a lone "/" (StreamTokenizer's comment character): to the end of the line
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
        elif ch in "\"'":
            i += 1
            value: list[str] = []
            while i < n and text[i] != ch and text[i] not in "\r\n":
                c = text[i]
                if c == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    octal = re.match(r"[0-3][0-7]{0,2}|[4-7][0-7]?", text[i + 1:i + 4])
                    if octal:
                        value.append(chr(int(octal.group(), 8)))
                        i += 1 + len(octal.group())
                        continue
                    value.append(_QUOTE_ESCAPES.get(nxt, nxt))
                    i += 2
                    continue
                value.append(c)
                i += 1
            if i < n and text[i] == ch:
                i += 1
            tokens.append(("quoted", "".join(value)))
        elif _NUMBER_START.match(ch):
            # parseNumbers(): a token starting with a digit, '.' or '-' is a number (it has no
            # string value, so Kafka refuses it as a key or value)
            i += 1
            while i < n and re.match(r"[0-9.]", text[i]):
                i += 1
            tokens.append(("number", None))
        elif _WORD_START.match(ch):
            start = i
            while i < n and _WORD_CHAR.match(text[i]):
                i += 1
            tokens.append(("word", text[start:i]))
        else:
            tokens.append((ch, None))
            i += 1
    return tokens


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """``sasl.jaas.config`` -> its login modules, with Kafka's JaasConfig rules and messages:
    ``<LoginModule> <flag> [key=value ...];`` repeated; values quoted (``"..."`` or ``'...'``, with
    backslash escapes) or bare words; the flag one of required, requisite, sufficient, optional."""
    tokens = _jaas_tokens(text or "")
    entries: list[JaasEntry] = []
    pos = 0

    def string(index: int) -> str | None:
        return tokens[index][1] if index < len(tokens) else None

    while pos < len(tokens):
        module = string(pos)
        pos += 1
        if pos >= len(tokens):
            raise ClientConfigError("Login module control flag not specified in JAAS config")
        flag = string(pos)
        if flag is None:
            raise ClientConfigError("Login module control flag is not available in the JAAS config")
        if flag.upper() not in ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL"):
            raise ClientConfigError(f"Invalid login module control flag '{flag}' in JAAS config")
        pos += 1
        options: dict[str, str] = {}
        while pos < len(tokens) and tokens[pos][0] != ";":
            key = string(pos)
            if pos + 2 >= len(tokens) or tokens[pos + 1][0] != "=" or string(pos + 2) is None:
                raise ClientConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[str(key)] = str(string(pos + 2))
            pos += 3
        if pos >= len(tokens):
            raise ClientConfigError("JAAS config entry not terminated by semi-colon")
        pos += 1  # the ';'
        entries.append(JaasEntry(str(module), flag.lower(), options))
    if not entries:
        raise ClientConfigError("Login module not specified in JAAS config")
    return entries


def jaas_credentials(text: str) -> tuple[str, str]:
    """(username, password) of a client's ``sasl.jaas.config`` (exactly one login module, as Kafka
    requires for the client property)."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise ClientConfigError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    entry = entries[0]
    if entry.login_module not in LOGIN_MODULES:
        raise ClientConfigError(f"login module {entry.login_module} is not supported by Odradek's tools; use "
                                "PlainLoginModule or ScramLoginModule with username and password")
    username, password = entry.options.get("username"), entry.options.get("password")
    if username is None or password is None:
        raise ClientConfigError(f"sasl.jaas.config: {entry.login_module.rsplit('.', 1)[-1]} needs username=\"...\" "
                                "and password=\"...\"")
    return username, password


# ------------------------------------------------------------------------------------------------
# SASL mechanisms (client side)
# ------------------------------------------------------------------------------------------------

def plain_token(username: str, password: str) -> bytes:
    """SASL PLAIN's only message (RFC 4616): empty authzid, NUL, user, NUL, password."""
    return b"\x00" + username.encode() + b"\x00" + password.encode()


class ScramClient:
    """The client side of one SCRAM exchange (RFC 5802 / RFC 7677), as Kafka's ScramSaslClient does it:
    :meth:`first` -> server-first -> :meth:`final` -> server-final -> :meth:`verify`."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ClientConfigError(f"unknown SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self.algorithm = SCRAM_MECHANISMS[mechanism]
        self.username, self.password = username, password
        self.nonce = nonce or base64.b64encode(os.urandom(24)).decode().replace("=", "")
        self.complete = False

    @staticmethod
    def _saslname(name: str) -> str:
        return name.replace("=", "=3D").replace(",", "=2C")

    def first(self) -> bytes:
        self.client_first_bare = f"n={self._saslname(self.username)},r={self.nonce}"
        return ("n,," + self.client_first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        fields = _scram_fields(text)
        if "e" in fields:
            raise AuthenticationError(f"Sasl authentication using {self.mechanism} failed with error: {fields['e']}",
                                      ErrorCode.SASL_AUTHENTICATION_FAILED)
        try:
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"], validate=True), int(fields["i"])
        except (KeyError, ValueError):
            raise AuthenticationError(f"Invalid SCRAM server first message: {text!r}",
                                      ErrorCode.SASL_AUTHENTICATION_FAILED) from None
        if not nonce.startswith(self.nonce) or nonce == self.nonce:
            raise AuthenticationError("Invalid server nonce: does not start with client nonce",
                                      ErrorCode.SASL_AUTHENTICATION_FAILED)
        if iterations < MIN_ITERATIONS[self.mechanism]:
            raise AuthenticationError(f"Requested iterations {iterations} is less than the minimum "
                                      f"{MIN_ITERATIONS[self.mechanism]} for {self.mechanism}",
                                      ErrorCode.SASL_AUTHENTICATION_FAILED)
        salted = salted_password(self.mechanism, self.password.encode(), salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        self.auth_message = f"{self.client_first_bare},{text},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", self.algorithm).digest()
        stored_key = hashlib.new(self.algorithm, client_key).digest()
        signature = hmac.new(stored_key, self.auth_message, self.algorithm).digest()
        self.server_key = hmac.new(salted, b"Server Key", self.algorithm).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        fields = _scram_fields(server_final.decode("utf-8", "replace"))
        if "e" in fields:
            raise AuthenticationError(f"Sasl authentication using {self.mechanism} failed with error: {fields['e']}",
                                      ErrorCode.SASL_AUTHENTICATION_FAILED)
        expected = hmac.new(self.server_key, self.auth_message, self.algorithm).digest()
        try:
            got = base64.b64decode(fields.get("v", ""), validate=True)
        except ValueError:
            got = b""
        if not hmac.compare_digest(got, expected):
            raise AuthenticationError("Invalid server signature in server final message",
                                      ErrorCode.SASL_AUTHENTICATION_FAILED)
        self.complete = True


def _scram_fields(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


# ------------------------------------------------------------------------------------------------
# the connection's security
# ------------------------------------------------------------------------------------------------

# roundtrip(api_key, version, body) -> decoded response; version_for(api_key) -> negotiated version
Roundtrip = Callable[[int, int, Any], Any]


@dataclass
class ClientSecurity:
    """How the tools' connections are secured, from Kafka's client properties."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str] | None) -> ClientSecurity:
        props = dict(props or {})
        protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise ClientConfigError(f"Invalid value {props.get('security.protocol')} for configuration "
                                    f"security.protocol: String must be one of: {', '.join(PROTOCOLS)}")
        out = cls(protocol)
        if out.uses_ssl:
            out.ssl_context = ssl_context(props)
        if out.uses_sasl:
            mechanism = (props.get("sasl.mechanism") or "GSSAPI").strip()
            if mechanism not in SASL_MECHANISMS:
                raise ClientConfigError(f"sasl.mechanism={mechanism}"
                                        f"{' (Kafka’s default)' if 'sasl.mechanism' not in props else ''} is not "
                                        f"supported by Odradek's tools; use one of {', '.join(SASL_MECHANISMS)}")
            jaas = props.get("sasl.jaas.config")
            if not jaas:
                raise ClientConfigError("sasl.jaas.config is required with security.protocol="
                                        f"{protocol} (e.g. org.apache.kafka.common.security.scram.ScramLoginModule "
                                        'required username="alice" password="alice-secret";)')
            out.mechanism = mechanism
            out.username, out.password = jaas_credentials(jaas)
        return out

    def wrap(self, sock: Any, host: str) -> Any:
        """The TLS socket over `sock` (handshake done); AuthenticationError when the handshake fails."""
        assert self.ssl_context is not None
        try:
            return self.ssl_context.wrap_socket(sock, server_hostname=host)
        except ssl.SSLError as exc:
            sock.close()
            if isinstance(exc, ssl.SSLCertVerificationError):
                reason = f"certificate verify failed: {exc.verify_message}"
            else:
                reason = str(exc.reason or exc).replace("_", " ").lower() if exc.reason else str(exc)
            raise AuthenticationError(f"SSL handshake failed with {host}: {reason}") from None

    def authenticate(self, roundtrip: Roundtrip, version_for: Callable[[int], int]) -> None:
        """The SASL exchange on a connection that has negotiated ApiVersions."""
        assert self.mechanism is not None
        handshake_version = version_for(SASL_HANDSHAKE)
        if handshake_version < 1:
            raise ClientConfigError("the broker only speaks SaslHandshake v0 (legacy SASL), which the tools do not")
        response = roundtrip(SASL_HANDSHAKE, handshake_version, request_class(SASL_HANDSHAKE)(mechanism=self.mechanism))
        if response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise AuthenticationError(f"Client SASL mechanism '{self.mechanism}' not enabled in the server, enabled "
                                      f"mechanisms are {list(response.mechanisms or [])}",
                                      ErrorCode.UNSUPPORTED_SASL_MECHANISM)
        if response.error_code == ErrorCode.ILLEGAL_SASL_STATE:
            raise AuthenticationError(f"Unexpected handshake request with client mechanism {self.mechanism}, "
                                      f"enabled mechanisms are {list(response.mechanisms or [])} (is the listener "
                                      "a SASL listener?)", ErrorCode.ILLEGAL_SASL_STATE)
        if response.error_code:
            raise AuthenticationError("SaslHandshake failed", _code(response.error_code))
        auth_version = version_for(SASL_AUTHENTICATE)
        body = request_class(SASL_AUTHENTICATE)

        def token(data: bytes) -> bytes:
            reply = roundtrip(SASL_AUTHENTICATE, auth_version, body(auth_bytes=data))
            if reply.error_code:
                raise AuthenticationError(reply.error_message or "Authentication failed", _code(reply.error_code))
            return bytes(reply.auth_bytes or b"")

        if self.mechanism == "PLAIN":
            token(plain_token(self.username, self.password))
            return
        client = ScramClient(self.mechanism, self.username, self.password)
        server_first = token(client.first())
        client.verify(token(client.final(server_first)))


def _code(value: int) -> ErrorCode | None:
    return ErrorCode(value) if value in ErrorCode._value2member_map_ else None


# ------------------------------------------------------------------------------------------------
# TLS context
# ------------------------------------------------------------------------------------------------

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The client TLS context of Kafka's client ``ssl.*`` keys."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip()
    if algorithm.lower() not in ("https", ""):
        raise ClientConfigError(f"ssl.endpoint.identification.algorithm={algorithm} is not supported (https or empty)")
    ctx.check_hostname = algorithm.lower() == "https"
    protocols = [p.strip() for p in (props.get("ssl.enabled.protocols") or "").split(",") if p.strip()]
    chosen = [_TLS_VERSIONS[p] for p in protocols if p in _TLS_VERSIONS]
    if protocols and not chosen:
        raise ClientConfigError(f"ssl.enabled.protocols={','.join(protocols)}: none of TLSv1.2, TLSv1.3")
    if chosen:
        ctx.minimum_version, ctx.maximum_version = min(chosen), max(chosen)
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ciphers = props.get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in ciphers.split(",") if c.strip()))
        except ssl.SSLError as exc:
            raise ClientConfigError(f"ssl.cipher.suites: {exc}") from None
    _load_trust(ctx, props)
    _load_key_store(ctx, props)
    return ctx


def _pkcs12(location: str, password: str | None, what: str) -> tuple[bytes, list[bytes]]:
    """(private key PEM or b"", certificate PEMs: the store's own first) of a PKCS12 file."""
    try:
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - only for PKCS12
        from cryptography.hazmat.primitives.serialization import pkcs12  # noqa: PLC0415
    except ImportError:
        raise ClientConfigError(f"{what}: reading PKCS12 needs the 'cryptography' package; or use PEM") from None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(Path(location).read_bytes(),
                                                            password.encode() if password else None)
    except (OSError, ValueError) as exc:
        raise ClientConfigError(f"Failed to load PKCS12 {what} {location}: {exc}") from None
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()) if key else b""
    certs = ([cert.public_bytes(pem)] if cert is not None else []) + [c.public_bytes(pem) for c in extra or []]
    return key_pem, certs


def _load_trust(ctx: ssl.SSLContext, props: Mapping[str, str]) -> None:
    inline = props.get("ssl.truststore.certificates")
    location = props.get("ssl.truststore.location")
    store_type = (props.get("ssl.truststore.type") or "JKS").strip().upper()
    try:
        if inline:
            ctx.load_verify_locations(cadata=normalize_pem(inline).decode())
        elif not location:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)  # Kafka: the JVM's default trust store
        elif store_type == "PEM":
            ctx.load_verify_locations(cafile=location)
        elif store_type == "PKCS12":
            _, certs = _pkcs12(location, props.get("ssl.truststore.password"), "trust store")
            if not certs:
                raise ClientConfigError(f"PKCS12 trust store {location} holds no certificate")
            ctx.load_verify_locations(cadata=b"".join(certs).decode())
        else:
            raise ClientConfigError(f"ssl.truststore.type={store_type}{' (Kafka’s default)' if store_type == 'JKS' else ''}"
                                    " is not supported by Odradek's tools; use PEM or PKCS12 (keytool -importkeystore "
                                    "-deststoretype PKCS12 converts a JKS store)")
    except (OSError, ssl.SSLError, ValueError) as exc:
        if isinstance(exc, ClientConfigError):
            raise
        raise ClientConfigError(f"Failed to load trust store {location or '(inline)'}: {exc}") from None


def _load_key_store(ctx: ssl.SSLContext, props: Mapping[str, str]) -> None:
    chain, key = props.get("ssl.keystore.certificate.chain"), props.get("ssl.keystore.key")
    location = props.get("ssl.keystore.location")
    store_type = (props.get("ssl.keystore.type") or "JKS").strip().upper()
    key_password = props.get("ssl.key.password") or None
    try:
        if chain and key:
            load_cert_chain_pem(ctx, normalize_pem(chain), normalize_pem(key), key_password)
        elif chain or key:
            raise ClientConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
        elif not location:
            return
        elif store_type == "PEM":
            ctx.load_cert_chain(location, password=key_password)
        elif store_type == "PKCS12":
            key_pem, certs = _pkcs12(location, props.get("ssl.keystore.password"), "key store")
            if not key_pem or not certs:
                raise ClientConfigError(f"PKCS12 key store {location} holds no private key with a certificate")
            load_cert_chain_pem(ctx, b"".join(certs), key_pem, None)
        else:
            raise ClientConfigError(f"ssl.keystore.type={store_type} is not supported by Odradek's tools; use PEM "
                                    "or PKCS12")
    except (OSError, ssl.SSLError, ValueError) as exc:
        if isinstance(exc, ClientConfigError):
            raise
        raise ClientConfigError(f"Failed to load key store {location or '(inline)'}: {exc}") from None


__all__ = [
    "AuthenticationError",
    "ClientConfigError",
    "ClientSecurity",
    "JaasEntry",
    "ScramClient",
    "jaas_credentials",
    "load_properties",
    "parse_jaas_config",
    "parse_properties",
    "plain_token",
    "ssl_context",
]
