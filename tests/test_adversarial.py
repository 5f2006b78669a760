"""The grader against hostile submissions (``tests/adversarial/cases.py``).

Each case is graded with ``python -m grader grade SUBMISSION --json PATH --gpu off --only ...``
from the repository root, as a grading server would (in a process forked from a warm one that
has imported torch and the grader, ``tests/warm_grader.py``) (officially, with a grading secret, unless
the case says otherwise), on the attacked exercise and a bystander (``graded``). It must get
exactly its expected points for the attacked exercise and full points for the bystander, finish
in bounded time with exit status 0, leave no process behind and change no file of the repository
(and, where the case says so, keep hidden checks quiet, keep hidden inputs out of every report,
keep control characters out of the terminal).

A case with a ``defence`` is graded a second time in a copy of the repository with that defence
switched off (``tests/adversarial/defences.py``): there it must fail, or it proves nothing.

The grader runs with ``TMPDIR`` set to a folder named after the case's marker, so every box (and
so every worker's command line and environment) carries the marker: a process still mentioning it
afterwards, or any worker whose box is gone, is a leftover.
"""

from __future__ import annotations

import atexit
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
from tests.adversarial.cases import CASES, EXERCISES, FULL, Case
from tests.adversarial.defences import DEFENCES, off
from tests.harness import gradescope_shell
from tests.warm_grader import WarmGrader

WATCHED = ("solutions", "grader", "exercises")

#: Cases whose protection exists only when the judge runs as root (namespaces, a separate user):
#: without root the report says those protections are off, and these cases cannot hold.
ROOT_ONLY = {"read-solutions", "network", "fork-bomb", "worker-leaves-group", "escaping-daemon", "disk-filler"}


def repo_state(root: Path) -> tuple[str, dict[str, str]]:
    status = ""
    if (root / ".git").exists():
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    hashes = {}
    for top in WATCHED:
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                hashes[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
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
    if case.exercise == "all":
        return sorted(EXERCISES)
    bystander = "ex1" if case.exercise != "ex1" else "ex2"
    return sorted({case.exercise, bystander})


def grade(
    submission: Path, out: Path, case: Case, tmpdir: Path, root: Path, secret: Path | None, mode: str = "default"
) -> dict:
    """Run the grader; return its exit status, output, wall time and peak memory. ``mode``
    "user": as root without namespaces (Gradescope's sandbox), in a fresh process (a warm one has
    already decided which sandbox it has)."""
    bound = 120 + 5 * case.timeout
    command = [
        sys.executable,
        "-m",
        "grader",
        "grade",
        str(submission),
        "--json",
        str(out),
        "--timeout",
        str(case.timeout),
        "--gpu",
        "off",
        "--only",
        ",".join(graded(case)),
    ]
    if secret is not None:
        command += ["--secret-file", str(secret)]
    env = {k: v for k, v in os.environ.items() if k != "LAUNCH_TAX_SECRET_FILE"}
    if mode == "user":
        env["LAUNCH_TAX_SANDBOX"] = "user"
    if root == REPO_ROOT and mode == "default":  # forked from a warm grader (tests/warm_grader.py)
        done = _warm().run(command[3:], str(root), {**env, "TMPDIR": str(tmpdir)}, str(out.with_suffix(".log")), bound)
        raw = out.with_suffix(".log").read_bytes()
        if done["returncode"] == "killed":
            return {
                "returncode": "killed",
                "output": f"did not finish within {bound:.0f} s",
                "raw_output": b"",
                "wall_s": bound,
                "max_rss_mb": 0,
            }
        return {**done, "output": raw.decode(errors="replace"), "raw_output": raw}
    with open(out.with_suffix(".log"), "w+b") as log:
        start = time.monotonic()
        if mode == "user":  # the workers (other users) must be able to run this Python
            command = gradescope_shell(command)
        proc = subprocess.Popen(
            command,
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**env, "TMPDIR": str(tmpdir)},
        )
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > bound:
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                return {
                    "returncode": "killed",
                    "output": f"did not finish within {bound:.0f} s",
                    "raw_output": b"",
                    "wall_s": bound,
                    "max_rss_mb": 0,
                }
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        raw = log.read()
        return {
            "returncode": proc.returncode,
            "output": raw.decode(errors="replace"),
            "raw_output": raw,
            "wall_s": time.monotonic() - start,
            "max_rss_mb": usage.ru_maxrss / 1024,
        }


