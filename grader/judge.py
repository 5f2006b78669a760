"""The judge: the trusted side of grading.

It holds the rubric, the checks and the reference, and decides every point. For one submission:

1. it draws every check's inputs (``grader/secret.py``: from the grading secret, the check's
   name and the submission's content; in practice mode, the release's fixed inputs);
2. it computes the reference's answers to all of them before any worker starts, the way the
   workers compute theirs (``grader/reference.py``: one thread; CUDA hidden for CPU checks, in a
   process of its own where this one sees CUDA); if the reference itself fails, grading stops
   with ``ReferenceFailure`` and nobody is graded;
3. it starts a worker in a sandbox (``grader/sandbox.py``) with the submission's module files;
   each exercise runs in a process of its own that no other exercise's code has touched (the
   CPU checks of all exercises share one sandboxed worker that imports torch once and forks a
   child per exercise; GPU checks, and any exercise whose child failed, get a fresh worker each);
   it sends the public probes, and only once those are answered the hidden ones
   (``grader/worker.py``), reads back plain data (``grader/wire.py``) and compares.

No state is shared between exercises: each exercise's process starts from a state no earlier
one could write. In the shared CPU worker, before each exercise's child, every other process of
the worker is killed and what its uid left in ``work/``, the machine's shared writable places
(``sandbox.shared_places``) and System V IPC is removed; without namespaces, a worker's uid is
handed to the next worker only once it owns no process and no such file
(``sandbox.release_uid``). GPU workers each lease a device and a share of its memory.
Every check needs a value the submission computed or a measurement it could not make up: no
verdict follows from a probe's inputs alone (a timer's mean is judged by the window the probe
measured around calls whose durations no frame holds). What a submission did that reaches into
the grader is flagged for the instructor, never scored (``grader/flags.py``).

A worker that times out is tried once more with twice the time; the limit itself grows with how
long the reference and a bare worker (the judge's canary) took on this machine in this run, so a
loaded grading box does not zero correct code. If the worker still times out, crashes, exits,
floods its output or breaks a limit, the checks it had not answered are lost with the reason,
and nothing else is affected. A hidden check never shows anything a worker produced: its reason
is its rule.
"""

from __future__ import annotations

import hashlib
import json
import queue
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from coursekit.course import EXERCISES
from coursekit.impl import REPO_ROOT
from grader import rubric, sandbox, wire
from grader.checks import Answer, Check, same
from grader.reference import Reference, ReferenceFailure, answer_from, has_reference  # noqa: F401 - judge's API
from grader.secret import Draw, GradingSecret
from grader.submission import Submission
from grader.text import safe

GRADER_DIR = Path(__file__).resolve().parent
RUBRIC = GRADER_DIR / "rubric.toml"
MODULES = {e.marker: e.module for e in EXERCISES}
PENDING_GPU = "not run: needs a GPU, graded in the GPU pass"


class EnvironmentProblem(RuntimeError):
    """No worker can run on this machine (the sandbox, or the Python it would run): nobody can
    be graded here."""


@dataclass
class CheckResult:
    check: Check
    points: float
    status: str  # "passed", "failed" or "pending" (a GPU check on a machine without CUDA)
    reason: str = ""

    @property
    def earned(self) -> float:
        return self.points if self.status == "passed" else 0.0


@dataclass
class ExerciseResult:
    exercise: str
    module: str
    checks: list[CheckResult] = field(default_factory=list)
    problem: str | None = None  # why the whole exercise was lost, if it was
    observed: list[str] = field(default_factory=list)  # what its workers left behind (grader/flags.py)

    @property
    def score(self) -> float:
        return sum(c.earned for c in self.checks)

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks if c.status != "pending")

    @property
    def pending(self) -> float:
        return sum(c.points for c in self.checks if c.status == "pending")


@dataclass
class Report:
    submission: str
    exercises: list[ExerciseResult]
    notes: list[str]
    wall_s: float = 0.0
    fingerprint: dict = field(default_factory=dict)
    staff_notes: list[str] = field(default_factory=list)  # never in what a student sees
    manual: dict | None = None  # the self-test, graded by hand: {"points", "found"}
    flags: list[dict] = field(default_factory=list)  # code that reaches into the grader (grader/flags.py)

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)

    @property
    def pending(self) -> float:
        return sum(e.pending for e in self.exercises)


