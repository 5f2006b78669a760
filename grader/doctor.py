"""``python -m grader.doctor``: what this machine can do for the course, and why not.

One line per item: its name, ``ok``, ``warning``, ``missing`` or ``off``, and the reason, in
plain text, to paste into a help request. It takes a few seconds (it imports torch once here and
once in a child process, to measure the address space ``import torch`` takes; with a CUDA device,
two more child processes: one Triton kernel built and run, and one that holds GPU memory while
nvidia-smi is asked whether it shows it, each with a time limit). Exit status 1 only when the
main job, ``python -m grader grade``, cannot run (Python too old, torch or the grader cannot be
imported); 0 otherwise, whatever is missing besides.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

OK, WARNING, MISSING, OFF = "ok", "warning", "missing", "off"

#: Prints the peak address space (VmPeak, kB) of a fresh interpreter that imported torch.
_VMPEAK = (
    "import torch, sys\n"
    "peak = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmPeak:')]\n"
    "sys.stdout.write(peak[0] if peak else '')\n"
)

Line = tuple[str, str, str]


def report(env: dict[str, str] | None = None) -> list[Line]:
    """``[(item, status, reason), ...]`` for this machine; ``env``: the environment variables to
    judge by (default ``os.environ``; the Triton check reads PATH, CC and LD_LIBRARY_PATH)."""
    env = dict(os.environ if env is None else env)
    baseline = _start_vmpeak()  # runs beside the checks below
    lines: list[Line] = [_python()]
    torch, torch_line = _torch()
    lines.append(torch_line)
    lines.append(
        _package("numpy", "torch prints 'Failed to initialize NumPy' on stderr at every import (pip install numpy)")
    )
    for name in ("pytest", "hypothesis"):
        lines.append(_package(name, "needed to run the tests (pip install pytest hypothesis)"))
    lines.append(_package("nbgrader", "only needed for the nbgrader course (pip install -e '.[nbgrader]')"))
    cuda, gpu_line = _gpu(torch, env)
    lines.append(gpu_line)
    lines.append(driver_line(torch))
    lines.append(
        ("gpu tests", OK, "`python -m pytest exercises -m gpu` runs them")
        if cuda
        else (
            "gpu tests",
            OFF,
            "`python -m pytest exercises -m gpu` skips them, with a reason (no CUDA device: see gpu)",
        )
    )
    lines.append(
        ("gpu grading", OK, "`python -m grader grade` runs the GPU checks")
        if cuda
        else (
            "gpu grading",
            OFF,
            "`python -m grader grade` does not run the GPU checks and its report says so (no CUDA device: see gpu)",
        )
    )
    lines.append(triton_line(cuda, env))
    with ThreadPoolExecutor(2) as pool:  # with CUDA, each a child process on the GPU: side by side
        launch = pool.submit(triton_launch_line, cuda, env)
        memory = pool.submit(gpu_memory_line, cuda, None, None, env)
        lines += [launch.result(), memory.result()]
    lines.append(cpu_compile_line(env))
    lines.append(_grader())
    lines.extend(_sandbox())
    lines.append(_finish_vmpeak(baseline))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader doctor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the items to PATH as JSON")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    lines = report()
    if args.json:
        items = [{"item": name, "status": status, "reason": reason} for name, status, reason in lines]
        Path(args.json).write_text(json.dumps(items, indent=1) + "\n")
    print("launch-tax doctor: what this machine can do (paste this into a help request)")
    width = max(len(name) for name, _, _ in lines)
    for name, status, reason in lines:
        print(f"{name:<{width}}  {status:<7}  {reason}")
    fatal = [name for name, status, _ in lines if status == MISSING and name in FATAL]
    if fatal:
        print(f"`python -m grader grade` cannot run here: {', '.join(fatal)} missing")
    print(f"({time.perf_counter() - start:.1f} s)")
    return 1 if fatal else 0


#: Items without which ``python -m grader grade`` cannot run.
FATAL = ("python", "torch", "grader")


# ---------------------------------------------------------------------------------- the items


def _python() -> Line:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info < (3, 11):
        return (
            "python",
            MISSING,
            (
                f"{version} at {sys.executable}: the grader needs Python 3.11 or "
                "later (the exercises' tests and the lab run on this one)"
            ),
        )
    return "python", OK, f"{version} at {sys.executable}"


def _torch():
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken install is an answer too
        return None, (
            "torch",
            MISSING,
            f"cannot import torch ({type(exc).__name__}: {exc}); python -m pip install torch",
        )
    if torch.version.cuda:
        build = f"CUDA {torch.version.cuda} build"
    elif getattr(torch.version, "hip", None):
        build = f"ROCm {torch.version.hip} build"
    else:
        build = "CPU-only build"
    return torch, ("torch", OK, f"{torch.__version__}, {build}")


def _package(name: str, why: str) -> Line:
    """Importable (found on the path, without importing it: nbgrader takes seconds) and its
    version."""
    if importlib.util.find_spec(name) is None:
        return name, MISSING, f"not installed: {why}"
    try:
        return name, OK, importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return name, OK, "importable (no version recorded)"


def _gpu(torch, env: dict[str, str]) -> tuple[bool, Line]:
    if torch is None:
        return False, ("gpu", MISSING, "no CUDA device: torch cannot be imported")
    if not torch.version.cuda:
        return False, (
            "gpu",
            MISSING,
            f"no CUDA device: this torch ({torch.__version__}) is a CPU-only "
            "build; install a CUDA build of torch to use a GPU",
        )
    if not torch.cuda.is_available():
        hidden = env.get("CUDA_VISIBLE_DEVICES")
        why = (
            f"CUDA_VISIBLE_DEVICES={hidden!r} hides every device"
            if hidden is not None and not hidden.strip(" ,")
            else f"torch.cuda.is_available() is False (no NVIDIA driver, or one too old for CUDA {torch.version.cuda})"
        )
        return False, ("gpu", MISSING, f"no CUDA device: {why}")
    try:
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        free, total = torch.cuda.mem_get_info(index)
    except Exception as exc:  # noqa: BLE001 - a device that cannot even be queried
        return False, ("gpu", MISSING, f"CUDA device present but unusable ({type(exc).__name__}: {exc})")
    count = torch.cuda.device_count()
    more = f", device {index} of {count}" if count > 1 else ""
    return True, (
        "gpu",
        OK,
        f"{props.name}, {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB, "
        f"compute capability {props.major}.{props.minor}{more}",
    )


def triton_line(cuda: bool, env: dict[str, str] | None = None) -> Line:
    """Whether ``torch.compile`` can build CUDA kernels (``coursekit.platform``'s checks, with
    the environment variables ``env``); "off" without a CUDA device, saying what a GPU would
    still lack."""
    from coursekit import platform

    name = "torch.compile (Triton)"
    problems = platform.triton_problems(env=env)
    if not cuda:
        found = "nothing missing" if not problems else "; ".join(problems)
        return name, OFF, f"no CUDA device, nothing to build GPU kernels for (on a GPU: {found})"
    if problems:
        return name, MISSING, "; ".join(problems)
    version, _ = platform.triton_version()
    return (
        name,
        OK,
        (
            f"triton {version}, C compiler {platform.c_compiler(env)}, Python.h, "
            f"libcuda.so.1 in {platform.libcuda_dir(env)}"
        ),
    )


def driver_line(torch, libcuda=None) -> Line:
    """The CUDA version the NVIDIA driver supports (``libcuda.so.1``'s ``cuDriverGetVersion``;
    ``libcuda``: the library, default the one the dynamic linker finds) against the one ``torch``
    was built for (``torch.version.cuda``; ``torch`` None: it cannot be imported): "ok" when the
    driver's is the same or newer, "warning" for an older minor version (eager kernels run,
    Triton's may not), "missing" for an older major version, "off" with nothing to compare."""
    from coursekit import platform

    name = "CUDA driver"
    driver, why = platform.driver_cuda_version(libcuda)
    shown = ".".join(map(str, driver)) if driver else ""
    built = torch.version.cuda if torch is not None else None
    if driver is None:
        why = f"no NVIDIA driver here ({why})"
        if built:
            return name, OFF, f"{why}: nothing to compare with the CUDA {built} torch was built for"
        return name, OFF, why
    if torch is None:
        return name, OFF, f"the driver supports CUDA {shown}; torch cannot be imported: nothing to compare"
    wanted = platform.cuda_version(built)
    if wanted is None:
        return name, OFF, f"the driver supports CUDA {shown}; this torch ({torch.__version__}) is not a CUDA build"
    problem = platform.driver_problem(driver, wanted)
    if problem is None:
        return name, OK, f"the driver supports CUDA {shown}, torch was built for CUDA {built}"
    status, text = problem
    return name, WARNING if status == "warning" else MISSING, text


