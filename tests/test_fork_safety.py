"""What the fork servers import before they fork calls nothing of ``torch.cuda`` when imported.

Five processes import torch and part of the repository once, then fork a child per run, and
the child may use the GPU: the SERVER strings of ``tests/warm_worker.py``,
``tests/warm_pytest.py`` and ``tests/warm_grader.py`` (each run as ``python -c``),
``tests/mutation/forkserver.py``'s ``serve`` and the grader's own shared worker
(``grader/runtime/worker.py``: ``main`` imports, ``_serve_shared`` forks a child per exercise).

CUDA is not fork-safe, and torch says which of its calls make a fork unsafe
(``torch/cuda/__init__.py``, torch 2.13):

- ``_lazy_init`` (``torch.cuda.init()``, the first tensor on the device, ``current_device()``,
  ``get_device_name()``...) calls ``torch._C._cuda_init()``; in a child forked after it,
  ``_is_in_bad_fork()`` is true and the first CUDA call raises "Cannot re-initialize CUDA in
  forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method".
- ``is_available()`` does not lazy-init, but "The default availability inspection [...] uses
  the CUDA Runtime API `cudaGetDeviceCount` which in turn initializes the CUDA Driver API via
  `cuInit`"; its docstring: "This function will NOT poison fork if the environment variable
  ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` is set" (nothing here sets it). The driver initialised
  in the parent is not the child's: torch marks no bad fork, and the child's CUDA fails with
  the driver's own error instead.
- ``device_count()`` asks NVML first ("This API will NOT poison fork if NVML discovery
  succeeds") and falls back on ``cudaGetDeviceCount``.

So one module-level ``torch.cuda.is_available()`` (a ``@pytest.mark.skipif(...)`` decorator,
a default argument, a class attribute) in a module a server imports before it forks breaks
every GPU child of that server on a GPU machine, and nothing on a CPU machine shows it. This
file reads each server's code before its fork, follows its imports through the repository
(``ast``: nothing is imported) and fails on any call under ``torch.cuda``,
``torch.backends.cuda`` or ``torch._C._cuda_*``, or of a ``.cuda()`` method, that runs when a
module of that closure is imported: at module level, in class bodies, in decorators, default
values and (without ``from __future__ import annotations``) annotations, and in the bodies of
the repository's functions that module-level code calls by name. Calls inside function bodies
that nothing calls at import time run in the child and are fine. Imports by a computed name are
followed where this file models them (``DYNAMIC``, and forkserver's ``walk_packages`` loop with
its own skip condition); any other fails the test until it is modelled. Not followed: methods
called on objects at import time (``REGISTRY.add(...)``'s body). A second test runs the
preludes of the SERVER strings and of ``serve`` in a fresh interpreter, with ``torch.cuda``'s
functions recording their calls: none is called, and every repository module they import is in
the closure read here (``worker.main`` needs the judge's pipes: read only).

What this found (none in a closure): the ``skipif(torch.cuda.is_available())`` decorators and
``exercises/tests/test_launch_tax.py``'s module-level ``is_available()`` are in test modules
that only a forked child imports (``pytest.main`` in warm_pytest's and forkserver's children),
or that the suite's own pytest process imports, which forks only to ``exec`` (subprocess) or,
in ``grader.isolation.release_uid``, for a child that only kills and exits; and
``coursekit/lab/__main__.py`` (its ``main()`` asks CUDA at import), which forkserver's walk
skips, as it skips every ``__main__``.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from coursekit.impl import REPO_ROOT

#: The repository's top-level packages: imports of anything else (torch, pytest) are not followed.
TOPS = ("coursekit", "exercises", "solutions", "grader", "tests", "benchmarks", "course")
#: Calls that initialise CUDA, or may: these prefixes of the called name, and any ``.cuda()``.
CUDA = ("torch.cuda.", "torch.backends.cuda.", "torch._C._cuda_")
#: Calls that import modules by a computed name, the folder of the modules they import and the
#: function of each they run (``grader/exercises/__init__.py``).
DYNAMIC = {
    "grader.exercises.load_probes": ("grader/exercises", None),
    "grader.exercises.hidden_checks": ("grader/hidden", "checks"),
    "grader.exercises.public_checks": ("grader/exercises", "checks"),
}


@dataclass(frozen=True)
class Server:
    file: str  # where its code is
    code: str  # "SERVER": the string it runs as ``python -c``; else the function that forks
    stop: str = "os.fork"  # its prelude is what comes before the first statement that calls this
    script: bool = False  # run as ``python FILE``: the file's own module-level code runs first


SERVERS = {
    "warm_worker": Server("tests/warm_worker.py", "SERVER"),
    "warm_pytest": Server("tests/warm_pytest.py", "SERVER"),
    "warm_grader": Server("tests/warm_grader.py", "SERVER"),
    "forkserver": Server("tests/mutation/forkserver.py", "serve", script=True),
    "worker": Server("grader/runtime/worker.py", "main", stop="_serve_shared", script=True),
}


# ----------------------------------------------------------------------------- one module


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _never_on_import(test: ast.expr) -> bool:
    """``if __name__ == "__main__":`` and ``if TYPE_CHECKING:``: not run when imported."""
    if dotted(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
        return True
    return (
        isinstance(test, ast.Compare)
        and dotted(test.left) == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


class Module:
    """One parsed file: what its names stand for (``from torch import cuda``: ``cuda`` is
    ``torch.cuda``), its top-level functions and classes."""

    def __init__(self, name: str, path: str, source: str, package: str | None = None):
        self.name, self.path = name, path
        self.tree = ast.parse(source, filename=path)
        self.package = package if package is not None else name.rpartition(".")[0]
        self.future = any(
            isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
            for n in self.tree.body
        )
        self.defs = {
            n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
        self.aliases: dict[str, str] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        top = a.name.partition(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
                base = self.absolute(node)
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
        for node in self.tree.body:  # cuda = torch.cuda
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = dotted(node.value)
                if value is not None and value.partition(".")[0] in self.aliases:
                    self.aliases[node.targets[0].id] = self.qualify(value)

    def absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = self.package.split(".") if self.package else []
        parts = parts[: len(parts) - node.level + 1]
        return ".".join(parts + ([node.module] if node.module else []))

    def qualify(self, name: str) -> str:
        head, dot, rest = name.partition(".")
        if head in self.aliases:
            return self.aliases[head] + dot + rest
        return name


@dataclass
class Found:
    """What running a module's import-time code does, read from its text (``root``: the tree
    the modules are in)."""

    root: Path = REPO_ROOT
    cuda: list[str] = field(default_factory=list)  # "path:line: call (where)"
    imports: set[str] = field(default_factory=set)  # modules it imports (and maybe attributes: "a.b.Name")
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (module, function, why) it runs elsewhere
    unknown: list[str] = field(default_factory=list)  # imports by a computed name this file cannot follow


class _Scan:
    """Walks the code that runs when a module is imported (or a prelude runs) and records its
    CUDA calls, its imports and the repository functions it calls."""

    def __init__(self, module: Module, found: Found, follow: set[tuple[str, str]]):
        self.m, self.found, self.followed = module, found, follow
        self.walking: list[str] = []  # packages a ``for pkg in ("a", "b"): walk_packages`` loop walks

    def body(self, stmts: list[ast.stmt], where: str) -> None:
        for stmt in stmts:
            self.stmt(stmt, where)

    def stmt(self, stmt: ast.stmt, where: str) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in stmt.decorator_list:
                self.expr(d, f"a decorator of {stmt.name}()", decorator=True)
            a = stmt.args
            for d in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
                self.expr(d, f"a default value of {stmt.name}()")
            if not self.m.future:
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                    if arg is not None and arg.annotation is not None:
                        self.expr(arg.annotation, f"an annotation of {stmt.name}()")
                if stmt.returns is not None:
                    self.expr(stmt.returns, f"an annotation of {stmt.name}()")
            return
        if isinstance(stmt, ast.ClassDef):
            for d in stmt.decorator_list:
                self.expr(d, f"a decorator of class {stmt.name}", decorator=True)
            for e in [*stmt.bases, *(k.value for k in stmt.keywords)]:
                self.expr(e, f"the bases of class {stmt.name}")
            self.body(stmt.body, f"the body of class {stmt.name}")
            return
        if isinstance(stmt, ast.If) and _never_on_import(stmt.test):
            self.body(stmt.orelse, where)
            return
        if isinstance(stmt, ast.Import):
            self.found.imports |= {a.name for a in stmt.names}
            return
        if isinstance(stmt, ast.ImportFrom):
            if stmt.module != "__future__":
                base = self.m.absolute(stmt)
                self.found.imports.add(base)
                self.found.imports |= {f"{base}.{a.name}" for a in stmt.names if a.name != "*"}
            return
        if isinstance(stmt, ast.AnnAssign) and self.m.future:
            if stmt.value is not None:
                self.expr(stmt.value, where)
            return
        if isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Tuple) and _calls(stmt, "walk_packages"):
            self.walk(stmt)
        self.node(stmt, where)

    def walk(self, loop: ast.For) -> None:
        """``for pkg in ("coursekit", "grader"): for info in pkgutil.walk_packages(...): if SKIP:
        continue; import_module(info.name)`` (tests/mutation/forkserver.py): every module of
        those packages that ``SKIP`` (evaluated on its name) lets through, and every package,
        which ``walk_packages`` imports to walk into it whatever the loop skips."""
        packages = [e.value for e in loop.iter.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        inner = [n for n in ast.walk(loop) if isinstance(n, ast.For) and _calls(n.iter, "walk_packages")]
        skips = []
        if len(inner) == 1 and isinstance(inner[0].target, ast.Name):
            variable = inner[0].target.id
            for stmt in inner[0].body:
                if isinstance(stmt, ast.If) and [type(s) for s in stmt.body] == [ast.Continue]:
                    skips.append(compile(ast.Expression(stmt.test), "<skip>", "eval"))
        else:
            self.found.unknown.append(f"{self.m.path}:{loop.lineno}: a walk_packages loop of another shape")
            return

        def skipped(name: str) -> bool:
            try:
                return any(eval(c, {}, {variable: SimpleNamespace(name=name)}) for c in skips)  # noqa: S307 - the skip conditions are the fork server's own source, parsed here
            except Exception:  # noqa: BLE001 - a condition on more than the name: walked, to be safe
                return False

        self.walking.extend(packages)
        for package in packages:
            for name in modules_in(package, self.found.root):
                is_package = module_file(name, self.found.root).name == "__init__.py"
                if is_package or not skipped(name):
                    self.found.imports.add(name)

    def node(self, node: ast.AST, where: str) -> None:
        """The fields of a statement (or a handler, a with-item, a match case), in turn."""
        for _, value in ast.iter_fields(node):
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, ast.stmt):
                    self.stmt(item, where)
                elif isinstance(item, ast.expr):
                    self.expr(item, where)
                elif isinstance(item, ast.AST):
                    self.node(item, where)

    def expr(self, node: ast.expr, where: str, decorator: bool = False) -> None:
        if decorator and not isinstance(node, ast.Call):  # @name: called with what it decorates
            self.call(node, node, where)
        stack: list[ast.AST] = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Lambda):  # its defaults now, its body when called
                stack.extend([*n.args.defaults, *(d for d in n.args.kw_defaults if d is not None)])
                continue
            if isinstance(n, ast.Call):
                self.call(n.func, n, where)
            stack.extend(ast.iter_child_nodes(n))

    def call(self, func: ast.expr, node: ast.AST, where: str) -> None:
        name = dotted(func)
        if name is None:
            if isinstance(func, ast.Attribute) and func.attr == "cuda":
                self.flag(func, node, func.attr, where)
            return
        qual = self.m.qualify(name)
        if qual.startswith(CUDA) or qual.rpartition(".")[2] == "cuda":
            self.flag(func, node, qual, where)
        elif qual == "importlib.import_module" or qual == "__import__":
            args = getattr(node, "args", [])
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                self.found.imports.add(args[0].value)
            elif not self.walking:
                self.found.unknown.append(f"{self.m.path}:{node.lineno}: {ast.unparse(node)} ({where})")
        elif qual == "pkgutil.walk_packages" and not self.walking:
            self.found.unknown.append(f"{self.m.path}:{node.lineno}: {ast.unparse(node)} ({where})")
        elif qual in DYNAMIC:
            folder, run = DYNAMIC[qual]
            for name in modules_in(folder.replace("/", "."), self.found.root):
                self.found.imports.add(name)
                if run:
                    self.found.calls.append(
                        (name, run, f"{name}.{run}(), run by {qual}() at {self.m.path}:{node.lineno}")
                    )
        elif isinstance(func, ast.Name) and func.id in self.m.defs:
            self.run(self.m, func.id, f"{func.id}(), called at {self.m.path}:{node.lineno} ({where})")
        else:
            module, _, function = qual.rpartition(".")
            if module.partition(".")[0] in TOPS:
                self.found.calls.append(
                    (module, function, f"{qual}(), called at {self.m.path}:{node.lineno} ({where})")
                )

    def run(self, module: Module, name: str, why: str) -> None:
        """The body of ``module``'s top-level function ``name`` (a class: its constructor) runs."""
        if (module.name, name) in self.followed:
            return
        self.followed.add((module.name, name))
        target = module.defs[name]
        if isinstance(target, ast.ClassDef):
            for method in target.body:
                if isinstance(method, ast.FunctionDef) and method.name in ("__new__", "__init__", "__post_init__"):
                    _Scan(module, self.found, self.followed).body(method.body, f"{name}.{method.name}, from {why}")
        else:
            _Scan(module, self.found, self.followed).body(target.body, f"in {why}")

    def flag(self, func: ast.expr, node: ast.AST, qual: str, where: str) -> None:
        text = ast.unparse(func)
        shown = f"{text}()" if text == qual or qual == "cuda" else f"{text}() = {qual}()"
        self.found.cuda.append(f"{self.m.path}:{node.lineno}: {shown} ({where})")


