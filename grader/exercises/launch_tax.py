"""Exercise 2 (launch_tax): the probes a worker runs on the submission's ``launch_tax`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import torch

from grader.checks import Answer, Check, P, Probe, raised, same
from grader.probes import call, probe

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


@probe
def time_ms_calls(mod, iters: int, warmup: int):
    calls = []
    result = call(mod.time_ms, lambda: calls.append(1), iters=iters, warmup=warmup)
    return {"calls": len(calls), "is_float": isinstance(result, float)}


@probe
def time_ms_default_calls(mod):
    calls = []
    call(mod.time_ms, lambda: calls.append(1))
    return len(calls)


@probe
def time_ms_observed(mod, iters: int, warmup: int, timed_ms: tuple, warmup_ms: float, wall_clock_jumps: bool = False):
    """``time_ms(fn, iters, warmup)`` where each timed call sleeps a duration drawn *at the call*
    from ``timed_ms`` (low, high), from the operating system's randomness: no frame holds it, so
    no number derived from the probe's inputs can match. ``coursekit.checks.TimedCalls`` reads the
    monotonic clock around the calls and gives the window any correct timer's mean falls in,
    load or not (the same rule the public tests use). ``wall_clock_jumps``: the wall clock
    (``time.time``) jumps an hour at every reading during the call (put back right after): a
    monotonic timer does not notice."""
    from coursekit.checks import TimedCalls

    fn = TimedCalls(warmup=warmup, warmup_ms=warmup_ms, timed_ms=tuple(timed_ms))
    if wall_clock_jumps:
        real_time, real_time_ns, readings = time.time, time.time_ns, [0]

        def jumping() -> float:
            readings[0] += 1
            return real_time() + 3600.0 * readings[0]

        time.time = jumping
        time.time_ns = lambda: real_time_ns() + int(3600e9) * (readings[0] + 1)
    fn.started()
    try:
        result = call(mod.time_ms, fn, iters=iters, warmup=warmup)
    finally:
        fn.returned()
        if wall_clock_jumps:
            time.time, time.time_ns = real_time, real_time_ns
    answer = {"calls": fn.count, "result": float(result) if isinstance(result, float) else None}
    if fn.count == iters + warmup and iters > 0:
        answer["lower_ms"], answer["upper_ms"] = fn.window(iters)
    return answer


@probe
def time_ms_fake_clock(mod, iters: int, warmup: int, durations_ms: list):
    """``time_ms(fn, iters, warmup)`` on ``coursekit.checks.FakeClock``: call k of fn takes
    exactly ``durations_ms[k]`` on every monotonic clock (the CPU timer; no CUDA in this pass)."""
    from coursekit.checks import FakeClock

    with FakeClock(mod, tuple(durations_ms)) as fn:
        result = call(mod.time_ms, fn, iters=iters, warmup=warmup)
    return {"calls": fn.count, "result": result}


@probe
def measure(mod, kwargs: dict):
    """``measure_launch_tax(**kwargs)`` with the module's ``tiny_op_chain`` watched: what the
    result holds, how many calls of the chain were captured, whether one ran on a side stream
    (not the caller's), outside a capture, before the first captured one (the warm-up), and
    whether the capture recorded on that same stream."""
    from coursekit.checks import ChainWatch

    if not torch.cuda.is_available():  # nothing to watch: the given need_cuda line refuses the call
        result = call(mod.measure_launch_tax, **kwargs)
        return {"type": type(result).__name__}
    with ChainWatch(mod) as watch:
        result = call(mod.measure_launch_tax, **kwargs)
    return {
        "type": type(result).__name__,
        "n_ops": result.n_ops,
        "numel": result.numel,
        "eager_positive": isinstance(result.eager_us, float) and result.eager_us > 0,
        "graph_positive": isinstance(result.graph_us, float) and result.graph_us > 0,
        "replay_matches_eager": result.replay_matches_eager,
        "captured_calls": watch.captured,
        "side_stream_warmup": watch.warmed_up_on_a_side_stream,
        "captured_on_the_warmup_stream": watch.captured_on_the_warmup_stream,
    }


@probe
def sweep_stand_in(mod, lengths: list, numel: int, iters: int):
    """``sweep_launch_tax(lengths, numel=numel, iters=iters)`` with the module's
    ``measure_launch_tax`` replaced by a stand-in that records its calls (no GPU needed): the
    calls ``[n_ops, numel, iters]`` and the result's type and lengths."""
    from coursekit.measurements import LaunchTax

    calls = []

    def measure(n_ops=200, numel=1024, iters=100):
        calls.append([n_ops, numel, iters])
        return LaunchTax(n_ops, numel, 2.0 * n_ops, 1.0 + n_ops, True)

    real = mod.measure_launch_tax
    mod.measure_launch_tax = measure
    try:
        result = call(mod.sweep_launch_tax, list(lengths), numel=numel, iters=iters)
    finally:
        mod.measure_launch_tax = real
    return {
        "calls": calls,
        "type": type(result).__name__,
        "n_ops": [getattr(r, "n_ops", None) for r in result] if isinstance(result, (list, tuple)) else None,
    }


@probe
def time_ms_gpu_work(mod):
    """``time_ms(fn, iters=5, warmup=2)`` where each call keeps the GPU busy for a number of cycles
    drawn at the call (no frame holds it) and records a CUDA event after its work. When
    ``time_ms`` returns, a timer that waited for the GPU finds the last event done. The probe's own
    events bound any correct timer's mean, as on the CPU (``time_ms_observed``): the timed calls'
    span on the GPU, and the GPU time from the end of the warm-up to an event recorded right after
    ``time_ms`` returned, per call."""
    import random

    draw = random.SystemRandom()
    done, marks, warmup, iters = [], {}, 2, 5

    def stamp():
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def fn():
        timed = len(done) >= warmup
        if timed and "first" not in marks:
            marks["first"] = stamp()
        torch.cuda._sleep(draw.randint(10_000_000, 30_000_000))
        event = stamp()
        done.append(event)
        if timed:
            marks["last"] = event
        elif len(done) == warmup:
            marks["warm"] = event

    start = stamp()
    result = call(mod.time_ms, fn, iters=iters, warmup=warmup)
    returned = stamp()
    gpu_done = bool(done) and done[-1].query()  # before the probe waits for anything itself
    torch.cuda.synchronize()
    answer = {"calls": len(done), "gpu_done_on_return": gpu_done, "is_float": isinstance(result, float)}
    if len(done) == warmup + iters:
        answer.update(
            result=float(result) if isinstance(result, float) else None,
            lower_ms=marks["first"].elapsed_time(marks["last"]) / iters,
            upper_ms=marks.get("warm", start).elapsed_time(returned) / iters,
        )
    return answer


# ------------------------------------------------------------------------- checks


def call_counts(rng: random.Random, count: int) -> list[tuple[int, int]]:
    return [(rng.randint(1, 20), rng.randint(0, 8)) for _ in range(count)]


def checks(draw: Draw) -> list[Check]:
    counts = call_counts(draw.rng("ex2.time_ms_call_count"), 6)
    r = draw.rng("ex2.time_ms_mean_ms")
    # Two ranges of timed-call durations far apart; each call's own duration is drawn when it is
    # made, so only a clock tells the mean (see time_ms_observed).
    low = [r.choice(range(1, 5)), r.choice(range(12, 20))]
    timed = [(float(x), x + 4.0) for x in low]
    # Timed calls of non-integer durations (in 1/8 ms, exact on the clock) whose mean is not a
    # whole number, and slow warm-up calls: a floor division, a total, a mean over warmup + iters
    # or a timed warm-up is off.
    r = draw.rng("ex2.time_ms_exact_mean")
    fake = []
    for iters, warmup in ((r.randint(3, 9), r.randint(1, 4)), (r.randint(2, 9), 0)):
        calls = [r.randint(1, 40) / 8 for _ in range(iters)]
        while (sum(calls) / iters).is_integer():
            calls[0] += 0.125
        fake.append((iters, warmup, [float(r.randint(200, 900))] * warmup + calls))
    r = draw.rng("ex2.gpu_measure_launch_tax")
    measured = r.randint(20, 80)
    r = draw.rng("ex2.sweep_launch_tax")
    low, mid, high = sorted(r.sample(range(1, 64), 3))
    lengths = [mid, high, low]  # in no sorted order, in every draw: the order given is the order measured
    numel, iters = r.choice([64, 256, 4096]), r.randint(2, 9)
    return [
        Check(
            "ex2",
            "time_ms_call_count",
            "time_ms calls fn exactly warmup + iters times (defaults 100 and 10) and returns a float",
            [P("time_ms_calls", f"time_ms(fn, iters={i}, warmup={w})", iters=i, warmup=w) for i, w in counts]
            + [
                P("time_ms_calls", "time_ms(fn, iters=1, warmup=0)", iters=1, warmup=0),
                P("time_ms_default_calls", "time_ms(fn)"),
            ],
            points=1,
        ),
        Check(
            "ex2",
            "time_ms_mean_ms",
            "the result is the mean of the timed calls only, in milliseconds, from a monotonic "
            "clock (not the wall clock time.time, which jumps when the system clock is set)",
            [
                P(
                    "time_ms_observed",
                    f"time_ms(fn, iters=10, warmup=2) with timed calls of {a:g} to {b:g} ms and 40 ms warm-up calls",
                    iters=10,
                    warmup=2,
                    timed_ms=(a, b),
                    warmup_ms=40.0,
                )
                for a, b in timed
            ]
            + [
                P(
                    "time_ms_observed",
                    f"time_ms(fn, iters=5, warmup=1) with calls of {timed[0][0]:g} "
                    f"to {timed[0][1]:g} ms while the wall clock jumps an hour at every reading",
                    iters=5,
                    warmup=1,
                    timed_ms=timed[0],
                    warmup_ms=1.0,
                    wall_clock_jumps=True,
                )
            ],
            compare=observed_mean,
            points=2,
        ),
        Check(
            "ex2",
            "time_ms_exact_mean",
            "on a clock that moves only during the calls, the result is exactly the timed "
            "calls' total divided by iters, in ms (not floored, not over warmup + iters)",
            [
                P(
                    "time_ms_fake_clock",
                    f"time_ms(fn, iters={i}, warmup={w}) where the calls take {d} ms",
                    iters=i,
                    warmup=w,
                    durations_ms=d,
                )
                for i, w, d in fake
            ],
            compare=same(rel=1e-9, abs_=1e-9),
            points=1,
        ),
        Check(
            "ex2",
            "gpu_time_ms_includes_gpu_work",
            "on CUDA the timer waits for the GPU's work (CUDA events), not just the launches, and "
            "returns the mean GPU time of the timed calls",
            [P("time_ms_gpu_work", "time_ms(fn) where fn keeps the GPU busy")],
            compare=_gpu_timer,
            gpu=True,
            points=1,
        ),
        Check(
            "ex2",
            "gpu_measure_launch_tax",
            "measure_launch_tax returns a LaunchTax recording the chain, with positive times and a "
            "replay equal to eager; the chain is warmed up on a side stream, then captured once on "
            "that same stream",
            [
                P(
                    "measure",
                    f"measure_launch_tax(n_ops={measured}, numel=1024, iters=10)",
                    kwargs={"n_ops": measured, "numel": 1024, "iters": 10},
                )
            ],
            gpu=True,
            points=1,
        ),
        Check(
            "ex2",
            "sweep_launch_tax",
            "sweep_launch_tax calls measure_launch_tax(n, numel=numel, iters=iters) for every "
            "length, in order, and returns their results as a list (checked with a stand-in for "
            "measure_launch_tax, on any machine)",
            [
                P(
                    "sweep_stand_in",
                    f"sweep_launch_tax({lengths}, numel={numel}, iters={iters}) with a stand-in measure_launch_tax",
                    lengths=lengths,
                    numel=numel,
                    iters=iters,
                )
            ],
            points=1,
        ),
    ]


def observed_mean(probe: Probe, got: Answer, expected: Answer) -> str | None:
    """The timer's mean is inside the window the probe measured around the calls (its own clock,
    load included): from the timed calls' span to the time between the end of the warm-up and the
    timer's return, per call."""
    if not got.ok:
        return f"{probe.label} {raised(got)}"
    v = got.value
    want = probe.args["iters"] + probe.args["warmup"]
    if v["calls"] != want:
        return f"{probe.label}: called fn {v['calls']} times, expected {want} (warmup + iters)"
    result = v["result"]
    if result is None:
        return f"{probe.label}: expected a float (ms per call)"
    low, high = v["lower_ms"], v["upper_ms"]
    slack = 1e-6 * max(1.0, high)  # float rounding of the same clock's readings
    if not low - slack <= result <= high + slack:
        return (
            f"{probe.label}: expected the mean of the timed calls, between {low:.4g} ms (their "
            f"span, per call) and {high:.4g} ms (from the end of the warm-up to the return, per "
            f"call), got {result!r} (below: seconds, not ms, or a CPU-time clock? above: a total "
            "instead of a mean, or the warm-up timed, or the wall clock?)"
        )
    return None


def _gpu_timer(probe: Probe, got: Answer, expected: Answer) -> str | None:
    if not got.ok:
        return f"{probe.label} {raised(got)}"
    v = got.value
    if v["calls"] != 7:
        return f"{probe.label}: time_ms(fn, iters=5, warmup=2) called fn {v['calls']} times, expected 7"
    if not v["gpu_done_on_return"]:
        return (
            f"{probe.label}: time_ms returned while the GPU was still running the timed calls: "
            "a CPU clock only times the launches; record CUDA events and wait for the last one"
        )
    if not v["is_float"]:
        return f"{probe.label}: expected a float (ms per call)"
    low, high, result = v["lower_ms"], v["upper_ms"], v["result"]
    slack = 0.01 * high + 0.05  # two clocks' readings (events, and a CPU timer after a synchronize)
    if not low - slack <= result <= high + slack:
        return (
            f"{probe.label}: expected the mean GPU time of the timed calls, between {low:.4g} ms "
            f"and {high:.4g} ms (measured by the grader's own CUDA events), got {result!r}"
        )
    return None
