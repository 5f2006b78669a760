"""Every rule a check enforces is written where the student reads it: the stub's docstring.

The demands are read from the checks themselves: every probe of every grader check (public and
hidden) and every public test (``exercises/tests``) that demands an error. Each demand is held
to the docstrings of what it calls (the functions and classes of the exercise module it reaches,
their methods included), and to the *rules* there that name its error type (a paragraph, or a
bulleted or numbered item on its own):

* its error type is there;
* **which argument**: one of the names the message must name, shortly after a naming word ("naming
  ``x``", "whose message names ``x``"), or "naming the argument" for the argument at fault; not the
  latter where the fault lies between arguments (a length that differs: the case's label says
  so), which must name the argument blamed in a sentence about how they must agree;
* **contents**: a string the message must contain (the words a failed capture's message must use)
  quoted in such a rule;
* **refused kinds**: a kind of value the check refuses (NaN, inf, a bool, a float for an int, a
  string for a number, a list for a tensor; told apart by the value the check passes and the
  stub's annotation of that argument) is said in such a rule;
* "a CUDA device is needed" demands a rule naming RuntimeError that mentions CUDA.

Where a check or test reads an error message in a way these collectors do not understand, the
test fails until it is taught (``GRADER_READERS``, ``TEST_READERS``). Demands that the docstrings
of files this test's owner may not edit do not meet yet are listed in ``PENDING`` with the fix;
fixing one makes ``test_pending_findings_are_pending`` fail: then delete its line. The test
proves it can fail: planted checks demanding unstated rules are reported.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from coursekit.course import EXERCISES
from coursekit.impl import REPO_ROOT, Implementation
from grader import probes
from grader.checks import Check, P
from grader.exercises import load_probes
from coursekit.course import MODULE_OF
from grader.judge import all_checks

STUBS = Implementation("exercises")
load_probes()
#: What a docstring may say instead of the argument's own name: the argument at fault, in general.
GENERIC = re.compile(r"naming\s+(the\s+argument|it\b|the\s+field|the\s+position)|names\s+the\s+(field|argument)")
#: A case whose label says this is about a relation between arguments (a length that differs).
RELATIONAL = re.compile(r"length|\bmore\b|\bfewer\b|\bthan\b", re.IGNORECASE)
#: A sentence about how arguments must agree (where it names the argument a mismatch blames).
ABOUT_A_RELATION = re.compile(r"\blengths?\b|\bas many\b|\bmatch|\bsame\b|\bshapes?\b", re.IGNORECASE)
#: How a rule says that a kind of value is refused.
KIND_WORDS = {
    "NaN": r"\bNaN\b",
    "inf": r"\binf\b|infinit|\bfinite\b",
    "bool": r"\bbools?\b",
    "not a bool": r"\bbools?\b",
    "not an int": r"\bints?\b|\bintegers?\b",
    "not a number": r"\bnumbers?\b",
    "not a tensor": r"\btensors?\b",
}
TESTS = REPO_ROOT / "exercises" / "tests"
GRADER = REPO_ROOT / "grader"
#: A value the contract test could not work out (a fixture, a tensor made on a GPU...).
UNKNOWN = type("Unknown", (), {"__repr__": lambda self: "<unknown>"})()


@dataclass(frozen=True)
class Demand:
    where: str  # the check and probe, or the public test and case
    module: str  # the exercise module
    reached: frozenset  # the module's names whose docstrings state the rule
    error: str = "ValueError"
    raises: tuple = ()  # the message must name one of these
    contents: tuple = ()  # the message must contain one of these (at the start of a word)
    kinds: frozenset = field(default_factory=frozenset)  # kinds of value refused
    cuda: bool = False  # "a CUDA device is needed"
    relational: bool = False  # the fault lies between arguments


# ----------------------------------------------------------------------------- the docstrings


def docstring_of(module: str, names) -> str:
    """The docstrings of ``names`` in the stub module, a class's methods and properties included."""
    stub = STUBS.module(module)
    texts = []
    for name in sorted(names):
        obj = getattr(stub, name, None)
        if obj is None:
            continue
        texts.append(inspect.getdoc(obj) or "")
        if inspect.isclass(obj):
            texts += [inspect.getdoc(v) or "" for v in vars(obj).values() if callable(v) or isinstance(v, property)]
    return "\n\n".join(t for t in texts if t)


