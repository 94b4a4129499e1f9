"""parlab's imports form no circle, and the cost model's layers import only downwards.

Every ``import`` counts, a function's lazy one too (a lazy import hides a circle, it does not
remove it), except under ``if TYPE_CHECKING:``. Importing ``a.b.c`` also runs the ``__init__`` of
each package on the way that is not already an ancestor of the importer, so those count as edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "parlab"

#: the cost model's floors, bottom-up (parlab/costmodel/__init__.py): a module may import its own
#: floor and the floors below it, never one above
COSTMODEL_FLOORS = ("specs", "pricing", "plan", "search", "answers")


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    return skip


def _imported(module: str, path: Path) -> set[str]:
    """The parlab modules ``module`` imports, with the packages each import runs on the way."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    base = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets.update(_resolve(a.name) for a in node.names if a.name.split(".")[0] == "parlab")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = base
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                full = ".".join(x for x in (pkg, node.module) if x)
            else:
                full = node.module or ""
            if full.split(".")[0] != "parlab":
                continue
            for alias in node.names:
                sub = f"{full}.{alias.name}"
                targets.add(sub if sub in MODULES else _resolve(full))
    edges = set()
    for target in targets:
        parts = target.split(".")
        for i in range(2, len(parts) + 1):  # the packages on the way, then the module
            step = ".".join(parts[:i])
            if step in MODULES and not (module == step or module.startswith(step + ".")):
                edges.add(step)
    return edges


GRAPH = {m: _imported(m, p) for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan 1972), iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_walk_sees_the_imports_it_must():
    """The walker itself: a lazy import counts, a package on the way counts, TYPE_CHECKING does not."""
    assert "parlab.costmodel.specs.models" in GRAPH["parlab.costmodel.specs.catalogue"]
    assert "parlab.costmodel.specs" in GRAPH["parlab.costmodel.pricing.memory"]
    assert "parlab.costmodel.specs.models" not in GRAPH["parlab.costmodel.specs.moe"]  # TYPE_CHECKING only
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_parlab_has_no_import_cycle():
    cycles = _cycles(GRAPH)
    described = ["; ".join(f"{m} -> {sorted(GRAPH[m] & set(c))}" for m in c) for c in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(described)


@pytest.mark.parametrize("floor", COSTMODEL_FLOORS)
def test_each_costmodel_floor_imports_only_its_own_and_lower_floors(floor):
    allowed = set(COSTMODEL_FLOORS[: COSTMODEL_FLOORS.index(floor) + 1])
    prefix = f"parlab.costmodel.{floor}"
    bad = []
    for module, targets in GRAPH.items():
        if module != prefix and not module.startswith(prefix + "."):
            continue
        for target in targets:
            if target.startswith("parlab.costmodel."):
                other = target.split(".")[2]
                if other in COSTMODEL_FLOORS and other not in allowed:
                    bad.append(f"{module} -> {target}")
            elif target == "parlab.costmodel":
                bad.append(f"{module} -> parlab.costmodel (the package's face: import the module)")
    assert not bad, "\n".join(bad)
