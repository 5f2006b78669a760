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
   (``grader/runtime/worker.py``), reads back plain data (``grader/runtime/wire.py``) and compares.

No state is shared between exercises: each exercise's process starts from a state no earlier
one could write. In the shared CPU worker, before each exercise's child, every other process of
the worker is killed and what its uid left in ``work/``, the machine's shared writable places
(``isolation.current().shared_places()``) and System V IPC is removed; without namespaces, a worker's uid is
handed to the next worker only once it owns no process and no such file
(``isolation.release_uid``). GPU workers each lease a device and a share of its memory, a share
watched only where nvidia-smi shows a process's GPU memory (asked once per grading; where it
does not, a container, the report's staff notes and fingerprint say the cap is off).
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

The judge orchestrates; each part has a module of its own: what a worker is asked
(``grader/plan.py``), starting workers and their limits (``grader/workers.py``, over
``grader/sandbox.py``, ``grader/isolation.py`` and ``grader/devices.py``), and from answers to
points (``grader/verdict.py``).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from coursekit.course import EXERCISES, MODULE_OF
from coursekit.impl import REPO_ROOT
from grader import isolation, rubric
from grader.checks import Answer, Check, same
from grader.devices import DevicePool
from grader.plan import plan
from grader.reference import Reference, ReferenceFailure, has_reference  # noqa: F401 - judge's API
from grader.secret import Draw, GradingSecret, digest
from grader.submission import Submission
from grader.text import safe
from grader.verdict import (
    GPU_MEMORY_OFF,
    CheckResult,
    ExerciseResult,
    Report,
    Verdicts,
    notes,
    observations,
    staff_notes,
)
from grader.version import fingerprint
from grader.workers import Budget, EnvironmentProblem, Workers, runtime_files  # noqa: F401 - judge's API

RUBRIC = Path(__file__).resolve().parent / "rubric.toml"
PENDING_GPU = "not run: needs a GPU, graded in the GPU pass"


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