_WARM: list[WarmGrader] = []


def _warm() -> WarmGrader:
    """One warm grader per test process, made when first needed."""
    if not _WARM:
        _WARM.append(WarmGrader())
        atexit.register(_WARM[0].close)
    return _WARM[0]


def hidden_inputs(submission: Path, case: Case, secret: Path | None) -> list[str]:
    """The inputs of the hidden probes this submission is asked (the judge's own draw)."""
    from grader import secret as secrets
    from grader.runtime import wire
    from grader.judge import Judge
    from grader.submission import load

    judge = Judge(gpu="off", exercises=tuple(graded(case)), secret=secrets.load(str(secret)) if secret else None)
    found = []
    for check in judge.checks_for(load(submission)):
        if check.hidden and not check.gpu:
            found += [wire.dumps(wire.encode(p.args))[:80] for p in check.probes if len(p.args)]
    return found


def evaluate(case: Case, tmp_path: Path, root: Path, secret: Path | None, mode: str = "default") -> list[str]:
    """Grade ``case`` with the grader at ``root``; return every way it failed (none: it held)."""
    marker = f"ltadv{uuid.uuid4().hex[:12]}"
    tmpdir = Path("/tmp") / f"{marker}-boxes"  # world-traversable, like /tmp itself
    tmpdir.mkdir()
    os.chmod(tmpdir, 0o755)
    cleanups: list = []
    before = repo_state(root)
    leftovers, run, problems = {}, None, []
    results_path = tmp_path / "results.json"
    try:
        sub = case.build(tmp_path / "submission", marker, cleanups)
        run = grade(sub, results_path, case, tmpdir, root, secret, mode)
        time.sleep(0.2)
        leftovers = leftover_processes(marker)
        hidden = hidden_inputs(sub, case, secret) if case.hidden_inputs_absent else []
    finally:
        for pid in leftovers:  # processes this case started: end them, then report them
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for cleanup in reversed(cleanups):
            cleanup()
        shutil.rmtree(tmpdir, ignore_errors=True)
    after = repo_state(root)
    context = f"--- grader output ---\n{run['output'][-3000:]}"
    if run["returncode"] != 0:
        return [f"exit status {run['returncode']}\n{context}"]
    try:
        raw = results_path.read_bytes()
        results = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as exc:
        return [f"no readable results.json ({exc})\n{context}"]
    scores = {}
    for test in results["tests"]:
        exercise = test["name"].split(" ", 1)[0]
        if test["extra_data"].get("state") != "manual":
            scores[exercise] = scores.get(exercise, 0.0) + test.get("score", 0.0)
    if case.flagged is not None:
        described = json.dumps(results.get("extra_data", {}).get("flags", []))
        if case.flagged not in described:
            problems.append(
                f"the instructor is not told: no flag mentions {case.flagged!r} (extra_data.flags: {described[:500]})"
            )
    expected = {ex: (FULL[ex] if case.others == "full" else 0.0) for ex in graded(case)}
    if case.exercise != "all":
        expected[case.exercise] = case.expected
    _log(case, expected, scores, run)
    if sorted(scores) != graded(case):
        problems.append(f"graded {sorted(scores)}, expected {graded(case)}")
    elif scores != expected:
        problems.append(f"points: expected {expected}, got {scores}")
    if case.reason:
        said = "\n".join(t["output"] for t in results["tests"] if case.exercise in ("all", t["name"][:3]))
        said += "\n" + results["output"]
        if case.reason not in said:
            problems.append(f"{case.reason!r} not in the reasons:\n{said[:2000]}")
    if case.hidden_quiet:
        noisy = [
            t["name"]
            for t in results["tests"]
            if "hidden" in t["tags"] and t["extra_data"]["state"] == "failed" and not t["output"].startswith("rule: ")
        ]
        if noisy:
            problems.append(f"hidden checks said more than their rule: {noisy}")
    if hidden:
        text = raw.decode("utf-8", "replace") + run["output"]
        seen = [h for h in hidden if h in text or json.dumps(h)[1:-1] in text]
        if seen:
            problems.append(f"hidden inputs reached the report: {seen[:3]}")
    if case.clean_output:
        controls = sorted({hex(b) for b in run["raw_output"] if b < 32 and b not in (9, 10)})
        if controls or b"\xed\xa0\x80" in run["raw_output"]:
            problems.append(f"control characters or a lone surrogate in the terminal: {controls}")
    if leftovers:
        problems.append(f"processes left running after grading: {leftovers}")
    for path in case.leftovers:
        if Path(path.replace("MARKER", marker)).exists():
            problems.append(f"{path} was written")
    strays = [str(p) for p in root.rglob(f"*{marker}*")]
    if strays:
        problems.append(f"files written into the repository: {strays}")
    if after != before:
        problems.append("the repository changed while grading")
    if case.max_rss_mb is not None and run["max_rss_mb"] >= case.max_rss_mb:
        problems.append(f"the judge peaked at {run['max_rss_mb']:.0f} MB (limit {case.max_rss_mb})")
    return [f"{p}\n{context}" for p in problems]


