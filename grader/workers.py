"""The judge's workers: what each runs with, the bare worker (canary) that proves one can run
here and measures this machine, each worker's time and memory limits, the second try of a
worker that timed out, the shared CPU worker, and the grading's whole time budget.

Each worker runs in a box (``grader/sandbox.py``) in a slot of its own (one slot, one worker uid);
GPU workers each lease a device from the pool (``grader/devices.py``)."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from coursekit.impl import REPO_ROOT
from grader import isolation, sandbox
from grader.runtime import wire
from grader.devices import DevicePool
from grader.submission import Submission
from grader.text import safe

GRADER_DIR = Path(__file__).resolve().parent


class EnvironmentProblem(RuntimeError):
    """No worker can run on this machine (the sandbox, or the Python it would run): nobody can
    be graded here."""


def runtime_files() -> dict[str, bytes]:
    """What a worker runs with: ``grader/runtime/`` whole (the worker, the wire format, the
    cleanup), the part of the grader the exercises' probes import (never the hidden checks) and
    the course's support package; nothing else."""
    files = {f"grader/runtime/{p.name}": p.read_bytes() for p in sorted((GRADER_DIR / "runtime").glob("*.py"))}
    for name in ("__init__.py", "probes.py", "checks.py"):
        files[f"grader/{name}"] = (GRADER_DIR / name).read_bytes()
    for path in sorted((GRADER_DIR / "exercises").glob("*.py")):
        files[f"grader/exercises/{path.name}"] = path.read_bytes()
    for path in sorted((REPO_ROOT / "coursekit").glob("*.py")):
        files[f"coursekit/{path.name}"] = path.read_bytes()
    return files


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


class Workers:
    """Starts one judge's workers. ``timeout_s``: the least time limit of a worker; ``hide``: the
    paths no worker may see; ``devices``: the GPUs GPU workers lease."""

    def __init__(self, timeout_s: float, hide: tuple[Path, ...], devices: DevicePool):
        self.timeout_s, self.hide, self.devices = timeout_s, hide, devices
        self.runtime = runtime_files()
        self.canaries: dict[bool, Canary] = {}
        self._canary_lock = threading.Lock()
        self._reference_s: dict[tuple[str, bool], float] = {}
        # One slot (and so one worker uid) per worker that can run at once; a worker waits for one.
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(64):
            self._slots.put(slot)

    def reference_took(self, took: dict[tuple[str, bool], float]) -> None:
        """How long the reference took for each ``(exercise, gpu)`` (the longest seen): the
        workers' time limits grow with it."""
        for group, seconds in took.items():
            self._reference_s[group] = max(self._reference_s.get(group, 0.0), seconds)

    def run(
        self, files: dict[str, bytes], limits: sandbox.Limits, requests: list[wire.Request], gpu: bool
    ) -> sandbox.Run:
        """One worker in a fresh box holding ``files``, in a free slot (a GPU worker: on a leased
        device), answering ``requests``."""
        box = sandbox.make_box(self.runtime, files)
        directory = str(box / "submission")
        frames = [replace(r, submission_dir=directory).payload() for r in requests]
        slot = self._slots.get()
        try:
            return (
                self.devices.run(box, limits, frames, hide=self.hide, slot=slot)
                if gpu
                else sandbox.run(box, limits, frames, gpu=False, hide=self.hide, slot=slot)
            )
        finally:
            self._slots.put(slot)
            sandbox.remove_box(box)

    def canary(self, gpu: bool) -> Canary:
        """Run a bare worker once: it proves a worker can start here (else ``EnvironmentProblem``)
        and measures what ``import torch`` maps (the CPU workers' address-space limit), how long a
        worker takes to start (the time limits) and whether the keyring filter is on."""
        with self._canary_lock:
            if gpu in self.canaries:
                return self.canaries[gpu]
            limits = sandbox.Limits(timeout_s=max(120.0, self.timeout_s), memory_bytes=None)
            run = self.run({}, limits, [wire.Request(canary=True, dynamo=gpu)], gpu)
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
                    f"nothing was graded. Its output:\n{tail}"
                )
            gpu_canary_problem(gpu, facts)
            self.canaries[gpu] = Canary(run.wall_s, facts)
            return self.canaries[gpu]

    def limits(self, exercise: str, gpu: bool) -> sandbox.Limits:
        canary = self.canary(gpu)
        reference_s = self._reference_s.get((exercise, gpu), 0.0)
        timeout = max(self.timeout_s, 3 * canary.wall_s + 20 * reference_s)
        memory = None
        if not gpu:  # what importing torch maps here, and 3 GiB for the submission
            memory = max(4 << 30, int(canary.facts.get("vm_peak_bytes", 0)) + (3 << 30))
        return sandbox.Limits(timeout_s=timeout, memory_bytes=memory)

    def run_exercise(
        self,
        submission: Submission,
        exercise: str,
        gpu: bool,
        requests: list[wire.Request],
        tried_s: float = 0.0,
        budget: Budget = Budget(),
    ) -> sandbox.Run:
        """One exercise's worker. ``tried_s``: this exercise already timed out once (in a shared
        worker) after that many seconds; this is then its second try, with twice the time. Every
        try is cut to what is left of ``budget``; a try with nothing left is not started."""
        files = submission_files(submission)
        limits = self.limits(exercise, gpu)
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
            run = self.run(files, limits, requests, gpu)
            if attempt:
                run.first_timeout_s = wanted_s / 2
            if not run.timed_out or attempt:
                return run
            # Load, not a wrong answer, until shown otherwise: once more, with twice the time.
            wanted_s *= 2
            limits = sandbox.Limits(timeout_s=wanted_s, memory_bytes=limits.memory_bytes)
        raise AssertionError("unreachable")

    def run_shared(
        self,
        submission: Submission,
        requests: list[wire.Request],
        each: list[sandbox.Limits],
        budget: Budget = Budget(),
    ) -> sandbox.Run | None:
        """Several exercises' CPU requests in one worker (``worker.py``'s shared mode: one
        ``import torch``, then a forked child per exercise), ``each`` exercise's limits summed;
        None when the budget has nothing left (each exercise's own worker then says so)."""
        strategy = isolation.current()
        requests = [
            replace(
                requests[0],
                shared=True,
                cap=wire.MAX_FRAME_BYTES,
                shared_places=strategy.shared_places(),
                isolated=isolation.OWN_USER in strategy.gives,
            ),
            *requests[1:],
        ]
        total = budget.cap(
            sandbox.Limits(
                timeout_s=sum(lim.timeout_s for lim in each) + 30,
                memory_bytes=each[0].memory_bytes,
                result_bytes=2 * wire.MAX_FRAME_BYTES * len(requests),
            )
        )
        if total is None:
            return None
        return self.run(submission_files(submission), total, requests, False)


def submission_files(submission: Submission) -> dict[str, bytes]:
    """The box's ``submission/`` package: the submission's module files."""
    files = {"submission/__init__.py": b""}
    files.update({f"submission/{name}.py": data for name, data in submission.files.items()})
    return files


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
            "print(torch.cuda.is_available())'`"
        )
