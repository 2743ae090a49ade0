"""The package's import graph: no circle of more than five files, counting
every import (module level, inside functions and under ``TYPE_CHECKING``),
and the leaf modules import nothing of faceweave."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "faceweave"
#: the largest circle of files allowed (a few files of one family that name each other)
MAX_CIRCLE = 5


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ``modules`` that ``name`` (a module or a name inside one) lives in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every faceweave module ``module`` imports, wherever the import stands."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names] or [base]
        else:
            continue
        for target in targets:
            if target.startswith("faceweave"):
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != module:
                    found.add(resolved)
    return found


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def test_no_circle_of_more_than_five_files():
    too_large = [c for c in _circles(_graph()) if len(c) > MAX_CIRCLE]
    assert not too_large, "import circles over 5 files: " + "; ".join(" <-> ".join(c) for c in too_large)


def test_the_circle_finder_finds_a_circle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(edges) == [["a", "b", "c"]]


def test_the_graph_counts_imports_inside_functions_and_type_checking(tmp_path):
    modules = {"faceweave.x": tmp_path / "x.py", "faceweave.y": tmp_path / "y.py", "faceweave.z": tmp_path / "z.py"}
    modules["faceweave.x"].write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from faceweave.y import Y\n"
        "def f():\n    from faceweave import z\n"
    )
    assert _imported("faceweave.x", modules["faceweave.x"], modules) == {"faceweave.y", "faceweave.z"}


def test_the_names_leaf_imports_nothing_of_faceweave():
    modules = _modules()
    assert _imported("faceweave.names", modules["faceweave.names"], modules) == set()


def test_options_make_no_import_inside_a_function():
    tree = ast.parse((PACKAGE / "options.py").read_text(encoding="utf-8"))
    local = [
        f"{fn.name}:{node.lineno}"
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]
    assert local == []


def test_the_service_imports_nothing_of_the_command_line():
    graph = _graph()
    crossing = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("faceweave.service")
        for target in targets
        if target.startswith("faceweave.cli")
    )
    assert crossing == []
