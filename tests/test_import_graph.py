"""The layers of the repository, read from its imports (``ast``; nothing is run).

From the bottom up: ``coursekit`` (the support package students get) imports no other part of
the repository; ``exercises`` and ``solutions`` (the exercise modules) import only ``coursekit``;
``grader`` imports ``coursekit`` and itself, never the exercise modules by name (it loads them
through ``coursekit.impl``); ``benchmarks`` (staff figures) may use any of those and the tests'
harness. The files a sandboxed worker runs with (``grader/runtime/worker.py`` and the part of the grader
``grader.judge.runtime_files`` copies beside the submission, with ``coursekit/``) import, when
loaded, nothing else of the grader: the sandbox has nothing else of it. And no two modules of
one package import each other in a circle.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT

PACKAGES = ("coursekit", "exercises", "solutions", "grader", "benchmarks")
#: What each package may import of the repository (besides itself).
ALLOWED = {
    "coursekit": set(),
    "exercises": {"coursekit"},
    "solutions": {"coursekit"},
    "grader": {"coursekit"},
    "benchmarks": {"coursekit", "grader", "exercises", "solutions", "tests"},  # staff figures
}
TOP = set(PACKAGES) | {"tests", "course"}


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if "tests" in path.relative_to(REPO_ROOT).parts[1:]:
                continue  # exercises/tests: the public tests, not a layer of the code
            name = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def imports_of(path: Path, name: str) -> set[str]:
    """The repository modules ``path`` imports (any depth, any place in the file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m.split(".")[0] in TOP}


MODULE_PATHS = _modules()
GRAPH = {name: imports_of(path, name) for name, path in MODULE_PATHS.items()}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_imports_a_higher_layer(package):
    bad = sorted(
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        if name.split(".")[0] == package
        for target in targets
        if target.split(".")[0] not in ALLOWED[package] | {package}
    )
    assert not bad, (
        f"{package} may import only {sorted(ALLOWED[package]) or 'nothing'} of the repository:\n  " + "\n  ".join(bad)
    )


def loaded_imports(path: Path) -> set[str]:
    """What importing ``path`` imports: its top-level imports, not those under ``if
    TYPE_CHECKING:`` or inside functions (they run only where they are called)."""
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module)
    return {m for m in found if m.split(".")[0] == "grader"}


def test_the_workers_files_need_nothing_the_sandbox_lacks():
    from grader.judge import runtime_files

    shipped = {
        name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for name in runtime_files()
        if name.endswith(".py")
    }
    assert "grader.hidden" not in shipped and not any(s.startswith("grader.hidden.") for s in shipped)
    for name in sorted(shipped):
        path = REPO_ROOT / (name.replace(".", "/") + ".py")
        if not path.is_file():
            path = path.with_suffix("") / "__init__.py"
        missing = sorted(m for m in loaded_imports(path) if m not in shipped)
        assert not missing, f"{name} runs in the sandbox, which has no {missing}"


def cycles_in(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a depth-first walk of ``edges`` closes (each found once)."""
    cycles, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_import_cycles():
    edges = defaultdict(set)
    for name, targets in GRAPH.items():
        for target in targets:
            while target and target not in MODULE_PATHS:  # "grader.checks.Check" -> "grader.checks"
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                edges[name].add(target)
    cycles = cycles_in(edges)
    assert not cycles, "import cycles:\n  " + "\n  ".join(" -> ".join(c) for c in cycles)


def test_the_graph_is_read_at_all():
    """(This test's own check: the parser finds the imports it must, or every test above passes
    on an empty graph.)"""
    assert "grader.exercises" in GRAPH["grader.rubric"]
    assert "grader.checks" in GRAPH["grader.judge"]
    assert GRAPH["coursekit.impl"] == set()
    assert cycles_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles_in({"a": {"b"}, "b": set()}) == []
