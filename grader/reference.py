"""The reference's answers to the judge's probes, computed the way a worker computes them.

A check compares a submission's answer with the reference's, so both must be computed alike. A
CPU check's worker never sees CUDA (``CUDA_VISIBLE_DEVICES=""``, ``sandbox.worker_environment``):
on a machine with a GPU, a reference computed in the judge's own process would take its CUDA
paths where the worker takes its CPU ones (exercise 2's timer: CUDA events instead of the clock
the probe controls) and fail every correct student. And CUDA's profiler (CUPTI, behind exercise
7's kernel counts) belongs to the thread that first used it: reference work spread over
``grade-all``'s threads stopped a class's GPU pass with "External init callback must run in same
thread as registerClient". So the reference runs in one thread of its own, and where this
process sees CUDA, in processes of its own:

* CPU checks: in this process, on one dedicated thread, when this process sees no CUDA (there is
  nothing to hide); else in a reference process started with CUDA hidden, as the worker is.
* GPU checks: in a reference process that sees the GPUs this process sees.

A reference process runs trusted code (the staff repository's reference). It is started once
per ``Reference`` and reused: one request frame per exercise (the probes), one answer frame back
(``grader/runtime/wire.py``'s framing on two pipes of its own, so nothing it prints can mix with the
answers). A probe that raises,
a process that dies or does not answer within ``ANSWER_TIMEOUT_S`` is ``ReferenceFailure``: a
fault of the grader, never charged to a student.

A release has no reference: ``Reference`` reads the answers it recorded (``grader/expected.json``)
for the practice inputs instead.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from coursekit.impl import REPO_ROOT
from grader.runtime import wire
from grader.checks import Answer, Probe
from grader.text import safe

GRADER_DIR = Path(__file__).resolve().parent
RECORDED = GRADER_DIR / "expected.json"  # the reference's practice answers, in a release
#: How long one exercise's probes may take the reference (a GPU check's torch.compile included).
ANSWER_TIMEOUT_S = 900.0


class ReferenceFailure(RuntimeError):
    """The reference could not answer a probe: a fault of the grader, never of a student."""


def has_reference() -> bool:
    return (REPO_ROOT / "solutions" / "__init__.py").is_file()


def answer_from(data: dict) -> Answer:
    """An ``Answer`` from its plain-data form (a worker's, a reference process's, a recording)."""
    if data.get("ok") is True:
        return Answer(True, value=wire.decode(data.get("value")))
    error = data.get("error") if isinstance(data.get("error"), dict) else {}
    types = error.get("types")
    types = [safe(t, 100) for t in types][:64] if isinstance(types, list) else ["<unknown>"]
    return Answer(False, error={"types": types or ["<unknown>"], "message": safe(error.get("message", ""), 2000)})


def compute(module_name: str, requests: list[dict]) -> list[dict]:
    """The reference module ``module_name``'s answers to ``requests`` (``{"probe", "args"}``), as
    plain data: ``{"ok": True, "value": ...}``, or ``{"ok": False, "error": {...}}`` for a probe
    that raised (``ReferenceFailure`` to the judge)."""
    from coursekit.impl import Implementation
    from grader import probes
    from grader.exercises import load_probes

    load_probes()
    module = Implementation("solutions").module(module_name)
    out = []
    for request in requests:
        try:
            value = probes.PROBES[request["probe"]](module, **wire.decode(request["args"]))
            out.append({"ok": True, "value": wire.encode(value)})
        except Exception as exc:  # noqa: BLE001 - the judge says which probe, and stops
            out.append(
                {
                    "ok": False,
                    "error": {
                        "types": [c.__name__ for c in type(exc).__mro__],
                        "message": f"{type(exc).__name__}: {exc}"[:2000],
                    },
                }
            )
    return out


class _InThread:
    """The reference in this process, always on the same one thread."""

    def __init__(self):
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="launch-tax-reference")

    def ask(self, module_name: str, requests: list[dict]) -> list[dict]:
        return self._thread.submit(compute, module_name, requests).result()

    def close(self) -> None:
        self._thread.shutdown(wait=False)


class ReferenceProcess:
    """The reference in a process of its own (``python -m grader.reference``), CUDA hidden from
    it or not (``cuda``), started at the first question and kept for the next ones."""

    def __init__(self, cuda: bool, timeout_s: float = ANSWER_TIMEOUT_S):
        self.cuda, self.timeout_s = cuda, timeout_s
        self._proc: subprocess.Popen | None = None
        self._output: list[bytes] = []

    def environment(self) -> dict[str, str]:
        """The judge's environment, one thread for OpenMP (as a worker has), and for a CPU
        reference CUDA hidden exactly as from a CPU worker (``CUDA_VISIBLE_DEVICES=""``). It runs
        in the repository's root (``python -m`` puts it first on the path)."""
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        if not self.cuda:
            env["CUDA_VISIBLE_DEVICES"] = ""
        return env

    def _start(self) -> None:
        command_read, self._command = os.pipe()
        self._result, result_write = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-B", "-m", "grader.reference", str(command_read), str(result_write)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(command_read, result_write),
                cwd=REPO_ROOT,
                env=self.environment(),
            )
        finally:
            os.close(command_read)
            os.close(result_write)
        self._reader = wire.FrameReader(cap=1 << 30)
        self._output = []
        threading.Thread(target=self._drain, args=(self._proc.stdout,), daemon=True).start()
        # A Reference dropped without close() (a test's judge) still ends its process.
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._command, self._result)

    def _drain(self, stream) -> None:
        for chunk in iter(lambda: stream.read1(1 << 16), b""):
            self._output.append(chunk)
            del self._output[:-8]

    def output(self) -> str:
        return b"".join(self._output)[-2000:].decode("utf-8", "replace").strip()

    def ask(self, module_name: str, requests: list[dict]) -> list[dict]:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        payload = json.dumps({"module": module_name, "probes": requests}).encode()
        try:
            wire.write_frame(self._command, payload)
            deadline = time.monotonic() + self.timeout_s
            while not self._reader.frames:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no answer within {self.timeout_s:.0f} s")
                ready, _, _ = select.select([self._result], [], [], min(left, 1.0))
                if ready:
                    chunk = os.read(self._result, 1 << 20)
                    if not chunk:
                        raise EOFError(f"it ended (exit code {self._proc.wait(timeout=10)})")
                    self._reader.feed(chunk)
                    if self._reader.error:
                        raise ValueError(self._reader.error)
            return json.loads(self._reader.frames.pop(0))["answers"]
        except (OSError, EOFError, TimeoutError, ValueError, KeyError, subprocess.TimeoutExpired) as exc:
            self.close()
            kind = "GPU" if self.cuda else "CPU (CUDA hidden)"
            raise ReferenceFailure(
                f"the {kind} reference process failed on {module_name}'s probes: "
                f"{exc}" + (f"; its output: {self.output()}" if self.output() else "")
            ) from exc

    def close(self) -> None:
        if self._proc is not None:
            self._finalizer()
            self._proc = None