class Judge:
    def __init__(
        self,
        gpu: str = "auto",
        timeout_s: float = 60.0,
        jobs: int = 2,
        hide: tuple[Path, ...] = (),
        exercises: tuple[str, ...] | None = None,
        secret: GradingSecret | None = None,
        gpu_only: bool = False,
        deadline_s: float | None = None,
        gpu_jobs: int = 1,
    ):
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
            raise RuntimeError(
                "official grading (a grading secret) needs the reference: run it "
                "from the staff repository, which has solutions/"
            )
        self.gpu = has_cuda if gpu == "auto" else gpu == "on"
        # Checks that need torch.compile to build GPU kernels cannot be graded where Triton cannot
        # build (no C compiler, no Python.h, no libcuda): pending, with the doctor's reason.
        from coursekit.platform import triton_problem

        self.triton_problem = triton_problem(cuda=True) if self.gpu else None
        self.gpu_mode, self.gpu_only, self.secret = gpu, gpu_only, secret
        if deadline_s is not None and not deadline_s >= 10:
            raise ValueError(f"--deadline: expected at least 10 seconds, got {deadline_s:g}")
        self.jobs, self.deadline_s = max(1, jobs), deadline_s
        course = rubric.load().validate()
        self.points, self.manual_points = course.checks, course.manual
        self.verdicts = Verdicts(self.points)
        known = {c.split(".")[0] for c in self.points}
        self.exercises = exercises or tuple(e.marker for e in EXERCISES if e.marker in known)
        # The reference's answers, computed as the workers compute them (grader/reference.py).
        self.reference = Reference(cuda_visible=has_cuda)
        # GPU workers: ``gpu_jobs`` at a time on each device (CUDA_VISIBLE_DEVICES per worker),
        # each held to its share of the device's memory, watched from here (nvidia-smi).
        self.gpu_jobs = gpu_jobs
        devices = DevicePool.of_this_machine(gpu_jobs) if self.gpu else DevicePool([], gpu_jobs)
        self.workers = Workers(timeout_s, (REPO_ROOT, *hide), devices)

    def close(self) -> None:
        """End what the judge started for itself (its reference processes): a grading that ends
        leaves no process of the grader's behind."""
        self.reference.close()

    def draw(self, submission: Submission) -> Draw:
        return Draw(self.secret, digest(submission) if self.secret else "")

    def checks_for(self, submission: Submission) -> list[Check]:
        checks = [c for c in all_checks(self.draw(submission)) if c.id in self.points and c.exercise in self.exercises]
        return [c for c in checks if c.gpu] if self.gpu_only else checks

    def grade(self, submission: Submission) -> Report:
        start = time.monotonic()
        budget = Budget.start(self.deadline_s)
        checks = self.checks_for(submission)
        answers = self._prepare(checks, gpu_canary=self.gpu)
        cpu_groups = {
            ex: group
            for ex in self.exercises
            if MODULE_OF[ex] in submission.files and (group := [c for c in checks if c.exercise == ex and not c.gpu])
        }
        shared_observed: list[str] = []
        shared = (
            self._run_shared(submission, cpu_groups, answers, budget, shared_observed) if len(cpu_groups) > 1 else {}
        )
        with ThreadPoolExecutor(self.jobs) as pool:
            results = list(
                pool.map(
                    lambda ex: self._grade_exercise(submission, ex, checks, answers, shared.get(ex), budget),
                    self.exercises,
                )
            )
        results = [r for r in results if r.checks]
        manual = None
        if not self.gpu_only and self.manual_points:
            manual = {"points": self.manual_points, "found": safe(submission.answered(), 300)}
        from grader import flags

        found = flags.scan(submission.files)
        found += [{"exercise": r.exercise, "observed": safe(o, 300)} for r in results for o in r.observed]
        found += [{"exercise": "shared worker", "observed": safe(o, 300)} for o in shared_observed]
        return Report(
            safe(submission.label, 300),
            results,
            notes(submission, results, self.secret, self.gpu_mode),
            time.monotonic() - start,
            self.fingerprint(),
            staff_notes(self.protections(), self.workers.devices.visibility),
            manual,
            found,
        )

    def grade_exercise(self, submission: Submission, exercise: str) -> ExerciseResult:
        checks = [c for c in self.checks_for(submission) if c.exercise == exercise]
        answers = self._prepare(checks, gpu_canary=self.gpu and any(c.gpu for c in checks))
        return self._grade_exercise(submission, exercise, checks, answers, budget=Budget.start(self.deadline_s))

    def _prepare(self, checks: list[Check], gpu_canary: bool) -> dict[tuple[str, str], Answer | None]:
        """The canaries (the GPU one too with ``gpu_canary``: a whole submission's grading on a
        CUDA machine always proves a GPU worker sees the device; one exercise's, when it has GPU
        checks), and the reference's answers before any worker: a failure grades nobody."""
        with ThreadPoolExecutor(1) as early:  # the canary runs no submission code: meanwhile...
            canary = early.submit(self.workers.canary, False)
            answers = self._reference_answers(checks)  # ...the reference
            canary.result()
        if gpu_canary:
            self.workers.canary(True)
            # Once per grading: can the GPU workers' memory be seen here (their cap, the look
            # after them)? Where not, the report says so (staff notes, the fingerprint).
            self.workers.devices.check_visibility()
        return answers

    def protections(self) -> dict[str, bool]:
        """Which protections this machine's workers get, the keyring filter as the canary found it."""
        shown = isolation.protections()
        canary = self.workers.canaries.get(False)
        shown["keyring calls refused (seccomp)"] = bool(canary and canary.facts.get("keyrings_denied"))
        return shown

    def fingerprint(self) -> dict:
        off = [name for name, on in self.protections().items() if not on]
        if not self.workers.devices.watched:
            off.append(GPU_MEMORY_OFF)
        return fingerprint(self.gpu, self.gpu_only, self.secret, rubric_digest(), off)

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
            got, seconds = self.reference.answers(
                check.exercise, MODULE_OF[check.exercise], wanted, cache=self.secret is None, gpu=check.gpu
            )
            group = (check.exercise, check.gpu)
            took[group] = took.get(group, 0.0) + seconds
            answers.update({(check.exercise, k): a for k, a in got.items()})
        self.workers.reference_took(took)
        return answers

    def _grade_exercise(
        self,
        submission: Submission,
        exercise: str,
        checks: list[Check],
        answers: dict,
        shared: ExerciseResult | float | None = None,
        budget: Budget = Budget(),
    ) -> ExerciseResult:
        """``shared``: what the shared CPU worker found for this exercise (its CPU checks'
        results), or the seconds it timed out after, or None (not tried there)."""
        module = MODULE_OF[exercise]
        checks = [c for c in checks if c.exercise == exercise]
        result = ExerciseResult(exercise, module, self.pending_here(checks))
        waiting = {r.check.id for r in result.checks}
        runnable = [c for c in checks if c.id not in waiting]
        if module not in submission.files:
            why = safe(submission.missing_reason(module), 500)
            result.problem = why
            result.checks += [self.verdicts.lost(c, why) for c in runnable]
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
                phases = plan(exercise, group, self.gpu_jobs)
                run = self.workers.run_exercise(submission, exercise, gpu, [p.request for p in phases], tried_s, budget)
                result.observed += observations(run)
                self.verdicts.apply(run, exercise, phases, answers, result)
        order = {c.id: i for i, c in enumerate(checks)}
        result.checks.sort(key=lambda r: order[r.check.id])
        return result

    def pending_here(self, checks: list[Check]) -> list[CheckResult]:
        """The checks this machine cannot grade, pending with the reason: GPU checks without CUDA,
        and those that need torch.compile to build GPU kernels where Triton cannot build."""
        why = PENDING_GPU
        if self.gpu:
            why = (
                f"not gradable on this machine ({self.triton_problem}); graded on a GPU machine "
                "that can compile (python -m grader doctor says which can)"
            )
        return [
            self.verdicts.pending(c, why)
            for c in checks
            if (c.gpu and not self.gpu) or (c.triton and self.triton_problem)
        ]

    def _run_shared(
        self, submission: Submission, groups: dict[str, list[Check]], answers: dict, budget: Budget, observed: list[str]
    ) -> dict[str, ExerciseResult | float]:
        """The CPU checks of several exercises in one worker. Returns each exercise's result, or,
        where the shared worker could not answer for it, the seconds its child was given when it
        timed out (0.0 otherwise): that exercise is then graded in a worker of its own."""
        requests, plans, limits = [], {}, {}
        for exercise, checks in groups.items():
            phases = plan(exercise, checks, self.gpu_jobs)
            limits[exercise] = self.workers.limits(exercise, False)
            plans[exercise] = (len(requests), phases)
            requests += [
                replace(p.request, group=exercise, phase=number, timeout_s=limits[exercise].timeout_s)
                for number, p in enumerate(phases)
            ]
        run = self.workers.run_shared(submission, requests, list(limits.values()), budget)
        if run is None:  # nothing left of the budget: each exercise's own worker says so
            return {}
        observed += observations(run)
        return self.verdicts.shared(run, plans, answers, limits)
