"""The server side of Kafka's SASL exchange on SASL_PLAINTEXT / SASL_SSL listeners.

Kafka's SaslServerAuthenticator state machine, as clients see it:

1. optionally ApiVersions (any number of times);
2. SaslHandshake (v0 or v1) naming a mechanism of ``sasl.enabled.mechanisms``; another mechanism
   gets UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection is closed;
3. v1: SaslAuthenticate requests carry the SASL tokens; v0 (legacy): the tokens follow as bare
   size-prefixed frames with no request header;
4. on success the connection serves every API as ``User:<name>``; on failure SaslAuthenticate
   answers SASL_AUTHENTICATION_FAILED with Kafka's message and the connection is closed (legacy
   v0 tokens: the connection is just closed).

Any other request before authentication closes the connection. Mechanisms: PLAIN (users from the
JAAS config, ``user_<name>="<password>"``), SCRAM-SHA-256 and SCRAM-SHA-512 (see :mod:`.scram`;
with the ``tokenauth=true`` extension a delegation token logs in, :mod:`.delegation_tokens`).
GSSAPI and OAUTHBEARER are not implemented: a handshake for them is refused like an unknown one.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable
from typing import Any

from ..wire.errors import ErrorCode
from . import Session, listener_config
from .delegation_tokens import token_manager
from .scram import MECHANISM_TYPES, ScramCredential, ScramError, ScramServer, parse_add_scram
from .scram import MECHANISMS as SCRAM_MECHANISMS

log = logging.getLogger(__name__)

SUPPORTED = ("PLAIN", *SCRAM_MECHANISMS)


class SaslAuthenticationFailed(Exception):
    """Authentication failed; the message is what Kafka sends to the client."""


def parse_jaas_options(text: str | None) -> dict[str, str]:
    """``key="value"`` options of a JAAS login module line (quotes and backslash escapes)."""
    if not text:
        return {}
    out = {}
    for key, value in re.findall(r'([\w.-]+)\s*=\s*"((?:[^"\\]|\\.)*)"', text):
        out[key] = re.sub(r"\\(.)", r"\1", value)
    return out


class CredentialStore:
    """SCRAM credentials of the broker, looked up at each authentication (changes apply at once).

    Two layers, per (mechanism, user): the KRaft metadata log's UserScramCredentialRecords
    (``odradek storage format --add-scram`` and AlterUserScramCredentials; they survive restarts)
    win; ``odradek.sasl.scram.credentials`` (read from the config at each start, never written to
    the metadata log) fills in the credentials the metadata log does not have.
    """

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        #: the config key's credentials
        self.credentials: dict[tuple[str, str], ScramCredential] = parse_add_scram(
            broker.config.get("odradek.sasl.scram.credentials") or "")

    def metadata_credentials(self) -> dict[tuple[int, str], Any]:
        """UserScramCredentialRecords by (mechanism type, user) from the metadata store ({} without one)."""
        store = getattr(self.broker, "metadata_store", None)
        image = getattr(store, "image", None)
        return getattr(image, "scram", None) or {}

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        rec = self.metadata_credentials().get((MECHANISM_TYPES.get(mechanism, 0), user))
        if rec is not None:
            return ScramCredential(bytes(rec.salt), bytes(rec.stored_key), bytes(rec.server_key), rec.iterations)
        return self.credentials.get((mechanism, user))

    def iterations_by_user(self) -> dict[str, dict[int, int]]:
        """user -> {mechanism type: iterations} over both layers (what DescribeUserScramCredentials shows)."""
        out: dict[str, dict[int, int]] = {}
        for (mechanism, user), cred in self.credentials.items():
            out.setdefault(user, {})[MECHANISM_TYPES[mechanism]] = cred.iterations
        for (mechanism_type, user), rec in self.metadata_credentials().items():
            out.setdefault(user, {})[mechanism_type] = rec.iterations
        return out


def credential_store(broker: Any) -> CredentialStore:
    """The broker's CredentialStore (created on first use)."""
    store = getattr(broker, "scram_credentials", None)
    if store is None:
        store = broker.scram_credentials = CredentialStore(broker)
    return store


