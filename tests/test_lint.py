"""The lint: ``ruff check .`` and ``ruff format --check .`` pass (configured in pyproject.toml's
``[tool.ruff]``; CI runs them in .ci/run too), and every ``# noqa`` in the repository's Python
files says what it silences and why, in the house format ``# noqa: CODE[, CODE] - reason``
(``# noqa: BLE001 - reported, not raised``). A bare ``# noqa`` silences every rule on its line,
and one without a reason leaves the next reader to guess whether it still holds.
"""

from __future__ import annotations

import importlib.util
import io
import re
import subprocess
import sys
import tokenize
import tomllib

import pytest

from coursekit.impl import REPO_ROOT

#: A comment that holds a noqa directive, however it is spelled (no space, upper case...).
NOQA = re.compile(r"#\s*noqa\b", re.IGNORECASE)
#: The house format, from the directive to the end of the comment.
HOUSE = re.compile(r"# noqa: [A-Z]+[0-9]+(?:, [A-Z]+[0-9]+)* - \S.*")


def noqa_problems(source: str, name: str) -> list[str]:
    """``name:line: comment`` for each ``# noqa`` comment of ``source`` (Python) that is not in the
    house format. Comments only (``tokenize``): a string that holds ``# noqa`` is text, not a
    directive."""
    problems = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        found = NOQA.search(token.string)
        if found and not HOUSE.fullmatch(token.string[found.start() :]):
            problems.append(f"{name}:{token.start[0]}: {token.string}")
    return problems


def tracked_python_files() -> list[str]:
    """The repository's Python files, as git tracks them (relative paths)."""
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "*.py"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
        )
    except FileNotFoundError:
        pytest.skip("git is not installed: the tracked files are not known")
    if done.returncode != 0:
        pytest.skip(f"not a git checkout (git ls-files: {done.stderr.strip()})")
    return [name for name in done.stdout.split("\0") if name]


def test_every_noqa_names_its_rules_and_says_why():
    files = tracked_python_files()
    assert files, "git ls-files found no Python file"
    problems = [
        problem for name in files for problem in noqa_problems((REPO_ROOT / name).read_text(encoding="utf-8"), name)
    ]
    assert not problems, (
        "write each `# noqa` as `# noqa: CODE[, CODE] - reason` (the rules it "
        "silences, and why they cannot hold there):\n" + "\n".join(problems)
    )


def test_the_noqa_check_can_fail(tmp_path):
    """The check above catches a bare ``# noqa``, one without codes, one without a reason and a
    misspelt one; it passes the house format, and ``# noqa`` inside a string."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import os  # noqa\n"
        "import re  # noqa: F401\n"
        "import sys  # noqa: F401 - the reason\n"
        "import json  # NOQA:F401 - shouted, no space\n"
        "x = 1  # the comment first  # noqa: E501, W291 - a long line, kept whole\n"
        "y = lambda: 0  # noqa - a reason, but no code\n"
        "TEXT = 'import os  # noqa'\n",
        encoding="utf-8",
    )
    problems = noqa_problems(planted.read_text(encoding="utf-8"), str(planted))
    assert [p.split(": ", 1)[0] for p in problems] == [f"{planted}:{n}" for n in (1, 2, 4, 6)], problems
    assert problems[0] == f"{planted}:1: # noqa"


def _pinned_ruff() -> str:
    """The ruff version the dev extra pins (pyproject.toml)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = [r for r in project["optional-dependencies"]["dev"] if r.replace(" ", "").startswith("ruff==")]
    assert len(pins) == 1, "pyproject.toml: the dev extra pins ruff (ruff==X.Y.Z)"
    return pins[0].split("==", 1)[1].strip()


@pytest.mark.parametrize("command", [["check"], ["format", "--check", "--diff"]], ids=["check", "format"])
def test_ruff_passes(command):
    """``ruff check .`` and ``ruff format --check .`` (pyproject.toml's ``[tool.ruff]``; CI runs
    both in .ci/run): run here too, so that the suite alone says what CI will say."""
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (the dev extra installs it: pip install -e \".[dev]\")")
    version = subprocess.run(
        [sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True, timeout=60
    ).stdout.split()
    pinned = _pinned_ruff()
    if version[-1:] != [pinned]:
        pytest.skip(
            f"ruff {' '.join(version[1:]) or '?'} is installed, the dev extra pins {pinned}: "
            "another release checks other things"
        )
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", "."],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    fix = "ruff format ." if command[0] == "format" else "the findings above"
    assert done.returncode == 0, (
        f"ruff {' '.join(command)} . (pyproject.toml's [tool.ruff]); fix with {fix}:\n"
        f"{done.stdout[-4000:]}{done.stderr}"
    )
