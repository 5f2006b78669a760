"""The judge: the trusted side of grading.

It holds the rubric, the checks (their inputs are fixed draws) and the reference, and decides
every point. For each exercise it starts a fresh worker in a sandbox (``grader/sandbox.py``),
hands it the submission's module files and the probes, reads back plain data
(``grader/wire.py``), and compares it with the reference's answers to the same probes, computed
here. If the worker times out, crashes, exits, floods its output or breaks a limit, that
exercise's checks are lost with the reason, and nothing else is affected.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.impl import EXERCISES, REPO_ROOT
from grader import sandbox, wire
from grader.checks import Answer, Check, Probe, public_checks, same
from grader.submission import Submission

GRADER_DIR = Path(__file__).resolve().parent
RUBRIC = GRADER_DIR / "rubric.toml"
RECORDED = GRADER_DIR / "expected.json"  # the reference's public answers, in a release
MODULES = {f"ex{n}": name for n, name in EXERCISES}


@dataclass
class CheckResult:
    check: Check
    points: float
    status: str  # "passed", "failed" or "not run"
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

    @property
    def score(self) -> float:
        return sum(c.earned for c in self.checks)

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks if c.status != "not run")


@dataclass
class Report:
    submission: str
    exercises: list[ExerciseResult]
    notes: list[str]
    wall_s: float = 0.0

    @property
    def score(self) -> float:
        return sum(e.score for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e.max_score for e in self.exercises)


def load_rubric(path: Path = RUBRIC) -> dict[str, dict[str, float]]:
    """``{check id: points}`` and the visibility of each, from the rubric file."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    points = {}
    for exercise, table in data.items():
        for visibility in ("public", "hidden"):
            for name, value in table.get(visibility, {}).items():
                points[f"{exercise}.{name}"] = float(value)
    return points


def all_checks() -> list[Check]:
    checks = public_checks()
    try:
        from grader.hidden import hidden_checks
    except ImportError:  # a released grader has no hidden checks
        return checks
    return checks + hidden_checks()


def runtime_files() -> dict[str, bytes]:
    """What a worker runs with: its own code and the course's support package, nothing else."""
    files = {name: (GRADER_DIR / name).read_bytes() for name in ("worker.py", "wire.py", "probes.py")}
    for path in sorted((REPO_ROOT / "coursekit").glob("*.py")):
        files[f"coursekit/{path.name}"] = path.read_bytes()
    return files


class Reference:
    """The reference's answers to probes: computed here from solutions/, or read from the
    recording a release ships for its public checks."""

    def __init__(self):
        self._answers: dict[str, Answer] = {}
        self._lock = threading.Lock()
        self._recorded = None
        if not (REPO_ROOT / "solutions").is_dir() and RECORDED.exists():
            self._recorded = json.loads(RECORDED.read_text(encoding="utf-8"))

    def answer(self, exercise: str, probe: Probe) -> Answer | None:
        key = f"{exercise} {probe.key()}"
        with self._lock:
            if key not in self._answers:
                self._answers[key] = self._compute(exercise, probe, key)
            return self._answers[key]

    def _compute(self, exercise: str, probe: Probe, key: str) -> Answer | None:
        if self._recorded is not None:
            data = self._recorded.get(key)
            return None if data is None else _answer(data)
        from coursekit.impl import Implementation
        from grader import probes

        module = Implementation("solutions").module(MODULES[exercise])
        try:
            value = probes.PROBES[probe.probe](module, **wire.decode(wire.encode(probe.args)))
            return _answer({"ok": True, "value": wire.encode(value)})
        except Exception as exc:  # noqa: BLE001 - the reference's expected errors
            return Answer(False, error={"types": [c.__name__ for c in type(exc).__mro__],
                                        "message": str(exc)})


def _answer(data: dict) -> Answer:
    if data.get("ok") is True:
        return Answer(True, value=wire.decode(data.get("value")))
    error = data.get("error") if isinstance(data.get("error"), dict) else {}
    types = error.get("types")
    types = [str(t) for t in types] if isinstance(types, list) else ["<unknown>"]
    return Answer(False, error={"types": types, "message": str(error.get("message", ""))[:2000]})


