"""What a notebook's test cells call: ``check("ex5.padded_size")`` grades one rubric check.

The answer cells write module files into a package folder (``student/``); a test cell grades
them with the judge, in a sandboxed worker, exactly as ``python -m grader grade`` grades a folder:
the student's code never runs in the notebook's kernel, so nothing it does there can change a
verdict. An exercise is graded once per content of the module files and the verdicts are
reused by its other test cells. A passing check prints one line; a failing one raises
``CheckFailed``, whose message is what the student sees (expected vs got and the rule, or for a
hidden check the rule only) without a traceback into the grader.

``LAUNCH_TAX_CHECK_TIMEOUT`` (seconds, default 60) bounds each exercise's worker; keep nbgrader's
cell timeout above it (``course/nbgrader_config.py``). ``LAUNCH_TAX_SECRET_FILE`` names the
grading secret (official grading, ``grader/secret.py``); without it the checks run in practice
mode and say so once. Grading refuses to run without isolation (the judge not root), as
``grade-all`` does, unless ``LAUNCH_TAX_ALLOW_UNISOLATED=1`` accepts the risk.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

_lock = threading.Lock()
_state: dict = {"folder": None, "judge": None, "verdicts": {}, "ahead": {}}


class CheckFailed(AssertionError):
    """A check the submission did not pass; shown without a traceback (IPython asks
    ``_render_traceback_``), so the message, not the grader's code, is what a student reads."""

    def _render_traceback_(self) -> list[str]:
        return [f"CheckFailed: {self}"]


def start_fresh(folder: str = "student") -> None:
    """Empty the package folder the answer cells write (stale module files never count)."""
    path = Path(folder).absolute()
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / "__init__.py").write_text("", encoding="utf-8")
    with _lock:
        _state.update(folder=path, verdicts={}, ahead={})


class GradingRefused(RuntimeError):
    """This machine cannot grade safely (or at all); no check of this notebook was graded."""

    def _render_traceback_(self) -> list[str]:
        return [f"GradingRefused: {self}"]


def _judge():
    if _state["judge"] is None:
        from grader import isolation, secret
        from grader.judge import Judge

        if not isolation.current().complete and os.environ.get("LAUNCH_TAX_ALLOW_UNISOLATED") != "1":
            raise GradingRefused(
                "the grader cannot isolate the submission here (it is not root, or cannot make "
                "namespaces): autograde as root, or set LAUNCH_TAX_ALLOW_UNISOLATED=1 to accept "
                "that the submission could read the reference and the other notebooks"
            )
        timeout = float(os.environ.get("LAUNCH_TAX_CHECK_TIMEOUT", "60"))
        _state["judge"] = judge = Judge(gpu="off", timeout_s=timeout, jobs=1, secret=secret.load())
        if judge.secret is None:
            print(
                "(practice mode: no grading secret, so these checks use the release's fixed "
                "inputs; official grading sets LAUNCH_TAX_SECRET_FILE)"
            )
    return _state["judge"]


def _same(text: bytes | str) -> str:
    """A module's text as compared between the graded-ahead set and the written files (what
    %%writefile adds or drops at the end of a cell does not count)."""
    return (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).rstrip()


def grade_ahead(modules: dict[str, str]) -> None:
    """What ``nbgrader autograde`` runs right after the set-up cell (the cell is added by
    nbgrader bridge, never part of the student's notebook): grade the notebook's
    final module files at once, in one sandboxed worker for all exercises, exactly as ``python -m
    grader grade`` grades the notebook. Each test cell then reads its exercise's verdict, as long
    as the module files written by then are the ones graded here (else it grades them itself)."""
    from grader.judge import EnvironmentProblem, ReferenceFailure
    from grader.submission import Submission

    with _lock:
        submission = Submission("notebook", files={m: t.encode("utf-8") for m, t in modules.items()})
        try:
            report = _judge().grade(submission)
        except (ReferenceFailure, EnvironmentProblem) as exc:
            raise GradingRefused(f"nothing was graded: {exc}") from None
        graded = {m: _same(t) for m, t in modules.items()}
        _state["ahead"] = {ex.exercise: (graded, {r.check.id: r for r in ex.checks}) for ex in report.exercises}
    print(f"graded every exercise's CPU checks at once ({report.wall_s:.1f} s)")


def verdicts(exercise: str) -> dict:
    """``{check id: CheckResult}`` for the current module files (graded at most once each)."""
    from grader.submission import load

    with _lock:
        if _state["folder"] is None:
            raise RuntimeError("run the set-up cell first: it calls start_fresh()")
        submission = load(_state["folder"])
        ahead = _state["ahead"].get(exercise)
        if ahead and all(ahead[0].get(m) == _same(t) for m, t in submission.files.items()):
            return ahead[1]
        digest = hashlib.sha256(repr(sorted(submission.files.items())).encode()).hexdigest()
        key = (exercise, digest)
        if key not in _state["verdicts"]:
            from grader.judge import EnvironmentProblem, ReferenceFailure

            try:
                result = _judge().grade_exercise(submission, exercise)
            except (ReferenceFailure, EnvironmentProblem) as exc:
                raise GradingRefused(f"nothing was graded: {exc}") from None
            _state["verdicts"][key] = {r.check.id: r for r in result.checks}
        return _state["verdicts"][key]


def check(check_id: str) -> None:
    """Grade one check of the rubric (``"ex5.padded_size"``); raise ``CheckFailed`` if lost."""
    exercise = check_id.split(".", 1)[0]
    result = verdicts(exercise).get(check_id)
    if result is None:
        raise CheckFailed(
            f"{check_id}: no such check in this grader (is the course repository installed, and up to date?)"
        )
    points = f"{result.points:g} point{'s' if result.points != 1 else ''}"
    if result.check.hidden:
        name = f"a hidden check of exercise {exercise.removeprefix('ex')}"
    else:
        name = check_id
    if result.status == "passed":
        print(f"{name}: passed ({points})")
        return
    raise CheckFailed(f"{name}: failed ({points})\n  {result.reason}")
