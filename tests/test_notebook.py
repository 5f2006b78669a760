"""The course notebook (course/source/launch_tax/launch_tax.ipynb): generated from the modules,
never out of date with them, worth the rubric's points, and graded by ``python -m grader grade``
exactly like the module files it holds. (The real nbgrader flow: tests/test_nbgrader.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from coursekit import course
from coursekit.impl import REPO_ROOT
from grader import notebook as nb
from grader.judge import Judge, all_checks, load_rubric, runtime_files
from grader.submission import load, writefile_module
from tests import mutants, warm_worker

CPU_CHECKS = [c for c in all_checks() if not c.gpu]


def source(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.fixture(scope="module")
def built():
    return nb.build_notebook()


@pytest.fixture(scope="module")
def judge():
    """Workers forked from a warm one (tests/warm_worker.py): these tests compare what a notebook
    and a folder of the same modules are graded, not how the worker is isolated."""
    with warm_worker.serve(runtime_files()):
        yield Judge(gpu="off", jobs=2)


def per_exercise(report) -> dict[str, tuple[float, float]]:
    return {e.exercise: (e.score, e.max_score) for e in report.exercises}


# ----------------------------------------------------------------------------- one source of truth


def test_committed_notebook_is_the_generated_one(built):
    committed = nb.SOURCE_NOTEBOOK.read_text(encoding="utf-8")
    assert committed == nb.dumps(built), (
        f"{nb.SOURCE_NOTEBOOK.relative_to(REPO_ROOT)} is out of date with exercises/, solutions/, "
        "the checks or the rubric: run `python -m grader notebook build` and commit it"
    )


def test_drift_in_a_module_changes_the_notebook(tmp_path, built):
    """The drift test can fail: edit one stub's docstring and the built notebook differs."""
    for folder in ("exercises", "solutions"):
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder)
    stub = tmp_path / "exercises" / "buckets.py"
    stub.write_text(stub.read_text().replace("the smallest size ``>= n``", "the smallest size > n"))
    assert nb.dumps(nb.build_notebook(tmp_path)) != nb.dumps(built)


@pytest.mark.parametrize("module", [m for m in course.MODULES if (REPO_ROOT / "exercises" / f"{m}.py").exists()])
def test_released_answer_cell_is_the_stub_module(built, module):
    """What nbgrader releases (solution regions -> '# YOUR CODE HERE') is exercises/<module>.py."""
    cell = nb.answer_cells(built)[module]
    first, _, body = source(cell).partition("\n")
    assert first == nb.writefile_line(module)
    stub = (REPO_ROOT / "exercises" / f"{module}.py").read_text(encoding="utf-8")
    assert nb.content_lines(nb.clear_solutions(body)) == nb.content_lines(stub)
    assert nb.BEGIN in body, f"{module}: no solution region at all"


def test_source_notebook_holds_the_reference(judge):
    """Markers and all, the source notebook's answer cells are a correct submission."""
    report = judge.grade(load(nb.SOURCE_NOTEBOOK))
    lost = [(c.check.id, c.reason) for e in report.exercises for c in e.checks if c.status == "failed"]
    assert not lost and report.score == sum(load_rubric()[c.id] for c in CPU_CHECKS), lost


@pytest.mark.parametrize(
    "edit, complaint",
    [
        (
            lambda stub, ref: (
                stub,
                ref.replace("def padded_size(n: int, capture_sizes", "def padded_size(n: int, sizes"),
            ),
            "signature",
        ),
        (
            lambda stub, ref: (
                stub + '\n\ndef extra():\n    """New."""\n    raise NotImplementedError("exercise 5: extra")\n',
                ref,
            ),
            "only in the stub",
        ),
        (
            lambda stub, ref: (stub.replace("class BucketedGraphRunner:", "class BucketedGraphRunner(object):"), ref),
            "bases",
        ),
    ],
)
def test_merge_refuses_modules_that_no_longer_line_up(edit, complaint):
    stub = (REPO_ROOT / "exercises" / "buckets.py").read_text()
    ref = (REPO_ROOT / "solutions" / "buckets.py").read_text()
    stub, ref = edit(stub, ref)
    with pytest.raises(nb.DriftError, match=complaint):
        nb.merge_module("buckets", stub, ref)


def test_merge_never_falls_through_to_the_stub_raise():
    stub = 'def f(x):\n    """Doc."""\n    raise NotImplementedError("exercise 9: f")\n'
    ref = "def f(x):\n    if x:\n        x.append(1)\n"
    merged = nb.merge_module("m", stub, ref)
    namespace: dict = {}
    exec(nb.without_markers(merged), namespace)
    box = [0]
    assert namespace["f"](box) is None and box == [0, 1]
    assert namespace["f"]([]) is None