def load_rubric(path: Path = RUBRIC) -> dict[str, float]:
    """``{check id: points}``: every check this grader holds (public and hidden), with the points
    written on it."""
    return rubric.load(path).checks


def rubric_digest() -> str:
    """Which rubric graded: two passes (or two runs) with different ones cannot be merged."""
    return rubric.digest(rubric.load())


def cpu_points() -> float:
    """The points of the checks that run without CUDA (public and hidden)."""
    return rubric.totals(rubric.load())["cpu"]


def all_checks(draw: Draw | None = None) -> list[Check]:
    from grader.exercises import has_hidden_checks, hidden_checks, public_checks

    checks = public_checks(draw)
    if not has_hidden_checks():  # a released grader has no hidden checks
        return checks
    return checks + hidden_checks(draw)


def runtime_files() -> dict[str, bytes]:
    """What a worker runs with: its own code and the course's support package, nothing else."""
    files = {"worker.py": (GRADER_DIR / "worker.py").read_bytes()}
    # The grader package as far as the exercises' probes need it (never the hidden checks).
    for name in ("__init__.py", "cleanup.py", "wire.py", "probes.py", "checks.py"):
        files[f"grader/{name}"] = (GRADER_DIR / name).read_bytes()
    for path in sorted((GRADER_DIR / "exercises").glob("*.py")):
        files[f"grader/exercises/{path.name}"] = path.read_bytes()
    for path in sorted((REPO_ROOT / "coursekit").glob("*.py")):
        files[f"coursekit/{path.name}"] = path.read_bytes()
    return files


def digest(submission: Submission) -> str:
    """The submission's content, as the salt of its drawn inputs."""
    h = hashlib.sha256()
    for name, data in sorted(submission.files.items()):
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


@dataclass
class Canary:
    """What a bare worker (no submission code) found on this machine."""

    wall_s: float
    facts: dict


@dataclass(frozen=True)
class Budget:
    """The wall time one submission's grading may take in all (``--deadline``), so that a
    platform that kills the whole run at its own limit (Gradescope: 10 minutes by default) never
    does: every worker's time limit is cut to what is left, less ``MARGIN_S`` for judging and
    writing the results, and a worker that would get less than a second is not started."""

    total_s: float | None = None
    end: float = 0.0

    MARGIN_S = 5.0

    @classmethod
    def start(cls, total_s: float | None) -> "Budget":
        return cls(total_s, time.monotonic() + total_s) if total_s else cls()

    def cap(self, limits: sandbox.Limits) -> sandbox.Limits | None:
        """``limits`` with the time limit cut to what is left; None when nothing is left."""
        if self.total_s is None:
            return limits
        left = self.end - time.monotonic() - self.MARGIN_S
        if left < 1.0:
            return None
        if left < limits.timeout_s:
            return replace(limits, timeout_s=left, budget_s=self.total_s)
        return limits

    def spent(self) -> sandbox.Run:
        """What stands for a worker that was not started: the budget was spent."""
        return sandbox.Run(answers=[], returncode=None, timed_out=True, budget_s=self.total_s or 0.0)


