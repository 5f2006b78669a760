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
included, ``include_dir``, ``ldconfig`` output, ``import_triton``), so a test can point it at a
machine without a compiler without touching torch.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sysconfig
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
