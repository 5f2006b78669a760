"""Run the public tests (exercises/tests) in a fresh interpreter against an implementation and
read back, test by test, what passed, what failed and why (from pytest's JUnit XML)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.impl import REPO_ROOT


@dataclass
class Outcome:
    returncode: int
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # failures and errors
    skipped: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # test -> why it failed / was skipped
    output: str = ""

    def summary(self) -> str:
        return (
            f"rc={self.returncode} passed={len(self.passed)} failed={len(self.failed)} "
            f"skipped={len(self.skipped)}\n{self.output[-3000:]}"
        )


def run_public_tests(
    impl: str | Path,
    marker: str = "not gpu",
    *extra: str,
    profile: str = "ci",
    timeout: float = 300,
    hide_gpu: bool = False,
) -> Outcome:
    """``python -m pytest exercises --impl IMPL -m MARKER`` in a fresh interpreter
    (``hide_gpu``: with no CUDA device visible, as on a laptop)."""
    handle, name = tempfile.mkstemp(prefix="launch-tax-", suffix=".xml")
    os.close(handle)
    xml_path = Path(name)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "exercises",
        "--impl",
        str(impl),
        "-m",
        marker,
        "-q",
        "--tb=line",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        f"--hypothesis-profile={profile}",
        f"--junitxml={xml_path}",
        *extra,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    if hide_gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    try:
        run = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        outcome = Outcome(run.returncode, output=run.stdout + run.stderr)
        if xml_path.stat().st_size:
            _read_junit(xml_path, outcome)
    finally:
        xml_path.unlink(missing_ok=True)
    return outcome


def _read_junit(path: Path, outcome: Outcome) -> None:
    for case in ET.parse(path).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            outcome.failed.append(name)
            outcome.reasons[name] = (problem.get("message") or "").strip().split("\n")[0]
        elif case.find("skipped") is not None:
            outcome.skipped.append(name)
            outcome.reasons[name] = (case.find("skipped").get("message") or "").strip()
        else:
            outcome.passed.append(name)
