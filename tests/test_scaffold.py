"""``python -m grader new-exercise``: a new exercise's files, run for real in a copy of the
repository. The scaffold's own example must behave as an exercise does: its public tests (its
check, through exercises/tests/test_checks.py, and its docstring's example) pass on the reference
and fail on the stub, and once its points are in the total the grader gives the
reference every point and the stub none of the new exercise's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from coursekit.course import EXERCISES
from coursekit.impl import REPO_ROOT

#: The number the scaffold gives a new exercise: the one after the course's last.
NEW = len(EXERCISES) + 1
MARK = f"ex{NEW}"


def _copy(dest):
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for rel in filter(None, listed.split("\0")):
        source = REPO_ROOT / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)
    return dest


def _run(root, *args):
    return subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory):
    root = _copy(tmp_path_factory.mktemp("course"))
    made = _run(root, "-m", "grader", "new-exercise", "kv_cache", "--title", "a toy KV cache")
    assert made.returncode == 0, made.stdout + made.stderr
    return root, made.stdout


def test_it_writes_every_file_and_says_what_next(scaffolded):
    root, out = scaffolded
    for rel in (
        "exercises/kv_cache.py",
        "solutions/kv_cache.py",
        "grader/exercises/kv_cache.py",
        "grader/hidden/kv_cache.py",
        "tests/alternatives/kv_cache.py",
        "tests/mutants/kv_cache.py",
    ):
        assert (root / rel).is_file(), rel
        assert rel in out
    assert '"kv_cache", "a toy KV cache"' in (root / "coursekit/course.py").read_text()
    assert "points=1" in (root / "grader/exercises/kv_cache.py").read_text()
    assert MARK not in (root / "grader/rubric.toml").read_text(), "points live on the checks"
    assert "python -m grader build" in out


def test_its_tests_pass_on_the_reference_and_fail_on_the_stub(scaffolded):
    root, _ = scaffolded
    reference = _run(root, "-m", "pytest", "exercises", "-m", MARK, "--impl", "solutions", "-q")
    assert reference.returncode == 0 and "2 passed" in reference.stdout, reference.stdout
    stub = _run(root, "-m", "pytest", "exercises", "-m", MARK, "-q")
    assert stub.returncode == 1 and f"exercise {NEW}: example" in stub.stdout, stub.stdout


def test_its_declaration_and_files_agree(scaffolded):
    """(The README's table of exercises follows at `grader build`, in the next test.)"""
    root, _ = scaffolded
    run = _run(
        root,
        "-m",
        "pytest",
        "tests/test_course.py",
        "-q",
        "-k",
        "each_declaration or numbered or every_module_file or undeclared",
    )
    assert run.returncode == 0, run.stdout[-3000:]


def test_the_grader_grades_it_once_the_total_is_decided(scaffolded, tmp_path):
    root, _ = scaffolded
    refused = _run(root, "-m", "grader", "grade", "solutions", "--only", MARK)
    assert refused.returncode != 0 and "total" in refused.stderr, refused.stderr
    rubric = root / "grader" / "rubric.toml"
    rubric.write_text(rubric.read_text().replace("total = 100", "total = 101", 1))
    built = _run(root, "-m", "grader", "build")
    assert built.returncode == 0, built.stdout + built.stderr
    table = _run(root, "-m", "pytest", "tests/test_course.py", "-q", "-k", "readme_table")
    assert table.returncode == 0, table.stdout[-2000:]
    scores = {}
    for impl in ("solutions", "exercises"):
        out = tmp_path / f"{impl}.json"
        graded = _run(root, "-m", "grader", "grade", impl, "--only", MARK, "--json", str(out))
        assert graded.returncode == 0, graded.stdout + graded.stderr
        tests = json.loads(out.read_text())["tests"]
        scores[impl] = sum(t.get("score", 0) for t in tests if t["name"].startswith(MARK + " "))
    assert scores == {"solutions": 1, "exercises": 0}


@pytest.mark.parametrize(
    "module, title, why",
    [
        ("buckets", "again", "exists already"),
        ("Bad-Name", "x", "lower-case Python name"),
        ("kv", "   ", "title"),
    ],
)
def test_it_refuses_what_it_cannot_write(module, title, why):
    run = _run(REPO_ROOT, "-m", "grader", "new-exercise", module, "--title", title)
    assert run.returncode == 2 and why in run.stderr, run.stderr
