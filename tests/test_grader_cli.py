"""``python -m grader grade``: the README's main command."""

import re
import subprocess
import sys

from coursekit.impl import REPO_ROOT


def grade(*args):
    return subprocess.run([sys.executable, "-m", "grader", "grade", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_fresh_exercises_report_what_is_left():
    run = grade()
    assert run.returncode == 0, run.stderr
    assert "ex1" in run.stdout and "0/" in run.stdout and "NotImplementedError: exercise 1" in run.stdout


def test_reference_passes_everything():
    run = grade("solutions")
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if re.match(r"ex\d", line)]
    assert rows and all("all pass" in line for line in rows), run.stdout


def test_not_a_folder():
    run = grade("no/such/folder")
    assert run.returncode == 2 and "SUBMISSION" in run.stderr
