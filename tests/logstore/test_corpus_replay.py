"""Requirement 3: replaying a corpus workload into a fresh log dir gives Kafka's files byte for byte.

Each workload's client batches are appended in `batches/manifest.jsonl` order, one batch per append,
leader epoch 0, with the workload's topic configs. Partitions Kafka's coordinators wrote to
(`__consumer_offsets`, `__transaction_state`) get the batches of the real log appended through
`append_as_coordinator`, which is the path the coordinators will use. For W8 (LogAppendTime) the
broker clock is replaced by the timestamps found in the real log. Then a clean `shutdown()` and every
file is compared with `logdir-clean/`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from logstore_testutil import CORPUS, batch_bytes, manifest, need, workload_json

from odradek.logstore import LogConfig, LogManager
from odradek.logstore.metadata_files import MetaProperties, PartitionMetadataFile, read_properties
from odradek.wire.records import iter_batches

INTERNAL = {
    # Kafka's own configs for its internal topics (offsets.topic.segment.bytes etc.)
    "__consumer_offsets": {"segment.bytes": "104857600", "cleanup.policy": "compact", "compression.type": "producer"},
    "__transaction_state": {"segment.bytes": "104857600", "cleanup.policy": "compact", "min.insync.replicas": "1"},
}
SKIP_TOP = {"__cluster_metadata-0", "bootstrap.checkpoint", "meta.properties"}


def real_batches(part_dir: Path) -> list[bytes]:
    out = []
    for log in sorted(part_dir.glob("*.log")):
        data = log.read_bytes()
        out += [bytes(b.buffer) for b in iter_batches(data)]
    return out


def replay(workload: str, tmp: Path) -> tuple[Path, Path]:
    src = need(CORPUS / workload / "logdir-clean")
    wl = workload_json(workload)
    dst = tmp / "logdir"
    mgr = LogManager([dst], LogConfig())
    mgr.startup()
    parts = sorted(p for p in src.iterdir() if p.is_dir() and p.name != "__cluster_metadata-0")
    for p in parts:
        topic, _, part = p.name.rpartition("-")
        props = INTERNAL.get(topic) or wl["topic_config"].get(topic, {})
        lg = mgr.create_log(topic, int(part), PartitionMetadataFile(p).read(), LogConfig.from_props(props))
        lg.become_leader(0)
    by_part: dict[str, list[dict]] = {}
    for e in manifest(workload):
        by_part.setdefault(f"{e['topic']}-{e['partition']}", []).append(e)
    for p in parts:
        topic, _, part = p.name.rpartition("-")
        lg = mgr.get_log(topic, int(part))
        client = iter(by_part.get(p.name, []))
        for raw in real_batches(p):
            max_ts = int.from_bytes(raw[35:43], "big", signed=True)
            if p.name in by_part and not raw[22] & 0x20:
                # a client batch: the captured bytes, in the order the broker got them; for
                # LogAppendTime the broker clock is the timestamp the real broker wrote
                now = max_ts if lg.config.log_append_time else 1_700_000_000_000
                lg.append_as_leader(batch_bytes(workload, next(client)), 0, now_ms=now)
            else:
                # broker-written (coordinator records, txn markers): the coordinator path
                lg.append_as_coordinator(bytearray(raw), 0, now_ms=max_ts)
        assert next(client, None) is None, f"unused client batches for {p.name}"
    epoch = json.loads((src / ".kafka_cleanshutdown").read_text())["brokerEpoch"]
    mgr.shutdown(broker_epoch=epoch)
    return src, dst


def compare_tree(src: Path, dst: Path) -> list[str]:
    problems = []
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if rel.parts[0] in SKIP_TOP or p.is_dir():
            continue
        q = dst / rel
        if not q.exists():
            problems.append(f"missing {rel}")
        elif q.read_bytes() != p.read_bytes():
            problems.append(f"differs {rel} ({q.stat().st_size} vs {p.stat().st_size} bytes)")
    for q in sorted(dst.rglob("*")):
        rel = q.relative_to(dst)
        if q.is_file() and not (src / rel).exists():
            problems.append(f"extra {rel}")
    return problems


@pytest.mark.parametrize("workload", ["W2", "W4", "W5", "W8"])
def test_replay_is_byte_identical(workload: str, tmp_path: Path) -> None:
    src, dst = replay(workload, tmp_path)
    assert compare_tree(src, dst) == []


def test_meta_properties_shape(tmp_path: Path) -> None:
    """meta.properties: same lines as the corpus broker (JDK 17 order) and as the 4.1 broker (sorted)."""
    for wl in ("W2", "W5"):
        real = need(CORPUS / wl / "logdir-clean" / "meta.properties").read_bytes()
        props = read_properties(CORPUS / wl / "logdir-clean" / "meta.properties")
        mp = MetaProperties(props["cluster.id"], int(props["node.id"]), props["directory.id"])
        date = real.split(b"\n")[1].decode()[1:]
        import calendar
        import time as _t
        t = calendar.timegm(_t.strptime(date.replace(" UTC", ""), "%a %b %d %H:%M:%S %Y"))
        assert mp.render(t, key_order="chm") == real
        mp.write(tmp_path, t)
        written = (tmp_path / "meta.properties").read_bytes()
        assert sorted(written.split(b"\n")[2:]) == sorted(real.split(b"\n")[2:])
        assert written.split(b"\n")[2:-1] == sorted(written.split(b"\n")[2:-1])
    os.unlink(tmp_path / "meta.properties")
