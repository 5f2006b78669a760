"""The grader against hostile classes: what one submission can do to another, to the gradebook,
or to a grading run, and what the judge does when the fault is its own.

Each test grades with the real command line (``grade-all``, officially, with a grading secret)
and states what must hold; each is run again in a copy of the repository with its defence
switched off (``tests/adversarial/defences.py``), where it must fail.
"""

from __future__ import annotations

import csv
import ctypes
import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT
from tests.adversarial.cases import FULL, reference, stub
from tests.adversarial.defences import DEFENCES, off
from tests.harness import cuda_in_sight, ended, fake_nvidia_smi, gpu_seen, submission

# Whole classes of hostile submissions, graded through the CLI: CI's slow stage (tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = os.geteuid() == 0

#: defence -> the test below that proves it (run here with the defence on and off).
DEFENDED = {
    "ipc-namespace": "ipc_colluders",
    "keyring-filter": "keyring_colluders",
    "students-folder": "hostile_class",
    "no-symlinks-followed": "hostile_class",
    "regular-files-only": "fifo_in_a_folder",
    "reference-first": "reference_failure",
    "canary": "no_worker",
    "class-needs-isolation": "isolation",
    "notebook-needs-isolation": "isolation",
    "timeout-retry": "load",
    "load-scaled-limits": "load",
    "grading-deadline": "deadline",
    "reference-sees-what-the-worker-sees": "gpu_in_sight_class",
    "reference-on-one-thread": "reference_thread",
    "judge-ends-its-reference": "reference_ends",
    "student-deadline": "hanging_student",
    "gpu-memory-per-process": "gpu_memory_of_others",
}


def grade_all(
    root: Path, folder: Path, out: Path, secret: Path, *extra: str, bound: float = 240, env: dict | None = None
) -> subprocess.CompletedProcess | None:
    """``grade-all`` run by the grader at ``root``; None when it did not finish within ``bound``."""
    command = [
        sys.executable,
        "-m",
        "grader",
        "grade-all",
        str(folder),
        "--out",
        str(out),
        "--gpu",
        "off",
        "--secret-file",
        str(secret),
        "--timeout",
        "20",
        *extra,
    ]
    try:
        return subprocess.run(
            command, cwd=root, capture_output=True, text=True, timeout=bound, env={**os.environ, **(env or {})}
        )
    except subprocess.TimeoutExpired:
        return None


def book(out: Path) -> dict[str, dict]:
    with open(out / "gradebook.csv", encoding="utf-8") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def both_ways(name: str, tmp_path: Path, scenario) -> None:
    """``scenario(root) -> problems`` holds with the defence on, and fails with it off."""
    problems = scenario(REPO_ROOT, tmp_path / "on")
    assert not problems, "\n".join(problems)
    root = off(name, tmp_path / "repository")
    problems = scenario(root, tmp_path / "off")
    print(f"[{name} switched off] " + " | ".join(p.splitlines()[0][:300] for p in problems))
    assert problems, (
        f"the scenario still holds with the defence {name!r} ({DEFENCES[name].what}) switched off: it does not prove it"
    )


# ----------------------------------------------------------------------------- colluders

SHM = '''
import ctypes as _ctypes

_libc = _ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = _ctypes.c_void_p
_libc.shmat.argtypes = [_ctypes.c_int, _ctypes.c_void_p, _ctypes.c_int]
_KEY, _SIZE = KEY, 1 << 20
'''

SHM_WRITER = (
    SHM
    + '''
# Alice's module is right: it leaves its own source in System V shared memory for a classmate,
# and a segment far larger than it needs, past every limit of its worker.
_segment = _libc.shmget(_KEY, _SIZE, 0o1666)  # IPC_CREAT | 0666
if _segment >= 0:
    _address = _libc.shmat(_segment, None, 0)
    _source = open(__file__, "rb").read()
    _ctypes.memmove(_address, len(_source).to_bytes(8, "little") + _source, 8 + len(_source))
_libc.shmget(_KEY + 1, 1 << 30, 0o1666)
'''
)

SHM_READER = (
    SHM
    + '''
# Bob's module is the stub: it takes Alice's source from shared memory and runs it.
_segment = _libc.shmget(_KEY, 0, 0)
if _segment < 0:
    raise ImportError("no shared memory from a classmate")
_address = _libc.shmat(_segment, None, 0o10000)  # SHM_RDONLY
_size = int.from_bytes(_ctypes.string_at(_address, 8), "little")
exec(compile(_ctypes.string_at(_address + 8, _size).decode(), "alice", "exec"), globals())
'''
)

