"""What a GPU machine gets to run, tried on this CPU machine: ``.ci/gpu preflight`` exactly as the
script runs it, the GPU tests' collection on an image with nothing but torch, pytest and
hypothesis (the H200 image: Python 3.12, torch 2.11, pytest, hypothesis, nothing installable),
and the grader on an older Python (many rented images have 3.10)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from coursekit.impl import REPO_ROOT

#: What a bare GPU image lacks that the staff repository's suite may use.
OPTIONAL = ("jsonschema", "nbgrader", "nbformat", "nbconvert", "jupyter_client", "numpy", "xdist")
BLOCKER = '''import sys
BLOCKED = set({blocked!r})
class _NotOnThisImage:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not on this image)", name=name)
sys.meta_path.insert(0, _NotOnThisImage())
'''


def bare_image_env(tmp_path: Path) -> dict[str, str]:
    """This Python, with every package in ``OPTIONAL`` unimportable (a ``sitecustomize``)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=OPTIONAL))
    return {**os.environ, "PYTHONPATH": str(site)}


def test_the_blocker_blocks(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import jsonschema"], env=bare_image_env(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 1 and "not on this image" in done.stderr


def test_gpu_tests_collect_with_only_torch_pytest_hypothesis(tmp_path):
    """``pytest tests exercises -m gpu --collect-only`` with the optional packages unimportable:
    no collection error, and the GPU tests are there to run."""
    plugins = ["-p", "no:xdist", "-p", "no:xdist.looponfail"]  # a bare image has no xdist
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "exercises", "-m", "gpu", "--collect-only", "-q", *plugins],
        env=bare_image_env(tmp_path),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, f"collection failed on a bare image (exit {done.returncode}):\n{tail}"
    assert "ERROR" not in done.stdout and "errors during collection" not in done.stdout, tail
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(collected) >= 60 and any(line.startswith("tests/") for line in collected), tail


def test_ci_gpu_preflight_fails_only_at_its_cuda_step(tmp_path):
    """``bash .ci/gpu preflight OUT`` on a machine without CUDA: the doctor step runs (through the
    CLI, with ``--json``, as the script calls it) and writes its JSON; only the CUDA step fails."""
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", ".ci/gpu", "preflight", str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    stage = json.loads((tmp_path / "preflight" / "stage.json").read_text())
    failed = [s["command"][:80] for s in stage["steps"] if s["exit"] != 0]
    doctor = [s for s in stage["steps"] if "grader doctor" in s["command"]]
    assert doctor and doctor[0]["exit"] == 0, done.stdout[-3000:]
    assert len(failed) == 1 and "cuda" in failed[0].lower(), (failed, done.stdout[-3000:])
    items = json.loads((tmp_path / "preflight" / "doctor.json").read_text())
    assert {i["item"] for i in items} >= {"python", "torch", "gpu"} and done.returncode == 1


def test_doctor_json_through_the_cli(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "grader", "doctor", "--json", str(tmp_path / "d.json")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "d.json").read_text())[0]["item"] == "python"


def _python310() -> str | None:
    """A working Python 3.10 (pyenv's own, not its shim, which may refuse to run it)."""
    found = sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.10*/bin/python3.10"))
    for candidate in found + [shutil.which("python3.10")]:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


PYTHON310 = _python310()


@pytest.mark.parametrize("how", ["python3.10", "simulated"])
def test_grader_on_an_old_python_says_so_in_one_line(how):
    """The grader needs Python 3.11 (tomllib): on an older one it says so in one line and exits
    2 before any import can fail. Where a real Python 3.10 is on the machine (pyenv), that one;
    everywhere, this Python told it is 3.10."""
    if how == "python3.10":
        if PYTHON310 is None:
            pytest.skip("no Python 3.10 on this machine")
        command = [PYTHON310, "-m", "grader", "grade"]
    else:
        command = [
            sys.executable,
            "-c",
            "import sys, runpy; sys.version_info = (3, 10, 13, 'final', 0); "
            "sys.argv = ['grader', 'grade']; runpy.run_module('grader', run_name='__main__')",
        ]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "needs Python 3.11" in lines[0], (
        f"expected exit 2 and one line saying Python 3.11 is needed, got exit {done.returncode}:\n"
        f"{done.stdout}{done.stderr}"
    )
    assert "3.10.13" in lines[0] and "pytest exercises" in lines[0]