def triton_launch_line(cuda: bool, env: dict[str, str] | None = None) -> Line:
    """One Triton kernel built and run on the GPU (``coursekit.platform.triton_launch``: in a
    child process, with a time limit, in the environment ``env``); "off", not tried, without a
    CUDA device or without triton."""
    from coursekit import platform

    name = "Triton launch"
    if not cuda:
        return name, OFF, "not tried (no CUDA device: see gpu)"
    version, error = platform.triton_version()
    if version is None:
        return name, OFF, f"not tried (triton cannot be imported: {error})"
    ok, said = platform.triton_launch(env)
    if ok:
        return name, OK, f"one Triton kernel built and ran: {said}"
    return name, MISSING, f"{said} (one Triton kernel, built and run in a child process; see CUDA driver)"


def gpu_memory_line(
    cuda: bool, smi: str | None = None, holder: list[str] | None = None, env: dict[str, str] | None = None
) -> Line:
    """Whether nvidia-smi shows the GPU memory a process here holds (``grader.nvidia_smi``'s
    ``memory_visibility``: ``smi``, ``holder`` and ``env`` go to it), which the grader's
    per-worker GPU memory cap and its leftover check rest on; "off", saying why, where not."""
    name = "GPU memory per process"
    if not cuda:
        return name, OFF, "not checked (no CUDA device: see gpu)"
    try:
        from grader import nvidia_smi

        seen = nvidia_smi.memory_visibility(smi, holder, env)
    except Exception as exc:  # noqa: BLE001 - whatever it raised: the doctor says it and goes on
        return name, OFF, f"not checked ({type(exc).__name__}: {exc})"
    if seen.visible:
        return name, OK, f"visible: {seen.why}; the grader's per-worker GPU memory cap and leftover check work here"
    return (
        name,
        OFF,
        f"not visible here (container?): {seen.why}; the grader's per-worker GPU memory cap and its "
        "leftover check are off on this machine (its report says so)",
    )


