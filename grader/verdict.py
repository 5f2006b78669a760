"""From a worker's answers to points: each check compared with the reference's answers, the
reasons of the checks that were lost, and the results of an exercise and of a submission.

A hidden check never shows anything a worker produced: its reason is its rule."""

from __future__ import annotations

from dataclasses import dataclass, field

from coursekit.course import MODULE_OF
from grader import sandbox
from grader.runtime import wire
from grader.checks import Answer, Check, same
from grader.plan import Phase
from grader.reference import answer_from
from grader.text import safe


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


class Verdicts:
    """Judges checks worth ``points`` (``{check id: points}``) against the reference's
    ``answers`` (``{(exercise, probe key): Answer or None}``)."""

    def __init__(self, points: dict[str, float]):
        self.points = points

    def lost(self, check: Check, why: str) -> CheckResult:
        reason = f"rule: {check.rule}" if check.hidden else f"{why}\n  rule: {check.rule}"
        return CheckResult(check, self.points[check.id], "failed", reason)

    def pending(self, check: Check, why: str) -> CheckResult:
        return CheckResult(check, self.points[check.id], "pending", why)

    def apply(
        self, run: sandbox.Run, exercise: str, phases: list[Phase], answers: dict, result: ExerciseResult
    ) -> None:
        """Each phase's answer frame of ``run`` judged into ``result``; a phase without one loses
        its checks with the reason (the first phase's reason is the exercise's problem)."""
        for number, phase in enumerate(phases):
            problem, got = read_answers(run, number, phase.count)
            if problem:
                if number == 0:
                    result.problem = problem
                result.checks += [self.lost(c, problem) for c in phase.checks]
                continue
            for check in phase.checks:
                result.checks.append(
                    self.judge(check, exercise, [got[phase.index[p.key()]] for p in check.probes], answers)
                )

    def judge(self, check: Check, exercise: str, got_answers: list[Answer], answers: dict) -> CheckResult:
        compare = check.compare or same()
        needs_reference = getattr(compare, "needs_reference", False)
        for probe, got in zip(check.probes, got_answers):
            expected = None
            if needs_reference and probe.needs_reference:
                expected = answers.get((exercise, probe.key()))
                if expected is None:  # a release made without CUDA has no GPU answers recorded
                    return self.pending(check, "no recorded reference answer for this check")
            try:
                problem = compare(probe, got, expected)
            except (LookupError, TypeError, ValueError, AttributeError, RecursionError) as exc:
                problem = f"{probe.label}: malformed answer ({type(exc).__name__}: {exc})"
            if problem:
                return self.lost(check, safe(problem, 1500, lines=True))
        return CheckResult(check, self.points[check.id], "passed")

    def shared(
        self,
        run: sandbox.Run,
        plans: dict[str, tuple[int, list[Phase]]],
        answers: dict,
        limits: dict[str, sandbox.Limits],
    ) -> dict[str, ExerciseResult | float]:
        """The shared CPU worker's answers, split by exercise (``plans``: where each exercise's
        frames start, and its phases): each exercise's result, or, where the worker could not
        answer for it, the seconds its child was given when it timed out (0.0 otherwise): that
        exercise is then graded in a worker of its own."""
        out: dict[str, ExerciseResult | float] = {}
        for exercise, (start, phases) in plans.items():
            mine = run.answers[start : start + len(phases)]
            fallback = None
            if len(mine) < len(phases):
                fallback = "unanswered"
            for raw in mine:
                try:
                    data = wire.loads(raw)
                except ValueError:
                    fallback = fallback or "malformed"
                    continue
                try:
                    fallback = fallback or wire.Answers.from_wire(data).fallback
                except ValueError:
                    pass  # not an answer frame at all: read_answers says so
            if fallback is not None:
                out[exercise] = limits[exercise].timeout_s if fallback == "timeout" else 0.0
                continue
            result = ExerciseResult(exercise, MODULE_OF[exercise])
            self.apply(sandbox.Run(answers=list(mine), returncode=0), exercise, phases, answers, result)
            out[exercise] = result
        return out


