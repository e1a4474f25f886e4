"""Server TLS contexts from Kafka's ``ssl.*`` keys.

Kafka reads JKS or PKCS12 key stores, or PEM (``ssl.keystore.type=PEM``) given as a file
(``ssl.keystore.location``, certificate chain and private key in one file, the key optionally
encrypted with ``ssl.key.password``) or inline (``ssl.keystore.certificate.chain`` +
``ssl.keystore.key``). Python's ``ssl`` loads PEM only, so PKCS12 stores are converted in memory
with the ``cryptography`` package. JKS (Java's own format) is refused with a clear message.

Client authentication follows ``ssl.client.auth`` (none / requested / required) with the CAs of
the trust store; the principal of a client with a certificate is ``User:<subject DN>`` (RFC 4514
order, like Kafka's default principal builder), otherwise ``User:ANONYMOUS``.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from pathlib import Path
from typing import Any

from . import ANONYMOUS, listener_config

log = logging.getLogger(__name__)


class SslConfigError(ValueError):
    """The listener's ssl.* keys do not describe a usable key store or trust store."""


def _pkcs12_to_pem(data: bytes, password: str | None) -> tuple[bytes, bytes | None, list[bytes]]:
    """(private key PEM or b"", certificate PEM or None, extra certificate PEMs) of a PKCS12 store."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - only for PKCS12
    from cryptography.hazmat.primitives.serialization import pkcs12  # noqa: PLC0415

    key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    key_pem = (
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption())
        if key is not None else b""
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM) if cert is not None else None
    return key_pem, cert_pem, [c.public_bytes(serialization.Encoding.PEM) for c in extra or []]


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str) -> bytes:
    """Inline PEM as people put it in properties: with real newlines, with literal ``\\n``, or on one
    line with the base64 body run together. Each block comes back in the standard 64-column form."""
    text = text.replace("\\n", "\n")
    blocks = []
    for label, body in _PEM_BLOCK.findall(text):
        lines = [line.strip() for line in body.strip().splitlines()]
        headers = [line for line in lines if ":" in line]  # e.g. Proc-Type of old encrypted keys
        b64 = "".join(line for line in lines if line and ":" not in line).replace(" ", "")
        wrapped = [b64[i:i + 64] for i in range(0, len(b64), 64)]
        head = headers + ([""] if headers else [])
        blocks.append("\n".join([f"-----BEGIN {label}-----", *head, *wrapped, f"-----END {label}-----"]))
    if not blocks:
        raise SslConfigError("no PEM block found in the inline key store value")
    return ("\n".join(blocks) + "\n").encode()


def load_cert_chain_pem(ctx: ssl.SSLContext, chain_pem: bytes, key_pem: bytes, password: str | None) -> None:
    """``load_cert_chain`` takes file names only: write a private temp file, load it, delete it."""
    fd, path = tempfile.mkstemp(prefix="odradek-keystore-", suffix=".pem")
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, chain_pem.rstrip(b"\n") + b"\n" + key_pem)
        os.close(fd)
        ctx.load_cert_chain(path, password=password or None)
    finally:
        os.unlink(path)


def server_context(config: Any, listener_name: str) -> ssl.SSLContext:
    """The TLS context of one SSL / SASL_SSL listener."""

    def get(key: str) -> Any:
        return listener_config(config, listener_name, key)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    protocols = get("ssl.enabled.protocols")
    if isinstance(protocols, str):
        protocols = [p.strip() for p in protocols.split(",") if p.strip()]
    versions = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
    chosen = [versions[p] for p in protocols or [] if p in versions]
    if chosen:
        ctx.minimum_version, ctx.maximum_version = min(chosen), max(chosen)
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        ctx.set_ciphers(ciphers if isinstance(ciphers, str) else ":".join(ciphers))

    store_type = (get("ssl.keystore.type") or "JKS").upper()
    location = get("ssl.keystore.location")
    key_password = get("ssl.key.password")
    inline_chain, inline_key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    if store_type == "PEM":
        if inline_chain and inline_key:
            load_cert_chain_pem(ctx, normalize_pem(inline_chain), normalize_pem(inline_key), key_password)
        elif location:
            try:
                ctx.load_cert_chain(location, password=key_password or None)
            except (OSError, ssl.SSLError) as exc:
                raise SslConfigError(f"Failed to load PEM key store {location}: {exc}") from None
        else:
            raise SslConfigError(f"Listener {listener_name}: ssl.keystore.location or "
                                 "ssl.keystore.certificate.chain/ssl.keystore.key is required")
    elif store_type == "PKCS12":
        if not location:
            raise SslConfigError(f"Listener {listener_name}: ssl.keystore.location is required")
        key_pem, cert_pem, extra = _pkcs12_to_pem(Path(location).read_bytes(), get("ssl.keystore.password"))
        if cert_pem is None or not key_pem:
            raise SslConfigError(f"PKCS12 key store {location} holds no private key with a certificate")
        load_cert_chain_pem(ctx, cert_pem + b"".join(extra), key_pem, None)
    else:
        raise SslConfigError(
            f"Listener {listener_name}: ssl.keystore.type={store_type} is not supported; use PEM or PKCS12 "
            "(convert a JKS store with keytool -importkeystore -deststoretype PKCS12)"
        )

    client_auth = (get("ssl.client.auth") or "none").lower()
    if client_auth in ("required", "requested"):
        _load_trust_store(ctx, get)
        ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def _load_trust_store(ctx: ssl.SSLContext, get) -> None:
    inline = get("ssl.truststore.certificates")
    if inline:
        ctx.load_verify_locations(cadata=normalize_pem(inline).decode())
        return
    location = get("ssl.truststore.location")
    if not location:
        raise SslConfigError("ssl.client.auth needs ssl.truststore.location or ssl.truststore.certificates")
    store_type = (get("ssl.truststore.type") or "JKS").upper()
    if store_type == "PEM":
        ctx.load_verify_locations(cafile=location)
    elif store_type == "PKCS12":
        _, cert_pem, extra = _pkcs12_to_pem(Path(location).read_bytes(), get("ssl.truststore.password"))
        ctx.load_verify_locations(cadata=b"".join(([cert_pem] if cert_pem else []) + extra).decode())
    else:
        raise SslConfigError(f"ssl.truststore.type={store_type} is not supported; use PEM or PKCS12")


def peer_principal(stream: Any) -> str:
    """``User:<subject DN>`` of a client certificate, else ``User:ANONYMOUS`` (Kafka's default builder)."""
    try:
        der = stream.getpeercert(binary_form=True)
    except (ValueError, AttributeError):
        der = None
    if not der:
        return ANONYMOUS
    from cryptography import x509  # noqa: PLC0415

    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
