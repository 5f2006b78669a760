"""nbgrader's configuration for the launch-tax course (run nbgrader from this folder).

The source notebook, source/launch_tax/launch_tax.ipynb, is generated from the modules:
`python -m grader notebook build` (the repository's tests fail when it is out of date).
"""

import os
import sys

# The course folder lives in the repository: its grader is importable here and in the kernels
# nbgrader starts, installed or not (a config file that fails to import is skipped by nbgrader
# with only a log line, and grading would then run without the protections below).
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))

from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearHiddenTests,
    ClearOutput,
    DeduplicateIds,
    GetGrades,
    OverwriteCells,
    OverwriteKernelspec,
)
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

from grader.nbgrader_bridge import DropAutograderCells, OnlyAnswerFiles, RestoreMissingCells, refuse_without_secret

# `nbgrader autograde` grades officially: without LAUNCH_TAX_SECRET_FILE it stops here, saying how
# to make and pass the secret (LAUNCH_TAX_PRACTICE=1 grades with the practice inputs instead).
refuse_without_secret(sys.argv)

c = get_config()  # noqa: F821 - nbgrader provides it

c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "launch-tax"

# A solution region becomes this line, so a released answer cell is the stub module itself:
# the stub's own `raise NotImplementedError("exercise N: ...")` follows it.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE"}

# A deleted test cell comes back (and is graded as the instructor wrote it); so do a deleted
# set-up cell and, as an empty placeholder, a deleted answer cell. Student-added code cells are
# not run; answer cells only write their module file.
c.OverwriteCells.add_missing_cells = True
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    RestoreMissingCells,
    OverwriteCells,
    OnlyAnswerFiles,
    CheckCellMetadata,
]

# Files a student hands in next to the notebook are never copied into the grading folder if the
# kernel could import them ahead of the installed packages (a forged `grader/` or `torch.py`).
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.py",
    "*.pyw",
    "*.pyd",
    "*.so",
    "*.pth",
    "*.zip",
    "*.egg",
]

# Each exercise's checks run in a worker with this limit (seconds). A worker that times out is
# tried once more with twice the time (load is not a wrong answer), and a cell also pays for the
# kernel's start and its first import of torch: nbgrader's own cell timeout sits above all that,
# so that the grader, not nbgrader, decides what a looping exercise loses.
os.environ.setdefault("LAUNCH_TAX_CHECK_TIMEOUT", "60")
c.Execute.timeout = 3 * int(float(os.environ["LAUNCH_TAX_CHECK_TIMEOUT"])) + 60

# Feedback shows the graded notebook without the hidden tests' code and without the cell the
# autograder added (it grades every exercise at once: grader/nbgrader_bridge.py).
c.GenerateFeedback.preprocessors = [GetGrades, DropAutograderCells, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
