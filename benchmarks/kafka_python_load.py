"""kafka-python as a load client, for comparison with the C client (``kcat``) rows (issue #12).

kafka-python is pure Python: it encodes and decodes every record in the interpreter, so its rows
measure the client far more than the broker. They are in the report because many Python users
run it, and because a broker should not be the slow part even for them.

* ``produce``: one ``KafkaProducer`` (acks=1, ``linger_ms=5`` and ``batch_size`` 1 MiB, i.e.
  librdkafka's defaults, so that batching matches the ``kcat`` rows) sends ``--records`` records
  of ``--size`` bytes round-robin over the topic's partitions, then ``flush()``; every future is
  checked.
* ``consume``: one ``KafkaConsumer`` assigned every partition from offset 0 (no group) polls
  until it has ``--records`` records.

Each prints one JSON line: seconds (first send or poll until the last acknowledgement or
record), the process's CPU seconds over the same span, records and payload bytes. Run by
``benchmarks/runner.py`` (the "kafka-python ..." rows) or by hand::

    python benchmarks/kafka_python_load.py produce --bootstrap 127.0.0.1:9092 --topic t --records 10000
"""

from __future__ import annotations

import argparse
import json
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

MIB = 1 << 20


def produce(bootstrap: str, topic: str, records: int, size: int) -> dict:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=MIB,
                             max_request_size=2 * MIB)
    try:
        partitions = sorted(producer.partitions_for(topic))
        value = b"x" * size
        producer.send(topic, value, partition=partitions[0]).get(30)  # connected, metadata known
        cpu0, t0 = time.process_time(), time.perf_counter()
        futures = [producer.send(topic, value, partition=partitions[i % len(partitions)]) for i in range(records - 1)]
        producer.flush()
        for future in futures:
            future.get(0)  # raises if the broker refused it
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        producer.close()
    return {"seconds": elapsed, "cpu_seconds": cpu, "records": records, "bytes": records * size}


def consume(bootstrap: str, topic: str, records: int) -> dict:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        consumer.assign([TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))])
        consumer.seek_to_beginning()
        got = nbytes = 0
        cpu0, t0 = time.process_time(), time.perf_counter()
        deadline = time.monotonic() + 600
        while got < records:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {got} of {records} records in 600 s")
            for batch in consumer.poll(timeout_ms=500).values():
                got += len(batch)
                nbytes += sum(len(r.value) for r in batch)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        consumer.close()
    return {"seconds": elapsed, "cpu_seconds": cpu, "records": got, "bytes": nbytes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["produce", "consume"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--records", type=int, required=True)
    ap.add_argument("--size", type=int, default=1024, help="produce: record value size")
    args = ap.parse_args(argv)
    if args.mode == "produce":
        out = produce(args.bootstrap, args.topic, args.records, args.size)
    else:
        out = consume(args.bootstrap, args.topic, args.records)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