def cpu_compile_line(env: dict[str, str] | None = None) -> Line:
    """Whether ``torch.compile`` can build CPU kernels here (inductor's C++ backend), which the
    compiled engine's test and the benchmark's compiled rows need on a CPU; "off" otherwise, as
    both are skipped with this reason."""
    from coursekit import platform

    name = "torch.compile (CPU)"
    problem = platform.cpu_compile_problem(env=env)
    if problem:
        return name, OFF, f"{problem}; the compiled engine's test and the benchmark's compiled rows are skipped"
    cxx = (env or os.environ).get("CXX") or "g++"
    return name, OK, f"inductor's C++ backend: {shutil.which(cxx, path=(env or os.environ).get('PATH', ''))}, Python.h"


def _grader() -> Line:
    try:
        importlib.import_module("grader.judge")
    except Exception as exc:  # noqa: BLE001 - whatever the import raised: the doctor says it and goes on
        return "grader", MISSING, f"cannot import grader.judge ({type(exc).__name__}: {exc})"
    return "grader", OK, "`python -m grader grade` can run"


def _sandbox() -> list[Line]:
    try:
        from grader import isolation

        strategy = isolation.current()
        protections = strategy.protections()
    except Exception as exc:  # noqa: BLE001 - whatever the sandbox raised: the doctor says it and goes on
        return [("sandbox", MISSING, f"cannot ask grader.isolation ({type(exc).__name__}: {exc})")]
    off = [name for name, on in protections.items() if not on]
    on = [name for name, ok in protections.items() if ok]
    who = f"isolation: {strategy.name} (used when: {strategy.when})"
    if not off:
        return [("sandbox", OK, f"{who}: every protection on ({', '.join(on)})")]
    stronger = isolation.STRATEGIES[: isolation.STRATEGIES.index(type(strategy))]
    why = "; ".join(f"not {s.name} (needs: {s.when})" for s in stronger)
    return [
        (
            "sandbox",
            OFF,
            f"{who}; {why}; off: {', '.join(off)}; on: {', '.join(on) or 'none'} "
            "(fine for practice; grade others' code as root)",
        )
    ]


def _start_vmpeak() -> subprocess.Popen | None:
    if not os.path.exists("/proc/self/status"):
        return None
    try:
        return subprocess.Popen(
            [sys.executable, "-c", _VMPEAK], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    except OSError:
        return None


def _finish_vmpeak(child: subprocess.Popen | None) -> Line:
    name = "import torch address space"
    if child is None:
        return name, OFF, "no /proc/self/status on this system: not measured"
    try:
        out, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return name, MISSING, "`python -c 'import torch'` took over 60 s: not measured"
    if child.returncode != 0 or not out.strip().isdigit():
        last = (err.strip().splitlines() or ["no output"])[-1]
        return name, MISSING, f"`python -c 'import torch'` failed: {last}"
    gib = int(out) * 1024 / 2**30
    limit = _cpu_worker_limit()
    note = f" (a CPU grading worker may use {limit / 2**30:.1f} GiB)" if limit else ""
    return name, OK, f"VmPeak {gib:.2f} GiB after `import torch`{note}"


def _cpu_worker_limit() -> int | None:
    try:
        from grader import sandbox

        return getattr(sandbox.Limits(), "memory_bytes", None)
    except Exception:  # noqa: BLE001 - only a note
        return None


if __name__ == "__main__":
    sys.exit(main())
