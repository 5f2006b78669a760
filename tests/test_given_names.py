"""Issue 43: no function binds a name that the stubs' given lines read.

The stubs' lines marked ``# given`` call ``argcheck.count(...)`` and the like. A function that
binds such a name (``def f(*args)``, ``args = ...``, ``for args in ...``) hides the module from
its own given lines, which then fail when the function runs: the module was ``coursekit/args.py``
until a student's ``def f(*args)`` broke exercise 7's GPU-only function that way, unseen on a CPU.
It is ``coursekit/argcheck.py`` now, and this file holds the rule to the code:

* the given names (``given_names``) are read from the stubs with ``ast``: every name a stub imports
  at module level from the course's given code (``coursekit`` and its modules, or another exercise
  module: ``argcheck``, ``CapturedGraph``, ``end_failed_capture``, ``padded_size``...), and every
  other name its given lines read that the function would find in the module or the builtins
  (``fields``, ``CUDAGraphMode``, ``len``);
* no function of the stubs, the reference, the alternatives (tests/alternatives), the public tests
  (exercises/tests) or the notes' ``python`` blocks binds one of them: parameters (``*args`` and
  ``**kwargs`` names too), assignments, ``for`` and ``with ... as`` targets, comprehension
  targets, ``except ... as``, imports inside a function, a nested ``def`` or ``class``; nor does
  the module itself rebind one, other than by importing it under its own name (the notes'
  examples are one module per file, as the doctest runs them);
* a list of names a student plausibly gives a parameter or a local (``STUDENT_NAMES``, with every
  parameter name of the reference and the alternatives) holds no given name: ``args``, the old
  name, is on it, and ``test_the_old_name_breaks_the_rule`` shows the rule refusing it.

Each rule is shown to fail: a ``def f(*argcheck)`` planted in a copy of a stub, and an ``import``
planted in a copy of a chapter's example, are reported (``test_a_planted_*``).
"""

from __future__ import annotations

import ast
import builtins
import doctest
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT
from tests.test_notes import python_blocks_only

STUBS = sorted((REPO_ROOT / "exercises").glob("[a-z]*.py"))
CODE = [
    *STUBS,
    *sorted((REPO_ROOT / "solutions").glob("[a-z]*.py")),
    *sorted((REPO_ROOT / "tests" / "alternatives").glob("[a-z]*.py")),
    *sorted((REPO_ROOT / "exercises" / "tests").glob("*.py")),
]
NOTES = sorted((REPO_ROOT / "notes").rglob("*.md"))

#: Names a student plausibly gives a parameter or a local; ``student_names()`` adds every
#: parameter name of the reference and the alternatives. None may be a given name.
STUDENT_NAMES = frozenset(
    """
    args arg argv argument arguments given check checks checked checker validate validated kwargs
    kw kwds options opts config cfg params param inputs input_ inp values value vals val items item
    x y z xs ys t n m k i j idx size sizes count counts num number numbers total out output outputs
    result results res ret fn f func function callback g graph graphs pool stream streams mode modes
    batch batch_size tokens positions slots buf buffer buffers static static_inputs data tensor
    tensors shape dtype device name names key keys state step steps times elapsed start end
    """.split()
)


@dataclass(frozen=True)
class Given:
    """A name a stub's given code reads: ``kind`` is ``import`` (the stub imports it, from the
    course's given code, or from elsewhere for a given line to read: ``fields``), ``module`` (the
    stub defines it and a given line reads it) or ``builtin`` (a given line reads the builtin);
    ``where`` says which stub and line; ``home`` is the module that defines it
    (``coursekit.standin``; ``buckets`` for an exercise's name, whose reference and alternatives
    define it too)."""

    kind: str
    where: str
    home: str = "builtins"


def _given_lines(source: str) -> set[int]:
    """The lines of ``source`` that carry a ``# given`` comment."""
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.string.lstrip("#").strip().startswith("given"):
            lines.add(tok.start[0])
    return lines


def _is_given_source(node: ast.ImportFrom) -> bool:
    """From the course's given code: ``coursekit`` or one of its modules, or another exercise."""
    return node.level > 0 or (node.module or "").split(".")[0] == "coursekit"


