"""Running one worker: a fresh process in a private folder, with limits, and swept when done.

Always: a wall-clock timeout after which the worker's whole process group is killed; resource
limits (address space for CPU workers, file size, open files, no core dumps, a process cap); a cap
on what it prints (a flood kills it); a cap on its result; only a minimal environment (no variable
of the judge's or of the sandbox's set-up); the worker's own seccomp filter against keyrings
(``grader/worker.py``).

When the judge runs as root (a grading server, CI) the worker also gets, through ``unshare`` and
``setpriv`` (util-linux):

* a PID namespace: when the worker dies, the kernel kills everything it started, double-forked
  daemons included;
* a network namespace with no interfaces up: no network;
* an IPC namespace: System V shared memory, semaphores and message queues made by one worker are
  invisible to every other and vanish with it (they would otherwise outlive the worker, and the
  address-space limit and the memory watchdog, on the host);
* a mount namespace in which the repository (solutions, hidden checks, rubric) and every other
  path the judge names are covered by empty, unreadable tmpfs; so is every top-level folder but
  the system's (``/root``, ``/home``, ``/tmp``, ``/var``, ``/opt``, a ``/work`` holding another
  checkout...: copies of the repository, other boxes), except the worker's own box and the
  Python installation it needs (also when that Python is a virtual environment inside the
  repository); the root filesystem is read-only; only the worker's ``work/`` folder (a tmpfs of
  ``Limits.work_bytes``) and its own empty ``/dev/shm`` are writable;
* its own unprivileged user id, leased for the run so that no other worker on the machine (of
  this judge or another one) shares it and its process cap; no capabilities, ``no_new_privs``.

A worker that leaves the process group (``setsid``) and forgets its environment is still ended:
the judge kills the PID namespace's first process by its id, which ends the whole namespace.

As root where namespaces cannot be made (a container without CAP_SYS_ADMIN, as on Gradescope),
or when ``LAUNCH_TAX_SANDBOX=user`` asks for it, the worker still runs as its own unprivileged
uid without capabilities (``setpriv``): it cannot read what only root may read (the grading
secret, the reference, the results file, when their owner keeps them mode 700). Without root
those protections are off. ``protections()`` says which are on, for the report.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader import cleanup, wire

WORKER_UID_BASE = cleanup.WORKER_UID_BASE  # worker uids: WORKER_UID_BASE + slot; no account needed


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 60.0
    #: RLIMIT_AS for CPU workers (None: none; GPU workers never get one, CUDA maps a lot). The
    #: judge sets it from what ``import torch`` alone maps on this machine (its canary worker).
    memory_bytes: int | None = 4 << 30
    output_bytes: int = 1 << 20  # what it may print before it is killed as a flood
    result_bytes: int = 2 * wire.MAX_FRAME_BYTES  # all its answer frames together
    file_bytes: int = 64 << 20
    processes: int = 64
    open_files: int = 256
    work_bytes: int = 128 << 20  # the worker's writable folder (a tmpfs: memory, not disk)
    #: Resident memory of all the worker's processes together, watched by the judge: the guard
    #: for GPU workers (which cannot have an address-space limit) and for fork-and-allocate.
    total_rss_bytes: int = 6 << 30
    #: When the time limit was cut to what was left of the grading's whole time budget
    #: (``--deadline``): that budget, for the report.
    budget_s: float = 0.0
    #: Device memory all of a GPU worker's processes may hold together, watched by the judge
    #: through ``nvidia-smi`` (None: not watched): a worker over it is killed, so one student's
    #: hog cannot cost the students beside it their GPU points.
    gpu_bytes: int | None = None


@dataclass
class Run:
    answers: list[bytes]  # the answer frames received, one per request frame answered
    returncode: int | None
    timed_out: bool = False
    out_of_memory: bool = False
    out_of_gpu_memory: bool = False
    flooded: bool = False
    result_too_big: bool = False
    malformed: str = ""  # why the result stream stopped being trusted
    output: str = ""
    wall_s: float = 0.0
    timeout_s: float = 0.0  # the limit it ran under
    first_timeout_s: float = 0.0  # when it was a second try: the first try's limit
    budget_s: float = 0.0  # when the grading's whole time budget cut or stopped it: that budget
    leftovers: list[str] = field(default_factory=list)  # what the worker's uid left behind it
    #: A GPU worker's processes as the host saw them, ``{pid: start time}`` (``process_start``):
    #: after the run, only these can be charged with memory left on the device (``settle_gpu``).
    pids: dict[int, int] = field(default_factory=dict)

    def failure(self) -> str | None:
        """Why the worker's run ended badly, or None (answers received before it still count)."""
        if self.timed_out:
            budget = (f"the grading's whole time budget (--deadline {self.budget_s:.0f} s) ran out"
                      if self.budget_s else "")
            if not self.timeout_s:  # never started
                return (f"was not run: {budget}" + (f" (its first try timed out after "
                                                    f"{self.first_timeout_s:.0f} s)" if self.first_timeout_s else ""))
            if self.first_timeout_s:
                text = (f"timed out twice (after {self.first_timeout_s:.0f} s, then after "
                        f"{self.timeout_s:.0f} s)")
            else:
                text = f"timed out (after {self.timeout_s:.0f} s)"
            return f"{text}; {budget}" if budget else text
        if self.out_of_memory:
            return "used more memory than allowed"
        if self.out_of_gpu_memory:
            return "used more GPU memory than its share of the device"
        if self.flooded:
            return "printed more output than allowed (output flood)"
        if self.result_too_big:
            return "sent a result larger than allowed"
        if self.malformed:
            return f"sent a malformed result ({self.malformed})"
        if self.returncode is not None and self.returncode < 0:
            name = signal.Signals(-self.returncode).name if -self.returncode in signal.valid_signals() else ""
            return f"crashed (killed by signal {-self.returncode} {name})".rstrip()
        return None


