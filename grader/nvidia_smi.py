"""What ``nvidia-smi`` says of this machine's GPUs: each device's memory, and what given
processes hold on them. Its memory figures are the whole device's, whoever holds them; only the
per-process list (``--query-compute-apps``) says whose. ``smi``: the tool to ask (a stand-in in
the tests), else the one on PATH; every answer is None or 0 where it cannot be asked."""

from __future__ import annotations

import shutil
import subprocess


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


def gpu_bytes_of(pids: set[int], smi: str | None = None) -> int:
    """Device memory the processes ``pids`` hold, on every GPU (``nvidia-smi``'s compute apps;
    0 where it cannot be asked)."""
    out = _smi(["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"], smi)
    total = 0
    for line in (out or "").splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].replace(".", "", 1).isdigit():
            if int(parts[0]) in pids:
                total += int(float(parts[1])) << 20
    return total


def _smi(args: list[str], smi: str | None) -> str | None:
    tool = smi or shutil.which("nvidia-smi")
    if not tool:
        return None
    try:
        done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
