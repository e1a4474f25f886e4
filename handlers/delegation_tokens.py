"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41), as a combined KRaft Kafka 4.4 node serves them (versions 1-3, 1-2,
1-2, 1-3).

The tokens themselves (HMAC, SCRAM credentials, the sweep) are :mod:`odradek.security.delegation_tokens`.
The checks come in Kafka's order:

* every API: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a PLAINTEXT listener, on SSL without a client
  certificate, and on a connection that logged in with a token (timestamps -1);
* create: DELEGATION_TOKEN_AUTHORIZATION_FAILED when the owner is not the requester and the
  requester may not CREATE_TOKENS on ``User:<owner>``; INVALID_PRINCIPAL_TYPE for a renewer that
  is no ``User``; then the controller's DELEGATION_TOKEN_AUTH_DISABLED without
  ``delegation.token.secret.key`` (timestamps 0, as the controller's answer carries them);
* renew: DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED, DELEGATION_TOKEN_OWNER_MISMATCH
  (only the owner and the renewers may renew); expire: NOT_FOUND, OWNER_MISMATCH, and EXPIRED unless
  the period is negative (remove at once);
* describe: the tokens of the owners asked for (an empty list: none; null: all) that the requester
  owns, requested or may renew, or may DESCRIBE (delegation token resource) or DESCRIBE_TOKENS on
  the owner; without a secret DELEGATION_TOKEN_AUTH_DISABLED.

Lifetimes: a new token lives ``delegation.token.expiry.time.ms`` (renewals likewise, or the
shorter period asked for) and never past ``delegation.token.max.lifetime.ms`` after its issue (or
the shorter max lifetime asked for). Every change is a DelegationTokenRecord or
RemoveDelegationTokenRecord in the metadata log, fsynced before the answer.
"""

from __future__ import annotations

import logging
from typing import Any

from ..logstore.java_hash import hashmap_order, string_hash
from ..security import ANONYMOUS
from ..security.acl import RT_DELEGATION_TOKEN, RT_USER, permits
from ..security.delegation_tokens import ERROR_TIMESTAMP, TokenInfo, split_principal, token_manager
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

CREATE_DELEGATION_TOKEN_KEY = 38
RENEW_DELEGATION_TOKEN_KEY = 39
EXPIRE_DELEGATION_TOKEN_KEY = 40
DESCRIBE_DELEGATION_TOKEN_KEY = 41
CreateResponse = response_class(CREATE_DELEGATION_TOKEN_KEY)
RenewResponse = response_class(RENEW_DELEGATION_TOKEN_KEY)
ExpireResponse = response_class(EXPIRE_DELEGATION_TOKEN_KEY)
DescribeResponse = response_class(DESCRIBE_DELEGATION_TOKEN_KEY)

# Kafka's AclOperation codes of the token operations
OP_DESCRIBE = 8
OP_CREATE_TOKENS = 13
OP_DESCRIBE_TOKENS = 14
LONG_MAX = 2**63 - 1


def _sum(now: int, duration: int) -> int:
    return LONG_MAX if now > LONG_MAX - duration else now + duration


def allow_token_requests(ctx: RequestContext) -> bool:
    """Kafka's KafkaApis.allowTokenRequests: only an authenticated non-token SASL (or 2-way SSL)
    connection may manage tokens."""
    session = ctx.session
    if session is None:
        return False
    if getattr(session.authenticator, "token_authenticated", False):
        return False
    protocol = session.security_protocol
    if protocol == "PLAINTEXT":
        return False
    return not (protocol == "SSL" and session.principal == ANONYMOUS)


def _persist(ctx: RequestContext, records: list[tuple[str, Any]]) -> bool:
    try:
        token_manager(ctx.broker).append(records)
    except RuntimeError:
        log.error("Delegation token change refused: this node has no metadata log to store it in")
        return False
    return True


# ------------------------------------------------------------------------------------------------
# Create
# ------------------------------------------------------------------------------------------------

def _requester(version: int, requester: str, prefix: str) -> dict[str, str]:
    """The token requester fields, which versions below 3 do not have."""
    if version < 3:
        return {}
    kind, name = split_principal(requester)
    return {f"{prefix}_type": kind, f"{prefix}_name": name}


def _create_error(version: int, owner: str, requester: str, code: ErrorCode, timestamp: int = ERROR_TIMESTAMP) -> Any:
    owner_type, owner_name = split_principal(owner)
    return CreateResponse(error_code=int(code), principal_type=owner_type, principal_name=owner_name,
                          **_requester(version, requester, "token_requester_principal"),
                          issue_timestamp_ms=timestamp, expiry_timestamp_ms=timestamp, max_timestamp_ms=timestamp,
                          token_id="", hmac=b"", throttle_time_ms=0)


@handles(CREATE_DELEGATION_TOKEN_KEY, 1, 3)
async def handle_create_delegation_token(ctx: RequestContext, header, request) -> object:
    from ..cluster_metadata import random_uuid  # noqa: PLC0415 - Kafka's Uuid.randomUuid
    from ..kraft.records import new_record  # noqa: PLC0415 - metadata records only on a change

    requester = ctx.principal
    version = header.api_version
    owner_name = getattr(request, "owner_principal_name", None)
    owner = requester if not owner_name else f"{request.owner_principal_type}:{owner_name}"
    if not allow_token_requests(ctx):
        return _create_error(version, owner, requester, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    if owner != requester and not permits(ctx)(OP_CREATE_TOKENS, RT_USER, owner):
        return _create_error(version, owner, requester, ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
    if any(r.principal_type != "User" for r in request.renewers):
        return _create_error(version, owner, requester, ErrorCode.INVALID_PRINCIPAL_TYPE)
    manager = token_manager(ctx.broker)
    if not manager.enabled:
        # the controller's answer: its timestamps are left at 0
        return _create_error(version, owner, requester, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, 0)
    manager.maybe_sweep()
    now = manager.now_ms()
    max_life = manager.max_lifetime_ms
    if request.max_lifetime_ms > 0:
        max_life = min(max_life, request.max_lifetime_ms)
    max_ts = _sum(now, max_life)
    expiry_ts = min(max_ts, _sum(now, manager.renew_lifetime_ms))
    token_id = random_uuid().to_base64()
    renewers = [f"{r.principal_type}:{r.principal_name}" for r in request.renewers]
    record = new_record("DelegationTokenRecord", owner=owner, requester=requester, renewers=renewers,
                        issue_timestamp=now, max_timestamp=max_ts, expiration_timestamp=expiry_ts,
                        token_id=token_id)
    if not _persist(ctx, [("DelegationTokenRecord", record)]):
        return _create_error(version, owner, requester, ErrorCode.UNKNOWN_SERVER_ERROR, 0)
    log.info("%s created delegation token %s for %s (renewers %s)", requester, token_id, owner, renewers)
    owner_type, owner_short = split_principal(owner)
    return CreateResponse(error_code=0, principal_type=owner_type, principal_name=owner_short,
                          **_requester(version, requester, "token_requester_principal"),
                          issue_timestamp_ms=now, expiry_timestamp_ms=expiry_ts, max_timestamp_ms=max_ts,
                          token_id=token_id, hmac=manager.hmac(token_id), throttle_time_ms=0)


# ------------------------------------------------------------------------------------------------
# Renew and expire
# ------------------------------------------------------------------------------------------------

def _token_record(info: TokenInfo, expiry_ts: int) -> tuple[str, Any]:
    from ..kraft.records import new_record  # noqa: PLC0415

    return ("DelegationTokenRecord", new_record(
        "DelegationTokenRecord", owner=info.owner, requester=info.requester, renewers=list(info.renewers),
        issue_timestamp=info.issue_timestamp, max_timestamp=info.max_timestamp,
        expiration_timestamp=expiry_ts, token_id=info.token_id))


@handles(RENEW_DELEGATION_TOKEN_KEY, 1, 2)
async def handle_renew_delegation_token(ctx: RequestContext, header, request) -> object:
    if not allow_token_requests(ctx):
        return RenewResponse(error_code=int(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),
                             expiry_timestamp_ms=ERROR_TIMESTAMP, throttle_time_ms=0)
    manager = token_manager(ctx.broker)

    def answer(code: ErrorCode, expiry: int = 0) -> Any:
        return RenewResponse(error_code=int(code), expiry_timestamp_ms=expiry, throttle_time_ms=0)

    if not manager.enabled:
        return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    manager.maybe_sweep()
    info = manager.token_for_hmac(bytes(request.hmac))
    if info is None:
        return answer(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
    now = manager.now_ms()
    if info.expired(now):
        return answer(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    if not info.allowed_to_renew(ctx.principal):
        return answer(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    renew_life = manager.renew_lifetime_ms
    if request.renew_period_ms > 0:
        renew_life = min(renew_life, request.renew_period_ms)
    expiry_ts = min(info.max_timestamp, now + renew_life)
    if not _persist(ctx, [_token_record(info, expiry_ts)]):
        return answer(ErrorCode.UNKNOWN_SERVER_ERROR)
    return answer(ErrorCode.NONE, expiry_ts)


@handles(EXPIRE_DELEGATION_TOKEN_KEY, 1, 2)
async def handle_expire_delegation_token(ctx: RequestContext, header, request) -> object:
    from ..kraft.records import new_record  # noqa: PLC0415

    if not allow_token_requests(ctx):
        return ExpireResponse(error_code=int(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),
                              expiry_timestamp_ms=ERROR_TIMESTAMP, throttle_time_ms=0)
    manager = token_manager(ctx.broker)

    def answer(code: ErrorCode, expiry: int = 0) -> Any:
        return ExpireResponse(error_code=int(code), expiry_timestamp_ms=expiry, throttle_time_ms=0)

    if not manager.enabled:
        return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    manager.maybe_sweep()
    info = manager.token_for_hmac(bytes(request.hmac))
    if info is None:
        return answer(ErrorCode.DELEGATION_TOKEN_NOT_FOUND)
    if not info.allowed_to_renew(ctx.principal):
        return answer(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    now = manager.now_ms()
    if request.expiry_time_period_ms < 0:  # expire at once: the token is removed
        record = ("RemoveDelegationTokenRecord", new_record("RemoveDelegationTokenRecord", token_id=info.token_id))
        expiry_ts = now
    elif info.expired(now):
        return answer(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    else:
        expiry_ts = min(info.max_timestamp, _sum(now, request.expiry_time_period_ms))
        record = _token_record(info, expiry_ts)
    if not _persist(ctx, [record]):
        return answer(ErrorCode.UNKNOWN_SERVER_ERROR)
    log.info("%s expired delegation token %s (expiry %d)", ctx.principal, info.token_id, expiry_ts)
    return answer(ErrorCode.NONE, expiry_ts)


# ------------------------------------------------------------------------------------------------
# Describe
# ------------------------------------------------------------------------------------------------

def eligible(requester: str, owners: list[str] | None, token: TokenInfo, allowed) -> bool:
    """Kafka's DelegationTokenManager.filterToken: the tokens a requester may see."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(requester):
        return True
    return allowed(OP_DESCRIBE, RT_DELEGATION_TOKEN, token.token_id) or \
        allowed(OP_DESCRIBE_TOKENS, RT_USER, token.owner)


def _described(manager: Any, token: TokenInfo, version: int) -> Any:
    owner_type, owner_name = split_principal(token.owner)
    return DescribeResponse.DescribedDelegationToken(
        principal_type=owner_type, principal_name=owner_name,
        **_requester(version, token.requester, "token_requester_principal"), issue_timestamp=token.issue_timestamp,
        expiry_timestamp=token.expiry_timestamp, max_timestamp=token.max_timestamp, token_id=token.token_id,
        hmac=manager.hmac(token.token_id), renewers=[
            DescribeResponse.DescribedDelegationTokenRenewer(principal_type=t, principal_name=n)
            for t, n in (split_principal(r) for r in token.renewers)])


@handles(DESCRIBE_DELEGATION_TOKEN_KEY, 1, 3)
async def handle_describe_delegation_token(ctx: RequestContext, header, request) -> object:
    def answer(code: ErrorCode, tokens: list[Any]) -> Any:
        return DescribeResponse(error_code=int(code), tokens=tokens, throttle_time_ms=0)

    if not allow_token_requests(ctx):
        return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
    manager = token_manager(ctx.broker)
    if not manager.enabled:
        return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
    if request.owners is not None and not request.owners:
        return answer(ErrorCode.NONE, [])
    manager.maybe_sweep()
    owners = None if request.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
    allowed = permits(ctx)
    # the broker's token cache is a hash map keyed by token id: its iteration order
    tokens = {t.token_id: t for t in manager.tokens()}
    ordered = hashmap_order(list(tokens), string_hash)
    return answer(ErrorCode.NONE, [_described(manager, tokens[i], header.api_version) for i in ordered
                                   if eligible(ctx.principal, owners, tokens[i], allowed)])
