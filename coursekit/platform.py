"""What this machine can run, for the doctor (``python -m grader.doctor``), the tests and the
benchmark: small checks with one-line answers a student can act on.

``triton_problem()`` says why ``torch.compile`` cannot make GPU kernels here, and
``cpu_compile_problem()`` why it cannot make CPU kernels (inductor's C++ backend needs ``$CXX``,
else ``g++``, and ``Python.h``). On CUDA, inductor writes Triton kernels, and Triton builds a
small C launcher for them the first time it runs, so besides the ``triton`` package it needs what
that build needs, found the way Triton finds it:

* a C compiler: ``$CC`` if set, else ``gcc``, else ``clang`` on ``PATH`` (Triton does not try
  ``cc``: with only ``cc``, set ``CC=cc``);
* ``Python.h``, in ``sysconfig.get_paths()["include"]`` (the ``python3-dev`` package);
* ``libcuda.so.1`` (the driver's library, to link against): in ``$TRITON_LIBCUDA_PATH``, in
  ``ldconfig -p``, or in a folder of ``$LD_LIBRARY_PATH``.

Every check takes what it looks at as an argument (``env`` for the environment variables, PATH
included, ``include_dir``, ``ldconfig`` output, ``import_triton``, ``libcuda``), so a test can
point it at a machine without a compiler without touching torch.

All of that can be there and Triton's kernels still refused: a driver older than the CUDA torch
was built for runs torch's own (eager) kernels under CUDA's minor-version compatibility, but not
necessarily what Triton builds. ``driver_cuda_version()`` reads the CUDA version the driver
supports from ``libcuda.so.1`` itself (``cuDriverGetVersion``: no nvidia-smi needed, and it is
the library torch loads, a forward-compatibility one included), ``driver_problem()`` compares it
with torch's, and ``triton_launch()`` builds and runs one Triton kernel in a child process with
a time limit, so that a hang or a crash is an answer. Nothing here imports torch.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping


def c_compiler(env: Mapping[str, str] | None = None) -> str | None:
    """The C compiler Triton would use (``$CC``, else ``gcc``, else ``clang``), or None."""
    env = os.environ if env is None else env
    path = env.get("PATH", "")
    if env.get("CC"):
        return shutil.which(env["CC"], path=path)
    return shutil.which("gcc", path=path) or shutil.which("clang", path=path)


def python_include_dir() -> str:
    """Where Triton looks for ``Python.h`` (the default install scheme's include folder)."""
    scheme = sysconfig.get_default_scheme()
    if scheme == "posix_local":  # Debian's scheme; Triton reads posix_prefix's headers instead
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]


def python_header(include_dir: str | None = None) -> str | None:
    """The path of ``Python.h`` in ``include_dir`` (default: ``python_include_dir()``), or None."""
    header = Path(include_dir or python_include_dir()) / "Python.h"
    return str(header) if header.is_file() else None


def ldconfig_cache() -> str:
    """``ldconfig -p``'s output (the dynamic linker's cache), or "" where there is none."""
    for tool in ("/sbin/ldconfig", shutil.which("ldconfig")):
        if tool and Path(tool).exists():
            try:
                return subprocess.run([tool, "-p"], capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.SubprocessError):
                return ""
    return ""


def libcuda_dir(env: Mapping[str, str] | None = None, ldconfig: str | None = None) -> str | None:
    """The folder holding ``libcuda.so.1`` as Triton finds it, or None. ``ldconfig``: the output
    of ``ldconfig -p`` (read from the machine when None)."""
    env = os.environ if env is None else env
    if env.get("TRITON_LIBCUDA_PATH"):
        return env["TRITON_LIBCUDA_PATH"]
    cache = ldconfig_cache() if ldconfig is None else ldconfig
    for line in cache.splitlines():
        if "libcuda.so.1" in line and "=>" in line:
            return str(Path(line.split("=>")[-1].strip()).parent)
    for folder in env.get("LD_LIBRARY_PATH", "").split(":"):
        if folder and (Path(folder) / "libcuda.so.1").exists():
            return folder
    return None


def _import_triton():
    return importlib.import_module("triton")


def triton_version(import_triton: Callable[[], object] = _import_triton) -> tuple[str | None, str | None]:
    """``(version, None)`` when ``triton`` imports, ``(None, why not)`` otherwise."""
    try:
        module = import_triton()
    except Exception as exc:  # noqa: BLE001 - any failure to import is the answer
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
    return str(getattr(module, "__version__", "unknown version")), None