_NAMESPACES_WORK: bool | None = None
_NAMESPACES_LOCK = threading.Lock()


def is_root() -> bool:
    """Root, with ``unshare`` and ``setpriv``, and namespaces that can really be made (a root
    inside a container without CAP_SYS_ADMIN cannot): tried once, then remembered. Workers start
    from several threads: none may see an answer before the trial is over."""
    global _NAMESPACES_WORK
    with _NAMESPACES_LOCK:
        if _NAMESPACES_WORK is None:
            works = False
            if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("unshare") \
                    and shutil.which("setpriv"):
                try:
                    trial = subprocess.run(["unshare", "--mount", "--net", "--pid", "--ipc", "--fork",
                                            "true"], capture_output=True, timeout=30)
                    works = trial.returncode == 0
                except (OSError, subprocess.TimeoutExpired):
                    pass
            _NAMESPACES_WORK = works and os.environ.get("LAUNCH_TAX_SANDBOX") != "user"
        return _NAMESPACES_WORK


def drops_privileges() -> bool:
    """Workers run as an unprivileged uid of their own: root, with ``setpriv`` (with or without
    namespaces)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("setpriv") is not None


def protections() -> dict[str, bool]:
    """Which protections a worker gets on this machine (for the report). The keyring filter is
    the worker's own: the judge's canary worker says whether it could be installed."""
    root = is_root()
    return {"timeout and process-group kill": True, "resource limits": _has_prlimit(),
            "output and result caps": True, "daemon sweep (PID namespace)": root,
            "no network": root, "repository hidden": root, "read-only filesystem": root,
            "separate unprivileged user": drops_privileges(),
            "private IPC (System V, POSIX queues)": root}


def make_box(runtime: dict[str, bytes], submission: dict[str, bytes]) -> Path:
    """A private folder: ``runtime/`` (the worker's own code), ``submission/`` (the copied
    module files) and an empty writable ``work/``."""
    box = Path(tempfile.mkdtemp(prefix="launch-tax-box-"))
    os.chmod(box, 0o755)
    for base, files in (("runtime", runtime), ("submission", submission)):
        for rel, data in files.items():
            path = box / base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    (box / "work").mkdir()
    for path in box.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return box


def remove_box(box: Path) -> None:
    shutil.rmtree(box, ignore_errors=True)


_ENTER = r"""
set -eu
box=$1; uid=$2; shift 2
mount --make-rprivate /
# Park the box and the Python folders that live under a folder about to be covered or hidden on a
# private tmpfs; cover the top-level folders (/root, /tmp, ...) with empty tmpfs and hide the
# judge's folders (the repository...) under unreadable ones; bring the parked folders back.
mount -t tmpfs -o mode=700,size=1m tmpfs /dev/shm
i=0
for dir in "$box" $PARK; do
  mkdir -p "/dev/shm/$i" && mount --bind "$dir" "/dev/shm/$i"; i=$((i + 1))