# ----------------------------------------------------------------------------- cells and points


def test_one_test_cell_per_cpu_check_worth_its_rubric_points(built):
    points = load_rubric()
    tests = [c for c in built["cells"] if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code"]
    called = {}
    for cell in tests:
        meta = cell["metadata"]["nbgrader"]
        assert meta["locked"] and not meta["solution"], cell["id"]
        text = source(cell)
        calls = [line for line in text.splitlines() if line.startswith("check(")]
        assert len(calls) == 1, text
        check_id = calls[0].removeprefix("check(").rstrip(")").strip("'\"")
        called[check_id] = meta["points"]
        hidden = next(c for c in all_checks() if c.id == check_id).hidden
        assert (nb.BEGIN_HIDDEN in text) == hidden, f"{check_id}: hidden={hidden} but cell is {text!r}"
        if hidden:
            assert check_id.split(".")[1] not in cell["id"], "a hidden check's name leaks in its cell id"
    assert called == {c.id: points[c.id] for c in CPU_CHECKS}
    for exercise in {c.exercise for c in CPU_CHECKS}:
        in_cells = sum(p for i, p in called.items() if i.startswith(exercise + "."))
        in_rubric = sum(points[c.id] for c in CPU_CHECKS if c.exercise == exercise)
        assert in_cells == in_rubric, exercise


def test_self_test_questions_are_graded_by_hand(built):
    answers = [c for c in built["cells"] if c["id"].startswith("self_test_") and c["metadata"].get("nbgrader")]
    assert [c["id"] for c in answers] == [f"self_test_{q.id}" for q in nb.SELF_TEST]
    points = nb.self_test_points()
    for cell, q in zip(answers, nb.SELF_TEST):
        meta = cell["metadata"]["nbgrader"]
        assert cell["cell_type"] == "markdown" and meta["grade"] and meta["solution"]
        assert meta["points"] == points[q.id] > 0
        assert source(cell) == f"{nb.BEGIN}\n{q.model_answer}\n{nb.END}"


def test_cell_ids_are_unique_and_valid(built):
    ids = [c["id"] for c in built["cells"]]
    assert len(ids) == len(set(ids))
    assert all(c.replace("_", "").isalnum() for c in ids), ids


# ----------------------------------------------------------------------------- our grader on notebooks


def notebook_of(tmp_path, folder) -> object:
    files = {m: (folder / f"{m}.py").read_text() for m in course.MODULES if (folder / f"{m}.py").exists()}
    path = tmp_path / "filled.ipynb"
    path.write_text(nb.dumps(nb.fill(json.loads(nb.SOURCE_NOTEBOOK.read_text()), files)))
    return path


SUBMISSIONS = {
    "reference": REPO_ROOT / "solutions",
    "stubs": REPO_ROOT / "exercises",
    "alternatives": REPO_ROOT / "tests" / "alternatives",
}
SOME_MUTANTS = [
    "buckets:runner-off-by-one-bucket",
    "launch_model:1000-cubed",
    "dispatch:dispatch-off-by-one",
    "static_runner:rebinds-buffers",
]


@pytest.mark.parametrize("name", [*SUBMISSIONS, *SOME_MUTANTS])
def test_notebook_scores_equal_module_file_scores(judge, tmp_path, name):
    if name in SUBMISSIONS:
        folder = SUBMISSIONS[name]
    else:
        from tests.harness import submission

        mutant = next(m for m in mutants.ALL if m.id == name)
        text = mutants.apply(mutant, (REPO_ROOT / "solutions" / f"{mutant.module}.py").read_text())
        folder = submission(tmp_path / "modules", **{mutant.module: text})
    from_files = per_exercise(judge.grade(load(folder)))
    from_notebook = per_exercise(judge.grade(load(notebook_of(tmp_path, folder))))
    assert from_notebook == from_files
    if name.count(":"):
        exercise = mutants.MARKERS[name.split(":")[0]]
        assert from_notebook[exercise][0] < from_notebook[exercise][1], f"{name} kept its points"


def test_unreadable_notebook_is_a_clear_error(tmp_path, judge):
    bad = tmp_path / "broken.ipynb"
    bad.write_text('{"cells": [')
    report = judge.grade(load(bad))
    assert report.score == 0
    for exercise in report.exercises:
        if exercise.max_score == 0:  # only GPU checks (exercise 3 on a CPU): they wait, unjudged
            assert all(c.status == "pending" for c in exercise.checks), exercise.exercise
            continue
        reasons = [c.reason for c in exercise.checks if c.status == "failed" and not c.check.hidden]
        assert reasons and all("broken.ipynb is not a readable notebook (JSONDecodeError" in r for r in reasons), (
            reasons
        )
        hidden = [c.reason for c in exercise.checks if c.status == "failed" and c.check.hidden]
        assert all(
            r == f"rule: {c.check.rule}"
            for r, c in zip(hidden, [c for c in exercise.checks if c.status == "failed" and c.check.hidden])
        ), hidden  # the rule, nothing more
    other = tmp_path / "other.ipynb"
    other.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "print(1)"}]}))
    reason = next(c.reason for c in judge.grade_exercise(load(other), "ex5").checks if c.status == "failed")
    assert "other.ipynb has no answer cell for it" in reason
    assert "%%writefile student/buckets.py" in reason


