"""Kafka's ClientQuotaManager: per-client rates, their bounds, and how long a client is throttled.

One manager per quota type (Kafka's QuotaType): Produce (``producer_byte_rate``, request bytes),
Fetch (``consumer_byte_rate``, response bytes) and Request (``request_percentage``, the time the
broker spent on the client's requests as a percentage of one thread). A client (principal's user
name and client id) is resolved to the quota entity Kafka would choose (DefaultQuotaCallback):

1. user + client-id, 2. user + default client-id, 3. user, 4. default user + client-id,
5. default user + default client-id, 6. default user, 7. client-id, 8. default client-id.

The rate is kept per *metric tags* (the user and client-id the resolved entity names, "" where it
names none), as Kafka keeps one sensor per tag pair: every client of a user quota shares one rate,
and under a default quota each user (or client id) has its own. A client with no quota is never
throttled. When a recorded value takes the rate over the bound, the throttle time is the time the
rate needs to fall back to it (:meth:`.sampled_rate.QuotaViolation.throttle_time_ms`).
"""

from __future__ import annotations

from collections.abc import Mapping

from .sampled_rate import QuotaViolation, SampledRate

#: An entity part that is not in the entity at all (None is the <default> of its type).
ABSENT = "\x00absent"

#: Quota types enabled (Kafka's ClientQuotaManager bits).
NO_QUOTAS = 0
CLIENT_ID_QUOTA_ENABLED = 1
USER_QUOTA_ENABLED = 2
USER_CLIENT_ID_QUOTA_ENABLED = 4

#: Sensors of clients idle this long are dropped (Kafka's InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000

#: Kafka's nanosToPercentage: 1 s of request time per second is 100 %.
SECONDS_TO_PERCENTAGE = 100.0

#: Entity as the metadata image keys it: sorted (entity type, name or None) pairs.
ImageEntity = tuple[tuple[str, str | None], ...]


class ClientQuotaManager:
    """The rates and bounds of one quota type (``quota_key``, e.g. ``producer_byte_rate``)."""

    def __init__(self, quota_key: str, samples: int, window_ms: int, max_throttle_ms: int | None = None) -> None:
        self.quota_key = quota_key
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        #: (user, client-id) -> bound; each part is a name, None (default) or ABSENT
        self.overrides: dict[tuple[str | None, str | None], float] = {}
        self.quota_types = NO_QUOTAS
        #: (user tag, client-id tag) -> the rate of that sensor
        self.sensors: dict[tuple[str, str], SampledRate] = {}
        #: (user, client id) -> their metric tags, while the quotas do not change
        self._tags: dict[tuple[str, str], tuple[str, str]] = {}
        self._records = 0

    # ------------------------------------------------------------------ configuration

    def update(self, quotas: Mapping[ImageEntity, Mapping[str, float]]) -> None:
        """Take the user/client-id quotas of this type from the metadata image's client quotas."""
        overrides: dict[tuple[str | None, str | None], float] = {}
        types = NO_QUOTAS
        for entity, values in quotas.items():
            value = values.get(self.quota_key)
            if value is None:
                continue
            parts = dict(entity)
            if "ip" in parts:
                continue
            user = parts.get("user", ABSENT)
            client = parts.get("client-id", ABSENT)
            overrides[(user, client)] = float(value)
            if user is not ABSENT and client is not ABSENT:
                types |= USER_CLIENT_ID_QUOTA_ENABLED
            elif user is not ABSENT:
                types |= USER_QUOTA_ENABLED
            else:
                types |= CLIENT_ID_QUOTA_ENABLED
        self.overrides = overrides
        self.quota_types = types
        self._tags.clear()
        # the sensors keep their samples; their bounds follow the new quotas (updateQuotaMetricConfigs)
        for tags, rate in self.sensors.items():
            rate.bound = self.quota_limit(tags)

    @property
    def enabled(self) -> bool:
        """Whether any quota of this type is set (Kafka records nothing otherwise)."""
        return self.quota_types != NO_QUOTAS

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """The (user, client-id) tags of the sensor a client's usage is recorded in."""
        key = (user, client_id)
        tags = self._tags.get(key)
        if tags is None:
            tags = self._tags[key] = self._metric_tags(user, client_id)
        return tags

    def _metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        types = self.quota_types
        if types in (NO_QUOTAS, CLIENT_ID_QUOTA_ENABLED):
            return "", client_id
        if types == USER_QUOTA_ENABLED:
            return user, ""
        if types == USER_CLIENT_ID_QUOTA_ENABLED:
            return user, client_id
        o = self.overrides
        if (user, client_id) in o or (user, None) in o:
            return user, client_id
        if (user, ABSENT) in o:
            return user, ""
        if (None, client_id) in o or (None, None) in o:
            return user, client_id
        if (None, ABSENT) in o:
            return user, ""
        return "", client_id

    def quota_limit(self, tags: tuple[str, str]) -> float | None:
        """The bound of a sensor (DefaultQuotaCallback.quotaLimit), None when the client has none."""
        user, client_id = tags
        o = self.overrides
        candidates: tuple[tuple[str | None, str | None], ...]
        if user and client_id:
            candidates = ((user, client_id), (user, None), (None, client_id), (None, None))
        elif user:
            candidates = ((user, ABSENT), (None, ABSENT))
        elif client_id:
            candidates = ((ABSENT, client_id), (ABSENT, None))
        else:
            return None
        for candidate in candidates:
            bound = o.get(candidate)
            if bound is not None:
                return bound
        return None

    # ------------------------------------------------------------------ recording

    def _sensor(self, user: str, client_id: str, now_ms: int) -> SampledRate:
        tags = self.metric_tags(user, client_id)
        rate = self.sensors.get(tags)
        if rate is None:
            rate = self.sensors[tags] = SampledRate(self.samples, self.window_ms, self.quota_limit(tags))
            self._records += 1
            if self._records % 1000 == 0:
                self._expire(now_ms)
        return rate

    def _expire(self, now_ms: int) -> None:
        idle = [tags for tags, rate in self.sensors.items()
                if now_ms - rate.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS]
        for tags in idle:
            del self.sensors[tags]

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` for the client; the time it must be throttled for (0 within its quota)."""
        if not self.enabled:
            return 0
        violation = self._sensor(user, client_id, now_ms).record(value, now_ms)
        if violation is None:
            return 0
        return self.throttle_time_ms(violation)

    def throttle_time_ms(self, violation: QuotaViolation) -> int:
        throttle = violation.throttle_time_ms()
        if self.max_throttle_ms is not None:
            # the request quota bounds it to one window (ClientRequestQuotaManager.throttleTime)
            throttle = min(throttle, self.max_throttle_ms)
        return max(int(throttle), 0)

    def record_no_throttle(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        if self.enabled:
            self._sensor(user, client_id, now_ms).record(value, now_ms, check=False)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch answers without its records)."""
        if self.enabled:
            self._sensor(user, client_id, now_ms).record(-value, now_ms, check=False)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most a client may use in one quota span without being throttled (a consumer's fetch
        is capped to it so that one response cannot guarantee throttling)."""
        if not self.enabled:
            return float("inf")
        bound = self.quota_limit(self.metric_tags(user, client_id))
        if bound is None:
            return float("inf")
        return bound * (self.samples - 1) * self.window_ms / 1000.0
