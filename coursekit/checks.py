"""Assertions whose failure messages teach: what was expected, what came back, which rule."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator


@contextmanager
def without_cuda() -> Iterator[None]:
    """CUDA hidden from the code run inside, as ``CUDA_VISIBLE_DEVICES=""`` hides it from a
    process: ``torch.cuda.is_available()`` is False and ``torch.cuda.device_count()`` is 0 (the
    grader's CPU checks run in workers started that way). The CPU side of a rule (exercise 2's
    clock timer) is tested under it on every machine, a GPU machine too."""
    import torch

    saved = torch.cuda.is_available, torch.cuda.device_count
    torch.cuda.is_available, torch.cuda.device_count = (lambda: False), (lambda: 0)
    try:
        yield
    finally:
        torch.cuda.is_available, torch.cuda.device_count = saved


def check_close(got: Any, expected: float, what: str, rule: str, rel: float = 1e-12, abs_: float = 1e-12) -> None:
    """``got`` is a real number within ``rel``/``abs_`` of ``expected``."""
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        raise AssertionError(f"{what}: expected a number, got {type(got).__name__} {got!r}")
    if not math.isclose(got, expected, rel_tol=rel, abs_tol=abs_):
        raise AssertionError(f"{what}: expected {expected!r}, got {got!r}\n  rule: {rule}")


def names_argument(message: str, name: str) -> bool:
    """``message`` names ``name`` as a word of its own: ``"x: expected ..."`` names ``x``, while
    ``"weight: expected ..."`` does not (the letter x inside "expected" is no name)."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", message) is not None


def check_rejects(
    call: Callable[[], Any], argument: str | tuple[str, ...], rule: str, error: type[Exception] = ValueError
) -> None:
    """``call()`` raises ``error`` with a message that names ``argument`` (or one of several).

    A ``NotImplementedError`` passes through untouched, so an unfinished stub says so."""
    names = (argument,) if isinstance(argument, str) else argument
    argument = " or ".join(repr(n) for n in names)
    try:
        call()
    except NotImplementedError:
        raise
    except error as exc:
        if not any(names_argument(str(exc), n) for n in names):
            raise AssertionError(
                f"{error.__name__} raised, but its message does not name the argument "
                f"{argument}: {str(exc)!r}\n  rule: {rule}"
            ) from None
        return
    except Exception as exc:  # noqa: BLE001 - report whatever came instead
        raise AssertionError(
            f"expected {error.__name__} naming {argument}, got {type(exc).__name__}: {exc}\n  rule: {rule}"
        ) from exc
    raise AssertionError(f"expected {error.__name__} naming {argument}, nothing was raised\n  rule: {rule}")


def says_cuda_is_needed(message: str) -> bool:
    """One sentence of ``message`` names CUDA (or a GPU) and says it is needed or missing."""
    for sentence in re.split(r"[.!;?]\s", message):
        if re.search(r"cuda|gpu", sentence, re.IGNORECASE) and re.search(
            r"\bneed|\brequir|not available|unavailable|is_available", sentence, re.IGNORECASE
        ):
            return True
    return False


def check_says_cuda_is_needed(call: Callable[[], Any], what: str) -> None:
    """On a machine without CUDA, ``call()`` raises a RuntimeError of our own saying a CUDA device
    is needed (not whatever torch raises deep inside). NotImplementedError, a RuntimeError too,
    passes through so an unfinished stub says so."""
    try:
        call()
    except NotImplementedError:
        raise
    except RuntimeError as exc:
        if isinstance(exc, ValueError):
            raise AssertionError(
                f"{what} without CUDA raised {type(exc).__name__}, which is a ValueError too: "
                "the missing GPU is not a bad argument; raise a plain RuntimeError"
            ) from None
        if not says_cuda_is_needed(str(exc)):
            raise AssertionError(
                f"{what} without CUDA raised RuntimeError({str(exc)[:300]!r}); expected a message "
                "saying a CUDA device is needed (check torch.cuda.is_available() first)"
            ) from None
        return
    except Exception as exc:  # noqa: BLE001 - report whatever came instead
        raise AssertionError(
            f"{what} without CUDA must raise a RuntimeError saying a CUDA device is needed, got "
            f"{type(exc).__name__}: {str(exc)[:300]}"
        ) from exc
    raise AssertionError(f"{what} without CUDA must raise a RuntimeError; nothing was raised")


