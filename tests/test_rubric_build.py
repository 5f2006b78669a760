"""Changing the points is a decision, stated once: a weight changed without the total is refused
everywhere, and ``python -m grader build`` rewrites what states points once the total changes.

Each test edits a copy of the repository (its tracked files, the nbgrader course included)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT
from grader import rubric

#: The course's stated total and the self-test's points, as grader/rubric.toml has them now.
TOTAL = int(rubric.load().stated_total)
BY_HAND = sum(rubric.load().questions.values())


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        source = REPO_ROOT / rel
        if rel.startswith(("tests/", ".ci/")) or not source.is_file() or source.is_symlink():
            continue
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, root / rel)
    return root


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader", *args], cwd=root, capture_output=True, text=True, timeout=600
    )


def set_rubric(root: Path, old: str, new: str) -> None:
    path = root / "grader" / "rubric.toml"
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def reweight_seed_report(root: Path, points: int) -> None:
    """Exercise 1's seed_report check, worth ``points`` (written on the check)."""
    path = root / "grader" / "exercises" / "launch_model.py"
    text = path.read_text(encoding="utf-8")
    found = re.findall(r'Check\(\s*"ex1",\s*"seed_report",.*?points=(\d+),?\s*\)', text, re.DOTALL)
    assert found == ["2"], found
    path.write_text(
        re.sub(
            r'(Check\(\s*"ex1",\s*"seed_report",.*?points=)2(,?\s*\))',
            rf"\g<1>{points}\2",
            text,
            count=1,
            flags=re.DOTALL,
        ),
        encoding="utf-8",
    )


def test_a_changed_weight_is_refused_until_it_is_a_decision(repo, tmp_path):
    reweight_seed_report(repo, 3)
    secret = tmp_path / "secret"
    assert run(repo, "secret", "new", str(secret)).returncode == 0
    for args in (
        ["grade", "--brief", "--only", "ex1"],
        ["gradescope", str(tmp_path / "a.zip"), "--secret-file", str(secret)],
        ["release", str(tmp_path / "student")],
    ):
        done = run(repo, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert f"add up to {TOTAL + 1}" in done.stderr and f"total says {TOTAL}" in done.stderr, done.stderr
    assert not (tmp_path / "a.zip").exists() and not (tmp_path / "student").exists()
    # The decision: a new total. Until the README and the notebook say so, still refused.
    set_rubric(repo, f"total = {TOTAL}", f"total = {TOTAL + 1}")
    done = run(repo, "grade", "--brief", "--only", "ex1")
    assert done.returncode == 2 and "grader build" in done.stderr and "README" in done.stderr
    done = run(repo, "gradescope", str(tmp_path / "a.zip"), "--secret-file", str(secret))
    assert done.returncode == 2 and "notebook" in done.stderr, done.stderr


def test_build_rewrites_what_the_rubric_derives_and_says_what_to_redo(repo):
    reweight_seed_report(repo, 3)
    set_rubric(repo, f"total = {TOTAL}", f"total = {TOTAL + 1}")
    check = run(repo, "build", "--check")
    assert check.returncode == 1 and "README.md" in check.stdout and "launch_tax.ipynb" in check.stdout
    done = run(repo, "build")
    assert done.returncode == 0, done.stderr
    for redo in ("nbgrader generate_assignment", "grader release", "--self-test", "--replace"):
        assert redo in done.stdout, f"build must say to redo {redo!r}:\n{done.stdout}"
    assert run(repo, "build", "--check").returncode == 0
    readme = (repo / "README.md").read_text(encoding="utf-8")
    assert re.search(rf"hold {TOTAL + 1}\s+points", readme) and re.search(
        rf"{TOTAL + 1 + BY_HAND:g}\s+in\s+all", readme
    ), readme[:3000]
    notebook = json.loads((repo / "course" / "source" / "launch_tax" / "launch_tax.ipynb").read_text(encoding="utf-8"))
    cell = next(
        c for c in notebook["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_ex1_seed_report"
    )
    assert cell["metadata"]["nbgrader"]["points"] == 3
    graded = run(repo, "grade", "solutions", "--brief", "--only", "ex1")
    assert graded.returncode == 0 and "14/14" in graded.stdout, graded.stdout + graded.stderr