def notes(submission, results: list[ExerciseResult], secret, gpu_mode: str) -> list[str]:
    """The report's notes for a student: what was wrong with the submission as handed in, the mode
    (practice, or official with the grading secret's id) and the points left to the GPU pass."""
    found = [safe(p, 500) for p in submission.problems]
    if secret is None:
        found.append(
            "PRACTICE MODE: no grading secret, so the checks use the release's fixed "
            "inputs; a score here is for self-checking, not an official grade "
            f"(official grading: --secret-file or {'$'}LAUNCH_TAX_SECRET_FILE)"
        )
    else:
        found.append(f"official grading: inputs drawn from grading secret {secret.id}")
    pending = sum(r.pending for r in results)
    if pending:
        why = "--gpu off" if gpu_mode == "off" else "no CUDA here"
        found.append(
            f"{pending:g} points pending: GPU checks not run ({why}); they are graded "
            "in the GPU pass (a machine with CUDA, --gpu on)"
        )
    return found


#: The protection that is off where nvidia-smi cannot show a process's GPU memory (the report's
#: fingerprint lists it with the sandbox protections that were off).
GPU_MEMORY_OFF = "GPU memory cap per worker and leftover check (GPU memory per process not visible here)"


def staff_notes(protections: dict[str, bool], gpu_memory=None) -> list[str]:
    """What the one who runs the grader should know and a student's results must not show (they
    go to the terminal, ``extra_data`` and the class summary): the protections that were off,
    and, ``gpu_memory`` (``nvidia_smi.Visibility``, None: no GPU worker) not visible, that the
    GPU workers' memory cap and the leftover check after them were off, and why."""
    notes = []
    off = [name for name, on in protections.items() if not on]
    if off:
        notes.append("sandbox protections off on this machine (not root, or no namespaces): " + ", ".join(off))
    if gpu_memory is not None and not gpu_memory.visible:
        notes.append(
            f"GPU memory per process: not visible here (container?): {gpu_memory.why}; so the per-worker GPU "
            "memory cap and the leftover check after each GPU worker were off in this grading "
            "(python -m grader doctor says the same)"
        )
    return notes


def observations(run: sandbox.Run) -> list[str]:
    """What the sandbox saw a worker leave behind: its uid's processes, files and IPC objects
    (``isolation.release_uid``), and what the shared worker removed between two exercises."""
    seen = list(run.leftovers)
    for line in run.output.splitlines():
        if line.startswith("launch-tax worker: before "):
            seen.append(line.removeprefix("launch-tax worker: ").strip())
    return seen[:20]


def read_answers(run: sandbox.Run, number: int, count: int) -> tuple[str | None, list[Answer]]:
    """Answer frame ``number`` of a run, or why there is none (for the reasons: the run's
    failure and its last output line, which a hidden check never shows)."""
    if number >= len(run.answers):
        failure = run.failure()
        if failure:
            return f"worker {failure}", []
        tail = run.output.strip().splitlines()[-1:] if run.output.strip() else []
        how = f"exited with code {run.returncode}" if run.returncode else "exited"
        return (f"worker {how} before sending a result" + (f" (last output: {safe(tail[0], 200)})" if tail else "")), []
    try:
        answers = wire.Answers.from_wire(wire.loads(run.answers[number]))
        if answers.import_error is not None:
            error = answer_from({"error": answers.import_error}).error
            return f"importing the module raised {error['types'][0]}: {error['message'][:300]}", []
        raw = answers.probes
        if not isinstance(raw, list) or len(raw) != count:
            raise ValueError("wrong number of answers")
        return None, [answer_from(item if isinstance(item, dict) else {}) for item in raw]
    except Exception as exc:  # noqa: BLE001 - whatever an untrusted worker sent, the judge goes on
        return f"worker sent a malformed result ({type(exc).__name__})", []
