"""Oracle (issue #23): client quotas against Kafka 4.4.0, three ways.

* Kafka 4.4.0's own kafka-configs.sh (``org.apache.kafka.tools.ConfigCommand`` from the official
  jars) adds, describes and deletes client quotas of users, clients, user+client pairs and ips,
  defaults included, and prints the same against Odradek as against a live Kafka 4.4.0; after an
  Odradek restart it still prints the same (the quotas are ClientQuotaRecords in the metadata log);
* the same raw AlterClientQuotas / DescribeClientQuotas requests, good and bad, get the same
  answers (error codes, messages, entries) from both;
* real clients (confluent-kafka's producer and consumer, librdkafka) under a producer_byte_rate or
  consumer_byte_rate quota are throttled by both: their throttle callbacks report throttle times > 0.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from kafka_oracle import BrokerProcess, require_tool, run_java_tool

from odradek.tools.client import BrokerConnection
from odradek.wire.protocol import request_class

KAFKA = "4.4.0"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka-configs.sh in Kafka 4.4
DESCRIBE, ALTER = 48, 49


@pytest.fixture(scope="module")
def brokers(_module_factory) -> dict[str, BrokerProcess]:
    require_tool(f"kafka-{KAFKA}")
    return {"kafka": _module_factory("kafka", version=KAFKA), "odradek": _module_factory("odradek")}


class connect:  # noqa: N801 - used as a context manager, like open()
    def __init__(self, broker: BrokerProcess, client_id: str = "odradek-tools") -> None:
        host, port = broker.bootstrap.rsplit(":", 1)
        self.conn = BrokerConnection(host, int(port), client_id=client_id)

    def __enter__(self) -> BrokerConnection:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def configs(broker: BrokerProcess, *args: str) -> tuple[int, str, str]:
    """kafka-configs.sh against `broker`: exit code, stdout, stderr without log4j's noise."""
    proc = run_java_tool(CONFIG_COMMAND, ["--bootstrap-server", broker.bootstrap, *args], version=KAFKA)
    err = "\n".join(line for line in proc.stderr.splitlines() if "log4j" not in line.lower() and "SLF4J" not in line)
    return proc.returncode, proc.stdout.replace(broker.bootstrap, "<bootstrap>"), err.replace(broker.bootstrap,
                                                                                               "<bootstrap>")


USERS, CLIENTS, IPS = ("--entity-type", "users"), ("--entity-type", "clients"), ("--entity-type", "ips")
ANONYMOUS = (*USERS, "--entity-name", "ANONYMOUS")  # the principal of a PLAINTEXT client

ALTERATIONS: list[tuple[str, ...]] = [
    ("--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048", *USERS, "--entity-name", "alice"),
    ("--alter", "--add-config", "producer_byte_rate=4096", *USERS, "--entity-default"),
    ("--alter", "--add-config", "request_percentage=50.5", *CLIENTS, "--entity-name", "c1"),
    ("--alter", "--add-config", "consumer_byte_rate=1000", *USERS, "--entity-name", "alice", *CLIENTS,
     "--entity-name", "c1"),
    ("--alter", "--add-config", "producer_byte_rate=3000", *USERS, "--entity-name", "bob", *CLIENTS,
     "--entity-default"),
    ("--alter", "--add-config", "producer_byte_rate=1000,controller_mutation_rate=10", *CLIENTS, "--entity-default"),
    ("--alter", "--add-config", "connection_creation_rate=10", *IPS, "--entity-name", "127.0.0.1"),
    ("--alter", "--add-config", "connection_creation_rate=20", *IPS, "--entity-default"),
    # refused by the broker: fractional long, a user key on an ip, 0
    ("--alter", "--add-config", "producer_byte_rate=1.5", *USERS, "--entity-name", "carol"),
    ("--alter", "--add-config", "producer_byte_rate=0", *CLIENTS, "--entity-name", "c2"),
]

