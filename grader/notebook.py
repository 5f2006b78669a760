"""The course as an nbgrader notebook, generated from the modules (one source of truth).

``python -m grader notebook build`` writes ``course/source/launch_tax/launch_tax.ipynb`` from:

* ``exercises/<module>.py`` (what the student sees: docstrings, signatures, stubs) merged with
  ``solutions/<module>.py`` (the reference bodies, inside ``### BEGIN SOLUTION`` regions), one
  ``%%writefile student/<module>.py`` answer cell per module;
* the grader's checks and ``grader/rubric.toml``: one autograded test cell per check the notebook
  can run (the CPU checks), worth the rubric's points; hidden checks inside ``### BEGIN HIDDEN
  TESTS`` regions. A test cell calls ``grader.notebook_checks.check``, which grades the written
  module files in a sandboxed worker, exactly as ``python -m grader grade`` does;
* the lesson's three self-test questions (its section 9) as manually graded answer cells.

The merge keeps every line of the stub module and puts the reference's body of each stubbed
function in a solution region just before the stub's ``raise NotImplementedError(...)`` line
(followed by ``return`` when the body could fall through), so nbgrader's ``generate_assignment``
(code stub ``# YOUR CODE HERE``, set in ``course/nbgrader_config.py``) gives back the stub module
itself. What only the reference has (helpers, imports) goes in one region at the end of its
module or class. ``tests/test_notebook.py`` fails when the committed notebook and the modules
drift apart.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

from coursekit.course import EXERCISES
from coursekit.impl import REPO_ROOT
from grader.submission import writefile_module

ASSIGNMENT = "launch_tax"
COURSE_DIR = REPO_ROOT / "course"
SOURCE_NOTEBOOK = COURSE_DIR / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
PACKAGE = "student"  # the folder the answer cells write, a package (modules import each other)
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
CODE_STUB = "# YOUR CODE HERE"  # ClearSolutions.code_stub in course/nbgrader_config.py


class DriftError(ValueError):
    """The stub and reference modules no longer line up (names, signatures, given code)."""


def writefile_line(module: str) -> str:
    return f"%%writefile {PACKAGE}/{module}.py"


# ----------------------------------------------------------------------------- merging modules


def _docstring_len(body: list[ast.stmt]) -> int:
    first = body[0] if body else None
    is_doc = (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    )
    return 1 if is_doc else 0


def _is_placeholder(statements: list[ast.stmt]) -> bool:
    """A stub's body: only ``pass`` and ``raise NotImplementedError(...)``."""

    def raises_not_implemented(s: ast.stmt) -> bool:
        exc = s.exc.func if isinstance(getattr(s, "exc", None), ast.Call) else getattr(s, "exc", None)
        return isinstance(s, ast.Raise) and isinstance(exc, ast.Name) and exc.id == "NotImplementedError"

    return bool(statements) and all(isinstance(s, ast.Pass) or raises_not_implemented(s) for s in statements)