done
for dir in $COVER; do
  if [ -d "$dir" ]; then mount -t tmpfs -o mode=755,size=1m tmpfs "$dir"; fi
done
for dir in $HIDE; do
  if [ -e "$dir" ]; then mount -t tmpfs -o mode=000,size=64k tmpfs "$dir"; fi
done
for dir in $TRAVERSE; do  # a hidden folder the worker's Python lies in: passable, not listable
  if [ -d "$dir" ]; then chmod 711 "$dir"; fi
done
i=0
for dir in "$box" $PARK; do
  mkdir -p "$dir" && mount --move "/dev/shm/$i" "$dir"; i=$((i + 1))
done
mount -t tmpfs -o "mode=700,size=$WORK_BYTES" tmpfs "$box/work"
chown "$uid:$uid" "$box/work"
umount /dev/shm
mount -t tmpfs -o mode=1777,size=64m tmpfs /dev/shm
if [ -d /dev/mqueue ]; then mount -t tmpfs -o ro,size=4k tmpfs /dev/mqueue; fi
mount -o remount,bind,ro "$box"
mount -o remount,bind,ro /
cd "$box/work"
unset PARK COVER HIDE TRAVERSE WORK_BYTES OLDPWD
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs \
  --bounding-set=-all --inh-caps=-all "$@"
"""

#: Top-level folders a worker keeps (the system: programs, libraries, configuration, devices).
#: Every other one (/root, /home, /tmp, /var, /run, /opt, /srv, /mnt, a /work holding another
#: checkout...) is covered with an empty tmpfs, except the worker's box and its Python.
SYSTEM = {"usr", "etc", "dev", "proc", "sys", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}


def _top_level_folders() -> list[str]:
    folders = []
    for entry in os.scandir("/"):
        if entry.name not in SYSTEM and entry.is_dir(follow_symlinks=False):
            folders.append(entry.path)
    return folders


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _covered(box: Path) -> list[str]:
    parent = os.path.realpath(box.parent)
    dirs = _top_level_folders() + ([parent] if parent != "/" else [])
    return sorted({d for d in dirs if not any(d != c and _under(d, c) for c in dirs)}, key=len)


def _python_dirs(hidden: list[str]) -> list[str]:
    """The folders of the worker's Python (interpreter, stdlib, packages) that lie under a covered
    or hidden folder: the top folder under /root (as ``/root/.pyenv``), else the folder itself
    (a virtual environment inside the repository: ``<repo>/.venv``)."""
    needed = {sys.base_prefix, sys.prefix, *site.getsitepackages(), os.path.dirname(sys.executable),
              os.path.dirname(os.path.realpath(sys.executable))}
    dirs = set()
    for path in needed:
        real = os.path.realpath(path)
        if real.startswith("/root/"):
            dirs.add("/root/" + real.split("/")[2])
        elif any(_under(real, c) for c in hidden):
            dirs.add(real)
    return sorted(d for d in dirs if not any(d != o and _under(d, o) for o in dirs))


#: What a GPU worker needs of the judge's environment to find the driver and the device: the
#: loader's path (an image whose libcuda.so.1 is found only through it), the container runtime's
#: NVIDIA_* settings, the CUDA toolkit and Triton's tool paths.
GPU_PASSTHROUGH = ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "TRITON_PTXAS_PATH",
                   "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH", "TRITON_LIBCUDA_PATH")


def worker_environment(box: Path, gpu: bool, device: str | None = None) -> dict[str, str]:
    """Everything a worker's environment holds: none of the judge's variables, except, for a GPU
    worker, those CUDA needs (``GPU_PASSTHROUGH`` and ``NVIDIA_*``); ``device`` pins a GPU
    worker to one device (``CUDA_VISIBLE_DEVICES``), else it sees what the judge sees."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "LAUNCH_TAX_BOX": box.name,
           "HOME": str(box / "work"), "TMPDIR": str(box / "work"),
           # The worker's uid has no passwd entry: getpass.getuser() (torch's inductor asks on
           # import) reads these first; inductor compiles in the worker itself, not in a pool.
           "USER": "launch-tax-worker", "LOGNAME": "launch-tax-worker",
           "TORCHINDUCTOR_COMPILE_THREADS": "1"}
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # CPU checks run as on a laptop, on every machine
        return env
    env.update({k: v for k, v in os.environ.items() if k in GPU_PASSTHROUGH or k.startswith("NVIDIA_")})
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    elif "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env


