"""Issue #26's share group measurement: share-consumer throughput and acknowledgement latency on
Apache Kafka 4.4.0 and on Odradek, in the same run.

Run: `python benchmarks/bench_share.py [--records 50000] [--consumers 2] [--rounds 3] [--json out.json]`
(needs the Kafka jars of `compat-tests/kafka_oracle.py`, i.e. `.ci/fetch-tools.sh`).

For each broker: a topic with two partitions and one share group whose consumers (confluent-kafka
``ShareConsumer``s, explicit acknowledgement, one thread each) join first; then `--records`
records of 100 bytes are produced and the consumers take and accept them all. Throughput is the
records accepted per second from the first record received to the last acknowledgement
confirmed; the acknowledgement latency is the time ``commit_sync`` takes for one poll's records
(the ShareAcknowledge round trip, the broker's state write included), as percentiles. With
``--rounds N`` the brokers alternate N times (each run on a fresh broker) and the medians of
the runs are reported too; the machine's load average is recorded before each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "compat-tests"))

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka_oracle import KAFKA_4_4, KafkaBroker  # noqa: E402
from odradek_broker import OdradekBroker  # noqa: E402

TOPIC = "bench-share"
GROUP = "bench-share"


def _consume(bootstrap: str, stop: threading.Event, out: dict, lock: threading.Lock) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([TOPIC])
    try:
        while not stop.is_set():
            messages = [m for m in consumer.poll(0.2) if m.error() is None]
            for m in messages:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            if not messages:
                continue
            started = time.perf_counter()
            result = consumer.commit_sync(30)
            took = time.perf_counter() - started
            confirmed = sum(1 for m in messages
                            if not any(tp.partition == m.partition() and err is not None
                                       for tp, err in result.items()))
            with lock:
                out["acked"] += confirmed
                out["latencies"].append(took)
                out["last"] = time.perf_counter()
    finally:
        consumer.close()


def run_one(bootstrap: str, records: int, consumers: int) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
        f.result(30)
    out: dict = {"acked": 0, "latencies": []}
    lock = threading.Lock()
    stop = threading.Event()
    threads = [threading.Thread(target=_consume, args=(bootstrap, stop, out, lock)) for _ in range(consumers)]
    for t in threads:
        t.start()
    time.sleep(8)  # joined and fetched once: share.auto.offset.reset=latest
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    payload = b"x" * 100
    produce_start = time.perf_counter()
    for i in range(records):
        producer.produce(TOPIC, value=payload, partition=i % 2)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(120)
    produce_s = time.perf_counter() - produce_start
    deadline = time.monotonic() + 300
    while out["acked"] < records and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join(60)
    lat = sorted(out["latencies"])

    def pct(p: float) -> float:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 2) if lat else float("nan")

    seconds = out.get("last", 0) - produce_start
    return {"records": records, "acked": out["acked"], "seconds": round(seconds, 3),
            "produce_s": round(produce_s, 3),
            "records_per_s": round(out["acked"] / seconds) if seconds > 0 else None,
            "commits": len(lat), "ack_ms_p50": pct(0.5), "ack_ms_p99": pct(0.99),
            "ack_ms_mean": round(statistics.fmean(lat) * 1000, 2) if lat else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--brokers", default="kafka,odradek", help="which brokers, in order")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the brokers this many times")
    args = parser.parse_args()
    wanted = args.brokers.split(",")
    runs: dict[str, list[dict]] = {name: [] for name in wanted}
    for round_no in range(args.rounds):
        # alternate which broker goes first, so a drift in the machine's load hits both alike
        order = wanted if round_no % 2 == 0 else list(reversed(wanted))
        for name in order:
            with tempfile.TemporaryDirectory(prefix="bench-share-") as work:
                broker = (KafkaBroker(Path(work) / "kafka", version=KAFKA_4_4) if name == "kafka"
                          else OdradekBroker(Path(work) / "odradek"))
                broker.start()
                try:
                    load = os.getloadavg()[0]
                    result = run_one(broker.bootstrap, args.records, args.consumers)
                    result["load_1min"] = round(load, 2)
                finally:
                    broker.stop()
            runs[name].append(result)
            print(name, result, flush=True)
    medians = {name: {k: statistics.median(r[k] for r in rs)
                      for k in ("records_per_s", "ack_ms_p50", "ack_ms_p99", "ack_ms_mean", "commits")}
               for name, rs in runs.items() if rs}
    print("medians", medians, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"consumers": args.consumers, "records": args.records,
                                         "medians": medians, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
