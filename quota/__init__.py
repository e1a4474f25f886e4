"""Client quotas as Kafka enforces them (Kafka's QuotaFactory.QuotaManagers, ConnectionQuotas' IP rates).

Quotas live in the KRaft metadata log as ClientQuotaRecords (AlterClientQuotas writes them,
``odradek.handlers.client_quotas``); the metadata image holds them (``MetadataImage.client_quotas``)
and :func:`quota_managers` gives the broker's managers, brought up to date with the image whenever a
quota changed. Nothing is recorded while no quota of a type is set, as in Kafka.

Where a throttle comes from (Kafka's KafkaApis / RequestHandlerHelper):

* Produce: the request's size against ``producer_byte_rate`` and, unless acks=0, its handling time
  against ``request_percentage``; the response carries the larger throttle time.
* Fetch (consumers): the response's size against ``consumer_byte_rate`` and the handling time
  against ``request_percentage``; a throttled fetch is answered empty (its bytes are taken back
  from the rate), and a fetch asks for no more than one quota span's worth of bytes.
* Every other request (but those between brokers and controllers): its handling time against
  ``request_percentage``.
* CreateTopics, CreatePartitions and DeleteTopics also take their partitions from the client's
  ``controller_mutation_rate`` (:mod:`.controller_mutation`): refused with THROTTLING_QUOTA_EXCEEDED
  or throttled, and the response carries the larger of the two throttle times.

A throttled response carries ``throttle_time_ms`` and the broker then reads nothing more from the
connection until the throttle time has passed (Kafka mutes the channel); clients of KIP-219 versions
also wait on their side. A new connection from an IP over its ``connection_creation_rate`` is held
open unserved for the throttle time and then closed (Kafka's acceptor does the same).
"""

from __future__ import annotations

import ipaddress
import time
from typing import Any

from .client_quota_manager import SECONDS_TO_PERCENTAGE, ClientQuotaManager
from .controller_mutation import ControllerMutationQuotaManager, MutationQuota
from .sampled_rate import SampledRate

__all__ = ["QuotaManagers", "quota_managers", "client_of", "connection_throttle_ms", "mutation_quota",
           "SECONDS_TO_PERCENTAGE"]

#: Kafka's defaults of quota.window.num and quota.window.size.seconds.
DEFAULT_WINDOW_NUM = 11
DEFAULT_WINDOW_SIZE_SECONDS = 1

#: APIs the request quota never throttles: requests between brokers and controllers (Kafka's
#: cluster actions and KRaft traffic) and the SASL exchange.
EXEMPT_APIS = frozenset({
    17, 36,              # SaslHandshake, SaslAuthenticate
    27,                  # WriteTxnMarkers
    52, 53, 54,          # Vote, BeginQuorumEpoch, EndQuorumEpoch
    56, 58, 59,          # AlterPartition, Envelope, FetchSnapshot
    62, 63, 67,          # BrokerRegistration, BrokerHeartbeat, AllocateProducerIds
    70, 73, 82,          # ControllerRegistration, AssignReplicasToDirs, UpdateRaftVoter
})