KEYS = '''
import ctypes as _ctypes

_libc = _ctypes.CDLL(None, use_errno=True)
_DESCRIPTION = b"launch-tax-MARKER"
'''

KEY_WRITER = (
    KEYS
    + '''
# Alice's module is right: it leaves its own source in a kernel key that anyone may read, linked
# to its uid's keyring (which outlives the process) and to the persistent keyring.
_source = open(__file__, "rb").read()
for _ring in (-4, -5):  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING
    _key = _libc.syscall(248 if _ctypes.sizeof(_ctypes.c_void_p) == 8 else 286, b"user", _DESCRIPTION,
                         _source, len(_source), _ctypes.c_int(_ring))
    if _key > 0:
        _libc.syscall(250, 5, _key, _ctypes.c_uint(0x3f3f3f3f))  # KEYCTL_SETPERM: all, for all
'''
)

KEY_READER = (
    KEYS
    + '''
# Bob's module is the stub: it finds Alice's key in /proc/keys and runs what it holds.
for _line in open("/proc/keys"):
    if _DESCRIPTION.decode() in _line:
        _buffer = _ctypes.create_string_buffer(1 << 20)
        _size = _libc.syscall(250, 11, int(_line.split()[0], 16), _buffer, 1 << 20)  # KEYCTL_READ
        if _size > 0:
            exec(compile(_buffer.raw[:_size].decode(), "alice", "exec"), globals())
            break
else:
    raise ImportError("no key from a classmate")
'''
)


def _segments(key: int) -> list[str]:
    out = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout
    return [
        line
        for line in out.splitlines()
        if line.lower().startswith(f"0x{key:08x}") or line.lower().startswith(f"0x{key + 1:08x}")
    ]


def _remove_segments(key: int) -> None:
    for line in _segments(key):
        subprocess.run(["ipcrm", "-m", line.split()[1]], capture_output=True)


def _keys(description: str) -> list[int]:
    with open("/proc/keys") as f:
        return [int(line.split()[0], 16) for line in f if description in line]


def _remove_keys(description: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for serial in _keys(description):
        libc.syscall(250, 21, serial)  # KEYCTL_INVALIDATE


def colluders(writer: str, reader: str, leftover, cleanup, secret: Path):
    def scenario(root: Path, tmp: Path) -> list[str]:
        marker = uuid.uuid4().hex[:12]
        key = int(marker[:7], 16)

        def fill(s):
            return s.replace("MARKER", marker).replace("KEY", str(key))

        folder = tmp / "class"
        submission(folder / "alice", launch_model=reference("launch_model") + fill(writer))
        submission(folder / "bob", launch_model=stub("launch_model") + fill(reader))
        try:
            run = grade_all(root, folder, tmp / "out", secret, "--only", "ex1", "--jobs", "1")
            left = leftover(marker, key)
        finally:
            cleanup(marker, key)
        if run is None or run.returncode != 0:
            return [f"grade-all failed: {run and run.stderr[-2000:]}"]
        grades = book(tmp / "out")
        problems = []
        if float(grades["alice"]["score"]) != FULL["ex1"]:
            problems.append(f"alice (right, and sharing) lost points: {grades['alice']}")
        if float(grades["bob"]["score"]) != 0:
            problems.append(f"bob (the stub) got {grades['bob']['score']} points from alice's worker")
        if left:
            problems.append(f"left on the host after grading: {left}")
        return problems

    return scenario


@pytest.mark.skipif(not ROOT, reason="IPC namespaces need the judge to run as root")
def test_ipc_colluders_share_nothing(tmp_path, secret_file):
    both_ways(
        "ipc-namespace",
        tmp_path,
        colluders(
            SHM_WRITER, SHM_READER, lambda m, key: _segments(key), lambda m, key: _remove_segments(key), secret_file
        ),
    )


@pytest.mark.skipif(not ROOT, reason="workers run as other uids only when the judge is root")
def test_keyring_colluders_share_nothing(tmp_path, secret_file):
    both_ways(
        "keyring-filter",
        tmp_path,
        colluders(
            KEY_WRITER,
            KEY_READER,
            lambda m, key: _keys(f"launch-tax-{m}"),
            lambda m, key: _remove_keys(f"launch-tax-{m}"),
            secret_file,
        ),
    )


# ----------------------------------------------------------------------------- a hostile class


def _notebook_of_reference(path: Path) -> None:
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": f"%%writefile student/{p.name}\n" + p.read_text(),
        }
        for p in sorted((REPO_ROOT / "solutions").glob("[a-z]*.py"))
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