def _module_names(tree: ast.Module, stem: str) -> dict[str, str]:
    """``{name: the module that defines it}`` for every name ``tree`` binds at module level (its
    imports, and ``stem`` itself for what it defines)."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            home = (node.module or "").split(".")[-1] if node.level else node.module or ""
            names.update((alias.asname or alias.name, home) for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(((alias.asname or alias.name).split(".")[0], alias.name) for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = stem
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update((n.id, stem) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _given_reads(func: ast.FunctionDef | ast.AsyncFunctionDef, marked: set[int]) -> list[ast.Name]:
    """The names that ``func``'s given statements read and ``func`` does not bind itself. A given
    statement is a simple one with a ``# given`` comment on one of its lines, or the header (the
    test, the iterable, the ``with`` items) of a compound one whose first line carries it."""
    own = {b.name for b in _bindings(func) if b.scope_node is func}
    reads = []
    for stmt in ast.walk(func):
        if not isinstance(stmt, ast.stmt) or stmt is func:
            continue
        compound = any(isinstance(v, list) and v and isinstance(v[0], ast.stmt) for v in vars(stmt).values())
        if compound:
            parts = [] if stmt.lineno not in marked else [getattr(stmt, f, None) for f in ("test", "iter", "items")]
            parts = [x for p in parts for x in (p if isinstance(p, list) else [p]) if isinstance(x, ast.AST)]
        else:
            parts = [stmt] if marked.intersection(range(stmt.lineno, stmt.end_lineno + 1)) else []
        reads += [
            n
            for part in parts
            for n in ast.walk(part)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in own
        ]
    return reads


def given_names(sources: dict[str, str]) -> dict[str, Given]:
    """``{name: Given}`` from the stubs' sources (``{where: text}``)."""
    found: dict[str, Given] = {}
    for where, source in sources.items():
        tree, stem = ast.parse(source), Path(where).stem
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and _is_given_source(node):
                home = (node.module or "").split(".")[-1] if node.level else node.module
                for alias in node.names:
                    found.setdefault(alias.asname or alias.name, Given("import", f"{where}:{node.lineno}", home))
        names, marked = _module_names(tree, stem), _given_lines(source)
        for func in ast.walk(tree):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in _given_reads(func, marked):
                    if n.id in names:
                        kind = "module" if names[n.id] == stem else "import"
                        found.setdefault(n.id, Given(kind, f"{where}:{n.lineno}", names[n.id]))
                    elif hasattr(builtins, n.id):
                        found.setdefault(n.id, Given("builtin", f"{where}:{n.lineno}"))
    return found


@dataclass(frozen=True)
class Binding:
    name: str
    line: int
    how: str
    scope: str  # "module", or the function, lambda, comprehension or class that binds it
    scope_node: ast.AST
    node: ast.AST


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_SCOPES = (*_DEFINITIONS, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _in_body(child: ast.AST, node: ast.AST) -> bool:
    body = node.body if isinstance(node.body, list) else [node.body]  # a lambda's body is one expression
    return any(child is stmt for stmt in body)


def _describe(scope: ast.AST | None) -> str:
    if scope is None:
        return "module"
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"function {scope.name}()"
    if isinstance(scope, ast.ClassDef):
        return f"class {scope.name}"
    return "lambda" if isinstance(scope, ast.Lambda) else "comprehension"


def _bindings(tree: ast.AST) -> list[Binding]:
    """Every name bound in ``tree``, with the scope (innermost) that binds it."""
    out: list[Binding] = []

    def bind(name: str, node: ast.AST, how: str, scope: ast.AST | None) -> None:
        out.append(Binding(name, getattr(node, "lineno", 0), how, _describe(scope), scope, node))

    def visit(node: ast.AST, scope: ast.AST | None) -> None:
        inner = node if isinstance(node, _SCOPES) else scope
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name, node, "def" if not isinstance(node, ast.ClassDef) else "class", scope)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                bind(arg.arg, arg, "a parameter", node)
            if a.vararg:
                bind(a.vararg.arg, a.vararg, "a *parameter", node)
            if a.kwarg:
                bind(a.kwarg.arg, a.kwarg, "a **parameter", node)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bind(node.id, node, "assigned" if isinstance(node.ctx, ast.Store) else "deleted", scope)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name, node, "except ... as", scope)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    name = alias.asname or alias.name.split(".")[0]
                    bind(name, node, "imported", scope)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bind(node.name, node, "a match capture", scope)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bind(node.rest, node, "a match capture", scope)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.arguments):  # the defaults are evaluated where the function is defined
                for default in [*child.defaults, *(d for d in child.kw_defaults if d is not None)]:
                    visit(default, scope)
            elif isinstance(node, _DEFINITIONS) and not _in_body(child, node):
                visit(child, scope)  # decorators, annotations, bases: evaluated where it is defined
            else:
                visit(child, inner)

    visit(tree, None)
    return out