def test_the_student_path_is_valid_python_3_10():
    """The exercises, their tests, the support package and the reference compile on Python 3.10
    (the oldest Python the README says they run on; measured with torch 2.4.1 on 3.10.13)."""
    if PYTHON310 is None:
        pytest.skip("no Python 3.10 on this machine")
    files = [p for top in ("exercises", "coursekit", "solutions") for p in (REPO_ROOT / top).rglob("*.py")]
    files.append(REPO_ROOT / "conftest.py")
    code = "import sys\nfor f in sys.argv[1:]:\n    compile(open(f, encoding='utf-8').read(), f, 'exec')\n"
    done = subprocess.run([PYTHON310, "-c", code, *map(str, files)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at its top or inside a function (what a test imports only
    when it runs, too)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_public_tests_run_where_the_grader_cannot(tmp_path):
    """Python 3.10 (many rented images) has no ``tomllib``, which the grader needs: the public tests
    still collect there, the grader's checks as tests (exercises/tests/test_checks.py) skipped with
    the reason. Simulated on this Python by making ``tomllib`` unimportable. Only test_checks.py
    imports the grader: no other public test, no exercise module and nothing of coursekit imports
    it or ``tomllib``, even inside a function, so what collects here runs as it does with
    ``tomllib`` (tests/test_corpus.py runs them all on the reference)."""
    public = REPO_ROOT / "exercises"
    reaching = {
        str(path.relative_to(REPO_ROOT)): sorted(_imports(path) & {"grader", "tomllib", "tomli"})
        for path in [*public.glob("*.py"), *(public / "tests").glob("*.py"), *(REPO_ROOT / "coursekit").rglob("*.py")]
        if path.name != "test_checks.py"
    }
    assert not {k: v for k, v in reaching.items() if v}, "these need the grader or tomllib, which 3.10 lacks"
    site = tmp_path / "site"
    site.mkdir()
    # A plugin takes tomllib away once pytest has read its configuration (with tomllib here, with
    # the tomli package on 3.10): from then on `import tomllib` fails as it does on 3.10.
    (site / "no_tomllib.py").write_text(
        "import sys\n\n\ndef pytest_configure(config):\n    sys.modules['tomllib'] = None\n"
    )

    def pytest(*args: str) -> tuple[subprocess.CompletedProcess, str]:
        flags = ["--impl", "solutions", "-m", "not gpu", "-p", "no:xdist", "-p", "no_tomllib"]
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *flags, *args],
            env={**os.environ, "PYTHONPATH": str(site)},
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return done, (done.stdout + done.stderr)[-3000:]

    done, tail = pytest("exercises", "--collect-only", "-q")
    assert done.returncode == 0 and "error" not in done.stdout.lower(), tail
    # A module skipped whole collects nothing: pytest's exit status 5, "no tests collected".
    done, tail = pytest("exercises/tests/test_checks.py", "-q", "-rs")
    assert done.returncode in (0, 5) and "error" not in done.stdout.lower(), tail
    assert "1 skipped" in done.stdout and "need Python 3.11" in done.stdout, tail


def test_compile_checks_are_pending_where_triton_cannot_build():
    """On a GPU machine that cannot build Triton kernels (PyTorch's *-runtime images: no gcc, no
    Python.h), the checks that need torch.compile are pending with the doctor's reason, never
    lost; the other GPU checks of the exercise are graded as usual."""
    from grader.judge import Judge
    from grader.submission import Submission

    judge = Judge(gpu="off")
    judge.gpu, judge.triton_problem = True, "torch.compile cannot build GPU kernels: no C compiler"
    checks = [c for c in judge.checks_for(Submission("x")) if c.exercise == "ex7"]
    states = {r.check.name: (r.status, r.reason) for r in judge.pending_here(checks)}
    assert states["gpu_fused_norm_is_one_kernel"][0] == "pending"
    assert "no C compiler" in states["gpu_fused_norm_is_one_kernel"][1]
    assert "gpu_count_kernels" not in states  # graded: no compiler needed
    assert [c.name for c in checks if c.triton] == ["gpu_fused_norm_is_one_kernel"]


class FakeStreams:
    """What ``torch.cuda`` reports while exercise 2's measurement runs on a GPU: the current
    stream (the caller's, or a side stream) and whether a graph capture is under way. Its methods
    take the parameters of ``torch.cuda.current_stream`` and ``is_current_stream_capturing``."""

    def __init__(self):
        self.stream, self.capturing = "caller", False

    def current_stream(self, device=None):
        return self.stream

    def is_current_stream_capturing(self):
        return self.capturing


def fake_measurement(streams: FakeStreams, warmup_stream: str, capture_stream: str):
    """A measure_launch_tax that times the chain eagerly, warms it up on ``warmup_stream``,
    captures one call on ``capture_stream`` and compares."""
    from types import SimpleNamespace

    from coursekit import measurements

    def measure_launch_tax(n_ops=200, numel=1024, iters=100):
        x = torch.ones(numel)
        module.tiny_op_chain(x, n_ops)  # eager timing
        streams.stream = warmup_stream
        module.tiny_op_chain(x, n_ops)
        streams.stream, streams.capturing = capture_stream, True
        module.tiny_op_chain(x, n_ops)
        streams.stream, streams.capturing = "caller", False
        return measurements.LaunchTax(n_ops, numel, 10.0, 1.0, True)

    module = SimpleNamespace(tiny_op_chain=measurements.tiny_op_chain, measure_launch_tax=measure_launch_tax)
    return module


@pytest.mark.parametrize(
    "warmup_stream, capture_stream, warmed_up, same",
    [("side", "side", True, True), ("caller", "caller", False, False), ("side", "graph's own", True, False)],
)
def test_the_measure_probe_sees_where_the_warm_up_ran(monkeypatch, warmup_stream, capture_stream, warmed_up, same):
    """The warm-up rule of exercise 2 is graded only on a GPU, from the streams CUDA reports
    (``torch.cuda.current_stream()``, ``is_current_stream_capturing()``). Here CUDA reports them
    through doubles: a warm-up on a side stream is seen, one on the caller's stream is not, one
    call is captured either way, and the chain is given back afterwards."""
    from coursekit import measurements
    from grader.exercises import load_probes
    from grader.probes import PROBES

    load_probes()
    streams, chain = FakeStreams(), measurements.tiny_op_chain
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_stream", streams.current_stream)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", streams.is_current_stream_capturing)
    module = fake_measurement(streams, warmup_stream, capture_stream)
    got = PROBES["measure"](module, {"n_ops": 4, "numel": 8, "iters": 1})
    assert (got["captured_calls"], got["side_stream_warmup"]) == (1, warmed_up), got
    assert got["captured_on_the_warmup_stream"] is same, got
    assert module.tiny_op_chain is chain and measurements.tiny_op_chain is chain
