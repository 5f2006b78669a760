"""A GPU in sight, on a machine without one: ``torch.cuda`` as a process on a CUDA machine sees it.

Put this folder on ``PYTHONPATH`` with ``LAUNCH_TAX_FAKE_CUDA=1`` and every Python started with
that environment (a ``python -m grader`` judge, and the processes it starts with the judge's
environment) finds, at start-up, a ``torch.cuda`` good enough to take code down its CUDA paths:

* ``is_available()`` and ``device_count()`` as the driver answers them: a device unless
  ``CUDA_VISIBLE_DEVICES`` is set to nothing (``""`` hides every GPU from a process, which is
  how the grader starts its CPU workers, ``grader/sandbox.py``);
* ``synchronize``, ``get_device_name`` and ``Event`` (``record``, ``synchronize``, ``query``,
  ``elapsed_time`` in ms of this process's monotonic clock, as a GPU timeline would have it);
* the device's state belongs to the first thread that touches it: another thread gets the error
  CUDA's profiler (CUPTI) gave on the H200 when a judge's reference work moved between threads,
  "External init callback must run in same thread as registerClient".

Each stand-in takes exactly the parameters of the torch function it stands in for
(``tests/test_doubles.py`` compares them). ``LAUNCH_TAX_FAKE_CUDA_LOG=PATH``: every
``is_available()`` appends ``pid answer`` there, and every process ``pid exit`` as it ends, so a
test can tell which processes saw a GPU and which ended first.
A sandboxed worker never loads this file: it runs ``python -I`` in an environment of its own.
"""

import os
import threading
import time

# The GPU's own clock, taken now: a test's fake clock (which replaces the ``time`` module's
# functions) moves the CPU's time, never the GPU timeline's.
_gpu_clock = time.perf_counter
_OWNER: list[int] = []
_LOCK = threading.Lock()


def _device() -> None:
    """The thread rule: the first thread that uses the device owns it."""
    me = threading.get_ident()
    with _LOCK:
        if not _OWNER:
            _OWNER.append(me)
    if _OWNER[0] != me:
        raise RuntimeError(
            "External init callback must run in same thread as registerClient "
            f"({me % 10**9} != {_OWNER[0] % 10**9}) [fake CUDA, tests/fake_cuda]"
        )


def is_available() -> bool:
    seen = os.environ.get("CUDA_VISIBLE_DEVICES") != ""
    log = os.environ.get("LAUNCH_TAX_FAKE_CUDA_LOG")
    if log:
        with open(log, "a", encoding="ascii") as f:
            f.write(f"{os.getpid()} {seen}\n")
    return seen


def device_count() -> int:
    return 1 if os.environ.get("CUDA_VISIBLE_DEVICES") != "" else 0


def synchronize(device=None) -> None:
    _device()


def get_device_name(device=None) -> str:
    return "Fake GPU (tests/fake_cuda)"


class Event:
    """``torch.cuda.Event``: times in ms between two recorded points of the GPU's clock."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False, external=False):
        _device()
        event = super().__new__(cls)
        event.enable_timing, event.at = enable_timing, None
        return event

    def record(self, stream=None) -> None:
        _device()
        self.at = _gpu_clock()

    def wait(self, stream=None) -> None:
        _device()

    def synchronize(self) -> None:
        _device()

    def query(self) -> bool:
        _device()
        return True

    def elapsed_time(self, end_event) -> float:
        _device()
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        return (end_event.at - self.at) * 1e3


#: What stands in for what: ``torch.cuda``'s name -> the stand-in (tests/test_doubles.py).
STAND_INS = {
    "is_available": is_available,
    "device_count": device_count,
    "synchronize": synchronize,
    "get_device_name": get_device_name,
    "Event": Event,
}


def _log_exit() -> None:
    """``pid exit``, as the process ends: the log then says which process ended first."""
    with open(os.environ["LAUNCH_TAX_FAKE_CUDA_LOG"], "a", encoding="ascii") as f:
        f.write(f"{os.getpid()} exit\n")


if os.environ.get("LAUNCH_TAX_FAKE_CUDA") == "1":
    import atexit

    import torch

    if os.environ.get("LAUNCH_TAX_FAKE_CUDA_LOG"):
        atexit.register(_log_exit)

    for _name, _stand_in in STAND_INS.items():
        setattr(torch.cuda, _name, _stand_in)
