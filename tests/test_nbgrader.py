"""The course through the real nbgrader command line, as an instructor runs it.

One course (tests/nbcourse.py) is generated, released, handed in by a few students and
autograded once; the tests read the release, the gradebook and the feedback:

* ``generate_assignment`` releases no solution code and no hidden test, and its answer cells are
  the stub modules;
* a notebook filled with the reference gets every automatic point, the untouched release none;
* test cells a student edited or deleted are restored: they earn nothing for wrong code (even with
  a cell that redefines ``check`` and forged ``grader`` / ``torch`` modules handed in next to the
  notebook) and keep their points for right code; a deleted set-up or answer cell comes back;
* an exercise whose code loops forever times out while the other exercises are still graded;
* every student's per-exercise scores equal ``python -m grader grade`` on the same notebook;
* ``generate_feedback`` writes HTML without the hidden tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from coursekit import course
from coursekit.impl import REPO_ROOT
from grader import notebook as nb
from grader.judge import Judge, all_checks, load_rubric, runtime_files
from grader.submission import load
from tests import mutants, warm_worker
from tests.nbcourse import (
    built,
    cell_scores,
    make_course,
    nbgrader,
    per_exercise,
    release_notebook,
    shared_folder,
    submit,
)

# nbgrader's own CLI over a course built for it: CI's slow stage (tests/conftest.py).
pytestmark = pytest.mark.slow

CHECK_TIMEOUT_S = 8  # per exercise worker: well above a normal exercise (~2 s), to catch a loop
CPU_CHECKS = [c for c in all_checks() if not c.gpu]
HIDDEN = [c for c in CPU_CHECKS if c.hidden]
RUBRIC = load_rubric()
FULL = {ex: sum(RUBRIC[c.id] for c in CPU_CHECKS if c.exercise == ex) for ex in {c.exercise for c in CPU_CHECKS}}
STUBBED_MODULES = [m for m in course.MODULES if (REPO_ROOT / "exercises" / f"{m}.py").exists()]
FORGED_CHECKS = "def check(*args, **kwargs):\n    print('passed')\n\n\ndef start_fresh(*args):\n    pass\n"
#: A torch.py handed in next to the notebook: imported by the kernel when the grader first imports
#: torch, it loads the real torch and rigs the verdicts of every later test cell.
FORGED_TORCH = """\
import os, sys, types
sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]
del sys.modules["torch"]
import torch
import grader.notebook_checks as nc

passed = types.SimpleNamespace(status="passed", points=1, check=types.SimpleNamespace(hidden=False))
class Rigged(dict):
    def get(self, key, default=None):
        return passed
