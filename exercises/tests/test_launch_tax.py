"""Exercise 2 · launch_tax — timing, and the lesson's Part A on a real GPU.

Run: python -m pytest exercises -m ex2. The timer is checked on the CPU; the measurements need a
GPU (marked ``gpu``, skipped with a reason elsewhere). No test here asserts a speed: how fast a
machine is belongs to the lab (python -m coursekit.lab launch-tax), not to pass/fail.
"""

import time

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coursekit.checks import (ChainWatch, FakeClock, TimedCalls, check_rejects, check_says_cuda_is_needed,
                              check_timer_mean, without_cuda)
from coursekit.measurements import LaunchTax

pytestmark = pytest.mark.ex2

no_cuda_only = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the error raised on a machine without CUDA"
)


class Calls(TimedCalls):
    """A function to time that counts its calls and can sleep differently while warming up; it
    reads the clock around the calls, so a timer's result is judged by what really happened."""

    def __init__(self, warmup=0, warmup_sleep_s=0.0, timed_sleep_s=0.0):
        super().__init__(warmup=warmup, warmup_ms=warmup_sleep_s * 1e3, timed_ms=timed_sleep_s * 1e3)


def timed(launch_tax, fn, **kwargs):
    """``time_ms(fn, **kwargs)`` as the clock timer (CUDA hidden, on any machine), with the calls'
    own readings of the clock around it."""
    fn.started()
    try:
        with without_cuda():
            return launch_tax.time_ms(fn, **kwargs)
    finally:
        fn.returned()


# ------------------------------------------------------------------------------- time_ms (CPU)


@given(st.integers(1, 30), st.integers(0, 12))
def test_time_ms_calls_fn_warmup_plus_iters_times(launch_tax, iters, warmup):
    fn = Calls()
    result = launch_tax.time_ms(fn, iters=iters, warmup=warmup)
    assert fn.count == warmup + iters, (
        f"time_ms(fn, iters={iters}, warmup={warmup}) called fn {fn.count} times, expected "
        f"{warmup + iters}\n  rule: exactly `warmup` untimed calls, then `iters` timed calls"
    )
    assert isinstance(result, float) and result >= 0, (
        f"time_ms must return a float >= 0 (mean ms per call), got {result!r}"
    )


def test_time_ms_defaults(launch_tax):
    fn = Calls()
    launch_tax.time_ms(fn)
    assert fn.count == 110, f"time_ms(fn) with the defaults (iters=100, warmup=10) called fn {fn.count} times"


def test_time_ms_is_the_mean_of_the_timed_calls_in_ms(launch_tax):
    # Warm-up calls sleep 40 ms, timed calls 1 to 5 ms (drawn at each call). The calls read the
    # clock around themselves: the mean must lie between the timed calls' span and the time from
    # the end of the warm-up to the return (per call), however busy the machine is. A total, a
    # mean that counts the warm-up, or seconds land outside.
    fn = Calls(warmup=2, warmup_sleep_s=0.040)
    fn.timed_ms = (1.0, 5.0)
    got = timed(launch_tax, fn, iters=10, warmup=2)
    check_timer_mean(got, fn, 10, "time_ms(fn, iters=10, warmup=2) with 40 ms warm-up calls and "
                                  "timed calls of 1 to 5 ms")


def test_time_ms_uses_a_monotonic_clock(launch_tax, monkeypatch):
    """The wall clock (time.time) jumps when the system clock is set (NTP, a VM resumed...); a
    timer must not follow it. Here it jumps an hour forward at every reading."""
    real_time, real_time_ns, readings = time.time, time.time_ns, [0]

    def jumping():
        readings[0] += 1
        return real_time() + 3600.0 * readings[0]

    fn = Calls(warmup=1, timed_sleep_s=0.002)
    monkeypatch.setattr(time, "time", jumping)
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + int(3600e9) * (readings[0] + 1))
    got = timed(launch_tax, fn, iters=5, warmup=1)
    monkeypatch.undo()
    check_timer_mean(got, fn, 5, "time_ms(fn, iters=5, warmup=1) with 2 ms calls, while the wall "
                                 "clock jumped an hour at every reading (time.time must not be used)")