class TimedCalls:
    """A function to time, for exercise 2's timer (its public tests and the grader's probe alike):
    each call sleeps (``warmup_ms`` while warming up, a duration from ``timed_ms`` after), counts
    itself and reads the monotonic clock ``time.perf_counter`` reads around the calls, so that
    ``window`` can say where any correct timer's result lies, however loaded the machine is.

    ``timed_ms`` is a number, or ``(low, high)``: each timed call then sleeps a duration drawn
    when it is made (the operating system's randomness), which only a clock can tell afterwards.
    Call ``started()`` right before ``time_ms`` and ``returned()`` right after it."""

    def __init__(self, warmup: int = 0, warmup_ms: float = 0.0, timed_ms: float | tuple = 0.0):
        import random
        import time

        self.warmup, self.warmup_ms, self.timed_ms = warmup, warmup_ms, timed_ms
        self.count, self.marks = 0, {}
        self._clock, self._sleep, self._draw = time.perf_counter, time.sleep, random.SystemRandom()

    def _duration(self) -> float:
        if isinstance(self.timed_ms, tuple):
            return self._draw.uniform(*self.timed_ms)
        return float(self.timed_ms)

    def __call__(self) -> None:
        self.count += 1
        timed = self.count > self.warmup
        if timed and "first" not in self.marks:
            self.marks["first"] = self._clock()
        self._sleep((self._duration() if timed else self.warmup_ms) / 1e3)
        if timed:
            self.marks["last"] = self._clock()
        elif self.count == self.warmup:
            self.marks["warm"] = self._clock()

    def started(self) -> None:
        self.marks["start"] = self._clock()

    def returned(self) -> None:
        self.marks["returned"] = self._clock()

    def window(self, iters: int) -> tuple[float, float]:
        """``(lower, upper)`` in ms per call: a correct timer's interval holds every timed call
        (lower: their span) and lies between the end of the warm-up and its own return (upper),
        whatever else the machine was doing meanwhile."""
        m = self.marks
        lower = (m["last"] - m["first"]) * 1e3 / iters
        upper = (m["returned"] - m.get("warm", m["start"])) * 1e3 / iters
        return lower, upper


class ChainWatch:
    """Exercise 2's chain watched, for its warm-up rule (its public test and the grader's probe
    alike; CUDA only): inside ``with ChainWatch(module) as watch:``, every call of
    ``tiny_op_chain``, where ``coursekit.measurements`` holds it and where ``module`` imported it,
    records ``(side, capturing)``: on a stream other than the one current when the block began,
    and inside a CUDA graph capture; ``streams`` holds the stream each call ran on."""

    def __init__(self, module: Any):
        from coursekit import measurements

        self.calls: list[tuple[bool, bool]] = []
        self.streams: list[Any] = []
        self._real = measurements.tiny_op_chain
        self._homes = [m for m in (module, measurements) if getattr(m, "tiny_op_chain", None) is self._real]

    def __enter__(self) -> "ChainWatch":
        import torch

        caller, real, calls, streams = torch.cuda.current_stream(), self._real, self.calls, self.streams

        def tiny_op_chain(x, n_ops):
            stream = torch.cuda.current_stream()
            calls.append((stream != caller, torch.cuda.is_current_stream_capturing()))
            streams.append(stream)
            return real(x, n_ops)

        for home in self._homes:
            home.tiny_op_chain = tiny_op_chain
        return self

    def __exit__(self, *exc: Any) -> None:
        for home in self._homes:
            home.tiny_op_chain = self._real

    @property
    def captured(self) -> int:
        """How many calls of the chain were captured."""
        return sum(capturing for _, capturing in self.calls)

    @property
    def warmed_up_on_a_side_stream(self) -> bool:
        """Whether a call ran on a side stream, outside a capture, before the first captured one."""
        before = self.calls[: next((i for i, (_, c) in enumerate(self.calls) if c), 0)]
        return any(side and not capturing for side, capturing in before)

    @property
    def captured_on_the_warmup_stream(self) -> bool:
        """Whether the first captured call ran on the side stream of the warm-up call just before it."""
        first = next((i for i, (_, c) in enumerate(self.calls) if c), 0)
        return first > 0 and self.calls[first - 1] == (True, False) and self.streams[first - 1] == self.streams[first]


