"""What a grading run writes: Gradescope's ``results.json`` (one test per check) and the terminal
report.

``results.json`` follows Gradescope's specification
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): top-level ``score``,
``execution_time``, ``output``, ``visibility``, ``stdout_visibility``, ``extra_data`` and
``tests``; one test per check, named ``exN · check_name``, numbered in rubric order (``5.2``:
exercise 5, second check), tagged with its exercise and ``gpu`` / ``hidden`` where they apply.
A public check's ``output`` says what was expected, what came back and the rule; a hidden one's
says only its rule and is visible ``after_published`` by default.

A check that was not run here is not a pass. The specification marks a test's ``score`` as
"optional, but required if not on top level submission", ``max_score`` as "optional" and
``status`` as "optional"; the top level always has ``score``. So a GPU check that could not run
(*pending*: graded in the GPU pass, which ``python -m grader merge`` joins) and the self-test
(*manual*: graded by hand) are written with none of the three, their name and output saying
so: Gradescope has nothing to show them as passed, and they count in no maximum.
``extra_data.state`` is ``"passed"``, ``"failed"``, ``"pending"`` or ``"manual"``.

``extra_data`` at the top holds the grading fingerprint (grader version and commit, the bundle's
digest, the rubric's, torch, CUDA, GPU, seed id, isolation and the protections that were off);
what a student sees (``output``) never names the grading machine's paths or its protections.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import textwrap

from coursekit.impl import REPO_ROOT
from grader.text import safe

VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
#: Paths of the grading machine a worker's message may carry (its sandbox folder, the grader's
#: own checkout): shown as placeholders.
_MACHINE_PATHS = [
    (re.compile(re.escape(tempfile.gettempdir()) + r"/launch-tax-box-[A-Za-z0-9_]+"), "<sandbox>"),
    (re.compile(re.escape(str(REPO_ROOT))), "<grader>"),
]


def scrub(text: str) -> str:
    """``text`` without the grading machine's paths."""
    for pattern, placeholder in _MACHINE_PATHS:
        text = pattern.sub(placeholder, text)
    return text


def check_number(exercise: str, index: int) -> str:
    return f"{exercise.removeprefix('ex')}.{index + 1}"


def test_entry(exercise: str, index: int, result, hidden_visibility: str = "after_published") -> dict:
    """One check's test, from a ``judge.CheckResult``."""
    check = result.check
    tags = [exercise] + (["gpu"] if check.gpu else []) + (["hidden"] if check.hidden else [])
    pending = result.status == "pending"
    if result.status == "passed":
        output = f"passed\n  rule: {check.rule}"
    elif pending:
        output = f"PENDING, not graded in this run ({result.points:g} points): {result.reason}\n  rule: {check.rule}"
    else:
        output = result.reason if result.reason else f"rule: {check.rule}"
    entry = {
        "name": f"{exercise} · {check.name}" + (" (pending: GPU pass)" if pending else ""),
        "number": check_number(exercise, index),
        "tags": tags + (["pending"] if pending else []),
        "output": safe(scrub(output), 4000, lines=True),
        "output_format": "text",
        "visibility": hidden_visibility if check.hidden else "visible",
        "extra_data": {
            "check": check.id,
            "state": result.status,
            "points": result.points,
            "gpu": check.gpu,
            "hidden": check.hidden,
        },
    }
    if not pending:
        entry.update(
            score=result.earned, max_score=result.points, status="passed" if result.status == "passed" else "failed"
        )
    return entry


def manual_entry(manual: dict, number: str) -> dict:
    """The self-test, graded by hand (no score, no status: see the module docstring)."""
    return {
        "name": f"self-test · answers.md (graded by hand, {manual['points']:g} points)",
        "number": number,
        "tags": ["self_test", "manual"],
        "output": safe(
            f"Graded by hand by the course staff, not by this autograder: {manual['found']}.", 1000, lines=True
        ),
        "output_format": "text",
        "visibility": "visible",
        "extra_data": {"check": "self_test", "state": "manual", "points": manual["points"]},
    }


