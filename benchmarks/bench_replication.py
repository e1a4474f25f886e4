"""Replication benchmark (issue #25): an Odradek-only and a Kafka-only cluster, side by side in one run.

Each cluster is one controller and three brokers on this machine (Kafka 4.4.0 from the official
jars, or `odradek serve` nodes: an Odradek controller and three Odradek brokers). On a topic with
replication factor 3, min.insync.replicas=2 and 6 partitions, measured per cluster:

* produce throughput with acks=all and with acks=1: `--mbytes` of 1 KiB records from kcat
  (librdkafka, at C speed), MB/s until every record is acknowledged;
* the time until every follower holds every record (the replicas' log end offsets equal the
  leaders'), from the start of the acks=1 produce;
* acks=all latency: a paced confluent-kafka producer (`--rate` records/s for `--seconds`),
  produce() to acknowledgement, p50/p99/p99.9.

Clusters alternate within each repetition (odradek, kafka, odradek, ...) so that slow drifts of
the shared machine's load hit both alike; the table gives medians over `--repeat` runs.

    python benchmarks/bench_replication.py --repeat 2 --json /tmp/repl.json --output docs/benchmarks-replication.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "compat-tests"))
sys.path.insert(0, str(HERE))

from kafka_cluster import KafkaNode, Quorum, odradek_controller  # noqa: E402
from kafka_oracle import CLUSTER_ID, KAFKA_4_4  # noqa: E402
from odradek_broker import OdradekBroker  # noqa: E402
from runner import MB, Produce, _percentiles, kcat_producers, paced_acks  # noqa: E402

BROKERS = (2, 3, 4)
PARTITIONS = 6
TOPIC_CONFIG = {"min.insync.replicas": "2"}


class ClusterUnderTest:
    """A controller and three brokers of one kind."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.quorum = Quorum()
        if kind == "kafka":
            self.controller = KafkaNode(root / "node1", self.quorum, 1, roles=("controller",), version=KAFKA_4_4)
            self.brokers = [KafkaNode(root / f"node{n}", self.quorum, n, roles=("broker",), version=KAFKA_4_4,
                                      overrides={"offsets.topic.replication.factor": "3"})
                            for n in BROKERS]
        else:
            self.controller = odradek_controller(root / "node1", self.quorum, 1)
            self.brokers = [OdradekBroker(root / f"node{n}", overrides={
                "process.roles": "broker", "node.id": n, "cluster.id": CLUSTER_ID,
                "controller.quorum.voters": self.quorum.voters_config, "controller.listener.names": "CONTROLLER"})
                for n in BROKERS]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self) -> None:
        self.controller.start()
        for b in self.brokers:
            b.start()
        deadline = time.time() + 60
        while time.time() < deadline:
            if len(_admin(self.bootstrap).list_topics(timeout=10).brokers) == len(BROKERS):
                return
            time.sleep(0.3)
        raise RuntimeError(f"{self.kind}: brokers did not all register")

    def stop(self) -> None:
        for node in [*self.brokers, self.controller]:
            try:
                node.stop()
            finally:
                node.kill()


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # (kept alive until its answers are in)
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config=TOPIC_CONFIG)])[topic].result(60)
    deadline = time.time() + 60
    while time.time() < deadline:
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(parts) == PARTITIONS and all(p.leader >= 0 and len(p.isrs) == 3 for p in parts.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic} not fully in sync")


def _replicas_caught_up(cluster: ClusterUnderTest, topic: str) -> bool:
    """Every broker's copy of every partition ends where the leader's does (the log end offsets
    each broker reports for its own replicas with ListOffsets as a replica would not tell; the
    partition directories' sizes do, as the logs are identical byte for byte)."""
    for p in range(PARTITIONS):
        sizes = {sum(f.stat().st_size for f in (b.log_dir / f"{topic}-{p}").glob("*.log"))
                 for b in cluster.brokers if (b.log_dir / f"{topic}-{p}").is_dir()}
        if len(sizes) != 1:
            return False
    return True


def _latency(bootstrap: str, topic: str, rate: int, seconds: float) -> dict[str, float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "socket.nagle.disable": True,
                  "enable.idempotence": True})
    sent, _seconds, acked = paced_acks(p, topic, rate, seconds, 1024)
    return {"sent": sent, "acked": len(acked), **_percentiles(acked, "ack_")}


def run_once(kind: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    cluster = ClusterUnderTest(kind, workdir / kind)
    cache = workdir / "payload"
    cache.mkdir(exist_ok=True)
    logs = workdir / f"{kind}-logs"
    logs.mkdir(exist_ok=True)
    total = int(args.mbytes * MB)
    out: dict[str, Any] = {"kind": kind}
    try:
        cluster.start()
        for acks in ("all", "1"):
            topic = f"bench-acks-{acks}"
            _create(cluster.bootstrap, topic)
            started = time.perf_counter()
            seconds, records = kcat_producers(cluster.bootstrap, topic, Produce(f"acks={acks}", acks=acks,
                                                                               partitions=PARTITIONS),
                                              total, cache, logs)
            out[f"acks_{acks}_mb_s"] = records * 1024 / MB / seconds
            while not _replicas_caught_up(cluster, topic):
                time.sleep(0.05)
            out[f"acks_{acks}_replicated_s"] = time.perf_counter() - started
        _create(cluster.bootstrap, "bench-latency")
        out.update(_latency(cluster.bootstrap, "bench-latency", args.rate, args.seconds))
    finally:
        cluster.stop()
    return out


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> str:
    keys = [("acks_all_mb_s", "produce acks=all (MB/s)"), ("acks_1_mb_s", "produce acks=1 (MB/s)"),
            ("acks_1_replicated_s", "acks=1: all replicas hold every record after (s)"),
            ("ack_p50_ms", f"acks=all latency p50 at {args.rate}/s (ms)"),
            ("ack_p99_ms", "acks=all latency p99 (ms)"), ("ack_p999_ms", "acks=all latency p99.9 (ms)")]
    med = {kind: {k: statistics.median(r[k] for r in runs if r["kind"] == kind) for k, _ in keys}
           for kind in ("odradek", "kafka")}
    lines = ["| measure | Odradek cluster | Kafka 4.4.0 cluster | Odradek / Kafka |", "|---|---:|---:|---:|"]
    for k, label in keys:
        o, j = med["odradek"][k], med["kafka"][k]
        lines.append(f"| {label} | {o:.2f} | {j:.2f} | {o / j:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--mbytes", type=float, default=128.0, help="MB of 1 KiB records per produce run")
    ap.add_argument("--rate", type=int, default=500, help="records/s of the latency run")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--output", type=Path, help="print the table into this markdown file's results block")
    args = ap.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-replication-") as tmp:
        for i in range(args.repeat):
            for kind in ("odradek", "kafka") if i % 2 == 0 else ("kafka", "odradek"):
                run = run_once(kind, args, Path(tmp) / f"run{i}")
                print(json.dumps(run), flush=True)
                runs.append(run)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    table = report(runs, args)
    print(table)
    if args.output:
        text = args.output.read_text() if args.output.exists() else ""
        start, end = "<!-- results -->", "<!-- /results -->"
        if start in text and end in text:
            text = text[: text.index(start) + len(start)] + "\n" + table + "\n" + text[text.index(end):]
            args.output.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
