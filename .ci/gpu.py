"""The GPU checks, for a machine with CUDA, as a plan that knows what each step costs.

    python3 .ci/gpu.py session OUT    the device session: the budgeted plan, one tarball in OUT
    python3 .ci/gpu.py all OUT        every stage in the session's order, with no budget
    python3 .ci/gpu.py STAGE OUT      one stage alone (it starts with a one-line CUDA check)
    python3 .ci/gpu.py plan           the plan: stages, steps, expected seconds, the budget
    python3 .ci/gpu.py readme         the README's table of the stages, as generated from STAGES

(``bash .ci/gpu ...`` and ``bash .ci/device-session`` run this file.) Nothing is installed: it
runs from the repository root with the Python that runs it (torch, pytest, hypothesis; xdist
where the image has it). Standard library only, so that it runs wherever the course does.

GPU time comes in slots of 15 minutes of device time, the machine's start-up included, and at most
10 minutes a command: a session that overruns loses what was in flight. So every step states what
it is expected to take (``expected_s``, from the last measured run where there was one, marked
``estimate`` where not) and the session is planned against ``BUDGET_S``:

* ``SESSION`` is ordered by what a run teaches us, most first: preflight, the public GPU tests,
  the official grade of the reference, the 7B benchmark at batch 1 with its compiled rows, a
  class in two passes and merged, the GPU kill matrix, then the rest. The steps up to
  ``PROMISED`` must fit the budget (``tests/test_gpu_plan.py`` sums them); the ones after run in
  order while the time left covers what they need, and are listed "not started" otherwise.
* Each step runs under its own deadline (``deadline_s``, and never past the budget). At the
  deadline its process group gets SIGINT first, so that pytest writes its junit XML and the
  benchmark its JSON; SIGTERM after ``GRACE_S``, SIGKILL after that.
* After every step the session's folder is packed again into ``OUT/gpu-run.tgz`` (written beside
  and renamed, so a cut-off run still leaves the last whole tarball) with ``summary.txt``, one
  screen: each step's status, seconds against its estimate, and its headline.

Replace an estimate with the measured seconds after each GPU run (the summary prints both).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
#: Device time for one session's command, in seconds: the device tool allows 600 s a command and
#: 900 s a session, the machine's start-up (minutes) included. Run it with timeout_s=600.
BUDGET_S = 570
#: Kept back from the budget for packing the last tarball.
RESERVE_S = 10
#: Between SIGINT and SIGTERM, and between SIGTERM and SIGKILL, at a step's deadline.
GRACE_S = 20

H200 = "H200 2026-12-04"  # the course's first GPU run (torch 2.11, 16 cores): its logs give the figures

CUDA_CHECK = "; ".join(
    (
        "import torch",
        "assert torch.cuda.is_available(), "
        "f'no CUDA device (torch {torch.__version__}, CUDA build {torch.version.cuda})'",
        "x = torch.ones(1024, device='cuda').add_(1)",
        "torch.cuda.synchronize()",
        "free, total = torch.cuda.mem_get_info()",
        "print(f'torch {torch.__version__} (CUDA {torch.version.cuda}) on {torch.cuda.get_device_name()}: '"
        " f'{free / 2**30:.1f} of {total / 2**30:.1f} GiB free, a kernel ran')",
    )
)


@dataclass(frozen=True)
class Step:
    """One command (``argv``, ``{py}`` standing for this Python and ``{dir}`` for the stage's
    folder) or one check in this process (``check``: it reads what the earlier steps wrote and
    raises AssertionError when they are wrong; what it returns is its headline).

    ``expected_s``: what it takes, and ``source``: where that figure comes from ("measured: ..."
    or "estimate: ..."). ``deadline_s``: when it is cut (SIGINT first). ``needs_s``: the least
    time left that it is worth starting with (a step that keeps what it did when cut, such as a
    pytest run with its junit or the benchmark with its JSON, needs less than it expects)."""

    name: str
    expected_s: float
    source: str
    argv: tuple[str, ...] = ()
    check: Callable[[Path], str] | None = None
    deadline_s: float | None = None
    needs_s: float | None = None
    headline: str = ""  # a phrase the headline line contains ("passed", "score"); else the last line

    def __post_init__(self):
        if bool(self.argv) == (self.check is not None):
            raise ValueError(f"step {self.name}: give either argv or check")
        if not (self.source.startswith("measured: ") or self.source.startswith("estimate: ")):
            raise ValueError(f"step {self.name}: source must say 'measured: ...' or 'estimate: ...'")

    @property
    def deadline(self) -> float:
        return self.deadline_s if self.deadline_s is not None else max(60.0, 2 * self.expected_s)

    @property
    def needs(self) -> float:
        return self.needs_s if self.needs_s is not None else self.expected_s


@dataclass(frozen=True)
class Stage:
    name: str
    what: str
    steps: Callable[[Path], list[Step]]  # given the stage's folder
    produces: str = ""  # what it leaves in its folder, for the README

    def expected_s(self) -> float:
        return sum(s.expected_s for s in self.steps(Path("OUT")))


# ------------------------------------------------------------------------------------ stages


def cuda_step() -> Step:
    return Step("cuda", 8, "estimate: torch's import and one kernel", ("{py}", "-c", CUDA_CHECK), deadline_s=60)


def _preflight(d: Path) -> list[Step]:
    return [
        Step(
            "doctor",
            35,
            f"estimate: 7 s on the {H200}, before its Triton launch (a cold compile) and memory probe",
            ("{py}", "-m", "grader", "doctor", "--json", "{dir}/doctor.json"),
            deadline_s=90,
        ),
        cuda_step(),
    ]


def _pytest(name: str, expected_s: float, source: str, *args: str, deadline_s: float, needs_s: float) -> Step:
    """A pytest run that writes its junit XML to the stage's folder (also when cut: SIGINT)."""
    argv = ("{py}", "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "--junitxml={dir}/junit.xml")
    return Step(name, expected_s, source, argv, deadline_s=deadline_s, needs_s=needs_s, headline="passed")


def _tests(d: Path) -> list[Step]:
    return [
        _pytest(
            "public-gpu-tests",
            70,
            f"estimate: 35-47 s on the {H200} at 6a2804b, before exercise 8 compiled on CUDA",
            *("exercises", "-m", "gpu", "--impl", "solutions", "-rs"),
            deadline_s=150,
            needs_s=40,
        )
    ]


def _secret(d: Path) -> str:
    """The stage's grading secret, made outside the repository (the grader refuses one inside it,
    and the output folder may be there)."""
    return str(Path(tempfile.gettempdir()) / f"launch-tax-secret-{d.name}" / "secret")


def _new_secret(d: Path) -> Step:
    return Step(
        "secret",
        2,
        "estimate: a second",
        (
            "{py}",
            "-c",
            "import pathlib, subprocess, sys; p = pathlib.Path(sys.argv[1]); "
            "p.parent.mkdir(parents=True, exist_ok=True); p.unlink(missing_ok=True); "
            "sys.exit(subprocess.call([sys.executable, '-m', 'grader', 'secret', 'new', str(p)]))",
            _secret(d),
        ),
        deadline_s=30,
    )


def _scores(d: Path, wanted: dict[str, int]) -> str:
    got = {name: json.loads((d / f"{name}.json").read_text())["score"] for name in wanted}
    assert got == wanted, f"expected scores {wanted}, got {got}"
    return "scores " + ", ".join(f"{k} {v}" for k, v in got.items())


def _grade_official(d: Path) -> list[Step]:
    return [
        _new_secret(d),
        Step(
            "official",
            120,
            f"measured: 115 s on the {H200} (the reference, official, with its hidden checks)",
            (
                "{py}",
                "-m",
                "grader",
                "grade",
                "solutions",
                "--gpu",
                "on",
                "--secret-file",
                _secret(d),
                "--json",
                "{dir}/official.json",
            ),
            deadline_s=220,
            headline="score",
        ),
        Step("official-is-100", 1, "estimate: reads one file", check=lambda d: _scores(d, {"official": 100})),
    ]


def _grade_practice(d: Path) -> list[Step]:
    return [
        Step(
            "practice",
            55,
            f"measured: 53-58 s on the {H200}",
            ("{py}", "-m", "grader", "grade", "solutions", "--gpu", "on", "--json", "{dir}/reference.json"),
            deadline_s=150,
            headline="score",
        ),
        Step(
            "stubs",
            40,
            f"measured: 35-40 s on the {H200}",
            ("{py}", "-m", "grader", "grade", "exercises", "--gpu", "on", "--json", "{dir}/stubs.json"),
            deadline_s=120,
            headline="score",
        ),
        Step(
            "reference-100-stubs-0",
            1,
            "estimate: reads two files",
            check=lambda d: _scores(d, {"reference": 100, "stubs": 0}),
        ),
    ]


def _bench(batches: str, expected: float, source: str) -> Callable[[Path], list[Step]]:
    def steps(d: Path) -> list[Step]:
        return [
            Step(
                "decode-engine",
                expected,
                source,
                (
                    "{py}",
                    "benchmarks/decode_engine.py",
                    "--impl",
                    "solutions",
                    "--configs",
                    "qwen7b",
                    "--batches",
                    batches,
                    "--out",
                    "{dir}",
                    *os.environ.get("BENCH_ARGS", "").split(),
                ),
                deadline_s=expected + 90,
                needs_s=60,  # its JSON is written after every row: a cut keeps what it measured
                headline="targets",
            ),
            Step("measured-or-skipped", 1, "estimate: reads one file", check=_bench_said),
        ]

    return steps


def _bench_said(d: Path) -> str:
    """Whether the 7B shapes ran (a skip for memory is not a failure), and the targets' verdicts."""
    config = json.loads((d / "decode-engine.json").read_text())["configs"]["qwen7b"]
    if "skipped" in config:
        return f"qwen7b: {config['skipped']}"
    verdicts = [
        f"b{t['batch']} {t['target'].split(' vs ')[-1]}: "
        + ("unmeasured" if t["met"] is None else f"{t['value']:.3g} {'met' if t['met'] else 'NOT MET'}")
        for t in config.get("targets", [])
    ]
    return "qwen7b measured; " + "; ".join(verdicts)


def _class(d: Path) -> list[Step]:
    def copy_class(d: Path) -> str:
        """A class of two graded as a course does: the reference and the untouched stubs (the
        alternatives keep their points in the mutants stage)."""
        students = d / "submissions"
        shutil.rmtree(students, ignore_errors=True)
        for name, folder in (("reference", ROOT / "solutions"), ("stubs", ROOT / "exercises")):
            (students / name).mkdir(parents=True)
            for f in folder.glob("[a-z]*.py"):
                shutil.copy(f, students / name / f.name)
        return "2 students: reference, stubs"

    def merged(d: Path) -> str:
        rows = {r["student"]: r for r in csv.DictReader(open(d / "final" / "gradebook.csv"))}
        got = {s: (r["status"], float(r["score"])) for s, r in rows.items()}
        assert {s: score for s, (_, score) in got.items()} == {"reference": 100, "stubs": 0}, got
        return f"merged: {got}"

    grade_all = (
        "{py}",
        "-m",
        "grader",
        "grade-all",
        "{dir}/submissions",
        "--secret-file",
        _secret(d),
        "--allow-unisolated",
    )
    return [
        Step("class-of-two", 1, "estimate: copies 18 files", check=copy_class),
        _new_secret(d),
        Step(
            "cpu-pass",
            20,
            f"measured: 21 s on the {H200} for a class of three",
            (*grade_all, "--out", "{dir}/cpu", "--gpu", "off"),
            deadline_s=90,
        ),
        Step(
            "gpu-pass",
            110,
            "estimate: the reference's GPU work once, then 55 s and 15 s of GPU checks",
            (*grade_all, "--out", "{dir}/gpu", "--only-gpu", "--gpu", "on"),
            deadline_s=200,
        ),
        Step(
            "merge",
            3,
            "estimate: reads two gradebooks",
            ("{py}", "-m", "grader", "merge", "{dir}/cpu", "{dir}/gpu", "--out", "{dir}/final"),
        ),
        Step("merged-100-0", 1, "estimate: reads one file", check=merged),
    ]


def _mutants(d: Path) -> list[Step]:
    parallel = ("-n", "4") if _has("xdist") else ()
    return [
        _pytest(
            "kill-matrix-gpu",
            110,
            f"measured: 93-117 s on the {H200} at -n 4 (39 cases then; the compiled engine's since)",
            *("tests", "-m", "gpu", *parallel, "-rs"),
            deadline_s=240,
            needs_s=60,
        )
    ]


def _toy_bench(d: Path) -> list[Step]:
    return [
        Step(
            "decode-engine-toy",
            60,
            f"estimate: 13-17 s on the {H200} without the compiled rows",
            (
                "{py}",
                "benchmarks/decode_engine.py",
                "--impl",
                "solutions",
                "--configs",
                "toy",
                "--out",
                "{dir}",
                *os.environ.get("BENCH_ARGS", "").split(),
            ),
            deadline_s=150,
            needs_s=30,
            headline="targets",
        ),
        Step(
            "lab-launch-tax",
            10,
            f"measured: 9 s on the {H200}",
            ("{py}", "-m", "coursekit.lab", "launch-tax", "--impl", "solutions", "--out", "{dir}/lab"),
        ),
        Step(
            "lab-prefill",
            20,
            "estimate: 200 kernels at growing sizes, 20 iterations",
            ("{py}", "-m", "coursekit.lab", "prefill", "--impl", "solutions", "--iters", "20", "--out", "{dir}/lab"),
        ),
    ]


def _suite(d: Path) -> list[Step]:
    parallel = ("-n", "auto") if _has("xdist") else ()
    return [
        _pytest(
            "cpu-suite",
            400,
            f"measured: more than 291 s on the {H200} at -n 10 (stopped at 39%)",
            *("tests", "-m", "not gpu", *parallel, "-rfEs"),
            deadline_s=590,
            needs_s=60,
        )
    ]


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


STAGES = {
    s.name: s
    for s in (
        Stage("preflight", "`python -m grader doctor` and a one-line torch/CUDA check", _preflight, "doctor.json"),
        Stage("tests", "the reference's GPU tests: `pytest exercises -m gpu --impl solutions`", _tests, "junit.xml"),
        Stage(
            "grade-official",
            "`grade solutions --gpu on --secret-file S`: the reference scores 100, officially",
            _grade_official,
            "official.json",
        ),
        Stage(
            "bench-7b-b1",
            "`benchmarks/decode_engine.py --configs qwen7b --batches 1` with its compiled rows: "
            "the compiled rows' targets (needs ~17.9 GB free)",
            _bench(
                "1",
                170,
                "estimate: 26 s on the H200 without compiling (both batches); "
                "the engine's and the peer's 28-layer compiles added",
            ),
            "decode-engine.json",
        ),
        Stage(
            "class",
            "`grade-all` of a class of two (reference, stubs), CPU pass, GPU pass, `merge`: 100, 0",
            _class,
            "cpu/, gpu/, final/gradebook.csv",
        ),
        Stage(
            "mutants",
            "`pytest tests -m gpu` (-n 4): stubs fail, alternatives keep every point, every GPU mutant loses points",
            _mutants,
            "junit.xml (`python -m tests.kill_matrix --gpu-record`)",
        ),
        Stage(
            "grade-practice",
            "`grade --gpu on` in practice mode: the reference 100, the stubs 0",
            _grade_practice,
            "reference.json, stubs.json",
        ),
        Stage(
            "toy-bench",
            "`benchmarks/decode_engine.py --configs toy`, and the lab (Part A, prefill)",
            _toy_bench,
            "decode-engine.json, lab/",
        ),
        Stage(
            "bench-7b-b8",
            "`benchmarks/decode_engine.py --configs qwen7b --batches 8`",
            _bench("8", 150, "estimate: as batch 1, one size"),
            "decode-engine.json",
        ),
        Stage("suite", "the CPU suite where CUDA is present: `pytest tests -m \"not gpu\"`", _suite, "junit.xml"),
    )
}
#: The device session, in order of what it teaches; the first PROMISED stages must fit BUDGET_S.
SESSION = (
    "preflight",
    "tests",
    "grade-official",
    "bench-7b-b1",
    "class",
    "mutants",
    "grade-practice",
    "toy-bench",
    "bench-7b-b8",
    "suite",
)
PROMISED = 5
#: Names that run several stages (what .ci/gpu called them before the plan was split).
GROUPS = {"grader": ("grade-official", "grade-practice"), "big-bench": ("bench-7b-b1", "bench-7b-b8")}


def promised_s(stages: dict = STAGES, session: tuple = SESSION, promised: int = PROMISED) -> float:
    """What the promised stages are expected to take, all together."""
    return sum(stages[name].expected_s() for name in session[:promised])


def budget_problem(
    stages: dict = STAGES, session: tuple = SESSION, promised: int = PROMISED, budget: float = BUDGET_S
) -> str | None:
    """Why the promised stages do not fit the budget (with what is kept to pack), or None."""
    total = promised_s(stages, session, promised)
    if total + RESERVE_S <= budget:
        return None
    each = ", ".join(f"{name} {stages[name].expected_s():.0f} s" for name in session[:promised])
    return (
        f"the promised stages expect {total:.0f} s ({each}), and {RESERVE_S} s are kept to pack: "
        f"over the budget of {budget:.0f} s by {total + RESERVE_S - budget:.0f} s; make a stage cheaper, "
        f"or move it after PROMISED"
    )


# --------------------------------------------------------------------------------- machinery


@dataclass
class Outcome:
    stage: str
    step: str
    status: str  # ok | failed | cut | not started | running (when the tarball was packed)
    expected_s: float
    wall_s: float = 0.0
    exit: int | None = None
    headline: str = ""
    command: str = ""

    def line(self) -> str:
        took = (
            f"{self.wall_s:5.0f} s of ~{self.expected_s:.0f}"
            if self.status != "not started"
            else " " * 6 + f"~{self.expected_s:.0f} s"
        )
        state = {"failed": f"FAILED ({self.exit})", "cut": "CUT"}.get(self.status, self.status)
        return f"{self.stage + '/' + self.step:<34} {state:<12} {took:<14} {self.headline[:110]}"


@dataclass
class Runner:
    out: Path  # where the stages' folders go
    budget_s: float | None = None  # None: no budget (a single stage, or `all`)
    tarball: Path | None = None
    start: float = field(default_factory=time.monotonic)
    outcomes: list[Outcome] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    cuda_ok: bool | None = None  # what the last one-line CUDA check said

    def left(self) -> float:
        if self.budget_s is None:
            return float("inf")
        return self.budget_s - RESERVE_S - (time.monotonic() - self.start)

    def stage(self, stage: Stage, *, alone: bool) -> bool:
        folder = self.out / stage.name
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"{stage.name}.log"
        steps = ([cuda_step()] if alone and stage.name != "preflight" else []) + stage.steps(folder)
        began, ok, done = time.monotonic(), True, []
        with open(log, "a", encoding="utf-8") as sink:
            _say(f"==== stage {stage.name} -> {folder}", sink)
            for step in steps:
                if done and done[-1].status != "ok":
                    # A stage's steps build on each other: after one that did not pass, the rest
                    # would only fail for its reason.
                    outcome = Outcome(stage.name, step.name, "not started", step.expected_s)
                    outcome.headline = f"{done[-1].step} did not pass"
                    self.outcomes.append(outcome)
                else:
                    outcome = self.step(stage.name, step, folder, sink)
                    if step.name == "cuda":
                        self.cuda_ok = outcome.status == "ok"
                done.append(outcome)
                ok = ok and outcome.status in ("ok", "not started")
                self.pack()
            wall = time.monotonic() - began
            _say(f"==== stage {stage.name:<14} {'ok' if ok else 'FAILED':<7} {wall:6.0f} s", sink)
        (folder / "stage.json").write_text(
            json.dumps(
                {
                    "stage": stage.name,
                    "ok": ok,
                    "wall_s": round(wall, 1),
                    "steps": [
                        {
                            "step": o.step,
                            "command": o.command,
                            "exit": o.exit,
                            "status": o.status,
                            "wall_s": round(o.wall_s, 1),
                            "expected_s": o.expected_s,
                            "headline": o.headline,
                        }
                        for o in done
                    ],
                },
                indent=1,
            )
        )
        self.pack()
        return ok

    def step(self, stage: str, step: Step, folder: Path, sink) -> Outcome:
        command = " ".join(a.replace("{py}", "python").replace("{dir}", str(folder)) for a in step.argv) or (
            f"(check) {step.name}"
        )
        outcome = Outcome(stage, step.name, "not started", step.expected_s, command=command[:400])
        self.outcomes.append(outcome)
        left = self.left()
        if left < step.needs:
            outcome.headline = f"needs ~{step.needs:.0f} s, {max(left, 0):.0f} s left"
            _say(f"== not started: {step.name} ({outcome.headline})", sink)
            return outcome
        began = time.monotonic()
        _say(f"\n== {command}", sink)
        outcome.status = "running"
        self.pack()  # killed during this step, the session still says which step was in flight
        if step.check is not None:
            try:
                outcome.headline = step.check(folder) or ""
                outcome.status, outcome.exit = "ok", 0
            except Exception as exc:  # noqa: BLE001 - a failed check is a line of the summary
                outcome.status, outcome.exit, outcome.headline = "failed", 1, f"{type(exc).__name__}: {exc}"
            _say(outcome.headline, sink)
        else:
            argv = [sys.executable if a == "{py}" else a.replace("{dir}", str(folder)) for a in step.argv]
            deadline = min(step.deadline, left)
            code, cut, tail = run_with_deadline(argv, deadline, sink, cwd=ROOT)
            outcome.exit = code
            outcome.status = "cut" if cut else ("ok" if code == 0 else "failed")
            outcome.headline = _headline(tail, step.headline)
            if cut:
                outcome.headline = f"cut at {deadline:.0f} s; " + outcome.headline
                _say(f"== cut at its deadline ({deadline:.0f} s): {step.name}", sink)
        outcome.wall_s = time.monotonic() - began
        if outcome.status != "ok":
            _say(f"== step {outcome.status} (exit {outcome.exit}): {step.name}", sink)
        return outcome

    def run(self, stages: list[Stage], *, alone: bool) -> int:
        """The stages in order (stopping after a failed CUDA check); 0 when every step that
        started passed."""
        ok = True
        for stage in stages:
            ok = self.stage(stage, alone=alone) and ok
            if self.cuda_ok is False:
                print("the CUDA check failed: the other stages need a working CUDA device", file=sys.stderr)
                break
        self.pack()
        print("\n" + self.summary(), end="")
        return 0 if ok else 1

    def summary(self) -> str:
        elapsed = time.monotonic() - self.start
        budget = f" of a {self.budget_s:.0f} s budget" if self.budget_s is not None else ""
        lines = [*self.header, f"wall {elapsed:.0f} s{budget}", ""]
        lines += [o.line() for o in self.outcomes]
        bad = [o for o in self.outcomes if o.status in ("failed", "cut")]
        lines += ["", f"{len(bad)} step(s) failed or cut" if bad else "every step that started passed"]
        return "\n".join(lines) + "\n"

    def pack(self) -> None:
        """summary.txt in the folder and beside the tarball; the tarball written anew, then renamed."""
        text = self.summary()
        (self.out / "summary.txt").write_text(text)
        if self.tarball is None:
            return
        (self.tarball.parent / "summary.txt").write_text(text)
        partial = self.tarball.with_suffix(".partial")
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(self.out, arcname="gpu")
        os.replace(partial, self.tarball)


def run_with_deadline(argv: list[str], deadline_s: float, sink, *, cwd: Path) -> tuple[int, bool, list[str]]:
    """Run ``argv`` in a process group of its own, its output to the terminal and ``sink``. At
    ``deadline_s``: SIGINT to the group (pytest writes its junit XML, the benchmark its JSON),
    SIGTERM after ``GRACE_S``, SIGKILL after as long again. Returns (exit status, cut, the
    output's last lines)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # logs in the order things happened
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    tail: list[str] = []

    def pump() -> None:
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace")
            sys.stdout.write(line)
            sink.write(line)
            tail.append(line.rstrip("\n"))
            del tail[:-40]
        sys.stdout.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    cut = False
    try:
        proc.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        cut = True
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=GRACE_S)
                break
            except subprocess.TimeoutExpired:
                continue
        proc.wait()
    reader.join(timeout=5)
    sink.flush()
    return proc.returncode, cut, tail


def _headline(tail: list[str], phrase: str) -> str:
    lines = [line.strip() for line in tail if line.strip()]
    if phrase:
        for line in reversed(lines):
            if phrase in line:
                return line.strip("= ")
    return lines[-1] if lines else ""


def _say(text: str, sink) -> None:
    print(text, flush=True)
    sink.write(text + "\n")
    sink.flush()


def _machine() -> list[str]:
    """Who ran: the date, the commit (git, else $LAUNCH_TAX_COMMIT: the device's copy of the
    working tree has no .git), the GPU as nvidia-smi names it."""
    commit = os.environ.get("LAUNCH_TAX_COMMIT", "")
    try:
        git = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        if (
            git.returncode == 0
            and Path(
                subprocess.run(
                    ["git", "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True, text=True
                ).stdout.strip()
                or "/"
            ).resolve()
            == ROOT
        ):
            commit = git.stdout.strip()
    except OSError:
        pass
    lines = [
        f"gpu session {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, commit {commit or 'unknown'}, "
        f"python {sys.version.split()[0]}"
    ]
    smi = shutil.which("nvidia-smi")
    if smi:
        done = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total,memory.used", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        lines += [f"gpu: {line}" for line in done.stdout.strip().splitlines()] or [f"nvidia-smi: {done.stderr.strip()}"]
    else:
        lines.append("nvidia-smi: not on PATH")
    return lines


# -------------------------------------------------------------------------------------- main


def plan_text() -> str:
    rows = []
    for i, name in enumerate(SESSION):
        if i == PROMISED:
            rows.append(
                f"---- after here: while the time left covers each step (budget {BUDGET_S} s, "
                f"{RESERVE_S} s kept to pack; promised: {promised_s():.0f} s)"
            )
        for step in STAGES[name].steps(Path("OUT")):
            rows.append(
                f"{name + '/' + step.name:<34} ~{step.expected_s:>4.0f} s  cut at {step.deadline:>4.0f} s  "
                f"{step.source}"
            )
    return "\n".join(rows)


def readme_table() -> str:
    """The README's table of the stages (tests/test_gpu_plan.py holds the README to it)."""
    lines = ["| stage | runs | leaves | expected |", "|---|---|---|---|"]
    for i, name in enumerate(SESSION):
        stage = STAGES[name]
        steps = stage.steps(Path("OUT"))
        measured = all(s.source.startswith("measured") for s in steps if s.expected_s >= 5)
        mark = "" if measured else " (estimate)"
        promised = "" if i < PROMISED else " *"
        lines.append(f"| `{name}`{promised} | {stage.what} | {stage.produces} | ~{stage.expected_s():.0f} s{mark} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    usage = f"usage: python3 .ci/gpu.py {{session|all|plan|readme|{'|'.join([*STAGES, *GROUPS])}}} [OUT]"
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__ + "\n" + usage)
        return 0 if argv else 2
    what = argv[0]
    if what == "plan":
        print(plan_text())
        return 0
    if what == "readme":
        print(readme_table())
        return 0
    if what not in ("session", "all", *STAGES, *GROUPS):
        print(usage, file=sys.stderr)
        return 2
    target = Path(argv[1] if len(argv) > 1 else os.environ.get("OUT", "gpu-output")).resolve()
    if what == "session":
        budget = float(os.environ.get("BUDGET_S", BUDGET_S))
        target.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="gpu-session-"))  # outside OUT: only the tarball comes back
        runner = Runner(work, budget, tarball=target / "gpu-run.tgz")
        names = SESSION
    else:
        runner = Runner(target)
        names = SESSION if what == "all" else GROUPS.get(what, (what,))
    runner.out.mkdir(parents=True, exist_ok=True)
    runner.header = _machine()
    print("\n".join(runner.header), flush=True)
    return runner.run([STAGES[name] for name in names], alone=what not in ("session", "all"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
