"""Delegation tokens (KIP-48) as a KRaft Kafka keeps them: HMACs, lifetimes, SCRAM credentials.

A token is a DelegationTokenRecord in the KRaft metadata log (owner, requester, renewers as
``User:<name>`` strings, issue / max / expiration timestamps, token id); renewals write the record
again with a new expiration, expiry and the sweep of expired tokens write a
RemoveDelegationTokenRecord. The replayed records are ``MetadataImage.delegation_tokens``.

What is never stored is derived from ``delegation.token.secret.key``, as Kafka derives it:

* the token's HMAC: HMAC-SHA512 keyed with the secret's UTF-8 bytes over the token id's UTF-8 bytes;
* its SCRAM credentials: the base64 of the HMAC is the password of user ``<token id>`` for both
  SCRAM mechanisms, with a random salt and 4096 iterations (the mechanisms' minimum), made once per
  token and broker run. A client logs in with SASL/SCRAM, the token id as user name, the base64
  HMAC as password and the SCRAM extension ``tokenauth=true``; the connection's principal is then
  ``User:<owner name>``, marked token-authenticated (such a connection may not manage tokens).

Without a secret key, tokens are disabled: the APIs answer DELEGATION_TOKEN_AUTH_DISABLED and no
token can log in. Expired tokens are removed every ``delegation.token.expiry.check.interval.ms``
(Kafka's controller sweep); here the sweep runs when a token request or a token login comes and
the interval has passed since the last one, which is when its effect could be seen.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .scram import MECHANISMS, MIN_ITERATIONS, ScramCredential, make_credential

log = logging.getLogger(__name__)

#: what Kafka answers in place of a timestamp on an error (DelegationTokenManager.ErrorTimestamp)
ERROR_TIMESTAMP = -1
#: Kafka's controller removes at most this many expired tokens per sweep
MAX_RECORDS_PER_EXPIRATION = 1000


def token_hmac(secret: str, token_id: str) -> bytes:
    """The HMAC of a token as Kafka computes it (HmacSHA512, key = the secret's UTF-8 bytes)."""
    return hmac.new(secret.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def split_principal(principal: str) -> tuple[str, str]:
    """``User:alice`` -> ("User", "alice") (Kafka's SecurityUtils.parseKafkaPrincipal)."""
    kind, sep, name = principal.partition(":")
    if not sep:
        raise ValueError(f"Invalid principal {principal!r}: no ':' between type and name")
    return kind, name


@dataclass(frozen=True)
class TokenInfo:
    """A token as the metadata holds it (Kafka's TokenInformation); principals as ``Type:name``."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    @classmethod
    def of_record(cls, rec: Any) -> TokenInfo:
        return cls(rec.token_id, rec.owner, rec.requester, tuple(rec.renewers or ()), rec.issue_timestamp,
                   rec.max_timestamp, rec.expiration_timestamp)

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer: owner, requester or a renewer (describe)."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def allowed_to_renew(self, principal: str) -> bool:
        """The controller's allowedToRenew: owner or a renewer (renew and expire)."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms


class DelegationTokenManager:
    """The broker's tokens: settings, HMACs, SCRAM credentials and the sweep of expired tokens."""

    def __init__(self, broker: Any, now_ms: Callable[[], int] | None = None) -> None:
        self.broker = broker
        cfg = broker.config
        secret = cfg.get("delegation.token.secret.key")
        #: None: tokens are disabled (Kafka's tokenAuthEnabled is a non-empty secret)
        self.secret: str | None = secret if secret else None
        self.max_lifetime_ms = int(cfg.get("delegation.token.max.lifetime.ms"))
        self.renew_lifetime_ms = int(cfg.get("delegation.token.expiry.time.ms"))
        self.check_interval_ms = int(cfg.get("delegation.token.expiry.check.interval.ms"))
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._last_sweep_ms = self.now_ms()
        self._hmacs: dict[str, bytes] = {}
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    @property
    def enabled(self) -> bool:
        return self.secret is not None

    # ---------------------------------------------------------------- the tokens in the metadata

    def _records(self) -> dict[str, Any]:
        role = getattr(self.broker, "broker_role", None)
        image = getattr(role, "image", None) if role is not None else None
        if image is None:
            # this node's own metadata log (a single node or a controller); a broker of a KRaft
            # cluster reads the tokens from the controllers' records it follows (above)
            image = getattr(getattr(self.broker, "metadata_store", None), "image", None)
        return getattr(image, "delegation_tokens", None) or {}

    def tokens(self) -> list[TokenInfo]:
        """Every token the metadata holds, in the order of the records' arrival."""
        return [TokenInfo.of_record(r) for r in self._records().values()]

    def token(self, token_id: str) -> TokenInfo | None:
        rec = self._records().get(token_id)
        return TokenInfo.of_record(rec) if rec is not None else None

    def hmac(self, token_id: str) -> bytes:
        """The token's HMAC (empty when tokens are disabled)."""
        if self.secret is None:
            return b""
        value = self._hmacs.get(token_id)
        if value is None:
            value = self._hmacs[token_id] = token_hmac(self.secret, token_id)
        return value

    def token_for_hmac(self, value: bytes) -> TokenInfo | None:
        """The token whose HMAC is `value` (Kafka's tokenCache.tokenForHmac)."""
        if self.secret is None:
            return None
        for token_id in self._records():
            if hmac.compare_digest(self.hmac(token_id), bytes(value)):
                return self.token(token_id)
        return None

    # ---------------------------------------------------------------- SASL/SCRAM with a token

    def scram_login(self, mechanism: str, token_id: str) -> tuple[ScramCredential, str] | None:
        """(SCRAM credential, owner name) of a token for a ``tokenauth=true`` login, or None when
        tokens are disabled or the token does not exist (any more)."""
        if self.secret is None or mechanism not in MECHANISMS:
            return None
        self.maybe_sweep()
        info = self.token(token_id)
        if info is None:
            return None
        cred = self._credentials.get((mechanism, token_id))
        if cred is None:
            password = base64.b64encode(self.hmac(token_id)).decode("ascii")
            cred = self._credentials[(mechanism, token_id)] = make_credential(
                mechanism, password, MIN_ITERATIONS[mechanism])
        return cred, split_principal(info.owner)[1]

    # ---------------------------------------------------------------- persistence

    def append(self, records: list[tuple[str, Any]]) -> None:
        """Write token records to the metadata log (one batch, fsynced) before anything answers."""
        store = getattr(self.broker, "metadata_store", None)
        if store is None or getattr(store, "log", None) is None:
            raise RuntimeError("no metadata log to store delegation tokens in")
        store.append_records(records)
        for name, rec in records:
            if name == "RemoveDelegationTokenRecord":
                self._forget(rec.token_id)

    def _forget(self, token_id: str) -> None:
        self._hmacs.pop(token_id, None)
        for mechanism in MECHANISMS:
            self._credentials.pop((mechanism, token_id), None)

    def maybe_sweep(self) -> int:
        """Remove the expired tokens if the check interval has passed since the last sweep."""
        now = self.now_ms()
        if now - self._last_sweep_ms < self.check_interval_ms:
            return 0
        self._last_sweep_ms = now
        return self.sweep(now)

    def sweep(self, now_ms: int | None = None) -> int:
        """Write a RemoveDelegationTokenRecord for every expired token (Kafka's controller sweep)."""
        from ..kraft.records import new_record  # noqa: PLC0415 - metadata records only on a change

        now = self.now_ms() if now_ms is None else now_ms
        expired = [t for t in self.tokens() if t.expired(now)][:MAX_RECORDS_PER_EXPIRATION]
        if not expired or self.secret is None:
            return 0
        for t in expired:
            log.info("Delegation token expired for token: %s for owner: %s", t.token_id, t.owner)
        try:
            self.append([("RemoveDelegationTokenRecord", new_record("RemoveDelegationTokenRecord",
                                                                    token_id=t.token_id)) for t in expired])
        except RuntimeError:
            return 0
        return len(expired)


def token_manager(broker: Any) -> DelegationTokenManager:
    """The broker's DelegationTokenManager (created on first use)."""
    manager = getattr(broker, "delegation_tokens", None)
    if manager is None:
        manager = broker.delegation_tokens = DelegationTokenManager(broker)
    return manager