def hostile_class(folder: Path, outside: Path) -> None:
    """Names that collide with the class-level outputs, links to a classmate and to the
    instructor's notebook, a FIFO, a socket, a folder named like a notebook, an unreadable name."""
    submission(folder / "alice")
    submission(folder / "gradebook.csv")
    submission(folder / "summary.md")
    submission(folder / "students")
    (folder / "carol").symlink_to(folder / "alice")
    _notebook_of_reference(outside / "source" / "launch_tax" / "launch_tax.ipynb")
    (folder / "dave").mkdir()
    (folder / "dave" / "launch_tax").symlink_to(outside / "source" / "launch_tax")
    os.mkfifo(folder / "erin.ipynb")
    submission(folder / "frank.ipynb")
    with socket.socket(socket.AF_UNIX) as s:  # bound at a short path, then moved in place
        short = f"/tmp/lt-{uuid.uuid4().hex[:8]}"
        s.bind(short)
        os.rename(short, folder / "kim.zip")
    (folder / "notes.txt").write_text("not a submission")
    weird = os.fsencode(folder) + b"/l\xffo"
    os.mkdir(weird)
    os.symlink(b"/etc/passwd", weird + b"/bad\xfe.ipynb")


def test_a_hostile_class_is_graded_whole(tmp_path, secret_file):
    def scenario(root: Path, tmp: Path) -> list[str]:
        folder, outside = tmp / "class", tmp / "instructor"
        hostile_class(folder, outside)
        run = grade_all(root, folder, tmp / "out", secret_file, "--only", "ex1", "--jobs", "2", bound=300)
        if run is None or run.returncode != 0:
            return [f"grade-all failed: {run and (run.stdout[-1000:] + run.stderr[-3000:])}"]
        out = tmp / "out"
        problems = []
        if not (out / "gradebook.csv").is_file():
            return ["gradebook.csv is not a file"]
        grades = book(out)
        want = {
            "alice": FULL["ex1"],
            "gradebook.csv": FULL["ex1"],
            "summary.md": FULL["ex1"],
            "students": FULL["ex1"],
            "frank": FULL["ex1"],
            "carol": 0,
            "dave": 0,
            "erin": 0,
            "kim": 0,
            "notes.txt": 0,
            "l_o": 0,
        }
        for student, points in want.items():
            row = grades.get(student)
            if row is None:
                problems.append(f"{student} missing from the gradebook: {sorted(grades)}")
            elif float(row["score"]) != points:
                problems.append(f"{student}: expected {points}, got {row['score']} ({row['notes'][:300]})")
            elif not (out / "students" / student / "results.json").is_file():
                problems.append(f"no students/{student}/results.json")
        for student, words in {
            "carol": "symbolic link",
            "dave": "symlink",
            "erin": "not a regular file",
            "kim": "not a regular file",
            "notes.txt": "not a submission",
            "l_o": "symlink",
        }.items():
            if student in grades and words not in grades[student]["notes"]:
                problems.append(f"{student}: the reason does not say {words!r}: {grades[student]['notes'][:300]}")
        if not (out / "summary.md").is_file():
            problems.append("summary.md is not a file")
        return problems

    for name in ("students-folder", "no-symlinks-followed"):
        both_ways(name, tmp_path / name, scenario)


def test_a_fifo_in_a_folder_is_refused_not_waited_on(tmp_path, secret_file):
    def scenario(root: Path, tmp: Path) -> list[str]:
        folder = tmp / "class"
        submission(folder / "alice")
        (folder / "gina").mkdir()
        os.mkfifo(folder / "gina" / "answers.ipynb")  # nobody ever writes it
        # Grading two students' ex1 takes seconds; stuck on the FIFO, it never ends.
        run = grade_all(root, folder, tmp / "out", secret_file, "--only", "ex1", bound=25)
        if run is None:
            return ["grade-all hung on a FIFO"]
        grades = book(tmp / "out")
        if "not a regular file" not in grades.get("gina", {}).get("notes", ""):
            return [f"gina's FIFO was not refused: {grades.get('gina')}"]
        return [] if float(grades["alice"]["score"]) == FULL["ex1"] else ["alice lost points"]

    both_ways("regular-files-only", tmp_path, scenario)


