"""``grader/version.py``: the commit a report names is this repository's own, never that of a
repository the project was copied into (a class repository, a course-wide monorepo, a student
repository that vendors the grader), and never that of whatever ``GIT_DIR`` names.

The copies below hold what ``grader.version`` imports (``coursekit/impl.py``, standard library
only) and run in an interpreter without site-packages (``-I -S``), so that the editable
install's import finder cannot hand them this checkout's modules.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT
from grader import version

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
#: The files a copy of the project needs for ``grader.version.build_info``; ``grader/release.py``
#: is what marks the staff repository (a release leaves it out).
COPIED = ("grader/__init__.py", "grader/version.py", "grader/release.py", "coursekit/__init__.py", "coursekit/impl.py")


def _git_env() -> dict[str, str]:
    """The environment without what would point git at another repository (a hook's GIT_DIR)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        env=_git_env(),
    )
    assert done.returncode == 0, f"git {' '.join(args)} in {folder}: {done.stderr}"
    return done.stdout.strip()


def repository(folder: Path) -> str:
    """``folder`` made a git repository with everything in it committed; its short commit."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README").write_text("a repository\n")
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "first")
    return git(folder, "rev-parse", "--short=12", "HEAD")


def copy_project(into: Path, files=COPIED) -> Path:
    for name in files:
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, into / name)
    return into


def build_info_of(project: Path, env: dict[str, str] | None = None) -> dict:
    """``build_info()`` as the copy in ``project`` reports it, run there."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import grader.version as v; "
        "print(json.dumps({'file': v.__file__, 'info': v.build_info()}))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(project)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env=env if env is not None else _git_env(),
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert Path(out["file"]).resolve() == (project / "grader" / "version.py").resolve(), out["file"]
    return out["info"]


@needs_git
def test_a_copy_in_another_repositorys_subfolder_reports_unknown(tmp_path):
    outer = tmp_path / "class-repo"
    theirs = repository(outer)
    project = copy_project(outer / "courses" / "launch-tax")
    git(outer, "add", "-A")
    git(outer, "commit", "-q", "-m", "vendor the course")
    (outer / "README").write_text("changed, not committed\n")  # the class repository is dirty
    info = build_info_of(project)
    assert info["commit"] == "unknown", (
        f"a copy inside another repository reports that repository's commit {info['commit']} "
        f"(the class repository's first commit was {theirs})"
    )
    assert info["changes"] is False, "the class repository's uncommitted change is not the grader's"


@needs_git
def test_the_same_copy_as_its_own_repository_reports_its_commit(tmp_path):
    """The control for the test above: the copy works, and where it is the repository's top
    level its commit and its uncommitted changes are reported."""
    project = copy_project(tmp_path / "launch-tax")
    ours = repository(project)
    assert build_info_of(project) == {"grader": "0.1.0", "commit": ours, "changes": False}
    (project / "grader" / "version.py").write_text((project / "grader" / "version.py").read_text() + "\n")
    assert build_info_of(project)["changes"] is True


@needs_git
def test_git_dir_in_the_environment_does_not_redirect_the_commit(tmp_path):
    """A git hook or a shell that sets GIT_DIR (another repository's) would make git read that
    repository with the working folder as its top level."""
    project = copy_project(tmp_path / "launch-tax")
    ours = repository(project)
    other = tmp_path / "other"
    repository(other)
    (other / "README").write_text("another commit\n")
    git(other, "commit", "-q", "-am", "second")
    env = {**_git_env(), "GIT_DIR": str(other / ".git")}
    assert build_info_of(project, env)["commit"] == ours


@needs_git
def test_a_release_in_a_students_repository_reports_its_build_json_or_unknown(tmp_path):
    """A release (no ``grader/release.py``) made a student's repository: its BUILD.json names
    the grader's commit; without one the student's commit is not the grader's."""
    from grader.release import WITHHELD

    assert "release.py" in WITHHELD["grader"], "grader/version.py's STAFF_ONLY marker no longer marks the staff"
    released = copy_project(tmp_path / "student", [f for f in COPIED if f != "grader/release.py"])
    repository(released)
    assert build_info_of(released) == {"grader": "0.1.0", "commit": "unknown", "changes": False}
    built = {"grader": "0.1.0", "commit": "0123456789ab", "changes": False}
    (released / "grader" / "BUILD.json").write_text(json.dumps(built))
    assert build_info_of(released) == built


@needs_git
def test_this_checkout_reports_its_own_commit():
    if version.BUILD.is_file():
        pytest.skip("this checkout holds a BUILD.json: it reports what that recorded")
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=REPO_ROOT, capture_output=True, text=True, env=_git_env()
    )
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != REPO_ROOT.resolve():
        pytest.skip("this checkout is not a git repository of its own")
    assert version.build_info()["commit"] == git(REPO_ROOT, "rev-parse", "--short=12", "HEAD")


def test_without_git_the_commit_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on it
    monkeypatch.setattr(version, "BUILD", tmp_path / "BUILD.json")
    monkeypatch.setattr(version, "_VERSION", [])
    info = version.build_info()
    assert (info["commit"], info["changes"]) == ("unknown", False)
    assert version.grader_version().endswith("(unknown)")
