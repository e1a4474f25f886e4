"""DescribeUserScramCredentials (API 50) and AlterUserScramCredentials (API 51), as a KRaft Kafka serves them.

Describe answers from the broker's credentials (:class:`odradek.security.sasl.CredentialStore`:
the metadata log's UserScramCredentialRecords, then ``odradek.sasl.scram.credentials``). Alter
validates each user as Kafka's controller does (ScramControlManager), then writes one batch of
RemoveUserScramCredentialRecord / UserScramCredentialRecord to the KRaft metadata log before it
answers; new SASL/SCRAM authentications see the change at once, and it survives a restart.

Per-user errors (Kafka's codes and messages):

* Describe: RESOURCE_NOT_FOUND for a user without credentials, DUPLICATE_RESOURCE for a user named
  twice; no users (null or empty list) describes every user.
* Alter: UNACCEPTABLE_CREDENTIAL (empty user name, iterations outside 4096..16384),
  UNSUPPORTED_SASL_MECHANISM (mechanism type other than 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512),
  DUPLICATE_RESOURCE (a user altered twice in one request: every alteration of that user is
  refused), RESOURCE_NOT_FOUND (deleting a credential the metadata log does not hold).

Results come in the order of Kafka's hash maps (deletions, then upsertions, then errors). The ACL
checks (DESCRIBE / ALTER on the cluster) are in :func:`odradek.security.acl.enforce`.
"""

from __future__ import annotations

import logging
from typing import Any

from ..logstore.java_hash import hashmap_order, string_hash
from ..security.sasl import credential_store
from ..security.scram import MAX_ITERATIONS, MECHANISM_NAMES, MIN_ITERATIONS, credential_from_salted
from ..wire.errors import ErrorCode
from ..wire.protocol import response_class
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

DESCRIBE_USER_SCRAM_CREDENTIALS_KEY = 50
ALTER_USER_SCRAM_CREDENTIALS_KEY = 51
DescribeResponse = response_class(DESCRIBE_USER_SCRAM_CREDENTIALS_KEY)
AlterResponse = response_class(ALTER_USER_SCRAM_CREDENTIALS_KEY)

_DUPLICATE_ALTER = "A user credential cannot be altered twice in the same request"
_DUPLICATE_DESCRIBE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
_MISSING_DESCRIBE = "Attempt to describe a user credential that does not exist: "
_MISSING_DELETE = "Attempt to delete a user credential that does not exist"

Error = tuple[ErrorCode, str | None]


def _java_order(names: list[str], max_size_ever: int | None = None) -> list[str]:
    return hashmap_order(names, string_hash, max_size_ever=max_size_ever)


# ------------------------------------------------------------------------------------------------
# Describe
# ------------------------------------------------------------------------------------------------

def describe(broker: Any, users: list[str] | None) -> Any:
    """The DescribeUserScramCredentials response body for `users` (None or [] = every user)."""
    known = credential_store(broker).iterations_by_user()
    duplicated: dict[str, bool] = {}
    if not users:
        for name in known:
            duplicated[name] = False
    else:
        for name in users:
            duplicated[name] = name in duplicated
    results = []
    for name in _java_order(list(duplicated)):
        if duplicated[name]:
            results.append(DescribeResponse.DescribeUserScramCredentialsResult(
                user=name, error_code=int(ErrorCode.DUPLICATE_RESOURCE), error_message=_DUPLICATE_DESCRIBE + name))
        elif name in known:
            # Kafka leaves the message at its default, "" (not null), when there is no error
            results.append(DescribeResponse.DescribeUserScramCredentialsResult(
                user=name, error_code=0, error_message="", credential_infos=[
                    DescribeResponse.CredentialInfo(mechanism=mechanism, iterations=iterations)
                    for mechanism, iterations in sorted(known[name].items())]))
        else:
            results.append(DescribeResponse.DescribeUserScramCredentialsResult(
                user=name, error_code=int(ErrorCode.RESOURCE_NOT_FOUND), error_message=_MISSING_DESCRIBE + name))
    return DescribeResponse(throttle_time_ms=0, error_code=0, error_message="", results=results)


@handles(DESCRIBE_USER_SCRAM_CREDENTIALS_KEY, 0, 0)
async def handle_describe_user_scram_credentials(ctx: RequestContext, header, request) -> object:
    users = None if request.users is None else [u.name for u in request.users]
    return describe(ctx.broker, users)


# ------------------------------------------------------------------------------------------------
# Alter
# ------------------------------------------------------------------------------------------------