def _first_line(node: ast.stmt, lines: list[str], floor: int) -> int:
    """0-based first line of ``node`` with its decorators and the comment lines just above it,
    never above ``floor``."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while start > floor and lines[start - 1].strip().startswith("#"):
        start -= 1
    return start


def _reindent(text_lines: list[str], old: int, new: int) -> list[str]:
    if old == new:
        return text_lines
    out = []
    for line in text_lines:
        if line.strip() and not line.startswith(" " * old):
            raise DriftError(f"cannot re-indent line {line!r}")
        out.append(" " * new + line[old:] if line.strip() else "")
    return out


def _dump(node: ast.AST | list | None) -> str:
    if isinstance(node, list):
        return repr([_dump(n) for n in node])
    return "None" if node is None else ast.dump(node, annotate_fields=True, include_attributes=False)


def _bound_names(statements: list[ast.stmt]) -> set[str]:
    names = set()
    for s in statements:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in s.names}
    return names


@dataclass
class _Insert:
    at: int  # 0-based line index the lines go before
    lines: list[str]
    depth: int = 0  # at one position, an outer block's region goes after an inner one's


class _Merger:
    """Splices the reference into the stub, keeping every stub line where it is.

    A reference-only statement (helper, constant, import) is placed after the stub's copy of
    the statement that precedes it in the reference, and never among the imports, so what the
    reference defines at import time exists in the same order (``SEED_ROWS`` building
    ``DecodeStep`` objects needs the validation helper above it)."""

    def __init__(self, module: str, stub: str, reference: str):
        self.module = module
        self.stub_lines = stub.splitlines()
        self.ref_lines = reference.splitlines()
        self.stub_tree, self.ref_tree = ast.parse(stub), ast.parse(reference)
        self.inserts: list[_Insert] = []

    def where(self, what: str) -> str:
        return f"exercises/{self.module}.py vs solutions/{self.module}.py: {what}"

    def merge(self) -> str:
        self._merge_block(self.stub_tree, self.ref_tree, indent=0, depth=0, scope="module")
        lines = list(self.stub_lines)
        for insert in sorted(self.inserts, key=lambda i: (-i.at, i.depth)):
            lines[insert.at : insert.at] = insert.lines
        return "\n".join(lines) + "\n"

    def _merge_block(self, stub_node, ref_node, indent: int, depth: int, scope: str) -> None:
        doc = _docstring_len(stub_node.body)
        stub_body = stub_node.body[doc:]
        if doc:
            top = stub_node.body[0].end_lineno
        elif isinstance(stub_node, ast.Module):
            top = 0
        else:
            top = stub_body[0].lineno - 1
        stub_defs = {
            s.name: i
            for i, s in enumerate(stub_body)
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
        stub_dumps = {}
        for i, s in enumerate(stub_body):
            stub_dumps.setdefault(_dump(s), i)
        imports = [i for i, s in enumerate(stub_body) if isinstance(s, (ast.Import, ast.ImportFrom))]
        last_import = imports[-1] if imports else -1
        bound = _bound_names(stub_body)
        matched, groups = set(), {}  # groups: stub index it follows -> reference-only texts
        anchor = -1
        ref_body = ref_node.body[_docstring_len(ref_node.body) :]
        floor = 0
        for s in ref_body:
            start = _first_line(s, self.ref_lines, floor)
            floor = s.end_lineno
            name = getattr(s, "name", None)
            text = None
            if name is not None and name in stub_defs:
                anchor = stub_defs[name]
                matched.add(name)
                stub = stub_body[anchor]
                if type(stub) is not type(s):
                    raise DriftError(
                        self.where(
                            f"{scope}.{name} is a {type(stub).__name__} in one and a {type(s).__name__} in the other"
                        )
                    )
                if isinstance(s, ast.ClassDef):
                    self._merge_class(stub, s, depth + 1, f"{scope}.{name}")
                else:
                    self._merge_function(stub, s, f"{scope}.{name}")
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                missing = [a for a in s.names if (a.asname or a.name).split(".")[0] not in bound]
                if missing:
                    text = ast.unparse(type(s)(**{**{f: getattr(s, f) for f in s._fields}, "names": missing}))
            elif _dump(s) in stub_dumps:
                anchor = stub_dumps[_dump(s)]
            else:
                text = "\n".join(_reindent(self.ref_lines[start : s.end_lineno], s.col_offset, indent))
            if text is not None:
                groups.setdefault(max(anchor, last_import), []).append(text)
        lonely = sorted(set(stub_defs) - matched)
        if lonely:
            raise DriftError(self.where(f"{scope}: {', '.join(lonely)} only in the stub"))
        for after, texts in groups.items():
            at = stub_body[after].end_lineno if after >= 0 else top
            self.inserts.append(_Insert(at, self._region(texts, indent, at), depth))

    def _region(self, texts: list[str], indent: int, at: int) -> list[str]:
        """A solution region of reference-only statements, spaced like the code around it."""
        pad = " " * indent
        imports = ("import ", "from ")
        lines = [pad + BEGIN]
        for before, text in zip([None, *texts], texts):
            if before is not None and not (before.startswith(imports) and text.startswith(imports)):
                defines = any(line.startswith(("def ", "class ", "@", "async def ")) for line in text.splitlines())
                lines += [""] * (2 if indent == 0 and defines else 1)
            lines += text.splitlines()
        lines.append(pad + END)
        previous = self.stub_lines[at - 1] if at > 0 else ""
        if previous.strip() and not previous.lstrip().startswith(imports):
            lines = [""] * (2 if indent == 0 else 1) + lines
        elif previous.strip():
            lines = [""] + lines
        following = self.stub_lines[at] if at < len(self.stub_lines) else ""
        if following.strip():
            lines += [""] * (2 if indent == 0 else 1)
        return lines

    def _merge_class(self, stub: ast.ClassDef, ref: ast.ClassDef, depth: int, scope: str) -> None:
        for field in ("bases", "keywords", "decorator_list"):
            if _dump(getattr(stub, field)) != _dump(getattr(ref, field)):
                raise DriftError(self.where(f"class {scope}: its {field} differ"))
        indent = stub.body[-1].col_offset
        self._merge_block(stub, ref, indent, depth, scope)

    def _merge_function(self, stub, ref, scope: str) -> None:
        for field in ("args", "returns", "decorator_list"):
            if _dump(getattr(stub, field)) != _dump(getattr(ref, field)):
                raise DriftError(self.where(f"{scope}(): the {field} of the signature differ"))
        stub_rest = stub.body[_docstring_len(stub.body) :]
        ref_rest = ref.body[_docstring_len(ref.body) :]
        # The given lines (argument checks, ``# given``) come before the stub's placeholder; the
        # reference starts with the very same statements, and the rest of it is the solution.
        given = next((k for k in range(len(stub_rest)) if _is_placeholder(stub_rest[k:])), len(stub_rest))
        if [_dump(s) for s in stub_rest[:given]] != [_dump(s) for s in ref_rest[:given]]:
            what = "given code" if given == len(stub_rest) else f"given lines ({given} statements)"
            raise DriftError(self.where(f"{scope}() is {what} in the stub but differs in the reference"))
        if given == len(stub_rest):
            if len(ref_rest) != given:
                raise DriftError(self.where(f"{scope}() is given code in the stub but differs in the reference"))
            return
        placeholder, ref_rest_after = stub_rest[given:], ref_rest[given:]
        if not ref_rest_after:
            raise DriftError(self.where(f"{scope}() has no body in the reference"))
        start = placeholder[0].lineno - 1  # after the stub's comments: they introduce the region
        indent = placeholder[0].col_offset
        if given:
            ref_floor = ref_rest[given - 1].end_lineno
        else:
            ref_floor = ref.body[0].end_lineno if _docstring_len(ref.body) else ref.lineno
        stub_rest, ref_rest = placeholder, ref_rest_after
        ref_start = _first_line(ref_rest[0], self.ref_lines, ref_floor)
        body = _reindent(self.ref_lines[ref_start : ref_rest[-1].end_lineno], ref_rest[0].col_offset, indent)
        if not isinstance(ref_rest[-1], (ast.Return, ast.Raise)) and any(isinstance(s, ast.Raise) for s in stub_rest):
            body.append(" " * indent + "return")  # never fall through to the stub's raise
        pad = " " * indent
        self.inserts.append(_Insert(start, [pad + BEGIN, *body, pad + END]))


def merge_module(module: str, stub: str, reference: str) -> str:
    """The answer-cell text of ``module``: the stub with the reference in solution regions."""
    merged = _Merger(module, stub, reference).merge()
    ast.parse(merged)
    if content_lines(clear_solutions(merged)) != content_lines(stub):
        raise DriftError(f"{module}: clearing the merged module does not give the stub back")
    return merged


def clear_solutions(text: str) -> str:
    """What nbgrader's ClearSolutions makes of a code cell: every solution region becomes
    ``CODE_STUB``, indented like its ``BEGIN`` line."""
    out, inside = [], False
    for line in text.split("\n"):
        if BEGIN in line:
            if inside:
                raise ValueError("nested solution regions")
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + CODE_STUB)
        elif END in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("a solution region is not closed")
    return "\n".join(out)


def without_markers(text: str) -> str:
    """The merged module as the reference runs it: solution regions kept, markers dropped."""
    return "\n".join(line for line in text.split("\n") if line.strip() not in (BEGIN, END))


def content_lines(text: str) -> list[str]:
    """The lines that carry code or comments, without nbgrader's stub marks: what must be equal
    between a cleared answer cell and the stub module (blank lines may differ)."""
    return [line for line in text.split("\n") if line.strip() and line.strip() != CODE_STUB]


# ----------------------------------------------------------------------------- the notebook


@dataclass(frozen=True)
class SelfTestQuestion:
    id: str
    question: str
    model_answer: str


#: The lesson's section 9, in our words; points in grader/rubric.toml [self_test]. Each model
#: answer ends with its marking guide (what earns each point), for whoever grades by hand.
SELF_TEST = (
    SelfTestQuestion(
        "why_launch_tax_hurts_decode",
        "Why does the kernel launch overhead hurt decode but barely touch prefill? Use the sweep "
        "of chapter 2 (a chain of 200 kernels, each given more and more values): where does the "
        "graph's gain vanish, and why there?",
        "The launch cost tau is a fixed CPU cost per kernel; what matters is how it compares with "
        "each kernel's GPU time (its bytes over the bandwidth, plus nu, about 1.1 us on an H200, "
        "which every kernel pays, eager or in a graph). A decode step (one new token per "
        "sequence, memory-bound) launches hundreds of tiny kernels that finish before the CPU "
        "has launched the next one, so the step is launch-bound and N * tau (about 430 x 5 us = "
        "2.15 ms for a 7B model) is a real share of it. A prefill runs the same kernels over the "
        "whole prompt, each thousands of times larger, so the CPU runs ahead and the launches "
        "hide behind real work.\n"
        "The sweep shows it at fixed N = 200 with the H200's tau = 7.99 us and nu = 1.10 us: the "
        "graph gains about 7x (7.01x, pipeline) on 1,024-value kernels, and 1.00x once a kernel's "
        "own time plus nu reaches tau (about 3.7 million float32 values, 7.85 us of bytes): "
        "exercise 9's tau*. N does not decide; tau against each kernel's time does.\n\n"
        "Marking guide (2 points):\n"
        "- 1 point: tau is a fixed CPU cost per launch, and what counts is tau against each "
        "kernel's GPU time: the gain vanishes where a kernel (its own time plus nu) outlasts a "
        "launch, tau* (the launches hide behind kernels longer than tau).\n"
        "- 1 point: decode kernels are tiny (one token, memory-bound), so the GPU waits on the "
        "CPU and the graph gains much (about tau / nu, 7x in the sweep; or N * tau a real share "
        "of the step); prefill kernels are large (many tokens), past the turn, so the graph "
        "gains about nothing (1.00x; N * tau << T_compute). Numbers are welcome, not required; "
        "the additive model's figures (7.97x -> 1.06x) are right too when it is named.",
    ),
    SelfTestQuestion(
        "what_graphs_remove_and_need",
        "What does a CUDA graph remove, and what does it need in exchange?",
        "It removes the per-kernel CPU launch and dispatch cost: one submission replays all N "
        "captured kernels, so N * tau collapses to about tau. In exchange it needs static shapes "
        "and fixed memory addresses (vLLM captures one graph per batch-size bucket and pads each "
        "batch up to it), every step's inputs copied into the same static buffers, and a warm-up "
        "before capture. The captured buffers also cost VRAM, which is why vLLM has "
        "enforce_eager=True to turn graphs off.\n\n"
        "Marking guide (2 points):\n"
        "- 1 point: it removes the per-kernel CPU launch cost: one submission replays the N "
        "kernels (N * tau becomes about tau); the GPU work itself stays.\n"
        "- 1 point: any two of what it needs: static shapes (hence buckets and padding), fixed "
        "addresses (inputs copied into static buffers, not passed anew), a warm-up before "
        "capture, no CPU sync or data-dependent control flow inside, VRAM for the graphs (hence "
        "enforce_eager).",
    ),
    SelfTestQuestion(
        "quantized_model",
        "You quantize the weights and decode compute drops from 15 ms to 6 ms per step. Do CUDA "
        "graphs matter more or less now? Give numbers.",
        "It depends on how launches and kernels overlap, so say which model you use (exercises 1 "
        "and 9).\n"
        "Additive model (every launch adds tau to the step, T_eager = T_compute + N * tau, the "
        "lesson's): more. The launch tax N * tau (about 430 x 5 us = 2.15 ms) does not shrink with "
        "the weights, so it grows against the compute from 2.15 / 15 = 14% to 2.15 / 6 = 36% "
        "(against the whole eager step, 2.15 / 17.15 = 13% to 2.15 / 8.15 = 26%), and the graph "
        "speedup (T_compute + N tau) / (T_compute + tau) grows from about 1.14x to about 1.36x "
        "(the lesson's table: BF16 vs AWQ).\n"
        "Pipeline model (the CPU launches while the GPU runs; a launch hides behind any kernel "
        "longer than tau, exercise 9): not yet. The 430 kernels average 15 ms / 430 = 35 us and "
        "6 ms / 430 = 14 us, both longer than tau = 5 us, so the launches hide and the graph "
        "gains about 1.00x in both cases; but 6 ms is much nearer the CPU-bound turn (N * tau = "
        "2.15 ms, below which the GPU waits for the CPU and graphs pay off).\n\n"
        "Marking guide (2 points):\n"
        "- 1 point: the direction, with the model it follows from: more, because N * tau is fixed "
        "while the compute shrinks (additive); or no change yet, because each kernel is still "
        "longer than tau, though nearer the turn (pipeline). Either earns the point when the "
        "assumption is said.\n"
        "- 1 point: numbers that fit that model. Additive: the tax against the compute "
        "(14% -> 36%) or against the eager step (13% -> 26%), or the speedup 1.14x -> 1.36x, or "
        "the same with another stated N * tau (about 2 ms). Pipeline: the mean kernel (35 us -> "
        "14 us) against tau = 5 us, a speedup of about 1.00x, and where it turns (N * tau = "
        "2.15 ms).",
    ),
)

#: Interview questions for practice, not graded: the lesson's three (its section 7), then two of
#: the course's. answers.md lists them after the graded questions.
INTERVIEW_PRACTICE = (
    "Why is decode launch-bound while prefill is not?",
    "What does a CUDA graph remove, and what does it require?",
    "Why does a quantized model gain more from CUDA graphs?",
    "Fusion and graphs both cut launch cost: how do they differ (N fewer kernels vs N launches "
    "submitted once), and why does vLLM use both?",
    "What does enforce_eager trade, and when would you turn graphs off?",
)


def self_test_points() -> dict[str, float]:
    from grader.judge import RUBRIC

    data = tomllib.loads(RUBRIC.read_text(encoding="utf-8"))
    points = {k: float(v) for k, v in data.get("self_test", {}).items()}
    if set(points) != {q.id for q in SELF_TEST}:
        raise DriftError(
            f"grader/rubric.toml [self_test] lists {sorted(points)}, the notebook asks {[q.id for q in SELF_TEST]}"
        )
    return points


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _cell(kind: str, cell_id: str, source: str, nbgrader: dict | None = None) -> dict:
    cell = {"cell_type": kind, "id": cell_id, "metadata": {}, "source": _lines(source)}
    if kind == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    if nbgrader is not None:
        meta = {
            "grade": False,
            "grade_id": cell_id,
            "locked": False,
            "schema_version": 3,
            "solution": False,
            "task": False,
        }
        meta.update(nbgrader)
        cell["metadata"]["nbgrader"] = dict(sorted(meta.items()))
        if meta["locked"]:
            cell["metadata"].update({"deletable": False, "editable": False})
    return cell


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x


def _points(x: float) -> str:
    return f"{x:g} point" + ("" if x == 1 else "s")


def _title(stub: str) -> str:
    first = (ast.get_docstring(ast.parse(stub)) or "").splitlines()[0].strip().rstrip(".")
    return re.sub(r"^Exercise \d+\s*·\s*", "", first)


def build_notebook(root: Path = REPO_ROOT) -> dict:
    """The source notebook (solutions and hidden tests in), as a JSON-ready dict, from the
    ``exercises/`` and ``solutions/`` folders under ``root``."""
    from grader.judge import all_checks, load_rubric

    points = load_rubric()
    checks = [c for c in all_checks() if c.id in points]
    modules = [(e.number, e.module) for e in EXERCISES if (root / "exercises" / f"{e.module}.py").exists()]
    cpu_total = sum(points[c.id] for c in checks if not c.gpu)
    gpu_total = sum(points[c.id] for c in checks if c.gpu)
    questions = self_test_points()
    cells = [
        _cell("markdown", "intro", _intro(cpu_total, gpu_total, sum(questions.values()))),
        _cell("code", "setup", SETUP_CELL, {"locked": True}),
    ]
    for n, module in modules:
        stub = (root / "exercises" / f"{module}.py").read_text(encoding="utf-8")
        reference = (root / "solutions" / f"{module}.py").read_text(encoding="utf-8")
        mine = [c for c in checks if c.exercise == f"ex{n}"]
        here = [c for c in mine if not c.gpu]
        gpu = sum(points[c.id] for c in mine if c.gpu)
        head = (
            f"## Exercise {n} · {_title(stub)} · `{module}.py`\n\n"
            f"{sum(points[c.id] for c in mine):g} points: {sum(points[c.id] for c in here):g} "
            f"graded in this notebook"
        )
        head += (
            f", {gpu:g} by GPU checks (on a CUDA machine: `python -m grader grade "
            f"{ASSIGNMENT}.ipynb --gpu on`, or `python -m pytest exercises -m \"ex{n} and gpu\"`)."
            if gpu
            else "."
        )
        head += (
            f"\n\nWrite your code in the cell below: it is the module `{module}.py` "
            f"(the first line, `{writefile_line(module)}`, writes it; keep that line). "
            "The cells after it check it."
        )
        cells.append(_cell("markdown", f"ex{n}_intro", head))
        cells.append(
            _cell(
                "code",
                f"answer_{module}",
                writefile_line(module) + "\n" + merge_module(module, stub, reference).rstrip("\n"),
                {"solution": True},
            )
        )
        hidden_count = 0
        for c in here:
            if c.hidden:
                hidden_count += 1
                source = (
                    f"# A hidden check ({_points(points[c.id])} of exercise {n}): it runs when "
                    "your notebook is graded.\n"
                    f"{BEGIN_HIDDEN}\ncheck({c.id!r})\n{END_HIDDEN}"
                )
                cell_id = f"test_ex{n}_hidden_{hidden_count}"
            else:
                rule = textwrap.fill(c.rule, 96, initial_indent="# ", subsequent_indent="# ")
                source = f"{rule}\ncheck({c.id!r})"
                cell_id = f"test_{c.exercise}_{c.name}"
            cells.append(
                _cell("code", cell_id, source, {"grade": True, "locked": True, "points": _number(points[c.id])})
            )
    cells.append(_cell("markdown", "self_test_intro", SELF_TEST_INTRO))
    for i, q in enumerate(SELF_TEST, 1):
        # The question is a plain cell: nbgrader restores a deleted answer cell after the
        # previous graded cell, which a read-only question cell is not.
        cells.append(
            _cell(
                "markdown",
                f"question_{q.id}",
                f"**Question {i}** ({_points(questions[q.id])}, graded by hand). {q.question}",
            )
        )
        cells.append(
            _cell(
                "markdown",
                f"self_test_{q.id}",
                f"{BEGIN}\n{q.model_answer}\n{END}",
                {"grade": True, "solution": True, "points": _number(questions[q.id])},
            )
        )
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def dumps(notebook: dict) -> str:
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"


SETUP_CELL = f"""\
# Set-up (read-only). The answer cells write the package `{PACKAGE}/`; each test cell grades one
# rule of it with the course's grader, in a separate sandboxed process, as `python -m grader grade` does.
from grader.notebook_checks import check, start_fresh

