"""What ``nvidia-smi`` says of this machine's GPUs: each device's memory, and what given
processes hold on them. Its memory figures are the whole device's, whoever holds them; only the
per-process list (``--query-compute-apps``) says whose. ``smi``: the tool to ask (a stand-in in
the tests), else the one on PATH.

"Holds nothing" and "cannot be seen here" are two answers: ``gpu_bytes_of`` says 0 for processes
that hold nothing and None where it cannot tell (no nvidia-smi, or no figure for one of them:
``[N/A]``, ``[Not Supported]``, as under MIG or vGPU). Whether this machine's processes can be
seen at all one answer cannot tell: in a container nvidia-smi may list no process, or the host's
pids, and every worker then seems to hold nothing. ``memory_visibility`` asks once, with a
process of its own that holds GPU memory: the judge before its GPU workers (their memory cap
and the leftover check rest on it), and the doctor."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass


def gpu_memory(smi: str | None = None) -> dict[str, dict] | None:
    """``{index: {"total": bytes, "used": bytes}}`` of this machine's GPUs, from ``nvidia-smi``
    (None where it cannot be asked)."""
    out = _smi(["--query-gpu=index,memory.total,memory.used", "--format=csv,noheader,nounits"], smi)
    if out is None:
        return None
    found = {}
    for line in out.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 3 and all(x.replace(".", "", 1).isdigit() for x in parts[1:]):
            found[parts[0]] = {"total": int(float(parts[1])) << 20, "used": int(float(parts[2])) << 20}
    return found


@dataclass(frozen=True)
class App:
    """One line of ``nvidia-smi --query-compute-apps=pid,used_memory``: a process using a GPU."""

    pid: int
    used: int | None  # bytes; None where nvidia-smi printed no figure ("[N/A]", "[Not Supported]")
    shown: str  # the figure as nvidia-smi printed it


def compute_apps(smi: str | None = None) -> list[App] | None:
    """Every process nvidia-smi lists as using a GPU (one line per process and GPU), or None
    where it cannot be asked."""
    out = _smi(["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"], smi)
    if out is None:
        return None
    apps = []
    for line in out.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            figure = parts[1]
            used = int(float(figure)) << 20 if figure.replace(".", "", 1).isdigit() else None
            apps.append(App(int(parts[0]), used, figure))
    return apps


def gpu_bytes_of(pids: set[int], smi: str | None = None) -> int | None:
    """Device memory the processes ``pids`` hold, on every GPU (``nvidia-smi``'s compute apps):
    0 when none of them is listed; None where that cannot be seen (nvidia-smi cannot be asked,
    or prints no figure for one of them). Whether an unlisted process holds nothing or is
    hidden (a container) only ``memory_visibility`` tells."""
    apps = compute_apps(smi)
    if apps is None:
        return None
    mine = [app for app in apps if app.pid in pids]
    if any(app.used is None for app in mine):
        return None
    return sum(app.used or 0 for app in mine)


@dataclass(frozen=True)
class Visibility:
    """Whether nvidia-smi shows the GPU memory of this machine's processes: ``why`` says what
    was seen (visible) or why it is not."""

    visible: bool
    why: str


#: A process that holds GPU memory (its CUDA context and 16 MiB) until its stdin closes.
HOLDER = (
    "import sys, torch\n"
    "held = torch.ones(1 << 22, device='cuda')\n"
    "torch.cuda.synchronize()\n"
    "print('holding', flush=True)\n"
    "sys.stdin.read()\n"
)


def visibility_of(holder: int, smi: str | None = None) -> Visibility:
    """Whether nvidia-smi lists the process ``holder`` (a pid as this machine sees it, of a
    process that holds GPU memory now) with the memory it holds; if not, why (no process
    listed, pids not ours, no figures)."""
    apps = compute_apps(smi)
    if apps is None:
        where = smi or shutil.which("nvidia-smi")
        return Visibility(False, f"nvidia-smi cannot be asked ({f'{where} failed' if where else 'not on PATH'})")
    mine = [app for app in apps if app.pid == holder]
    if mine and all(app.used for app in mine):
        held = sum(app.used or 0 for app in mine)
        return Visibility(True, f"nvidia-smi lists the probe process (pid {holder}) with the {held >> 20} MiB it holds")
    if mine:
        shown = ", ".join(sorted({app.shown for app in mine}))
        return Visibility(
            False, f"nvidia-smi lists the probe process (pid {holder}) but its memory as {shown} (MIG or vGPU?)"
        )
    if not apps:
        return Visibility(False, f"nvidia-smi lists no process while the probe process (pid {holder}) holds GPU memory")
    pids = sorted({app.pid for app in apps})
    shown = ", ".join(map(str, pids[:8])) + (", ..." if len(pids) > 8 else "")
    here = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
    whose = "none of them a process here: the host's pids?" if not here else "pids not ours"
    return Visibility(
        False, f"nvidia-smi lists pids {shown} ({whose}), not the probe process (pid {holder}) that holds GPU memory"
    )


def memory_visibility(
    smi: str | None = None,
    holder: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 120.0,
    settle_s: float = 2.0,
) -> Visibility:
    """Start a process that holds GPU memory (``holder``: its command, default ``HOLDER`` run by
    this Python, in ``env``), and ask nvidia-smi (for up to ``settle_s``) whether it lists it
    with that memory; the process is ended before this returns. Not visible, saying why, also
    where the probe could not hold memory within ``timeout_s``."""
    command = holder or [sys.executable, "-c", HOLDER, "launch-tax-gpu-memory-probe"]
    errors = tempfile.TemporaryFile()
    try:
        proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True, env=env
        )
    except OSError as exc:
        errors.close()
        return Visibility(False, f"not checked: the probe process could not start ({exc})")
    try:
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not got or got[0].strip() != "holding":
            if reader.is_alive():
                return Visibility(False, f"not checked: the probe process held no GPU memory within {timeout_s:.0f} s")
            proc.wait(timeout=10)
            errors.seek(0)
            lines = [x.strip() for x in errors.read().decode("utf-8", "replace").splitlines() if x.strip()]
            last = lines[-1] if lines else "no output"
            return Visibility(False, f"not checked: the probe process could not hold GPU memory ({last})")
        deadline = time.monotonic() + settle_s
        while True:
            seen = visibility_of(proc.pid, smi)
            if seen.visible or time.monotonic() > deadline:
                return seen
            time.sleep(0.25)
    finally:
        proc.kill()  # what it holds is freed with it
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        errors.close()


def _smi(args: list[str], smi: str | None) -> str | None:
    tool = smi or shutil.which("nvidia-smi")
    if not tool:
        return None
    try:
        done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
