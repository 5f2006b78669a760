"""nbgrader's side of the course: what ``nbgrader autograde`` runs, and what it must not.

nbgrader runs every code cell of a submitted notebook in one kernel, test cells included, so a
student's own cell could redefine ``check`` and pass every test. ``OnlyAnswerFiles`` runs after
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

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.notebook import writefile_line
from grader.submission import writefile_module

NOT_RUN = "# (not run by the autograder: only the set-up, test and %%writefile cells run)"
SUPERSEDED = "# (not run by the autograder: a later cell writes the same module, and it counts)"


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