class Judge:
    def __init__(self, gpu: str = "auto", timeout_s: float = 60.0, jobs: int = 2,
                 hide: tuple[Path, ...] = (), exercises: tuple[str, ...] | None = None,
                 secret: GradingSecret | None = None, gpu_only: bool = False,
                 deadline_s: float | None = None, gpu_jobs: int = 1):
        import torch

        # The judge's own work (the reference's answers) is on tiny tensors: one thread, so that it
        # never competes for the cores with the workers beside it (OpenMP threads spinning on a
        # busy machine made grading twice as slow).
        torch.set_num_threads(1)

        if gpu not in ("auto", "on", "off"):
            raise ValueError(f"gpu: expected auto, on or off, got {gpu!r}")
        has_cuda = torch.cuda.is_available()
        if gpu == "on" and not has_cuda:
            raise RuntimeError("--gpu on: no CUDA device is available here")
        if gpu_only and gpu == "off":
            raise ValueError("--only-gpu: the GPU pass needs --gpu on (or auto on a CUDA machine)")
        if gpu_only and not has_cuda:
            raise RuntimeError("--only-gpu: no CUDA device is available here")
        if secret is not None and not has_reference():
            raise RuntimeError("official grading (a grading secret) needs the reference: run it "
                               "from the staff repository, which has solutions/")
        self.gpu = has_cuda if gpu == "auto" else gpu == "on"
        # Checks that need torch.compile to build GPU kernels cannot be graded where Triton cannot
        # build (no C compiler, no Python.h, no libcuda): pending, with the doctor's reason.
        from coursekit.platform import triton_problem

        self.triton_problem = triton_problem(cuda=True) if self.gpu else None
        self.gpu_mode, self.gpu_only, self.secret = gpu, gpu_only, secret
        if deadline_s is not None and not deadline_s >= 10:
            raise ValueError(f"--deadline: expected at least 10 seconds, got {deadline_s:g}")
        self.timeout_s, self.jobs, self.deadline_s = timeout_s, max(1, jobs), deadline_s
        self.hide = (REPO_ROOT, *hide)
        course = rubric.load().validate()
        self.points, self.manual_points = course.checks, course.manual
        known = {c.split(".")[0] for c in self.points}
        self.exercises = exercises or tuple(e.marker for e in EXERCISES if e.marker in known)
        # The reference's answers, computed as the workers compute them (grader/reference.py).
        self.reference = Reference(cuda_visible=has_cuda)
        self.runtime = runtime_files()
        self._canaries: dict[bool, Canary] = {}
        self._canary_lock = threading.Lock()
        self._reference_s: dict[tuple[str, bool], float] = {}
        # One slot (and so one worker uid) per worker that can run at once; a worker waits for one.
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(64):
            self._slots.put(slot)
        # GPU workers: ``gpu_jobs`` at a time on each device (CUDA_VISIBLE_DEVICES per worker),
        # each held to its share of the device's memory, watched from here (nvidia-smi).
        if gpu_jobs < 1:
            raise ValueError(f"--gpu-jobs: expected at least 1 worker per GPU, got {gpu_jobs}")
        self.gpu_jobs = gpu_jobs
        self._devices: queue.Queue[str] = queue.Queue()
        for device in self._device_ids() if self.gpu else []:
            for _ in range(gpu_jobs):
                self._devices.put(device)
        self._device_leases = self._devices.qsize()
        memory = sandbox.gpu_memory() if self.gpu else None
        totals = [m["total"] for m in (memory or {}).values()]
        self.gpu_share_bytes = int(0.9 * min(totals) / gpu_jobs) if totals else None

    def close(self) -> None:
        """End what the judge started for itself (its reference processes): a grading that ends
        leaves no process of the grader's behind."""
        self.reference.close()

    @staticmethod
    def _device_ids() -> list[str]:
        """The GPUs workers may use: CUDA_VISIBLE_DEVICES's list where it is set, else all."""
        import os

        import torch

        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and visible.strip():
            return [d.strip() for d in visible.split(",") if d.strip()]
        return [str(i) for i in range(max(1, torch.cuda.device_count()))]

    def _gpu_run(self, box, limits: sandbox.Limits, frames: list[bytes], slot: int) -> sandbox.Run:
        """A GPU worker on a device of its own (or its share of one), then a look at the device:
        the worker's own processes must hold none of its memory once the worker is gone."""
        leased = not self._devices.empty() or self._device_leases > 0
        device = self._devices.get() if leased else None  # no GPU seen here: no device to share
        try:
            limits = replace(limits, gpu_bytes=self.gpu_share_bytes)
            run = sandbox.run(box, limits, frames, gpu=True, hide=self.hide, slot=slot, device=device)
            if device is not None:
                # The device goes to the next worker once this one's processes hold none of it.
                left = sandbox.settle_gpu(run, device)
                if left:
                    run.leftovers.append(left)
            return run
        finally:
            if device is not None:
                self._devices.put(device)

    # ------------------------------------------------------------------------- what is asked

    def draw(self, submission: Submission) -> Draw:
        return Draw(self.secret, digest(submission) if self.secret else "")

    def checks_for(self, submission: Submission) -> list[Check]:
        checks = [c for c in all_checks(self.draw(submission)) if c.id in self.points
                  and c.exercise in self.exercises]
        return [c for c in checks if c.gpu] if self.gpu_only else checks

    # ------------------------------------------------------------------------- grading

    def grade(self, submission: Submission) -> Report:
        start = time.monotonic()
        budget = Budget.start(self.deadline_s)
        checks = self.checks_for(submission)
        with ThreadPoolExecutor(1) as early:  # the canary runs no submission code: meanwhile...
            canary = early.submit(self.canary, False)
            answers = self._reference_answers(checks)  # ...before any worker: a failure grades nobody
            canary.result()
        if self.gpu:
            self.canary(True)
        cpu_groups = {ex: group for ex in self.exercises if MODULES[ex] in submission.files
                      and (group := [c for c in checks if c.exercise == ex and not c.gpu])}
        shared_observed: list[str] = []
        shared = self._run_shared(submission, cpu_groups, answers, budget, shared_observed) \
            if len(cpu_groups) > 1 else {}
        with ThreadPoolExecutor(self.jobs) as pool:
            results = list(pool.map(lambda ex: self._grade_exercise(submission, ex, checks, answers,
                                                                    shared.get(ex), budget),
                                    self.exercises))
        results = [r for r in results if r.checks]
        manual = None
        if not self.gpu_only and self.manual_points:
            manual = {"points": self.manual_points, "found": safe(submission.answered(), 300)}
        from grader import flags

        found = flags.scan(submission.files)
        found += [{"exercise": r.exercise, "observed": safe(o, 300)} for r in results for o in r.observed]
        found += [{"exercise": "shared worker", "observed": safe(o, 300)} for o in shared_observed]
        return Report(safe(submission.label, 300), results, self.notes(submission, results),
                      time.monotonic() - start, self.fingerprint(), self.staff_notes(), manual, found)

    def grade_exercise(self, submission: Submission, exercise: str) -> ExerciseResult:
        checks = [c for c in self.checks_for(submission) if c.exercise == exercise]
        with ThreadPoolExecutor(1) as early:
            canary = early.submit(self.canary, False)
            answers = self._reference_answers(checks)
            canary.result()
        if self.gpu and any(c.gpu for c in checks):
            self.canary(True)
        return self._grade_exercise(submission, exercise, checks, answers, budget=Budget.start(self.deadline_s))

    def notes(self, submission: Submission, results: list[ExerciseResult]) -> list[str]:
        notes = [safe(p, 500) for p in submission.problems]
        if self.secret is None:
            notes.append("PRACTICE MODE: no grading secret, so the checks use the release's fixed "
                         "inputs; a score here is for self-checking, not an official grade "
                         f"(official grading: --secret-file or {'$'}LAUNCH_TAX_SECRET_FILE)")
        else:
            notes.append(f"official grading: inputs drawn from grading secret {self.secret.id}")
        pending = sum(r.pending for r in results)
        if pending:
            why = "--gpu off" if self.gpu_mode == "off" else "no CUDA here"
            notes.append(f"{pending:g} points pending: GPU checks not run ({why}); they are graded "
                         "in the GPU pass (a machine with CUDA, --gpu on)")
        return notes

    def staff_notes(self) -> list[str]:
        """What the one who runs the grader should know and a student's results must not show
        (they go to the terminal, ``extra_data`` and the class summary)."""
        off = [name for name, on in self.protections().items() if not on]
        if not off:
            return []
        return ["sandbox protections off on this machine (not root, or no namespaces): " + ", ".join(off)]

    def protections(self) -> dict[str, bool]:
        shown = sandbox.protections()
        canary = self._canaries.get(False)
        shown["keyring calls refused (seccomp)"] = bool(canary and canary.facts.get("keyrings_denied"))
        return shown

    def fingerprint(self) -> dict:
        import torch

        cuda = torch.version.cuda or "none"
        gpu = torch.cuda.get_device_name() if self.gpu else "none"
        off = [name for name, on in self.protections().items() if not on]
        info = build_info()
        return {"grader": grader_version(), "commit": info.get("commit", "unknown"),
                "bundle": info.get("bundle", "none"), "rubric": rubric_digest(),
                "torch": torch.__version__, "cuda": cuda, "gpu": gpu,
                "mode": "official" if self.secret else "practice",
                "seed_id": self.secret.id if self.secret else "practice",
                "isolation": "namespaces" if sandbox.is_root() else
                "separate user only" if sandbox.drops_privileges() else "none",
                "protections_off": off,
                "pass": "gpu" if self.gpu_only else ("cpu+gpu" if self.gpu else "cpu")}

    # ------------------------------------------------------------------------- the reference

    def _reference_answers(self, checks: list[Check]) -> dict[tuple[str, str], Answer | None]:
        """The reference's answer to every probe that needs one; and how long each exercise's
        probes took it (computed, not cached), for the workers' time limits."""
        answers: dict[tuple[str, str], Answer | None] = {}
        took: dict[tuple[str, bool], float] = {}
        for check in checks:
            if check.gpu and not self.gpu:
                continue
            compare = check.compare or same()
            if not getattr(compare, "needs_reference", False):
                continue
            wanted = [p for p in check.probes if p.needs_reference and (check.exercise, p.key()) not in answers]
            got, seconds = self.reference.answers(check.exercise, MODULES[check.exercise], wanted,
                                                  cache=self.secret is None, gpu=check.gpu)
            group = (check.exercise, check.gpu)
            took[group] = took.get(group, 0.0) + seconds
            answers.update({(check.exercise, k): a for k, a in got.items()})
        for group, seconds in took.items():
            self._reference_s[group] = max(self._reference_s.get(group, 0.0), seconds)
        return answers

    # ------------------------------------------------------------------------- workers

    def canary(self, gpu: bool) -> Canary:
        """Run a bare worker once: it proves a worker can start here (else ``EnvironmentProblem``)
        and measures what ``import torch`` maps (the CPU workers' address-space limit), how long a
        worker takes to start (the time limits) and whether the keyring filter is on."""
        with self._canary_lock:
            if gpu in self._canaries:
                return self._canaries[gpu]
            box = sandbox.make_box(self.runtime, {})
            request = wire.Request(canary=True, dynamo=gpu).payload()
            limits = sandbox.Limits(timeout_s=max(120.0, self.timeout_s), memory_bytes=None)
            slot = self._slots.get()
            try:
                run = (self._gpu_run(box, limits, [request], slot) if gpu else
                       sandbox.run(box, limits, [request], gpu=False, hide=self.hide, slot=slot))
            finally:
                self._slots.put(slot)
                sandbox.remove_box(box)
            facts = None
            if run.answers:
                try:
                    facts = wire.loads(run.answers[0])
                except ValueError:
                    facts = None
            if not isinstance(facts, dict):
                tail = safe(run.output.strip()[-1500:], lines=True)
                why = run.failure() or f"exited with code {run.returncode}"
                raise EnvironmentProblem(
                    f"a bare {'GPU' if gpu else 'CPU'} worker cannot run on this machine ({why}); "
                    f"nothing was graded. Its output:\n{tail}")
            gpu_canary_problem(gpu, facts)
            self._canaries[gpu] = Canary(run.wall_s, facts)
            return self._canaries[gpu]

    def _limits(self, exercise: str, gpu: bool) -> sandbox.Limits:
        canary = self.canary(gpu)
        reference_s = self._reference_s.get((exercise, gpu), 0.0)
        timeout = max(self.timeout_s, 3 * canary.wall_s + 20 * reference_s)
        memory = None
        if not gpu:  # what importing torch maps here, and 3 GiB for the submission
            memory = max(4 << 30, int(canary.facts.get("vm_peak_bytes", 0)) + (3 << 30))
        return sandbox.Limits(timeout_s=timeout, memory_bytes=memory)

    def _grade_exercise(self, submission: Submission, exercise: str, checks: list[Check],
                        answers: dict, shared: ExerciseResult | float | None = None,
                        budget: Budget = Budget()) -> ExerciseResult:
        """``shared``: what the shared CPU worker found for this exercise (its CPU checks'
        results), or the seconds it timed out after, or None (not tried there)."""
        module = MODULES[exercise]
        checks = [c for c in checks if c.exercise == exercise]
        result = ExerciseResult(exercise, module)
        runnable = [c for c in checks if (self.gpu or not c.gpu) and not (c.triton and self.triton_problem)]
        for c in checks:
            if c not in runnable:
                why = PENDING_GPU if not self.gpu else (
                    f"not gradable on this machine ({self.triton_problem}); graded on a GPU machine "
                    "that can compile (python -m grader doctor says which can)")
                result.checks.append(CheckResult(c, self.points[c.id], "pending", why))
        if module not in submission.files:
            why = safe(submission.missing_reason(module), 500)
            result.problem = why
            result.checks += [self._lost(c, why) for c in runnable]
        else:
            for gpu in (False, True):
                group = [c for c in runnable if c.gpu == gpu]
                if not group:
                    continue
                if not gpu and isinstance(shared, ExerciseResult):
                    result.checks += shared.checks
                    result.problem = shared.problem
                    continue
                tried_s = shared if not gpu and isinstance(shared, float) else 0.0
                self._run_group(submission, exercise, group, gpu, answers, result, tried_s, budget)
        order = {c.id: i for i, c in enumerate(checks)}
        result.checks.sort(key=lambda r: order[r.check.id])
        return result

    def _lost(self, check: Check, why: str) -> CheckResult:
        reason = f"rule: {check.rule}" if check.hidden else f"{why}\n  rule: {check.rule}"
        return CheckResult(check, self.points[check.id], "failed", reason)

    @staticmethod
    def _plan(exercise: str, checks: list[Check], gpu_jobs: int = 1) -> tuple[list[list[Check]], list[wire.Request],
                                                                                list[tuple[dict, int]]]:
        """The phases of one exercise's worker (public checks, then hidden ones), the request
        frame of each phase, and where each probe's answer lies in that phase's answer frame."""
        phases = [[c for c in checks if not c.hidden], [c for c in checks if c.hidden]]
        if not phases[1]:
            phases.pop()
        requests, indexes = [], []
        for phase in phases:
            probes, index = [], {}
            for check in phase:
                for probe in sorted(check.probes, key=lambda p: p.last):
                    if probe.key() not in index:
                        index[probe.key()] = len(probes)
                        probes.append(probe)
            probes.sort(key=lambda p: p.last)  # a failing capture disturbs what follows it
            index = {p.key(): i for i, p in enumerate(probes)}
            requests.append(wire.Request(module=MODULES[exercise], gpu_fraction=round(0.9 / gpu_jobs, 4),
                                         probes=[{"probe": p.probe, "args": wire.encode(p.args)} for p in probes]))
            indexes.append((index, len(probes)))
        return phases, requests, indexes

    def _apply(self, run: sandbox.Run, exercise: str, phases: list[list[Check]],
               indexes: list[tuple[dict, int]], answers: dict, result: ExerciseResult) -> None:
        for number, phase in enumerate(phases):
            index, count = indexes[number]
            problem, got = _read_answers(run, number, count)
            if problem:
                if number == 0:
                    result.problem = problem
                result.checks += [self._lost(c, problem) for c in phase]
                continue
            for check in phase:
                result.checks.append(self._judge(check, exercise, [got[index[p.key()]] for p in check.probes],
                                                 answers))

    def _run_group(self, submission: Submission, exercise: str, checks: list[Check], gpu: bool,
                   answers: dict, result: ExerciseResult, tried_s: float = 0.0,
                   budget: Budget = Budget()) -> None:
        phases, requests, indexes = self._plan(exercise, checks, self.gpu_jobs)
        run = self._run_worker(submission, exercise, gpu, requests, tried_s, budget)
        result.observed += observations(run)
        self._apply(run, exercise, phases, indexes, answers, result)

    def _run_shared(self, submission: Submission, groups: dict[str, list[Check]],
                    answers: dict, budget: Budget = Budget(),
                    observed: list[str] | None = None) -> dict[str, ExerciseResult | float]:
        """The CPU checks of several exercises in one worker (``worker.py``'s shared mode: one
        ``import torch``, then a forked child per exercise). Returns each exercise's result, or,
        where the shared worker could not answer for it, the seconds its child was given when it
        timed out (0.0 otherwise): that exercise is then graded in a worker of its own."""
        frames, plans, limits = [], {}, {}
        for exercise, checks in groups.items():
            phases, requests, indexes = self._plan(exercise, checks, self.gpu_jobs)
            limits[exercise] = self._limits(exercise, False)
            plans[exercise] = (len(frames), phases, indexes)
            for phase, request in enumerate(requests):
                frames.append(replace(request, group=exercise, phase=phase, timeout_s=limits[exercise].timeout_s))
        frames[0] = replace(frames[0], shared=True, cap=wire.MAX_FRAME_BYTES, shared_places=sandbox.shared_places(),
                            isolated=sandbox.drops_privileges())
        first = next(iter(limits.values()))
        total = budget.cap(sandbox.Limits(timeout_s=sum(lim.timeout_s for lim in limits.values()) + 30,
                                          memory_bytes=first.memory_bytes,
                                          result_bytes=2 * wire.MAX_FRAME_BYTES * len(frames)))
        if total is None:  # nothing left: each exercise's own worker says so
            return {}
        files = {"submission/__init__.py": b""}
        files.update({f"submission/{name}.py": data for name, data in submission.files.items()})
        box = sandbox.make_box(self.runtime, files)
        directory = str(box / "submission")
        slot = self._slots.get()
        try:
            run = sandbox.run(box, total, [replace(f, submission_dir=directory).payload() for f in frames], gpu=False,
                              hide=self.hide, slot=slot)
        finally:
            self._slots.put(slot)
            sandbox.remove_box(box)
        if observed is not None:
            observed += observations(run)
        out: dict[str, ExerciseResult | float] = {}
        for exercise, (start, phases, indexes) in plans.items():
            mine = run.answers[start:start + len(phases)]
            fallback = None
            if len(mine) < len(phases):
                fallback = "unanswered"
            for raw in mine:
                try:
                    data = wire.loads(raw)
                except ValueError:
                    fallback = fallback or "malformed"
                    continue
                if isinstance(data, dict) and "fallback" in data:
                    fallback = fallback or str(data["fallback"])
            if fallback is not None:
                out[exercise] = limits[exercise].timeout_s if fallback == "timeout" else 0.0
                continue
            result = ExerciseResult(exercise, MODULES[exercise])
            self._apply(sandbox.Run(answers=list(mine), returncode=0), exercise, phases, indexes,
                        answers, result)
            out[exercise] = result
        return out

    def _run_worker(self, submission: Submission, exercise: str, gpu: bool,
                    requests: list[wire.Request], tried_s: float = 0.0, budget: Budget = Budget()) -> sandbox.Run:
        """``tried_s``: this exercise already timed out once (in a shared worker) after that
        many seconds; this is then its second try, with twice the time. Every try is cut to
        what is left of ``budget``; a try with nothing left is not started."""
        files = {"submission/__init__.py": b""}
        files.update({f"submission/{name}.py": data for name, data in submission.files.items()})
        limits = self._limits(exercise, gpu)
        if tried_s:
            limits = sandbox.Limits(timeout_s=2 * tried_s, memory_bytes=limits.memory_bytes)
        wanted_s, run = limits.timeout_s, None
        for attempt in range(1 if tried_s else 0, 2):
            capped = budget.cap(limits)
            if capped is None:  # the budget is spent: the first try's outcome stands, if any
                if run is not None:
                    run.budget_s = budget.total_s or 0.0
                    return run
                spent = budget.spent()
                spent.first_timeout_s = tried_s
                return spent
            limits = capped
            box = sandbox.make_box(self.runtime, files)
            directory = str(box / "submission")
            frames = [replace(r, submission_dir=directory).payload() for r in requests]
            slot = self._slots.get()
            try:
                run = (self._gpu_run(box, limits, frames, slot) if gpu else
                       sandbox.run(box, limits, frames, gpu=False, hide=self.hide, slot=slot))
            finally:
                self._slots.put(slot)
                sandbox.remove_box(box)
            if attempt:
                run.first_timeout_s = wanted_s / 2
            if not run.timed_out or attempt:
                return run
            # Load, not a wrong answer, until shown otherwise: once more, with twice the time.
            wanted_s *= 2
            limits = sandbox.Limits(timeout_s=wanted_s, memory_bytes=limits.memory_bytes)
        raise AssertionError("unreachable")

    def _judge(self, check: Check, exercise: str, got_answers: list[Answer], answers: dict) -> CheckResult:
        compare = check.compare or same()
        needs_reference = getattr(compare, "needs_reference", False)
        for probe, got in zip(check.probes, got_answers):
            expected = None
            if needs_reference and probe.needs_reference:
                expected = answers.get((exercise, probe.key()))
                if expected is None:  # a release made without CUDA has no GPU answers recorded
                    return CheckResult(check, self.points[check.id], "pending",
                                       "no recorded reference answer for this check")
            try:
                problem = compare(probe, got, expected)
            except (LookupError, TypeError, ValueError, AttributeError, RecursionError) as exc:
                problem = f"{probe.label}: malformed answer ({type(exc).__name__}: {exc})"
            if problem:
                return self._lost(check, safe(problem, 1500, lines=True))
        return CheckResult(check, self.points[check.id], "passed")


