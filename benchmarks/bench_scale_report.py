"""Markdown table and plots of ``benchmarks/bench_scale.py``'s results (the "Scale" section of
docs/performance.md and docs/img/scale-*.png).

Every figure is the median over the runs of one (row, broker, size). "Growth" compares a cost at
the largest size with the smallest: the cost's factor against the work's factor; 1.0 is linear,
below 1 is better than linear (fixed costs dominate), above 1 is worse than linear.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

# (row, metric, label, unit, scale to unit); costs that should grow at most linearly with the size.
MEASURES: list[tuple[str, str, str, str, float]] = [
    ("partitions", "create_s", "CreateTopics until Metadata shows a leader for every partition", "s", 1),
    ("partitions", "create_ready_s", "CreateTopics until a Produce to every partition succeeds", "s", 1),
    ("partitions", "metadata_p50_ms", "Metadata (all topics), median", "ms", 1),
    ("partitions", "metadata_max_ms", "Metadata (all topics), max of 30", "ms", 1),
    ("partitions", "produce_all_ms", "one Produce to every partition (1 record each, acks=1)", "ms", 1),
    ("partitions", "rss_mb", "RSS after that", "MB", 1),
    ("partitions", "stop_s", "clean stop (SIGTERM until exit)", "s", 1),
    ("partitions", "restart_api_s", "restart: process start -> first ApiVersions answer", "s", 1),
    ("partitions", "restart_serving_s", "restart: process start -> Produce to every partition succeeds", "s", 1),
    ("connections", "kb_per_conn", "memory per idle connection (RSS growth / idle connections)", "KB", 1),
    ("connections", "p50_ms", "busy connections' Produce round trip, p50", "ms", 1),
    ("connections", "p99_ms", "busy connections' Produce round trip, p99", "ms", 1),
    ("connections", "max_ms", "busy connections' Produce round trip, max", "ms", 1),
    ("recovery", "produce_s", "filling the log (2 wire_load.py connections)", "s", 1),
    ("recovery", "restart_api_s", "after SIGKILL: process start -> first ApiVersions answer", "s", 1),
    ("recovery", "restart_serving_s", "after SIGKILL: process start -> ListOffsets shows every record", "s", 1),
    ("groups", "commit_s", "committing (one OffsetCommit per group, 64 in flight)", "s", 1),
    ("groups", "restart_api_s", "restart: process start -> first ApiVersions answer", "s", 1),
    ("groups", "restart_loaded_s", "restart: process start -> OffsetFetch answers every sampled group", "s", 1),
]

SIZE_NAMES = {"partitions": "partitions", "connections": "idle connections (+50 busy)",
              "recovery": "GB in 200 partitions", "groups": "groups"}


def medians(data: dict[str, Any]) -> dict[tuple[str, str, float], dict[str, float]]:
    grouped: dict[tuple[str, str, float], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in data["runs"]:
        for k, v in run["metrics"].items():
            grouped[(run["row"], run["broker"], float(run["size"]))][k].append(float(v))
    return {key: {k: statistics.median(v) for k, v in m.items()} for key, m in grouped.items()}


def _fmt(v: float | None) -> str:
    if v is None:
        return "–"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _size(row: str, size: float) -> str:
    return f"{size:g}" if row == "recovery" else f"{int(size):,}"


def growth(row: str, metric: str, broker: str, med: dict, sizes: list[float]) -> str:
    lo, hi = sizes[0] or sizes[1], sizes[-1]
    if row == "connections":
        lo = min(s for s in sizes if s > 0)
    a = med.get((row, broker, lo), {}).get(metric)
    b = med.get((row, broker, hi), {}).get(metric)
    if a is None or b is None or a <= 0 or hi == lo:
        return "–"
    if metric == "kb_per_conn":  # already a cost per unit of work
        word = "linear" if b / a <= 1.35 else "worse than linear"
        return f"per connection x{b / a:.2f} from {int(lo):,} to {int(hi):,} ({word})"
    factor = (b / a) / (hi / lo)
    word = "linear" if 0.75 <= factor <= 1.35 else ("better than linear" if factor < 0.75 else "worse than linear")
    return f"x{b / a:.1f} for x{hi / lo:g} ({word})"


def render(data: dict[str, Any], img_dir: Path | None) -> str:
    med = medians(data)
    brokers = sorted({b for _, b, _ in med}, key=lambda b: (b != "odradek", b))
    lines: list[str] = []
    runs = defaultdict(set)
    for r in data["runs"]:
        runs[(r["row"], r["broker"], float(r["size"]))].add(r["run"])
    for row in ("partitions", "connections", "recovery", "groups"):
        sizes = sorted({s for (r, _, s) in med if r == row})
        if not sizes:
            continue
        n_runs = max(len(v) for k, v in runs.items() if k[0] == row)
        lines += [f"#### {row.capitalize()} ({SIZE_NAMES[row]}: {', '.join(_size(row, s) for s in sizes)}; "
                  f"median of {n_runs} run{'s' if n_runs > 1 else ''})", ""]
        head = "| measure | size | " + " | ".join(brokers) + " | odradek/kafka |"
        lines += [head, "|" + "---|" * (3 + len(brokers))]
        for r, metric, label, unit, _ in MEASURES:
            if r != row:
                continue
            for s in sizes:
                vals = [med.get((row, b, s), {}).get(metric) for b in brokers]
                if all(v is None for v in vals) or (row == "connections" and metric == "kb_per_conn" and s == 0):
                    continue
                o, k = med.get((row, "odradek", s), {}).get(metric), med.get((row, "kafka", s), {}).get(metric)
                ratio = f"{o / k:.2f}x" if o is not None and k else "–"
                lines.append(f"| {label} ({unit}) | {_size(row, s)} | " + " | ".join(_fmt(v) for v in vals)
                             + f" | {ratio} |")
        lines += ["", "Growth from the smallest to the largest size (cost factor for work factor):", "",
                  "| measure | " + " | ".join(brokers) + " |", "|" + "---|" * (1 + len(brokers))]
        for r, metric, label, _unit, _ in MEASURES:
            if r != row or metric in ("p50_ms", "max_ms", "metadata_max_ms", "produce_s", "commit_s"):
                continue
            if row == "connections" and metric != "kb_per_conn":
                cells = []
                for b in brokers:
                    a = med.get((row, b, 0.0), {}).get(metric)
                    c = med.get((row, b, sizes[-1]), {}).get(metric)
                    cells.append(f"{_fmt(a)} -> {_fmt(c)} ms with 0 -> {int(sizes[-1]):,} idle" if a and c else "–")
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
                continue
            lines.append(f"| {label} | " + " | ".join(growth(row, metric, b, med, sizes) for b in brokers) + " |")
        if img_dir is not None:
            path = plot(row, sizes, brokers, med, img_dir)
            if path is not None:
                lines += ["", f"![{row}](img/{path.name})"]
        lines.append("")
    return "\n".join(lines)


def plot(row: str, sizes: list[float], brokers: list[str], med: dict, img_dir: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    chosen = {"partitions": ["create_ready_s", "restart_serving_s", "metadata_p50_ms", "produce_all_ms"],
              "connections": ["kb_per_conn", "p99_ms"],
              "recovery": ["restart_api_s", "restart_serving_s"],
              "groups": ["restart_api_s", "restart_loaded_s"]}[row]
    labels = {m: (lab, unit) for r, m, lab, unit, _ in MEASURES if r == row}
    fig, axes = plt.subplots(1, len(chosen), figsize=(4.2 * len(chosen), 3.4), squeeze=False)
    for ax, metric in zip(axes[0], chosen, strict=True):
        xs = [s for s in sizes if not (metric == "kb_per_conn" and s == 0)]
        for b, style in zip(brokers, ("o-", "s--", "^:"), strict=False):
            ys = [med.get((row, b, s), {}).get(metric) for s in xs]
            pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=b)
        lab, unit = labels[metric]
        ax.set_title(lab if len(lab) < 48 else lab[:46] + "…", fontsize=8)
        ax.set_xlabel(SIZE_NAMES[row], fontsize=8)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_ylim(bottom=0)
        if ax.get_lines():
            ax.legend(fontsize=7)
    fig.tight_layout()
    img_dir.mkdir(parents=True, exist_ok=True)
    path = img_dir / f"scale-{row}.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
