"""Helpers for the repository's own suite."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from coursekit.impl import REPO_ROOT


def submission(folder: Path, **sources: str) -> Path:
    """A submission folder: the reference modules, with some replaced by the given sources."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in (REPO_ROOT / "solutions").glob("*.py"):
        if path.name != "__init__.py":
            shutil.copy(path, folder / path.name)
    for name, source in sources.items():
        (folder / f"{name}.py").write_text(source)
    return folder


def released(out: Path) -> Path:
    """``python -m grader release OUT`` as on a machine without a GPU (its recorded answers are
    then the CPU checks', wherever the suite runs); the release's folder."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "grader", "release", str(out)],
        cwd=REPO_ROOT,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return out


#: tests/fake_cuda: a ``torch.cuda`` that puts a GPU in sight of every Python started with it.
FAKE_CUDA = REPO_ROOT / "tests" / "fake_cuda"


def cuda_in_sight(log: Path) -> dict[str, str]:
    """This environment with a GPU in sight of every Python started in it (``tests/fake_cuda``;
    not of the sandboxed workers, which start ``python -I`` in an environment of their own), its
    fake logging to ``log``. ``CUDA_VISIBLE_DEVICES`` is left out: set to nothing it hides the
    GPU, as from a CPU test's processes (tests/conftest.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH")}
    return {**env, "PYTHONPATH": str(FAKE_CUDA), "LAUNCH_TAX_FAKE_CUDA": "1", "LAUNCH_TAX_FAKE_CUDA_LOG": str(log)}


def gpu_seen(log: Path) -> dict[str, bool]:
    """From a fake-CUDA log: ``{pid: saw a GPU}`` of every process that asked."""
    return {
        pid: what == "True" for pid, what in (line.split() for line in log.read_text().splitlines()) if what != "exit"
    }


def ended(log: Path) -> list[str]:
    """From a fake-CUDA log: the pids of the processes that ended, in the order they ended."""
    return [pid for pid, what in (line.split() for line in log.read_text().splitlines()) if what == "exit"]


def fake_nvidia_smi(folder: Path, gpus: str, apps: str, grow_mib: int = 0) -> Path:
    """``tests/fake_smi/nvidia-smi`` in ``folder`` (put it first on PATH), answering ``gpus`` and
    ``apps``, the device's used memory growing by ``grow_mib`` at each question (its docstring
    says how)."""
    import sys

    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "nvidia-smi"
    script = (REPO_ROOT / "tests" / "fake_smi" / "nvidia-smi").read_text()
    tool.write_text(f"#!{sys.executable}\n" + script.split("\n", 1)[1])  # this Python
    tool.chmod(0o755)
    (folder / "gpus.csv").write_text(gpus)
    (folder / "apps.csv").write_text(apps)
    if grow_mib:
        (folder / "grow_mib").write_text(str(grow_mib))
    return tool


def gradescope_shell(command: list[str]) -> list[str]:
    """``command`` in a mount namespace where the Python under /root can be run by other users,
    as on Gradescope's images (Python in /usr): the workers run as other uids there."""
    from grader import isolation

    inside = [d for d in isolation._python_dirs(["/root"]) if d.startswith("/root/")]
    if not inside or os.stat("/root").st_mode & 0o001:
        return command
    script = (
        "set -e; mount --make-rprivate /; i=0; for d in $PY; do mkdir -p /run/lt-park-$$-$i; "
        "mount --bind $d /run/lt-park-$$-$i; i=$((i+1)); done; mount -t tmpfs -o mode=755 tmpfs /root; "
        "i=0; for d in $PY; do mkdir -p $d; mount --move /run/lt-park-$$-$i $d; i=$((i+1)); done; "
        'exec "$@"'
    )
    return ["env", f"PY={' '.join(inside)}", "unshare", "--mount", "sh", "-c", script, "gs", *command]
