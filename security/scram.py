"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server side of the exchange.

A credential is what Kafka stores for a user and mechanism (its UserScramCredentialsRecord): salt,
iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key"). The password itself is never kept.

Credentials live in the KRaft metadata log as UserScramCredentialRecords, written by ``odradek
storage format --add-scram`` (:func:`parse_scram_argument`, kafka-storage.sh's syntax, into
bootstrap.checkpoint) and by AlterUserScramCredentials (the admin client sends salt and salted
password). ``odradek.sasl.scram.credentials`` adds config-given users below those
(:class:`odradek.security.sasl.CredentialStore`).
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


#: Kafka's ScramMechanism type ids back to names (UNKNOWN for anything else)
MECHANISM_NAMES = {v: k for k, v in MECHANISM_TYPES.items()}


class ScramFormatError(ValueError):
    """An ``--add-scram`` argument Kafka's StorageTool would refuse (the message says why)."""


def _split_components(body: str) -> list[str]:
    """``a=1,b="x,y"`` -> ``['a=1', 'b="x,y"']``: Kafka splits at every comma; a comma inside a
    double-quoted value is kept here as well (Kafka would refuse such an argument)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in body:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _b64(what: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise ScramFormatError(f"Failed to decode given {what}: {value}") from None


def parse_scram_argument(argument: str) -> tuple[str, str, ScramCredential]:
    """One ``--add-scram`` argument, e.g. ``SCRAM-SHA-256=[name=alice,password=alice-secret]``.

    Kafka's StorageTool rules: ``name`` is required; ``password``, or ``saltedpassword`` together
    with ``salt`` (both base64); optional ``salt`` and ``iterations`` (default 4096, within the
    mechanism's 4096..16384); a value may be double-quoted; any other key is an error.
    Returns (mechanism, user name, credential).
    """
    text = argument.strip()
    mechanism, sep, config = text.partition("=")
    if not sep:
        raise ScramFormatError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mechanism not in MECHANISMS:
        raise ScramFormatError(f"The add-scram mechanism {mechanism} is not supported.")
    if not config.startswith("["):
        raise ScramFormatError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ScramFormatError("Expected configuration string to end with ]")
    fields: dict[str, str] = {}
    for component in _split_components(config[1:-1]):
        key, eq, value = component.partition("=")
        if not eq:
            raise ScramFormatError(f"No equals sign found in SCRAM component: {component}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        fields[key] = value
    name = fields.pop("name", None)
    if name is None:
        raise ScramFormatError("You must supply 'name' to add-scram")
    salt = _b64("salt", fields.pop("salt")) if "salt" in fields else None
    iterations_text = fields.pop("iterations", None)
    try:
        iterations = DEFAULT_ITERATIONS if iterations_text is None else int(iterations_text)
    except ValueError:
        raise ScramFormatError(f"Failed to parse iterations count: {iterations_text}") from None
    password = fields.pop("password", None)
    salted_text = fields.pop("saltedpassword", None)
    if password is None:
        if salted_text is None:
            raise ScramFormatError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt is None:
            raise ScramFormatError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if fields:
        raise ScramFormatError(f"Unknown SCRAM configurations: {', '.join(sorted(fields))}")
    if iterations < MIN_ITERATIONS[mechanism]:
        raise ScramFormatError(f"The 'iterations' value must be >= {MIN_ITERATIONS[mechanism]} for add-scram "
                               f"using {mechanism}")
    if iterations > MAX_ITERATIONS:
        raise ScramFormatError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {mechanism}")
    if password is not None:
        return mechanism, name, make_credential(mechanism, password, iterations, salt)
    assert salt is not None and salted_text is not None
    return mechanism, name, credential_from_salted(mechanism, _b64("saltedPassword", salted_text), salt, iterations)


_ENTRY = re.compile(r"SCRAM-SHA-(?:256|512)\s*=\s*\[[^\]]*\]")


def parse_add_scram(text: str) -> dict[tuple[str, str], ScramCredential]:
    """Credentials from ``SCRAM-SHA-256=[name=alice,password=secret];SCRAM-SHA-512=[...]``
    (the ``odradek.sasl.scram.credentials`` key): entries in :func:`parse_scram_argument`'s syntax."""
    out: dict[tuple[str, str], ScramCredential] = {}
    for entry in _ENTRY.findall(text or ""):
        mechanism, name, cred = parse_scram_argument(re.sub(r"\s*=\s*\[", "=[", entry, count=1))
        out[(mechanism, name)] = cred
    return out


def _decode_saslname(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError("Invalid username")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One server-side SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup, token_lookup=None) -> None:
        self.mechanism = mechanism
        self.algorithm = MECHANISMS[mechanism]
        self.lookup = lookup  # (mechanism, user) -> ScramCredential | None
        # (mechanism, token id) -> (ScramCredential, owner name) | None: logins with tokenauth=true
        self.token_lookup = token_lookup
        self.state = "first"
        self.username = ""
        self.complete = False
        #: the login used a delegation token (``username`` is then the token's owner)
        self.token_authenticated = False

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
        extensions = dict(p.split("=", 1) for p in parts[4:] if "=" in p)
        if extensions.get("tokenauth", "").lower() == "true":
            # a delegation token: the user name is the token id, the password its base64 HMAC
            found = self.token_lookup(self.mechanism, self.username) if self.token_lookup else None
            if found is None:
                raise ScramError(f"Token Authentication failed: Invalid tokenId : {self.username}")
            self.credential, self.username = found
            self.token_authenticated = True
        else:
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