# ----------------------------------------------------------------------------- the judge's faults


def _break(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert text.count(old) == 1, (rel, old)
    path.write_text(text.replace(old, new))


def test_a_failing_reference_grades_nobody(tmp_path, secret_file):
    def scenario(root: Path, tmp: Path) -> list[str]:
        # A reference that fails on some inputs (long chains), as a bug in it would.
        copy = root if root != REPO_ROOT else off(None, tmp / "repository")
        _break(
            copy,
            "solutions/launch_model.py",
            "    end_us = 0.0\n",
            "    end_us = 0.0\n    if len(kernel_us) > 20:\n        raise OverflowError('a bug')\n",
        )
        folder = tmp / "class"
        submission(folder / "alice")
        submission(folder / "bob")
        run = grade_all(copy, folder, tmp / "out", secret_file, "--only", "ex1,ex2")
        problems = []
        if run is None or run.returncode != 3:
            problems.append(f"exit status {run and run.returncode}, expected 3")
        elif "reference failed" not in run.stderr:
            problems.append(f"the error does not say the reference failed: {run.stderr[-500:]}")
        if (tmp / "out" / "gradebook.csv").exists() or (tmp / "out" / "students").exists():
            problems.append("something was written although nobody could be graded")
        return problems

    both_ways("reference-first", tmp_path, scenario)


def test_no_worker_means_no_grades(tmp_path, secret_file):
    def scenario(root: Path, tmp: Path) -> list[str]:
        copy = root if root != REPO_ROOT else off(None, tmp / "repository")
        _break(
            copy,
            "grader/runtime/worker.py",
            "def main(command_fd: int, result_fd: int) -> None:\n",
            "def main(command_fd: int, result_fd: int) -> None:\n    os._exit(5)\n",
        )
        folder = tmp / "class"
        submission(folder / "alice")
        run = grade_all(copy, folder, tmp / "out", secret_file, "--only", "ex1")
        if run is None or run.returncode != 3 or "cannot run on this machine" not in run.stderr:
            return [f"expected exit 3 saying no worker can run, got {run and (run.returncode, run.stderr[-800:])}"]
        return ["something was written"] if (tmp / "out" / "gradebook.csv").exists() else []

    both_ways("canary", tmp_path, scenario)


DRIVER = """
import sys
import grader.isolation as isolation
isolation.current = lambda: isolation.Unisolated()
import grader.__main__ as cli
code = cli.main(sys.argv[1:-1])
import os
os.environ.pop("LAUNCH_TAX_ALLOW_UNISOLATED", None)
import grader.notebook_checks as nc
nc.start_fresh(sys.argv[-1] + "-notebook")
try:
    nc.verdicts("ex1")
    print("NOTEBOOK GRADED")
except nc.GradingRefused as exc:
    print("NOTEBOOK REFUSED", exc)
sys.exit(code)
"""


def test_without_isolation_a_class_is_refused(tmp_path, secret_file):
    def scenario(root: Path, tmp: Path) -> list[str]:
        folder = tmp / "class"
        submission(folder / "alice")
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                DRIVER,
                "grade-all",
                str(folder),
                "--out",
                str(tmp / "out"),
                "--gpu",
                "off",
                "--only",
                "ex1",
                "--practice",
                str(tmp / "nb"),
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        problems = []
        if run.returncode != 2 or "--allow-unisolated" not in run.stderr:
            problems.append(f"grade-all without isolation: exit {run.returncode}, {run.stderr[-500:]}")
        # Refused for the right reason: a refusal for anything else (a worker that cannot start
        # here) would pass with the defence switched off.
        if "NOTEBOOK REFUSED the grader cannot isolate" not in run.stdout:
            problems.append(f"a notebook check graded without isolation: {run.stdout[-500:]}")
        return problems

    for name in ("class-needs-isolation", "notebook-needs-isolation"):
        both_ways(name, tmp_path / name, scenario)


SLOW = """
import time as _time
_time.sleep(SECONDS)  # right, but slow to start: a loaded machine
"""


def test_load_is_not_a_wrong_answer(tmp_path, secret_file):
    """A right module that needs more than the base time limit, and more than twice it, still
    gets every point: the limit grows with this machine's own pace (the canary and the
    reference), and a timed-out worker gets a second try."""

    def scenario(root: Path, tmp: Path) -> list[str]:
        folder = tmp / "class"
        source = reference("dispatch") + SLOW.replace("SECONDS", "3.5")
        submission(folder / "alice", dispatch=source)
        run = grade_all(root, folder, tmp / "out", secret_file, "--only", "ex6", "--timeout", "1")
        if run is None or run.returncode != 0:
            return [f"grade-all failed: {run and run.stderr[-1500:]}"]
        row = book(tmp / "out")["alice"]
        return [] if float(row["score"]) == FULL["ex6"] else [f"a slow right module lost points: {row}"]

    both_ways("load-scaled-limits", tmp_path, scenario)


def test_a_timed_out_worker_gets_a_second_try(tmp_path):
    """With the worker timing out on its first run only, the exercise keeps its points; the
    second run had twice the time."""
    code = textwrap.dedent("""
        import sys
        from grader import sandbox
        from grader.judge import Judge
        from grader.submission import load
        real, tried = sandbox.run, []
        def flaky(box, limits, requests, *, gpu=False, hide=(), slot=0, device=None):
            tried.append(limits.timeout_s)
            if len(tried) == 1:
                return sandbox.Run(answers=[], returncode=None, timed_out=True, timeout_s=limits.timeout_s)
            return real(box, limits, requests, gpu=gpu, hide=hide, slot=slot, device=device)
        judge = Judge(gpu="off", exercises=("ex6",))
        judge.workers.canary(False)
        sandbox.run = flaky
        result = judge.grade_exercise(load("solutions"), "ex6")
        print("SCORE", result.score, result.max_score, "LIMITS", tried)
        sys.exit(0 if result.score == result.max_score and tried[1] == 2 * tried[0] else 1)
    """)

    def scenario(root: Path, tmp: Path) -> list[str]:
        run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
        return [] if run.returncode == 0 else [f"{run.stdout[-500:]}{run.stderr[-1500:]}"]

    both_ways("timeout-retry", tmp_path, scenario)


HANG = """
import time as _time
_time.sleep(10**6)  # never answers: every try of this exercise times out
"""


def test_grading_ends_within_its_deadline(tmp_path, secret_file):
    """Gradescope kills a run at its own timeout and then shows no results at all: with
    ``--deadline`` (which the bundle's run_autograder passes) a submission that hangs is cut
    off in time, and still gets its results.json, with the reason. Without the deadline this
    exercise would take its first try and a second with twice the time (at least 3 x 5 s)."""
    deadline = 15

    def scenario(root: Path, tmp: Path) -> list[str]:
        folder = submission(tmp / "alice", launch_model=stub("launch_model") + HANG)
        out = tmp / "results.json"
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "grader",
                "grade",
                str(folder),
                "--only",
                "ex1",
                "--gpu",
                "off",
                "--secret-file",
                str(secret_file),
                "--timeout",
                "5",
                "--deadline",
                str(deadline),
                "--json",
                str(out),
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if run.returncode != 0 or not out.exists():
            return [f"grade failed: {run.stderr[-1500:]}"]
        data = json.loads(out.read_text())
        reasons = " ".join(t["output"] for t in data["tests"])
        problems = []
        if data["score"] != 0:
            problems.append(f"a hanging module scored {data['score']}")
        if f"time budget (--deadline {deadline} s) ran out" not in reasons:
            problems.append(f"the reason does not say the time budget ran out: {reasons[:300]}")
        if data["execution_time"] > deadline:
            problems.append(f"grading took {data['execution_time']} s, over its deadline of {deadline} s")
        return problems

    both_ways("grading-deadline", tmp_path, scenario)


# ----------------------------------------------------------------------------- what the first GPU broke
# On its first H200 (2026-12-04; junit XML in tests/platforms/h200-2026-12-04-gpu-corpus.xml) the
# grader failed on CUDA behaviour no CPU test had modelled. Each case puts that behaviour on this
# machine (a GPU in sight of the judge: tests/fake_cuda; a thread-bound stand-in; a hang; a fake
# nvidia-smi) and runs with its defence on and off.


def run_python(
    root: Path, code: str, *args: str, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """``python -c code args`` with the grader at ``root`` (its working folder)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_gpu_in_sight_class(tmp_path, secret_file):
    """``grade-all`` officially, two students side by side, the judge seeing a GPU whose state
    belongs to one thread: both graded, every CPU point of exercise 2 kept (the H200 lost
    ``ex2.time_ms_exact_mean`` for every correct student, and stopped its GPU pass with
    "External init callback must run in same thread as registerClient")."""

    def scenario(root: Path, tmp: Path) -> list[str]:
        folder, log = tmp / "class", tmp / "seen.log"
        for name in ("ana", "bo"):
            submission(folder / name)
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "grader",
                "grade-all",
                str(folder),
                "--out",
                str(tmp / "out"),
                "--gpu",
                "off",
                "--only",
                "ex2",
                "--jobs",
                "2",
                "--secret-file",
                str(secret_file),
                "--allow-unisolated",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            env=cuda_in_sight(log),
        )
        if run.returncode != 0:
            return [f"grade-all failed (exit {run.returncode}): {run.stderr[-1500:]}"]
        if True not in gpu_seen(log).values():
            return ["the judge never saw the fake GPU: the case proves nothing"]
        rows = book(tmp / "out")
        got = {s: (r["status"], float(r["score"])) for s, r in rows.items()}
        want = {s: ("graded", FULL["ex2"]) for s in ("ana", "bo")}
        return [] if got == want else [f"with a GPU in sight of the judge: {got}, expected {want}"]

    both_ways("reference-sees-what-the-worker-sees", tmp_path, scenario)


THREAD_BOUND = """
import csv, pathlib, shutil, sys, threading
from grader import classbook, probes
from grader.exercises import load_probes
from grader.judge import Judge
from grader.secret import load

# A stand-in for state that belongs to the thread that first used it (CUDA's profiler on the
# H200): every probe raises when a second thread runs one.
load_probes()
owner = []
def bind(fn):
    def bound(*args, **kwargs):
        owner[:] = owner or [threading.get_ident()]
        if owner[0] != threading.get_ident():
            raise RuntimeError("External init callback must run in same thread as registerClient [stand-in]")
        return fn(*args, **kwargs)
    return bound
probes.PROBES = {name: bind(fn) for name, fn in probes.PROBES.items()}
folder, out, secret = map(pathlib.Path, sys.argv[1:4])
for name in ("ana", "bo", "cy"):
    (folder / name).mkdir(parents=True)
    for path in pathlib.Path("solutions").glob("[a-z]*.py"):
        shutil.copy(path, folder / name / path.name)
judge = Judge(gpu="off", exercises=("ex2",), jobs=1, secret=load(str(secret)))
code = classbook.grade_class(judge, folder, out, jobs=3, hidden_visibility="after_published")
judge.close()
print("EXIT", code)
for row in csv.DictReader((out / "gradebook.csv").open()) if code == 0 else []:
    print("ROW", row["student"], row["status"], row["score"])
"""


def test_reference_thread(tmp_path, secret_file):
    """No GPU in sight: the reference answers in the judge's process on one thread, however many
    students ``grade-all`` grades at once (official: each student's own inputs)."""

    def scenario(root: Path, tmp: Path) -> list[str]:
        run = run_python(root, THREAD_BOUND, tmp / "class", tmp / "out", secret_file)
        rows = sorted(
            (s, status, float(score))
            for s, status, score in (line.split()[1:] for line in run.stdout.splitlines() if line.startswith("ROW "))
        )
        if "EXIT 0" in run.stdout and rows == [(s, "graded", FULL["ex2"]) for s in ("ana", "bo", "cy")]:
            return []
        return [f"the class was not graded whole: {run.stdout[-800:]}{run.stderr[-800:]}"]

    both_ways("reference-on-one-thread", tmp_path, scenario)


def test_reference_ends(tmp_path):
    """``python -m grader grade`` on a machine whose judge sees a GPU: the reference process it
    started has ended before the judge ends (the adversarial corpus found it outliving the judge)."""

    def scenario(root: Path, tmp: Path) -> list[str]:
        tmp.mkdir(parents=True, exist_ok=True)
        log = tmp / "seen.log"
        run = subprocess.run(
            [sys.executable, "-m", "grader", "grade", "solutions", "--gpu", "off", "--only", "ex2"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            env=cuda_in_sight(log),
        )
        if run.returncode != 0:
            return [f"grade failed: {run.stderr[-1500:]}"]
        seen, order = gpu_seen(log), ended(log)
        judge = [pid for pid, gpu in seen.items() if gpu]
        others = [pid for pid in seen if pid not in judge]
        if len(judge) != 1 or not others:
            return [f"expected the judge and its reference process in the log, got {seen}"]
        if judge[0] in order and all(pid in order[: order.index(judge[0])] for pid in others):
            return []
        return [f"the judge {judge[0]} ended before its reference process: ended in the order {order}"]

    both_ways("judge-ends-its-reference", tmp_path, scenario)


HANGS_ON_ONE = """
import csv, pathlib, sys, threading
from grader import classbook
from grader.judge import Judge, Report

released = threading.Event()

class HangsOnOne(Judge):
    # The judge, except that grading "stuck" never ends (for 40 s) and everyone else's grading
    # is an empty report at once.
    def grade(self, submission):
        if submission.label == "stuck":
            released.wait(40)
        return Report(submission.label, [], [])

folder, out = map(pathlib.Path, sys.argv[1:3])
for name in ("ana", "stuck", "bo"):
    (folder / name).mkdir(parents=True)
    (folder / name / "launch_model.py").write_text("X = 1")
code = classbook.grade_class(HangsOnOne(gpu="off", exercises=("ex1",), jobs=1), folder, out, jobs=2,
                             hidden_visibility="after_published", student_deadline_s=8)
released.set()
for row in csv.DictReader((out / "gradebook.csv").open()):
    print("ROW", row["student"], row["status"].replace(" ", "_"))
print("STUCK", (out / "students" / "stuck" / "results.json").read_text().count("not graded: timed out"))
"""


def test_hanging_student(tmp_path):
    """A grading step that never ends (on the H200 the class's GPU pass hung on the judge's own
    profiler and wrote no gradebook) costs that student a "not graded: timed out" row once
    ``--student-deadline`` has passed; everyone else is graded and the gradebook is written."""

    def scenario(root: Path, tmp: Path) -> list[str]:
        run = run_python(root, HANGS_ON_ONE, tmp / "class", tmp / "out")
        rows = sorted(line.split()[1:] for line in run.stdout.splitlines() if line.startswith("ROW "))
        want = [["ana", "graded"], ["bo", "graded"], ["stuck", "not_gradable"]]
        if rows == want and "STUCK 1" in run.stdout:
            return []
        return [f"expected {want} and a timed-out row, got {rows}: {run.stdout[-500:]}{run.stderr[-800:]}"]

    both_ways("student-deadline", tmp_path, scenario)


OTHERS_MEMORY = """
import os, subprocess, sys
from grader import devices, procfs, sandbox


# Another process holds 4250 MiB of the GPU (nvidia-smi lists it) and the device's total grows at
# every question; the GPU worker's own process is gone.
other = int(sys.argv[1])
ended = subprocess.Popen(["true"])
started = procfs.process_start(ended.pid)
ended.wait()

def gpu_worker(box, limits, requests, *, gpu=False, hide=(), slot=0, device=None):
    return sandbox.Run(answers=[], returncode=0, pids={ended.pid: started})

sandbox.run = gpu_worker
pool = devices.DevicePool(["0"])
for worker in range(3):  # a submission's GPU exercises, one after another
    print("LEFT", pool.run(None, sandbox.Limits(), [], hide=(), slot=0).leftovers)
"""


def test_gpu_memory_of_others(tmp_path):
    """On the H200 the judge flagged the reference itself, "GPU 0 still has 1936 / 2863 / 4250 MiB
    in use after the worker": it compared the device's whole used memory with a baseline while
    another job used the GPU. A GPU worker that left nothing behind is charged with nothing."""

    def scenario(root: Path, tmp: Path) -> list[str]:
        other = subprocess.Popen(["sleep", "120"])
        try:
            fake_nvidia_smi(tmp / "bin", "0, 143771, 4250\n", f"{other.pid}, 4250\n", grow_mib=512)
            env = {**os.environ, "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}"}
            run = run_python(root, OTHERS_MEMORY, other.pid, env=env)
        finally:
            other.kill()
            other.wait()
        left = [line for line in run.stdout.splitlines() if line.startswith("LEFT ")]
        if len(left) == 3 and all(line == "LEFT []" for line in left):
            return []
        return [f"GPU workers charged with memory another process holds: {left} {run.stderr[-800:]}"]

    both_ways("gpu-memory-per-process", tmp_path, scenario)