DESCRIPTIONS: list[tuple[str, ...]] = [
    ("--describe", *USERS, "--entity-name", "alice"),
    ("--describe", *USERS, "--entity-default"),
    ("--describe", *USERS),
    ("--describe", *CLIENTS),
    ("--describe", *CLIENTS, "--entity-name", "c1"),
    ("--describe", *CLIENTS, "--entity-default"),
    ("--describe", *USERS, "--entity-name", "alice", *CLIENTS, "--entity-name", "c1"),
    ("--describe", *USERS, *CLIENTS),
    ("--describe", *USERS, "--entity-name", "bob", *CLIENTS, "--entity-default"),
    ("--describe", *IPS),
    ("--describe", *IPS, "--entity-name", "127.0.0.1"),
    ("--describe", *IPS, "--entity-default"),
    ("--describe", *USERS, "--entity-name", "nobody"),
]

DELETIONS: list[tuple[str, ...]] = [
    ("--alter", "--delete-config", "producer_byte_rate", *USERS, "--entity-name", "alice"),
    ("--alter", "--delete-config", "connection_creation_rate", *IPS, "--entity-default"),
    ("--alter", "--delete-config", "request_percentage", *CLIENTS, "--entity-name", "c1"),
]


def _runs(broker: BrokerProcess, commands: list[tuple[str, ...]]) -> list[tuple[tuple[str, ...], tuple[int, str, str]]]:
    return [(command, configs(broker, *command)) for command in commands]


def test_kafka_configs_client_quotas_print_the_same_and_survive_a_restart(brokers) -> None:
    seen: dict[str, list] = {}
    for kind, broker in brokers.items():
        seen[kind] = (_runs(broker, ALTERATIONS) + _runs(broker, DESCRIPTIONS) + _runs(broker, DELETIONS)
                      + _runs(broker, DESCRIPTIONS))
    for (command, odradek), (_, kafka) in zip(seen["odradek"], seen["kafka"], strict=True):
        assert odradek == kafka, command
    # the tool really did something: quotas were listed, and the refused ones were refused
    described = "\n".join(out for _, (_, out, _) in seen["kafka"])
    assert "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0" in described
    assert "Quota configs for ip '127.0.0.1' are connection_creation_rate=10.0" in described
    refusals = "\n".join(err for _, (_, _, err) in seen["kafka"])
    assert "producer_byte_rate cannot be a fractional value." in refusals

    odradek = brokers["odradek"]
    before = _runs(odradek, DESCRIPTIONS)
    odradek.restart()
    assert _runs(odradek, DESCRIPTIONS) == before


# ------------------------------------------------------------------ raw requests


def _alter_body(entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]]],
                validate_only: bool) -> object:
    A = request_class(ALTER)
    return A(validate_only=validate_only, entries=[
        A.EntryData(entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[A.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops])
        for entity, ops in entries])


RAW_ALTERS = [
    [([], [("producer_byte_rate", 1.0)])],
    [([("group", "g")], [("producer_byte_rate", 1.0)])],
    [([("user", "")], [("producer_byte_rate", 1.0)])],
    [([("ip", "1.2.3.4"), ("user", "u")], [("connection_creation_rate", 1.0)])],
    [([("ip", "no-such-host.invalid")], [("connection_creation_rate", 1.0)])],
    [([("user", "a")], [("connection_creation_rate", 1.0)])],
    [([("ip", "1.2.3.4")], [("producer_byte_rate", 1.0)])],
    [([("user", "b")], [("producer_byte_rate", -1.0)])],
    [([("user", "d")], [("producer_byte_rate", float("inf"))])],
    [([("ip", "1.2.3.5")], [("connection_creation_rate", 3e9)])],
    [([("user", "e")], [("request_percentage", 1.5), ("request_percentage", 2.0)])],
    [([("user", "f"), ("user", "g")], [("request_percentage", 1.5)])],
    # several entities in one request: the answer's order is Kafka's hash map's
    [([("user", "x")], [("producer_byte_rate", 100.0)]), ([("client-id", "y")], [("producer_byte_rate", 1.5)]),
     ([("user", None), ("client-id", None)], [("consumer_byte_rate", 10.0)]), ([("user", "x")], [("nope", 1.0)]),
     ([("ip", None)], [("connection_creation_rate", 5.0)]), ([("client-id", "z")], [("request_percentage", 0.5)])],
]

