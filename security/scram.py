"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server side of the exchange.

A credential is what Kafka stores for a user and mechanism (its UserScramCredentialsRecord): salt,
iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key"). The password itself is never kept.

Users come from ``odradek.sasl.scram.credentials`` in the syntax of ``kafka-storage format
--add-scram`` (``SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]``; several
entries separated by ``;``) and from AlterUserScramCredentials requests (salted password sent by
the admin client, as ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]'`` does).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's mechanism type ids in UserScramCredentialsRecord / the Alter/Describe APIs
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MIN_ITERATIONS = {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 4096}
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramError(Exception):
    """The client's SCRAM message is malformed or its proof is wrong (authentication fails)."""


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps for one user and mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(algorithm: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, algorithm).digest()


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 (PBKDF2 with HMAC)."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    algorithm = MECHANISMS[mechanism]
    client_key = _hmac(algorithm, salted, b"Client Key")
    stored_key = hashlib.new(algorithm, client_key).digest()
    server_key = _hmac(algorithm, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential with a random salt (the way Kafka's tools create one)."""
    salt = salt if salt is not None else os.urandom(16)
    return credential_from_salted(mechanism, salted_password(mechanism, password.encode(), salt, iterations),
                                  salt, iterations)


_ENTRY = re.compile(r"(SCRAM-SHA-(?:256|512))\s*=\s*\[([^\]]*)\]")


def parse_add_scram(text: str) -> dict[tuple[str, str], ScramCredential]:
    """Credentials from ``SCRAM-SHA-256=[name=alice,password=secret];SCRAM-SHA-512=[...]``.

    Keys of one entry: ``name``, ``password`` (or ``saltedpassword`` + ``salt``, base64), ``salt``
    (base64, optional), ``iterations`` (default 4096, Kafka's range 4096..16384).
    """
    out: dict[tuple[str, str], ScramCredential] = {}
    for mechanism, body in _ENTRY.findall(text or ""):
        fields: dict[str, str] = {}
        for part in re.findall(r'(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*)', body):
            key, value = part
            fields[key.lower()] = value[1:-1] if value.startswith('"') else value.strip()
        name = fields.get("name")
        if not name:
            raise ValueError(f"SCRAM credential without name: {body!r}")
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        if not MIN_ITERATIONS[mechanism] <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"iterations {iterations} of {name} outside {MIN_ITERATIONS[mechanism]}..{MAX_ITERATIONS}")
        salt = base64.b64decode(fields["salt"]) if "salt" in fields else None
        if "saltedpassword" in fields:
            if salt is None:
                raise ValueError(f"saltedpassword of {name} needs a salt")
            cred = credential_from_salted(mechanism, base64.b64decode(fields["saltedpassword"]), salt, iterations)
        elif "password" in fields:
            cred = make_credential(mechanism, fields["password"], iterations, salt)
        else:
            raise ValueError(f"SCRAM credential of {name} has no password")
        out[(mechanism, name)] = cred
    return out


def _decode_saslname(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError("Invalid username")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One server-side SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup) -> None:
        self.mechanism = mechanism
        self.algorithm = MECHANISMS[mechanism]
        self.lookup = lookup  # (mechanism, user) -> ScramCredential | None
        self.state = "first"
        self.username = ""
        self.complete = False

    def evaluate(self, message: bytes) -> bytes:
        """The reply to the client's next message; raises ScramError when authentication fails."""
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message encoding") from None
        if self.state == "first":
            return self._client_first(text)
        if self.state == "final":
            return self._client_final(text)
        raise ScramError("Unexpected SCRAM message after the exchange completed")

    def _client_first(self, text: str) -> bytes:
        parts = text.split(",")
        if len(parts) < 4 or parts[0] not in ("n", "y") or not parts[2].startswith("n=") \
                or not parts[3].startswith("r="):
            raise ScramError("Invalid SCRAM client first message")
        authzid = parts[1]
        self.gs2_header = f"{parts[0]},{authzid},"
        self.username = _decode_saslname(parts[2][2:])
        if authzid and authzid[2:] != self.username:
            raise ScramError("Authentication failed: Client requested an authorization id that is different "
                             "from username")
        self.client_first_bare = ",".join(parts[2:])
        client_nonce = parts[3][2:]
        if not client_nonce:
            raise ScramError("Invalid SCRAM client nonce")
        self.credential = self.lookup(self.mechanism, self.username)
        if self.credential is None:
            raise ScramError(f"Authentication failed: Invalid user credentials for {self.username}")
        self.nonce = client_nonce + base64.b64encode(os.urandom(24)).decode()
        self.server_first = (f"r={self.nonce},s={base64.b64encode(self.credential.salt).decode()},"
                             f"i={self.credential.iterations}")
        self.state = "final"
        return self.server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramError("Invalid SCRAM client final message")
        fields = dict(item.split("=", 1) for item in without_proof.split(",") if "=" in item)
        if fields.get("r") != self.nonce:
            raise ScramError("Invalid client nonce in the final client message.")
        if fields.get("c") != base64.b64encode(self.gs2_header.encode()).decode():
            raise ScramError("Invalid channel binding")
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        cred = self.credential
        client_signature = _hmac(self.algorithm, cred.stored_key, auth_message)
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise ScramError("Invalid client proof encoding") from None
        if len(proof) != len(client_signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.algorithm, client_key).digest(), cred.stored_key):
            raise ScramError("Invalid client credentials")
        server_signature = _hmac(self.algorithm, cred.server_key, auth_message)
        self.state = "done"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
