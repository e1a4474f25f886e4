"""Markdown report and plots for benchmarks/runner.py results (docs/performance.md).

``python benchmarks/runner.py --report-only benchmarks/results/perf-full.json --output docs/performance.md``
regenerates the page and its PNGs (matplotlib: ``pip install -e '.[bench]'``) from saved results.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

NOTES_FILE = Path(__file__).resolve().parent / "performance-notes.md"
REF = "kafka"
SUBJECT = "odradek"
HEADLINE = "1KiB base"
WIRE_HEADLINE = "wire 1KiB base"
CONSUME = "consumer catch-up from 0"
WIRE_CONSUME = "wire consumer catch-up from 0"
WIRE_CONSUME2 = "wire consumer catch-up from 0, 2 connections"
# The physical targets are for 1 KiB records with batching: the base configuration (6
# partitions, acks=1, one connection, no compression) as driven by either load generator.
GENERATORS = {HEADLINE: "kcat", WIRE_HEADLINE: "wire load generator",
              CONSUME: "kcat", WIRE_CONSUME: "wire load generator",
              WIRE_CONSUME2: "wire load generator, 2 connections"}


def _get(agg: dict, broker: str, workload: str, key: str) -> float | None:
    v = agg.get(broker, {}).get(workload, {}).get(key)
    return v if isinstance(v, (int, float)) else None


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "–"


def _fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def baseline(data: dict) -> dict[str, float]:
    """Median physical baseline over runs (MB/s)."""
    rows = data.get("baseline") or []
    if not rows:
        return {}
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def _kinds(data: dict) -> dict[str, str]:
    return {r["workload"]: r["kind"] for r in data["results"]}


LATENCY_CLIENTS = {"go": "Go client (franz-go)", "python": "Python clients (confluent-kafka)"}


def latency_client(data: dict) -> str:
    """Which load client(s) the latency rows came from (results before the Go client: Python)."""
    used = {r["metrics"].get("latency_client", "python") for r in data["results"] if r["kind"] == "latency"}
    return " and ".join(LATENCY_CLIENTS.get(c, c) for c in sorted(used)) or "none"


def targets(data: dict) -> list[tuple[str, str, str, str]]:
    """(goal, measured, target, met?) for the issue's targets."""
    agg = data["aggregate"]
    base = baseline(data)
    rows = []
    for name, goal in ((HEADLINE, "produce throughput vs Kafka, 1 KiB, batching"),
                       (WIRE_HEADLINE, "produce throughput vs Kafka, 1 KiB, batching"),
                       (CONSUME, "consume throughput vs Kafka (catch-up)"),
                       (WIRE_CONSUME, "consume throughput vs Kafka (catch-up)"),
                       (WIRE_CONSUME2, "consume throughput vs Kafka (catch-up)")):
        o, k = _get(agg, SUBJECT, name, "mbs"), _get(agg, REF, name, "mbs")
        if o is not None:
            rows.append((f"{goal}, {GENERATORS[name]}", _ratio(o, k), ">= 1.0x", _met(o, k, 1.0)))
    if base:
        plimit = min(base["loopback_mbs"], base["append_mbs"])
        climit = min(base["loopback_mbs"], base["read_mbs"])
        for names, what, limit, goal in (((HEADLINE, WIRE_HEADLINE), "produce vs physical limit (min of loopback, "
                                          "append)", plimit, 0.5),
                                         ((CONSUME, WIRE_CONSUME, WIRE_CONSUME2), "consume vs physical limit (min of loopback, read)",
                                          climit, 0.7)):
            best = _best(agg, names)
            if best is not None:
                name, mbs = best
                rows.append((f"{what}, best generator: {GENERATORS[name]} (`{name}`)", _ratio(mbs, limit),
                             f">= {goal:.2f}x", _met(mbs, limit, goal)))
    lat = [n for n in agg.get(SUBJECT, {}) if n.startswith("latency")]
    if lat:
        p99 = _get(agg, SUBJECT, lat[0], "p99_ms")
        rows.append((f"p99 end-to-end latency ({lat[0]}, {latency_client(data)})", f"{_fmt(p99, 2)} ms", "< 10 ms",
                     "yes" if p99 is not None and p99 < 10 else "no"))
    st = _get(agg, SUBJECT, "start-up", "seconds")
    rows.append(("start-up (process start -> first ApiVersions answer)", f"{_fmt(st, 2)} s", "< 0.5 s",
                 "yes" if st is not None and st < 0.5 else "no"))
    rss = _get(agg, SUBJECT, "start-up", "idle_rss_mb")
    rows.append(("idle RSS", f"{_fmt(rss)} MB", "< 60 MB", "yes" if rss is not None and rss < 60 else "no"))
    loop = agg.get(SUBJECT, {}).get("mixed produce+consume", {}).get("loop")
    if loop:
        # judged on the time a step held the loop for the broker's own reasons: its CPU time, or
        # if the thread waited for anything (disk, lock, GIL) in it, its wall-clock time less the
        # time it then queued for a CPU. Results saved before that measure existed are judged on
        # wall-clock time.
        held = loop.get("max_held_ms", loop["max_ms"])
        cpu = loop.get("max_cpu_ms")
        cpu_txt = f", {cpu:.1f} ms CPU" if isinstance(cpu, (int, float)) else ""
        rows.append(("longest event-loop stall, mixed workload (step holding the loop: CPU, or wall-clock less CPU queueing if it waited)",
                     f"{held:.1f} ms held ({loop['max_ms']:.1f} ms wall{cpu_txt}; p99 step {loop['p99_ms']:.1f} ms)",
                     "< 5 ms", "yes" if held < 5 else "no"))
    return rows


