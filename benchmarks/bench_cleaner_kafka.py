"""Issue #28's compaction case on Apache Kafka and on Odradek's cleaner, in the same run.

Run: `python benchmarks/bench_cleaner_kafka.py [--version 4.4.0] [--cases 0,1,2,3,4,6] [--records 1000000]
[--repeat 3] [--json rows.jsonl] [--warm-up]` (needs the Kafka jars of `compat-tests/kafka_oracle.py`, i.e. `.ci/fetch-tools.sh`).

Kafka: a single-node broker gets a compacted topic (the case's segment size, `min.compaction.lag.ms`
high so nothing is cleaned while it fills) and the batches `bench_cleaner.py` writes for the case
(`bench_cleaner.case_batches`, stamped with the current time), one Produce request per batch; then the lag is lifted and the cleaner's own statistics are read from its log ("X MB of
log processed in Y seconds (Z MB/sec)", with the map and copy phases). Kafka's dirty section stops
before its active segment; Odradek's case rolls it, so compare MB/s, not seconds.
Odradek: `bench_cleaner.run` on the same case right after, cleaning in a worker process as the
broker does (`--in-thread`: in this process's thread). With `--warm-up`
Kafka first cleans a second topic holding the same data, so the measured cleaning runs JIT-compiled.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "compat-tests"))

import bench_cleaner  # noqa: E402
from kafka_oracle import KafkaBroker  # noqa: E402

from odradek.tools.client import BrokerConnection  # noqa: E402
from odradek.wire.protocol import request_class  # noqa: E402

Produce = request_class(0)
TOPIC = "bench-compact"
_STATS = re.compile(
    r"cleaned log (?P<log>\S+) \(dirty section = \[(?P<start>\d+), (?P<end>\d+)\]\)\s+"
    r"(?P<mb>[\d,.]+) MB of log processed in (?P<s>[\d,.]+) seconds \((?P<mbs>[\d,.]+) MB/sec\)\.\s+"
    r"Indexed (?P<imb>[\d,.]+) MB in (?P<is>[\d,.]+) seconds.*?"
    r"Cleaned (?P<cmb>[\d,.]+) MB in (?P<cs>[\d,.]+) seconds", re.S)


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _produce_all(bootstrap: str, data: list[bytes], topic: str = TOPIC) -> None:
    host, port = bootstrap.rsplit(":", 1)
    conn = BrokerConnection(host, int(port), client_id="bench-cleaner")
    try:
        for batch in data:
            for _ in range(100):  # a new topic's leader may take a moment
                req = Produce(acks=1, timeout_ms=30000, topic_data=[Produce.TopicProduceData(
                    name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])
                err = conn.send(0, req, 9).responses[0].partition_responses[0].error_code
                if err not in (3, 5, 6):
                    break
                time.sleep(0.1)
            if err:
                raise RuntimeError(f"produce failed: error {err}")
    finally:
        conn.close()


def _alter(bootstrap: str, configs: dict[str, str], topic: str = TOPIC) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([res])[res].result(30)


def _wait_for_stats(broker: KafkaBroker, topic: str) -> re.Match[str]:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        for m in _STATS.finditer(broker.server_log.read_text(errors="replace")):
            if m.group("log").rsplit("-", 1)[0] == topic:
                return m
        time.sleep(0.5)
    raise RuntimeError(f"Kafka did not clean {topic} in 300 s")


def run_kafka(version: str, workdir: Path, data: list[bytes], segment_bytes: int,
              warm_up: bool = False) -> dict[str, float]:
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = KafkaBroker(workdir, version=version, overrides={
        "log.cleaner.backoff.ms": "200", "auto.create.topics.enable": "false",
        "log.segment.delete.delay.ms": "1000"})
    broker.start()
    topics = [TOPIC + "-warm-up", TOPIC] if warm_up else [TOPIC]
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes), "segment.ms": "86400000",
                   "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "3600000"}
        for fut in admin.create_topics([NewTopic(t, 1, 1, config=configs) for t in topics]).values():
            fut.result(30)
        t0 = time.monotonic()
        for t in topics:
            _produce_all(broker.bootstrap, data, t)
        produce_s = time.monotonic() - t0
        os.sync()  # as bench_cleaner.run before Odradek's round: no writeback of the fill under the cleaning
        for t in topics:
            # with --warm-up, a first cleaning of the same data runs the cleaner's code through the
            # JIT before the measured one
            load = os.getloadavg()[0]
            _alter(broker.bootstrap, {"min.compaction.lag.ms": "0"}, t)
            m = _wait_for_stats(broker, t)
    finally:
        broker.stop()
    mb, mbs = _num(m.group("mb")), _num(m.group("mbs"))
    return {"dirty_mib": mb, "mib_s": mbs, "round_s": mb / mbs if mbs else _num(m.group("s")),
            "map_s": _num(m.group("is")), "copy_s": _num(m.group("cs")), "load": load, "produce_s": produce_s,
            "records": int(m.group("end")) - int(m.group("start"))}


def _loadavg() -> str:
    """The whole /proc/loadavg line (1, 5, 15 min, runnable/all tasks): the machine's state beside a row."""
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_case(version: str, case: bench_cleaner.Case, base: Path, warm_up: bool, skip_odradek: bool,
             worker: bool = True, odradek_first: bool = False) -> dict[str, object]:
    """Kafka and Odradek on one case (Kafka first unless `odradek_first`); one row of figures."""
    loads = [_loadavg()]
    ours = None
    try:
        if odradek_first and not skip_odradek:
            ours = bench_cleaner.run(case, base / "odradek", worker=worker)
            loads.append(_loadavg())
        # stamped now: with bench_cleaner's 2023 timestamps every segment would be past
        # min.compaction.lag.ms at once, and Kafka would clean while the topic fills
        data = list(bench_cleaner.case_batches(case, int(time.time() * 1000)))
        kafka = run_kafka(version, base / "kafka", data, case.segment_bytes, warm_up)
        del data
        shutil.rmtree(base / "kafka", ignore_errors=True)  # Kafka's files do not sit beside Odradek's round
        loads.append(_loadavg())
        if not odradek_first and not skip_odradek:
            ours = bench_cleaner.run(case, base / "odradek", worker=worker)
            loads.append(_loadavg())
    finally:
        shutil.rmtree(base, ignore_errors=True)
    row: dict[str, object] = {"case": case.name, "records": case.records, "keys": case.keys,
                              "kafka_version": version, "warm_up": warm_up, "kafka": kafka,
                              "order": "odradek, kafka" if odradek_first else "kafka, odradek",
                              "loadavg": loads, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if ours is not None:
        dirty = float(ours["before_log"]) / (1024 * 1024)  # type: ignore[arg-type]
        ours = {k: v for k, v in ours.items() if k != "late"}
        row["odradek"] = {**ours, "dirty_mib": dirty, "mib_s": dirty / float(ours["elapsed"])}  # type: ignore[arg-type]
        row["ratio"] = dirty / float(ours["elapsed"]) / kafka["mib_s"]  # type: ignore[arg-type]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", default="4.4.0")
    ap.add_argument("--case", "--cases", dest="cases", default="6",
                    help="comma-separated cases of bench_cleaner.py (default 6, issue #28's; not 5, the throttled one)")
    ap.add_argument("--records", type=int, default=1_000_000, help="records of the scaled cases (not 6)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every case (Kafka then Odradek each time)")
    ap.add_argument("--first-round", type=int, default=0,
                    help="number of the first round (rounds run as separate invocations keep distinct numbers)")
    ap.add_argument("--alternate", action="store_true",
                    help="odd rounds run Odradek before Kafka, so neither side always follows the other's writeback")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="append one JSON line per round to this file")
    ap.add_argument("--skip-odradek", action="store_true")
    ap.add_argument("--in-thread", action="store_true", help="Odradek cleans in-thread, not in a worker process")
    ap.add_argument("--warm-up", action="store_true",
                    help="Kafka cleans a copy of the data first (JIT warm), the second cleaning is measured")
    args = ap.parse_args()
    cases = bench_cleaner.all_cases(args.records)
    chosen = [cases[int(i)] for i in args.cases.split(",")]
    if any(c.rate != float("inf") for c in chosen):
        ap.error("the throttled case needs the broker-wide throttle; not run beside Kafka")
    rows = []
    for rnd in range(args.first_round, args.first_round + args.repeat):
        for case in chosen:
            base = Path(tempfile.mkdtemp(prefix="bench-cleaner-kafka-", dir=args.dir))
            try:
                row = run_case(args.version, case, base, args.warm_up, args.skip_odradek, not args.in_thread,
                               odradek_first=args.alternate and rnd % 2 == 1)
            except Exception as e:  # noqa: BLE001 - one failed case does not lose the others' rows
                print(f"round {rnd} {case.name}: failed: {e!r}", file=sys.stderr, flush=True)
                continue
            row["round"] = rnd
            rows.append(row)
            if args.json is not None:
                with args.json.open("a") as f:
                    f.write(json.dumps(row) + "\n")
            print(f"round {rnd} {case.name}: ratio {row.get('ratio', float('nan')):.2f}", file=sys.stderr, flush=True)
    print(f"# Log cleaner, Kafka {args.version} and Odradek ({'in-thread' if args.in_thread else 'worker process'})\n")
    print("| case | round | Kafka dirty MiB | Kafka round s | Kafka MiB/s | Odradek dirty MiB | Odradek round s "
          "| Odradek map / rewrite s | Odradek MiB/s | Odradek/Kafka | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        k = row["kafka"]
        o = row.get("odradek")
        assert isinstance(k, dict)
        ours = (f"{o['dirty_mib']:.1f} | {o['elapsed']:.2f} | {o['map_s']:.2f} / {o['copy_s']:.2f} | {o['mib_s']:.1f} "
                f"| **{row['ratio']:.2f}x** | {o['load']:.1f}") if isinstance(o, dict) else "| | | | | "
        print(f"| {row['case']} | {row['round']} | {k['dirty_mib']:.1f} | {k['round_s']:.2f} | {k['mib_s']:.1f} | {ours} |")


if __name__ == "__main__":
    main()
