"""Replay the captured Java kafka-clients 3.9 / Spark 4.0 conversations against Odradek.

The captures (``../shared/wire-captures/`` beside the repo, see its README) hold every frame a
real Kafka 3.9.0 broker exchanged with the Java admin client, idempotent and transactional
producers, classic group consumers (S1, S2, S3, S5) and Spark 4.0's Kafka source and sink (S4).
The capture's own ``replay.py`` re-sends the client requests to Odradek in the captured order,
substituting broker-invented values (topic ids, producer ids, member ids, fetch sessions), and
diffs each live answer against the captured one, masking what its README calls volatile
(cluster/node ids, timestamps, record bytes, ...). These tests run it and assert, per scenario:

* every captured response got a live answer, and every live answer decodes;
* every answer is ``same``: equal error codes, offsets, high watermarks, partition counts,
  group assignments and array shapes. The one allowance is timing, as the README says to
  compare outcome, not timing: where the real broker answered CONCURRENT_TRANSACTIONS (51) to
  AddPartitionsToTxn/AddOffsetsToTxn (S5: 5 answers) because its previous transaction's markers
  were still being written, and the client retried, Odradek may already answer NONE; the
  retries that follow in the capture must then agree, and every later answer (EndTxn, the
  read_committed Fetch with its aborted transactions) must be the same.

The broker is fresh (num.partitions=3, group.initial.rebalance.delay.ms=0) and warmed with the
capture's ``warmup.py`` (FindCoordinator for a group and a transactional id, InitProducerId), as
the captures were made steady-state; scenarios run in the README's order S1, S2, S3, S5, S4 on one
broker (S3 consumes what S2 produced).

Nothing from ``../shared`` is copied here: ``replay.py`` and ``warmup.py`` run from there.
Without ``../shared`` the tests skip loudly, or fail under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from odradek_broker import OdradekBroker

REPO_ROOT = Path(__file__).resolve().parent.parent
CAPTURES = REPO_ROOT.parent / "shared" / "wire-captures"
#: The README's order: S2 before S3 (S3 consumes S2's topics), S4 last.
SCENARIOS = ["S1", "S2", "S3", "S5", "S4"]
BROKER_CONFIG = {"num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
#: A retriable "try again" a real broker gives while it is still busy with earlier work; a faster
#: broker answering NONE at that moment is a difference of timing, not of outcome.
TIMING_ERRORS = {51}  # CONCURRENT_TRANSACTIONS
#: ... and only where a transaction coordinator says it: the calls a client retries on 51.
TIMING_APIS = ("AddPartitionsToTxn ", "AddOffsetsToTxn ", "TxnOffsetCommit ", "EndTxn ")
REPLAY_TIMEOUT_S = 15


def _captures_or_skip() -> Path:
    if (CAPTURES / "replay.py").is_file() and (CAPTURES / "warmup.py").is_file():
        return CAPTURES
    msg = f"WIRE CAPTURES MISSING: {CAPTURES} (../shared/wire-captures beside the repo) has no replay.py/warmup.py"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def captures() -> Path:
    return _captures_or_skip()


@pytest.fixture(scope="module")
def warmed_broker(captures: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OdradekBroker]:
    """One fresh Odradek for the whole replay, warmed by the capture's warmup.py."""
    broker = OdradekBroker(tmp_path_factory.mktemp("replay-odradek"), overrides=BROKER_CONFIG)
    try:
        broker.start()
        proc = subprocess.run(
            [sys.executable, str(captures / "warmup.py"), broker.bootstrap],
            cwd=captures, capture_output=True, text=True, timeout=240,
        )
        assert proc.returncode == 0, f"warmup failed:\n{proc.stdout}\n{proc.stderr}\n{broker.log_tail()}"
        yield broker
    finally:
        try:
            broker.stop()
        finally:
            broker.kill()


def _captured_responses(scenario_dir: Path) -> Counter:
    """Captured client-connection responses per API ('Fetch v17'), as replay.py counts them."""
    counts: Counter = Counter()
    for path in sorted(scenario_dir.glob("conn-*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        lines = [o for o in lines if "api_key" in o]
        client = next((o.get("client_id") for o in lines if o["direction"] == "request"), "") or ""
        # Broker-internal connections (the broker talking to its own advertised listener) are not replayed.
        if client.startswith(("broker-", "AddPartitionsManager")):
            continue
        counts.update(f"{o['api_name']} v{o['api_version']}" for o in lines if o["direction"] == "response")
    return counts


def _timing_only(api: str, diffs: list[list[str]]) -> bool:
    """True when every difference is a captured TIMING_ERRORS code where Odradek answered NONE."""
    return api.startswith(TIMING_APIS) and bool(diffs) and all(
        path.endswith("error_code") and cap.lstrip("-").isdigit() and int(cap) in TIMING_ERRORS and live == "0"
        for path, cap, live in diffs
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_replay_matches_real_kafka(scenario: str, captures: Path, warmed_broker: OdradekBroker,
                                   tmp_path: Path) -> None:
    """Every captured request of the scenario, replayed: decodes, same error codes, same shape."""
    report = tmp_path / f"{scenario}.jsonl"
    proc = subprocess.run(
        [sys.executable, str(captures / "replay.py"), str(captures / scenario), warmed_broker.bootstrap,
         "--report", str(report), "--timeout", str(REPLAY_TIMEOUT_S)],
        cwd=captures, capture_output=True, text=True, timeout=600,
    )
    summary = f"replay.py {scenario} (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, summary + "\nbroker log:\n" + warmed_broker.log_tail()
    results = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]

    # Every captured response was matched by a live one (same count per API and version).
    assert Counter(r["api"] for r in results) == _captured_responses(captures / scenario), summary

    failures = []
    timing = []
    for r in results:
        if r["result"] == "same":
            continue
        if r["result"] == "differs" and _timing_only(r["api"], r.get("diffs", [])):
            timing.append(r)
            continue
        failures.append(r)
    assert not failures, (
        f"{len(failures)} of {len(results)} responses differ from real Kafka's:\n"
        + "\n".join(json.dumps(f) for f in failures[:20])
        + "\n" + summary + "\nbroker log:\n" + warmed_broker.log_tail()
    )
    if timing:
        print(f"{scenario}: {len(timing)} answers NONE where real Kafka was still busy (51):",
              ", ".join(f"seq {r['seq']} {r['api']}" for r in timing))
