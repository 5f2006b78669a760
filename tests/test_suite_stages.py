"""The suite's two stages (tests/conftest.py): ``pytest tests`` skips the tests marked ``slow``,
each with the command that runs them, never silently; ``-m`` selects them like any marker; CI
runs both stages."""

import subprocess
import sys

from coursekit.impl import REPO_ROOT
from tests.conftest import SLOW_STAGE

#: A module whose tests are all slow (pytestmark), and quick to skip.
ALL_SLOW = "tests/test_classbook.py"


def pytest(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", ALL_SLOW, "-p", "no:xdist", "-q", "-rs", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout + done.stderr


def test_the_slow_stage_is_skipped_with_its_command_and_selected_by_marker():
    skipped = pytest()
    assert "passed" not in skipped and "skipped" in skipped, skipped[-2000:]
    assert f"the suite's slow stage, which CI runs too: {SLOW_STAGE}" in skipped, skipped[-2000:]
    collected = pytest("-m", "slow", "--collect-only")
    assert "deselected" not in collected and "tests collected" in collected, collected[-2000:]
    assert "test_" in collected


def test_ci_runs_both_stages():
    script = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line.strip() for line in script.splitlines() if "-m pytest tests" in line]
    assert commands == ['"$py" -m pytest tests -n auto', 'exec "$py" -m pytest tests -n auto -m slow'], commands