def gradescope(report, hidden_visibility: str = "after_published") -> dict:
    """Gradescope's results.json for a ``judge.Report``."""
    tests = []
    for ex in report.exercises:
        for index, result in enumerate(ex.checks):
            tests.append(test_entry(ex.exercise, index, result, hidden_visibility))
    if report.manual:
        last = max(
            (
                int(ex.exercise.removeprefix("ex"))
                for ex in report.exercises
                if ex.exercise.removeprefix("ex").isdigit()
            ),
            default=0,
        )
        tests.append(manual_entry(report.manual, f"{last + 1}.1"))
    pending = report.pending
    summary = f"{report.score:g} of {report.max_score:g} points in this pass"
    if pending:
        summary += f"; {pending:g} points pending (GPU checks, graded in the GPU pass)"
    if report.manual:
        summary += f"; the self-test ({report.manual['points']:g} points) is graded by hand"
    return {
        "score": report.score,
        "execution_time": round(report.wall_s, 2),
        "output": safe(scrub("\n".join([summary] + report.notes)), 8000, lines=True),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            **report.fingerprint,
            "submission": report.submission,
            "max_score": report.max_score,
            "pending": pending,
            "manual": report.manual["points"] if report.manual else 0,
            "staff_notes": report.staff_notes,
            "flags": report.flags,
        },
        "tests": tests,
    }


# ----------------------------------------------------------------------------- the terminal


def _width() -> int:
    if sys.stdout.isatty():
        return max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))
    return 100  # stable plain text when not a terminal


def table(report, brief: bool = False) -> str:
    """The report: a line per exercise; unless ``brief``, every lost check under it with its
    whole reason, wrapped to the terminal."""
    width = _width()
    lines = [f"launch-tax grade: {safe(report.submission)}", ""]
    lines.append(f"{'exercise':<9} {'module':<14} {'score':>9}   " + ("first lost point" if brief else ""))
    for ex in report.exercises:
        lost = [c for c in ex.checks if c.status == "failed"]
        pending = f"   (+{ex.pending:g} pending: GPU pass)" if ex.pending else ""
        head = f"{ex.exercise:<9} {ex.module:<14} {ex.score:>4g}/{ex.max_score:<4g}"
        if brief:
            first = f"{lost[0].check.name}: {lost[0].reason.splitlines()[0]}" if lost else "-"
            lines.append(f"{head}   {safe(first, width - len(head) - 3)}{pending}")
            continue
        lines.append(head + ("   all checks passed" if not lost and ex.max_score else "") + pending)
        for c in lost:
            lines += _wrapped(f"- {c.check.name} (-{c.points:g}): ", c.reason, width)
    total = f"{'total':<24} {report.score:>4g}/{report.max_score:<4g}"
    if report.pending:
        total += f"   (+{report.pending:g} pending: GPU pass)"
    lines += [total, ""]
    if report.manual:
        lines += _wrapped(
            "self-test: ",
            f"{report.manual['found']} (graded by hand, {report.manual['points']:g} points)",
            width,
            indent=11,
        )
    for note in report.notes + report.staff_notes:
        lines += _wrapped("note: ", note, width, indent=6)
    if report.flags:
        from grader.flags import describe

        lines += _wrapped(
            "flagged: ",
            f"{len(report.flags)} place(s) where the code reaches into the "
            "grader (not scored; the instructor sees them): " + "; ".join(describe(f) for f in report.flags[:5]),
            width,
            indent=9,
        )
    lines.append(f"({report.wall_s:.1f} s)")
    return "\n".join(lines)


def _wrapped(first: str, text: str, width: int, indent: int = 4) -> list[str]:
    out = []
    for i, paragraph in enumerate(safe(text, lines=True).splitlines() or [""]):
        lead = "  " + first if i == 0 else " " * (indent + 2)
        rest = " " * (indent + 4)
        out += textwrap.wrap(
            paragraph.strip(), width=width, initial_indent=lead, subsequent_indent=rest, break_on_hyphens=False
        ) or [lead.rstrip()]
    return out