def triton_problems(
    *,
    env: Mapping[str, str] | None = None,
    include_dir: str | None = None,
    ldconfig: str | None = None,
    import_triton: Callable[[], object] = _import_triton,
) -> list[str]:
    """Everything that would stop Triton (so ``torch.compile`` on CUDA) on this machine, one
    short sentence each, whether or not there is a GPU; [] when nothing is missing."""
    problems = []
    if c_compiler(env) is None:
        env_ = os.environ if env is None else env
        if env_.get("CC"):
            problems.append(f"no C compiler: CC={env_['CC']!r} is not on PATH")
        else:
            hint = (
                " (there is a `cc`: set CC=cc)"
                if shutil.which("cc", path=env_.get("PATH", ""))
                else " (install gcc, e.g. apt-get install gcc, or set CC)"
            )
            problems.append(f"no C compiler: Triton looks for $CC, gcc or clang on PATH{hint}")
    if python_header(include_dir) is None:
        problems.append(
            f"no Python.h in {include_dir or python_include_dir()} (install the Python "
            "headers, e.g. apt-get install python3-dev)"
        )
    if libcuda_dir(env, ldconfig) is None:
        problems.append(
            "libcuda.so.1 not found in `ldconfig -p` or LD_LIBRARY_PATH (the NVIDIA "
            "driver's library; set TRITON_LIBCUDA_PATH to its folder)"
        )
    version, error = triton_version(import_triton)
    if version is None:
        problems.append(f"triton cannot be imported ({error}); CUDA builds of torch install it")
    return problems


def triton_problem(*, cuda: bool | None = None, **checks) -> str | None:
    """One line saying why ``torch.compile`` cannot make CUDA kernels here, or None when it can.

    Also None when there is no CUDA device at all (``cuda`` False, or None and
    ``torch.cuda.is_available()`` is False): there is nothing to compile for, and a CPU-only
    caller has nothing to skip; ask ``torch.cuda.is_available()`` for that. ROCm builds are not
    checked (their Triton needs no libcuda) and count as no CUDA here. ``checks`` go to
    ``triton_problems`` (``env``, ``include_dir``, ``ldconfig``, ``import_triton``)."""
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available() and torch.version.hip is None
    if not cuda:
        return None
    problems = triton_problems(**checks)
    return "torch.compile cannot build GPU kernels: " + "; ".join(problems) if problems else None


def cpu_compile_problem(env: Mapping[str, str] | None = None, include_dir: str | None = None) -> str | None:
    """Why inductor cannot build CPU kernels here (it compiles C++ with ``$CXX``, else ``g++``, and
    loads it through ``Python.h``), or None. ``env`` and ``include_dir`` as in
    ``coursekit.platform``."""
    env = os.environ if env is None else env
    problems = []
    cxx = env.get("CXX") or "g++"
    if shutil.which(cxx, path=env.get("PATH", "")) is None:
        problems.append(
            f"no C++ compiler: inductor looks for $CXX or g++ on PATH, and {cxx!r} is not there "
            "(install g++, e.g. apt-get install g++, or set CXX)"
        )
    if python_header(include_dir) is None:
        problems.append(
            f"no Python.h in {include_dir or python_include_dir()} (install the Python "
            "headers, e.g. apt-get install python3-dev)"
        )
    return "torch.compile cannot build CPU kernels: " + "; ".join(problems) if problems else None


def _load_libcuda():
    return ctypes.CDLL("libcuda.so.1")


