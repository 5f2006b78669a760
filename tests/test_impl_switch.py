"""``--impl``: folders load as packages, and a missing or broken module fails only its tests."""

import subprocess
import sys

import pytest

from coursekit.impl import REPO_ROOT, Implementation, ModuleFailedToImport, ModuleNotInSubmission
from grader.public import run_public_tests


def test_submission_folders_are_separate_packages(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "buckets.py").write_text(f"WHO = {name!r}\n")
        (tmp_path / name / "dispatch.py").write_text("from .buckets import WHO\n")
    a, b = Implementation(tmp_path / "a"), Implementation(tmp_path / "b")
    assert a.module("dispatch").WHO == "a" and b.module("dispatch").WHO == "b"


def test_missing_and_broken_modules(tmp_path):
    (tmp_path / "launch_model.py").write_text("def broken(:\n")
    impl = Implementation(tmp_path)
    with pytest.raises(ModuleNotInSubmission, match="module 'buckets' not in submission"):
        impl.module("buckets")
    with pytest.raises(ModuleFailedToImport, match="SyntaxError"):
        impl.module("launch_model")


def test_a_missing_module_fails_only_its_own_tests(tmp_path):
    (tmp_path / "launch_model.py").write_text((REPO_ROOT / "solutions/launch_model.py").read_text())
    outcome = run_public_tests(tmp_path, "ex1 or ex5")
    # An exercise's tests: its own file, and its items in test_checks.py and test_examples.py
    # (their ids start with the module: [buckets.pad_rows]).
    assert outcome.passed and all("test_launch_model" in t or "[launch_model." in t for t in outcome.passed), (
        outcome.summary()
    )
    assert outcome.failed and all("test_buckets" in t or "[buckets." in t for t in outcome.failed), outcome.summary()
    assert "module 'buckets' not in submission" in outcome.output, outcome.summary()


def test_unknown_impl_is_a_usage_error():
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "exercises", "--impl", "no/such/dir"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 4 and "no such folder" in run.stderr, run.stdout + run.stderr


def test_exercise_scripts_say_what_is_left():
    run = subprocess.run(
        [sys.executable, "-m", "exercises.launch_model"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert run.returncode == 1 and "exercise 1" in run.stderr and "-m ex1" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
