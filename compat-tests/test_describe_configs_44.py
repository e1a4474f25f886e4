"""Oracle (issue #23): DescribeConfigs v4 answered as Kafka 4.4.0 answers it.

The same raw DescribeConfigs (include_synonyms, include_documentation) goes to a live Kafka 4.4.0
and to Odradek, both freshly started with default settings:

* a topic with one override: the same config names, and for each the same ConfigDef type, value,
  source, read-only and sensitive flags and synonyms; both carry documentation (its text is each
  broker's own);
* the broker: every config both brokers describe has the same type (INT, SHORT, DOUBLE, PASSWORD
  and not just STRING/LONG) and sensitivity, a PASSWORD config is described without its value.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_oracle import KAFKA_4_4, BrokerProcess, require_tool

from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

DESCRIBE_CONFIGS = 32
TOPIC, BROKER = 2, 4
TYPES = {0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG", 6: "DOUBLE", 7: "LIST",
         8: "CLASS", 9: "PASSWORD"}


@pytest.fixture(scope="module")
def brokers(_module_factory) -> dict[str, BrokerProcess]:
    require_tool(f"kafka-{KAFKA_4_4}")
    found = {"kafka": _module_factory("kafka", version=KAFKA_4_4), "odradek": _module_factory("odradek")}
    for broker in found.values():
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("described", 2, 1, config={"retention.ms": "3600000"})]).values():
            future.result(30)
    return found


def _describe(broker: BrokerProcess, resource_type: int, name: str) -> dict[str, tuple]:
    R = request_class(DESCRIBE_CONFIGS)
    host, port = broker.bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    try:
        deadline = time.monotonic() + 15
        while True:
            response = conn.send(DESCRIBE_CONFIGS, R(
                resources=[R.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                                     configuration_keys=None)],
                include_synonyms=True, include_documentation=True), 4)
            (result,) = response.results
            # Kafka's broker may not have the topic in its image the moment CreateTopics returned
            if result.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        conn.close()
    assert result.error_code == 0, (broker, result.error_message)
    return {c.name: (TYPES[c.config_type], c.value, c.config_source, c.read_only, c.is_sensitive,
                     [(s.name, s.value, s.source) for s in c.synonyms], bool(c.documentation))
            for c in result.configs}


def test_topic_configs_are_described_as_kafka_describes_them(brokers) -> None:
    kafka, odradek = (_describe(brokers[k], TOPIC, "described") for k in ("kafka", "odradek"))
    assert sorted(odradek) == sorted(kafka)
    different = {name: (kafka[name], odradek[name]) for name in kafka if kafka[name] != odradek[name]}
    assert different == {}
    assert kafka["retention.ms"][1] == "3600000" and all(entry[-1] for entry in kafka.values())


def test_broker_config_types_and_secrets_as_kafkas(brokers) -> None:
    kafka = _describe(brokers["kafka"], BROKER, "1")
    odradek = _describe(brokers["odradek"], BROKER, "1")
    common = sorted(set(kafka) & set(odradek))
    # Odradek describes the configs it understands: most of its own, all of them Kafka's too
    assert len(common) > 100
    types = {name: (kafka[name][0], odradek[name][0]) for name in common if kafka[name][0] != odradek[name][0]}
    assert types == {}
    sensitive = {name: (kafka[name][4], odradek[name][4]) for name in common if kafka[name][4] != odradek[name][4]}
    assert sensitive == {}
    for described in (kafka, odradek):
        assert {t for t, *_ in described.values()} >= {"INT", "LONG", "BOOLEAN", "STRING", "LIST", "DOUBLE",
                                                        "PASSWORD"}
        assert all(entry[1] is None for entry in described.values() if entry[0] == "PASSWORD")
        assert all(entry[-1] for entry in described.values())