def run(box: Path, limits: Limits, requests: list[bytes], *, gpu: bool = False,
        hide: tuple[Path, ...] = (), slot: int = 0, device: str | None = None) -> Run:
    """Run ``runtime/worker.py`` in ``box``: send it the first request frame, each next one only
    once the previous one is answered; return the answer frames it sent. ``device``: the GPU a
    GPU worker may see (``CUDA_VISIBLE_DEVICES``)."""
    command_read, command_write = os.pipe()
    result_read, result_write = os.pipe()
    python = [sys.executable, "-I", "-B", str(box / "runtime" / "worker.py"), str(command_read),
              str(result_write)]
    rlimits = [f"--fsize={limits.file_bytes}", "--core=0", f"--nofile={limits.open_files}"]
    if limits.memory_bytes and not gpu:
        rlimits.append(f"--as={limits.memory_bytes}")
    env = worker_environment(box, gpu, device)
    lease = uid = None
    if is_root():
        rlimits.append(f"--nproc={limits.processes}")  # the worker's own uid: its tasks only
        covered = _covered(box)
        hidden = [str(Path(p).resolve()) for p in hide]
        park = _python_dirs(covered + hidden)
        traverse = [h for h in hidden if any(_under(d, h) for d in park)]
        env_for_enter = {**env, "PARK": " ".join(park), "COVER": " ".join(covered),
                         "HIDE": " ".join(hidden), "TRAVERSE": " ".join(traverse),
                         "WORK_BYTES": str(limits.work_bytes)}
        uid, lease = _lease_uid(slot)
        command = ["unshare", "--mount", "--net", "--pid", "--ipc", "--fork", "--kill-child",
                   "--mount-proc", "sh", "-c", _ENTER, "enter", str(box), str(uid)]
        env = env_for_enter
    elif drops_privileges():  # no namespaces (a container): only its own uid protects the rest
        rlimits.append(f"--nproc={limits.processes}")
        uid, lease = _lease_uid(slot)
        os.chown(box / "work", uid, uid)
        os.chmod(box / "work", 0o700)
        command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                   "--bounding-set=-all", "--inh-caps=-all"]
    else:
        # RLIMIT_NPROC counts every task of the uid, the judge's and the desktop's included.
        rlimits.append(f"--nproc={_tasks_of(os.getuid()) + 4 * limits.processes}")
        os.chmod(box / "work", 0o777)  # the report lists the protections that are off
        command = []
    command += ["prlimit", *rlimits, "--", *python] if _has_prlimit() else python

    start = time.monotonic()
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, pass_fds=(command_read, result_write),
                                env=env, cwd=box / "work", start_new_session=True)
    except BaseException:
        for fd in (command_write, result_read) + ((lease,) if lease is not None else ()):
            os.close(fd)
        raise
    finally:
        os.close(command_read)
        os.close(result_write)
    talk = _Conversation(command_write, result_read, requests, limits.result_bytes)
    output = _Drain(proc.stdout.fileno(), limits.output_bytes)
    deadline = start + limits.timeout_s
    timed_out = out_of_memory = out_of_gpu = False
    ticks = 0
    seen: dict[int, int] = {}

    def look() -> set[int]:
        """The worker's processes now, each noted with its start time (a pid can be reused)."""
        found = _worker_pids(proc.pid, uid)
        for pid in found:
            started = process_start(pid)
            if started is not None:
                seen.setdefault(pid, started)
        return found

    while proc.poll() is None:
        if output.over or talk.over or talk.reader.error:
            break
        if time.monotonic() > deadline:
            timed_out = True
            break
        ticks += 1
        if ticks % 20 == 0 and _resident_bytes(uid, box.name) > limits.total_rss_bytes:
            out_of_memory = True
            break
        if gpu and ticks % 50 == 0:
            pids = look()
            if limits.gpu_bytes and gpu_bytes_of(pids) > limits.gpu_bytes:
                out_of_gpu = True
                break
        time.sleep(0.01)
    if gpu:
        look()  # what is still there as it ends: the processes that could leave memory behind
    _kill_group(proc)
    _sweep(box.name)
    leftovers = []
    if uid is not None and not is_root():  # no namespaces: the uid itself must be made clean
        leftovers = release_uid(uid, box)
    if lease is not None and not any("would not die" in x for x in leftovers):
        os.close(lease)  # the uid owns no process and no file: another worker may have it
    output.join(timeout=5)
    talk.finish()
    proc.stdout.close()
    stopped = timed_out or out_of_memory or out_of_gpu or output.over or talk.over or bool(talk.reader.error)
    return Run(answers=[] if talk.over else list(talk.reader.frames),
               returncode=None if stopped else proc.returncode,
               timed_out=timed_out, out_of_memory=out_of_memory, out_of_gpu_memory=out_of_gpu,
               flooded=output.over,
               result_too_big=talk.over, malformed=talk.reader.error or "",
               output=b"".join(output.chunks)[-4000:].decode("utf-8", "replace"),
               wall_s=time.monotonic() - start, timeout_s=limits.timeout_s, budget_s=limits.budget_s,
               leftovers=leftovers, pids=seen)


