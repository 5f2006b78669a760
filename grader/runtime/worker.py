"""The worker: imports one exercise module of a submission, runs the judge's probes on it and
sends back plain data. It runs in a sandbox (grader/sandbox.py) as
``python -I -B worker.py COMMAND_FD RESULT_FD``, next to a copy of the part of the grader the
probes need (``wire``, ``probes``, ``checks``, ``exercises/``; never ``hidden/``) and of the
course's support package, never the repository.

The judge speaks in frames (``grader/runtime/wire.py``): it writes a request frame on the command pipe,
the worker answers with one frame on the result pipe, and only then may the judge send the next
request. The first request holds the public probes; the module is imported before it is answered.
The second, if any, holds the hidden probes: it is sent only after the public answers are in, so
nothing the submission says while it knows the hidden inputs can reach a public reason.

Nothing it prints counts, and it decides nothing: every answer goes to the judge, which compares
it with the reference. It ends with ``os._exit`` so that nothing the submission registered (atexit
hooks, threads) runs after the last answer is sent.

Before any submission code runs it also installs a seccomp filter that refuses the kernel keyring
calls (``add_key``, ``request_key``, ``keyctl``): keyrings outlive a process and are shared by a
uid, so they could carry data from one student's worker to the next one's.

The limit of this design: the submission runs in this process. Code written against this file
(patching the probes' captured helpers, writing to the result pipe found in /proc/self/fd) could
still forge the yes/no facts a probe reports about it (a buffer that did not move). Values cannot
be forged that way: the judge compares them with the reference's answers to inputs the
submission could not know in advance. See the README's threat model.
"""

import json
import os
import sys
import traceback

# Our own references, taken before any submission code runs.
_write, _read, _exit, _dumps = os.write, os.read, os._exit, json.dumps
# -I leaves the script's folder off the path; the runtime's top (two folders up: grader/runtime/)
# holds only the runtime (this folder, the grader's probes, checks and exercises, and coursekit).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from grader.runtime import cleanup  # noqa: E402 - found through the line above
from grader.runtime.wire import Answers, FrameReader, Request, write_frame  # noqa: E402 - found through the sys.path line above


def _error(exc: BaseException) -> dict:
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a __str__ that raises says nothing
        message = "<unprintable>"
    return {"types": [c.__name__ for c in type(exc).__mro__], "message": message[:2000]}


_MISSING = object()


class _Namespaces:
    """What the worker's own code (the probes, the wire format, this file) looks up as it runs,
    as it was before any submission code ran. ``restore`` puts back what a submission replaced
    (``torch.equal = lambda *a: True``, ``probes.len = ...``), so that the worker's own checks
    mean what they say. It runs after the import, before and after every probe, and right after
    every call a probe makes into the submission (``probes.call``).

    Library modules (``torch``, ``math``...) get back the functions and classes they had;
    attributes they gain (a lazily imported submodule) are left alone. The worker's own modules
    and patched classes (``torch.Tensor``) also lose what was added to them."""

    def __init__(self, libraries, own):
        self.saved = [(obj, dict(vars(obj)), False) for obj in libraries]
        self.saved += [(obj, dict(vars(obj)), True) for obj in own]

    def restore(self) -> None:
        for obj, saved, own in self.saved:
            current = vars(obj)
            if own:
                for name in [n for n in current if n not in saved]:
                    try:
                        delattr(obj, name)
                    except (AttributeError, TypeError):
                        pass
            for name, value in saved.items():
                if current.get(name, _MISSING) is not value and (own or callable(value)):
                    try:
                        setattr(obj, name, value)
                    except (AttributeError, TypeError):
                        pass


# ----------------------------------------------------------------------------- keyrings

#: (audit arch, syscall numbers of add_key, request_key, keyctl) per machine.
_KEYRING_CALLS = {"x86_64": (0xC000003E, (248, 249, 250)), "aarch64": (0xC00000B7, (217, 218, 219))}