MODED = [(c, m) for c in CASES for m in c.modes]


def _skip_mode(case: Case, mode: str) -> None:
    if (case.name in ROOT_ONLY or mode == "user") and os.geteuid() != 0:
        pytest.skip("this protection needs the judge to run as root (see grader/sandbox.py)")


@pytest.mark.parametrize("case, mode", MODED, ids=[c.name + ("" if m == "default" else f"[{m}]") for c, m in MODED])
@pytest.mark.slow
def test_hostile_submission_gets_exactly_its_points(case: Case, mode: str, tmp_path: Path, secret_file: Path):
    _skip_mode(case, mode)
    problems = evaluate(case, tmp_path, REPO_ROOT, secret_file if case.secret else None, mode)
    assert not problems, f"{case.name} ({mode} sandbox): {case.why}\n" + "\n".join(problems)


DEFENDED = [(c, m) for c, m in MODED if c.defence]


@pytest.mark.parametrize(
    "case, mode", DEFENDED, ids=[c.name + ("" if m == "default" else f"[{m}]") for c, m in DEFENDED]
)
@pytest.mark.slow
def test_the_case_fails_with_its_defence_switched_off(case: Case, mode: str, tmp_path: Path, secret_file: Path):
    _skip_mode(case, mode)
    defence = DEFENCES[case.defence]
    root = off(case.defence, tmp_path / "repository")
    secret = None if defence.no_secret or not case.secret else secret_file
    problems = evaluate(case, tmp_path, root, secret, mode)
    assert problems, (
        f"{case.name} still holds with the defence {defence.name!r} ({defence.what}) "
        "switched off: it does not prove that defence"
    )


def test_every_defence_has_a_case():
    covered = {c.defence for c in CASES}
    from tests import test_adversarial_class

    covered |= set(test_adversarial_class.DEFENDED)
    assert covered >= set(DEFENCES), f"defences without a corpus case: {set(DEFENCES) - covered}"


def _log(case: Case, expected: dict, got: dict, run: dict) -> None:
    """One JSON line per case when LAUNCH_TAX_ADVERSARIAL_LOG names a file (for a summary table)."""
    path = os.environ.get("LAUNCH_TAX_ADVERSARIAL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(
                json.dumps(
                    {
                        "case": case.name,
                        "exercise": case.exercise,
                        "expected": expected,
                        "got": got,
                        "wall_s": round(run["wall_s"], 1),
                        "max_rss_mb": round(run["max_rss_mb"]),
                    }
                )
                + "\n"
            )
