"""The public tests against many implementations, fast: a warm interpreter (torch, pytest and
pytest already imported) forks a fresh child for each run, so a mutant costs its tests, not
an interpreter start and ``import torch``.

Each child is a new process that has run no test and imported no implementation: what it finds
is what ``python -m pytest exercises --impl IMPL`` finds (``grader.public.run_public_tests``,
which this mirrors and whose JUnit reader it uses), in another order: tests of fixed examples
before property tests, so that a run with ``-x`` stops early. The server never initialises CUDA
itself, so a child may.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from coursekit.impl import REPO_ROOT
from grader.public import Outcome, _read_junit

SERVER = r"""
import json, os, sys, time, signal
import torch, pytest  # noqa: F401 - warm for every child
import _hypothesis_pytestplugin  # noqa: F401 - hypothesis' pytest plugin, loaded by every child
import coursekit.strategies, coursekit.standin, coursekit.checks  # noqa: F401


class ExamplesFirst:
    # With -x a run stops at its first failure: tests of fixed examples first (fast, and they
    # catch most mistakes), property tests after. The set of tests, and each verdict, is the same.
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        items.sort(key=lambda item: bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False)))


for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        rc = 4
        try:
            fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            rc = int(pytest.main(job["args"], plugins=[ExamplesFirst()]))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
    deadline = time.monotonic() + job["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            rc = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            rc = -9
            break
        time.sleep(0.02)
    print(json.dumps({"rc": rc}), flush=True)
"""


class WarmPytest:
    """``run(impl, marker, *extra)`` as ``grader.public.run_public_tests``, in a forked child."""

    def __init__(self, hide_gpu: bool = False):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
        if hide_gpu:
            env["CUDA_VISIBLE_DEVICES"] = ""
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(
        self, impl: str | Path, marker: str = "not gpu", *extra: str, profile: str = "sweep", timeout: float = 300
    ) -> Outcome:
        with tempfile.TemporaryDirectory(prefix="launch-tax-warm-") as tmp:
            xml, log = Path(tmp) / "junit.xml", Path(tmp) / "log.txt"
            # --assert=plain: no assertion rewriting, which costs most of a run's time where
            # bytecode is not cached (PYTHONDONTWRITEBYTECODE); every test states its own message,
            # and a verdict does not depend on it.
            args = [
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
                "--assert=plain",
                f"--hypothesis-profile={profile}",
                f"--junitxml={xml}",
                *extra,
            ]
            self.proc.stdin.write(json.dumps({"args": args, "log": str(log), "timeout": timeout}) + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
            if not reply:
                raise RuntimeError(f"the warm pytest server died (exit code {self.proc.wait()})")
            outcome = Outcome(json.loads(reply)["rc"], output=log.read_text(errors="replace") if log.exists() else "")
            if xml.exists() and xml.stat().st_size:
                _read_junit(xml, outcome)
            return outcome

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
