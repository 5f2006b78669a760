"""Runs the public tests (exercises/tests) in a subprocess against a chosen implementation and
reports what passed and what failed, test by test."""

from __future__ import annotations

import os
import shutil
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
    output: str = ""

    def summary(self) -> str:
        return (f"rc={self.returncode} passed={len(self.passed)} failed={len(self.failed)} "
                f"skipped={len(self.skipped)}\n{self.output[-3000:]}")


def run_public_tests(impl: str | Path, marker: str = "not gpu", *extra: str,
                     profile: str = "ci", timeout: float = 300) -> Outcome:
    """``python -m pytest exercises --impl IMPL -m MARKER`` in a fresh interpreter."""
    handle, name = tempfile.mkstemp(prefix="launch-tax-", suffix=".xml")
    os.close(handle)
    xml_path = Path(name)
    cmd = [sys.executable, "-m", "pytest", "exercises", "--impl", str(impl), "-m", marker,
           "-q", "--tb=line", "-p", "no:cacheprovider", "-p", "no:xdist",
           f"--hypothesis-profile={profile}", f"--junitxml={xml_path}", *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    run = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                         timeout=timeout)
    outcome = Outcome(run.returncode, output=run.stdout + run.stderr)
    if xml_path.stat().st_size:
        for case in ET.parse(xml_path).iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                outcome.failed.append(name)
            elif case.find("skipped") is not None:
                outcome.skipped.append(name)
            else:
                outcome.passed.append(name)
    xml_path.unlink()
    return outcome


def submission(folder: Path, **sources: str) -> Path:
    """A submission folder: the reference modules, with some replaced by the given sources."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in (REPO_ROOT / "solutions").glob("*.py"):
        if path.name != "__init__.py":
            shutil.copy(path, folder / path.name)
    for name, source in sources.items():
        (folder / f"{name}.py").write_text(source)
    return folder