def _calls(node: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Call) and (dotted(n.func) or "").endswith(attr) for n in ast.walk(node))


def cuda_calls_at_import(source: str, path: str = "<source>", name: str = "planted") -> list[str]:
    """The calls of ``torch.cuda`` (and the rest of ``CUDA``) that importing this one module's
    ``source`` makes: ``"path:line: call() (where)"``. Its own functions that it calls at import
    time are followed; other modules are not (``fork_hazards`` follows them)."""
    found = Found()
    module = Module(name, path, source)
    _Scan(module, found, set()).body(module.tree.body, "module level")
    return found.cuda


# ----------------------------------------------------------------------------- the closure


def module_file(name: str, root: Path) -> Path | None:
    if name.partition(".")[0] not in TOPS:
        return None
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def modules_in(package: str, root: Path) -> list[str]:
    """Every module of ``package`` (``grader.hidden``), its own ``__init__`` first."""
    folder = root.joinpath(*package.split("."))
    out = []
    for path in sorted(folder.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        out.append(".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"))
    return out


def prelude(server: Server, root: Path) -> tuple[Module, list[ast.stmt]]:
    """The module a server's code is read in, and its statements before the fork; an ``if`` whose
    body ends in ``return`` (``worker.main``'s canary) keeps only its test and its ``else``: that
    way never reaches the fork."""
    path = root / server.file
    name = ".".join(Path(server.file).with_suffix("").parts)
    module = Module(name, server.file, path.read_text(encoding="utf-8"))
    if server.code == "SERVER":
        strings = [
            n.value.value
            for n in module.tree.body
            if isinstance(n, ast.Assign)
            and any(dotted(t) == "SERVER" for t in n.targets)
            and isinstance(n.value, ast.Constant)
        ]
        assert len(strings) == 1, f"{server.file}: no SERVER string"
        module = Module(f"{name}:SERVER", f"{server.file}:SERVER", strings[0], package="")
        body = module.tree.body
    else:
        functions = [n for n in ast.walk(module.tree) if isinstance(n, ast.FunctionDef) and n.name == server.code]
        assert len(functions) == 1, f"{server.file}: no function {server.code}()"
        body = functions[0].body
    before = []
    for stmt in body:
        if any(isinstance(n, ast.Call) and dotted(n.func) == server.stop for n in ast.walk(stmt)):
            break
        if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], (ast.Return, ast.Raise)):
            stmt = ast.If(test=stmt.test, body=[ast.Pass()], orelse=stmt.orelse, lineno=stmt.lineno, col_offset=0)
        before.append(stmt)
    else:
        raise AssertionError(f"{server.file}: {server.code} never calls {server.stop}: where does it fork?")
    return module, before