class _Drain(threading.Thread):
    """Reads a pipe to the end, keeping at most ``cap`` bytes; ``over`` once more arrived. It
    reads its own copy of the descriptor and closes it, so the number is never reused under it."""

    def __init__(self, fd: int, cap: int, on_chunk=None):
        super().__init__(daemon=True)
        self.fd, self.cap, self.on_chunk = os.dup(fd), cap, on_chunk
        self.over, self.size, self.chunks = False, 0, []
        self.start()

    def run(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 16):
                self.size += len(chunk)
                if self.size > self.cap:
                    self.over = True
                    continue
                if self.on_chunk is None:
                    self.chunks.append(chunk)
                else:
                    self.on_chunk(chunk)
        except OSError:
            pass
        finally:
            os.close(self.fd)


class _Conversation:
    """The judge's side of the worker's two pipes: request frames out, answer frames in. Request
    ``k + 1`` is written only after answer ``k`` has arrived; the command pipe is closed after
    the last request (the worker then finishes)."""

    def __init__(self, command_fd: int, result_fd: int, requests: list[bytes], cap: int):
        self.requests = [wire.frame(r) for r in requests]
        self.reader = wire.FrameReader()
        self.sent, self.lock = 0, threading.Lock()
        self.outbox: "queue.Queue[bytes | None]" = queue.Queue()
        self.writer = threading.Thread(target=self._write, args=(command_fd,), daemon=True)
        self.writer.start()
        self._send_next()
        self.drain = _Drain(result_fd, cap, on_chunk=self._received)
        os.close(result_fd)

    @property
    def over(self) -> bool:
        return self.drain.over

    def _send_next(self) -> None:
        with self.lock:
            if self.sent < len(self.requests):
                self.outbox.put(self.requests[self.sent])
                self.sent += 1
                if self.sent == len(self.requests):
                    self.outbox.put(None)

    def _received(self, chunk: bytes) -> None:
        for _ in self.reader.feed(chunk):
            if len(self.reader.frames) == self.sent:
                self._send_next()

    def _write(self, fd: int) -> None:
        try:
            while (data := self.outbox.get()) is not None:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
        except OSError:  # the worker is gone: nobody reads any more
            pass
        finally:
            os.close(fd)

    def finish(self) -> None:
        self.drain.join(timeout=5)
        self.outbox.put(None)
        self.writer.join(timeout=5)