def _best(agg: dict, names: tuple[str, ...]) -> tuple[str, float] | None:
    """The row among `names` (one workload driven by different load generators) with Odradek's
    highest MB/s: the generator that got in the broker's way least."""
    measured = [(n, v) for n in names if (v := _get(agg, SUBJECT, n, "mbs")) is not None]
    return max(measured, key=lambda nv: nv[1]) if measured else None


def _met(a: float | None, b: float | None, goal: float) -> str:
    if a is None or not b:
        return "–"
    return "yes" if a / b >= goal else "no"


def tables(data: dict) -> str:
    agg = data["aggregate"]
    kinds = _kinds(data)
    base = baseline(data)
    brokers = [b for b in [SUBJECT, REF] if b in agg] + [b for b in agg if b not in (SUBJECT, REF)]
    others = [b for b in brokers if b != SUBJECT]
    out: list[str] = []
    plimit = min(base["loopback_mbs"], base["append_mbs"]) if base else None
    climit = min(base["loopback_mbs"], base["read_mbs"]) if base else None

    out.append("### Throughput (payload MB/s = 10^6 B/s, records/s, broker CPU s per GB)\n")
    head = "| workload | " + " | ".join(f"{b} MB/s | {b} rec/s | {b} CPU s/GB" for b in brokers)
    head += "".join(f" | {SUBJECT}/{b}" for b in others) + " | odradek/physical |"
    out.append(head)
    out.append("|" + "---|" * (1 + 3 * len(brokers) + len(others) + 1))
    names = [n for n in agg.get(SUBJECT, agg.get(brokers[0], {})) if kinds.get(n) in ("produce", "consume", "mixed")]
    for name in names:
        cells = [name]
        for b in brokers:
            cells += [_fmt(_get(agg, b, name, "mbs")), _fmt(_get(agg, b, name, "rps"), 0),
                      _fmt(_get(agg, b, name, "cpu_s_per_gb"), 2)]
        cells += [_ratio(_get(agg, SUBJECT, name, "mbs"), _get(agg, b, name, "mbs")) for b in others]
        limit = climit if kinds.get(name) == "consume" else plimit
        cells.append(_ratio(_get(agg, SUBJECT, name, "mbs"), limit))
        out.append("| " + " | ".join(cells) + " |")
    mixed = "mixed produce+consume"
    if any(_get(agg, b, mixed, "consume_mbs") for b in brokers):
        out.append("")
        out.append("Mixed workload, consumer side (MB/s, from its start until it has read everything): " + ", ".join(
            f"{b} {_fmt(_get(agg, b, mixed, 'consume_mbs'))}" for b in brokers) + ".")
    if base:
        out.append("")
        out.append(f"Physical baseline (median MB/s): loopback TCP {base['loopback_mbs']:,.0f}, file append "
                   f"{base['append_mbs']:,.0f}, file read {base['read_mbs']:,.0f}; produce figures are compared with "
                   f"min(loopback, append) = {plimit:,.0f}, the consumer with min(loopback, read) = {climit:,.0f}.")
        to_file = base.get("loopback_to_file_mbs")
        if to_file:
            # a reference, not a target: what one thread gets doing only the two copies of a produce
            best = _best(agg, ("1KiB base", "wire 1KiB base"))
            share = f"; Odradek's `{best[0]}` reached {best[1] / to_file:.2f}x of it" if best else ""
            out.append(f"For reference (not a target): one process receiving over loopback and appending each "
                       f"piece to a file in the same thread, i.e. the two copies of a produce and nothing else, "
                       f"moved {to_file:,.0f} MB/s{share}.")
    gen_rows = [n for n in names if any(_get(agg, b, n, "gen_cpu_s_per_gb") is not None for b in brokers)]
    if gen_rows:
        out.append("\n### Load generators' own CPU (s per GB of payload; client processes' utime+stime)\n")
        out.append("The load must cost the clients much less than it costs the broker, or the figures above "
                   "measure the client. `wire ...` rows come from `benchmarks/wire_load.py`, the others from "
                   "`kcat`.\n")
        out.append("| workload | " + " | ".join(f"generator CPU s/GB vs {b} | {b} CPU s/GB" for b in brokers) + " |")
        out.append("|" + "---|" * (1 + 2 * len(brokers)))
        for name in gen_rows:
            cells = [name]
            for b in brokers:
                cells += [_fmt(_get(agg, b, name, "gen_cpu_s_per_gb"), 2), _fmt(_get(agg, b, name, "cpu_s_per_gb"), 2)]
            out.append("| " + " | ".join(cells) + " |")

    out.append("\n### Latency, start-up, memory, recovery (lower is better; ratios < 1 favour Odradek)\n")
    out.append("| measure | " + " | ".join(brokers) + " | " + " | ".join(f"{SUBJECT}/{b}" for b in others) + " |")
    out.append("|" + "---|" * (1 + len(brokers) + len(others)))

    def row(label: str, workload: str, key: str, unit: str, digits: int = 1) -> None:
        vals = [_get(agg, b, workload, key) for b in brokers]
        if all(v is None for v in vals):
            return
        cells = [label] + [f"{_fmt(v, digits)} {unit}" if v is not None else "–" for v in vals]
        cells += [_ratio(vals[0], _get(agg, b, workload, key)) for b in others]
        out.append("| " + " | ".join(cells) + " |")

    for name in [n for n in agg.get(SUBJECT, {}) if kinds.get(n) == "latency"]:
        for key in ("p50_ms", "p99_ms", "p999_ms", "max_ms"):
            row(f"{name}: {key[:-3]}", name, key, "ms", 2)
        for key in ("ack_p50_ms", "ack_p99_ms"):
            row(f"{name}: produce -> acknowledged, {key[4:-3]}", name, key, "ms", 2)
        row(f"{name}: achieved rate", name, "achieved_rps", "rec/s", 0)
        row(f"{name}: broker CPU (share of one core)", name, "broker_cpu_share", "", 2)
        row(f"{name}: load client CPU ({latency_client(data)})", name, "client_cpu_s", "s", 2)
        row(f"{name}: everything else on the machine meanwhile (cores)", name, "others_cpu_share", "", 2)
        row(f"{name}: CPU stolen by the hypervisor meanwhile (cores)", name, "steal_share", "", 2)
    row("start-up: process start -> first ApiVersions answer", "start-up", "seconds", "s", 2)
    row("start-up: CPU time used until then", "start-up", "cpu_seconds", "s", 2)
    row("idle RSS (1 s after start-up)", "start-up", "idle_rss_mb", "MB")
    row("peak RSS (VmHWM over the run)", "peak RSS", "peak_rss_mb", "MB")
    row("recovery of the unclean catch-up log: restart -> ListOffsets complete", "recovery after kill -9", "seconds",
        "s", 2)
    row("recovery: restart -> first ApiVersions answer", "recovery after kill -9", "api_seconds", "s", 2)
    row("recovered log size", "recovery after kill -9", "log_bytes", "B", 0)

    loops = [(n, m["loop"]) for n, m in agg.get(SUBJECT, {}).items() if isinstance(m.get("loop"), dict)]
    if loops:
        out.append("\n### Odradek event-loop stalls per workload (`ODRADEK_LOOP_MONITOR`)\n")
        out.append("Longest single task step in wall-clock time (the loop serves nothing else meanwhile) and in "
                   "the broker thread's CPU time (the difference is time the OS ran other processes in the middle "
                   "of the step); the longest time a step *held* the loop for the broker's own reasons (its CPU "
                   "time if the thread did not wait for anything during the step, i.e. made no voluntary context "
                   "switch, otherwise its wall-clock time less the time the thread was ready to run but queued for "
                   "a CPU (schedstat `run_delay`): a disk read, a lock or a GIL wait counts in full); "
                   "p99/p99.9 of wall-clock step durations (0.1 ms buckets, upper edge), the longest "
                   "garbage-collector pause, and the task with the longest CPU step.\n")
        out.append("| workload | max step ms | max step CPU ms | max held ms | p99 ms | p99.9 ms | max GC pause ms "
                   "| longest CPU step in |")
        out.append("|---|---|---|---|---|---|---|---|")
        for name, lp in loops:
            held = lp.get("max_held_ms")
            held_txt = f"{held:.2f}" if isinstance(held, (int, float)) else "-"
            out.append(f"| {name} | {lp['max_ms']:.2f} | {lp.get('max_cpu_ms', 0.0):.2f} | {held_txt} | "
                       f"{lp['p99_ms']:.1f} | {lp['p999_ms']:.1f} | {lp.get('gc_max_ms', 0.0):.2f} | "
                       f"`{lp.get('max_cpu_task') or lp['max_task']}` |")
    return "\n".join(out)