def test_writefile_rule():
    assert writefile_module("%%writefile student/buckets.py\nx = 1") == "buckets"
    assert writefile_module("%%writefile buckets.py") == "buckets"
    assert writefile_module("%%writefile  student/buckets.py  \n") == "buckets"
    for text in (
        "\n%%writefile student/buckets.py",
        "%%writefile -a student/buckets.py",
        "%%writefile student/buckets.txt",
        "%%writefile student/other.py",
        "buckets.py",
        "%%writefile",
    ):
        assert writefile_module(text) is None, text


# ----------------------------------------------------------------------------- command line


def run(*args, cwd=REPO_ROOT):
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_cli_build_check_and_fill(tmp_path):
    done = run("notebook", "build", "--check")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "filled.ipynb"
    done = run(
        "notebook", "fill", str(nb.SOURCE_NOTEBOOK), str(REPO_ROOT / "exercises"), "--out", str(out), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    cells = nb.answer_cells(json.loads(out.read_text()))
    stub = (REPO_ROOT / "exercises" / "buckets.py").read_text()
    assert source(cells["buckets"]).partition("\n")[2] == stub.rstrip("\n")
    done = run("notebook", "fill", str(tmp_path / "missing.ipynb"), str(REPO_ROOT / "exercises"), "--out", str(out))
    assert done.returncode == 2 and "NOTEBOOK: no such notebook" in done.stderr
    done = run("notebook", "fill", str(nb.SOURCE_NOTEBOOK), str(tmp_path / "nowhere"), "--out", str(out))
    assert done.returncode == 2 and "FOLDER" in done.stderr


def test_grade_a_notebook_from_another_folder(tmp_path):
    """The reference is found wherever the grader is started (the repository root is not on
    sys.path there), as nbgrader's kernels and instructors need."""
    done = run("grade", str(nb.SOURCE_NOTEBOOK), "--gpu", "off", "--json", str(tmp_path / "r.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["score"] == sum(load_rubric()[c.id] for c in CPU_CHECKS), done.stdout


def test_an_nbgrader_student_folder_is_a_submission(tmp_path):
    """grade-all over nbgrader's submitted/: each <student>/<assignment>/<name>.ipynb is read."""
    folder = tmp_path / "alice" / nb.ASSIGNMENT
    folder.mkdir(parents=True)
    shutil.copy(nb.SOURCE_NOTEBOOK, folder / f"{nb.ASSIGNMENT}.ipynb")
    submission = load(tmp_path / "alice")
    assert sorted(submission.files) == sorted(nb.answer_cells(json.loads(nb.SOURCE_NOTEBOOK.read_text())))


def test_every_self_test_answer_has_a_marking_guide_and_q3_takes_either_denominator():
    """Issue 24: whoever grades by hand reads what earns each point; the lesson's Q3 figures
    (the tax against the compute, 14% -> 36%) and the course's (against the eager step,
    13% -> 26%) are both in the key, with the numbers."""
    points = nb.self_test_points()
    for q in nb.SELF_TEST:
        guide = q.model_answer.split("Marking guide", 1)
        assert len(guide) == 2, f"{q.id}: its model answer has no marking guide"
        assert guide[1].count("- 1 point") == points[q.id], (
            f"{q.id}: the guide must say what earns each of its {points[q.id]:g} points"
        )
    q3 = next(q for q in nb.SELF_TEST if q.id == "quantized_model").model_answer
    for figure in ("2.15 / 15 = 14%", "2.15 / 6 = 36%", "2.15 / 17.15 = 13%", "2.15 / 8.15 = 26%"):
        assert figure in q3, f"Q3's key lacks {figure!r}"
    assert round(2.15 / 15 * 100) == 14 and round(2.15 / 6 * 100) == 36
    assert round(2.15 / 17.15 * 100) == 13 and round(2.15 / 8.15 * 100) == 26