def _tasks_of(uid: int) -> int:
    """Tasks (processes and threads) of ``uid`` right now."""
    count = 0
    for entry in _processes():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry.name}").st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return count


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker's process group, and first ``proc``'s own children: under ``unshare``
    that is the PID namespace's first process (the worker), whose death ends the namespace even
    if the worker left the group (``setsid``) and its environment (``execve``)."""
    for child in _children(proc.pid):
        try:
            os.kill(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _has_prlimit() -> bool:
    return shutil.which("prlimit") is not None


def _processes():
    """The entries of /proc (none where there is no /proc: the sweeps then have nothing to do)."""
    return os.scandir("/proc") if os.path.isdir("/proc") else iter(())


def _resident_bytes(uid: int | None, marker: str) -> int:
    """Memory of the worker's processes (those of its own uid as root, else those carrying its
    box marker), each counted by its proportional share (Pss) so that forked children sharing
    their parent's pages are not counted many times over."""
    total, needle = 0, f"LAUNCH_TAX_BOX={marker}".encode()
    for entry in _processes():
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                status = f.read()
            if uid is not None:
                line = status.split(b"\nUid:", 1)[1].split(b"\n", 1)[0].split()
                if int(line[0]) != uid:
                    continue
            else:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if needle not in f.read().split(b"\0"):
                        continue
            with open(f"/proc/{entry.name}/smaps_rollup", "rb") as f:
                rollup = f.read()
            pss = rollup.split(b"\nPss:", 1)[1].split()[0] if b"\nPss:" in rollup else b"0"
            total += int(pss) * 1024
        except (OSError, IndexError, ValueError):
            continue
    return total


def _children(pid: int) -> list[int]:
    children = []
    for entry in _processes():
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid).encode():
            children.append(int(entry.name))
    return children


#: Where the judges on this machine lease worker uids (root only: workers change uid only then).
UID_LEASES = Path("/run/launch-tax-worker-uids")
UID_RANGE = 1024


def _lease_uid(slot: int) -> tuple[int, int | None]:
    """A worker uid held by no other worker on this machine, of this judge or another (their
    slots overlap): ``WORKER_UID_BASE + slot`` or the next free one, locked (``flock``) until the
    returned descriptor is closed. Where no lease can be taken (no usable ``/run``), the slot's
    uid, unlocked, as before leases existed."""
    import fcntl  # POSIX only; leases are taken only as root on Linux

    try:
        UID_LEASES.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(UID_LEASES)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o077:
            raise PermissionError(f"{UID_LEASES} must be a folder only root can use")
        for k in range(UID_RANGE):
            uid = WORKER_UID_BASE + (slot + k) % UID_RANGE
            fd = os.open(UID_LEASES / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return uid, fd
            except OSError:
                os.close(fd)
    except OSError:
        pass
    return WORKER_UID_BASE + slot, None


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


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, ``/proc/PID/stat``), None when there
    is none: with its pid, what tells a process from a later one that got the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[19])  # field 22 of the whole line: starttime
    except (OSError, IndexError, ValueError):
        return None


