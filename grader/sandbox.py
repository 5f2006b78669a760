"""Running one worker: a fresh process in a private folder, with limits, and swept when done.

Always: a wall-clock timeout after which the worker's whole process group is killed; resource
limits (address space for CPU workers, file size, open files, no core dumps, a process cap); a cap
on what it prints (a flood kills it); a cap on its result; only a minimal environment (no variable
of the judge's or of the sandbox's set-up); the worker's own seccomp filter against keyrings
(``grader/runtime/worker.py``); a watch on the resident memory of all its processes, and for a GPU
worker on the device memory they hold (``nvidia-smi``).

Everything else (namespaces, a uid of its own, what is hidden) is the isolation strategy's
(``grader/isolation.py``): ``run`` asks ``isolation.current()`` how to start the worker and what
to clean after it.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader import isolation, nvidia_smi, procfs
from grader.runtime import WORKER, wire


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
    #: hog cannot cost the students beside it their GPU points. Not watched where nvidia-smi
    #: cannot show this machine's processes' memory (``DevicePool.check_visibility``).
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
    #: A GPU worker's processes as the host saw them, ``{pid: start time}`` (``procfs.process_start``):
    #: after the run, only these can be charged with memory left on the device (``settle_gpu``).
    pids: dict[int, int] = field(default_factory=dict)

    def failure(self) -> str | None:
        """Why the worker's run ended badly, or None (answers received before it still count)."""
        if self.timed_out:
            budget = (
                f"the grading's whole time budget (--deadline {self.budget_s:.0f} s) ran out" if self.budget_s else ""
            )
            if not self.timeout_s:  # never started
                return f"was not run: {budget}" + (
                    f" (its first try timed out after {self.first_timeout_s:.0f} s)" if self.first_timeout_s else ""
                )
            if self.first_timeout_s:
                text = f"timed out twice (after {self.first_timeout_s:.0f} s, then after {self.timeout_s:.0f} s)"
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


#: What a GPU worker needs of the judge's environment to find the driver and the device: the
#: loader's path (an image whose libcuda.so.1 is found only through it), the container runtime's
#: NVIDIA_* settings, the CUDA toolkit and Triton's tool paths.
GPU_PASSTHROUGH = (
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "TRITON_PTXAS_PATH",
    "TRITON_CUOBJDUMP_PATH",
    "TRITON_NVDISASM_PATH",
    "TRITON_LIBCUDA_PATH",
)


def worker_environment(box: Path, gpu: bool, device: str | None = None) -> dict[str, str]:
    """Everything a worker's environment holds: none of the judge's variables, except, for a GPU
    worker, those CUDA needs (``GPU_PASSTHROUGH`` and ``NVIDIA_*``); ``device`` pins a GPU
    worker to one device (``CUDA_VISIBLE_DEVICES``), else it sees what the judge sees."""
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "LAUNCH_TAX_BOX": box.name,
        "HOME": str(box / "work"),
        "TMPDIR": str(box / "work"),
        # The worker's uid has no passwd entry: getpass.getuser() (torch's inductor asks on
        # import) reads these first; inductor compiles in the worker itself, not in a pool.
        "USER": "launch-tax-worker",
        "LOGNAME": "launch-tax-worker",
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    }
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # CPU checks run as on a laptop, on every machine
        return env
    env.update({k: v for k, v in os.environ.items() if k in GPU_PASSTHROUGH or k.startswith("NVIDIA_")})
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    elif "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env


def run(
    box: Path,
    limits: Limits,
    requests: list[bytes],
    *,
    gpu: bool = False,
    hide: tuple[Path, ...] = (),
    slot: int = 0,
    device: str | None = None,
) -> Run:
    """Run the worker (``runtime/grader/runtime/worker.py``) in ``box``: send it the first
    request frame, each next one only once the previous one is answered; return the answer
    frames it sent. ``device``: the GPU a GPU worker may see (``CUDA_VISIBLE_DEVICES``)."""
    command_read, command_write = os.pipe()
    result_read, result_write = os.pipe()
    python = [sys.executable, "-I", "-B", str(box / "runtime" / WORKER), str(command_read), str(result_write)]
    rlimits = [f"--fsize={limits.file_bytes}", "--core=0", f"--nofile={limits.open_files}"]
    if limits.memory_bytes and not gpu:
        rlimits.append(f"--as={limits.memory_bytes}")
    strategy = isolation.current()
    launch = strategy.launch(box, worker_environment(box, gpu, device), limits.processes, limits.work_bytes, hide, slot)
    rlimits.append(f"--nproc={launch.nproc}")
    env, uid, lease = launch.env, launch.uid, launch.lease
    command = launch.command
    command += ["prlimit", *rlimits, "--", *python] if isolation.has_prlimit() else python

    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(command_read, result_write),
            env=env,
            cwd=box / "work",
            start_new_session=True,
        )
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
        found = procfs.worker_pids(proc.pid, uid)
        for pid in found:
            started = procfs.process_start(pid)
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
        if ticks % 20 == 0 and procfs.resident_bytes(uid, box.name) > limits.total_rss_bytes:
            out_of_memory = True
            break
        if gpu and ticks % 50 == 0:
            pids = look()
            held = nvidia_smi.gpu_bytes_of(pids) if limits.gpu_bytes else None
            if held is not None and held > limits.gpu_bytes:  # None: not seen (the judge's report says so)
                out_of_gpu = True
                break
        time.sleep(0.01)
    if gpu:
        look()  # what is still there as it ends: the processes that could leave memory behind
    _kill_group(proc)
    procfs.sweep(box.name)
    leftovers = strategy.finish(launch, box)  # without namespaces the uid itself is made clean
    output.join(timeout=5)
    talk.finish()
    proc.stdout.close()
    stopped = timed_out or out_of_memory or out_of_gpu or output.over or talk.over or bool(talk.reader.error)
    return Run(
        answers=[] if talk.over else list(talk.reader.frames),
        returncode=None if stopped else proc.returncode,
        timed_out=timed_out,
        out_of_memory=out_of_memory,
        out_of_gpu_memory=out_of_gpu,
        flooded=output.over,
        result_too_big=talk.over,
        malformed=talk.reader.error or "",
        output=b"".join(output.chunks)[-4000:].decode("utf-8", "replace"),
        wall_s=time.monotonic() - start,
        timeout_s=limits.timeout_s,
        budget_s=limits.budget_s,
        leftovers=leftovers,
        pids=seen,
    )


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
                    view = view[os.write(fd, view) :]
        except OSError:  # the worker is gone: nobody reads any more
            pass
        finally:
            os.close(fd)

    def finish(self) -> None:
        self.drain.join(timeout=5)
        self.outbox.put(None)
        self.writer.join(timeout=5)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker's process group, and first ``proc``'s own children: under ``unshare``
    that is the PID namespace's first process (the worker), whose death ends the namespace even
    if the worker left the group (``setsid``) and its environment (``execve``)."""
    for child in procfs.children(proc.pid):
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
