"""`odradek console` in a real headless Chromium, against Odradek and against Apache Kafka 4.4.0.

The console runs as its own process (``python -m odradek console``) on a free loopback port;
the browser is Debian's chromium driven through its chromedriver with selenium (nothing is
downloaded). Each scenario runs once per broker kind: the console speaks only the Kafka
protocol, so what it shows of Kafka 4.4 must be what it shows of Odradek.

With ``ODRADEK_CONSOLE_SCREENSHOTS=<dir>`` the Odradek run saves a PNG of each page there
(that is how docs/img/console/ is made).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kafka_oracle import KAFKA_4_4, BrokerProcess, free_port, in_ci

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 30.0
SCREENSHOTS = os.environ.get("ODRADEK_CONSOLE_SCREENSHOTS")


def _require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not (Path(p).exists() or shutil.which(Path(p).name))]
    if missing:
        msg = f"BROWSER MISSING: {', '.join(missing)}: `apt-get install chromium chromium-driver` (.ci/run does)"
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


@pytest.fixture(scope="module", params=["odradek", pytest.param("kafka", marks=pytest.mark.oracle)])
def broker(request: pytest.FixtureRequest, _module_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    if request.param == "kafka":
        return _module_factory("kafka", version=KAFKA_4_4)
    return _module_factory("odradek")


@contextmanager
def running_console(bootstrap: str, workdir: Path, *extra: str) -> Iterator[str]:
    """`python -m odradek console` for `bootstrap` as a subprocess; yields its base URL."""
    port = free_port()
    log_path = workdir / "console.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "console", "--bootstrap-server", bootstrap, "--port", str(port), *extra],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + WAIT_S
            while True:
                try:
                    with urllib.request.urlopen(url + "/api/connection", timeout=2) as r:
                        assert json.load(r)["bootstrap"] == bootstrap
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise AssertionError(f"the console did not start: {log_path.read_text()}") from None
                    time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def console(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_console(broker.bootstrap, tmp_path_factory.mktemp("console")) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="odradek-chromium-")
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={profile}", "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# ------------------------------------------------------------------------------------------ helpers

def wait_for(condition: Callable[[], object], what: str, timeout: float = WAIT_S) -> object:
    """Poll `condition` until it returns something truthy (selenium errors count as not yet)."""
    from selenium.common.exceptions import WebDriverException

    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
            last = value
        except WebDriverException as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def by_id(driver: object, element_id: str) -> object:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id)  # type: ignore[attr-defined]


def css(driver: object, selector: str) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)  # type: ignore[attr-defined]


def shot(driver: object, broker: BrokerProcess, name: str) -> None:
    if SCREENSHOTS and broker.name == "odradek":
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        time.sleep(0.3)  # let the page finish drawing
        driver.save_screenshot(str(Path(SCREENSHOTS) / f"{name}.png"))  # type: ignore[attr-defined]


def no_error(driver: object) -> bool:
    box = by_id(driver, "error")
    return box.get_attribute("hidden") is not None or not box.text


# ------------------------------------------------------------------------------------------ tests

def test_cluster_page_shows_brokers_controller_features_and_versions(console: str, browser: object,
                                                                     broker: BrokerProcess) -> None:
    browser.get(console + "/#/cluster")  # type: ignore[attr-defined]
    wait_for(lambda: css(browser, "#brokers tbody tr td"), "the brokers table")
    cells = [td.text for td in css(browser, "#brokers tbody tr")[0].find_elements("css selector", "td")]
    assert cells[1:3] == [broker.host, str(broker.port)]
    assert by_id(browser, "controller-id").text.lstrip("-").isdigit()
    assert by_id(browser, "cluster-id").text not in ("", "-")
    apis = by_id(browser, "api-versions").text
    assert "Produce" in apis and "Fetch" in apis and "ApiVersions" in apis
    features = by_id(browser, "features").text
    assert "metadata.version" in features
    assert broker.bootstrap in by_id(browser, "connection").text
    shot(browser, broker, "cluster")


def test_create_topic_produce_and_see_the_message_with_headers(console: str, browser: object,
                                                               broker: BrokerProcess) -> None:
    topic = f"console-{uuid.uuid4().hex[:8]}"
    browser.get(console + "/#/topics")  # type: ignore[attr-defined]
    wait_for(lambda: by_id(browser, "create-topic-form"), "the create form")
    by_id(browser, "new-topic-name").send_keys(topic)
    partitions = by_id(browser, "new-topic-partitions")
    partitions.clear()
    partitions.send_keys("3")
    shot(browser, broker, "topics-create")
    by_id(browser, "create-topic").click()
    # The topic page: three partitions with leaders, and its configs.
    wait_for(lambda: by_id(browser, "topic-name").text == topic, "the new topic's page")
    wait_for(lambda: len(css(browser, "#partitions tbody tr")) == 3, "three partitions")
    assert "cleanup.policy" in by_id(browser, "configs").text

    # Alter a config from the page; its source becomes the topic's own.
    by_id(browser, "config-key").send_keys("retention.ms")
    by_id(browser, "config-value").send_keys("3600000")
    by_id(browser, "alter-config").click()
    wait_for(lambda: "3600000 DYNAMIC_TOPIC_CONFIG" in css(browser, 'tr[data-config="retention.ms"]')[0].text,
             "retention.ms set on the topic")
    shot(browser, broker, "topic")

    # Produce from the page, with a JSON value and two headers.
    by_id(browser, "produce-link").click()
    wait_for(lambda: by_id(browser, "produce-form"), "the produce form")
    by_id(browser, "produce-key").send_keys("order-17")
    by_id(browser, "produce-value").send_keys('{"item": "lamp", "qty": 2}')
    by_id(browser, "produce-headers").send_keys("trace-id=abc-123\nsource=console")
    shot(browser, broker, "produce")
    by_id(browser, "produce").click()
    result = wait_for(lambda: by_id(browser, "produce-result").get_attribute("data-offset") and
                      by_id(browser, "produce-result"), "the produce result")
    partition = result.get_attribute("data-partition")  # type: ignore[attr-defined]
    offset = result.get_attribute("data-offset")  # type: ignore[attr-defined]
    assert offset == "0"

    # The browser shows it from its offset: key, pretty JSON value, headers.
    by_id(browser, "produced-link").click()
    row = wait_for(lambda: css(browser, f'#messages tr[data-partition="{partition}"][data-offset="{offset}"]'),
                   "the produced message in the browser")[0]
    assert row.find_element("css selector", "td.key").text == "order-17"
    value = row.find_element("css selector", "td.value").text
    assert json.loads(value) == {"item": "lamp", "qty": 2} and "\n" in value  # pretty-printed
    headers = {s.get_attribute("data-header"): s.text for s in row.find_elements("css selector", "td.headers span")}
    assert headers == {"trace-id": "trace-id=abc-123", "source": "source=console"}
    # Hex shows the bytes.
    from selenium.webdriver.support.ui import Select

    Select(by_id(browser, "format")).select_by_value("hex")
    wait_for(lambda: css(browser, "#messages td.key")[0].text == "6f 72 64 65 72 2d 31 37", "the key in hex")
    Select(by_id(browser, "format")).select_by_value("auto")

    # Follow mode: a message produced by another client appears without reloading.
    by_id(browser, "follow").click()
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, key=b"later", value=b"followed", headers=[("h", b"1")])
    assert producer.flush(15) == 0
    wait_for(lambda: any(td.text == "followed" for td in css(browser, "#messages td.value")), "the followed message")
    shot(browser, broker, "messages")
    by_id(browser, "follow").click()

    # From a timestamp after both messages: nothing; from the beginning: both.
    by_id(browser, "from-value").clear()
    Select(by_id(browser, "from")).select_by_value("timestamp")
    by_id(browser, "from-value").send_keys(str(int(time.time() * 1000) + 60_000))
    by_id(browser, "load-messages").click()
    wait_for(lambda: by_id(browser, "messages-status").text.startswith("0 messages"), "an empty page")
    Select(by_id(browser, "from")).select_by_value("beginning")
    by_id(browser, "load-messages").click()
    wait_for(lambda: by_id(browser, "messages-status").text.startswith("2 messages"), "both messages")

    # Delete the topic from its page.
    browser.get(console + f"/#/topic/{topic}")  # type: ignore[attr-defined]
    wait_for(lambda: by_id(browser, "topic-name").text == topic, "the topic page")
    by_id(browser, "delete-topic").click()
    browser.switch_to.alert.accept()  # type: ignore[attr-defined]
    wait_for(lambda: css(browser, "#topics"), "the topics page")
    wait_for(lambda: not css(browser, f'#topics tr[data-topic="{topic}"]'), "the topic gone from the list",
             timeout=5)
    assert no_error(browser)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_lag_rises_and_falls_while_a_consumer_runs(console: str, browser: object,
                                                          broker: BrokerProcess, protocol: str) -> None:
    """A librdkafka consumer, in a classic group or a KIP-848 consumer group (group.protocol)."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"lag-{uuid.uuid4().hex[:8]}"
    group = f"console-group-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic, key=str(i).encode(), value=b"x" * 100)
        assert producer.flush(30) == 0

    produce(10)
    paused = threading.Event()
    stop = threading.Event()
    consumed = [0]
    errors: list[BaseException] = []

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "lag-watcher",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "group.protocol": protocol})
        try:
            consumer.subscribe([topic])
            is_paused = False
            while not stop.is_set():
                if paused.is_set() != is_paused and consumer.assignment():
                    (consumer.pause if paused.is_set() else consumer.resume)(consumer.assignment())
                    is_paused = paused.is_set()
                msgs = consumer.consume(50, 0.2)
                if msgs:
                    consumed[0] += len(msgs)
                    consumer.commit(asynchronous=False)
                    time.sleep(0.05)  # a slow consumer: lag falls over a few seconds, not at once
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)
        finally:
            consumer.close()

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    try:
        wait_for(lambda: consumed[0] >= 10, "the consumer to read the first 10 messages")
        browser.get(console + f"/#/group/{group}")  # type: ignore[attr-defined]
        wait_for(lambda: by_id(browser, "total-lag").text == "0", "lag 0 once the consumer caught up")
        assert by_id(browser, "member-count").text == "1"
        members = by_id(browser, "members").text
        assert "lag-watcher" in members and f"{topic}-0" in members and f"{topic}-1" in members
        assert by_id(browser, "group-state").text == "Stable"
        assert by_id(browser, "group-type").text == protocol

        paused.set()
        time.sleep(0.5)
        produce(2000)
        wait_for(lambda: by_id(browser, "total-lag").text == "2000", "the lag to rise to 2000")
        if protocol == "classic":
            shot(browser, broker, "group")
        paused.clear()
        wait_for(lambda: by_id(browser, "total-lag").text == "0", "the lag to fall back to 0", timeout=60)
        plot = by_id(browser, "lag-plot").find_element("css selector", "svg")
        assert int(plot.get_attribute("data-max")) >= 2000
        assert int(plot.get_attribute("data-points")) >= 3
        if protocol == "classic":
            shot(browser, broker, "group-caught-up")
        assert not errors, errors

        browser.get(console + "/#/groups")  # type: ignore[attr-defined]
        row = wait_for(lambda: css(browser, f'#groups tr[data-group="{group}"]'), "the group in the list")[0]
        assert "Stable" in row.text
        if protocol == "classic":
            shot(browser, broker, "groups")
    finally:
        stop.set()
        worker.join(30)
        admin.delete_topics([topic])


