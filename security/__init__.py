"""Security of the broker's listeners: TLS, SASL authentication and ACL authorization (docs/security.md).

* :mod:`.ssl_context` -- server ``ssl.SSLContext`` from Kafka's ``ssl.*`` keys (PEM, PKCS12);
* :mod:`.sasl` -- the per-connection SASL exchange (PLAIN, SCRAM-SHA-256/512) as Kafka's
  SaslServerAuthenticator runs it, with the JAAS-style credential config;
* :mod:`.scram` -- RFC 5802/7677 SCRAM: credentials (salt, stored key, server key) and the server side;
* :mod:`.acl` -- StandardAuthorizer-like ACL store and checks.

The security protocol of a listener comes from ``listener.security.protocol.map`` (Kafka's default
maps each of the four protocol names to itself). Every ``ssl.*``/``sasl.*`` key may be given per
listener as ``listener.name.<listener in lower case>.<key>``, which wins over the plain key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
ANONYMOUS = "User:ANONYMOUS"


@dataclass
class Session:
    """Security state of one connection: its listener, protocol, principal and SASL exchange."""

    listener_name: str
    security_protocol: str
    principal: str = ANONYMOUS
    authenticator: Any = None  # sasl.SaslServerAuthenticator on SASL listeners
    close_after_response: bool = False  # a failed authentication is answered, then the connection closes
    peer: str = "?"

    @property
    def peer_ip(self) -> str:
        return self.peer.rpartition(":")[0] or self.peer


def listener_security_protocol(config: Any, listener_name: str) -> str | None:
    """PLAINTEXT / SSL / SASL_PLAINTEXT / SASL_SSL for a listener, None if it has no mapping."""
    mapping: dict[str, str] = {p: p for p in PROTOCOLS}
    for item in config.get("listener.security.protocol.map") or []:
        if ":" in item:
            name, _, protocol = item.partition(":")
            mapping[name.strip().upper()] = protocol.strip().upper()
    protocol = mapping.get(listener_name.upper())
    return protocol if protocol in PROTOCOLS else None


def listener_config(config: Any, listener_name: str, key: str, mechanism: str | None = None) -> Any:
    """A security key for one listener: ``listener.name.<l>.[<mechanism>.]<key>``, else the plain key.

    Per-listener values are raw strings (they are not in the broker's key table); plain keys come
    parsed, with Kafka's default.
    """
    prefix = f"listener.name.{listener_name.lower()}."
    candidates = []
    if mechanism is not None:
        candidates.append(f"{prefix}{mechanism.lower()}.{key}")
    candidates.append(prefix + key)
    for name in candidates:
        if name in config.raw:
            return config.raw[name].strip()
    try:
        return config.get(key)
    except KeyError:
        return config.raw.get(key)
