"""The grader against hostile submissions (``tests/adversarial/cases.py``).

Each case is graded with ``python -m grader grade SUBMISSION --json PATH --gpu off --only ...``
from the repository root, as a grading server would, on the attacked exercise and a bystander
(``graded``). It must get exactly its expected points for the attacked exercise and full points
for the bystander, finish in bounded time with exit status 0,
leave no process behind and change no file of the repository.

The grader runs with ``TMPDIR`` set to a folder named after the case's marker, so every box (and
so every worker's command line and environment) carries the marker: a process still mentioning it
afterwards, or any worker whose box is gone, is a leftover.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT
from tests.adversarial.cases import CASES, FULL, Case

WATCHED = ("solutions", "grader", "exercises")

#: Cases whose protection exists only when the judge runs as root (namespaces, a separate user):
#: without root the report says those protections are off, and these cases cannot hold.
ROOT_ONLY = {"read-solutions", "network", "fork-bomb", "worker-leaves-group", "escaping-daemon",
             "disk-filler"}


def repo_state() -> tuple[str, dict[str, str]]:
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60).stdout
    hashes = {}
    for top in WATCHED:
        for path in sorted((REPO_ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                hashes[str(path.relative_to(REPO_ROOT))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return status, hashes


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def leftover_processes(marker: str) -> dict[int, str]:
    """Processes that mention the marker (command line or environment), and workers whose box is
    gone (a box is removed only after its worker's run has ended)."""
    found = {}
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        cmdline, environ = _read(f"/proc/{entry}/cmdline"), _read(f"/proc/{entry}/environ")
        described = cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
        if needle in cmdline or needle in environ:
            found[int(entry)] = described
        elif b"LAUNCH_TAX_BOX=" in environ:
            home = [v[5:] for v in environ.split(b"\0") if v.startswith(b"HOME=")]
            if home and not os.path.exists(home[0]):
                found[int(entry)] = f"{described} (its box {home[0].decode(errors='replace')} is gone)"
    return found


def graded(case: Case) -> list[str]:
    """The attacked exercise and one bystander (an exercise no other imports, so an attack on
    its neighbours cannot reach it): enough to see the attack costs nothing else."""
    bystander = "ex1" if case.exercise != "ex1" else "ex2"
    return sorted({case.exercise, bystander})


def grade(submission: Path, out: Path, case: Case, tmpdir: Path) -> dict:
    """Run the grader; return its exit status, output, wall time and peak memory."""
    bound = 90 + 3 * case.timeout
    command = [sys.executable, "-m", "grader", "grade", str(submission), "--json", str(out),
               "--timeout", str(case.timeout), "--gpu", "off", "--only", ",".join(graded(case))]
    with open(out.with_suffix(".log"), "w+b") as log:
        start = time.monotonic()
        proc = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "TMPDIR": str(tmpdir)})
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > bound:
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                pytest.fail(f"grading {case.name} did not finish within {bound:.0f} s")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        return {"returncode": proc.returncode, "output": log.read().decode(errors="replace"),
                "wall_s": time.monotonic() - start, "max_rss_mb": usage.ru_maxrss / 1024}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_submission_gets_exactly_its_points(case: Case, tmp_path: Path):
    if case.name in ROOT_ONLY and os.geteuid() != 0:
        pytest.skip("this protection needs the judge to run as root (see grader/sandbox.py)")
    marker = f"ltadv{uuid.uuid4().hex[:12]}"
    tmpdir = Path("/tmp") / f"{marker}-boxes"  # world-traversable, like /tmp itself
    tmpdir.mkdir()
    os.chmod(tmpdir, 0o755)
    cleanups: list = []
    before = repo_state()
    leftovers, run = {}, None
    try:
        sub = case.build(tmp_path / "submission", marker, cleanups)
        run = grade(sub, tmp_path / "results.json", case, tmpdir)
        time.sleep(0.2)
        leftovers = leftover_processes(marker)
    finally:
        for pid in leftovers:  # processes this case started: end them, then report them
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for cleanup in reversed(cleanups):
            cleanup()
        shutil.rmtree(tmpdir, ignore_errors=True)
    after = repo_state()

    context = f"{case.name}: {case.why}\n--- grader output ---\n{run['output'][-3000:]}"
    assert run["returncode"] == 0, context
    results = json.loads((tmp_path / "results.json").read_text())
    tests = {t["name"]: t for t in results["tests"]}
    assert sorted(tests) == graded(case), context
    got = {name: t["score"] for name, t in tests.items()}
    expected = {ex: (FULL[ex] if case.others == "full" else 0.0) for ex in graded(case)}
    expected[case.exercise] = case.expected
    _log(case, expected[case.exercise], got[case.exercise], run)
    assert got == expected, f"points: expected {expected}, got {got}\n{context}"
    if case.others == "full":
        assert all(tests[ex]["max_score"] == FULL[ex] for ex in graded(case)), context
    if case.reason:
        said = tests[case.exercise]["output"] + "\n" + results["output"]
        assert case.reason in said, f"{case.reason!r} not in the reasons:\n{said[:2000]}\n{context}"
    assert not leftovers, f"processes left running after grading: {leftovers}\n{context}"
    for path in case.leftovers:
        assert not Path(path.replace("MARKER", marker)).exists(), f"{path} was written\n{context}"
    strays = [str(p) for p in REPO_ROOT.rglob(f"*{marker}*")]
    assert not strays, f"files written into the repository: {strays}"
    assert after == before, f"the repository changed while grading {case.name}"
    if case.max_rss_mb is not None:
        assert run["max_rss_mb"] < case.max_rss_mb, \
            f"the judge peaked at {run['max_rss_mb']:.0f} MB (limit {case.max_rss_mb})\n{context}"


def _log(case: Case, expected: float, got: float, run: dict) -> None:
    """One JSON line per case when LAUNCH_TAX_ADVERSARIAL_LOG names a file (for a summary table)."""
    path = os.environ.get("LAUNCH_TAX_ADVERSARIAL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"case": case.name, "exercise": case.exercise, "expected": expected,
                                "got": got, "wall_s": round(run["wall_s"], 1),
                                "max_rss_mb": round(run["max_rss_mb"])}) + "\n")