def test_acls_and_quotas_page(console: str, browser: object, broker: BrokerProcess) -> None:
    from odradek.tools.client import KafkaClient, check
    from odradek.wire.protocol import request_class

    # A user quota set with a raw AlterClientQuotas (the console itself only reads them).
    user = f"console-user-{uuid.uuid4().hex[:6]}"
    cls = request_class(49)
    with KafkaClient(broker.bootstrap) as client:
        response = client.send(49, cls(entries=[cls.EntryData(
            entity=[cls.EntityData(entity_type="user", entity_name=user)],
            ops=[cls.OpData(key="producer_byte_rate", value=1048576.0, remove=False)])], validate_only=False))
        for entry in response.entries:
            check(entry.error_code, entry.error_message)
    browser.get(console + "/#/security")  # type: ignore[attr-defined]
    wait_for(lambda: css(browser, "#acls") and css(browser, "#quotas"), "the ACL and quota tables")
    # Neither broker runs an authorizer here: both say so the same way.
    assert "SECURITY_DISABLED" in browser.find_element("tag name", "main").text  # type: ignore[attr-defined]
    wait_for(lambda: f"user={user} producer_byte_rate=1048576" in by_id(browser, "quotas").text,
             "the user's quota in the table")
    shot(browser, broker, "security")