def settle_gpu(run: Run, device: str, smi: str | None = None, wait_s: float = 5.0) -> str | None:
    """After a GPU worker: wait up to ``wait_s`` for its own processes (``run.pids``, those still
    running as the same processes) to hold no memory on the GPUs; return what they still hold,
    as a line for the report, or None. Memory other processes hold (the judge's reference, a
    grader beside this one, a TA's notebook) is theirs: ``nvidia-smi``'s per-process list, never
    the device's total, decides."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = {pid for pid, started in run.pids.items() if process_start(pid) == started}
        held = gpu_bytes_of(alive, smi) if alive else 0
        if not held:
            return None
        if time.monotonic() > deadline:
            return (f"GPU {device}: the worker's own processes ({', '.join(map(str, sorted(alive)))}) "
                    f"still hold {held >> 20} MiB after it ended")
        time.sleep(0.1)


def _smi(args: list[str], smi: str | None) -> str | None:
    tool = smi or shutil.which("nvidia-smi")
    if not tool:
        return None
    try:
        done = subprocess.run([tool, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _worker_pids(root_pid: int, uid: int | None) -> set[int]:
    """The worker's processes as the host sees them: ``root_pid``'s descendants, and where the
    worker has a uid of its own, every process of that uid."""
    parents: dict[int, int] = {}
    owned: set[int] = set()
    for entry in _processes():
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                status = f.read()
            ppid = int(status.split(b"\nPPid:", 1)[1].split()[0])
            parents[int(entry.name)] = ppid
            if uid is not None and int(status.split(b"\nUid:", 1)[1].split()[0]) == uid:
                owned.add(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    found, changed = {root_pid}, True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True
    return found | owned


_PLACES: list[str] | None = None
_PLACES_LOCK = threading.Lock()
#: Pseudo file systems: nothing a worker writes lives there.
_NOT_PLACES = ("/proc", "/sys")


def shared_places() -> list[str]:
    """Where a worker's uid could leave something for a later worker to find: with namespaces,
    its own ``/dev/shm`` (the rest of its file system is read-only or private); without them
    (Gradescope), every world-writable folder of the machine (``/tmp``, ``/var/tmp``,
    ``/dev/shm``, ``/run/lock``...), found once per run by walking the file system; without root,
    none (the worker is the user: what it writes is the user's)."""
    global _PLACES
    if is_root():
        return ["/dev/shm"]
    if not drops_privileges():
        return []
    with _PLACES_LOCK:
        if _PLACES is None:
            found = []
            for top, dirs, _ in os.walk("/", topdown=True, onerror=lambda e: None):
                if top == "/":
                    dirs[:] = [d for d in dirs if "/" + d not in _NOT_PLACES]
                kept = []
                for d in dirs:
                    path = os.path.join(top, d)
                    try:
                        info = os.lstat(path)
                    except OSError:
                        continue
                    if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002:
                        found.append(path)  # removed from inside; no need to walk it
                    elif stat.S_ISDIR(info.st_mode):
                        kept.append(d)
                dirs[:] = kept
            _PLACES = sorted(found)
        return list(_PLACES)


def release_uid(uid: int, box: Path | None = None) -> list[str]:
    """Make ``uid`` free for the next worker, as root, without namespaces (with them the PID,
    mount and IPC namespaces end with the worker): kill every process of the uid, whatever it did
    to its process group and environment (``kill(-1)`` as that uid, until none is left), then
    remove what it owns in ``shared_places`` and its System V IPC objects. Returns what was found
    (for the report); processes that would not die are named, and the caller keeps the uid's
    lease (nobody gets it) instead of handing it on."""
    found: list[str] = []
    for attempt in range(50):
        alive = _pids_of(uid)
        if not alive:
            break
        if attempt == 0:
            found.append(f"{len(alive)} process(es) outlived the worker")
        pid = os.fork()
        if pid == 0:  # as the uid itself: kill(-1) reaches exactly its processes
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            except BaseException:  # noqa: BLE001 - a forked child: whatever happened, it only exits
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.02)
    else:
        found.append(f"processes of uid {uid} would not die: {_pids_of(uid)[:10]}")
    keep = str(box) if box else ""
    for place in shared_places():
        removed = cleanup.remove_owned(place, uid, 3, keep)
        if removed:
            found.append(f"{removed} file(s) left in {place}")
    removed = cleanup.remove_ipc(uid)
    if removed:
        found.append(f"{removed} System V IPC object(s) left")
    return found


def _pids_of(uid: int) -> list[int]:
    """Processes any of whose uids (real, effective, saved, file system) is ``uid``."""
    pids = []
    for entry in _processes():
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                line = f.read().split(b"\nUid:", 1)[1].split(b"\n", 1)[0]
            if uid in {int(x) for x in line.split()}:
                pids.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def _sweep(marker: str) -> None:
    """Kill any process still carrying this box's marker in its environment (a daemon that left
    the process group; in a PID namespace the kernel has already done this)."""
    needle = f"LAUNCH_TAX_BOX={marker}".encode()
    for _ in range(3):
        found = False
        for entry in _processes():
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
