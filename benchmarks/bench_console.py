"""The console on a topic of 1,000,000 messages: how soon the first page of messages shows in a
real browser, and how much memory the console process takes. Odradek and Apache Kafka 4.4.0
are measured in the same run, each with its own console.

Run: ``python benchmarks/bench_console.py [--messages 1000000] [--brokers odradek,kafka]
[--output benchmarks/results/console.json]``. Prints a Markdown table (docs/console.md has the
numbers of a run).

Per broker: a fresh single-node broker, one topic of 1 partition filled by librdkafka
(confluent-kafka) with `--messages` JSON values of ~100 bytes and one header each; then
``python -m odradek console`` as a subprocess and Debian's headless chromium (selenium).
Measured, in the browser, from the moment the page is asked for until the rows of messages
are in the page (the page's JavaScript fetched /api/topics/<t> and /api/topics/<t>/messages
and drew the table):

* "cold": a full page load of ``/#/messages/<t>`` (newest 50 messages) in a fresh tab;
* "end", "beginning", "offset" (the middle) and "timestamp" (the middle): the messages page
  reached from another page of the console, best and median of `--runs`;
* follow mode for 10 s while a producer sends 1,000 messages a second.

Memory is the console process's resident set size after each step and its peak (VmHWM from
/proc) at the end; the 100 MB target is for the peak.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "compat-tests"))

from kafka_oracle import KAFKA_4_4, KafkaBroker, free_port  # noqa: E402
from odradek_broker import OdradekBroker  # noqa: E402

TOPIC = "million"
ROWS_JS = """
const done = arguments[arguments.length - 1];
const t0 = performance.now();
location.hash = arguments[0];
(function check() {
  const rows = document.querySelectorAll('#messages tbody tr[data-offset]');
  const status = document.getElementById('messages-status');
  if (rows.length && status && status.dataset.loaded) done([performance.now() - t0, rows.length]);
  else if (performance.now() - t0 > 30000) done([-1, 0]);
  else setTimeout(check, 2);
})();
"""


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def fill(bootstrap: str, count: int) -> tuple[float, int, int]:
    """`count` JSON messages into TOPIC; returns (seconds, first timestamp, last timestamp)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 512 * 1024,
                         "queue.buffering.max.messages": 500_000, "acks": "all"})
    t0 = time.perf_counter()
    first = int(time.time() * 1000)
    for i in range(count):
        value = json.dumps({"id": i, "user": f"user-{i % 977}", "page": f"/item/{i % 10007}", "ms": i % 1000})
        while True:
            try:
                producer.produce(TOPIC, key=str(i % 1000).encode(), value=value.encode(), headers=[("seq", str(i).encode())])
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return time.perf_counter() - t0, first, int(time.time() * 1000)


def start_console(bootstrap: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "console", "--bootstrap-server", bootstrap,
                             "--port", str(port)], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/connection", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"console did not start: {log.read_text()}")


def browser() -> tuple[object, str]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="odradek-bench-chromium-")
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={profile}", "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    driver.set_script_timeout(60)
    return driver, profile


def measure(kind: str, count: int, runs: int, workdir: Path) -> dict[str, object]:
    broker = (KafkaBroker(workdir / "kafka", version=KAFKA_4_4) if kind == "kafka"
              else OdradekBroker(workdir / "odradek"))
    broker.start()
    out: dict[str, object] = {"broker": kind if kind == "odradek" else f"kafka {KAFKA_4_4}", "messages": count}
    console = driver = profile = None
    try:
        out["fill_s"], first_ts, last_ts = fill(broker.bootstrap, count)
        port = free_port()
        console = start_console(broker.bootstrap, port, workdir / f"console-{kind}.log")
        out["rss_idle_mb"] = rss_kib(console.pid) / 1024
        driver, profile = browser()
        base = f"http://127.0.0.1:{port}/"
        # Cold: a full page load straight onto the messages page.
        t0 = time.perf_counter()
        driver.get(base + f"#/messages/{TOPIC}")  # type: ignore[attr-defined]
        while not driver.execute_script(  # type: ignore[attr-defined]
                "const s = document.getElementById('messages-status'); return s && s.dataset.loaded;"):
            time.sleep(0.005)
        out["cold_ms"] = (time.perf_counter() - t0) * 1000
        middle_ts = first_ts + (last_ts - first_ts) // 2
        cases = {
            "end": f"#/messages/{TOPIC}",
            "beginning": f"#/messages/{TOPIC}?from=beginning",
            "offset": f"#/messages/{TOPIC}?from=offset&value={count // 2}",
            "timestamp": f"#/messages/{TOPIC}?from=timestamp&value={middle_ts}",
        }
        for name, target in cases.items():
            times = []
            for _ in range(runs):
                ms, rows = open_messages(driver, target)
                if ms < 0 or rows != 50:
                    raise RuntimeError(f"{kind} {name}: the page did not show 50 messages ({rows})")
                times.append(ms)
            out[f"{name}_ms"] = {"best": min(times), "median": statistics.median(times)}
            out[f"rss_after_{name}_mb"] = rss_kib(console.pid) / 1024
        out["follow"] = follow(driver, broker.bootstrap)
        out["rss_mb"] = rss_kib(console.pid) / 1024
        out["peak_rss_mb"] = rss_kib(console.pid, "VmHWM") / 1024
    finally:
        if driver is not None:
            driver.quit()  # type: ignore[attr-defined]
            shutil.rmtree(profile, ignore_errors=True)  # type: ignore[arg-type]
        if console is not None:
            console.terminate()
            console.wait(10)
        broker.stop()
        broker.kill()
    return out


