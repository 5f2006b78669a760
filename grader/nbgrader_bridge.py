"""nbgrader's side of the course: what ``nbgrader autograde`` runs, and what it must not.

nbgrader runs every code cell of a submitted notebook in one kernel, the test cells included, so
a student's own cell could redefine ``check`` and pass every test. ``OnlyAnswerFiles`` runs
after nbgrader has restored the locked cells (``OverwriteCells``) and before execution:

* a code cell the student added (no nbgrader metadata) is commented out: it is kept for the
  reader of the feedback, never run;
* an answer cell always writes its module file and nothing else: its first line must be
  ``%%writefile student/<module>.py``; if the student changed or removed it, that line is put
  back in front (their text becomes the module, as in ``python -m grader grade``).

``course/nbgrader_config.py`` also keeps submitted ``.py`` / ``.so`` files out of the grading
folder (the kernel would import them before the installed grader).
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.notebook import ANSWER_PREFIX, writefile_line

NOT_RUN = "# (a cell added by the student: kept for reading, not run by the autograder)"


class OnlyAnswerFiles(NbGraderPreprocessor):
    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id")
        if not grade_id:
            lines = cell.source.split("\n")
            cell.source = "\n".join([NOT_RUN] + ["# " + line for line in lines])
        elif meta.get("solution") and not meta.get("grade") and grade_id.startswith(ANSWER_PREFIX):
            expected = writefile_line(grade_id.removeprefix(ANSWER_PREFIX))
            first, _, rest = cell.source.partition("\n")
            if first.strip() != expected:
                cell.source = expected + "\n" + cell.source
            else:
                cell.source = expected + "\n" + rest
        return cell, resources
