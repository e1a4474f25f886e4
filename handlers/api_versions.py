"""ApiVersions: advertise exactly the APIs and versions the registered handlers serve."""

from __future__ import annotations

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class
from .registry import API_VERSIONS_KEY, RequestContext, advertised_versions, handles

ApiVersionsResponse = response_class(API_VERSIONS_KEY)


def api_versions_body(version: int, error: ErrorCode = ErrorCode.NONE) -> object:
    """The ApiVersions answer; also used (as v0) for the UNSUPPORTED_VERSION reply."""
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
        for key, lo, hi in advertised_versions()
    ]
    return ApiVersionsResponse(error_code=int(error), api_keys=keys, throttle_time_ms=0)


@handles(API_VERSIONS_KEY, 0, 4)
async def handle_api_versions(ctx: RequestContext, header, request) -> object:
    return api_versions_body(header.api_version)