def fork_hazards(server: Server, root: Path = REPO_ROOT) -> tuple[dict[str, Path], Found]:
    """The repository modules ``server`` imports before it forks (name: file) and what their
    import-time code (and the server's own code before the fork) does."""
    found, followed = Found(root=root), set()
    parsed: dict[str, Module] = {}
    module, before = prelude(server, root)
    if server.script:
        _Scan(module, found, followed).body(module.tree.body, "module level")
    _Scan(module, found, followed).body(before, f"{server.code} before the fork")
    closure: dict[str, Path] = {}
    done_calls: set[tuple[str, str]] = set()
    while True:
        queue = sorted(found.imports - set(closure))
        pending = [c for c in found.calls if (c[0], c[1]) not in done_calls]
        if not queue and not pending:
            break
        for wanted in queue:
            parts = wanted.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b and a.b.c
                part = ".".join(parts[:i])
                path = module_file(part, root)
                if path is None or part in closure:
                    continue
                closure[part] = path
                rel = path.relative_to(root).as_posix()
                package = part if path.name == "__init__.py" else part.rpartition(".")[0]
                parsed[part] = Module(part, rel, path.read_text(encoding="utf-8"), package=package)
                _Scan(parsed[part], found, followed).body(parsed[part].tree.body, "module level")
            if wanted not in closure:
                closure[wanted] = root  # not a module of the tree: torch, or an attribute ("grader.checks.Check")
        for module_name, function, why in pending:
            if module_name not in parsed and module_file(module_name, root) is not None:
                found.imports.add(module_name)  # parsed on the next round, then run
                continue
            done_calls.add((module_name, function))
            if module_name in parsed and function in parsed[module_name].defs:
                _Scan(parsed[module_name], found, followed).run(parsed[module_name], function, why)
    modules = {name: path for name, path in closure.items() if path != root}
    return modules, found