start_fresh({PACKAGE!r})"""

SELF_TEST_INTRO = """\
## Self-test (graded by hand)

Answer each question in the cell below it, in a few sentences, with numbers from the lesson's
launch-overhead model where they help: T_eager = T_compute + N tau, T_graph = T_compute + tau."""


def _intro(cpu: float, gpu: float, manual: float) -> str:
    return f"""\
# Killing the decode launch tax: kernel fusion and CUDA graphs

Each exercise is one module of the course (`exercises/` in the course repository): read its
docstring, then replace each `raise NotImplementedError(...)` line with your code. The first line
of an answer cell (`%%writefile {PACKAGE}/<module>.py`) writes the cell into a module file: keep
it, and run the cell after each change. The test cells below it grade that file.

* **Points**: this notebook carries {cpu + manual:g} of the course's {cpu + gpu + manual:g}:
  {cpu:g} from the test cells (CPU checks; a few are hidden and run only when your notebook is
  graded) and {manual:g} from the self-test questions at the end (graded by hand). The
  exercises' GPU checks ({gpu:g} points) need a CUDA machine: they are graded there and added
  to your grade by the course staff, so the notebook's own total is {cpu + manual:g}.
* **How it is graded**: only the answer cells' module files and these test cells count. Code
  cells you add are for trying things out; the autograder does not run them, so everything your
  modules need must be in their answer cells.
* **Set-up**: the course repository installed (`pip install -e .` in it), then run the set-up
  cell once.
"""


# ----------------------------------------------------------------------------- filling notebooks


def answer_cells(notebook: dict) -> dict[str, dict]:
    """``{module: cell}``: the cell that writes each module (the last, if several do)."""
    found = {}
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code":
            module = writefile_module("".join(cell.get("source", "")))
            if module:
                found[module] = cell
    return found


def fill(notebook: dict, files: dict[str, str]) -> dict:
    """A copy of ``notebook`` whose answer cells hold ``files`` (``{module: source}``)."""
    notebook = json.loads(json.dumps(notebook))
    cells = answer_cells(notebook)
    unknown = sorted(set(files) - set(cells))
    if unknown:
        raise ValueError(f"NOTEBOOK: no answer cell for {', '.join(unknown)}")
    for module, source in files.items():
        cells[module]["source"] = _lines(writefile_line(module) + "\n" + source.rstrip("\n"))
    return notebook