def observations(run: sandbox.Run) -> list[str]:
    """What the sandbox saw a worker leave behind: its uid's processes, files and IPC objects
    (``sandbox.release_uid``), and what the shared worker removed between two exercises."""
    seen = list(run.leftovers)
    for line in run.output.splitlines():
        if line.startswith("launch-tax worker: before "):
            seen.append(line.removeprefix("launch-tax worker: ").strip())
    return seen[:20]


def gpu_canary_problem(gpu: bool, facts: dict) -> None:
    """A GPU worker that cannot see CUDA where the judge can would zero every GPU check of the
    class: ``EnvironmentProblem`` (nobody is graded, exit 3) instead."""
    if gpu and not facts.get("cuda"):
        raise EnvironmentProblem(
            "the judge sees a CUDA device but a bare GPU worker does not (torch.cuda.is_available() "
            "is False in the sandbox): nothing was graded. The worker's environment keeps only "
            f"{', '.join(sandbox.GPU_PASSTHROUGH)}, NVIDIA_* and CUDA_VISIBLE_DEVICES of the "
            "judge's; check that the driver (libcuda.so.1) is found with those, e.g. "
            "`env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH=$LD_LIBRARY_PATH python3 -c 'import torch; "
            "print(torch.cuda.is_available())'`")


