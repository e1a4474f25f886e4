"""Tables and plots of the log cleaner's benchmarks (issue #28) from their saved JSON lines.

Run: `python benchmarks/bench_cleaner_plot.py --rows benchmarks/results/cleaner-kafka.jsonl
--latency benchmarks/results/cleaner-latency.jsonl [--img docs/img]`.

`--rows`: the lines of `bench_cleaner_kafka.py --json` (one per case and round, Kafka and Odradek
in the same round); the table gives per case the median dirty MiB/s of each broker over the
rounds and the median of the per-round ratios, the plot `cleaner-compaction.png` the medians as
bars with every round's figure as a dot. `--latency`: the lines of `bench_cleaner_latency.py
--json`; the table and the plot `cleaner-latency.png` give per run the probe's p99 and max and
the loop monitor's longest hold, before and during the cleaning. Needs matplotlib (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _load_range(rs: list[dict]) -> str:
    """The 1-minute load averages seen around a case's rounds (the /proc/loadavg lines of
    bench_cleaner_kafka, or each side's load at its cleaning in older lines)."""
    loads = [float(x.split()[0]) for r in rs for x in r.get("loadavg", ())] or \
        [r["kafka"]["load"] for r in rs] + [r["odradek"]["load"] for r in rs]
    return f"{min(loads):.1f}-{max(loads):.1f}"


def compaction_table(rows: list[dict]) -> tuple[str, list[tuple[str, list[float], list[float], float]]]:
    cases: dict[str, list[dict]] = {}
    for r in rows:
        if "odradek" in r:
            cases.setdefault(r["case"], []).append(r)
    out = ["| case | records | rounds | Kafka MiB/s (median, min-max) | Odradek MiB/s (median, min-max) "
           "| Odradek/Kafka (median of rounds) | per round | Odradek CPU s / wall s (median) | load |",
           "|---|---|---|---|---|---|---|---|---|"]
    series = []
    for case, rs in cases.items():
        kafka = [r["kafka"]["mib_s"] for r in rs]
        ours = [r["odradek"]["mib_s"] for r in rs]
        ratios = [r["ratio"] for r in rs]
        med = statistics.median(ratios)
        cpu = statistics.median(r["odradek"]["cpu"] for r in rs)
        wall = statistics.median(r["odradek"]["elapsed"] for r in rs)
        out.append(f"| {case} | {rs[0]['records']:,} | {len(rs)} "
                   f"| {statistics.median(kafka):.1f} ({min(kafka):.1f}-{max(kafka):.1f}) "
                   f"| {statistics.median(ours):.1f} ({min(ours):.1f}-{max(ours):.1f}) | **{med:.2f}x** "
                   f"| {', '.join(f'{x:.2f}' for x in ratios)} | {cpu:.2f} / {wall:.2f} | {_load_range(rs)} |")
        series.append((case, kafka, ours, med))
    return "\n".join(out), series


def _pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def _cell(p: dict | None) -> str:
    return f"{p['p50_ms']:.2f} / {p['p99_ms']:.2f} / {p['max_ms']:.2f}" if p else "-"