nc.verdicts = lambda exercise: Rigged()
"""


def text(cell: dict) -> str:
    return "".join(cell["source"])


def modules_from(folder: Path, **replaced: str) -> dict[str, str]:
    files = {m: (folder / f"{m}.py").read_text() for m in STUBBED_MODULES}
    files.update(replaced)
    return files


def without_cells(notebook: dict, *ids: str) -> dict:
    notebook = json.loads(json.dumps(notebook))
    notebook["cells"] = [c for c in notebook["cells"] if c.get("id") not in ids]
    return notebook


def edit_cells(notebook: dict, source: str, *ids: str) -> dict:
    notebook = json.loads(json.dumps(notebook))
    for cell in notebook["cells"]:
        if cell.get("id") in ids:
            cell["source"] = source
    return notebook


def add_cell(notebook: dict, after_id: str, source: str) -> dict:
    notebook = json.loads(json.dumps(notebook))
    at = next(i for i, c in enumerate(notebook["cells"]) if c.get("id") == after_id) + 1
    notebook["cells"].insert(
        at,
        {
            "cell_type": "code",
            "id": f"added{at}",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": source,
        },
    )
    return notebook


def mutant_source(mutant_id: str) -> tuple[str, str]:
    mutant = next(m for m in mutants.ALL if m.id == mutant_id)
    return mutant.module, mutants.apply(mutant, (REPO_ROOT / "solutions" / f"{mutant.module}.py").read_text())


@dataclass
class Course:
    root: Path
    release: dict
    students: list[str]


@pytest.fixture(scope="module")
def course(pytestconfig) -> Course:
    if shutil.which("nbgrader") is None:
        message = "needs nbgrader's command line: pip install -e '.[nbgrader]'"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI installs it: .ci/run)")
        pytest.skip(message)
    # Built once per test run, even when pytest-xdist spreads these tests over several workers
    # (and started early, in the background: tests/conftest.py).
    root = built(shared_folder(pytestconfig))
    return Course(root, release_notebook(root), json.loads((root / "students.json").read_text()))


def build(root: Path) -> None:
    make_course(root)
    nbgrader(root, "generate_assignment", nb.ASSIGNMENT)
    release = release_notebook(root)
    solutions = REPO_ROOT / "solutions"
    looping = (
        (solutions / "launch_model.py")
        .read_text()
        .replace(
            '    xs, ys = [float(x) for x in n_kernels], [float(y) for y in step_ms]',
            # Never returns. It sleeps rather than spins: the timeout is what is tested, and spinning
            # would only take the other tests' CPU for the 3 x 8 s it runs.
            '    while True:\n        __import__("time").sleep(1)\n'
            '    xs, ys = [float(x) for x in n_kernels], [float(y) for y in step_ms]',
        )
    )
    assert looping != (solutions / "launch_model.py").read_text()
    wrong = dict([mutant_source("buckets:runner-off-by-one-bucket"), mutant_source("dispatch:dispatch-off-by-one")])
    cheat = "import grader.notebook_checks as g\ng.check = lambda *a, **k: print('passed')\ncheck = g.check"
    students = {
        "reference": (nb.fill(release, modules_from(solutions)), None),
        "untouched": (release, None),
        # Stub code; edited and deleted test cells, a cell redefining check(), forged modules.
        "tampered": (
            add_cell(
                edit_cells(
                    without_cells(release, "test_ex6_dispatch", "test_ex1_hidden_1"),
                    "pass",
                    "test_ex5_padded_size",
                    "test_ex4_hidden_1",
                    "setup",
                ),
                "setup",
                cheat,
            ),
            {"grader/__init__.py": "", "grader/notebook_checks.py": FORGED_CHECKS, "torch.py": FORGED_TORCH},
        ),
        # Right code; edited and deleted test cells: restored, and their points kept.
        "restored": (
            edit_cells(
                without_cells(nb.fill(release, modules_from(solutions)), "test_ex6_dispatch", "test_ex1_hidden_1"),
                "raise SystemExit",
                "test_ex5_padded_size",
            ),
            None,
        ),
        # Right code, but the set-up cell, an answer cell and its test cells deleted: nbgrader
        # alone fails on this notebook; the set-up cell comes back, the module stays missing.
        "deleted": (
            without_cells(
                nb.fill(release, modules_from(solutions)),
                "setup",
                "answer_fusion",
                *[c["id"] for c in release["cells"] if c["id"].startswith("test_ex7")],
            ),
            None,
        ),
        # Exercise 1 loops forever; a cell the student added loops too (it is not run).
        "looping": (
            add_cell(nb.fill(release, modules_from(solutions, launch_model=looping)), "setup", "while True:\n    pass"),
            None,
        ),
        "wrong": (nb.fill(release, modules_from(solutions, **wrong)), None),
    }
    for student, (notebook, extra) in students.items():
        submit(root, student, notebook, extra)
    nbgrader(root, "autograde", nb.ASSIGNMENT, check_timeout_s=CHECK_TIMEOUT_S)
    nbgrader(root, "generate_feedback", nb.ASSIGNMENT)
    (root / "students.json").write_text(json.dumps(list(students)))


def auto_total(root: Path, student: str) -> float:
    return sum(auto or 0.0 for name, (auto, _) in cell_scores(root, student).items() if name.startswith("test_"))


# ----------------------------------------------------------------------------- the release


def test_release_has_no_solutions_and_no_hidden_tests(course):
    released = json.dumps(course.release)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
        assert marker not in released, marker
    for check in HIDDEN:
        assert repr(check.id) not in released and check.name not in released, check.id
    source = json.loads(nb.SOURCE_NOTEBOOK.read_text())
    for module, cell in nb.answer_cells(source).items():
        stub = set((REPO_ROOT / "exercises" / f"{module}.py").read_text().splitlines())
        solution_only = [line for line in _solution_lines(text(cell)) if line not in stub and len(line.strip()) > 24]
        assert solution_only, module
        leaked = [line for line in solution_only if line in text(nb.answer_cells(course.release)[module])]
        assert not leaked, (module, leaked[:3])


def _solution_lines(source: str) -> list[str]:
    inside, lines = False, []
    for line in source.split("\n"):
        if nb.BEGIN in line:
            inside = True
        elif nb.END in line:
            inside = False
        elif inside:
            lines.append(line)
    return lines


@pytest.mark.parametrize("module", STUBBED_MODULES)
def test_released_answer_cells_are_the_stub_modules(course, module):
    cell = nb.answer_cells(course.release)[module]
    first, _, body = text(cell).partition("\n")
    assert first == nb.writefile_line(module)
    stub = (REPO_ROOT / "exercises" / f"{module}.py").read_text()
    assert nb.content_lines(body) == nb.content_lines(stub)


def test_release_test_cells_carry_the_rubric_points(course):
    points = {
        c["id"]: c["metadata"]["nbgrader"]["points"]
        for c in course.release["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code"
    }
    assert sum(points.values()) == sum(FULL.values())
    assert len(points) == len(CPU_CHECKS)


# ----------------------------------------------------------------------------- autograde


def test_reference_gets_every_automatic_point(course):
    scores = cell_scores(course.root, "reference")
    lost = {name: s for name, s in scores.items() if name.startswith("test_") and s[0] != s[1]}
    assert not lost
    assert per_exercise(scores) == {ex: (full, full) for ex, full in FULL.items()}


def test_untouched_release_scores_zero(course):
    scores = cell_scores(course.root, "untouched")
    assert auto_total(course.root, "untouched") == 0, {n: s for n, s in scores.items() if s[0]}
    manual = [n for n in scores if n.startswith("self_test_")]
    assert len(manual) == len(nb.SELF_TEST)


def test_edited_or_deleted_test_cells_are_restored_and_earn_nothing(course):
    scores = cell_scores(course.root, "tampered")
    for cell in ("test_ex6_dispatch", "test_ex1_hidden_1", "test_ex5_padded_size", "test_ex4_hidden_1"):
        assert cell in scores and scores[cell][1] > 0, cell
    assert auto_total(course.root, "tampered") == 0, {n: s for n, s in scores.items() if s[0]}
    graded = json.loads(
        (course.root / "autograded" / "tampered" / nb.ASSIGNMENT / f"{nb.ASSIGNMENT}.ipynb").read_text()
    )
    sources = {c.get("id"): text(c) for c in graded["cells"]}
    assert "check('ex5.padded_size')" in sources["test_ex5_padded_size"]
    added = [s for s in sources.values() if "g.check = lambda" in s]
    assert added and all(line.startswith("#") for line in added[0].splitlines())


def test_restored_test_cells_keep_their_points_for_right_code(course):
    scores = cell_scores(course.root, "restored")
    assert per_exercise(scores) == {ex: (full, full) for ex, full in FULL.items()}


def test_deleted_set_up_and_answer_cells(course):
    got = per_exercise(cell_scores(course.root, "deleted"))
    assert got.pop("ex7") == (0, FULL["ex7"])
    assert got == {ex: (full, full) for ex, full in FULL.items() if ex != "ex7"}


def test_an_infinite_loop_costs_its_exercise_only(course):
    got = per_exercise(cell_scores(course.root, "looping"))
    assert got.pop("ex1") == (0, FULL["ex1"])
    assert got == {ex: (full, full) for ex, full in FULL.items() if ex != "ex1"}
    graded = (course.root / "autograded" / "looping" / nb.ASSIGNMENT / f"{nb.ASSIGNMENT}.ipynb").read_text()
    assert "timed out" in graded


def test_wrong_code_loses_points_in_its_exercises(course):
    got = per_exercise(cell_scores(course.root, "wrong"))
    for exercise in ("ex5", "ex6"):
        assert got[exercise][0] < got[exercise][1], exercise
    assert got["ex1"] == (FULL["ex1"], FULL["ex1"])


def test_our_grader_gives_the_same_per_exercise_scores(course):
    # Our side's workers are forked from a warm one (tests/warm_worker.py): the scores are the
    # subject here, nbgrader's side ran in the real sandbox.
    with warm_worker.serve(runtime_files()):
        judge = Judge(gpu="off", timeout_s=CHECK_TIMEOUT_S, jobs=2)
        for student in course.students:
            path = course.root / "submitted" / student / nb.ASSIGNMENT / f"{nb.ASSIGNMENT}.ipynb"
            # an exercise of GPU checks only (3) has no CPU cell in the notebook: left out here
            ours = {
                e.exercise: (e.score, e.max_score)
                for e in judge.grade(load(path)).exercises
                if e.max_score or not e.pending
            }
            assert ours == per_exercise(cell_scores(course.root, student)), student


# ----------------------------------------------------------------------------- feedback


def test_feedback_shows_no_hidden_test(course):
    pages = sorted((course.root / "feedback").glob(f"*/{nb.ASSIGNMENT}/{nb.ASSIGNMENT}.html"))
    assert [p.parts[-3] for p in pages] == sorted(course.students)
    for page in pages:
        html = page.read_text()
        assert "HIDDEN TESTS" not in html, page
        for check in HIDDEN:
            assert not re.search(rf"\b{re.escape(check.name)}\b", html), (page, check.id)
    reference = (course.root / "feedback" / "reference" / nb.ASSIGNMENT / f"{nb.ASSIGNMENT}.html").read_text()
    assert "passed" in reference


def test_autograde_grades_ahead_and_feedback_leaves_that_cell_out(course):
    """Each autograded notebook has the cell that grades every exercise at once right after the
    set-up cell; the feedback does not show it."""
    for student in course.students:
        graded = json.loads(
            (course.root / "autograded" / student / nb.ASSIGNMENT / f"{nb.ASSIGNMENT}.ipynb").read_text()
        )
        ids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in graded["cells"]]
        ahead = [i for i, c in enumerate(graded["cells"]) if c["metadata"].get("launch_tax")]
        assert ahead == [ids.index("setup") + 1], (student, ahead)
        html = (course.root / "feedback" / student / nb.ASSIGNMENT / f"{nb.ASSIGNMENT}.html").read_text()
        assert "grade_ahead" not in html, student


def test_autograde_refuses_without_the_secret_and_grades_officially_with_it(tmp_path):
    """``nbgrader autograde`` with neither the grading secret nor LAUNCH_TAX_PRACTICE=1 stops
    before grading anyone, in one line that says how to make and pass the secret; with the
    secret it grades officially (the notebook's own output says which)."""
    if shutil.which("nbgrader") is None:
        pytest.skip("needs nbgrader's command line: pip install -e '.[nbgrader]'")
    import subprocess
    import sys

    root = make_course(tmp_path / "course")
    nbgrader(root, "generate_assignment", nb.ASSIGNMENT)
    submit(root, "alice", nb.fill(release_notebook(root), modules_from(REPO_ROOT / "solutions")))
    env = {k: v for k, v in os.environ.items() if k not in ("LAUNCH_TAX_SECRET_FILE", "LAUNCH_TAX_PRACTICE")}
    refused = subprocess.run(
        ["nbgrader", "autograde", nb.ASSIGNMENT], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "secret new" in lines[0] and "LAUNCH_TAX_SECRET_FILE" in lines[0] and "LAUNCH_TAX_PRACTICE=1" in lines[0]
    assert not (root / "autograded").exists(), "nothing may be graded"
    secret = tmp_path / "secret"
    subprocess.run(
        [sys.executable, "-m", "grader", "secret", "new", str(secret)], cwd=REPO_ROOT, check=True, capture_output=True
    )
    nbgrader(root, "autograde", nb.ASSIGNMENT, env={"LAUNCH_TAX_SECRET_FILE": str(secret), "LAUNCH_TAX_PRACTICE": "0"})
    assert auto_total(root, "alice") == sum(FULL.values())
    graded = (root / "autograded" / "alice" / nb.ASSIGNMENT / f"{nb.ASSIGNMENT}.ipynb").read_text()
    assert "practice mode" not in graded and "graded every exercise" in graded