def deny_keyrings() -> str | None:
    """Install a seccomp filter: the keyring system calls fail with EPERM, calls of another ABI
    (x32, 32-bit) fail with ENOSYS, everything else is allowed. Returns None when installed, else
    why not. Irreversible, and inherited by every child."""
    import ctypes
    import platform

    machine = platform.machine()
    if machine not in _KEYRING_CALLS or not sys.platform.startswith("linux"):
        return f"no seccomp filter for {machine} / {sys.platform}"
    arch, calls = _KEYRING_CALLS[machine]

    class Instruction(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Instruction))]

    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    n = len(calls)
    code = [
        (load, 0, 0, 4),  # the caller's ABI
        (jeq, 1, 0, arch),
        (ret, 0, 0, enosys),  # another ABI (32-bit calls from a 64-bit process)
        (load, 0, 0, 0),
    ]  # the system call number
    if machine == "x86_64":
        code.append((jge, n + 1, 0, 0x40000000))  # x32 calls -> ENOSYS below
    code += [(jeq, n - i, 0, nr) for i, nr in enumerate(calls)]  # -> EPERM
    code += [(ret, 0, 0, allow), (ret, 0, 0, eperm)]
    if machine == "x86_64":
        code.append((ret, 0, 0, enosys))
    filters = (Instruction * len(code))(*[Instruction(*c) for c in code])
    program = Program(len(code), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
    if libc.prctl(22, 2, ctypes.byref(program), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        return f"seccomp refused the filter: {os.strerror(ctypes.get_errno())}"
    return None


# ----------------------------------------------------------------------------- frames


class _Pipe:
    def __init__(self, command_fd: int, result_fd: int):
        # The judge's frames are trusted (it wrote them): any size it sends is read.
        self.command_fd, self.result_fd, self.reader = command_fd, result_fd, FrameReader(cap=1 << 40)

    def receive(self) -> Request | None:
        """The next request frame; None when the judge has nothing more to ask."""
        while not self.reader.frames:
            if self.reader.error:
                raise ValueError(f"the judge's request stream holds {self.reader.error}")
            chunk = _read(self.command_fd, 1 << 16)
            if not chunk:
                return None
            self.reader.feed(chunk)
        return Request.from_wire(json.loads(self.reader.frames.pop(0)))

    def send(self, answer: dict) -> None:
        self.send_raw(_dumps(answer, allow_nan=False).encode())

    def send_raw(self, data: bytes) -> None:
        write_frame(self.result_fd, data, _write)


def _hide(fd: int) -> int:
    """Move ``fd`` to a number nobody was told (a submission has to search /proc/self/fd)."""
    import fcntl
    import random

    hidden = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, random.SystemRandom().randint(64, 200))
    os.close(fd)
    return hidden


def _canary(request: Request, keyrings: str | None) -> dict:
    """What a worker that runs no submission code finds: the sandbox's facts, for the judge."""
    import getpass
    import time

    start = time.monotonic()
    import torch

    facts = {
        "keyrings_denied": keyrings is None,
        "keyring_problem": keyrings or "",
        "import_torch_s": time.monotonic() - start,
        "uid": os.getuid(),
        "cuda": torch.cuda.is_available(),
    }
    with open("/proc/self/status", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("VmPeak:"):
                facts["vm_peak_bytes"] = int(line.split()[1]) * 1024
    try:
        facts["user"] = getpass.getuser()
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        facts["user"] = f"<{type(exc).__name__}: {exc}>"
    if request.dynamo:
        try:
            import torch._dynamo  # inductor reads the user name on import

            facts["dynamo"] = "ok"
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            facts["dynamo"] = f"{type(exc).__name__}: {exc}"[:500]
    return facts


def main(command_fd: int, result_fd: int) -> None:
    keyrings = deny_keyrings()
    pipe = _Pipe(_hide(command_fd), _hide(result_fd))
    del sys.argv[1:]
    request = pipe.receive()
    if request is None:
        return
    if request.canary:
        pipe.send(_canary(request, keyrings))
        return
    import torch  # the real one, before any submission code

    torch.manual_seed(0)
    torch.set_num_threads(1)
    from grader import probes  # noqa: F401 - imported once here, so that a forked child starts warm
    from grader.runtime import wire  # noqa: F401 - imported once here, so that a forked child starts warm
    from grader.exercises import load_probes

    load_probes()
    from coursekit import standin  # noqa: F401 - imported once here, so that a forked child starts warm

    if request.shared:
        _serve_shared(pipe, request)
    else:
        _serve(pipe, request)


def _serve(pipe: "_Pipe", request: Request) -> None:
    """One exercise: import its module, then answer each request frame until there is none."""
    import builtins
    import math
    import time

    import torch

    share = float(request.gpu_fraction)
    cuda = torch.cuda.is_available()
    if cuda:  # GPU workers share the device: none may take all its memory
        torch.cuda.set_per_process_memory_fraction(share)
    from coursekit import cudasim, standin
    from grader import probes
    from grader.runtime import wire
    from grader.exercises import load_probes

    exercises = load_probes()

    held = []

    def restore() -> None:
        held[0].restore()
        if cuda:  # a submission may have raised its own cap: the judge's share again
            torch.cuda.set_per_process_memory_fraction(share)

    probes.bind(restore)  # before the snapshot: restoring keeps the binding
    namespaces = _Namespaces(
        libraries=(builtins, math, time, json, torch, standin, cudasim),
        own=(
            probes,
            wire,
            *exercises,
            sys.modules[__name__],
            torch.Tensor,
            standin.CapturedGraph,
            standin.StandInGraph,
            _Pipe,
            _Child,
        ),
    )
    held.append(namespaces)
    table = dict(probes.PROBES)
    sys.path.append(request.submission_dir)
    module, import_error = None, None
    try:
        import importlib

        module = importlib.import_module(f"{request.package}.{request.module}")
    except BaseException as exc:  # noqa: BLE001 - SystemExit, pytest.exit... all count
        namespaces.restore()
        import_error = _error(exc)
    while request is not None:
        answer = Answers(import_error=import_error)
        if import_error is None:
            for item in request.probes:
                namespaces.restore()
                fn = table[item["probe"]]
                try:
                    value = fn(module, **wire.decode(item.get("args", {})))
                    namespaces.restore()
                    answer.probes.append({"ok": True, "value": wire.encode(value)})
                except BaseException as exc:  # noqa: BLE001 - whatever the submission raised
                    namespaces.restore()
                    answer.probes.append({"ok": False, "error": _error(exc)})
        namespaces.restore()
        pipe.send(answer.as_dict())
        request = pipe.receive()


# ----------------------------------------------------------------------------- shared worker


class _Child:
    """One exercise of a shared worker, in a process forked from the warm parent (torch already
    imported, no submission code run yet). The parent relays its request frames and its answers;
    it never runs submission code itself."""

    def __init__(self, group: str, parent: "_Pipe"):
        import fcntl

        from_parent, to_child = os.pipe()  # (read end, write end)
        from_child, to_parent = os.pipe()
        self.group, self.reader, self.pid = group, None, None
        self.pid = os.fork()
        if self.pid == 0:  # the child: it never returns from here
            status = 0
            try:
                os.close(to_child)
                os.close(from_child)
                os.close(parent.command_fd)
                os.close(parent.result_fd)
                own = _Pipe(_hide(from_parent), _hide(to_parent))
                first = own.receive()
                if first is not None:
                    _serve(own, first)
            except BaseException:  # noqa: BLE001 - the child's own failure: said, then gone
                traceback.print_exc()
                status = 3
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001 - the child exits with its status whatever the flush raised
                pass
            _exit(status)
        os.close(from_parent)
        os.close(to_parent)
        for fd in (to_child, from_child):
            fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        self.to_child, self.from_child = to_child, from_child

    def ask(self, payload: bytes, timeout_s: float, cap: int) -> tuple[bytes | None, str]:
        """Send one request frame, wait for one answer frame: ``(answer, "")`` or
        ``(None, why not)``."""
        import select
        import time

        try:
            write_frame(self.to_child, payload, _write)
        except OSError:
            return None, "died"
        self.reader = self.reader or FrameReader(cap)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.reader.frames:
                return self.reader.frames.pop(0), ""
            if self.reader.error:
                return None, "malformed"
            left = deadline - time.monotonic()
            if left <= 0:
                return None, "timeout"
            ready, _, _ = select.select([self.from_child], [], [], min(left, 1.0))
            if ready:
                chunk = _read(self.from_child, 1 << 16)
                if not chunk:
                    return None, "died"
                self.reader.feed(chunk)

    def end(self, grace_s: float = 2.0) -> None:
        """Close its pipes (it finishes), wait ``grace_s`` for it, then kill it."""
        import signal
        import time

        for fd in (self.to_child, self.from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        deadline = time.monotonic() + grace_s
        while True:
            try:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if not done:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def _fresh_state(work: str, places: list[str], isolated: bool) -> list[str]:
    """Before the next exercise's child: nothing an earlier child did may reach it. Every other
    process of this worker is killed (``kill(-1)``: in a PID namespace all of it but this
    process, else every process of the worker's own uid), the writable folder is emptied, and
    what this uid left in the machine's shared writable places (``places``: ``/dev/shm``, and
    without namespaces every world-writable folder) and in System V IPC is removed. Returns what
    was found, for the report. Only a worker that is sure to be alone with what it removes does
    more than empty its writable folder: ``isolated`` (the judge gave it a uid of its own, or
    namespaces), not root itself, and either the first process of its own PID namespace or
    running as a leased worker uid. Anywhere else ``kill(-1)`` and the shared folders would be
    someone else's (the user's, or the whole machine's)."""
    import signal

    found = []
    uid = os.getuid()
    alone = isolated and uid != 0 and (os.getpid() == 1 or uid >= cleanup.WORKER_UID_BASE)
    if not alone:
        cleanup.clear(work)
        return found
    try:
        os.kill(-1, signal.SIGKILL)
        found.append("processes left running")
    except ProcessLookupError:
        pass
    except PermissionError:
        pass
    while True:  # reap what was ours (in a PID namespace orphans are ours too)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    cleanup.clear(work)
    return found + cleanup.remove_left(uid, places, keep=os.path.dirname(work))


def _serve_shared(pipe: "_Pipe", request: Request) -> None:
    """Several exercises in one sandboxed worker: the frames name their exercise (``group``) and
    phase; each exercise runs in its own forked child, so every one of them imports its module
    into a process that no other exercise's code has touched, while ``import torch`` is paid once.
    Before each child, ``_fresh_state`` removes everything an earlier child could have left
    (processes, files, IPC objects). Whatever goes wrong in a child (it dies, hangs past the
    frame's ``timeout_s``, sends more than ``cap`` bytes) is answered ``{"fallback": why}``: the
    judge then grades that exercise in a worker of its own, as if there were no shared worker."""
    cap = int(request.cap)
    places = [str(p) for p in request.shared_places]
    isolated = bool(request.isolated)
    work = os.getcwd()
    child = None
    while request is not None:
        group = request.group
        if child is not None and child.group != group:
            child.end()
            child = None
        why = "no child"
        if child is None and request.phase == 0:
            found = _fresh_state(work, places, isolated)
            if found and group:
                sys.stderr.write(f"launch-tax worker: before {group}: removed {', '.join(found)}\n")
            try:
                child = _Child(group, pipe)
            except OSError:  # out of processes or memory: that exercise gets a worker of its own
                child, why = None, "fork failed"
        if child is None:
            pipe.send(Answers(fallback=why).as_dict())
        else:
            answer, why = child.ask(request.payload(), float(request.timeout_s), cap)
            if answer is None:
                child.end(grace_s=0.0)
                child = None
                pipe.send(Answers(fallback=why).as_dict())
            else:
                pipe.send_raw(answer)
        request = pipe.receive()
    if child is not None:
        child.end()


if __name__ == "__main__":
    status = 0
    try:
        main(int(sys.argv[1]), int(sys.argv[2]))
    except BaseException:  # noqa: BLE001 - the worker's own failure: say it, then leave
        traceback.print_exc()
        status = 3
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - a submission may have replaced them
        pass
    _exit(status)