def open_messages(driver: object, target: str) -> tuple[float, int]:
    """(ms until the rows are drawn, rows) of the messages page `target`, reached from the cluster
    page (so that no row of an earlier messages page is mistaken for the new one)."""
    driver.execute_async_script(  # type: ignore[attr-defined]
        "const done = arguments[0]; location.hash = '#/cluster';"
        "(function w() { document.getElementById('brokers') ? done() : setTimeout(w, 5); })();")
    ms, rows = driver.execute_async_script(ROWS_JS, target)  # type: ignore[attr-defined]
    return ms, rows


def follow(driver: object, bootstrap: str, seconds: float = 10.0, rate: int = 1000) -> dict[str, object]:
    """Follow mode while a producer sends `rate` messages a second: the newest offset the page shows."""
    from confluent_kafka import Producer

    open_messages(driver, f"#/messages/{TOPIC}")
    driver.execute_script("document.getElementById('follow').click();")  # type: ignore[attr-defined]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    stop = threading.Event()
    sent = [0]

    def send() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            for _ in range(rate // 10):
                producer.produce(TOPIC, value=b'{"live": true}')
                sent[0] += 1
            producer.poll(0)
            time.sleep(max(0.0, 0.1 - (time.perf_counter() - t)))

    thread = threading.Thread(target=send)
    thread.start()
    time.sleep(seconds)
    stop.set()
    thread.join()
    producer.flush(30)
    time.sleep(2.5)  # two poll rounds of the page
    last = driver.execute_script(  # type: ignore[attr-defined]
        "const r = document.querySelectorAll('#messages tbody tr[data-offset]');"
        "return r.length ? Number(r[r.length - 1].dataset.offset) : -1;")
    return {"sent": sent[0], "last_offset_shown": last}


def markdown(results: list[dict[str, object]]) -> str:
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        "| Broker | Messages | Fill (s) | Cold page load (ms) | From end (ms) | From beginning (ms) | "
        "From offset (ms) | From timestamp (ms) | Console RSS idle / end / peak (MB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    def cell(r: dict[str, object], name: str) -> str:
        v = r[name]
        return f"{v['best']:.0f} / {v['median']:.0f}"  # type: ignore[index]

    for r in results:
        lines.append(
            f"| {r['broker']} | {r['messages']:,} | {r['fill_s']:.1f} | {r['cold_ms']:.0f} | {cell(r, 'end_ms')} | "
            f"{cell(r, 'beginning_ms')} | {cell(r, 'offset_ms')} | {cell(r, 'timestamp_ms')} | "
            f"{r['rss_idle_mb']:.0f} / {r['rss_mb']:.0f} / {r['peak_rss_mb']:.0f} |")
    lines.append("")
    lines.append("Page times are best / median of the runs. Follow mode: " + "; ".join(
        f"{r['broker']}: {r['follow']['sent']} sent, last offset shown {r['follow']['last_offset_shown']}"  # type: ignore[index]
        for r in results))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--brokers", default="odradek,kafka")
    parser.add_argument("--output", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="odradek-bench-console-") as tmp:
        for kind in args.brokers.split(","):
            results.append(measure(kind.strip(), args.messages, args.runs, Path(tmp)))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    if args.output:
        args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
