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
"""

from __future__ import annotations

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
                found = [i for i, c in enumerate(nb.cells)
                         if c.metadata.get("nbgrader", {}).get("grade_id") == earlier]
                if found:
                    position = found[0] + 1
                    break
            nb.cells.insert(position, _restored(name, kind, MISSING_ANSWER if name in answers else text,
                                                locked, solution=name in answers))
            present.add(name)
        return nb, resources


def _restored(name: str, kind: str, text: str, locked: bool, solution: bool) -> NotebookNode:
    cell = {"cell_type": kind, "metadata": {"nbgrader": {
        "grade": False, "grade_id": name, "locked": locked, "schema_version": 3,
        "solution": solution, "task": False}}, "source": text}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return from_dict(cell)


class OnlyAnswerFiles(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
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
        return nb, resources


def _locked(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("grade_id")) and bool(meta.get("locked")) and not meta.get("solution")


def _comment_out(cell, note: str) -> None:
    cell.source = "\n".join([note] + ["# " + line for line in cell.source.split("\n")])