@pytest.mark.parametrize("iters, warmup, durations_ms", [
    (5, 2, (500.0, 500.0, 0.25, 1.5, 0.125, 2.0, 0.375)),  # mean 0.85 ms
    (3, 0, (1.0, 2.0, 2.5)),  # mean 1.8333... ms
])
def test_time_ms_is_exact_on_a_fake_clock(launch_tax, iters, warmup, durations_ms):
    """A clock that moves only while fn runs (every monotonic clock of the time module, and any
    name your module bound one to): the mean is known to the last digit, so a floor division, a
    total, a mean over warmup + iters or a timed warm-up shows."""
    timed = durations_ms[warmup:warmup + iters]
    with without_cuda(), FakeClock(launch_tax, durations_ms) as fn:  # the clock timer, GPU or not
        got = launch_tax.time_ms(fn, iters=iters, warmup=warmup)
    expected = sum(timed) / iters
    assert isinstance(got, float) and abs(got - expected) <= 1e-9 * max(1.0, expected), (
        f"time_ms(fn, iters={iters}, warmup={warmup}) where the calls take {list(durations_ms)} ms "
        f"(the first {warmup} are the warm-up): expected {expected!r} ms, got {got!r}\n"
        "  rule: the timed calls' total divided by iters, in ms (true division; the warm-up "
        "calls are not timed)"
    )


@pytest.mark.given
@pytest.mark.parametrize("iters", [0, -1])
def test_time_ms_rejects_no_iterations(launch_tax, iters):
    check_rejects(lambda: launch_tax.time_ms(Calls(), iters=iters), "iters",
                  "a mean over fewer than one call is undefined")


def test_time_ms_accepts_one_iteration_and_no_warmup(launch_tax):
    """The limits themselves are valid: iters=1 (a mean of one call) and warmup=0 (no warm-up)."""
    fn = Calls()
    got = launch_tax.time_ms(fn, iters=1, warmup=0)
    assert fn.count == 1 and isinstance(got, float), (
        f"time_ms(fn, iters=1, warmup=0): expected one call and a float, got {fn.count} call(s) "
        f"and {got!r}\n  rule: iters >= 1 and warmup >= 0 are accepted, the limits included"
    )


@pytest.mark.given
def test_time_ms_rejects_negative_warmup(launch_tax):
    check_rejects(lambda: launch_tax.time_ms(Calls(), warmup=-1), "warmup",
                  "warmup counts calls, it cannot be negative")


@pytest.mark.given
@no_cuda_only
def test_measure_launch_tax_without_cuda_says_so(launch_tax):
    check_says_cuda_is_needed(lambda: launch_tax.measure_launch_tax(n_ops=4, numel=8, iters=1),
                              "measure_launch_tax")


@pytest.mark.given
@pytest.mark.parametrize("argument", ["n_ops", "numel", "iters"])
def test_measure_launch_tax_checks_its_arguments_on_any_machine(launch_tax, argument):
    """Bad arguments are a ValueError first, with or without a GPU: a laptop can tell."""
    kwargs = dict(n_ops=4, numel=8, iters=1)
    kwargs[argument] = 0
    check_rejects(lambda: launch_tax.measure_launch_tax(**kwargs), argument,
                  f"{argument} must be at least 1; arguments are checked before looking for CUDA")


@pytest.mark.given
def test_sweep_launch_tax_rejects_an_empty_sweep_on_any_machine(launch_tax):
    check_rejects(lambda: launch_tax.sweep_launch_tax([]), "n_ops_list",
                  "a sweep needs at least one chain length (no GPU is needed to tell)")


@pytest.mark.given
@pytest.mark.parametrize("lengths", [[4, 0], [True], [8, 2.0]], ids=repr)
def test_sweep_launch_tax_rejects_a_bad_length_on_any_machine(launch_tax, lengths):
    check_rejects(lambda: launch_tax.sweep_launch_tax(lengths, iters=1), "n_ops_list",
                  f"sweep_launch_tax({lengths}): every chain length is an int >= 1 (a bool is not), "
                  "checked before anything is measured (no GPU is needed to tell)")