# ----------------------------------------------------------------------------- the tests


@functools.cache
def _here(name: str) -> tuple[dict[str, Path], Found]:
    return fork_hazards(SERVERS[name])


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_nothing_a_server_imports_before_it_forks_calls_cuda(name):
    _, found = _here(name)
    assert not found.unknown, (
        f"{name} imports modules by a computed name this test cannot follow (add them to DYNAMIC):\n  "
        + "\n  ".join(found.unknown)
    )
    assert not found.cuda, (
        f"{name} ({SERVERS[name].file}) forks children that may use the GPU, and before it forks "
        "these calls run, which initialise CUDA (or may: torch.cuda.is_available() calls cuInit) "
        "in the parent and break the children's CUDA; call them inside a function, or keep "
        "the module out of what the server imports:\n  " + "\n  ".join(found.cuda)
    )


#: Modules each server must be found to import (its closure is read at all): some its code
#: names, some loaded by a computed name, some only imported by what it imports.
EXPECTED = {
    "warm_worker": {"grader.runtime.worker", "grader.probes", "grader.exercises.capture", "coursekit.standin"},
    "warm_pytest": {"coursekit.strategies", "coursekit.standin", "coursekit.checks"},
    "warm_grader": {"grader.__main__", "grader.judge", "grader.hidden.capture", "grader.sandbox", "coursekit.course"},
    "forkserver": {"grader.version", "grader.exercises.capture", "coursekit.standin", "coursekit.lab"},
    "worker": {"grader.runtime.wire", "grader.runtime.cleanup", "grader.exercises.capture", "coursekit.standin"},
}


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_each_servers_closure_is_read(name):
    """(This test's own check: an empty closure would pass the test above vacuously.)"""
    modules, _ = _here(name)
    missing = sorted(EXPECTED[name] - set(modules))
    assert not missing, f"{name}'s closure lacks {missing}; it holds {sorted(modules)}"
    assert all(path.is_file() for path in modules.values())


