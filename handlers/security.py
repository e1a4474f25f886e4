"""Security APIs: SaslHandshake, SaslAuthenticate (and the ACL APIs, registered by odradek.security.acl).

The SASL exchange itself is :class:`odradek.security.sasl.SaslServerAuthenticator`; these handlers
only move its tokens in and out of Kafka's messages. On a listener without SASL (or after the
connection authenticated), Kafka answers both with ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class
from .registry import RequestContext, handles

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
SaslHandshakeResponse = response_class(SASL_HANDSHAKE_KEY)
SaslAuthenticateResponse = response_class(SASL_AUTHENTICATE_KEY)


def _authenticator(ctx: RequestContext):
    session = ctx.session
    return getattr(session, "authenticator", None) if session is not None else None


@handles(SASL_HANDSHAKE_KEY, 0, 1)
async def handle_sasl_handshake(ctx: RequestContext, header, request) -> object:
    auth = _authenticator(ctx)
    if auth is None:
        return SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=[])
    code = auth.handshake(request.mechanism, header.api_version)
    if code is not ErrorCode.NONE:
        # Kafka closes the connection after refusing a mechanism (or a second handshake)
        ctx.session.close_after_response = True
    return SaslHandshakeResponse(error_code=int(code), mechanisms=list(auth.enabled))


@handles(SASL_AUTHENTICATE_KEY, 0, 2)
async def handle_sasl_authenticate(ctx: RequestContext, header, request) -> object:
    auth = _authenticator(ctx)
    if auth is None:
        return SaslAuthenticateResponse(
            error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
            error_message="SaslAuthenticate request received after successful authentication"
            if ctx.session is not None and ctx.session.security_protocol.startswith("SASL")
            else "Unexpected SaslAuthenticate request on a listener without SASL",
            auth_bytes=b"",
        )
    code, message, reply = auth.authenticate(bytes(request.auth_bytes or b""))
    if code is not ErrorCode.NONE:
        ctx.session.close_after_response = True
    return SaslAuthenticateResponse(error_code=int(code), error_message=message, auth_bytes=reply,
                                    session_lifetime_ms=0)


# ------------------------------------------------------------------------------------------------
# ACLs (authorizer.class.name; the permission checks themselves are in odradek.security.acl.enforce)
# ------------------------------------------------------------------------------------------------

DescribeAclsResponse = response_class(29)
CreateAclsResponse = response_class(30)
DeleteAclsResponse = response_class(31)
_NO_AUTHORIZER = "No Authorizer is configured."


def _filter(f) -> object:
    from ..security.acl import AclFilter  # noqa: PLC0415

    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


@handles(29, 0, 3)
async def handle_describe_acls(ctx: RequestContext, header, request) -> object:
    from ..security.acl import authorizer_for  # noqa: PLC0415

    auth = authorizer_for(ctx.broker)
    if auth is None:
        return DescribeAclsResponse(error_code=int(ErrorCode.SECURITY_DISABLED), error_message=_NO_AUTHORIZER)
    grouped: dict[tuple[int, str, int], list] = {}
    for b in auth.describe(_filter(request)):
        grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            DescribeAclsResponse.AclDescription(principal=b.principal, host=b.host, operation=b.operation,
                                                permission_type=b.permission_type))
    return DescribeAclsResponse(error_code=0, resources=[
        DescribeAclsResponse.DescribeAclsResource(resource_type=rt, resource_name=name, pattern_type=pt, acls=acls)
        for (rt, name, pt), acls in grouped.items()])


@handles(30, 0, 3)
async def handle_create_acls(ctx: RequestContext, header, request) -> object:
    from ..security.acl import AclBinding, authorizer_for, validate_binding  # noqa: PLC0415

    auth = authorizer_for(ctx.broker)
    results = []
    valid = []
    for c in request.creations:
        if auth is None:
            results.append(CreateAclsResponse.AclCreationResult(error_code=int(ErrorCode.SECURITY_DISABLED),
                                                                error_message=_NO_AUTHORIZER))
            continue
        binding = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                             c.operation, c.permission_type)
        problem = validate_binding(binding)
        if problem is not None:
            results.append(CreateAclsResponse.AclCreationResult(error_code=int(ErrorCode.INVALID_REQUEST),
                                                                error_message=problem))
            continue
        valid.append(binding)
        results.append(CreateAclsResponse.AclCreationResult(error_code=0))
    if valid:
        auth.create(valid)
    return CreateAclsResponse(results=results)


@handles(31, 0, 3)
async def handle_delete_acls(ctx: RequestContext, header, request) -> object:
    from ..security.acl import authorizer_for  # noqa: PLC0415

    auth = authorizer_for(ctx.broker)
    out = []
    for f in request.filters:
        if auth is None:
            out.append(DeleteAclsResponse.DeleteAclsFilterResult(error_code=int(ErrorCode.SECURITY_DISABLED),
                                                                 error_message=_NO_AUTHORIZER))
            continue
        gone = auth.delete(_filter(f))
        out.append(DeleteAclsResponse.DeleteAclsFilterResult(error_code=0, matching_acls=[
            DeleteAclsResponse.DeleteAclsMatchingAcl(
                error_code=0, resource_type=b.resource_type, resource_name=b.resource_name,
                pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
                permission_type=b.permission_type) for b in gone]))
    return DeleteAclsResponse(filter_results=out)