def test_sweep_measures_each_length_with_its_arguments(launch_tax, monkeypatch):
    """measure_launch_tax replaced by a stand-in that records its calls (no GPU needed): the sweep
    must call it once per length, in order, passing numel and iters on, and return a list."""
    calls = []

    def measure(n_ops=200, numel=1024, iters=100):
        calls.append((n_ops, numel, iters))
        return LaunchTax(n_ops, numel, 2.0 * n_ops, 1.0 + n_ops, True)

    monkeypatch.setattr(launch_tax, "measure_launch_tax", measure)
    got = launch_tax.sweep_launch_tax([16, 4, 32], numel=64, iters=3)
    assert calls == [(16, 64, 3), (4, 64, 3), (32, 64, 3)], (
        f"sweep_launch_tax([16, 4, 32], numel=64, iters=3) called measure_launch_tax with "
        f"(n_ops, numel, iters) = {calls}, expected [(16, 64, 3), (4, 64, 3), (32, 64, 3)]\n"
        "  rule: measure_launch_tax(n, numel=numel, iters=iters) for every length, in order"
    )
    assert type(got) is list and [r.n_ops for r in got] == [16, 4, 32], (
        f"sweep_launch_tax must return a list of the measurements in order, got {got!r}"
    )


# ------------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu
def test_time_ms_on_cuda_waits_for_the_gpu_work(launch_tax):
    done = []

    def fn():
        torch.cuda._sleep(20_000_000)  # GPU work that takes a while (milliseconds)
        event = torch.cuda.Event()
        event.record()  # completes only when the work queued before it has run
        done.append(event)

    got = launch_tax.time_ms(fn, iters=5, warmup=2)
    assert len(done) == 7, f"time_ms(fn, iters=5, warmup=2) called fn {len(done)} times, expected 7"
    assert done[-1].query(), (
        "time_ms returned while the GPU was still running the timed calls, so it measured only "
        "the launches\n  rule: CUDA kernels run asynchronously; record a CUDA event after the "
        "timed calls and wait for it (end.synchronize()) before reading elapsed_time"
    )
    assert isinstance(got, float) and got >= 0, f"time_ms must return a float (ms per call), got {got!r}"


@pytest.mark.gpu
def test_measure_launch_tax_part_a(launch_tax):
    result = launch_tax.measure_launch_tax(n_ops=50, numel=1024, iters=10)
    assert isinstance(result, LaunchTax), (
        f"measure_launch_tax must return a coursekit.measurements.LaunchTax, got {type(result).__name__}"
    )
    assert (result.n_ops, result.numel) == (50, 1024), (
        f"LaunchTax(n_ops, numel, ...) must record the chain measured: expected (50, 1024), got "
        f"({result.n_ops}, {result.numel})"
    )
    for name in ("eager_us", "graph_us"):
        value = getattr(result, name)
        assert isinstance(value, float) and value > 0, f"LaunchTax.{name}: expected a time > 0 in µs, got {value!r}"
    assert result.replay_matches_eager is True, (
        "replay_matches_eager is not True: the graph's output must equal the eager chain's result "
        "(copy the input into the static tensor, warm up, capture, replay, compare with torch.equal)"
    )


@pytest.mark.gpu
def test_sweep_launch_tax_measures_each_length_in_order(launch_tax):
    lengths = [16, 4, 32]
    results = launch_tax.sweep_launch_tax(lengths, iters=3)
    got = [r.n_ops for r in results] if isinstance(results, list) else results
    assert got == lengths, (
        f"sweep_launch_tax({lengths}): expected a list of LaunchTax for n_ops {lengths} in that "
        f"order, got {got!r}"
    )
    assert all(r.replay_matches_eager is True for r in results), (
        "every measurement in the sweep must have a replay that matches eager"
    )


@pytest.mark.gpu
def test_measure_launch_tax_warms_up_on_a_side_stream(launch_tax):
    """The docstring's rule: the captured call comes after a warm-up call on a side stream (a new
    stream, not the caller's) and is recorded on that same stream, as exercise 3's ``capture``
    does."""
    caller = torch.cuda.current_stream()
    with ChainWatch(launch_tax) as watch:  # the given chain, watched: which stream, captured or not
        launch_tax.measure_launch_tax(n_ops=8, numel=1024, iters=2)
    assert watch.captured == 1, (
        f"measure_launch_tax called tiny_op_chain {watch.captured} times inside a capture, "
        "expected exactly one captured call (use the module's tiny_op_chain, the given one)")
    assert watch.warmed_up_on_a_side_stream, (
        "no warm-up call of the chain ran on a side stream before the capture: run one on a new "
        "torch.cuda.Stream() that waits for the current stream (and have the current stream wait "
        "for it), then capture"
    )
    assert watch.captured_on_the_warmup_stream, (
        "the chain warmed up on a side stream but was captured on another one (torch.cuda.graph's "
        "own, when it is given no stream): capture with torch.cuda.graph(graph, stream=side)"
    )
    assert torch.cuda.current_stream() == caller, "the caller's stream must be current again"
