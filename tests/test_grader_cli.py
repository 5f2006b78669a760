"""``python -m grader``: grade, grade-all, merge, secret and their outputs, run as a student or a
TA would."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch

from coursekit.course import EXERCISES
from coursekit.impl import REPO_ROOT

MARKERS = [e.marker for e in EXERCISES]


def grader(*args, timeout=600, env=None):
    return subprocess.run(
        [sys.executable, "-m", "grader", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def rows(stdout):
    return {line.split()[0]: line for line in stdout.splitlines() if re.match(r"ex\d ", line)}


def exercise_scores(result):
    scores = {}
    for test in result["tests"]:
        exercise = test["name"].split(" ", 1)[0]
        if test["extra_data"].get("state") != "manual":
            scores[exercise] = scores.get(exercise, 0) + test.get("score", 0)
    return scores


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("secret") / "grading-secret"
    run = grader("secret", "new", str(path))
    assert run.returncode == 0 and "seed id" in run.stdout, run.stderr
    return path


def test_fresh_exercises_score_zero_and_say_what_is_left(tmp_path):
    run = grader("grade", "--json", str(tmp_path / "r.json"))
    assert run.returncode == 0, run.stderr
    table = rows(run.stdout)
    assert sorted(table) == MARKERS, run.stdout
    assert all(re.search(r" 0/\d+", line) for line in table.values()), run.stdout
    assert "not implemented yet (exercise 1" in run.stdout, run.stdout
    assert "PRACTICE MODE" in run.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["score"] == 0 and result["extra_data"]["mode"] == "practice"


def test_the_report_lists_every_lost_check_with_its_whole_rule(tmp_path):
    folder = tmp_path / "half"
    shutil.copytree(REPO_ROOT / "solutions", folder)
    shutil.copy(REPO_ROOT / "exercises" / "dispatch.py", folder / "dispatch.py")
    run = grader("grade", str(folder), "--only", "ex6")
    assert run.returncode == 0, run.stderr
    from grader.exercises import public_checks

    for check in [c for c in public_checks() if c.exercise == "ex6"]:
        assert f"- {check.name} (-" in run.stdout, run.stdout
    assert "rule: allowed = valid_modes (None or empty: all) minus invalid_modes" in " ".join(run.stdout.split())
    brief = grader("grade", str(folder), "--only", "ex6", "--brief")
    assert len([line for line in brief.stdout.splitlines() if line.startswith("ex6 ")]) == 1
    assert "- mode_table" not in brief.stdout


def test_reference_gets_every_point_and_one_test_per_check(tmp_path):
    run = grader("grade", "solutions", "--json", str(tmp_path / "results.json"))
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / "results.json").read_text())
    from grader.judge import all_checks, load_rubric

    points = load_rubric()
    *checks, manual = result["tests"]
    assert [t["extra_data"]["check"] for t in checks] == [
        c.id for c in sorted(all_checks(), key=lambda c: (c.exercise, list(points).index(c.id)))
    ]
    assert manual["extra_data"] == {"check": "self_test", "state": "manual", "points": 6.0}
    assert "graded by hand" in manual["name"] and "score" not in manual and "status" not in manual
    for test in checks:
        exercise, name = test["name"].removesuffix(" (pending: GPU pass)").split(" · ")
        assert test["extra_data"]["check"] == f"{exercise}.{name}"
        if test["extra_data"]["state"] == "pending":
            # Not run is not passed: no score, no maximum, no status for Gradescope to show.
            assert not {"score", "max_score", "status"} & set(test) and "gpu" in test["tags"], test
            assert test["output"].startswith("PENDING") and "graded in the GPU pass" in test["output"]
        else:
            assert test["score"] == test["max_score"] == points[test["extra_data"]["check"]], test
            assert test["status"] == "passed"
    assert result["score"] == sum(t.get("max_score", 0) for t in checks) == result["extra_data"]["max_score"]
    if not torch.cuda.is_available():
        gpu = sum(p for c, p in points.items() if c.split(".", 1)[1].startswith("gpu_"))
        assert result["extra_data"]["pending"] == gpu and f"{gpu:g} points pending" in result["output"]


def test_official_grading_is_reproducible_and_draws_other_inputs(tmp_path, secret_file):
    folder = tmp_path / "half"
    shutil.copytree(REPO_ROOT / "solutions", folder)
    shutil.copy(REPO_ROOT / "exercises" / "buckets.py", folder / "buckets.py")
    outputs = []
    for i in range(2):
        run = grader(
            "grade",
            str(folder),
            "--json",
            str(tmp_path / f"{i}.json"),
            env={"LAUNCH_TAX_SECRET_FILE": str(secret_file)},
        )
        assert run.returncode == 0, run.stderr
        outputs.append(json.loads((tmp_path / f"{i}.json").read_text()))
    assert outputs[0]["tests"] == outputs[1]["tests"]
    assert outputs[0]["extra_data"]["mode"] == "official" and "official grading" in outputs[0]["output"]
    scores = exercise_scores(outputs[0])
    assert scores["ex5"] == 0 and scores["ex6"] > 0, scores  # dispatch still works: its own module
    practice = grader("grade", str(folder), "--json", str(tmp_path / "p.json"), "--only", "ex5")
    labels = {t["output"].splitlines()[0] for t in json.loads((tmp_path / "p.json").read_text())["tests"]}
    official = {t["output"].splitlines()[0] for t in outputs[0]["tests"] if t["name"].startswith("ex5")}
    assert practice.returncode == 0 and labels != official  # other inputs than the release's


def test_a_notebook_and_a_zip_are_graded_like_a_folder(tmp_path):
    cells = [{"cell_type": "markdown", "source": "# my answers", "metadata": {}}]
    for path in sorted((REPO_ROOT / "solutions").glob("[a-z]*.py")):
        cells.append(
            {
                "cell_type": "code",
                "metadata": {},
                "outputs": [],
                "execution_count": None,
                "source": f"%%writefile {path.name}\n" + path.read_text(),
            }
        )
    notebook = tmp_path / "answers.ipynb"
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    archive = tmp_path / "answers.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in (REPO_ROOT / "solutions").glob("*.py"):
            z.write(path, f"student/{path.name}")
    for submission in (notebook, archive):
        run = grader("grade", str(submission), "--json", str(tmp_path / "r.json"))
        assert run.returncode == 0, run.stderr
        result = json.loads((tmp_path / "r.json").read_text())
        assert all(t.get("score") == t.get("max_score") for t in result["tests"]), (submission, result)


def test_grade_all_writes_a_gradebook_and_a_summary(tmp_path):
    submissions = tmp_path / "class"
    shutil.copytree(REPO_ROOT / "solutions", submissions / "alice")
    shutil.copytree(REPO_ROOT / "exercises", submissions / "bob", ignore=shutil.ignore_patterns("tests"))
    (submissions / "carol.ipynb").write_text("{not json")
    run = grader("grade-all", str(submissions), "--out", str(tmp_path / "out"), "--jobs", "2", "--practice")
    assert run.returncode == 0, run.stderr
    assert "3/3" in run.stderr and "per minute" in run.stdout
    with open(tmp_path / "out" / "gradebook.csv") as f:
        book = {row["student"]: row for row in csv.DictReader(f)}
    assert sorted(book) == ["alice", "bob", "carol"]
    assert book["alice"]["score"] == book["alice"]["max_score"] and float(book["bob"]["score"]) == 0
    assert float(book["carol"]["score"]) == 0 and "not a readable notebook" in book["carol"]["notes"]
    for student in book:
        result = json.loads((tmp_path / "out" / "students" / student / "results.json").read_text())
        assert sorted({t["name"].split(" ")[0] for t in result["tests"]} - {"self-test"}) == MARKERS
    summary = (tmp_path / "out" / "summary.md").read_text()
    for heading in (
        "Score distribution",
        "Pass rate per check (worst first)",
        "Most common first lost point",
        "Refused or not gradable",
        "Slowest submissions",
    ):
        assert heading in summary, summary
    assert "not implemented yet" in summary and (tmp_path / "out" / "scores.svg").read_text().startswith("<?xml")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["grade", "no/such/folder"], "SUBMISSION"),
        (["grade-all", "no/such/folder", "--out", "x"], "DIR"),
        (["grade", "solutions", "--secret-file", "/no/such/secret"], "--secret-file"),
        (["secret", "new", "solutions/secret"], "inside the repository"),
        (["grade", "solutions", "--deadline", "5"], "--deadline"),
        (["gradescope", "x.zip", "--timeout-minutes", "90"], "--timeout-minutes"),
    ],
)
def test_bad_arguments_exit_2(args, needle):
    run = grader(*args)
    assert run.returncode == 2 and needle in run.stderr, (run.returncode, run.stderr)


def test_a_secret_is_made_once_and_kept_private(tmp_path):
    path = tmp_path / "deep" / "secret"
    assert grader("secret", "new", str(path)).returncode == 0
    assert oct(path.stat().st_mode & 0o777) == "0o600" and len(path.read_text().strip()) == 64
    again = grader("secret", "new", str(path))
    assert again.returncode == 2 and "exists" in again.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_gpu_on_without_cuda_is_an_error():
    run = grader("grade", "solutions", "--gpu", "on")
    assert run.returncode == 2 and "CUDA" in run.stderr, run.stderr


def test_results_are_written_before_the_report_and_a_closed_pipe_is_no_failure(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "grader", "grade", "--only", "ex6", "--json", str(out)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    proc.stdout.close()  # the reader is gone before the first line (as with `| head -c 0`)
    assert proc.wait(timeout=600) == 0
    assert json.loads(out.read_text())["tests"]
