"""ListConfigResources (v0 was ListClientMetricsResources): the resources that can hold configs.

As KafkaApis lists them: groups and client-metrics subscriptions that have configs, this node
as a broker and a broker logger, and every topic. v0 knows only client-metrics resources; an
unsupported type makes the whole answer UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from ..wire.errors import ErrorCode
from ..wire.protocol import response_class, supported_versions
from .registry import RequestContext, handles

LIST_CONFIG_RESOURCES_KEY = 74
ListConfigResourcesResponse = response_class(LIST_CONFIG_RESOURCES_KEY)

# Kafka's ConfigResource.Type ids
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


def _names_with_configs(ctx: RequestContext, resource_type: int) -> list[str]:
    store = getattr(ctx.broker, "metadata_store", None)
    configs = store.image.configs if store is not None else {}
    return sorted(name for rtype, name in configs if rtype == resource_type)


@handles(LIST_CONFIG_RESOURCES_KEY, 0, supported_versions(LIST_CONFIG_RESOURCES_KEY)[1])
async def handle_list_config_resources(ctx: RequestContext, header, request) -> object:
    R = ListConfigResourcesResponse
    supported = {CLIENT_METRICS} if header.api_version == 0 else {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}
    wanted = set(request.resource_types) if header.api_version >= 1 and request.resource_types else supported
    if not wanted <= supported:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.UNSUPPORTED_VERSION), config_resources=[])
    found: list[tuple[str, int]] = []
    if GROUP in wanted:
        found += [(name, GROUP) for name in _names_with_configs(ctx, GROUP)]
    if CLIENT_METRICS in wanted:
        from ..client_telemetry import list_client_metrics  # noqa: PLC0415 - in Kafka's (hash map) order

        found += [(name, CLIENT_METRICS) for name in list_client_metrics(ctx.broker)]
    node = str(ctx.broker.node_id)
    if BROKER_LOGGER in wanted:
        found.append((node, BROKER_LOGGER))
    if BROKER in wanted:
        found.append((node, BROKER))
    if TOPIC in wanted:
        found += [(name, TOPIC) for name in ctx.broker.metadata.topics]
    return R(throttle_time_ms=0, error_code=0, config_resources=[
        R.ConfigResource(resource_name=name, resource_type=rtype) for name, rtype in found])