def driver_cuda_version(libcuda=None) -> tuple[tuple[int, int] | None, str | None]:
    """``((major, minor), None)``: the CUDA version the NVIDIA driver supports, from
    ``cuDriverGetVersion`` (``1000 * major + 10 * minor``, e.g. 12040 for 12.4) of ``libcuda``
    (default: ``libcuda.so.1`` as the dynamic linker finds it, as torch does); ``(None, why
    not)`` where it cannot be loaded or asked."""
    try:
        lib = _load_libcuda() if libcuda is None else libcuda
        version = ctypes.c_int(0)
        result = lib.cuDriverGetVersion(ctypes.pointer(version))
    except (OSError, AttributeError) as exc:
        return None, f"libcuda.so.1 cannot be loaded: {exc}"
    if result != 0:
        return None, f"cuDriverGetVersion failed (CUresult {result})"
    if version.value <= 0:
        return None, f"cuDriverGetVersion said {version.value}"
    return (version.value // 1000, version.value % 1000 // 10), None


def cuda_version(text: str | None) -> tuple[int, int] | None:
    """``(major, minor)`` of a version string such as ``torch.version.cuda`` ("12.8"), or None."""
    parts = (text or "").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def driver_problem(driver: tuple[int, int], built: tuple[int, int]) -> tuple[str, str] | None:
    """None when a driver that supports CUDA ``driver`` runs what was built for CUDA ``built``
    (the same or newer); else ``("warning", why)`` for an older minor version of the same major
    (minor-version compatibility) or ``("missing", why)`` for an older major, with what to do."""
    if driver >= built:
        return None
    d, b = ".".join(map(str, driver)), ".".join(map(str, built))
    if driver[0] == built[0]:
        return "warning", (
            f"the driver supports CUDA {d}, older than the CUDA {b} torch was built for: torch's eager kernels "
            "run (CUDA's minor-version compatibility), but torch.compile/Triton kernels may be refused "
            "(exercise 7's GPU points and every compiled row would then fail while eager passes); "
            f"install a driver that supports CUDA {b} or newer, or a torch built for CUDA {d} or older"
        )
    return "missing", (
        f"the driver supports CUDA {d}, an older major version than the CUDA {b} torch was built for: "
        "torch cannot use the GPU (minor-version compatibility holds only within a major version); "
        f"install a driver that supports CUDA {b}, or a torch built for CUDA {driver[0]}.x"
    )


#: One Triton kernel (x + 1 over 1000 values), built and run on the GPU; prints "ok ..." or
#: "error: TYPE: first line of the message". In a file: Triton reads its kernels' source.
TRITON_LAUNCH = """\
import sys

try:
    import torch
    import triton
    import triton.language as tl
except BaseException as exc:
    print(f"error: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}")
    sys.exit(1)


@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


try:
    x = torch.zeros(1000, device="cuda")
    add_one[(triton.cdiv(1000, 256),)](x, 1000, BLOCK=256)
    torch.cuda.synchronize()
    total = x.sum().item()
    if total != 1000:
        raise AssertionError(f"the kernel ran but the values sum to {total}, not 1000")
except BaseException as exc:
    print(f"error: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}")
    sys.exit(1)
print(f"ok triton {triton.__version__} on {torch.cuda.get_device_name()}")
"""


def triton_launch(
    env: Mapping[str, str] | None = None, timeout_s: float = 120.0, script: str = TRITON_LAUNCH
) -> tuple[bool, str]:
    """Build and run one Triton kernel in a child process of this Python (``script``, in the
    environment ``env``), killed after ``timeout_s``: ``(True, what ran)``, or ``(False, the
    first line of the error)``, a hang or a crash included."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="launch-tax-triton-") as folder:
        path = Path(folder) / "triton_launch.py"
        path.write_text(script)
        try:
            proc = subprocess.Popen(
                [sys.executable, str(path)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=None if env is None else dict(env),
                start_new_session=True,  # the compiler it starts goes with it
            )
        except OSError as exc:
            return False, f"could not start {sys.executable} ({exc})"
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.communicate()
            return False, f"no answer within {timeout_s:.0f} s (a hang in the build or the launch): killed"
    seconds = time.monotonic() - start
    said = [line.strip() for line in out.splitlines() if line.strip()]
    if proc.returncode == 0 and said and said[-1].startswith("ok "):
        return True, f"{said[-1].removeprefix('ok ')}, in {seconds:.1f} s"
    if said and said[-1].startswith("error: "):
        return False, said[-1].removeprefix("error: ")
    error = _error_line(err)
    if proc.returncode is not None and proc.returncode < 0:
        number = -proc.returncode
        name = f" {signal.Signals(number).name}" if number in signal.valid_signals() else ""
        return False, f"crashed (killed by signal {number}{name})" + (f": {error}" if error else "")
    return False, error or f"exited with code {proc.returncode} and said nothing"


def _error_line(stderr: str) -> str | None:
    """The first line of the error in a child's stderr: the line after the last traceback's
    frames (``TYPE: message``), else its last line."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    for line in lines[starts[-1] + 1 :] if starts else []:
        if line.strip() and not line[0].isspace():
            return line.strip()
    said = [line.strip() for line in lines if line.strip()]
    return said[-1] if said else None