def _module_binding_allowed(b: Binding, given: Given, module: str) -> bool:
    """At module level: importing the name under its own name, or defining it in the module that
    the stubs take it from (``buckets`` defines ``padded_size``)."""
    if isinstance(b.node, ast.ImportFrom):
        return any(a.name == b.name and a.asname in (None, b.name) for a in b.node.names)
    return module == given.home


def shadows(source: str, given: dict[str, Given], where: str, line_offset: int = 0) -> list[str]:
    """Every binding in ``source`` of a given name, by a function (or a lambda, a comprehension, a
    class), or at module level other than by importing it under its name; ``where`` names the
    file in the report."""
    module = Path(where).stem
    found = []
    for b in _bindings(ast.parse(source)):
        g = given.get(b.name)
        if g is None or (b.scope == "module" and _module_binding_allowed(b, g, module)):
            continue
        found.append(
            f"{where}:{b.line + line_offset}: {b.scope} binds {b.name!r} ({b.how}), which the given code "
            f"reads ({g.kind}, {g.where})"
        )
    return found


def notes_shadows(text: str, given: dict[str, Given], where: str) -> list[str]:
    """``shadows`` for a notes file's ``python`` blocks: their ``>>>`` examples, one module (each
    example parsed alone, numbered by the file's lines)."""
    found = []
    for ex in doctest.DocTestParser().get_examples(python_blocks_only(text)):
        found += shadows(ex.source, given, where, line_offset=ex.lineno)
    return found


def stub_sources() -> dict[str, str]:
    return {p.relative_to(REPO_ROOT).as_posix(): p.read_text(encoding="utf-8") for p in STUBS}