class Judge:
    def __init__(self, gpu: str = "auto", timeout_s: float = 60.0, jobs: int = 2,
                 hide: tuple[Path, ...] = (), exercises: tuple[str, ...] | None = None):
        import torch

        if gpu not in ("auto", "on", "off"):
            raise ValueError(f"gpu: expected auto, on or off, got {gpu!r}")
        has_cuda = torch.cuda.is_available()
        if gpu == "on" and not has_cuda:
            raise RuntimeError("--gpu on: no CUDA device is available here")
        self.gpu = has_cuda if gpu == "auto" else gpu == "on"
        self.gpu_mode = gpu
        self.timeout_s, self.jobs = timeout_s, max(1, jobs)
        self.hide = (REPO_ROOT, *hide)
        self.points = load_rubric()
        self.checks = [c for c in all_checks() if c.id in self.points]
        missing = set(self.points) - {c.id for c in all_checks()}
        if missing:
            raise RuntimeError(f"rubric lists checks that do not exist: {sorted(missing)}")
        self.exercises = exercises or tuple(sorted({c.exercise for c in self.checks}))
        self.reference = Reference()
        self.runtime = runtime_files()
        # One slot (and so one worker uid) per worker that can run at once; a worker waits for one.
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(64):
            self._slots.put(slot)

    def grade(self, submission: Submission) -> Report:
        start = time.monotonic()
        with ThreadPoolExecutor(self.jobs) as pool:
            results = list(pool.map(lambda ex: self.grade_exercise(submission, ex), self.exercises))
        notes = list(submission.problems)
        if not self.gpu:
            off = sum(c.points for r in results for c in r.checks if c.status == "not run")
            why = "--gpu off" if self.gpu_mode == "off" else "no CUDA here"
            notes.append(f"GPU checks not run ({why}): {off:g} points left out of the maximum; "
                         "grade on a CUDA machine for them")
        off = [name for name, on in sandbox.protections().items() if not on]
        if off:
            notes.append("sandbox protections off on this machine (not root, or no namespaces): "
                         + ", ".join(off))
        return Report(submission.label, results, notes, time.monotonic() - start)

    def grade_exercise(self, submission: Submission, exercise: str) -> ExerciseResult:
        module = MODULES[exercise]
        checks = [c for c in self.checks if c.exercise == exercise]
        result = ExerciseResult(exercise, module)
        runnable = [c for c in checks if self.gpu or not c.gpu]
        for c in checks:
            if c not in runnable:
                result.checks.append(CheckResult(c, self.points[c.id], "not run", "needs CUDA"))
        if module not in submission.files:
            why = submission.missing_reason(module)
            result.problem = why
            result.checks += [CheckResult(c, self.points[c.id], "failed", why) for c in runnable]
            return result
        for gpu in (False, True):
            group = [c for c in runnable if c.gpu == gpu]
            if group:
                self._run_group(submission, exercise, group, gpu, result)
        order = {c.id: i for i, c in enumerate(checks)}
        result.checks.sort(key=lambda r: order[r.check.id])
        return result

    def _run_group(self, submission: Submission, exercise: str, checks: list[Check], gpu: bool,
                   result: ExerciseResult) -> None:
        probes, index = [], {}
        for check in checks:
            for probe in check.probes:
                if probe.key() not in index:
                    index[probe.key()] = len(probes)
                    probes.append(probe)
        request = {"package": "submission", "module": MODULES[exercise], "submission_dir": "",
                   "probes": [{"probe": p.probe, "args": wire.encode(p.args)} for p in probes]}
        files = {"submission/__init__.py": b""}
        files.update({f"submission/{name}.py": data for name, data in submission.files.items()})
        box = sandbox.make_box(self.runtime, files)
        request["submission_dir"] = str(box / "submission")
        (box / "request.json").write_text(wire.dumps(request), encoding="utf-8")
        limits = sandbox.Limits(timeout_s=self.timeout_s, memory_bytes=None if gpu else 4 << 30)
        slot = self._take_slot()
        try:
            run = sandbox.run(box, limits, gpu=gpu, hide=self.hide, slot=slot)
        finally:
            self._give_slot(slot)
            sandbox.remove_box(box)
        problem, answers = _read_answers(run, len(probes))
        if problem:
            result.problem = problem
            result.checks += [CheckResult(c, self.points[c.id], "failed", problem) for c in checks]
            return
        for check in checks:
            result.checks.append(self._judge(check, exercise, [answers[index[p.key()]] for p in check.probes]))

    def _judge(self, check: Check, exercise: str, answers: list[Answer]) -> CheckResult:
        compare = check.compare or same()
        needs_reference = getattr(compare, "needs_reference", False)
        for probe, got in zip(check.probes, answers):
            expected = None
            if needs_reference and not probe.raises:
                expected = self.reference.answer(exercise, probe)
                if expected is None:  # a release made without CUDA has no GPU answers recorded
                    return CheckResult(check, self.points[check.id], "not run",
                                       "no recorded reference answer for this check")
            try:
                problem = compare(probe, got, expected)
            except (LookupError, TypeError, ValueError, AttributeError, RecursionError) as exc:
                problem = f"{probe.label}: malformed answer ({type(exc).__name__}: {exc})"
            if problem:
                reason = f"rule: {check.rule}" if check.hidden else f"{problem}\n  rule: {check.rule}"
                return CheckResult(check, self.points[check.id], "failed", reason)
        return CheckResult(check, self.points[check.id], "passed")

    def _take_slot(self) -> int:
        return self._slots.get()

    def _give_slot(self, slot: int) -> None:
        self._slots.put(slot)


def _read_answers(run: sandbox.Run, count: int) -> tuple[str | None, list[Answer]]:
    failure = run.failure()
    tail = run.output.strip().splitlines()[-1:] if run.output.strip() else []
    if failure:
        return f"worker {failure}", []
    if not run.result:
        how = f"exited with code {run.returncode}" if run.returncode else "exited"
        return f"worker {how} before sending a result" + (f" (last output: {tail[0][:200]})" if tail else ""), []
    try:
        data = json.loads(run.result)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        if "import_error" in data:
            error = _answer({"error": data["import_error"]}).error
            return f"importing the module raised {error['types'][0]}: {error['message'][:300]}", []
        raw = data["probes"]
        if not isinstance(raw, list) or len(raw) != count:
            raise ValueError("wrong number of answers")
        return None, [_answer(item if isinstance(item, dict) else {}) for item in raw]
    except Exception as exc:  # noqa: BLE001 - whatever an untrusted worker sent, the judge goes on
        return f"worker sent a malformed result ({type(exc).__name__})", []