RAW_FILTERS = [
    ([], False), ([("user", 2, None)], True), ([("user", 1, None)], False), ([("user", 0, "x")], False),
    ([("ip", 2, None)], False), ([("client-id", 2, None), ("user", 2, None)], True),
    ([("", 2, None)], False), ([("user", 2, None), ("user", 2, None)], False), ([("group", 2, None)], False),
    ([("ip", 2, None), ("client-id", 2, None)], False), ([("user", 0, None)], False),
    ([("user", 1, "x")], False), ([("user", 2, "x")], False), ([("user", 7, None)], False),
]


def _alter_answer(response) -> list:
    return [([(e.entity_type, e.entity_name) for e in r.entity], r.error_code, r.error_message)
            for r in response.entries]


def _describe_answer(response) -> object:
    if response.entries is None:
        return response.error_code, response.error_message, None
    return response.error_code, response.error_message, sorted(
        (sorted((e.entity_type, e.entity_name or "") for e in entry.entity),
         sorted((v.key, v.value) for v in entry.values)) for entry in response.entries)


def test_raw_requests_get_the_same_answers(brokers) -> None:
    answers: dict[str, list] = {}
    D = request_class(DESCRIBE)
    for kind, broker in brokers.items():
        got: list = []
        with connect(broker) as conn:
            for entries in RAW_ALTERS:
                got.append(_alter_answer(conn.send(ALTER, _alter_body(entries, validate_only=True), 1)))
            # the last one for real, then the filters see what it wrote (and what the tool test left)
            got.append(_alter_answer(conn.send(ALTER, _alter_body(RAW_ALTERS[-1], validate_only=False), 0)))
            # Kafka answers once its controller committed the records; its broker's image takes them a
            # moment later
            time.sleep(1)
            for components, strict in RAW_FILTERS:
                body = D(components=[D.ComponentData(entity_type=t, match_type=m, match=s) for t, m, s in components],
                         strict=strict)
                got.append(_describe_answer(conn.send(DESCRIBE, body, 1)))
        answers[kind] = got
    for i, (odradek, kafka) in enumerate(zip(answers["odradek"], answers["kafka"], strict=True)):
        assert odradek == kafka, i


# ------------------------------------------------------------------ a real client is throttled


def _throttled_producer_run(broker: BrokerProcess, client_id: str) -> list[int]:
    """Produce ~400 kB as `client_id` (quota: 20 kB/s); the throttle times librdkafka reported."""
    # user ANONYMOUS + this client id: the most specific entity, whatever defaults the other tests set
    code, _, err = configs(broker, "--alter", "--add-config", "producer_byte_rate=20000", *ANONYMOUS, *CLIENTS,
                           "--entity-name", client_id)
    assert code == 0, err
    throttles: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5,
                         "batch.size": 20000, "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    # the quota applies from the broker's next look at it; the first send fetches metadata meanwhile
    time.sleep(0.5)
    deadline = time.monotonic() + 60
    for i in range(40):
        producer.produce("quota-throttle", value=b"x" * 10000, key=str(i).encode())
        producer.poll(0)
    while producer.flush(1) and time.monotonic() < deadline:
        pass
    assert len(producer) == 0, "messages left unsent"
    producer.poll(0.5)
    return throttles


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_a_producer_over_its_quota_is_throttled(brokers, kind: str) -> None:
    throttles = _throttled_producer_run(brokers[kind], f"throttled-{kind}")
    # librdkafka reports throttle_time (seconds as a float in confluent-kafka's ThrottleEvent)
    assert any(t > 0 for t in throttles), throttles



def _throttled_consumer_run(broker: BrokerProcess, client_id: str) -> tuple[int, list[float]]:
    """Write ~400 kB (no quota), then read it back as `client_id` (quota: 20 kB/s)."""
    # batches of at most 20 kB: a batch larger than the quota span's bytes is returned whole (the first
    # batch always is), so the consumer would be throttled for it again and again, on Kafka as here
    code, _, err = configs(broker, "--alter", "--add-config", "producer_byte_rate=1000000000", *ANONYMOUS, *CLIENTS,
                           "--entity-name", "unthrottled")
    assert code == 0, err
    time.sleep(0.5)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "unthrottled", "batch.size": 20000})
    for i in range(40):
        producer.produce("quota-consume", value=b"y" * 10000, key=str(i).encode())
    assert producer.flush(30) == 0
    code, _, err = configs(broker, "--alter", "--add-config", "consumer_byte_rate=20000", *ANONYMOUS, *CLIENTS,
                           "--entity-name", client_id)
    assert code == 0, err
    time.sleep(0.5)
    throttles: list[float] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "group.id": client_id,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    read = 0
    try:
        consumer.subscribe(["quota-consume"])
        deadline = time.monotonic() + 60
        while read < 40 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read += 1
    finally:
        consumer.close()
    return read, throttles