def student_names() -> set[str]:
    """``STUDENT_NAMES`` and every parameter name of the reference and the alternatives."""
    names = set(STUDENT_NAMES)
    for folder in ("solutions", "tests/alternatives"):
        for path in sorted((REPO_ROOT / folder).glob("[a-z]*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names |= {b.name for b in _bindings(tree) if b.how.endswith("parameter")}
    return names


@pytest.fixture(scope="module")
def given() -> dict[str, Given]:
    return given_names(stub_sources())


def test_the_given_names_are_read_from_the_stubs(given):
    """The reading finds what the stubs' given code uses: the argument checks' module, the given
    imports, a module-level name and a builtin that given lines read, and nothing else's."""
    assert given["argcheck"].kind == "import", given.get("argcheck")
    for name in ("CapturedGraph", "end_failed_capture", "capture_on_cpu", "ToyModel", "padded_size"):
        assert given[name].kind == "import", (name, given.get(name))
    assert given["fields"] == Given("import", "exercises/launch_model.py:53", "dataclasses")
    assert given["CUDAGraphMode"] == Given("module", "exercises/dispatch.py:158", "dispatch")
    assert given["len"].kind == "builtin"
    assert "args" not in given and "torch" not in given and "annotations" not in given


def _rel(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def test_no_function_binds_a_given_name(given):
    found = [s for path in CODE for s in shadows(path.read_text(encoding="utf-8"), given, _rel(path))]
    for path in NOTES:
        found += notes_shadows(path.read_text(encoding="utf-8"), given, _rel(path))
    assert found == [], "given names bound where the given code reads them:\n" + "\n".join(found)


def test_no_plausible_student_name_is_given(given):
    names = student_names()
    assert {"args", "kwargs", "x", "fn", "n", "fn_args", "static_inputs"} <= names
    assert sorted(names & set(given)) == [], "a student would plausibly shadow these given names"


def test_the_old_name_breaks_the_rule():
    """With the stubs' old ``from coursekit import args``, ``args`` is a given name that a
    student plausibly binds, and the alternative of exercise 7 (``count_kernels(fn, *args)``) and
    the public tests (``@pytest.mark.parametrize("args, name", ...)``) bind it: both rules fail."""
    old = {where: text.replace("import argcheck\n", "import args\n") for where, text in stub_sources().items()}
    given = given_names(old)
    assert given["args"].kind == "import" and "args" in student_names()
    alternative = REPO_ROOT / "tests" / "alternatives" / "fusion.py"
    found = shadows(alternative.read_text(encoding="utf-8"), given, _rel(alternative))
    assert any("function count_kernels() binds 'args' (a *parameter)" in s for s in found), found
    public = REPO_ROOT / "exercises" / "tests" / "test_fusion.py"
    assert any("binds 'args' (a parameter)" in s for s in shadows(public.read_text(encoding="utf-8"), given, "t.py"))


PLANTED = {
    "def f(*argcheck)": "def f(*argcheck):\n    return argcheck\n",
    "def f(**argcheck)": "def f(**argcheck):\n    return argcheck\n",
    "a parameter": "def f(x, argcheck=None):\n    return x\n",
    "a keyword-only parameter": "def f(*, argcheck):\n    return argcheck\n",
    "a lambda's parameter": "g = lambda argcheck: argcheck\n",
    "an assignment": "def f(x):\n    argcheck = x\n    return argcheck\n",
    "a tuple assignment": "def f(x):\n    a, (argcheck, b) = x\n    return a\n",
    "a for target": "def f(xs):\n    for argcheck in xs:\n        pass\n",
    "a with ... as": "def f(p):\n    with open(p) as argcheck:\n        return argcheck.read()\n",
    "a comprehension target": "def f(xs):\n    return [argcheck for argcheck in xs]\n",
    "an import in a function": "def f():\n    import argcheck\n    return argcheck\n",
    "an import as in a function": "def f():\n    from coursekit import toymodel as argcheck\n    return argcheck\n",
    "except ... as": "def f():\n    try:\n        pass\n    except ValueError as argcheck:\n        raise argcheck\n",
    "a walrus": "def f(x):\n    if (argcheck := x):\n        return argcheck\n",
    "a nested def": "def f():\n    def argcheck():\n        pass\n    return argcheck\n",
    "a global rebound in a function": "def f():\n    global argcheck\n    argcheck = None\n",
    "a match capture": "def f(x):\n    match x:\n        case [argcheck]:\n            return argcheck\n",
    "a module-level import of another module": "import argcheck\n",
    "a module-level assignment": "argcheck = None\n",
    "a builtin the given lines read": "def f(xs):\n    len = 3\n    return len\n",
    "a name of another stub's given code": "def f(x, CapturedGraph=None):\n    return x\n",
}


def planted_shadows(tmp_path: Path, stub: str, extra: str, given: dict[str, Given]) -> list[str]:
    """The stub's text with ``extra`` appended, written to a copy under ``tmp_path``, checked."""
    copy = tmp_path / stub
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text((REPO_ROOT / stub).read_text(encoding="utf-8") + "\n\n" + extra, encoding="utf-8")
    return shadows(copy.read_text(encoding="utf-8"), given, stub)


@pytest.mark.parametrize("what", PLANTED)
def test_a_planted_shadow_in_a_stub_is_reported(tmp_path, given, what):
    assert planted_shadows(tmp_path, "exercises/fusion.py", "", given) == []
    found = planted_shadows(tmp_path, "exercises/fusion.py", PLANTED[what], given)
    assert len(found) >= 1 and all("exercises/fusion.py:" in s for s in found), (what, found)


def test_a_planted_shadow_in_the_stubs_given_signature_is_reported(tmp_path, given):
    """Exercise 7's own GPU-only function, the one that broke: ``*fn_args`` renamed ``*argcheck``."""
    stub = REPO_ROOT / "exercises" / "fusion.py"
    text = stub.read_text(encoding="utf-8")
    assert text.count("*fn_args: object") == 1
    copy = tmp_path / "fusion.py"
    copy.write_text(text.replace("*fn_args: object", "*argcheck: object"), encoding="utf-8")
    found = shadows(copy.read_text(encoding="utf-8"), given, "exercises/fusion.py")
    assert len(found) == 1 and "function count_kernels() binds 'argcheck' (a *parameter)" in found[0], found


@pytest.mark.parametrize(
    "example",
    [
        ">>> import argcheck\n",
        ">>> def pick(*args):\n...     from coursekit import args as argcheck\n...     return argcheck.count('n', 1)\n",
        ">>> argcheck = [1, 2]\n",
    ],
)
def test_a_planted_shadow_in_a_notes_example_is_reported(tmp_path, given, example):
    chapter = REPO_ROOT / "notes" / "en" / "07-fusion.md"
    text = chapter.read_text(encoding="utf-8")
    assert notes_shadows(text, given, "notes/en/07-fusion.md") == []
    copy = tmp_path / "07-fusion.md"
    copy.write_text(text + "\n```python\n>>> from coursekit import argcheck\n" + example + "```\n", encoding="utf-8")
    found = notes_shadows(copy.read_text(encoding="utf-8"), given, "notes/en/07-fusion.md")
    assert len(found) == 1 and "binds 'argcheck'" in found[0], found