def rules(doc: str) -> list[str]:
    """A docstring's rules: its paragraphs, each bulleted or numbered item on its own."""
    found = []
    for paragraph in re.split(r"\n\s*\n", doc):
        found += [p for p in re.split(r"\n(?=[ \t]*(?:[*-]|\d+\.)\s)", paragraph) if p.strip()]
    return found


def sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.;])\s+(?=[A-Z`(*])", text)


def _spelled(name: str) -> list[str]:
    """How a docstring may write an argument the message must name: ``inputs[1]`` is stated by
    a rule about ``inputs[i]``."""
    return [name, re.sub(r"\[\d+\]", "[i]", name)]


def _says_naming(doc: str, name: str) -> bool:
    """The docstring says that a message names ``name``: "naming ``name``", "naming ``a`` or
    ``name``", "whose message names ``name``"... (the name shortly after a naming word)."""
    for match in re.finditer(r"\bnam(e|es|ing)\b", doc):
        after = doc[match.end() : match.end() + 160]
        if any(re.search(rf"(?<![\w.]){re.escape(s)}(?!\w)", after) for s in _spelled(name)):
            return True
    return False


def _quotes(text: str, word: str) -> bool:
    """``text`` quotes a string (in double quotes) that starts with ``word``: "host sync" and
    ``".item()"`` quote ``host`` and ``item``; the code ``.item()`` quotes nothing."""
    return re.search(rf'"[^\w\s"]*{re.escape(word)}', text, re.IGNORECASE) is not None


def unstated_in(demand: Demand, doc: str) -> list[str]:
    """What ``demand`` asks that ``doc`` does not state, one line each."""
    where = demand.where
    if not doc:
        return [f"{where}: reaches nothing documented in exercises/{demand.module}.py"]
    problems = []
    if demand.cuda:
        if not any("CUDA" in r for r in rules(doc) if "RuntimeError" in r):
            problems.append(
                f"{where}: demands the 'a CUDA device is needed' RuntimeError; no rule "
                "naming RuntimeError mentions CUDA"
            )
    if not (demand.raises or demand.contents or demand.kinds):
        return problems
    stating = [r for r in rules(doc) if re.search(rf"\b{demand.error}\b", r)]
    if not stating:
        return problems + [f"{where}: demands {demand.error}; the docstring never says {demand.error}"]
    if demand.raises:
        names = " or ".join(demand.raises)
        if demand.relational:
            if not any(
                ABOUT_A_RELATION.search(s) and _says_naming(s, n)
                for r in stating
                for s in sentences(r)
                for n in demand.raises
            ):
                problems.append(
                    f"{where}: the {demand.error} must name {names} (the fault lies between "
                    "arguments); no sentence about how they must agree names the one blamed"
                )
        elif not any(GENERIC.search(r) or any(_says_naming(r, n) for n in demand.raises) for r in stating):
            problems.append(
                f"{where}: the {demand.error} must name {names}; no rule naming {demand.error} names any of them"
            )
    if demand.contents and not any(_quotes(r, w) for r in stating for w in demand.contents):
        problems.append(
            f"{where}: the {demand.error}'s message must contain a word starting with "
            f"{' or '.join(map(repr, demand.contents))}; no rule naming {demand.error} "
            "quotes one"
        )
    for kind in sorted(demand.kinds):
        if not any(re.search(KIND_WORDS[kind], r) for r in stating):
            problems.append(
                f"{where}: {kind} is refused ({demand.error}); no rule naming "
                f"{demand.error} says so ({KIND_WORDS[kind]})"
            )
    return problems


def unstated(demands) -> list[str]:
    problems = []
    for demand in demands:
        problems += unstated_in(demand, docstring_of(demand.module, demand.reached))
    return problems


# ----------------------------------------------------------------------------- kinds of value


def _parameters(module: str, names) -> dict[str, inspect.Parameter]:
    """The parameters of the stub's callables ``names`` (a class: its constructor and methods)."""
    stub, found = STUBS.module(module), {}
    for name in sorted(names):
        obj = getattr(stub, name, None)
        targets = [obj] if callable(obj) else []
        if inspect.isclass(obj):
            targets += [v for k, v in vars(obj).items() if inspect.isfunction(v) and not k.startswith("__")]
        for target in targets:
            try:
                parameters = inspect.signature(target).parameters
            except (TypeError, ValueError):
                continue
            for p in parameters.values():
                found.setdefault(p.name, p)
    return found


def kinds_of(value, annotation) -> set[str]:
    """The kinds of value in ``value`` that an argument annotated ``annotation`` refuses by kind:
    NaN and inf (a number refused for being one), a bool (not a number), a float for an int (one
    at least 1: a smaller one may be refused for its size), a string or None for a number, and
    anything but a tensor for a tensor."""
    if value is UNKNOWN:
        return set()
    annotation = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    element = re.search(r"(?:Sequence|Iterable|list|tuple)\[([^\]]*)\]", annotation)
    if isinstance(value, (list, tuple)) and element:
        return set().union(set(), *(kinds_of(v, element.group(1)) for v in value))
    words = set(re.findall(r"\w+", re.sub(r"\[.*\]", "", annotation)))
    if isinstance(value, bool):
        return set() if "bool" in words else {"bool"}
    if "bool" in words and not words & {"int", "float"}:
        return {"not a bool"}
    if isinstance(value, float) and math.isnan(value):
        return {"NaN"}
    if isinstance(value, float) and math.isinf(value):
        return {"inf"}
    if "Tensor" in words:
        return set() if isinstance(value, torch.Tensor) else {"not a tensor"}
    if "int" in words and "float" not in words:
        if (isinstance(value, float) and value >= 1) or isinstance(value, str) or value is None:
            return {"not an int"}
    elif "float" in words and (isinstance(value, str) or value is None):
        return {"not a number"}
    return set()


def _named_kinds(values: dict, parameters: dict[str, inspect.Parameter], names) -> set[str]:
    """The kinds refused among the values of the arguments the message must name."""
    found = set()
    for name in names:
        base, index = (
            re.fullmatch(r"(\w+)(?:\[(\d+)\])?", name).groups()
            if re.fullmatch(r"\w+(\[\d+\])?", name)
            else (None, None)
        )
        if base not in values or base not in parameters:
            continue
        p, value = parameters[base], values[base]
        items = [value]
        if p.kind is inspect.Parameter.VAR_POSITIONAL and isinstance(value, tuple):
            items = list(value) if index is None else list(value[int(index) : int(index) + 1])
        for item in items:
            found |= kinds_of(item, p.annotation)
    return found


def _label_kinds(label: str) -> set[str]:
    """The kinds a probe's label shows (``DecodeStep(bandwidth_bps=inf)``, ``kernel 1 = nan``)."""
    found = set()
    if re.search(r"\bnan\b", label, re.IGNORECASE):
        found.add("NaN")
    if re.search(r"\binf\b", label):
        found.add("inf")
    if re.search(r"\b(True|False)\b", label):
        found.add("bool")
    return found


# ----------------------------------------------------------------------------- the grader's demands


def _reached(fn, seen: set[str] | None = None) -> set[str]:
    """The names a probe reads off the module under test (``mod.X``), through the probes'
    helper functions too."""
    seen = set() if seen is None else seen
    source = inspect.getsource(fn)
    names = set(re.findall(r"\bmod\.(\w+)", source))
    for helper in set(re.findall(r"\b(\w+)\(", source)):
        target = fn.__globals__.get(helper)
        ours = inspect.isfunction(target) and (
            target.__module__ == probes.__name__ or target.__module__.startswith("grader.exercises.")
        )
        if helper not in seen and ours:
            seen.add(helper)
            names |= _reached(target, seen)
    return names


def _closure_words(fn, seen: set | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """``(error type, words)`` for every compare function in ``fn``'s closures that holds the
    words a message must use (a free variable ``words``), with the error type it checks for."""
    seen = set() if seen is None else seen
    found = []
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if name == "words" and isinstance(value, tuple) and all(isinstance(w, str) for w in value):
            errors = [
                c
                for c in fn.__code__.co_consts
                if isinstance(c, str) and re.fullmatch(r"[A-Z]\w*Error", c) and c != "NotImplementedError"
            ]
            found += [(e, value) for e in errors[:1]]
        elif inspect.isfunction(value) and value not in seen:
            seen.add(value)
            found += _closure_words(value, seen)
    return found


def probe_demands(checks: list[Check]) -> list[Demand]:
    demands = []
    for check in checks:
        module = MODULE_OF[check.exercise]
        for probe in check.probes:
            if not probe.raises:
                continue
            reached = frozenset(_reached(probes.PROBES[probe.probe]))
            values = {**probe.args, **(probe.args.get("kwargs") or {})}
            kinds = _label_kinds(probe.label) | _named_kinds(values, _parameters(module, reached), probe.raises)
            demands.append(
                Demand(
                    f"{check.id} ({probe.label})",
                    module,
                    reached,
                    probe.error,
                    probe.raises,
                    kinds=frozenset(kinds),
                    relational=bool(RELATIONAL.search(probe.label)),
                )
            )
        if check.compare is not None and inspect.isfunction(check.compare):
            words = _closure_words(check.compare)
            asking = [p for p in check.probes if not p.raises]
            reached = frozenset().union(*(_reached(probes.PROBES[p.probe]) for p in asking))
            for error, contents in words:
                demands.append(Demand(f"{check.id} (its compare's words)", module, reached, error, contents=contents))
    return demands


# ----------------------------------------------------------------------------- the public tests' demands

#: Functions of the public tests that check an error some other way than ``check_rejects`` and
#: ``check_says_cuda_is_needed``: ``(file, function) -> demands``, read from the test's own data.
TEST_READERS = {
    ("test_capture.py", "check_capture_fails"): lambda m: [
        Demand(
            f"exercises/tests/test_capture.py::CANNOT_CAPTURE[{kind!r}]",
            "capture",
            frozenset({"capture"}),
            "RuntimeError",
            contents=tuple(words),
        )
        for kind, (_fn, _numel, _seed, words, _what) in m.CANNOT_CAPTURE.items()
    ],
}
#: Calls that demand an error of the code under test (or read its message).
ERROR_CALLS = {"check_rejects", "check_says_cuda_is_needed", "raises", "names_argument", "says_cuda_is_needed"}


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def _marker_module(test_module) -> str | None:
    marks = getattr(test_module, "pytestmark", [])
    for mark in marks if isinstance(marks, list) else [marks]:
        for e in EXERCISES:
            if mark.name == e.marker:
                return e.module
    return None


def _cases(fn) -> list[tuple[dict, str]]:
    """``(params, id)`` of every case of a test function's ``parametrize`` marks."""
    cases = [({}, "")]
    for mark in reversed([m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]):
        names = mark.args[0]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        grown = []
        for (params, label), value in itertools.product(cases, mark.args[1]):
            value = (
                value.values
                if hasattr(value, "marks") and hasattr(value, "values")
                else ((value,) if len(names) == 1 else value)
            )
            shown = "-".join(str(v) if isinstance(v, (str, int, float)) else repr(v)[:40] for v in value)
            grown.append(({**params, **dict(zip(names, value))}, f"{label}[{shown}]" if label else f"[{shown}]"))
        cases = grown
    return cases


def _eval(node: ast.AST, namespace: dict):
    try:
        return eval(compile(ast.Expression(node), "<test>", "eval"), namespace)  # noqa: S307 - an expression of the repository's own tests
    except Exception:  # noqa: BLE001 - a fixture, a GPU tensor on a CPU...: not known here
        return UNKNOWN


def _callee(call: ast.Call, module: str, source: str) -> tuple[set[str], object, bool]:
    """What a ``check_rejects`` lambda calls in the stub: ``(names reached, callable, is a method)``."""
    stub, f = STUBS.module(module), call.func
    modules = {e.module for e in EXERCISES}
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules:
        obj = getattr(STUBS.module(f.value.id), f.attr, None)
        return ({f.attr} if obj is not None else set()), obj, False
    attr = f.attr if isinstance(f, ast.Attribute) else "__call__"
    classes = [
        n for n, c in vars(stub).items() if inspect.isclass(c) and c.__module__ == stub.__name__ and attr in vars(c)
    ]
    named = [n for n in classes if re.search(rf"\b{n}\b", source)]
    classes = named or classes
    target = getattr(getattr(stub, classes[0]), attr) if len(classes) == 1 else None
    return set(classes), target, True


def _values(call: ast.Call, target, method: bool, namespace: dict) -> dict:
    """The arguments of ``call`` bound to ``target``'s parameters, as far as they are known."""
    if target is None:
        return {}
    args, kwargs = [UNKNOWN] if method else [], {}
    for a in call.args:
        if isinstance(a, ast.Starred):
            value = _eval(a.value, namespace)
            if value is UNKNOWN:
                break
            args += list(value)
        else:
            args.append(_eval(a, namespace))
    for k in call.keywords:
        value = _eval(k.value, namespace)
        if k.arg is None:
            kwargs.update(value if isinstance(value, dict) else {})
        else:
            kwargs[k.arg] = value
    try:
        return dict(inspect.signature(target).bind_partial(*args, **kwargs).arguments)
    except TypeError:
        return {}


def _assigned(fn_node: ast.FunctionDef, line: int, namespace: dict, path: Path) -> dict:
    """``namespace`` with the test's assignments before ``line`` run in it, where they can run
    here (one that needs a fixture cannot). Only the test's own names are written: an item of a
    module's dict never (``kwargs[name] = bad`` only once ``kwargs`` is the test's own)."""
    local = set()
    for statement in fn_node.body:
        if statement.lineno >= line:
            break
        if not isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names = [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        own = all(isinstance(t, (ast.Name, ast.Tuple, ast.List)) for t in targets) or all(n.id in local for n in names)
        if not own:
            continue
        try:
            exec(compile(ast.Module([statement], []), str(path), "exec"), namespace)  # noqa: S102 - a statement of the repository's own tests
        except Exception:  # noqa: BLE001 - depends on a fixture: not known here
            continue
        local |= {n.id for n in names}
    return namespace


def _enclosing(tree: ast.Module) -> dict[ast.AST, str]:
    """Each node of a module -> the name of the top-level function it is in ("" outside any)."""
    owner = {}
    for top in tree.body:
        name = top.name if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)) else ""
        for node in ast.walk(top):
            owner[node] = name
    return owner


def _test_module(path: Path):
    """The public test module at ``path`` (a copy elsewhere is loaded from its own file)."""
    if path.parent == TESTS:
        return importlib.import_module(f"exercises.tests.{path.stem}")
    spec = importlib.util.spec_from_file_location(f"exercises.tests.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def public_test_demands(folder: Path = TESTS) -> tuple[list[Demand], list[str]]:
    """The public tests' demands, and the error checks this test cannot read (one line each)."""
    demands, unread = [], []
    for path in sorted(folder.glob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        owner = _enclosing(tree)
        test_module = _test_module(path)
        module = _marker_module(test_module)
        readers = {fn for (file, fn) in TEST_READERS if file == path.name}
        for file, fn in TEST_READERS:
            if file == path.name:
                demands += TEST_READERS[(file, fn)](test_module)
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _called(node) in ERROR_CALLS):
                continue
            if _called(node) == "raises" and not (
                isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") == "pytest"
            ):
                continue
            fn_name = owner.get(node, "")
            if fn_name in readers:
                continue
            where = f"exercises/tests/{path.name}:{node.lineno}"
            if (
                _called(node) not in ("check_rejects", "check_says_cuda_is_needed")
                or not fn_name.startswith("test_")
                or module is None
                or not node.args
                or not isinstance(node.args[0], ast.Lambda)
                or not isinstance(node.args[0].body, ast.Call)
            ):
                unread.append(f"{where} ({fn_name or 'module level'}): {ast.unparse(node)[:120]}")
                continue
            fn_node, fn = functions[fn_name], getattr(test_module, fn_name)
            call = node.args[0].body
            fn_source = ast.get_source_segment(source, fn_node)
            reached, target, method = _callee(call, module, fn_source)
            for params, case in _cases(fn):
                namespace = _assigned(fn_node, node.lineno, {**vars(test_module), **params}, path)
                at = f"{where} {fn_name}{case}"
                if _called(node) == "check_says_cuda_is_needed":
                    demands.append(Demand(at, module, frozenset(reached), "RuntimeError", cuda=True))
                    continue
                names = _eval(node.args[1], namespace) if len(node.args) > 1 else UNKNOWN
                error = next((k.value for k in node.keywords if k.arg == "error"), None)
                error = "ValueError" if error is None else getattr(_eval(error, namespace), "__name__", "?")
                if names is UNKNOWN or error == "?":
                    unread.append(f"{at}: cannot tell which argument or error it demands")
                    continue
                names = (names,) if isinstance(names, str) else tuple(names)
                values = _values(call, target, method, namespace)
                kinds = _named_kinds(values, _parameters(module, reached), names)
                label = " ".join(v for v in params.values() if isinstance(v, str))
                demands.append(
                    Demand(
                        at,
                        module,
                        frozenset(reached),
                        error,
                        names,
                        kinds=frozenset(kinds),
                        relational=bool(RELATIONAL.search(label)),
                    )
                )
    return demands, unread


# ----------------------------------------------------------------------------- readers the grader has

#: Functions of the grader's checks that read an error's message, and what reads their demand
#: here: a new one fails ``test_every_message_the_checks_read_is_understood`` until it is taught.
GRADER_READERS = {
    ("checks.py", "raised"): "reports a message; demands nothing",
    ("checks.py", "expects_error"): "probe.raises: probe_demands",
    ("exercises/capture.py", "capture_failure"): "records the message for its check's compare",
    ("exercises/capture.py", "checks.<locals>.failure.<locals>.compare"): "its words: _closure_words",
}


def grader_readers() -> set[tuple[str, str]]:
    """``(file, function qualname)`` of every function of the checks that reads a message."""
    found = set()
    files = [
        GRADER / "checks.py",
        GRADER / "probes.py",
        *sorted((GRADER / "exercises").glob("*.py")),
        *sorted((GRADER / "hidden").glob("*.py")),
    ]
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(node, qualname):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{qualname}.<locals>.{child.name}" if qualname else child.name
                    own = [n for n in ast.walk(child) if _reads_message(n) and _innermost(child, n)]
                    if own:
                        found.add((path.relative_to(GRADER).as_posix(), name))
                    visit(child, name)
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{qualname}.{child.name}" if qualname else child.name)
                else:
                    visit(child, qualname)

        visit(tree, "")
    return found


def _reads_message(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value == "message"
    if isinstance(node, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value == "message" for k in node.keys)
    return isinstance(node, ast.Call) and _called(node) in ERROR_CALLS - {"raises"} | {"_names_missing_cuda"}


def _innermost(function: ast.AST, node: ast.AST) -> bool:
    """``node`` is in ``function``'s own body, not in a function nested in it."""
    for inner in ast.walk(function):
        if inner is not function and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if any(n is node for n in ast.walk(inner)):
                return False
    return True


# ----------------------------------------------------------------------------- what is pending

#: Findings in files this test's owner may not edit: ``(exercise module, the finding's start)``
#: -> the fix. Fixing one makes ``test_pending_findings_are_pending`` fail: then delete its line.
PENDING: dict[tuple[str, str], str] = {}


def _unnumbered(problem: str) -> str:
    """A finding without the line of its public test (``test_engine.py:512`` -> ``test_engine.py``)."""
    return re.sub(r"(\.py):\d+ ", r"\1 ", problem)


def _pending(problem: str) -> bool:
    return any(_unnumbered(problem).startswith(start) for _, start in PENDING)


@functools.cache
def all_demands() -> list[Demand]:
    demands, _ = public_test_demands()
    return probe_demands(all_checks()) + demands


# ----------------------------------------------------------------------------- the tests


def test_every_check_demands_only_what_the_docstrings_state():
    problems = [p for p in unstated(all_demands()) if not _pending(p)]
    assert not problems, "checks demand rules the stubs' docstrings do not state:\n" + "\n".join(problems)


def test_pending_findings_are_pending():
    problems = unstated(all_demands())
    fixed = [start for _, start in PENDING if not any(_unnumbered(p).startswith(start) for p in problems)]
    assert not fixed, "fixed: delete these lines of PENDING:\n" + "\n".join(fixed)


def test_every_message_the_checks_read_is_understood():
    """Every error check of the public tests and every message read by the grader's checks is one
    this test reads its demands from."""
    _, unread = public_test_demands()
    unknown = sorted(grader_readers() - set(GRADER_READERS))
    stale = sorted(set(GRADER_READERS) - grader_readers())
    assert not unread + unknown + stale, (
        "error checks whose demands this test cannot read (teach TEST_READERS or GRADER_READERS):\n"
        + "\n".join(
            unread
            + [f"grader/{f}: {q} reads an error message" for f, q in unknown]
            + [f"GRADER_READERS lists grader/{f}: {q}, which reads no message" for f, q in stale]
        )
    )


def test_the_collectors_find_the_known_demands():
    """The collectors see what the checks demand (if they read nothing, nothing would fail)."""
    demands = all_demands()
    found = {(d.module, d.error, tuple(sorted(d.kinds)), d.contents) for d in demands}
    assert ("static_runner", "TypeError", (), ()) in found
    assert any(d.module == "capture" and "host" in d.contents and d.where.startswith("exercises/") for d in demands)
    assert any(d.module == "capture" and "copy" in d.contents and d.where.startswith("ex3.") for d in demands)
    for module, kind in [
        ("launch_model", "inf"),
        ("launch_model", "bool"),
        ("tradeoffs", "NaN"),
        ("dispatch", "not an int"),
        ("tradeoffs", "not a bool"),
        ("tradeoffs", "not a number"),
        ("fusion", "not a tensor"),
        ("capture", "not a tensor"),
    ]:
        assert any(d.module == module and kind in d.kinds for d in demands), (module, kind)
    assert any(d.module == "engine" and d.relational and d.where.startswith("exercises/") for d in demands)


# --- it can fail: checks planted with rules their docstrings do not state are reported

#: A docstring that states a plain rule, against which the planted checks below are held.
PLAIN = (
    "Fit a line.\n\nSequences of different lengths -> ValueError naming ``n_kernels`` or "
    "``step_ms``; fewer than two distinct counts -> ValueError naming ``n_kernels``."
)


def _planted(*probes_, compare=None) -> list[Demand]:
    """The demands of a planted exercise-1 check of ``fit`` probes (read as the real ones are)."""
    return probe_demands([Check("ex1", "planted", "a rule nobody wrote down", list(probes_), compare=compare)])


@pytest.mark.parametrize("error, names", [("KeyError", ("n_kernels",)), ("ValueError", ("bogus_argument",))])
def test_an_unstated_rule_is_caught(error, names):
    planted = _planted(
        P("fit", "fit_launch_model([1, 1], [1.0, 2.0])", names, error=error, n_kernels=[1, 1], step_ms=[1.0, 2.0])
    )
    assert unstated(planted), f"a check demanding {error} naming {names} went unnoticed"
    assert [d.reached for d in planted] == [frozenset({"fit_launch_model"})]


def test_an_unstated_argument_is_caught():
    """A check blaming an argument the rule does not name; a generic "naming the argument" states
    a plain refusal, not which argument of several a length mismatch blames."""
    (demand,) = _planted(P("fit", "fit_launch_model([1, 2], [1.0])", "step_ms", n_kernels=[1, 2], step_ms=[1.0]))
    assert not unstated_in(demand, PLAIN)
    (demand,) = _planted(P("fit", "fit_launch_model([1, 1], [1.0])", "bogus", n_kernels=[1, 1], step_ms=[1.0]))
    assert any("must name bogus" in p for p in unstated_in(demand, PLAIN)), unstated_in(demand, PLAIN)
    (demand,) = _planted(
        P("fit", "lengths: fit_launch_model([1, 2], [1.0])", "step_ms", n_kernels=[1, 2], step_ms=[1.0])
    )
    assert demand.relational and not unstated_in(demand, PLAIN)
    generic = "Sequences of different lengths -> ValueError naming the argument."
    assert any("lies between arguments" in p for p in unstated_in(demand, generic))
    apart = "Sequences of different lengths -> ValueError.\n\nA bad count -> ValueError naming ``step_ms``."
    assert unstated_in(demand, apart)


@pytest.mark.parametrize(
    "label, values, kind",
    [
        ("fit_launch_model([1, True], [1.0, 2.0])", {}, "bool"),
        ("fit_launch_model([1, nan], [1.0, 2.0])", {}, "NaN"),
        ("fit_launch_model([1, 2], [1.0, inf])", {}, "inf"),
        ("fit_launch_model(...)", {"n_kernels": [1, True]}, "bool"),
    ],
)
def test_an_unstated_kind_is_caught(label, values, kind):
    """A kind of value refused by a planted check (its label, or its value and the stub's
    annotation ``Sequence[float]``) is reported until a rule naming the error says it."""
    (demand,) = _planted(
        P("fit", label, ("n_kernels", "step_ms"), **{"n_kernels": [1, 2], "step_ms": [1.0, 2.0], **values})
    )
    assert kind in demand.kinds
    assert any(f"{kind} is refused" in p for p in unstated_in(demand, PLAIN)), unstated_in(demand, PLAIN)
    stated = PLAIN + " A NaN, inf or bool count or time -> ValueError naming it."
    assert not unstated_in(demand, stated)


def test_a_float_for_an_int_is_a_kind():
    """dispatch(2.0): a float of at least 1 for an argument annotated ``int`` is refused for its
    kind; a negative one may be refused for its sign."""
    assert kinds_of(2.0, "int") == {"not an int"} and kinds_of(-2.5, "int") == set()
    assert kinds_of([1, 2.5], "Iterable[int]") == {"not an int"} and kinds_of(2.0, "float") == set()
    assert kinds_of(1, "bool") == {"not a bool"} and kinds_of([1.0], "torch.Tensor") == {"not a tensor"}


def test_an_unstated_message_content_is_caught():
    """A planted compare demanding a word in the message (a free variable ``words``, as exercise
    3's failed-capture check has) is reported until a rule naming its error quotes one."""

    def failure(words):
        def compare(probe, got, expected):
            ok = "RuntimeError" in got.error["types"] and any(w in got.error["message"] for w in words)
            return None if ok else "no"

        return compare

    (demand,) = [
        d
        for d in _planted(
            P("fit", "fit_launch_model([1, 2], [1.0, 2.0])", n_kernels=[1, 2], step_ms=[1.0, 2.0]),
            compare=failure(("launch",)),
        )
        if d.contents
    ]
    assert (demand.error, demand.contents) == ("RuntimeError", ("launch",))
    doc = "A bad fit -> RuntimeError saying why (the launch it looks like)."
    assert any("must contain" in p for p in unstated_in(demand, doc)), unstated_in(demand, doc)
    assert any("must contain" in p for p in unstated_in(demand, "A bad fit -> RuntimeError; see ``launch``."))
    assert not unstated_in(demand, 'A bad fit -> RuntimeError whose message says "launch".')


def test_a_rule_in_another_error_does_not_count():
    """The TypeError's rule must name what its message names: a ValueError's naming nearby does not."""
    demand = Demand("planted (count)", "static_runner", frozenset({"GraphRunner"}), "TypeError", ("inputs",))
    doc = "* The number of inputs must match: TypeError otherwise.\n* A bad input: ValueError naming ``inputs[i]``."
    assert unstated_in(demand, doc)
    assert not unstated_in(demand, doc.replace("TypeError otherwise", "TypeError naming ``inputs``"))


def test_an_unread_error_check_is_caught(tmp_path):
    """A public test that checks an error in a way the collectors do not read is reported, and so
    is the demand of a public test planted with a kind its docstring does not state."""
    source = (TESTS / "test_fusion.py").read_text(encoding="utf-8")
    (tmp_path / "test_fusion.py").write_text(
        source + "\n\ndef helper_that_checks(fusion):\n    with pytest.raises(ValueError, match='dtype'):\n"
        "        fusion.chain_hbm_bytes(1, 1, 0, fused=False)\n"
        "\n\n@pytest.mark.parametrize('bad', [float('nan')])\ndef test_planted(fusion, bad):\n"
        "    check_rejects(lambda: fusion.chain_hbm_bytes(bad, 8, 4, fused=False), 'n_ops', 'planted')\n",
        encoding="utf-8",
    )
    demands, unread = public_test_demands(tmp_path)
    assert any("helper_that_checks" in line for line in unread), unread
    planted = [d for d in demands if "test_planted" in d.where]
    assert [(d.reached, d.raises, d.kinds) for d in planted] == [
        (frozenset({"chain_hbm_bytes"}), ("n_ops",), frozenset({"NaN"}))
    ]
    assert any("NaN is refused" in p for p in unstated(planted)), unstated(planted)