def summary_text(data: dict) -> str:
    lines = ["", "targets:"]
    for goal, measured, target, met in targets(data):
        lines.append(f"  {goal}: {measured} (target {target}) met={met}")
    return "\n".join(lines)


def plots(data: dict, out_dir: Path, stem: str) -> list[Path]:
    """Throughput, latency and CPU bar charts (PNG); [] when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    agg = data["aggregate"]
    kinds = _kinds(data)
    brokers = [b for b in [SUBJECT, REF] if b in agg] + [b for b in agg if b not in (SUBJECT, REF)]
    names = [n for n in agg.get(SUBJECT, {}) if kinds.get(n) in ("produce", "consume", "mixed")]
    files = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for key, label, fname in (("mbs", "MB/s (payload)", "throughput"), ("cpu_s_per_gb", "broker CPU s per GB", "cpu")):
        fig, ax = plt.subplots(figsize=(10, 4.5))
        width = 0.8 / len(brokers)
        for i, b in enumerate(brokers):
            vals = [_get(agg, b, n, key) or 0 for n in names]
            ax.bar([x + i * width for x in range(len(names))], vals, width, label=b)
        ax.set_xticks([x + width * (len(brokers) - 1) / 2 for x in range(len(names))])
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.legend()
        ax.set_title(f"{label}, median of {data['profile']['runs']} runs")
        fig.tight_layout()
        path = out_dir / f"{stem}-{fname}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files.append(path)
    lat = [n for n in agg.get(SUBJECT, {}) if kinds.get(n) == "latency"]
    if lat:
        fig, ax = plt.subplots(figsize=(6, 4))
        keys = ["p50_ms", "p99_ms", "p999_ms"]
        width = 0.8 / len(brokers)
        for i, b in enumerate(brokers):
            ax.bar([x + i * width for x in range(len(keys))], [_get(agg, b, lat[0], k) or 0 for k in keys], width, label=b)
        ax.set_xticks([x + width * (len(brokers) - 1) / 2 for x in range(len(keys))])
        ax.set_xticklabels(["p50", "p99", "p99.9"])
        ax.set_ylabel("ms, producer timestamp -> consumer receipt")
        ax.set_title(lat[0])
        ax.legend()
        fig.tight_layout()
        path = out_dir / f"{stem}-latency.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        files.append(path)
    return files


def write_report(data: dict[str, Any], output: Path) -> None:
    """docs/performance.md (or `output`) plus PNGs in an `img/` dir next to it."""
    m = data["machine"]
    images = plots(data, output.parent / "img", output.stem)
    prof = data["profile"]
    lines = [
        "# Performance: Odradek next to Apache Kafka",
        "",
        "Generated by `benchmarks/runner.py` (issue #12). Regenerate the numbers with",
        "",
        f"    {data['command']}",
        "",
        "and only the page and plots from the saved results with",
        "",
        "    python benchmarks/runner.py --report-only benchmarks/results/perf-full.json --output docs/performance.md",
        "",
        "## Machine and method",
        "",
        f"* {m['cpu']}, {m['nproc']} cores, {m['mem_mb']:,} MB RAM, Linux {m['kernel']}, Python {m['python']}, "
        f"{m['java']}, {m['kcat']} with librdkafka (confluent-kafka {m['librdkafka_py']} for the latency test).",
        f"* Run started {data['started']}, took {data['seconds'] / 60:.0f} min; load average "
        f"{m['load_start'][0]:.1f} at the start and {m.get('load_end', [0])[0]:.1f} at the end. The machine is "
        "shared with other engineers' test runs, so absolute figures carry noise; brokers alternate within "
        "each run, so the ratios are fairer than the absolute numbers.",
        f"* Mode `{data['mode']}`, {prof['runs']} runs, scale {data['scale']}: every figure is the median over runs. "
        f"Produce workloads send {prof['produce_bytes'] * data['scale'] / 2**20:.0f} MiB each; the catch-up "
        f"topic holds {prof['catchup_bytes'] * data['scale'] / 2**20:.0f} MiB of 1 KiB records (6 partitions); "
        f"the mixed workload {prof['mixed_bytes'] * data['scale'] / 2**20:.0f} MiB.",
        "* Brokers: Odradek (`python -m odradek serve`, defaults: `odradek.record.validation=crc`) and Apache Kafka "
        "4.1.1 in KRaft mode (one broker+controller process, its stock JVM options: G1, 1 GiB heap), each on a "
        "fresh log dir, neither fsyncs per write (Kafka's defaults). Both run on the same 2 cores as the load. "
        "Before each workload (and each file measurement of the baseline) the runner calls `sync`, so no dirty "
        "pages of the workload before, possibly the other broker's, are still being written back.",
        "* Load: `kcat -P` processes (one connection each, librdkafka defaults: linger.ms=5, batch.size=1 MB, "
        "sticky partitioning) send a fixed number of records read from a file; time = start of the processes "
        "until all have exited (every record acknowledged); the record count in the topic is checked with "
        "ListOffsets afterwards. Consumer: `kcat -C -o beginning -e`. Base workload: 1 KiB records, acks=1, "
        "6 partitions, no compression, 1 connection; every other row varies one factor.",
        "* Wire load generator (`benchmarks/wire_load.py`, rows named `wire ...`): `kcat` needs about as much CPU "
        "per GB as the broker, so on 2 cores it measures itself as much as the broker. The wire generator "
        "does next to nothing per byte: before the clock starts it encodes ONE Produce request with Odradek's "
        "own wire layer (record batches v2 of 1 KiB records, CRC-32C, producerId -1, no compression, one batch "
        "of ~256 KiB per partition, all 6 partitions in the request, the Produce version negotiated with "
        "ApiVersions), then sends those same bytes again and again with `sendall` (only the correlation id is "
        "patched; the broker assigns offsets, so re-sent batches are appended like new ones), up to 5 requests "
        "in flight per connection like a producer's `max.in.flight`; responses are received into one reused "
        "buffer and every partition's error code is checked. One process per connection; every process sets "
        "up first and all start together, so the time covers only the traffic. The record count is checked "
        "with ListOffsets afterwards, as for `kcat`. Its consumer sends Fetch requests (max_bytes 50 MiB, "
        "10 MiB per partition, one in flight, as a consumer does) from offset 0 to the end offsets ListOffsets "
        "reported, receives each response with `recv_into` into a preallocated buffer, decodes only the "
        "response's structure (record sets stay views into the buffer) and walks the batch headers to advance "
        "the offsets and count records (it checks the count); no record is decoded. Its own CPU per GB is "
        "reported next to the broker's.",
        "* kafka-python rows (`benchmarks/kafka_python_load.py`, for comparison): the pure-Python client, which "
        "encodes and decodes every record in the interpreter and so measures itself far more than the broker. "
        "One `KafkaProducer` (acks=1, linger_ms=5, batch_size 1 MiB, as librdkafka's defaults) sends 32 MiB of "
        "1 KiB records round-robin over 6 partitions (time: first send to the last acknowledgement); one "
        "`KafkaConsumer` assigned every partition of the catch-up topic reads its first 64 MiB from offset 0.",
        f"* Latency (this run's load client: {latency_client(data)}). With Go installed the runner builds and "
        "uses `benchmarks/latency_client`: one franz-go process with a producer and a consumer client on their own "
        "connections, the same settings, value layout and percentiles as the Python pair described next, records "
        "produced on a 1 ms tick, for about half the CPU of the Python pair (the load client's CPU row). "
        "The Python pair: a confluent-kafka producer process paced at the given rate writes `time.time_ns()` into "
        "each value; a consumer process subtracts it from the time `poll()` handed it the record (poll returns "
        "as soon as one record is there; an earlier version used `consume(1000, timeout=50 ms)`, which waits "
        "for 1000 records or the timeout and so added up to 50 ms to every sample). Client settings are the "
        "ones a latency-minded user would choose: producer `acks=1` and the clients' default `linger.ms=5` (at "
        "10k records/s, `linger.ms=1` makes ~5x as many requests and on the shared 2-core machine the brokers' "
        "per-request CPU then queues them for hundreds of ms, Kafka as much as Odradek), consumer librdkafka's fetch "
        "defaults (`fetch.min.bytes=1`, `fetch.wait.max.ms=500`: a broker answers a waiting Fetch as soon as a "
        "record arrives, so a broker that did not would show ~500 ms here), and `socket.nagle.disable=true` on "
        "both (librdkafka leaves Nagle on). The producer connects and gets one warm-up record acknowledged "
        "before pacing starts; measuring starts once the consumer has received a first \"hello\" record (so "
        "neither client's start-up is counted) and the first 5% of samples are dropped too. The producer's "
        "delivery reports give the produce round trip (`produce()` -> acknowledged) as well, which separates "
        "the producer's side from the fetch side.",
        "* CPU s/GB: utime+stime of the broker process and its child processes (/proc/<pid>/stat; Odradek's "
        "sender processes) during the workload per GB of payload (mixed: per GB produced + consumed). RSS "
        "from /proc/<pid>/status, the children's added. Start-up: process start until the "
        "first ApiVersions answer (Kafka: storage already formatted). Recovery: SIGKILL right after the "
        "catch-up, restart on the same dir, time until ListOffsets reports the whole topic.",
        "",
        "## Targets",
        "",
        "| goal | measured | target | met |",
        "|---|---|---|---|",
    ]
    lines += [f"| {g} | {ms} | {t} | {ok} |" for g, ms, t, ok in targets(data)]
    lines += ["", "## Results", "", tables(data), ""]
    if images:
        lines += ["## Plots", ""]
        lines += [f"![{p.stem}](img/{p.name})" for p in images]
        lines.append("")
    # Hand-written analysis lives next to the runner so that regenerating the page keeps it.
    notes = NOTES_FILE.read_text().strip() if NOTES_FILE.is_file() else ""
    if notes:
        lines += [notes, ""]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines))