@pytest.mark.parametrize("kind", ["odradek", "kafka"])
def test_a_consumer_over_its_quota_is_throttled(brokers, kind: str) -> None:
    read, throttles = _throttled_consumer_run(brokers[kind], f"throttled-consumer-{kind}")
    assert read >= 40, read
    assert any(t > 0 for t in throttles), throttles


# ------------------------------------------------------------------ controller_mutation_rate

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


def _create_topics(names: list[tuple[str, int]], validate_only: bool = False) -> object:
    C = request_class(CREATE_TOPICS)
    return C(topics=[C.CreatableTopic(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
                     for n, p in names], timeout_ms=30000, validate_only=validate_only)


def _create_partitions(name: str, count: int) -> object:
    P = request_class(CREATE_PARTITIONS)
    return P(topics=[P.CreatePartitionsTopic(name=name, count=count, assignments=None)], timeout_ms=30000,
             validate_only=False)


def _delete_topics(name: str, version: int) -> object:
    D = request_class(DELETE_TOPICS)
    if version >= 6:
        return D(topics=[D.DeleteTopicState(name=name)], timeout_ms=30000)
    return D(topic_names=[name], timeout_ms=30000)


def _mutation_answer(response) -> tuple[list, int]:
    results = getattr(response, "topics", None) or getattr(response, "results", None) or response.responses
    return [(r.name, r.error_code, r.error_message) for r in results], response.throttle_time_ms


def test_controller_mutation_rate_refuses_and_throttles_as_kafka(brokers) -> None:
    """A client at 1 partition/s (burst 11): what is refused (strict versions) and what is only throttled
    (older versions) by CreateTopics, CreatePartitions and DeleteTopics, on Odradek as on Kafka 4.4."""
    steps = [
        (CREATE_TOPICS, 7, _create_topics([("mut-a", 10)])),  # 11 tokens -> 1
        (CREATE_TOPICS, 7, _create_topics([("mut-b", 20), ("mut-c", 1)])),  # b passes (-> -19), c refused
        (CREATE_PARTITIONS, 3, _create_partitions("mut-a", 12)),
        (DELETE_TOPICS, 6, _delete_topics("mut-a", 6)),
        (CREATE_TOPICS, 7, _create_topics([("mut-e", 1)], validate_only=True)),
        (CREATE_TOPICS, 5, _create_topics([("mut-d", 1)])),  # permissive: created, throttled
        (CREATE_PARTITIONS, 2, _create_partitions("mut-a", 11)),
        (DELETE_TOPICS, 4, _delete_topics("mut-d", 4)),
    ]
    answers: dict[str, list] = {}
    for kind, broker in brokers.items():
        client_id = f"mutator-{kind}"
        with connect(broker) as conn:
            altered = conn.send(ALTER, _alter_body([([("user", "ANONYMOUS"), ("client-id", client_id)],
                                                     [("controller_mutation_rate", 1.0)])], validate_only=False), 1)
            assert [e.error_code for e in altered.entries] == [0]
        time.sleep(1)  # Kafka's controller takes the quota from its metadata publisher a moment later
        got = []
        for api, version, body in steps:
            # a new connection each time: a throttled response mutes its connection for the throttle time
            with connect(broker, client_id) as conn:
                got.append(_mutation_answer(conn.send(api, body, version)))
        answers[kind] = got
    for kind, got in answers.items():
        # the refusals come with the time the bucket needs to climb back from about -19 (1 token a second)
        throttles = [throttle for _, throttle in got]
        assert throttles[0] == 0 and all(10_000 < t <= 30_000 for t in throttles[1:]), (kind, throttles)
    codes = {kind: [results for results, _ in got] for kind, got in answers.items()}
    assert codes["odradek"] == codes["kafka"]
    assert codes["kafka"][1][1][1] == 89  # THROTTLING_QUOTA_EXCEEDED