PLANTED = {
    "module level": ("import torch\nCUDA = torch.cuda.is_available()\n", 2, "torch.cuda.is_available()"),
    "skipif": (
        "import pytest, torch\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='x')\ndef test(): pass\n",
        3,
        "a decorator of test()",
    ),
    "class body": ("import torch\nclass A:\n    n = torch.cuda.device_count()\n", 3, "the body of class A"),
    "default": ("import torch\ndef f(d=torch.cuda.current_device()): pass\n", 2, "a default value of f()"),
    "from torch import cuda": ("from torch import cuda\nif cuda.is_available():\n    pass\n", 2, "= torch.cuda"),
    "import as": (
        "import torch.cuda as tc\nN = tc.device_count()\n",
        2,
        "tc.device_count() = torch.cuda.device_count()",
    ),
    "a name from torch.cuda": ("from torch.cuda import is_available as ok\nX = [ok()]\n", 2, "torch.cuda.is_available"),
    "an alias by assignment": ("import torch\nc = torch.cuda\nc.init()\n", 3, "torch.cuda.init"),
    "backends": ("import torch\nFLASH = torch.backends.cuda.flash_sdp_enabled()\n", 2, "torch.backends.cuda."),
    "a .cuda() call": ("import torch\nW = torch.zeros(3).cuda()\n", 2, "cuda()"),
    "a function called at import": (
        "import torch\n\ndef has_gpu():\n    return torch.cuda.is_available()\n\nGPU = has_gpu()\n",
        4,
        "has_gpu(), called at",
    ),
    "a local decorator": (
        "import torch\n\ndef gpu(fn):\n    torch.cuda.init()\n    return fn\n\n@gpu\ndef f(): pass\n",
        4,
        "gpu(), called at",
    ),
    "an annotation": ("import torch\ndef f(x: torch.cuda.Stream(0)): pass\n", 2, "an annotation of f()"),
    "try and with": ("import torch\ntry:\n    import x\nexcept ImportError:\n    torch.cuda.synchronize()\n", 5, ""),
}


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_the_checker_finds_a_planted_call(kind):
    source, line, said = PLANTED[kind]
    found = cuda_calls_at_import(source, "planted.py")
    assert len(found) == 1 and found[0].startswith(f"planted.py:{line}: ") and said in found[0], found


