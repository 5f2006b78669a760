"""``python -m grader release``: the student repository holds no solution and no hidden check,
and works on its own (tests run, the public grader grades from recorded answers)."""

import ast
import json
import re
import shutil
import subprocess
import sys

import pytest

from coursekit.impl import REPO_ROOT
from grader.exercises import hidden_checks
from tests import harness


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    return harness.released(tmp_path_factory.mktemp("release") / "student")


def release_text(root):
    return {p: p.read_text(errors="replace") for p in root.rglob("*") if p.is_file()}


def squash(text):
    return re.sub(r"\s+", "", text)


def reference_bodies():
    """Every function body of the reference with at least two statements, whitespace removed."""
    for path in (REPO_ROOT / "solutions").glob("*.py"):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.body) >= 2:
                body = (
                    node.body[1:]
                    if isinstance(node.body[0], ast.Expr)
                    and isinstance(getattr(node.body[0], "value", None), ast.Constant)
                    else node.body
                )
                text = "".join(ast.get_source_segment(source, stmt) or "" for stmt in body)
                if len(squash(text)) >= 40:
                    yield f"{path.name}:{node.name}", squash(text)


def test_no_solution_and_no_hidden_check_in_the_release(released):
    names = {p.relative_to(released).as_posix() for p in released.rglob("*")}
    assert not any(n.startswith(("solutions", "tests", ".ci")) for n in names), sorted(names)
    assert not any(n.startswith("grader/hidden/") for n in names) and "grader/release.py" not in names
    readme = (released / "README.md").read_text()
    assert "solutions" not in readme and "staff-only" not in readme, "the README points at staff files"
    files = {p: squash(t) for p, t in release_text(released).items()}
    leaked = [name for name, body in reference_bodies() if any(body in t for t in files.values())]
    assert not leaked, f"reference function bodies found in the release: {leaked}"
    for check in hidden_checks():
        needles = [check.rule, f"{check.exercise}.{check.name}", check.name]
        found = [n for n in needles for p, t in release_text(released).items() if n in t]
        assert not found, f"hidden check {check.id} appears in the release: {found}"
    assert "hidden" not in (released / "grader" / "rubric.toml").read_text().split("\n[", 1)[-1]


def test_the_leak_check_can_fail(tmp_path):
    copy = tmp_path / "leaky"
    shutil.copytree(REPO_ROOT / "exercises", copy)
    shutil.copy(REPO_ROOT / "solutions" / "buckets.py", copy / "notes.py")
    files = [squash(t) for t in release_text(copy).values()]
    assert any(body in t for _, body in reference_bodies() for t in files)


@pytest.mark.slow
def test_released_repository_runs_its_tests_and_grades(released, tmp_path):
    # The graded tests all fail on the stubs; those marked given test the given argument checks,
    # and pass wherever they need nothing the student writes.
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "exercises", "-q", "-p", "no:cacheprovider", "-m", "not given"],
        cwd=released,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = tests.stdout.strip().splitlines()[-1]
    assert tests.returncode == 1 and re.match(
        r"\d+ failed, \d+ skipped, \d+ deselected(, \d+ warnings?)? in", summary
    ), summary
    finished = tmp_path / "finished"
    shutil.copytree(REPO_ROOT / "solutions", finished)
    run = subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(finished), "--json", str(tmp_path / "r.json")],
        cwd=released,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert all(
        t["score"] == t["max_score"] > 0
        for t in result["tests"]
        if t["extra_data"]["state"] not in ("pending", "manual")
    ), result
    stubs = subprocess.run(
        [sys.executable, "-m", "grader", "grade", "--json", str(tmp_path / "s.json")],
        cwd=released,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert stubs.returncode == 0 and json.loads((tmp_path / "s.json").read_text())["score"] == 0


def test_what_ships_of_grader_and_coursekit_is_an_allow_list(tmp_path, monkeypatch):
    """Issue 36: every entry of grader/ and coursekit/ is shipped or withheld on purpose; a new
    file in neither stops the release, so a staff module cannot ship because nobody listed it."""
    from grader import release

    assert not release.unclassified(), release.unclassified()
    assert not set(release.WITHHELD["grader"]) & set(release.SHIPPED["grader"])
    for folder in release.SHIPPED:  # the folders' entries, and one new staff module
        (tmp_path / folder).mkdir()
        for p in (REPO_ROOT / folder).iterdir():
            (tmp_path / folder / p.name).mkdir() if p.is_dir() else (tmp_path / folder / p.name).touch()
    (tmp_path / "grader" / "grade_all_secretly.py").touch()
    assert release.unclassified(tmp_path) == [
        "grader/grade_all_secretly.py: neither shipped nor withheld (grader/release.py: SHIPPED or WITHHELD)"
    ]
    monkeypatch.setattr(release, "unclassified", lambda root=REPO_ROOT: ["grader/x.py: neither"])
    with pytest.raises(ValueError, match="grader/x.py"):
        release.release(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_release_holds_exactly_the_allow_list(released):
    from grader import release

    for folder, shipped in release.SHIPPED.items():
        got = {p.name for p in (released / folder).iterdir()} - {"expected.json", "BUILD.json"}
        assert got == set(shipped), (folder, sorted(got ^ set(shipped)))
