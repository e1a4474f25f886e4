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
