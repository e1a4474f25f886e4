"""The layers' contract (docs/architecture.md) kept true: no module-level import cycle among
Odradek's modules, and no layer below the handlers importing the broker object at run time
(type-only imports under TYPE_CHECKING are fine: they cost nothing at run time)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {"tests", "compat-tests", "benchmarks", "docs", "pipelines", "docker", "artifacts", "build"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP or rel.parts[0].startswith(".") or "egg-info" in rel.parts[0]:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["odradek", *parts])] = path
    return out


def _runtime_imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules imported when `name` is imported: top-level statements only, not under TYPE_CHECKING."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for stmt in (node.body if isinstance(node, ast.Try) else [node]):
            if isinstance(stmt, ast.ImportFrom):
                if stmt.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[:len(base) - (stmt.level - 1)]
                    target = ".".join(base + ([stmt.module] if stmt.module else []))
                else:
                    target = stmt.module or ""
                for alias in stmt.names:
                    if f"{target}.{alias.name}" in modules:
                        found.add(f"{target}.{alias.name}")
                    elif target in modules:
                        found.add(target)
            elif isinstance(stmt, ast.Import):
                found |= {a.name for a in stmt.names if a.name in modules}
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _runtime_imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read() -> None:
    graph = _graph()
    assert "odradek.cluster.metadata_cache" in graph["odradek.broker"]
    assert len(graph) > 100


def test_no_module_level_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_only_the_entry_points_import_the_broker_at_run_time() -> None:
    graph = _graph()
    importers = sorted(m for m, deps in graph.items() if "odradek.broker" in deps)
    # produce.py takes the broker's clock (now_ms); nothing else below the server imports Broker
    assert importers == ["odradek.handlers.produce"]
