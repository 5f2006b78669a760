"""``python -m grader.doctor``: quick, one plain line per item, exit 0 unless grading cannot run;
and ``coursekit.platform``'s Triton checks, pointed at a machine without a compiler."""

import os
import subprocess
import sys
import time

import pytest
import torch

from coursekit import platform
from coursekit.impl import REPO_ROOT
from grader import doctor

STATUSES = {"ok", "missing", "off"}


def run_doctor(env=None):
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "grader.doctor"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    return done, time.perf_counter() - start


def items(stdout: str) -> dict[str, tuple[str, str]]:
    """``{item: (status, reason)}`` from the doctor's lines (two spaces or more between columns)."""
    found = {}
    for line in stdout.splitlines()[1:]:
        parts = [p for p in line.split("  ") if p.strip()]
        if len(parts) >= 3 and parts[1].strip() in STATUSES:
            found[parts[0].strip()] = (parts[1].strip(), "  ".join(parts[2:]).strip())
    return found


@pytest.fixture(scope="module")
def here():
    """The doctor's run on this machine, and how long it took."""
    return run_doctor()


def test_doctor_is_quick_plain_and_exits_0_here(here):
    done, seconds = here
    assert done.returncode == 0, done.stdout + done.stderr
    # The target is under 10 s on an idle 2-core machine (about 2-3 s measured); beside the rest
    # of the suite (pytest -n auto) the cores are shared, hence the margin.
    assert seconds < 30, f"the doctor took {seconds:.1f} s (target: under 10 s on an idle machine)"
    assert "\x1b[" not in done.stdout, "plain text: no terminal colours"
    found = items(done.stdout)
    for item in (
        "python",
        "torch",
        "numpy",
        "nbgrader",
        "gpu",
        "gpu tests",
        "gpu grading",
        "torch.compile (Triton)",
        "grader",
        "sandbox",
        "import torch address space",
    ):
        assert item in found, f"no line for {item!r}:\n{done.stdout}"
    assert all(reason for _, reason in found.values()), done.stdout
    assert found["torch"][0] == "ok" and torch.__version__ in found["torch"][1]
    assert "GiB" in found["import torch address space"][1], done.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the report of a machine without CUDA")
def test_doctor_says_plainly_that_there_is_no_gpu(here):
    found = items(here[0].stdout)
    assert found["gpu"][0] == "missing" and "no CUDA device" in found["gpu"][1], found["gpu"]
    assert found["gpu tests"][0] == "off" and found["gpu grading"][0] == "off"
    assert found["torch.compile (Triton)"][0] == "off"


def test_doctor_exits_1_when_torch_cannot_be_imported(tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('this torch is broken')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    done, _ = run_doctor(env)
    assert done.returncode == 1, done.stdout + done.stderr
    status, reason = items(done.stdout)["torch"]
    assert status == "missing" and "this torch is broken" in reason
    assert "cannot run here" in done.stdout


def test_no_compiler_on_path_is_reported_missing_with_a_reason(tmp_path):
    empty = {"PATH": str(tmp_path)}
    assert platform.c_compiler(empty) is None
    problem = platform.triton_problem(cuda=True, env=empty)
    assert problem and "no C compiler" in problem and "gcc" in problem, problem
    name, status, reason = doctor.triton_line(cuda=True, env=empty)
    assert status == "missing" and "no C compiler" in reason, reason


def test_only_cc_on_path_says_to_set_cc(tmp_path):
    cc = tmp_path / "cc"
    cc.write_text("#!/bin/sh\n")
    cc.chmod(0o755)
    problems = platform.triton_problems(env={"PATH": str(tmp_path)})
    assert any("set CC=cc" in p for p in problems), problems
    assert platform.c_compiler({"PATH": str(tmp_path), "CC": "cc"}) == str(cc)


def test_a_complete_machine_has_no_triton_problem(tmp_path):
    gcc, include = tmp_path / "gcc", tmp_path / "include"
    gcc.write_text("#!/bin/sh\n")
    gcc.chmod(0o755)
    include.mkdir()
    (include / "Python.h").write_text("")
    ldconfig = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
    checks = dict(
        env={"PATH": str(tmp_path)},
        include_dir=str(include),
        ldconfig=ldconfig,
        import_triton=lambda: type("triton", (), {"__version__": "3.5.0"}),
    )
    assert platform.triton_problems(**checks) == []
    assert platform.triton_problem(cuda=True, **checks) is None
    assert platform.libcuda_dir({}, ldconfig) == "/usr/lib/x86_64-linux-gnu"
    missing = dict(
        checks,
        include_dir=str(tmp_path),
        ldconfig="",
        import_triton=lambda: (_ for _ in ()).throw(ModuleNotFoundError("No module named 'triton'")),
    )
    problem = platform.triton_problem(cuda=True, **missing)
    assert "Python.h" in problem and "libcuda.so.1" in problem and "triton cannot be imported" in problem


def test_no_cuda_means_nothing_to_compile_for():
    assert platform.triton_problem(cuda=False, env={"PATH": ""}) is None
