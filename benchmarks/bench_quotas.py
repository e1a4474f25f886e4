"""Issue #23's quota measurement: a producer under a 1 MB/s producer_byte_rate, on Apache Kafka 4.4.0
and on Odradek, in the same run.

Run: `python benchmarks/bench_quotas.py [--seconds 60] [--warm-up 20] [--rate 1048576] [--json out.json]`
(needs the Kafka jars of `compat-tests/kafka_oracle.py`, i.e. `.ci/fetch-tools.sh`).

For each broker: a topic with one partition, a client-id quota set with AlterClientQuotas, then one
confluent-kafka (librdkafka) producer sends 10 kB records as fast as it can for `--seconds`. The
throughput counted is the bytes of the Produce requests that were acknowledged (what the quota
counts: record batches plus request framing, taken from librdkafka's statistics), between the end
of the warm-up and the end of the run: Kafka's rate starts as if `quota.window.num - 1` windows
had already passed, so a fresh client may first send ~10 s worth at once; only the steady state
says whether the quota holds. The throttle times are what librdkafka's throttle callback got
(throttle_time_ms of the responses), and how many responses were throttled.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "compat-tests"))

from confluent_kafka import Producer  # noqa: E402
from kafka_oracle import KafkaBroker  # noqa: E402
from odradek_broker import OdradekBroker  # noqa: E402

from odradek.tools.client import BrokerConnection  # noqa: E402
from odradek.wire.protocol import request_class  # noqa: E402

TOPIC = "bench-quota"
CLIENT_ID = "bench-quota-producer"
RECORD = 10_000


def _connect(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port))


def _prepare(bootstrap: str, rate: float) -> None:
    conn = _connect(bootstrap)
    try:
        create = request_class(19)
        conn.send(19, create(topics=[create.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
                             timeout_ms=30000))
        A = request_class(49)
        answer = conn.send(49, A(validate_only=False, entries=[A.EntryData(
            entity=[A.EntityData(entity_type="client-id", entity_name=CLIENT_ID)],
            ops=[A.OpData(key="producer_byte_rate", value=rate, remove=False)])]), 1)
        assert [e.error_code for e in answer.entries] == [0], answer
    finally:
        conn.close()
    time.sleep(1)  # Kafka's broker takes the controller's quota record a moment after the answer


def measure(bootstrap: str, seconds: float, warm_up: float) -> dict:
    """Produce flat out as CLIENT_ID; acknowledged request bytes per second after the warm-up."""
    throttles: list[float] = []
    samples: list[tuple[float, int]] = []  # (time, request bytes sent so far)

    def on_stats(text: str) -> None:
        stats = json.loads(text)
        acked = sum(b.get("txbytes", 0) for b in stats.get("brokers", {}).values() if b.get("nodeid", -1) >= 0)
        samples.append((time.monotonic(), acked))

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID, "linger.ms": 5,
                         "batch.size": 1_000_000, "acks": 1, "statistics.interval.ms": 1000,
                         "stats_cb": on_stats, "throttle_cb": lambda e: throttles.append(e.throttle_time * 1000)})
    payload = b"q" * RECORD
    delivered = [0]

    def on_delivery(err, _msg) -> None:
        if err is None:
            delivered[0] += RECORD

    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            producer.produce(TOPIC, payload, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
    end = time.monotonic()
    producer.purge()  # what is still queued is not part of the measured span
    producer.flush(10)
    window = [(t, b) for t, b in samples if started + warm_up <= t <= end]
    if len(window) < 2:
        raise RuntimeError(f"too few statistics samples ({len(samples)})")
    (t0, b0), (t1, b1) = window[0], window[-1]
    return {
        "rate_bytes_per_s": (b1 - b0) / (t1 - t0),
        "measured_seconds": t1 - t0,
        "delivered_payload_bytes": delivered[0],
        "throttled_responses": len(throttles),
        "throttle_ms_mean": statistics.fmean(throttles) if throttles else 0.0,
        "throttle_ms_median": statistics.median(throttles) if throttles else 0.0,
        "throttle_ms_max": max(throttles) if throttles else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warm-up", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=1048576.0, help="producer_byte_rate (bytes/s)")
    parser.add_argument("--version", default="4.4.0", help="Apache Kafka version")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-quotas-") as work:
        for name, broker in (("kafka", KafkaBroker(Path(work) / "kafka", version=args.version)),
                             ("odradek", OdradekBroker(Path(work) / "odradek"))):
            broker.start()
            try:
                _prepare(broker.bootstrap, args.rate)
                results[name] = measure(broker.bootstrap, args.seconds, args.warm_up)
            finally:
                broker.stop()
    print(f"producer_byte_rate {args.rate:.0f} B/s, {args.seconds:.0f} s per broker, first {args.warm_up:.0f} s "
          f"not counted")
    print("| broker | produce B/s (steady state) | of the quota | throttled responses | throttle ms mean / median / max |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        label = f"Apache Kafka {args.version}" if name == "kafka" else "Odradek"
        print(f"| {label} | {r['rate_bytes_per_s']:,.0f} | {r['rate_bytes_per_s'] / args.rate:.1%} | "
              f"{r['throttled_responses']} | {r['throttle_ms_mean']:.0f} / {r['throttle_ms_median']:.0f} / "
              f"{r['throttle_ms_max']:.0f} |")
    if args.json:
        args.json.write_text(json.dumps({"rate": args.rate, "seconds": args.seconds, "warm_up": args.warm_up,
                                         "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
