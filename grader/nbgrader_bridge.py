"""nbgrader's side of the course: what ``nbgrader autograde`` runs, and what it must not.

nbgrader runs every code cell of a submitted notebook in one kernel, test cells included, so a
student's own cell could redefine ``check`` and pass every test. ``RestoreMissingCells`` puts
back deleted set-up and answer cells. ``OnlyAnswerFiles`` runs after
nbgrader has restored the locked cells (``OverwriteCells``) and before anything is executed, and
leaves the kernel only two kinds of code cells:

* the notebook's locked cells (set-up and tests), as the instructor wrote them;
* cells that write a module file, by the same rule as ``python -m grader grade`` reads a notebook
  (``grader.submission.writefile_module``): first line ``%%writefile <folder>/<module>.py``. The
  line is rewritten to ``%%writefile student/<module>.py`` (the package the tests grade), and
  when several cells write one module only the last one is kept, as that grader does.

Every other code cell (a cell the student added, an answer cell whose first line is gone) is
commented out: kept for whoever reads the feedback, never run. ``course/nbgrader_config.py`` also
keeps submitted ``.py`` / ``.so`` files out of the grading folder (the kernel would import them
before the installed grader).

Official grading cannot be missed: ``nbgrader autograde`` without the grading secret
(``LAUNCH_TAX_SECRET_FILE``) refuses to start, in one line that says how to make and pass it,
unless practice grading is asked for (``LAUNCH_TAX_PRACTICE=1``); ``refuse_without_secret`` runs
when ``course/nbgrader_config.py`` is loaded, and ``OnlyAnswerFiles`` refuses each notebook the
same way where nbgrader is driven otherwise (the formgrader's autograde button).
"""

from __future__ import annotations

import os
import sys

from nbformat import NotebookNode, from_dict
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.notebook import writefile_line
from grader.submission import writefile_module

NOT_RUN = "# (not run by the autograder: only the set-up, test and %%writefile cells run)"
SUPERSEDED = "# (not run by the autograder: a later cell writes the same module, and it counts)"


MISSING_ANSWER = "# (this answer cell was missing from the submission)"


class RestoreMissingCells(NbGraderPreprocessor):
    """Puts back the notebook's cells that nbgrader itself does not (it restores test cells
    only): a deleted set-up cell as written, a deleted answer cell as an empty placeholder (its
    module stays missing). Runs before ``OverwriteCells``, which otherwise fails on a submission
    missing an answer cell and the test cells after it (it looks the answer cell up to place
    them)."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            source = gb.find_notebook(info["notebook"], info["assignment"])
            cells = [(c.name, c.cell_type, c.source, c.locked) for c in source.source_cells]
            graded = {c.name for c in source.grade_cells}
            answers = {c.name for c in source.solution_cells}
        present = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}
        for k, (name, kind, text, locked) in enumerate(cells):
            if name in present or name in graded:
                continue
            position = 0
            for earlier, *_ in reversed(cells[:k]):
                found = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == earlier]
                if found:
                    position = found[0] + 1
                    break
            nb.cells.insert(
                position,
                _restored(name, kind, MISSING_ANSWER if name in answers else text, locked, solution=name in answers),
            )
            present.add(name)
        return nb, resources


def _restored(name: str, kind: str, text: str, locked: bool, solution: bool) -> NotebookNode:
    cell = {
        "cell_type": kind,
        "metadata": {
            "nbgrader": {
                "grade": False,
                "grade_id": name,
                "locked": locked,
                "schema_version": 3,
                "solution": solution,
                "task": False,
            }
        },
        "source": text,
    }
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return from_dict(cell)


PRACTICE = "LAUNCH_TAX_PRACTICE"


def why_refused() -> str | None:
    """Why autograding must not start here (no grading secret, practice not asked), or None."""
    from grader import secret

    if os.environ.get(PRACTICE) == "1":
        return None
    try:
        if secret.load() is not None:
            return None
    except (ValueError, RuntimeError) as exc:
        return f"nbgrader autograde: the grading secret cannot be read: {exc}"
    return (
        "nbgrader autograde: refusing to grade without the grading secret (scores would be "
        "practice scores): make it once with `python -m grader secret new "
        "~/.config/launch-tax/grading-secret` and run `LAUNCH_TAX_SECRET_FILE=PATH nbgrader "
        f"autograde ...`; or set {PRACTICE}=1 to grade with the public practice inputs"
    )


def refuse_without_secret(argv: list[str]) -> None:
    """Called by ``course/nbgrader_config.py``: ``nbgrader autograde`` stops at once, in one line,
    when ``why_refused`` says so."""
    if argv[1:2] == ["autograde"]:
        why = why_refused()
        if why:
            print(why, file=sys.stderr)
            raise SystemExit(2)


class OnlyAnswerFiles(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        why = why_refused()
        if why:
            raise RuntimeError(why)
        last_writer = {}
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and not _locked(cell):
                module = writefile_module(cell.source)
                if module:
                    last_writer[module] = index
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or _locked(cell):
                continue
            module = writefile_module(cell.source)
            if module is None:
                _comment_out(cell, NOT_RUN)
            elif last_writer[module] != index:
                _comment_out(cell, SUPERSEDED)
            else:
                cell.source = writefile_line(module) + "\n" + cell.source.partition("\n")[2]
        _add_grade_ahead(nb, {m: nb.cells[i].source.partition("\n")[2] for m, i in last_writer.items()})
        return nb, resources


AHEAD = {"launch_tax": {"autograder": "grade_ahead"}}


def _add_grade_ahead(nb, modules: dict[str, str]) -> None:
    """After the set-up cell, a cell that grades every module the answer cells will write, at once
    (``grader.notebook_checks.grade_ahead``): one worker for the whole notebook instead of one per
    exercise, with the verdicts ``python -m grader grade`` gives the notebook. It holds the
    modules as string literals (nothing of them runs in the kernel) and is left out of the
    feedback (``DropAutograderCells``)."""
    setup = [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"]
    if not setup:
        return
    source = (
        "# Added by the autograder, not part of your notebook: grades all your answer cells' "
        "modules at once,\n# as `python -m grader grade` grades the notebook; each test "
        "cell below reads its verdict.\n"
        "from grader.notebook_checks import grade_ahead\n"
        f"grade_ahead({modules!r})"
    )
    cell = from_dict(
        {"cell_type": "code", "execution_count": None, "outputs": [], "metadata": dict(AHEAD), "source": source}
    )
    nb.cells.insert(setup[0] + 1, cell)


class DropAutograderCells(NbGraderPreprocessor):
    """Feedback leaves out the cells the autograder added (``_add_grade_ahead``)."""

    def preprocess(self, nb, resources):
        nb.cells = [c for c in nb.cells if c.metadata.get("launch_tax", {}).get("autograder") is None]
        return nb, resources


def _locked(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("grade_id")) and bool(meta.get("locked")) and not meta.get("solution")


def _comment_out(cell, note: str) -> None:
    cell.source = "\n".join([note] + ["# " + line for line in cell.source.split("\n")])
