"""The GPU session's plan (``.ci/gpu.py``), tried on this CPU machine: the promised stages fit the
budget, each step is cut at its deadline with SIGINT first, a step is not started without the
time it needs, and the tarball is packed again after every step so that a session killed in the
middle still brings back what it did."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT

PLAN = REPO_ROOT / ".ci" / "gpu.py"


def load_plan():
    spec = importlib.util.spec_from_file_location("gpu_plan_under_test", PLAN)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gpu = load_plan()


def py(code: str) -> tuple[str, ...]:
    return ("{py}", "-c", textwrap.dedent(code))


def stage(name: str, *steps) -> object:
    return gpu.Stage(name, f"a stage named {name}", lambda d: list(steps))


def step(name: str, code: str, expected_s: float = 1, **kw) -> object:
    return gpu.Step(name, expected_s, "estimate: a test's", py(code), **kw)


# ------------------------------------------------------------------------------- the budget


def test_the_promised_stages_fit_the_budget():
    assert gpu.budget_problem() is None, gpu.budget_problem()
    assert gpu.promised_s() + gpu.RESERVE_S <= gpu.BUDGET_S <= 600, "the device tool runs a command 600 s at most"


def test_a_stage_raised_past_the_budget_fails_the_budget_check():
    """The check can fail: one promised stage's step expected to take what is left of the budget
    and a second more."""
    over = gpu.BUDGET_S - gpu.RESERVE_S - gpu.promised_s() + 1
    name = gpu.SESSION[3]
    original = gpu.STAGES[name]

    def heavier(d):
        first, *rest = original.steps(d)
        return [replace(first, expected_s=first.expected_s + over), *rest]

    stages = {**gpu.STAGES, name: replace(original, steps=heavier)}
    problem = gpu.budget_problem(stages)
    assert problem and f"{name} " in problem and "over the budget" in problem, problem


def test_the_session_is_ordered_by_what_it_teaches():
    """Preflight, the public GPU tests, the official grade of the reference, the 7B benchmark at
    batch 1 with its compiled rows, the class in two passes, the GPU kill matrix, then the rest;
    every stage once."""
    assert gpu.SESSION[:6] == ("preflight", "tests", "grade-official", "bench-7b-b1", "class", "mutants")
    assert sorted(gpu.SESSION) == sorted(gpu.STAGES)
    assert gpu.PROMISED >= 4, "the first four stages are what a GPU slot exists for"
    bench = gpu.STAGES["bench-7b-b1"].steps(Path("OUT"))[0]
    assert "--no-compile" not in bench.argv and bench.argv[bench.argv.index("--batches") + 1] == "1"


def test_every_estimate_says_where_it_comes_from():
    for name in gpu.SESSION:
        for s in gpu.STAGES[name].steps(Path("OUT")):
            assert s.expected_s > 0 and s.deadline >= s.expected_s and s.needs <= s.expected_s, (name, s.name)
    with pytest.raises(ValueError, match="measured"):
        gpu.Step("x", 1, "about a minute", ("true",))


def test_the_readme_table_is_the_plan():
    table = gpu.readme_table()
    assert table in (REPO_ROOT / "README.md").read_text(encoding="utf-8"), (
        "README.md's table of the GPU stages is not .ci/gpu.py's plan: paste the output of "
        "`python3 .ci/gpu.py readme` into it"
    )


def _flags(argv) -> list[str]:
    return [a.split("=")[0] for a in argv if a.startswith("--")]


def test_each_step_uses_only_flags_its_tool_has():
    """A step that calls a flag its tool lacks would fail on the GPU, minutes into a slot: each
    grader and benchmark command's flags are in that command's own --help."""
    helps: dict[tuple, str] = {}
    for name in gpu.SESSION:
        for s in gpu.STAGES[name].steps(Path("OUT")):
            argv = s.argv
            if argv[1:3] == ("-m", "grader"):
                tool = tuple(argv[1:4])
            elif argv[1:2] == ("benchmarks/decode_engine.py",) or argv[1:3] == ("-m", "coursekit.lab"):
                tool = tuple(argv[1:4] if argv[1] == "-m" else argv[1:2])
            else:
                continue
            if tool not in helps:
                done = subprocess.run(
                    [sys.executable, *tool, "--help"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
                )
                assert done.returncode == 0, (tool, done.stderr[-2000:])
                helps[tool] = done.stdout
            missing = [f for f in _flags(argv) if f not in helps[tool]]
            assert not missing, f"{name}/{s.name}: {' '.join(tool)} has no {missing}"
    assert len(helps) >= 5


# ---------------------------------------------------------------------------- the machinery


def test_a_step_is_cut_at_its_deadline_with_sigint_first(tmp_path):
    """pytest writes its junit XML and the benchmark its JSON on KeyboardInterrupt: the SIGINT
    at the deadline lets them."""
    runner = gpu.Runner(tmp_path / "out")
    wrote = tmp_path / "junit.xml"
    slow = step(
        "slow",
        f"""
        import sys, time
        try:
            time.sleep(120)
        except KeyboardInterrupt:
            open({str(wrote)!r}, "w").write("<testsuite/>")
            sys.exit(2)
        """,
        expected_s=1,
        deadline_s=2,
    )
    began = time.monotonic()
    assert runner.run([stage("one", slow)], alone=False) == 1
    outcome = runner.outcomes[-1]
    assert outcome.status == "cut" and wrote.read_text() == "<testsuite/>", outcome
    assert time.monotonic() - began < 60
    assert "cut at 2 s" in outcome.headline and "CUT" in runner.summary()


def test_a_step_that_ignores_sigint_is_ended_all_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu, "GRACE_S", 1)
    runner = gpu.Runner(tmp_path / "out")
    stubborn = step(
        "stubborn", "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(120)", deadline_s=1
    )
    began = time.monotonic()
    runner.run([stage("one", stubborn)], alone=False)
    assert runner.outcomes[-1].status == "cut" and time.monotonic() - began < 60


def test_a_step_is_not_started_without_the_time_it_needs(tmp_path):
    runner = gpu.Runner(tmp_path / "out", budget_s=gpu.RESERVE_S + 20)
    quick = step("quick", "print('done')", expected_s=1)
    big = step("big", "print('never')", expected_s=300, needs_s=200)
    after = step("after", "print('runs')", expected_s=1)
    assert runner.run([stage("a", quick), stage("b", big), stage("c", after)], alone=False) == 0
    states = {o.step: (o.status, o.headline) for o in runner.outcomes}
    assert states["quick"][0] == "ok" and states["after"] == ("ok", "runs")
    assert states["big"][0] == "not started" and re.search(r"needs ~200 s, \d+ s left", states["big"][1]), states


def test_after_a_failed_step_its_stage_stops_and_the_next_stage_runs(tmp_path):
    runner = gpu.Runner(tmp_path / "out")
    first = stage("first", step("fails", "raise SystemExit(3)"), step("builds-on-it", "print('x')"))
    second = stage("second", step("independent", "print('ran')"))
    assert runner.run([first, second], alone=False) == 1
    states = [(o.stage, o.step, o.status, o.exit) for o in runner.outcomes]
    assert states == [
        ("first", "fails", "failed", 3),
        ("first", "builds-on-it", "not started", None),
        ("second", "independent", "ok", 0),
    ]
    record = json.loads((tmp_path / "out" / "first" / "stage.json").read_text())
    assert not record["ok"] and [s["status"] for s in record["steps"]] == ["failed", "not started"]


def test_a_failed_cuda_check_ends_the_session(tmp_path):
    runner = gpu.Runner(tmp_path / "out")
    no_gpu = gpu.Step("cuda", 1, "estimate: a test's", py("raise SystemExit('no CUDA device')"))
    assert runner.run([stage("preflight", no_gpu), stage("later", step("x", "pass"))], alone=False) == 1
    assert [o.step for o in runner.outcomes] == ["cuda"]


def test_a_stage_run_alone_starts_with_the_cuda_check(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu, "cuda_step", lambda: gpu.Step("cuda", 1, "estimate: a test's", py("pass")))
    runner = gpu.Runner(tmp_path / "out")
    runner.run([stage("tests", step("x", "pass"))], alone=True)
    assert [o.step for o in runner.outcomes] == ["cuda", "x"]


def test_the_tarball_is_packed_again_after_every_step(tmp_path):
    """The second step reads the tarball the first one left: its log is in it already."""
    tarball = tmp_path / "OUT" / "gpu-run.tgz"
    tarball.parent.mkdir()
    runner = gpu.Runner(tmp_path / "work", budget_s=500, tarball=tarball)

    def first_step_is_packed(d: Path) -> str:
        with tarfile.open(tarball) as tar:
            log = tar.extractfile("gpu/s/s.log").read().decode()
            summary = tar.extractfile("gpu/summary.txt").read().decode()
        assert "first-step-output" in log and re.search(r"s/first\s+ok", summary), (log, summary)
        return "the first step was packed"

    s = stage(
        "s", step("first", "print('first-step-output')"), gpu.Step("read", 1, "estimate: x", check=first_step_is_packed)
    )
    assert runner.run([s], alone=False) == 0, runner.summary()
    assert (tmp_path / "OUT" / "summary.txt").read_text() == (tmp_path / "work" / "summary.txt").read_text()
    assert sorted(p.name for p in tarball.parent.iterdir()) == ["gpu-run.tgz", "summary.txt"]


def test_a_session_killed_in_the_middle_leaves_its_last_whole_tarball(tmp_path):
    """The device tool's limit kills the session's command (SIGKILL, rc 137): what was packed after
    the last finished step still comes back, whole."""
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(
            f"""
            import importlib.util, sys
            from pathlib import Path
            spec = importlib.util.spec_from_file_location("plan", {str(PLAN)!r})
            gpu = importlib.util.module_from_spec(spec); sys.modules["plan"] = gpu; spec.loader.exec_module(gpu)
            quick = gpu.Step("quick", 1, "estimate: x", ("{{py}}", "-c", "print('quick-done')"))
            code = "import time; print('hanging', flush=True); time.sleep(300)"
            hang = gpu.Step("hang", 1, "estimate: x", ("{{py}}", "-c", code))
            runner = gpu.Runner(Path({str(tmp_path / "work")!r}), 500, tarball=Path({str(tmp_path / "gpu-run.tgz")!r}))
            runner.run([gpu.Stage("s", "x", lambda d: [quick, hang])], alone=False)
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for line in proc.stdout:
            if line.strip() == "hanging":  # the child itself (the command line names it too)
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    with tarfile.open(tmp_path / "gpu-run.tgz") as tar:
        summary = tar.extractfile("gpu/summary.txt").read().decode()
    assert re.search(r"s/quick\s+ok", summary) and re.search(r"s/hang\s+running", summary), summary
    assert not (tmp_path / "gpu-run.partial").exists()


def test_ci_gpu_plan_prints_the_plan_and_the_budget():
    done = subprocess.run(
        ["bash", ".ci/gpu", "plan"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr
    assert "promised" in done.stdout and "bench-7b-b1/decode-engine" in done.stdout