def _stop(proc: subprocess.Popen, *fds: int) -> None:
    """End a reference process: its command pipe closed, it returns; killed if it does not."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Reference:
    """The reference's answers to probes: computed by the reference, where there is one (the
    module docstring says where), or read from the recording a release ships for its practice
    inputs. Practice answers are cached for the whole run; official ones (drawn per submission)
    are not. A probe the reference cannot answer raises ``ReferenceFailure``: it is never cached
    and never charged to a student. Safe to call from any thread; the work itself runs on one."""

    def __init__(self, cuda_visible: bool | None = None):
        """``cuda_visible``: whether this process sees CUDA (default: ``torch.cuda.is_available()``)."""
        self._cache: dict[str, Answer] = {}
        self._lock = threading.Lock()
        self._recorded = None
        if not has_reference() and RECORDED.exists():
            self._recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
        if cuda_visible is None:
            import torch

            cuda_visible = torch.cuda.is_available()
        self.cuda_visible = cuda_visible
        self._runners: dict[bool, _InThread | ReferenceProcess] = {}

    def runner(self, gpu: bool) -> _InThread | ReferenceProcess:
        """Where a CPU (``gpu`` False) or a GPU check's reference answers are computed."""
        if gpu not in self._runners:
            if gpu:
                self._runners[gpu] = ReferenceProcess(cuda=True)
            else:
                self._runners[gpu] = ReferenceProcess(cuda=False) if self.cuda_visible else _InThread()
        return self._runners[gpu]

    def answers(
        self, exercise: str, module_name: str, probes: list[Probe], cache: bool, gpu: bool = False
    ) -> tuple[dict[str, Answer | None], float]:
        """``{probe key: answer}`` (None: nothing recorded) for ``exercise``'s module
        ``module_name``, and the seconds spent computing. ``gpu``: the probes are a GPU check's."""
        out: dict[str, Answer | None] = {}
        with self._lock:
            wanted = []
            for probe in probes:
                key = f"{exercise} {probe.key()}"
                if key in self._cache:
                    out[probe.key()] = self._cache[key]
                elif self._recorded is not None:
                    data = self._recorded.get(key)
                    out[probe.key()] = None if data is None else answer_from(data)
                elif probe.key() not in {p.key() for p in wanted}:
                    wanted.append(probe)
            if not wanted:
                return out, 0.0
            start = time.monotonic()
            got = self.runner(gpu).ask(module_name, [{"probe": p.probe, "args": wire.encode(p.args)} for p in wanted])
            seconds = time.monotonic() - start
            for probe, data in zip(wanted, got):
                if data.get("ok") is not True:
                    message = (data.get("error") or {}).get("message", "")
                    raise ReferenceFailure(f"the reference failed probe {exercise} {probe.label}: {message}")
                answer = answer_from(data)
                if cache:
                    self._cache[f"{exercise} {probe.key()}"] = answer
                out[probe.key()] = answer
        return out, seconds

    def close(self) -> None:
        for runner in self._runners.values():
            runner.close()
        self._runners.clear()


def _serve(command_fd: int, result_fd: int) -> None:
    """The reference process: one answer frame for each request frame, until the judge closes."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    reader = wire.FrameReader(cap=1 << 30)
    while True:
        while not reader.frames:
            chunk = os.read(command_fd, 1 << 20)
            if not chunk:
                return
            reader.feed(chunk)
        request = json.loads(reader.frames.pop(0))
        wire.write_frame(result_fd, json.dumps({"answers": compute(request["module"], request["probes"])}).encode())


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