def _read_answers(run: sandbox.Run, number: int, count: int) -> tuple[str | None, list[Answer]]:
    """Answer frame ``number`` of a run, or why there is none (for the reasons: the run's
    failure and its last output line, which a hidden check never shows)."""
    if number >= len(run.answers):
        failure = run.failure()
        if failure:
            return f"worker {failure}", []
        tail = run.output.strip().splitlines()[-1:] if run.output.strip() else []
        how = f"exited with code {run.returncode}" if run.returncode else "exited"
        return (f"worker {how} before sending a result"
                + (f" (last output: {safe(tail[0], 200)})" if tail else "")), []
    try:
        data = wire.loads(run.answers[number])
        if not isinstance(data, dict):
            raise ValueError("not an object")
        if "import_error" in data:
            error = answer_from({"error": data["import_error"]}).error
            return f"importing the module raised {error['types'][0]}: {error['message'][:300]}", []
        raw = data["probes"]
        if not isinstance(raw, list) or len(raw) != count:
            raise ValueError("wrong number of answers")
        return None, [answer_from(item if isinstance(item, dict) else {}) for item in raw]
    except Exception as exc:  # noqa: BLE001 - whatever an untrusted worker sent, the judge goes on
        return f"worker sent a malformed result ({type(exc).__name__})", []


