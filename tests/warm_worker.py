"""The grader's worker, fast: a warm process (torch and the worker's code imported) forks a child
per run, so a mutant costs its probes, not a new interpreter and ``import torch``.

For the corpus of wrong implementations only (``tests/test_grader_corpus.py``): what it proves is
what the checks say about each mutant, and that does not depend on how the worker is isolated.
Each child runs ``grader/runtime/worker.py``'s own ``main`` in the box the judge made (its work folder,
its environment, the same request and answer frames through two FIFOs), but without the
sandbox: no namespaces, no other uid, no resource limits. The real sandbox is the business of
the adversarial corpus and of every other test that grades through ``python -m grader``.

``serve()`` is a context manager that puts ``run`` in the place of ``grader.sandbox.run``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from grader import sandbox
from tests.doubles import stands_in_for

SERVER = r"""
import json, os, signal, socket, sys, time
runtime, channel = sys.argv[1], socket.socket(fileno=int(sys.argv[2]))
sys.path.insert(0, runtime)
import torch  # noqa: F401 - warm for every child
from grader.runtime import worker, wire  # noqa: F401 - warm for every child
from grader import probes  # noqa: F401
from grader.exercises import load_probes
load_probes()
from coursekit import standin  # noqa: F401
while True:
    message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 2)
    if not message:
        break
    job, (command, result) = json.loads(message), fds
    pid = os.fork()
    if pid == 0:
        status = 3
        try:
            channel.close()
            os.setsid()
            log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.chdir(job["work"])
            os.environ.clear()
            os.environ.update(job["env"])
            worker.main(command, result)
            status = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status)
    os.close(command)
    os.close(result)
    deadline, timed_out = time.monotonic() + job["timeout_s"], False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(pid, 0)
            break
        time.sleep(0.005)
    reply = {"rc": None if timed_out else os.waitstatus_to_exitcode(status), "timed_out": timed_out}
    channel.sendall(json.dumps(reply).encode() + b"\n")
"""


class WarmWorker:
    def __init__(self, runtime: dict[str, bytes]):
        self.runtime_box = sandbox.make_box(runtime, {})
        ours, theirs = socket.socketpair()
        self.channel, self.replies = ours, ours.makefile("rb")
        self.proc = subprocess.Popen(
            [sys.executable, "-B", "-c", SERVER, str(self.runtime_box / "runtime"), str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        theirs.close()
        self.lock = threading.Lock()

    @stands_in_for(sandbox.run)
    def run(
        self,
        box: Path,
        limits: sandbox.Limits,
        requests: list[bytes],
        *,
        gpu: bool = False,
        hide: tuple = (),
        slot: int = 0,
        device: str | None = None,
    ) -> sandbox.Run:
        """``grader.sandbox.run``'s answer, from a forked child of the warm process (``device``:
        the GPU a GPU worker may see, as ``sandbox.run`` pins it)."""
        log = box / "output.log"
        job = {
            "work": str(box / "work"),
            "log": str(log),
            "timeout_s": limits.timeout_s,
            "env": sandbox.worker_environment(box, gpu, device),
        }
        with self.lock:  # one child at a time: the server answers in order
            start = time.monotonic()
            command_read, command_write = os.pipe()
            result_read, result_write = os.pipe()
            try:
                socket.send_fds(self.channel, [json.dumps(job).encode()], [command_read, result_write])
            finally:
                os.close(command_read)
                os.close(result_write)
            talk = sandbox._Conversation(command_write, result_read, requests, limits.result_bytes)
            reply = self.replies.readline()
            if not reply:
                raise RuntimeError(f"the warm worker died (exit code {self.proc.wait()})")
            talk.finish()
            done = json.loads(reply)
        output = log.read_bytes()[-4000:].decode("utf-8", "replace") if log.exists() else ""
        stopped = done["timed_out"] or talk.over or bool(talk.reader.error)
        return sandbox.Run(
            answers=[] if talk.over else list(talk.reader.frames),
            returncode=None if stopped else done["rc"],
            timed_out=done["timed_out"],
            result_too_big=talk.over,
            malformed=talk.reader.error or "",
            output=output,
            wall_s=time.monotonic() - start,
            timeout_s=limits.timeout_s,
        )

    def close(self) -> None:
        self.channel.shutdown(socket.SHUT_WR)
        self.proc.wait(timeout=30)
        self.replies.close()
        self.channel.close()
        sandbox.remove_box(self.runtime_box)


@contextmanager
def serve(runtime: dict[str, bytes]):
    """``grader.sandbox.run`` served by a warm worker while the context lasts."""
    warm, real = WarmWorker(runtime), sandbox.run
    sandbox.run = warm.run
    try:
        yield warm
    finally:
        sandbox.run = real
        warm.close()
