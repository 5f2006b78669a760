"""``python -m grader``: grade, grade-all and their outputs, run as a student or a TA would."""

import csv
import json
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch

from coursekit.impl import EXERCISES, REPO_ROOT

MARKERS = [f"ex{n}" for n, _ in EXERCISES]


def grader(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout)


def rows(stdout):
    return {line.split()[0]: line for line in stdout.splitlines() if re.match(r"ex\d ", line)}


def test_fresh_exercises_score_zero_and_say_what_is_left(tmp_path):
    run = grader("grade", "--json", str(tmp_path / "r.json"))
    assert run.returncode == 0, run.stderr
    table = rows(run.stdout)
    assert sorted(table) == MARKERS, run.stdout
    assert all(re.search(r" 0/\d+", line) for line in table.values()), run.stdout
    assert "not implemented yet (exercise 1" in table["ex1"], run.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["score"] == 0


def test_reference_gets_every_point_and_gradescope_json(tmp_path):
    run = grader("grade", "solutions", "--json", str(tmp_path / "results.json"))
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / "results.json").read_text())
    assert [t["name"] for t in result["tests"]] == MARKERS
    for test in result["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert test["score"] == test["max_score"] > 0 and test["status"] == "passed", test
    assert result["score"] == sum(t["max_score"] for t in result["tests"])
    if not torch.cuda.is_available():
        assert "GPU checks not run" in result["output"], result["output"]


def test_grading_is_reproducible(tmp_path):
    folder = tmp_path / "half"
    shutil.copytree(REPO_ROOT / "solutions", folder)
    shutil.copy(REPO_ROOT / "exercises" / "buckets.py", folder / "buckets.py")
    outputs = []
    for i in range(2):
        assert grader("grade", str(folder), "--json", str(tmp_path / f"{i}.json")).returncode == 0
        outputs.append(json.loads((tmp_path / f"{i}.json").read_text()))
    assert outputs[0] == outputs[1]
    scores = {t["name"]: t["score"] for t in outputs[0]["tests"]}
    assert scores["ex5"] == 0 and scores["ex6"] > 0, scores  # dispatch still works: its own module


def test_a_notebook_and_a_zip_are_graded_like_a_folder(tmp_path):
    cells = [{"cell_type": "markdown", "source": "# my answers", "metadata": {}}]
    for path in sorted((REPO_ROOT / "solutions").glob("[a-z]*.py")):
        cells.append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                      "source": f"%%writefile {path.name}\n" + path.read_text()})
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
        assert all(t["score"] == t["max_score"] for t in result["tests"]), (submission, result)


def test_grade_all_writes_a_gradebook(tmp_path):
    submissions = tmp_path / "class"
    shutil.copytree(REPO_ROOT / "solutions", submissions / "alice")
    shutil.copytree(REPO_ROOT / "exercises", submissions / "bob", ignore=shutil.ignore_patterns("tests"))
    (submissions / "carol.ipynb").write_text("{not json")
    run = grader("grade-all", str(submissions), "--out", str(tmp_path / "out"), "--jobs", "2")
    assert run.returncode == 0, run.stderr
    assert "3/3" in run.stderr and "per minute" in run.stdout
    with open(tmp_path / "out" / "gradebook.csv") as f:
        book = {row["student"]: row for row in csv.DictReader(f)}
    assert sorted(book) == ["alice", "bob", "carol"]
    assert book["alice"]["score"] == book["alice"]["max_score"] and float(book["bob"]["score"]) == 0
    assert float(book["carol"]["score"]) == 0 and "not a readable notebook" in book["carol"]["notes"]
    for student in book:
        result = json.loads((tmp_path / "out" / student / "results.json").read_text())
        assert [t["name"] for t in result["tests"]] == MARKERS


@pytest.mark.parametrize("args, needle", [
    (["grade", "no/such/folder"], "SUBMISSION"),
    (["grade-all", "no/such/folder", "--out", "x"], "DIR"),
])
def test_bad_arguments_exit_2(args, needle):
    run = grader(*args)
    assert run.returncode == 2 and needle in run.stderr, (run.returncode, run.stderr)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without CUDA")
def test_gpu_on_without_cuda_is_an_error():
    run = grader("grade", "solutions", "--gpu", "on")
    assert run.returncode == 2 and "CUDA" in run.stderr, run.stderr
