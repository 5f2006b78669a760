"""Running one worker: a fresh process in a private folder, with limits, and swept when done.

Always: a wall-clock timeout after which the worker's whole process group is killed; resource
limits (address space for CPU workers, file size, open files, no core dumps, a process cap); a cap
on what it prints (a flood kills it); a cap on its result; only a minimal environment.

When the judge runs as root (a grading server, CI) the worker also gets, through ``unshare`` and
``setpriv`` (util-linux):

* a PID namespace: when the worker dies, the kernel kills everything it started, double-forked
  daemons included;
* a network namespace with no interfaces up: no network;
* a mount namespace in which the repository (solutions, hidden checks, rubric) and every other
  path the judge names are covered by empty, unreadable tmpfs; ``/root`` is covered too, except
  the Python installation the worker needs; the root filesystem is read-only; only the worker's
  own folder is writable;
* its own unprivileged user id (one per slot, so the process cap is its own), no capabilities,
  ``no_new_privs``.

Without root those protections are off and ``protections()`` says so, for the report.
"""

from __future__ import annotations

import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

WORKER_UID_BASE = 61000  # worker uids: WORKER_UID_BASE + slot; no account needed


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 60.0
    memory_bytes: int | None = 4 << 30  # RLIMIT_AS; None for GPU workers (CUDA needs more)
    output_bytes: int = 1 << 20  # what it may print before it is killed as a flood
    result_bytes: int = 64 << 20
    file_bytes: int = 64 << 20
    processes: int = 64
    open_files: int = 256


@dataclass
class Run:
    result: bytes
    returncode: int | None
    timed_out: bool = False
    flooded: bool = False
    result_too_big: bool = False
    output: str = ""
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def failure(self) -> str | None:
        """Why the worker's run cannot be used, or None."""
        if self.timed_out:
            return "timed out"
        if self.flooded:
            return "printed more output than allowed (output flood)"
        if self.result_too_big:
            return "sent a result larger than allowed"
        if self.returncode is not None and self.returncode < 0:
            name = signal.Signals(-self.returncode).name if -self.returncode in signal.valid_signals() else ""
            return f"crashed (killed by signal {-self.returncode} {name})".rstrip()
        return None


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("unshare") is not None \
        and shutil.which("setpriv") is not None


def protections() -> dict[str, bool]:
    """Which protections a worker gets on this machine (for the report)."""
    root = is_root()
    return {"timeout and process-group kill": True, "resource limits": True,
            "output and result caps": True, "daemon sweep (PID namespace)": root,
            "no network": root, "repository hidden": root, "read-only filesystem": root,
            "separate unprivileged user": root}


def make_box(runtime: dict[str, bytes], submission: dict[str, bytes], request: bytes) -> Path:
    """A private folder: ``runtime/`` (the worker's own code), ``submission/`` (the copied
    module files), ``request.json`` and an empty writable ``work/``."""
    box = Path(tempfile.mkdtemp(prefix="launch-tax-box-"))
    os.chmod(box, 0o755)
    for base, files in (("runtime", runtime), ("submission", submission)):
        for rel, data in files.items():
            path = box / base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    (box / "request.json").write_bytes(request)
    (box / "work").mkdir()
    (box / "park").mkdir()
    for path in box.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return box


def remove_box(box: Path) -> None:
    shutil.rmtree(box, ignore_errors=True)


_ENTER = r"""
set -eu
box=$1; uid=$2; shift 2
mount --make-rprivate /
# The interpreter may live under /root: park it, cover /root, bring it back.
i=0
for dir in $PARK; do
  mkdir -p "$box/park/$i" && mount --bind "$dir" "$box/park/$i"; i=$((i + 1))
done
if [ -n "$PARK" ]; then mount -t tmpfs -o mode=755,size=1m tmpfs /root; fi
i=0
for dir in $PARK; do
  mkdir -p "$dir" && mount --move "$box/park/$i" "$dir"; i=$((i + 1))
done
for dir in $HIDE; do
  if [ -e "$dir" ]; then mount -t tmpfs -o mode=000,size=64k tmpfs "$dir"; fi
done
mount --bind "$box/work" "$box/work"
mount -t tmpfs -o ro,size=64k tmpfs /dev/shm
mount -o remount,bind,ro /
chown "$uid:$uid" "$box/work"
cd "$box/work"
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs \
  --bounding-set=-all --inh-caps=-all "$@"
"""