class FakeClock:
    """A monotonic clock that moves only when a call says so, for exercise 2's timer (its public
    tests and the grader's probe alike): while active (``with FakeClock(module):``) it stands in
    for ``time.perf_counter``, ``perf_counter_ns``, ``monotonic`` and ``monotonic_ns``, in the
    ``time`` module and under any name ``module`` bound them to (``from time import
    perf_counter``). Calling it is the function to time: call k advances the clock by
    ``durations_ms[k]`` (the last one repeats), so a correct timer's mean is known exactly, down
    to the non-integer part a floor division or a wrong divisor would lose."""

    NAMES = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns")

    def __init__(self, module: Any = None, durations_ms: tuple[float, ...] = (1.0,)):
        self.module, self.durations_ms = module, tuple(durations_ms)
        self.now_ns, self.count, self._saved = 1_000_000_000, 0, []

    def __call__(self) -> None:
        ms = self.durations_ms[min(self.count, len(self.durations_ms) - 1)]
        self.count += 1
        self.now_ns += round(ms * 1e6)

    def _fake(self, name: str):
        if name.endswith("_ns"):
            return lambda: self.now_ns
        return lambda: self.now_ns / 1e9

    def __enter__(self) -> "FakeClock":
        import time

        real = {name: getattr(time, name) for name in self.NAMES}
        places = [time] + ([self.module] if self.module is not None else [])
        for place in places:
            for attr, value in list(vars(place).items()):
                for name, function in real.items():
                    if value is function:
                        self._saved.append((place, attr, value))
                        setattr(place, attr, self._fake(name))
        return self

    def __exit__(self, *exc) -> None:
        for place, attr, value in reversed(self._saved):
            setattr(place, attr, value)
        self._saved.clear()


def check_timer_mean(got: Any, calls: TimedCalls, iters: int, what: str) -> None:
    """``got`` is the mean of the timed calls in ms: inside ``calls.window(iters)``."""
    if type(got) is not float:
        raise AssertionError(f"{what}: expected a float (ms per call), got {type(got).__name__} {got!r}")
    low, high = calls.window(iters)
    slack = 1e-6 * max(1.0, high)  # float rounding of the same clock's readings
    if not low - slack <= got <= high + slack:
        raise AssertionError(
            f"{what}: expected the mean of the timed calls, between {low:.4g} ms (their span, per "
            f"call) and {high:.4g} ms (from the end of the warm-up to the return, per call), got "
            f"{got!r}\n  rule: time only the `iters` calls after the warm-up, with a monotonic "
            "clock (time.perf_counter), divide by iters, report milliseconds (below: seconds, or "
            "a CPU-time clock? above: a total, the warm-up timed, or the wall clock?)"
        )


def run_as_script(impl, module: str) -> str:
    """``python -m <impl>.<module>`` (a submission folder is loaded as its package and the module
    run as ``__main__``): what it printed; an AssertionError with its stderr if it failed."""
    from coursekit.impl import NAMED, REPO_ROOT  # not at the top: a grading worker imports this module

    if impl.label in NAMED:
        cmd = [sys.executable, "-m", f"{impl.label}.{module}"]
    else:
        cmd = [
            sys.executable,
            "-c",
            "import runpy, sys; from coursekit.impl import Implementation; "
            "p = Implementation(sys.argv[1]); "
            f"runpy.run_module(p.qualified({module!r}), run_name='__main__')",
            str(impl.folder),
        ]
    env = dict(os.environ, PYTHONIOENCODING="utf-8", PYTHONPATH=str(REPO_ROOT))
    run = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, timeout=120)
    assert run.returncode == 0, (
        f"`python -m ...{module}` exited with {run.returncode}:\n{run.stderr.decode('utf-8', 'replace')[-1500:]}"
    )
    return run.stdout.decode("utf-8", "replace")
