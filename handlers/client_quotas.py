"""DescribeClientQuotas (API 48): Odradek enforces no client quotas, so every filter matches nothing.

Serving it lets Kafka's own tools work against Odradek: kafka-configs.sh describes a user's client
quotas before its SCRAM credentials. A filter is checked as Kafka's ClientQuotaMetadataManager
checks it (INVALID_REQUEST with Kafka's message); a valid one is answered with no entries. The ACL
check (DESCRIBE_CONFIGS on the cluster) is in :func:`odradek.security.acl.enforce`.
"""

from __future__ import annotations

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .registry import RequestContext, handles

DESCRIBE_CLIENT_QUOTAS_KEY = 48
DescribeClientQuotasResponse = response_class(DESCRIBE_CLIENT_QUOTAS_KEY)

ENTITY_TYPES = ("user", "client-id", "ip")


def filter_error(entity_types: list[str]) -> str | None:
    """Kafka's complaint about a DescribeClientQuotas filter, None when it is valid."""
    seen: set[str] = set()
    for entity_type in entity_types:
        if entity_type in seen:
            return f"Duplicate {entity_type} filter component entity type"
        if not entity_type:
            return "Unexpected empty filter component entity type"
        if entity_type not in ENTITY_TYPES:
            return f"Custom entity type {entity_type} not supported"
        seen.add(entity_type)
    if "ip" in seen and len(seen) > 1:
        return ("Invalid entity filter component combination, IP filter component should not be used with "
                "user or clientId filter component.")
    return None


@handles(DESCRIBE_CLIENT_QUOTAS_KEY, 0, supported_versions(DESCRIBE_CLIENT_QUOTAS_KEY)[1])
async def handle_describe_client_quotas(ctx: RequestContext, header, request) -> object:
    problem = filter_error([c.entity_type for c in request.components or []])
    if problem is not None:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST),
                                            error_message=problem, entries=None)
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=0, error_message=None, entries=[])