def _python_dirs_under_root() -> list[str]:
    """Top folders under /root that the worker's Python needs (interpreter, stdlib, packages)."""
    needed = {sys.base_prefix, sys.prefix, *site.getsitepackages(), os.path.dirname(sys.executable)}
    tops = set()
    for path in needed:
        real = os.path.realpath(path)
        if real.startswith("/root/"):
            tops.add("/root/" + real.split("/")[2])
    return sorted(tops)


def run(box: Path, limits: Limits, *, gpu: bool = False, hide: tuple[Path, ...] = (),
        slot: int = 0) -> Run:
    """Run ``runtime/worker.py`` in ``box``; return what it sent on its result pipe."""
    read_fd, write_fd = os.pipe()
    python = [sys.executable, "-I", "-B", str(box / "runtime" / "worker.py"),
              str(box / "request.json"), str(write_fd)]
    rlimits = [f"--fsize={limits.file_bytes}", "--core=0", f"--nproc={limits.processes}",
               f"--nofile={limits.open_files}"]
    if limits.memory_bytes and not gpu:
        rlimits.append(f"--as={limits.memory_bytes}")
    command = ["prlimit", *rlimits, "--", *python]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "LAUNCH_TAX_BOX": box.name,
           "HOME": str(box / "work"), "TMPDIR": str(box / "work")}
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # CPU checks run as on a laptop, on every machine
    elif "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    notes = []
    if is_root():
        hidden = " ".join(str(Path(p).resolve()) for p in hide)
        env_for_enter = {**env, "PARK": " ".join(_python_dirs_under_root()), "HIDE": hidden}
        command = ["unshare", "--mount", "--net", "--pid", "--fork", "--kill-child",
                   "--mount-proc", "sh", "-c", _ENTER, "enter", str(box),
                   str(WORKER_UID_BASE + slot), *command]
        env = env_for_enter
    else:
        os.chmod(box / "work", 0o777)
        notes.append("not root: no PID/network/mount namespaces, no separate user")

    start = time.monotonic()
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, pass_fds=(write_fd,), env=env,
                            cwd=box / "work", start_new_session=True)
    os.close(write_fd)
    output = _Drain(proc.stdout.fileno(), limits.output_bytes, close=False)
    result = _Drain(read_fd, limits.result_bytes, close=True)
    deadline = start + limits.timeout_s
    timed_out = False
    while proc.poll() is None:
        if output.over or result.over:
            break
        if time.monotonic() > deadline:
            timed_out = True
            break
        time.sleep(0.01)
    _kill_group(proc)
    _sweep(box.name)
    output.join(timeout=5)
    result.join(timeout=5)
    proc.stdout.close()
    return Run(result=b"".join(result.chunks) if not result.over else b"",
               returncode=None if (timed_out or output.over or result.over) else proc.returncode,
               timed_out=timed_out, flooded=output.over, result_too_big=result.over,
               output=b"".join(output.chunks)[-4000:].decode("utf-8", "replace"),
               wall_s=time.monotonic() - start, notes=notes)


class _Drain(threading.Thread):
    """Reads a pipe to the end, keeping at most ``cap`` bytes; ``over`` once more arrived."""

    def __init__(self, fd: int, cap: int, close: bool):
        super().__init__(daemon=True)
        self.fd, self.cap, self.close = fd, cap, close
        self.over, self.size, self.chunks = False, 0, []
        self.start()

    def run(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 16):
                self.size += len(chunk)
                if self.size > self.cap:
                    self.over = True
                    continue
                self.chunks.append(chunk)
        except OSError:
            pass
        finally:
            if self.close:
                os.close(self.fd)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _sweep(marker: str) -> None:
    """Kill any process still carrying this box's marker in its environment (a daemon that left
    the process group; in a PID namespace the kernel has already done this)."""
    needle = f"LAUNCH_TAX_BOX={marker}".encode()
    for _ in range(3):
        found = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        os.kill(int(entry.name), signal.SIGKILL)
                        found = True
            except (OSError, ValueError):
                continue
        if not found:
            return
        time.sleep(0.05)