BUILD = GRADER_DIR / "BUILD.json"  # written into a bundle or a release: what it was built from
_VERSION: list[str] = []


def build_info() -> dict:
    """``{"grader": version, "commit": ..., "changes": bool}`` of this checkout (git), or what a
    bundle's or a release's ``grader/BUILD.json`` recorded when it was built (no git there)."""
    if BUILD.is_file():
        try:
            data = json.loads(BUILD.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                return data
        except ValueError:
            pass
    try:
        from importlib.metadata import version

        text = version("launch-tax")
    except Exception:  # noqa: BLE001 - not installed: used in place
        text = "0.1.0"
    info: dict = {"grader": text, "commit": "unknown", "changes": False}
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO_ROOT,
                                capture_output=True, text=True, timeout=10)
        if commit.returncode == 0 and commit.stdout.strip():
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                   cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
            info.update(commit=commit.stdout.strip(), changes=bool(dirty.stdout.strip()))
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def grader_version() -> str:
    """The grader's version, its commit (``+changes`` when built from uncommitted work) and, for
    a Gradescope bundle, the bundle's digest: what every result names."""
    if not _VERSION:
        info = build_info()
        text = f"{info.get('grader', '?')} ({info.get('commit', 'unknown')}"
        text += "+changes" if info.get("changes") else ""
        text += f", bundle {info['bundle']}" if info.get("bundle") else ""
        _VERSION.append(text + ")")
    return _VERSION[0]