def _check_name_and_mechanism(name: str, mechanism: int) -> Error | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _check_deletion(broker: Any, deletion: Any) -> Error | None:
    problem = _check_name_and_mechanism(deletion.name, deletion.mechanism)
    if problem is not None:
        return problem
    store = credential_store(broker)
    if (deletion.mechanism, deletion.name) not in store.metadata_credentials():
        if (MECHANISM_NAMES[deletion.mechanism], deletion.name) in store.credentials:
            return (ErrorCode.RESOURCE_NOT_FOUND, _MISSING_DELETE + " in the metadata log (it comes from "
                    "odradek.sasl.scram.credentials; remove it from the broker config)")
        return ErrorCode.RESOURCE_NOT_FOUND, _MISSING_DELETE
    return None


def _check_upsertion(upsertion: Any) -> Error | None:
    problem = _check_name_and_mechanism(upsertion.name, upsertion.mechanism)
    if problem is not None:
        return problem
    if upsertion.iterations < MIN_ITERATIONS[MECHANISM_NAMES[upsertion.mechanism]]:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def alter_records(broker: Any, request: Any) -> tuple[list[Any], list[tuple[str, Any]]]:
    """Validate an AlterUserScramCredentials request: (results, metadata records to write)."""
    from ..kraft.records import new_record  # noqa: PLC0415 - metadata records only when credentials change

    deletions: dict[str, Any] = {}
    upsertions: dict[str, Any] = {}
    errors: dict[str, Error] = {}
    puts = {"deletions": 0, "upsertions": 0}
    for d in request.deletions:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = (ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE_ALTER)
            continue
        problem = _check_deletion(broker, d)
        if problem is not None:
            errors[d.name] = problem
        else:
            deletions[d.name] = d
            puts["deletions"] += 1
    for u in request.upsertions:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upsertions.pop(u.name, None) is not None:
            errors[u.name] = (ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE_ALTER)
            continue
        problem = _check_upsertion(u)
        if problem is not None:
            errors[u.name] = problem
        else:
            upsertions[u.name] = u
            puts["upsertions"] += 1

    results = []
    records: list[tuple[str, Any]] = []
    for name in _java_order(list(deletions), puts["deletions"]):
        d = deletions[name]
        results.append(AlterResponse.AlterUserScramCredentialsResult(user=name, error_code=0, error_message=None))
        records.append(("RemoveUserScramCredentialRecord", new_record(
            "RemoveUserScramCredentialRecord", name=name, mechanism=d.mechanism)))
    for name in _java_order(list(upsertions), puts["upsertions"]):
        u = upsertions[name]
        # the controller keeps StoredKey and ServerKey, never the salted password
        cred = credential_from_salted(MECHANISM_NAMES[u.mechanism], bytes(u.salted_password), bytes(u.salt),
                                      u.iterations)
        results.append(AlterResponse.AlterUserScramCredentialsResult(user=name, error_code=0, error_message=None))
        records.append(("UserScramCredentialRecord", new_record(
            "UserScramCredentialRecord", name=name, mechanism=u.mechanism, salt=cred.salt,
            stored_key=cred.stored_key, server_key=cred.server_key, iterations=cred.iterations)))
    for name in _java_order(list(errors)):
        code, message = errors[name]
        results.append(AlterResponse.AlterUserScramCredentialsResult(user=name, error_code=int(code),
                                                                     error_message=message))
    return results, records


@handles(ALTER_USER_SCRAM_CREDENTIALS_KEY, 0, 0)
async def handle_alter_user_scram_credentials(ctx: RequestContext, header, request) -> object:
    results, records = alter_records(ctx.broker, request)
    if records:
        store = getattr(ctx.broker, "metadata_store", None)
        if store is None or getattr(store, "log", None) is None:
            # nowhere to persist the change: refuse it all rather than pretend
            code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
            for r in results:
                if r.error_code == 0:
                    r.error_code, r.error_message = code, None
            return AlterResponse(throttle_time_ms=0, results=results)
        # persisted (one batch, fsynced) before the answer, as Kafka's controller commits first
        store.append_records(records)
        config_users = credential_store(ctx.broker).credentials
        for name, rec in records:
            if name == "RemoveUserScramCredentialRecord" and (MECHANISM_NAMES[rec.mechanism], rec.name) in config_users:
                log.warning("SCRAM credential of %s (%s) removed from the metadata log; the one in "
                            "odradek.sasl.scram.credentials applies again", rec.name, MECHANISM_NAMES[rec.mechanism])
        log.info("%s altered SCRAM credentials: %s", ctx.principal,
                 ", ".join(f"{'removed' if n.startswith('Remove') else 'set'} {r.name} "
                           f"{MECHANISM_NAMES[r.mechanism]}" for n, r in records))
    return AlterResponse(throttle_time_ms=0, results=results)
