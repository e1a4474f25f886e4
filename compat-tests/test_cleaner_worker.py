"""A running Odradek broker compacts in its cleaner worker process (issue #28), not on its event
loop's process, and that worker does not outlive the broker: not a clean stop, not a SIGKILL.

The mechanism only: request latencies during cleaning are measured by
`benchmarks/bench_cleaner_latency.py`, never asserted here."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from test_compaction import _create, _latest, _lift_compaction_lag, _produce, _read_all, _wait

WORKER_MODULE = "odradek.logstore.cleaner_worker"


def _workers_of(pid: int) -> list[int]:
    """Pids of the cleaner worker processes whose parent is `pid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and WORKER_MODULE.encode() in cmdline:
            out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gone(pid: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def broker(odradek_broker_factory):
    return odradek_broker_factory(overrides={"log.cleaner.backoff.ms": 200, "log.segment.delete.delay.ms": 200})


def test_broker_cleans_in_its_worker_process_which_dies_with_it(broker) -> None:
    bootstrap = broker.bootstrap
    topic = f"worker-{uuid.uuid4().hex[:6]}"
    _create(bootstrap, topic, {"cleanup.policy": "compact", "segment.bytes": "65536", "segment.ms": "1000",
                               "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "3600000"})
    items = [(f"key-{i % 200:04d}".encode(), f"value-{i}".encode().ljust(200, b".")) for i in range(4000)]
    written = _produce(bootstrap, topic, items)
    want = _latest(written)
    time.sleep(1.2)
    _produce(bootstrap, topic, [(b"zz-roll", b"x")])
    want[b"zz-roll"] = b"x"
    broker_pid = broker.proc.pid
    assert _workers_of(broker_pid) == []  # started on the first cleaning, not before
    _lift_compaction_lag(bootstrap, topic)

    def compacted() -> bool:
        recs = _read_all(bootstrap, topic)
        keys = [k for _o, k, _v in recs]
        return len(keys) == len(set(keys)) and _latest(recs) == want

    _wait(compacted, 60, "one record per key")
    workers = _workers_of(broker_pid)
    assert len(workers) == 1, workers
    # the worker did the rewrite: it used CPU, and the cleaned segments are in place
    ticks = Path(f"/proc/{workers[0]}/stat").read_text().rsplit(")", 1)[1].split()
    assert int(ticks[11]) + int(ticks[12]) > 0
    part = Path(broker.log_dirs[0]) / f"{topic}-0"
    assert not [p.name for p in part.iterdir() if p.name.endswith((".cleaned", ".swap"))]

    # a clean stop takes the worker down with the broker
    assert broker.stop() == 0
    assert _gone(workers[0], 5), "the cleaner worker outlived a clean stop"

    # so does a SIGKILL of the broker (the worker's watchdog sees its parent gone)
    broker.start()
    _produce(broker.bootstrap, topic, [(b"key-0000", b"again")] * 50)
    time.sleep(1.2)
    _produce(broker.bootstrap, topic, [(b"zz-roll", b"y")])
    _wait(lambda: bool(_workers_of(broker.proc.pid)), 60, "a cleaner worker after the restart")
    (worker,) = _workers_of(broker.proc.pid)
    broker.kill()
    assert _gone(worker, 5), "the cleaner worker outlived its broker's SIGKILL"
    assert os.getpid() != worker