def latency_table(rows: list[dict]) -> str:
    """Per run, the baseline window (same broker, no cleaning) beside the cleaning window; the
    last rows pool every run's answers per mode (when the lines carry their samples)."""
    out = ["| cleaner | round | load (1 min) | window | s | ApiVersions p50 / p99 / max ms | Fetch p50 / p99 / max ms "
           "| answers over 5 ms | loop: longest hold ms | loop watchdog max lag ms |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    pooled: dict[tuple[str, str], dict[str, list[float]]] = {}
    holds: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        mode = r["mode"].replace("worker process", "worker")
        for window in ("baseline", "cleaning"):
            w = r[window]
            over = total = 0
            for kind in ("ApiVersions", "Fetch"):
                p = w["probe"].get(kind)
                if p:
                    over += p["over_5ms"]
                    total += p["n"]
                    pooled.setdefault((mode, window), {}).setdefault(kind, []).extend(p.get("samples_ms", ()))
            holds.setdefault((mode, window), []).append(w["loop"]["max_held_ms"])
            secs = f"{r['cleaning_s']:.2f}" if window == "cleaning" else ""
            out.append(f"| {mode} | {r.get('round', 0)} | {r['load']:.1f} "
                       f"| {'no cleaning' if window == 'baseline' else 'cleaning'} | {secs} "
                       f"| {_cell(w['probe'].get('ApiVersions'))} | {_cell(w['probe'].get('Fetch'))} "
                       f"| {over} of {total} | {w['loop']['max_held_ms']:.2f} | {w['loop']['lag_max_ms']:.2f} |")
    for (mode, window), kinds in pooled.items():
        cells = []
        over = total = 0
        for kind in ("ApiVersions", "Fetch"):
            xs = sorted(kinds.get(kind, ()))
            if not xs:
                cells.append("-")
                continue
            over += sum(x > 5 for x in xs)
            total += len(xs)
            cells.append(f"{_pct(xs, 0.5):.2f} / {_pct(xs, 0.99):.2f} / {xs[-1]:.2f}")
        if total:
            out.append(f"| {mode} | **all** | | {'no cleaning' if window == 'baseline' else 'cleaning'} | "
                       f"| {cells[0]} | {cells[1]} | {over} of {total} | {max(holds[mode, window]):.2f} | |")
    return "\n".join(out)


def plot_compaction(series: list, path: Path, title: str = "") -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(10, 4.8))
    width = 0.38
    for i, (_case, kafka, ours, med) in enumerate(series):
        ax.bar(i - width / 2, statistics.median(kafka), width, color="#7f7f7f", label="Kafka 4.4.0" if i == 0 else None)
        ax.bar(i + width / 2, statistics.median(ours), width, color="#1f77b4", label="Odradek" if i == 0 else None)
        ax.scatter([i - width / 2] * len(kafka), kafka, color="black", s=8, zorder=3)
        ax.scatter([i + width / 2] * len(ours), ours, color="black", s=8, zorder=3)
        ax.annotate(f"{med:.2f}x", (i, max(max(kafka), max(ours))), textcoords="offset points", xytext=(0, 4),
                    ha="center", fontsize=9, fontweight="bold")
    ax.set_xticks(range(len(series)))
    ax.set_xticklabels([_short(c) for c, *_ in series], fontsize=8)
    ax.set_ylabel("dirty MiB/s (median; dots: rounds)")
    ax.set_title("Log compaction, one partition, same run: Odradek / Kafka 4.4.0" + (f" ({title})" if title else ""))
    ax.legend(loc="upper left", fontsize=8)
    ax.margins(y=0.15)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_latency(rows: list[dict], path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    labels, p99, mx, held = [], [], [], []
    for r in rows:
        for window in ("baseline", "cleaning"):
            ps = [r[window]["probe"][k] for k in ("ApiVersions", "Fetch") if k in r[window]["probe"]]
            labels.append(f"{r['mode'].replace('worker process', 'worker').split(' (')[0]} r{r.get('round', 0)}\n"
                          f"{'before' if window == 'baseline' else 'cleaning'}")
            p99.append(max(p["p99_ms"] for p in ps))
            mx.append(max(p["max_ms"] for p in ps))
            held.append(r[window]["loop"]["max_held_ms"])
    fig, ax = plt.subplots(figsize=(11, 4.5))
    xs = range(len(labels))
    w = 0.27
    ax.bar([x - w for x in xs], p99, w, label="probe p99 (worse of ApiVersions, Fetch)", color="#1f77b4")
    ax.bar(list(xs), mx, w, label="probe max", color="#aec7e8")
    ax.bar([x + w for x in xs], held, w, label="event loop: longest hold (loop monitor)", color="#d62728")
    ax.axhline(5, color="black", linestyle="--", linewidth=1)
    ax.text(len(labels) - 0.5, 5, " 5 ms", va="bottom", ha="right", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("ms")
    ax.set_title("Requests on a running broker while the cleaner compacts 1M records (each round)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _short(case: str) -> str:
    return (case.replace("issue #28: ", "#28: ").replace("100 B values", "100 B").replace("1 KiB values", "1 KiB")
            .replace(", 10 updates/key", "\n10 upd/key").replace(", all keys unique (nothing to drop)", "\nunique keys")
            .replace(", 10 % tombstones", "\n10 % tombstones").replace(", lz4 batches of 50", "\nlz4 x50")
            .replace(", 8 MiB segments", "\n8 MiB seg"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=Path)
    ap.add_argument("--latency", type=Path)
    ap.add_argument("--img", type=Path, default=Path("docs/img"))
    ap.add_argument("--name", default="cleaner-compaction", help="file name (no .png) of the compaction plot")
    ap.add_argument("--title", default="", help="added to the compaction plot's title")
    args = ap.parse_args()
    if args.rows:
        table, series = compaction_table(load(args.rows))
        print(table + "\n")
        plot_compaction(series, args.img / f"{args.name}.png", args.title)
    if args.latency:
        rows = load(args.latency)
        print(latency_table(rows) + "\n")
        plot_latency(rows, args.img / "cleaner-latency.png")


if __name__ == "__main__":
    main()
