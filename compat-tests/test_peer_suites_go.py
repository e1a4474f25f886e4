"""franz-go (the Go client) as a KIP-848 group member committing its offsets in transactions, as
its own TestTxnEtl "848" subtests do (issue #22): compat-tests/go/txn848, built by
.ci/fetch-tools.sh into the cache (or here, when ``go`` is on the PATH)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from client_helpers import read_committed
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_oracle import CACHE_DIR, in_ci

SOURCE = Path(__file__).resolve().parent / "go" / "txn848"
BINARY = CACHE_DIR / "go" / "txn848"


def _txn848() -> Path:
    """The built program: the cached one while it is newer than its sources, else built now."""
    newest = max(p.stat().st_mtime for p in SOURCE.iterdir())
    if BINARY.is_file() and BINARY.stat().st_mtime >= newest:
        return BINARY
    go = shutil.which("go")
    if go is None:
        message = f"GO CLIENT MISSING: no go to build {SOURCE} (.ci/fetch-tools.sh builds it into {BINARY})"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOTOOLCHAIN": "auto", "GOFLAGS": "-mod=readonly"}
    subprocess.run([go, "build", "-trimpath", "-buildvcs=false", "-o", str(BINARY), "."], cwd=SOURCE, env=env,
                   check=True, timeout=600)
    return BINARY


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[str]:
    return [v.decode() for v in read_committed(bootstrap, topic, partitions)]


def _finalized_transaction_version(broker) -> int:
    """The transaction.version the broker finalizes (ApiVersions), 0 when none."""
    from odradek.tools.client import BrokerConnection
    from odradek.wire.protocol import request_class

    connection = BrokerConnection(broker.host, broker.port)
    try:
        answer = connection.send(18, request_class(18)(client_software_name="odradek-tests",
                                                       client_software_version="1"), 3)
    finally:
        connection.close()
    return max((f.max_version_level for f in answer.finalized_features if f.name == "transaction.version"),
               default=0)


@pytest.mark.parametrize("transactions", ["v1", "default"])
def test_franz_go_kip848_member_commits_offsets_in_transactions(odradek_broker_factory, transactions: str) -> None:
    """franz-go's GroupTransactSession in a consumer-protocol group: every transaction's
    TxnOffsetCommit (member id + member epoch) is answered without an error, every fourth
    transaction is aborted and redone, and the read_committed output holds each input once.
    With transactions V1 (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit v3-4), and with
    what franz-go picks by default: V2 (partitions added through Produce, TxnOffsetCommit v5)
    when the broker finalizes transaction.version 2."""
    binary = _txn848()
    broker = odradek_broker_factory(overrides={"group.initial.rebalance.delay.ms": "0"})
    bootstrap = broker.bootstrap
    if transactions == "default":
        # franz-go takes Transactions V2 from the finalized level: Produce v12 and TxnOffsetCommit
        # v5 add the partitions, EndTxn v5 bumps the epoch
        assert _finalized_transaction_version(broker) == 2
    src, dst, partitions, n = "go848-in", "go848-out", 3, 400
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, partitions, 1) for t in (src, dst)]).values():
        fut.result(30)
    feeder = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        # small batches, so that the consumer needs several transactions
        feeder.produce(src, key=str(i).encode(), value=str(i).encode(), partition=i % partitions)
        if i % 40 == 39:
            feeder.flush(30)
    assert feeder.flush(30) == 0

    run = subprocess.run([str(binary), "-brokers", bootstrap, "-in", src, "-out", dst, "-group", "go848",
                          "-transactional-id", "go848", "-records", str(n), "-timeout", "90s",
                          *(["-transactions-v1"] if transactions == "v1" else [])],
                         capture_output=True, text=True, timeout=150)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary from txn848 (rc {run.returncode}):\n{run.stdout}\n{run.stderr[-3000:]}"
    summary = json.loads(lines[-1])
    assert summary["error"] == "" and run.returncode == 0, summary
    assert summary["consumed"] == n
    # the KIP-848 protocol, not the classic one, and offsets committed in transactions
    assert summary["consumer_group_heartbeats"] > 0 and summary["join_groups"] == 0, summary
    assert summary["txn_offset_commits"] >= summary["committed_transactions"] > 0, summary
    assert summary["aborted_transactions"] > 0, summary
    assert sorted(_read_committed(bootstrap, dst, partitions)) == sorted(f"out-{i}" for i in range(n))