class ConnectionRateQuotas:
    """``connection_creation_rate`` of IPs (Kafka's ConnectionQuotas per-IP connection rate)."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.by_ip: dict[str, float] = {}
        self.default: float | None = None
        self.sensors: dict[str, SampledRate] = {}

    def update(self, quotas: dict) -> None:
        by_ip: dict[str, float] = {}
        default = None
        for entity, values in quotas.items():
            parts = dict(entity)
            value = values.get("connection_creation_rate")
            if "ip" not in parts or value is None:
                continue
            if parts["ip"] is None:
                default = float(value)
            else:
                by_ip[_normalized_ip(parts["ip"])] = float(value)
        self.by_ip, self.default = by_ip, default
        for ip, rate in list(self.sensors.items()):
            bound = self.limit(ip)
            if bound is None:
                del self.sensors[ip]
            else:
                rate.bound = bound

    def limit(self, ip: str) -> float | None:
        return self.by_ip.get(ip, self.default)

    def record_and_get_throttle_time_ms(self, ip: str, now_ms: int) -> int:
        """Count a new connection from `ip`; how long to hold it before closing it (0: serve it)."""
        bound = self.limit(ip)
        if bound is None:
            return 0
        rate = self.sensors.get(ip)
        if rate is None:
            rate = self.sensors[ip] = SampledRate(self.samples, self.window_ms, bound)
        violation = rate.record(1.0, now_ms)
        if violation is None:
            return 0
        # bounded to one window, as ConnectionQuotas bounds it
        return max(min(violation.throttle_time_ms(), self.window_ms), 0)


def _normalized_ip(name: str) -> str:
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


class QuotaManagers:
    """The broker's quota managers (Kafka's QuotaFactory.QuotaManagers), fed by the metadata image."""

    def __init__(self, samples: int = DEFAULT_WINDOW_NUM, window_s: int = DEFAULT_WINDOW_SIZE_SECONDS) -> None:
        window_ms = window_s * 1000
        self.produce = ClientQuotaManager("producer_byte_rate", samples, window_ms)
        self.fetch = ClientQuotaManager("consumer_byte_rate", samples, window_ms)
        self.request = ClientQuotaManager("request_percentage", samples, window_ms, max_throttle_ms=window_ms)
        self.connections = ConnectionRateQuotas(samples, window_ms)
        self.controller_mutation = ControllerMutationQuotaManager(samples, window_ms)
        self.version = -1
        #: odradek.quota.task_time.TaskTimes while request_percentage quotas are set
        self.task_times: Any = None

    def refresh(self, image: Any) -> None:
        """Take the image's client quotas if they changed since the last look."""
        version = getattr(image, "client_quotas_version", 0)
        if version == self.version:
            return
        self.version = version
        quotas = getattr(image, "client_quotas", {})
        for manager in (self.produce, self.fetch, self.request, self.connections, self.controller_mutation):
            manager.update(quotas)

    @property
    def enabled(self) -> bool:
        return self.produce.enabled or self.fetch.enabled or self.request.enabled

    def request_throttle_ms(self, user: str, client_id: str, seconds: float, now_ms: int) -> int:
        """Record a request's handling time; its request-quota throttle time."""
        return self.request.record_and_get_throttle_time_ms(user, client_id, seconds * SECONDS_TO_PERCENTAGE,
                                                            now_ms)


def now_ms() -> int:
    return int(time.time() * 1000)


def _image(broker: Any) -> Any:
    role = getattr(broker, "broker_role", None)
    if role is not None and getattr(role, "image", None) is not None:
        return role.image  # a broker of a KRaft cluster: the controllers' image it follows
    store = getattr(broker, "metadata_store", None)
    return getattr(store, "image", None)


def quota_managers(broker: Any) -> QuotaManagers | None:
    """The broker's quota managers, up to date with its metadata image; None while no client quota
    was ever set (then nothing needs recording)."""
    managers = getattr(broker, "quota_managers", None)
    image = _image(broker)
    if managers is None:
        if image is None or not getattr(image, "client_quotas", None):
            return None
        raw = getattr(getattr(broker, "config", None), "raw", {}) or {}
        managers = QuotaManagers(int(raw.get("quota.window.num", DEFAULT_WINDOW_NUM)),
                                 int(raw.get("quota.window.size.seconds", DEFAULT_WINDOW_SIZE_SECONDS)))
        try:
            broker.quota_managers = managers
        except AttributeError:
            return None
    if image is not None:
        managers.refresh(image)
    return managers


def connection_throttle_ms(broker: Any, ip: str) -> int:
    """Count a new connection from `ip` against its connection_creation_rate; how long to hold it
    unserved before closing it (0: serve it)."""
    managers = quota_managers(broker)
    if managers is None:
        return 0
    return managers.connections.record_and_get_throttle_time_ms(_normalized_ip(ip), now_ms())


def mutation_quota(ctx: Any, header: Any, strict_since: int) -> MutationQuota:
    """The controller mutation quota of a CreateTopics/CreatePartitions/DeleteTopics request: strict
    from `strict_since` on, permissive below (Kafka's ControllerMutationQuotaManager.newQuotaFor)."""
    managers = quota_managers(ctx.broker)
    bucket = None
    if managers is not None:
        bucket = managers.controller_mutation.bucket(*client_of(ctx, header.client_id))
    return MutationQuota(bucket, header.api_version >= strict_since, now_ms)


def client_of(ctx: Any, client_id: str | None) -> tuple[str, str]:
    """(user name, client id) of a request as quotas see them: the principal's name (ANONYMOUS
    without authentication) and the header's client id ("" when null)."""
    principal = ctx.principal
    return principal.partition(":")[2] or principal, client_id or ""