@pytest.mark.parametrize("stop_signal", ["SIGTERM", "SIGKILL"])
def test_serve_console_starts_the_console_beside_the_broker_and_stops_with_it(
        tmp_path: Path, stop_signal: str) -> None:
    """`odradek serve --console PORT`: the console is a child process; it goes when the broker
    goes, also when the broker is killed without a chance to stop it."""
    import signal

    broker_port, console_port = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "serve", "--console", str(console_port),
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{broker_port}",
         "--override", f"log.dirs={tmp_path / 'data'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{console_port}/api/cluster"
    try:
        def cluster() -> dict | None:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    return json.load(r)
            except OSError:
                return None

        answer = wait_for(cluster, "the console of `serve --console`")
        assert [(b["host"], b["port"]) for b in answer["brokers"]] == [("127.0.0.1", broker_port)]  # type: ignore[index]
        proc.send_signal(getattr(signal, stop_signal))
        proc.wait(30)
        wait_for(lambda: cluster() is None, "the console to stop with the broker", timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_console_over_sasl_never_shows_the_password(odradek_broker_factory: Callable[..., BrokerProcess],
                                                    browser: object, tmp_path: Path) -> None:
    """`--command-config` with SASL_PLAINTEXT / SCRAM-SHA-512, as the other tools take it: the
    pages work, and neither the browser's pages nor any API answer holds the password."""
    from test_security import sasl_overrides, start_with_listener

    _, bootstrap = start_with_listener(odradek_broker_factory, "SASL_PLAINTEXT", sasl_overrides("SCRAM-SHA-512"))
    password = "alice-secret"
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{password}";\n')
    with running_console(bootstrap, tmp_path, "--command-config", str(config)) as url:
        answers = []
        for path in ("/api/connection", "/api/cluster", "/api/topics", "/api/groups", "/api/acls", "/api/quotas"):
            with urllib.request.urlopen(url + path, timeout=30) as r:
                answers.append(r.read().decode())
        assert '"security_protocol":"SASL_PLAINTEXT"' in answers[0].replace(" ", "")
        assert json.loads(answers[1])["brokers"], answers[1]
        browser.get(url + "/#/cluster")  # type: ignore[attr-defined]
        wait_for(lambda: css(browser, "#brokers tbody tr td"), "the brokers table over SASL")
        assert "SASL_PLAINTEXT SCRAM-SHA-512" in by_id(browser, "connection").text
        pages = [browser.page_source]  # type: ignore[attr-defined]
        for page in ("topics", "groups", "security"):
            browser.get(url + f"/#/{page}")  # type: ignore[attr-defined]
            wait_for(lambda p=page: css(browser, f"#{'acls' if p == 'security' else p}"), f"the {page} page")
            pages.append(browser.page_source)  # type: ignore[attr-defined]
        for text in answers + pages:
            assert password not in text and "jaas" not in text.lower()


def test_share_group_page(console: str, browser: object, broker: BrokerProcess, tmp_path: Path) -> None:
    """A share group (KIP-932) of Kafka's own console share consumer: type, member, assignment,
    then the share-partition's end offset and the lag DescribeShareGroupOffsets reports."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka_oracle import (
        FAST_JVM_OPTS,
        TOOL_HEAP,
        _log_config_args,
        java_bin,
        kafka_classpath,
        require_tool,
    )

    require_tool(f"kafka-{KAFKA_4_4}")
    topic = f"share-{uuid.uuid4().hex[:8]}"
    group = f"console-share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # From the log start, so the records below are the group's whatever the moment its
    # share-partition is first fetched (the default, latest, would race with the producer).
    from odradek.console.admin import controller
    from odradek.tools.client import KafkaClient, check
    from odradek.wire.protocol import request_class

    cls = request_class(44)
    with KafkaClient(broker.bootstrap) as client:
        response = client.send(44, cls(resources=[cls.AlterConfigsResource(
            resource_type=32, resource_name=group, configs=[cls.AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False),
            controller(client))
        for r in response.responses:
            check(r.error_code, r.error_message)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        producer.produce(topic, value=f"share-{i}".encode())
    assert producer.flush(15) == 0
    out = (tmp_path / "share-consumer.out").open("wb")
    consumer = subprocess.Popen(
        [java_bin("java"), *FAST_JVM_OPTS, *TOOL_HEAP, *_log_config_args(KAFKA_4_4, None), "-cp",
         kafka_classpath(KAFKA_4_4), "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
         "--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        browser.get(console + f"/#/group/{group}")  # type: ignore[attr-defined]
        wait_for(lambda: by_id(browser, "group-type").text == "share" and by_id(browser, "member-count").text == "1"
                 and f"{topic}-0" in by_id(browser, "members").text, "the share group with its member", timeout=60)
        wait_for(lambda: "share-49" in Path(out.name).read_text(), "the share consumer to read all 50")
        # Kafka 4.4 reports lag 0 once all is acknowledged, while the start offset it persists may
        # still be behind; the page shows what DescribeShareGroupOffsets says.
        row = f'#offsets tr[data-tp="{topic}-0"]'
        wait_for(lambda: [td.text for td in css(browser, row + " td")][3:5] == ["50", "0"],
                 "end offset 50 and lag 0 on the share-partition", timeout=60)
        assert "Start offset" in by_id(browser, "offsets").text
        shot(browser, broker, "share-group")
    finally:
        consumer.terminate()
        try:
            consumer.wait(20)
        except subprocess.TimeoutExpired:
            consumer.kill()
            consumer.wait()
        out.close()
        admin.delete_topics([topic])


@pytest.mark.parametrize("kind", ["odradek", pytest.param("kafka", marks=pytest.mark.oracle)])
def test_acls_page_lists_the_bindings(broker_factory: Callable[..., BrokerProcess], browser: object,
                                      tmp_path: Path, kind: str) -> None:
    """With an authorizer on, the page lists the ACL bindings (made with CreateAcls) as Kafka names them."""
    from odradek.tools.client import KafkaClient, check
    from odradek.wire.protocol import request_class

    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:ANONYMOUS"}  # the PLAINTEXT listeners' principal (the console's too)
    kwargs: dict[str, object] = {"version": KAFKA_4_4} if kind == "kafka" else {}
    broker = broker_factory(kind, overrides=overrides, **kwargs)
    cls = request_class(30)
    with KafkaClient(broker.bootstrap) as client:
        response = client.send(30, cls(creations=[
            cls.AclCreation(resource_type=2, resource_name="orders", resource_pattern_type=3, principal="User:alice",
                            host="*", operation=3, permission_type=3),
            cls.AclCreation(resource_type=3, resource_name="billing-", resource_pattern_type=4,
                            principal="User:bob", host="10.0.0.1", operation=8, permission_type=2),
        ]))
        for result in response.results:
            check(result.error_code, result.error_message)
    with running_console(broker.bootstrap, tmp_path) as url:
        browser.get(url + "/#/security")  # type: ignore[attr-defined]
        rows = wait_for(lambda: [r.text for r in css(browser, "#acls tbody tr")
                                 if "User:" in r.text] or None, "the ACL rows")
        assert rows == ["GROUP billing- PREFIXED User:bob 10.0.0.1 DESCRIBE DENY",
                        "TOPIC orders LITERAL User:alice * READ ALLOW"]
        assert "null" not in browser.find_element("tag name", "main").text  # type: ignore[attr-defined]
        if kind == "odradek":
            shot(browser, broker, "acls")