NOT_AT_IMPORT = {
    "a function body": "import torch\ndef f():\n    return torch.cuda.is_available()\n",
    "a method body": "import torch\nclass A:\n    def f(self):\n        torch.cuda.init()\n",
    "a lambda body": "import torch\nf = lambda: torch.cuda.is_available()\n",
    "__main__": "import torch\nif __name__ == '__main__':\n    torch.cuda.init()\n",
    "a reference, not a call": "import torch\nAVAILABLE = torch.cuda.is_available\n",
    "a lazy marker": "import pytest\ngpu = pytest.mark.gpu\n",
    "future annotations": "from __future__ import annotations\nimport torch\ndef f(x: torch.cuda.Stream(0)): pass\n",
}


@pytest.mark.parametrize("kind", sorted(NOT_AT_IMPORT))
def test_the_checker_lets_calls_that_run_later_be(kind):
    assert cuda_calls_at_import(NOT_AT_IMPORT[kind], "later.py") == []


def copy_tree(into: Path) -> Path:
    """The repository's Python files under ``into`` (what the closure reads)."""
    for top in TOPS:
        for path in (REPO_ROOT / top).rglob("*.py"):
            if "__pycache__" in path.parts or "mutants" in path.relative_to(REPO_ROOT).parts:
                continue
            target = into / path.relative_to(REPO_ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return into


@pytest.mark.parametrize(
    "server, victim",
    [
        ("warm_pytest", "coursekit/standin.py"),
        ("warm_grader", "grader/hidden/fusion.py"),  # imported by name: hidden_checks()
        ("worker", "grader/probes.py"),
        ("forkserver", "grader/staff.py"),  # imported by pkgutil.walk_packages only
    ],
)
def test_a_planted_module_level_call_in_the_closure_fails_the_server(tmp_path, server, victim):
    """A module-level ``torch.cuda.is_available()`` planted in a copy of the repository: the
    server's check names the file, the line and the call (and nothing else)."""
    root = copy_tree(tmp_path)
    modules, found = fork_hazards(SERVERS[server], root)
    assert found.cuda == [] and victim in {p.relative_to(root).as_posix() for p in modules.values()}
    text = (root / victim).read_text(encoding="utf-8")
    line = text.count("\n") + 2
    (root / victim).write_text(text + "\nGPU = torch.cuda.is_available()\n", encoding="utf-8")
    if "import torch\n" not in text:
        (root / victim).write_text("import torch\n" + (root / victim).read_text(encoding="utf-8"), encoding="utf-8")
        line += 1
    _, found = fork_hazards(SERVERS[server], root)
    assert found.cuda == [f"{victim}:{line}: torch.cuda.is_available() (module level)"]


def test_a_planted_call_in_a_servers_own_prelude_fails_it(tmp_path):
    root = copy_tree(tmp_path)
    path = root / "tests" / "warm_grader.py"
    text = path.read_text(encoding="utf-8")
    planted = "import torch  # noqa: F401 - warm for every child\n"
    assert planted in text
    path.write_text(text.replace(planted, planted + "torch.cuda.init()\n"), encoding="utf-8")
    _, found = fork_hazards(SERVERS["warm_grader"], root)
    assert len(found.cuda) == 1 and "tests/warm_grader.py:SERVER:" in found.cuda[0], found.cuda
    assert "torch.cuda.init() (SERVER before the fork)" in found.cuda[0]


# ----------------------------------------------------------------------------- run, not read

#: The SERVER preludes run in a fresh interpreter (with ``torch.cuda``'s functions recording
#: their calls): the modules they import are in the closure read above, and none calls CUDA.
RUN = r"""
import json, sys, types
root, setup, code = sys.argv[1:4]
import torch
calls = []
def recording(owner, name, fn):
    def wrapper(*args, **kwargs):
        calls.append(f"{owner}.{name}")
        return fn(*args, **kwargs)
    return wrapper
for owner, module in (("torch.cuda", torch.cuda), ("torch.backends.cuda", torch.backends.cuda)):
    for name, value in list(vars(module).items()):
        if isinstance(value, types.FunctionType):
            setattr(module, name, recording(owner, name, value))
sys.path.insert(0, root)
namespace = {"__name__": "__main__"}
exec(setup, namespace)
exec(compile(code, "<prelude>", "exec"), namespace)
mods = sorted(n for n, m in list(sys.modules.items()) if (getattr(m, "__file__", None) or "").startswith(root + "/"))
print("\n" + json.dumps({"modules": mods, "calls": calls}))
"""
SETUP = {
    # its arguments: the runtime's folder (the repository stands in for it) and a socket's descriptor
    "warm_worker": "import socket, sys\n_a, _b = socket.socketpair()\nsys.argv = ['', sys.argv[1], str(_b.fileno())]\n",
    "warm_pytest": "",
    "warm_grader": "",
    # serve(SOCKET, timeout_s)'s arguments, and what its file imports at module level
    "forkserver": "import json, os, socket, sys\nsock_path = sys.argv[4]\ntimeout_s = 1.0\n",
}


@pytest.mark.parametrize("name", sorted(SETUP))
def test_a_servers_prelude_run_imports_what_was_read_and_calls_no_cuda(name, tmp_path):
    modules, _ = _here(name)
    _, before = prelude(SERVERS[name], REPO_ROOT)
    code = ast.unparse(ast.Module(body=before, type_ignores=[]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(REPO_ROOT), SETUP[name], code, str(tmp_path / "socket")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ran = json.loads(done.stdout.strip().splitlines()[-1])
    assert ran["calls"] == [], f"{name}'s prelude called {ran['calls']} before it forks"
    ran["modules"] = [m for m in ran["modules"] if m.partition(".")[0] in TOPS]  # not .venv's
    unread = sorted(set(ran["modules"]) - set(modules))
    assert ran["modules"] and not unread, f"{name} imported {unread}, which the closure read does not hold"