class PlainServer:
    """SASL PLAIN (RFC 4616): ``[authzid] NUL authcid NUL passwd`` checked against the JAAS users."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.username = ""
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                                           f"{len(parts)}")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password") from None
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an authorization id "
                                           "that is different from username")
        self.username = username
        self.complete = True
        return b""


class SaslServerAuthenticator:
    """The SASL state of one connection (created per connection by :meth:`factory`)."""

    def __init__(self, session: Session, mechanisms: list[str], make_server: Callable[[str], Any]) -> None:
        self.session = session
        self.enabled = mechanisms
        self._make_server = make_server
        self.mechanism: str | None = None
        self.server: Any = None
        self.complete = False
        self.expects_raw_token = False
        self.handshake_done = False
        #: authenticated with a delegation token (Kafka's KafkaPrincipal.tokenAuthenticated)
        self.token_authenticated = False

    @classmethod
    def factory(cls, broker: Any, listener_name: str) -> Callable[[Session], SaslServerAuthenticator]:
        """Read the listener's mechanisms and credentials once; raise on a config that cannot work."""
        mechanisms = listener_config(broker.config, listener_name, "sasl.enabled.mechanisms")
        if isinstance(mechanisms, str):
            mechanisms = [m.strip() for m in mechanisms.split(",") if m.strip()]
        mechanisms = [m.upper() for m in mechanisms or []]
        unsupported = [m for m in mechanisms if m not in SUPPORTED]
        if unsupported:
            log.warning("SASL mechanisms %s of listener %s are not supported by Odradek; clients asking for "
                        "them get UNSUPPORTED_SASL_MECHANISM", unsupported, listener_name)
        plain_users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            jaas = listener_config(broker.config, listener_name, "sasl.jaas.config", mechanism="PLAIN")
            options = parse_jaas_options(jaas)
            plain_users = {k[5:]: v for k, v in options.items() if k.startswith("user_")}
            if not plain_users:
                log.warning("Listener %s enables PLAIN but its JAAS config has no user_<name> entries",
                            listener_name)
        store = credential_store(broker)
        usable = [m for m in mechanisms if m in SUPPORTED]
        tokens = token_manager(broker)

        def make_server(mechanism: str) -> Any:
            if mechanism == "PLAIN":
                return PlainServer(plain_users)
            return ScramServer(mechanism, store.lookup, tokens.scram_login)

        return lambda session: cls(session, usable, make_server)

    # -- SaslHandshake ------------------------------------------------------------------------
    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        """Choose the mechanism; NONE, UNSUPPORTED_SASL_MECHANISM or ILLEGAL_SASL_STATE."""
        if self.handshake_done or self.complete:
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.enabled:
            log.info("Closing connection from %s: unsupported SASL mechanism %s (enabled: %s)",
                     self.session.peer, mechanism, self.enabled)
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.handshake_done = True
        self.mechanism = mechanism
        self.server = self._make_server(mechanism)
        self.expects_raw_token = version == 0
        return ErrorCode.NONE

    # -- tokens -------------------------------------------------------------------------------
    def authenticate(self, token: bytes) -> tuple[ErrorCode, str | None, bytes]:
        """One SaslAuthenticate token: (error, message, reply token)."""
        if not self.handshake_done or self.complete or self.expects_raw_token:
            return ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request", b""
        try:
            reply = self.server.evaluate(token)
        except (SaslAuthenticationFailed, ScramError) as exc:
            message = self._failure_message(exc)
            log.info("Failed authentication with /%s (%s)", self.session.peer_ip, message)
            return ErrorCode.SASL_AUTHENTICATION_FAILED, message, b""
        self._maybe_done()
        return ErrorCode.NONE, None, reply

    def evaluate_raw(self, token: bytes) -> bytes | None:
        """A legacy (SaslHandshake v0) token; None = failed, close the connection."""
        try:
            reply = self.server.evaluate(token)
        except (SaslAuthenticationFailed, ScramError) as exc:
            log.info("Failed authentication with /%s (%s)", self.session.peer_ip, self._failure_message(exc))
            return None
        self._maybe_done()
        return reply

    def _failure_message(self, exc: Exception) -> str:
        # Kafka sends a SaslAuthenticationException's own message (PLAIN's), and a generic one for
        # the SaslException of SCRAM, so a client cannot probe which users exist.
        if isinstance(exc, SaslAuthenticationFailed):
            return str(exc)
        return ("Authentication failed during authentication due to invalid credentials with SASL "
                f"mechanism {self.mechanism}")

    def _maybe_done(self) -> None:
        if self.server.complete:
            self.complete = True
            self.expects_raw_token = False
            self.session.principal = f"User:{self.server.username}"
            self.token_authenticated = getattr(self.server, "token_authenticated", False)
            log.debug("%s authenticated as %s with %s", self.session.peer, self.session.principal, self.mechanism)
