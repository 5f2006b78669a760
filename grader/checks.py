"""Checks: what the judge asks a submission (probes) and how it judges the answers.

A check is a list of probes (``grader/probes.py``) and a rule. The judge runs every probe on the
submission (in a sandboxed worker) and on the reference (itself), then compares answer by answer:
by default the submission's answer must equal the reference's (floats to ~1e-9 relative, tensors
with ``allclose``); a probe that expects an error needs that error with a message naming the
argument; a few probes judge a property instead (a timer's result inside the window the probe
measured around the calls, a message that says a CUDA device is needed).

Inputs are drawn (``grader/secret.py``): each check builds its probes from ``draw.rng(its
name)``, so official grading asks what no student could know in advance, and practice mode asks
the release's fixed inputs. A draw picks values, never which cases are asked: every case that
tells a rule from a plausible wrong one (a boundary, no padding needed, slots out of order, two
different counts where one could be hard-coded) is in every draw, or a wrong answer would pass
on some draws (the staff repository grades its wrong answers under many fresh secrets to find
such a draw). No check passes on rejection alone: every check whose probes expect
an error also carries a valid input whose answer must match the reference (capture, which has no
valid input without CUDA, pairs two different errors instead).

This file holds the public checks, which mirror the public tests; ``grader/hidden.py`` holds the
hidden ones (never released). Points live in ``grader/rubric.toml``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable

import torch

from coursekit.checks import names_argument
from coursekit.checks import says_cuda_is_needed as _names_missing_cuda
from coursekit.strategies import MODES
from grader.secret import PRACTICE, Draw


@dataclass(frozen=True)
class Probe:
    probe: str
    args: dict
    label: str
    raises: tuple[str, ...] = ()  # an expected error: its message must name one of these
    error: str = "ValueError"
    cuda: bool = False  # expects the RuntimeError that says a CUDA device is needed
    last: bool = False  # runs after every other probe of its worker (a failing capture)

    @property
    def needs_reference(self) -> bool:
        """Judged against the reference's answer (not an expected error, not a property)."""
        return not (self.raises or self.cuda)

    def key(self) -> str:
        import json

        return json.dumps([self.probe, self.args], sort_keys=True, default=str)


@dataclass
class Answer:
    ok: bool
    value: Any = None
    error: dict | None = None  # {"types": [class names along the MRO], "message": str}


#: ``compare(probe, submission_answer, reference_answer) -> problem or None``
Compare = Callable[[Probe, Answer, Answer], "str | None"]


@dataclass
class Check:
    exercise: str
    name: str
    rule: str
    probes: list[Probe]
    compare: Compare | None = None
    gpu: bool = False
    hidden: bool = False
    triton: bool = False  # needs torch.compile to build GPU kernels (a C compiler, Python.h, libcuda)

    @property
    def id(self) -> str:
        return f"{self.exercise}.{self.name}"


# ----------------------------------------------------------------------------- comparing


def short(value: Any, limit: int = 160) -> str:
    if isinstance(value, torch.Tensor):
        text = f"tensor{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')} " \
               f"{value.flatten()[:6].tolist()}{'...' if value.numel() > 6 else ''}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def differs(got: Any, expected: Any, rel: float, abs_: float, rtol: float, atol: float) -> str | None:
    """Why ``got`` is not ``expected`` (types must match exactly), or None."""
    if type(got) is not type(expected):
        return f"expected {short(expected)} ({type(expected).__name__}), got {short(got)} " \
               f"({type(got).__name__})"
    if isinstance(expected, float):
        if math.isnan(expected) and math.isnan(got):
            return None
        if not math.isclose(got, expected, rel_tol=rel, abs_tol=abs_):
            return f"expected {expected!r}, got {got!r}"
        return None
    if isinstance(expected, torch.Tensor):
        if got.dtype != expected.dtype or got.shape != expected.shape:
            return f"expected {short(expected)}, got {short(got)}"
        if got.dtype.is_floating_point:
            ok = torch.allclose(got.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = torch.equal(got, expected)
        if not ok:
            bad = (got.double() - expected.double()).abs().nan_to_num(float("inf")).max().item()
            return f"expected {short(expected)}, got {short(got)} (max difference {bad:.3g})"
        return None
    if isinstance(expected, (list, tuple)):
        if len(got) != len(expected):
            return f"expected {len(expected)} items {short(expected)}, got {len(got)} {short(got)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            problem = differs(g, e, rel, abs_, rtol, atol)
            if problem:
                return f"[{i}]: {problem}"
        return None
    if isinstance(expected, dict):
        if set(got) != set(expected):
            return f"expected keys {sorted(expected)}, got {sorted(got)}"
        for k in expected:
            problem = differs(got[k], expected[k], rel, abs_, rtol, atol)
            if problem:
                return f"[{k!r}]: {problem}"
        return None
    return None if got == expected else f"expected {short(expected)}, got {short(got)}"


def raised(answer: Answer) -> str:
    types, message = answer.error["types"], answer.error["message"]
    if "NotImplementedError" in types and message.startswith("exercise "):  # a stub's own
        return f"not implemented yet ({message})"
    if "AttributeError" in types and "has no attribute" in message:
        return f"missing: {message[:200]}"
    return f"raised {types[0]}: {message[:200]}"


def same(keys: tuple[str, ...] = (), rel: float = 1e-9, abs_: float = 1e-12,
         rtol: float = 1e-5, atol: float = 1e-6) -> Compare:
    """The submission answers as the reference does (only ``keys`` of a dict answer, if given)."""

    def compare(probe: Probe, got: Answer, expected: Answer) -> str | None:
        if probe.raises:
            return expects_error(probe, got)
        if probe.cuda:
            return says_cuda_is_needed(probe, got, expected)
        if expected is None:
            raise RuntimeError(f"no reference answer for probe {probe.label}")
        if not expected.ok:
            raise RuntimeError(f"the reference failed probe {probe.label}: {expected.error}")
        if not got.ok:
            return f"{probe.label} {raised(got)}"
        g, e = got.value, expected.value
        if keys:
            if not isinstance(g, dict):
                return f"{probe.label}: got {short(g)}"
            for k in keys:
                problem = differs(g.get(k), e.get(k), rel, abs_, rtol, atol)
                if problem:
                    return f"{probe.label}, {k}: {problem}"
            return None
        problem = differs(g, e, rel, abs_, rtol, atol)
        return f"{probe.label}: {problem}" if problem else None

    compare.needs_reference = True
    return compare


def expects_error(probe: Probe, got: Answer) -> str | None:
    names = " or ".join(repr(n) for n in probe.raises)
    if got.ok:
        return f"{probe.label}: expected {probe.error} naming {names}, nothing was raised"
    if "NotImplementedError" in got.error["types"] and got.error["message"].startswith("exercise "):
        return f"{probe.label} {raised(got)}"
    if probe.error not in got.error["types"]:
        return f"{probe.label}: expected {probe.error} naming {names}, {raised(got)}"
    if not any(names_argument(got.error["message"], n) for n in probe.raises):
        return f"{probe.label}: the {probe.error} does not name {names}: {got.error['message'][:200]!r}"
    return None


def says_cuda_is_needed(probe: Probe, got: Answer, expected: Answer) -> str | None:
    if got.ok:
        return f"{probe.label} without CUDA: expected a RuntimeError, nothing was raised"
    if "NotImplementedError" in got.error["types"] or "RuntimeError" not in got.error["types"]:
        return f"{probe.label} without CUDA: expected a RuntimeError saying a CUDA device is needed, {raised(got)}"
    if not _names_missing_cuda(got.error["message"]):
        return f"{probe.label} without CUDA: the RuntimeError must say a CUDA device is needed, " \
               f"got {got.error['message'][:200]!r}"
    return None


def P(probe: str, label: str, raises: tuple[str, ...] | str = (), error: str = "ValueError",
      cuda: bool = False, last: bool = False,
      **args) -> Probe:
    return Probe(probe, args, label, (raises,) if isinstance(raises, str) else tuple(raises), error,
                 cuda, last)


# ----------------------------------------------------------------------------- exercise 1

ATTRS = ("n_kernels", "compute_ms", "launch_ms", "eager_ms", "graph_ms", "speedup")
FIELDS = ("weight_gib", "n_layers", "kernels_per_layer", "launch_us", "bandwidth_bps", "gpu_node_us")


def decode_step_kwargs(rng: random.Random) -> dict:
    return dict(weight_gib=round(rng.uniform(0.001, 200), 3), n_layers=rng.randint(0, 128),
                kernels_per_layer=rng.randint(0, 64), launch_us=round(rng.uniform(0, 50), 3),
                bandwidth_bps=rng.choice([1e9, 3.35e12, 1e12, 4.27e12, 8e11, round(rng.uniform(1e9, 9e12))]),
                gpu_node_us=rng.choice([0.0, 1.1, 2.5, round(rng.uniform(0, 5), 2)]))


def step_label(kwargs: dict, attr: str) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    call = "()" if attr in ("eager_ms", "graph_ms", "speedup") else ""
    return f"DecodeStep({args}).{attr}{call}"


def report_rows(rng: random.Random, count: int) -> list:
    return [[f"row {rng.randint(0, 999)}", decode_step_kwargs(rng)] for _ in range(count)]


def fit_lines(rng: random.Random, count: int) -> list[tuple[list[int], list[float]]]:
    lines = []
    for _ in range(count):
        a, b = rng.uniform(0, 20), rng.uniform(0, 5)
        ns = rng.sample(range(1, 3000), rng.randint(2, 10))
        lines.append((ns, [b + n * a / 1e3 for n in ns]))
    return lines


def ex1(draw: Draw) -> list[Check]:
    r = draw.rng("ex1.decode_step_formulas")
    steps = [dict(weight_gib=5.5), dict(weight_gib=14.2)] + [decode_step_kwargs(r) for _ in range(20)]
    r = draw.rng("ex1.decode_step_rejects_bad_fields")
    negative = {f: -round(r.uniform(0.001, 100), 3) for f in FIELDS}
    valid = [decode_step_kwargs(r), dict(weight_gib=0.0, n_layers=0, kernels_per_layer=0, launch_us=0.0,
                                         bandwidth_bps=round(r.uniform(1, 1e12), 1), gpu_node_us=0.0)]
    r = draw.rng("ex1.simulate_eager_ms")
    kernels = [[float(r.randint(0, 50)) for _ in range(r.randint(0, 30))] for _ in range(25)]
    launches = [float(r.randint(0, 30)) for _ in kernels]
    r = draw.rng("ex1.fit_launch_model")
    lines = fit_lines(r, 10)
    short_n, repeated = r.sample(range(1, 500), 3), r.randint(1, 500)
    return [
        Check("ex1", "decode_step_formulas",
              "n_kernels = layers*kernels_per_layer + 10 (an int); compute, launch, eager, graph "
              "and speedup follow the lesson's formulas",
              [P("decode_step", step_label(kw, a), kwargs=kw, attr=a) for kw in steps for a in ATTRS]),
        Check("ex1", "decode_step_rejects_bad_fields",
              "a negative field or a non-positive bandwidth is a ValueError naming the field; "
              "fields >= 0 (zero included) are accepted and kept",
              [P("make_decode_step", f"DecodeStep({f}={v})", f, kwargs={"weight_gib": 1.0, f: v})
               for f, v in negative.items()]
              + [P("make_decode_step", "DecodeStep(1.0, bandwidth_bps=0)", "bandwidth_bps",
                   kwargs={"weight_gib": 1.0, "bandwidth_bps": 0})]
              + [P("make_decode_step", f"DecodeStep(**{kw})", kwargs=kw) for kw in valid]),
        Check("ex1", "seed_report",
              "report(SEED_ROWS) prints the lesson's table byte for byte, and other rows in its format",
              [P("seed_report", "report(SEED_ROWS)"), P("seed_rows", "SEED_ROWS"),
               P("report", "report(other rows)", rows=report_rows(draw.rng("ex1.seed_report"), 2))]),
        Check("ex1", "simulate_eager_ms",
              "kernel k starts at max(k*launch_us, end of kernel k-1); the result is the last end, in ms",
              [P("simulate", f"simulate_eager_ms({k}, {l})", kernel_us=k, launch_us=l)
               for k, l in zip(kernels, launches)]),
        Check("ex1", "fit_launch_model",
              "least squares: (launch_us per kernel, compute_ms); ValueError naming n_kernels or "
              "step_ms for mismatched lengths, naming n_kernels for fewer than two distinct counts",
              [P("fit", f"fit_launch_model({ns}, ...)", n_kernels=ns, step_ms=ms) for ns, ms in lines]
              + [P("fit", f"fit_launch_model({short_n}, [1.0, 2.0])", ("n_kernels", "step_ms"),
                   n_kernels=short_n, step_ms=[1.0, 2.0]),
                 P("fit", f"fit_launch_model([{repeated}, {repeated}], [1.0, 2.0])", "n_kernels",
                   n_kernels=[repeated, repeated], step_ms=[1.0, 2.0])],
              compare=same(rel=1e-6, abs_=1e-9)),
    ]


# ----------------------------------------------------------------------------- exercise 2


def call_counts(rng: random.Random, count: int) -> list[tuple[int, int]]:
    return [(rng.randint(1, 20), rng.randint(0, 8)) for _ in range(count)]


def ex2(draw: Draw) -> list[Check]:
    counts = call_counts(draw.rng("ex2.time_ms_call_count"), 6)
    r = draw.rng("ex2.time_ms_mean_ms")
    # Two ranges of timed-call durations far apart; each call's own duration is drawn when it is
    # made, so only a clock tells the mean (see probes.time_ms_observed).
    low = [r.choice(range(1, 5)), r.choice(range(12, 20))]
    timed = [(float(x), x + 4.0) for x in low]
    r = draw.rng("ex2.time_ms_rejects")
    bad_iters, bad_warmup = -r.randint(1, 50), -r.randint(1, 50)
    r = draw.rng("ex2.measure_needs_cuda")
    cpu_counts = call_counts(r, 2)
    n_ops = r.randint(1, 300)
    r = draw.rng("ex2.gpu_measure_launch_tax")
    measured = r.randint(20, 80)
    r = draw.rng("ex2.gpu_sweep_launch_tax")
    lengths = r.sample(range(1, 64), 3)
    return [
        Check("ex2", "time_ms_call_count",
              "time_ms calls fn exactly warmup + iters times (defaults 100 and 10) and returns a float",
              [P("time_ms_calls", f"time_ms(fn, iters={i}, warmup={w})", iters=i, warmup=w)
               for i, w in counts] + [P("time_ms_default_calls", "time_ms(fn)")]),
        Check("ex2", "time_ms_mean_ms",
              "the result is the mean of the timed calls only, in milliseconds, from a monotonic "
              "clock (not the wall clock time.time, which jumps when the system clock is set)",
              [P("time_ms_observed", f"time_ms(fn, iters=10, warmup=2) with timed calls of "
                 f"{a:g} to {b:g} ms and 40 ms warm-up calls", iters=10, warmup=2, timed_ms=(a, b),
                 warmup_ms=40.0) for a, b in timed]
              + [P("time_ms_observed", f"time_ms(fn, iters=5, warmup=1) with calls of {timed[0][0]:g} "
                   f"to {timed[0][1]:g} ms while the wall clock jumps an hour at every reading",
                   iters=5, warmup=1, timed_ms=timed[0], warmup_ms=1.0, wall_clock_jumps=True)],
              compare=observed_mean),
        Check("ex2", "time_ms_rejects",
              "iters < 1 or warmup < 0 is a ValueError naming it; iters=1 and warmup=0 are accepted",
              [P("time_ms_args", "time_ms(fn, iters=0)", "iters", kwargs={"iters": 0}),
               P("time_ms_args", f"time_ms(fn, iters={bad_iters})", "iters", kwargs={"iters": bad_iters}),
               P("time_ms_args", f"time_ms(fn, warmup={bad_warmup})", "warmup",
                 kwargs={"warmup": bad_warmup}),
               P("time_ms_calls", "time_ms(fn, iters=1, warmup=0)", iters=1, warmup=0)]),
        Check("ex2", "measure_needs_cuda",
              "arguments first, on any machine (n_ops, numel or iters below 1, an empty "
              "n_ops_list: a ValueError naming it); then, without CUDA, measure_launch_tax raises "
              "a RuntimeError saying a CUDA device is needed (checked beside the CPU timer: a "
              "module that only raises earns nothing)",
              [P("measure", f"measure_launch_tax(n_ops={n_ops}, numel=8, iters=1)", cuda=True,
                 kwargs={"n_ops": n_ops, "numel": 8, "iters": 1})]
              + [P("measure", f"measure_launch_tax({name}=0) without CUDA", name,
                   kwargs={"n_ops": n_ops, "numel": 8, "iters": 1, name: 0}) for name in ("n_ops", "numel", "iters")]
              + [P("sweep", "sweep_launch_tax([]) without CUDA", "n_ops_list", lengths=[], iters=1)]
              + [P("time_ms_calls", f"time_ms(fn, iters={i}, warmup={w})", iters=i, warmup=w)
                 for i, w in cpu_counts]),
        Check("ex2", "gpu_time_ms_includes_gpu_work",
              "on CUDA the timer waits for the GPU's work (CUDA events), not just the launches, and "
              "returns the mean GPU time of the timed calls",
              [P("time_ms_gpu_work", "time_ms(fn) where fn keeps the GPU busy")],
              compare=_gpu_timer, gpu=True),
        Check("ex2", "gpu_measure_launch_tax",
              "measure_launch_tax returns a LaunchTax recording the chain, with positive times and a "
              "replay equal to eager",
              [P("measure", f"measure_launch_tax(n_ops={measured}, numel=1024, iters=10)",
                 kwargs={"n_ops": measured, "numel": 1024, "iters": 10}),
               P("measure", "measure_launch_tax(n_ops=0, ...)", "n_ops",
                 kwargs={"n_ops": 0, "numel": 8, "iters": 1})], gpu=True),
        Check("ex2", "gpu_sweep_launch_tax", "sweep_launch_tax measures each length, in order",
              [P("sweep", f"sweep_launch_tax({lengths}, iters=3)", lengths=lengths, iters=3),
               P("sweep", "sweep_launch_tax([])", "n_ops_list", lengths=[], iters=1)],
              gpu=True),
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
        return (f"{probe.label}: expected the mean of the timed calls, between {low:.4g} ms (their "
                f"span, per call) and {high:.4g} ms (from the end of the warm-up to the return, per "
                f"call), got {result!r} (below: seconds, not ms, or a CPU-time clock? above: a total "
                "instead of a mean, or the warm-up timed, or the wall clock?)")
    return None


def _gpu_timer(probe: Probe, got: Answer, expected: Answer) -> str | None:
    if not got.ok:
        return f"{probe.label} {raised(got)}"
    v = got.value
    if v["calls"] != 7:
        return f"{probe.label}: time_ms(fn, iters=5, warmup=2) called fn {v['calls']} times, expected 7"
    if not v["gpu_done_on_return"]:
        return (f"{probe.label}: time_ms returned while the GPU was still running the timed calls: "
                "a CPU clock only times the launches; record CUDA events and wait for the last one")
    if not v["is_float"]:
        return f"{probe.label}: expected a float (ms per call)"
    low, high, result = v["lower_ms"], v["upper_ms"], v["result"]
    slack = 0.01 * high + 0.05  # two clocks' readings (events, and a CPU timer after a synchronize)
    if not low - slack <= result <= high + slack:
        return (f"{probe.label}: expected the mean GPU time of the timed calls, between {low:.4g} ms "
                f"and {high:.4g} ms (measured by the grader's own CUDA events), got {result!r}")
    return None


# ----------------------------------------------------------------------------- exercise 3


def ex3(draw: Draw) -> list[Check]:
    def failure(kind: str, words: tuple[str, ...]) -> Compare:
        def compare(probe: Probe, got: Answer, expected: Answer) -> str | None:
            import re

            if not got.ok:
                return f"{probe.label} {raised(got)}"
            v, error = got.value, got.value["error"]
            if error is None or "RuntimeError" not in error["types"] or "NotImplementedError" in error["types"]:
                return f"{probe.label}: expected a RuntimeError, got {error and error['types'][0]}"
            if not any(re.search(rf"\b{w}", error["message"], re.IGNORECASE) for w in words):
                return f"{probe.label}: the error must name the cause ({kind}); got {error['message'][:200]!r}"
            if not error["chained"]:
                return f"{probe.label}: chain the original error (raise ... from exc)"
            if not v["stream_restored"]:
                return f"{probe.label}: the caller's stream must be current again after a failed capture"
            if not v["good_capture_after"]:
                return (f"{probe.label}: capturing a good function afterwards must still work (after "
                        f"restoring the stream, call end_failed_capture(pool) with the failed "
                        f"capture's pool)")
            return None

        return compare

    r = draw.rng("ex3.capture_needs_cuda")
    warmups = r.choice([1, 2, 3, 5])
    r = draw.rng("ex3.gpu_replay_equals_eager")
    seeds = r.sample(range(1, 10_000), 3)
    r = draw.rng("ex3.gpu_warmup_on_a_side_stream")
    warm = sorted({1, r.randint(2, 6)})
    return [
        Check("ex3", "capture_needs_cuda",
              "argument errors come first, on any machine (warmup_iters < 1 is a ValueError naming "
              "it); then, without CUDA, capture raises a RuntimeError saying a CUDA device is needed",
              [P("capture_no_inputs", f"capture(fn, warmup_iters={warmups})", cuda=True,
                 warmup_iters=warmups),
               P("capture_no_inputs", "capture(fn, warmup_iters=0)", "warmup_iters", warmup_iters=0)]),
        Check("ex3", "gpu_replay_equals_eager",
              "replay() returns static_outputs holding fn of what the static inputs hold now",
              [P("capture_replays", "capture(mlp, x, w); copy_ fresh inputs; replay()", seeds=seeds)],
              compare=_replay_exact, gpu=True),
        Check("ex3", "gpu_warmup_on_a_side_stream",
              "exactly warmup_iters warm-up calls on a side stream, then one captured call; the "
              "caller's stream is current afterwards",
              [P("capture_warmup", f"capture(fn, x, warmup_iters={w})", warmup_iters=w) for w in warm],
              gpu=True),
        Check("ex3", "gpu_warmup_waits_for_the_current_stream",
              "the side stream waits on the current stream before warming up",
              [P("capture_waits_for_current_stream", "capture after a copy queued behind GPU work")],
              gpu=True),
        Check("ex3", "gpu_capture_into_a_pool", "pool= is passed to the capture; None starts a new pool",
              [P("capture_pools", "capture(..., pool=first.graph.pool())")], gpu=True),
        Check("ex3", "gpu_capture_rejects_bad_arguments",
              "warmup_iters < 1 or a CPU static input is a ValueError naming it; a good capture works",
              [P("capture_args", "capture(fn, x, warmup_iters=0)", "warmup_iters", warmup_iters=0,
                 cpu_input=False),
               P("capture_args", "capture(fn, x, cpu_tensor)", "static_inputs", warmup_iters=3,
                 cpu_input=True),
               P("capture_args", f"capture(fn, x, warmup_iters={warmups})", warmup_iters=warmups,
                 cpu_input=False)], gpu=True),
        Check("ex3", "gpu_failed_capture",
              "a capture that fails names the cause, chains the error, restores the stream, and a "
              "good capture works afterwards",
              [P("capture_failure", "capture(fn calling .item())", kind="item", last=True)],
              compare=failure(".item() / host sync", ("item", "sync", "host", "wait")), gpu=True),
        Check("ex3", "gpu_failed_capture_cpu_copy",
              "a capture that copies a CPU tensor to the GPU fails with a RuntimeError naming the cause",
              [P("capture_failure", "capture(fn copying a CPU tensor)", kind="cpu_copy", last=True)],
              compare=failure("a CPU -> GPU copy", ("cpu", "host", "copy")), gpu=True),
    ]


def _replay_exact(probe: Probe, got: Answer, expected: Answer) -> str | None:
    if not got.ok:
        return f"{probe.label} {raised(got)}"
    v = got.value
    if not v["static_inputs_are_the_inputs"]:
        return f"{probe.label}: static_inputs must be the tensors passed to capture, as a tuple"
    for i, r in enumerate(v["replays"]):
        if not r["is_static"]:
            return f"{probe.label}: replay() must return static_outputs"
        if r["max_error"] > 1e-5 + 1e-5 * r["scale"]:
            return f"{probe.label}: replay {i} differs from eager by {r['max_error']:.3g}"
    return None


# ----------------------------------------------------------------------------- exercise 4

RUNNER_KEYS = ("buffer_count", "buffers_are_examples", "examples_unchanged", "buffers_hold_inputs",
               "buffers_moved")


def input_shapes(rng: random.Random) -> list[list[int]]:
    return [[rng.randint(1, 6) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(1, 3))]


def ex4(draw: Draw) -> list[Check]:
    r = draw.rng("ex4.runner_returns_fn_of_latest_inputs")
    # A different warm-up count for each runner: a hard-coded count can match one of them only.
    runs = [P("graph_runner", f"GraphRunner(combine, inputs shaped {s}) called 3 times",
              fn="combine", shapes=s, seeds=r.sample(range(1, 10_000), 3), warmup_iters=w)
            for s, w in [(input_shapes(r), w) for w in r.sample(range(1, 6), 4)]]
    r = draw.rng("ex4.runner_clone_outputs")
    clone = [P("graph_runner", f"GraphRunner({fn}, ..., clone_outputs={c}) called twice",
               fn=fn, shapes=[[n], [n]], seeds=r.sample(range(1, 10_000), 2), clone_outputs=c, spy=True)
             for fn in ("combine", "pair", "listed") for c in (True, False) for n in [r.randint(1, 9)]]
    r = draw.rng("ex4.runner_checks_each_call")
    position = ("inputs[1]", "input 1", "position 1", "argument 1", "input #1")
    r2 = draw.rng("ex4.gpu_runner")
    return [
        Check("ex4", "runner_returns_fn_of_latest_inputs",
              "copy every input into its static buffer (copy_), replay, return fn of these inputs",
              runs, compare=same(keys=("outputs",))),
        Check("ex4", "runner_owns_stable_buffers",
              "one static buffer per input, a copy the runner owns, same address on every call",
              runs, compare=same(keys=RUNNER_KEYS)),
        Check("ex4", "runner_captures_once",
              "capture once at construction, with the runner's buffers and warmup_iters",
              runs, compare=same(keys=("num_captures", "captures_seen", "warmups_passed",
                                       "captured_buffers"))),
        Check("ex4", "runner_clone_outputs",
              "clone_outputs=True returns fresh copies in fn's structure (a tensor, tuple, list or "
              "dict stays one); False returns the static outputs, overwritten by the next call",
              clone, compare=same(keys=("held_first_now", "outputs_share_static", "output_type"))),
        Check("ex4", "runner_checks_each_call",
              "an example input that is not a tensor is a ValueError naming example_inputs[i]; at "
              "a call, the wrong number of inputs is a TypeError, the wrong shape, dtype or device "
              "a ValueError naming the position; matching inputs are accepted",
              [P("graph_runner_bad_call", "runner(2 of 3 inputs)", ("3", "inputs"), "TypeError",
                 kind="too_few"),
               P("graph_runner_bad_call", "runner(4 of 3 inputs)", ("3", "inputs"), "TypeError",
                 kind="too_many")]
              + [P("graph_runner_bad_call", f"runner(good, bad {k}, good)", position, kind=k)
                 for k in r.sample(["shape", "float64", "int64", "device"], 4)]
              + [P("graph_runner_bad_call", "runner(3 good inputs)", kind="none")]
              + [P("graph_runner_bad_example", f"GraphRunner(fn, tensor, {k})", "example_inputs[1]", kind=k)
                 for k in ("list", "float", "none")]
              + [P("graph_runner_bad_example", "GraphRunner(fn, tensor, tensor)", kind="tensors")]),
        Check("ex4", "gpu_runner",
              "on CUDA tensors the runner captures with exercise 3 and replays fn of fresh inputs",
              [P("graph_runner", "GraphRunner(combine, cuda inputs) called 4 times", fn="combine",
                 shapes=[[r2.randint(1, 32), 32], [32]], seeds=r2.sample(range(1, 10_000), 4),
                 device="cuda", spy=False),
               P("graph_runner", "GraphRunner(combine, cuda, clone_outputs=False) called twice",
                 fn="combine", shapes=[[64], [64]], seeds=r2.sample(range(1, 10_000), 2),
                 clone_outputs=False, device="cuda", spy=False),
               P("graph_runner_bad_call", "runner(good, a CPU tensor, good) on CUDA", position,
                 kind="device", device="cuda")],
              compare=same(keys=("outputs", "held_first_now", "num_captures", "buffers_are_examples")),
              gpu=True),
    ]


# ----------------------------------------------------------------------------- exercise 5


def runner_setups(rng: random.Random, count: int) -> list[tuple[int, list[int], list[int]]]:
    setups = []
    for _ in range(count):
        max_rows = rng.randint(1, 40)
        sizes = rng.sample(range(1, max_rows + 1), rng.randint(1, min(6, max_rows)))
        batches = [rng.randint(1, max(sizes))] + [rng.randint(1, max_rows + 8)
                                                  for _ in range(rng.randint(0, 6))]
        # the first batch comes back once more at the end: its bucket is replayed again, so a
        # runner that returned a view of the static output sees its first result overwritten
        batches.append(batches[0])
        setups.append((max_rows, sizes, batches))
    return setups


def bucket_probe(max_rows, sizes, batches, warmup_iters=2, **extra) -> Probe:
    return P("bucket_runner", f"BucketedGraphRunner(fn, {max_rows} rows, capture_sizes={sizes}, "
             f"warmup_iters={warmup_iters}) on batches {batches}", max_rows=max_rows, sizes=sizes,
             batches=batches, warmup_iters=warmup_iters, **extra)


#: vLLM's default buckets as exercises/buckets.py states them: [1, 2, 4], then the multiples of
#: SMALL_STEP below SWITCH, then the multiples of LARGE_STEP from SWITCH on. The check's boundary
#: inputs are made from these, so they move with the rule.
SMALL_STEP, SWITCH, LARGE_STEP = 8, 256, 16
BUCKET_RULE = (f"[1, 2, 4], then the multiples of {SMALL_STEP} below {SWITCH}, then the multiples "
               f"of {LARGE_STEP} from {SWITCH} on")


def bucket_boundaries() -> tuple[int, ...]:
    """Every ``max_size`` where the rule changes (the first sizes of each step), one either side."""
    points = (1, 2, 4, SMALL_STEP, SWITCH - SMALL_STEP, SWITCH, SWITCH + LARGE_STEP, 2 * SWITCH)
    return tuple(sorted({p + d for p in points for d in (-1, 0, 1) if p + d >= 1}))


def ex5(draw: Draw) -> list[Check]:
    r = draw.rng("ex5.default_capture_sizes")
    fixed = bucket_boundaries() + (1000,)
    drawn = [r.randint(1, 300), r.randint(300, 2000), r.randint(2000, 5000)]
    r = draw.rng("ex5.padded_size")
    size_lists = [[r.randint(1, 600) for _ in range(r.randint(1, 12))] for _ in range(12)]
    padded_probes = [P("padded", f"padded_size({n}, {s})", n=n, sizes=s)
                     for s in size_lists for n in (r.randint(1, 700), min(s), max(s), max(s) + 1)]
    r = draw.rng("ex5.pad_rows")
    pads = [(r.randint(1, 6), r.randint(0, 6), v, d) for v, d in
            [(0.0, "float32"), (round(r.uniform(-9, 9), 2), "float32"), (math.nan, "float64"),
             (0.0, "bfloat16"), (round(r.uniform(-9, 9), 1), "float32")]]
    # Always one x that needs no padding at all: it must still come back as a new tensor.
    pads.append((r.randint(1, 6), 0, round(r.uniform(-9, 9), 1), r.choice(["float32", "float64"])))
    r = draw.rng("ex5.runner_returns_fn_of_real_rows")
    runners = [bucket_probe(*setup, warmup_iters=r.randint(1, 3)) for setup in runner_setups(r, 10)]
    r = draw.rng("ex5.runner_checks_each_batch")
    bad_batches = ["float64", "int64", "wider", "narrower", "rank", "device", "list", "empty", "0-d"]
    good_rows = [r.randint(1, 4), r.randint(5, 8), 8]
    r = draw.rng("ex5.runner_rejects_sizes_outside_the_buffer")
    rows = r.randint(2, 12)
    r2 = draw.rng("ex5.gpu_runner")
    return [
        Check("ex5", "default_capture_sizes",
              f"{BUCKET_RULE}, <= max_size, ascending",
              [P("default_sizes", "default_capture_sizes()")]
              + [P("default_sizes", f"default_capture_sizes({m})", max_size=m) for m in fixed + tuple(drawn)]
              + [P("default_sizes", "default_capture_sizes(0)", "max_size", max_size=0)]),
        Check("ex5", "padded_size",
              "the smallest size >= n (sizes unsorted or repeated), None above every size",
              padded_probes + [P("padded", "padded_size(0, [1, 2])", "n", n=0, sizes=[1, 2]),
                               P("padded", "padded_size(3, [])", "capture_sizes", n=3, sizes=[])]),
        Check("ex5", "pad_rows", "size rows: x first, then value; x untouched, no shared memory",
              [P("pad", f"pad_rows(x of {n} rows, {n + e}, {v})", n=n, width=3, size=n + e, value=v,
                 dtype=d) for n, e, v, d in pads]),
        Check("ex5", "runner_returns_fn_of_real_rows",
              "pad to the bucket with pad_value (NaN here), replay, return the real rows as a fresh "
              "tensor; batches above every bucket run eagerly",
              runners, compare=same(keys=("calls", "first_output_unchanged", "example_unchanged"))),
        Check("ex5", "runner_captures_largest_first_in_one_pool",
              "one capture per size, largest first, all over one static buffer (not the caller's) "
              "and one memory pool, each with the runner's warmup_iters",
              runners, compare=same(keys=("capture_sizes_seen", "capture_order", "inputs_per_capture",
                                          "buffer_addresses", "buffer_is_example", "pools",
                                          "warmups_passed"))),
        Check("ex5", "runner_stats", "stats counts replays per size and eager fallbacks under 'eager'",
              runners, compare=same(keys=("stats", "replays"))),
        Check("ex5", "runner_checks_each_batch",
              "a batch that is not a tensor of at least one row with the buffer's row shape, dtype "
              "and device is a ValueError naming x; good batches of 1 to len(max_example) rows "
              "are replayed",
              [P("bucket_runner_bad_batch", f"runner(x: {k})", "x", kind=k) for k in bad_batches]
              + [P("bucket_runner_bad_batch", f"runner(x of {n} good rows)", kind="good", rows_in=n)
                 for n in good_rows]),
        Check("ex5", "runner_rejects_sizes_outside_the_buffer",
              "a capture size outside 1..len(max_example) is a ValueError naming capture_sizes; "
              "1 and len(max_example) themselves are accepted",
              [P("bucket_runner_bad_sizes", f"BucketedGraphRunner(fn, {rows} rows, capture_sizes={s})",
                 "capture_sizes", sizes=s, max_rows=rows)
               for s in ([0, r.randint(1, rows)], [r.randint(1, rows), rows + r.randint(1, 9)])]
              + [P("bucket_runner_bad_sizes", f"BucketedGraphRunner(fn, {rows} rows, capture_sizes="
                   f"[{rows}, 1])", sizes=[rows, 1], max_rows=rows)]),
        Check("ex5", "gpu_runner",
              "on real CUDA graphs: NaN padding never reaches real rows, eager above the largest "
              "bucket, largest first into one pool",
              [bucket_probe(16, [1, 2, 4, 8, 16], [r2.randint(1, 20) for _ in range(8)], device="cuda",
                            width=8)],
              compare=same(keys=("calls", "capture_order", "pools", "buffer_addresses", "stats")),
              gpu=True),
    ]


# ----------------------------------------------------------------------------- exercise 6


def ex6(draw: Draw) -> list[Check]:
    r = draw.rng("ex6.mode_table")
    order = [m for m in MODES]
    r.shuffle(order)
    r = draw.rng("ex6.capture_descs")
    size_lists = [[1, 2, 4, 8], [r.randint(1, 64) for _ in range(5)], [r.randint(1, 32)],
                  [r.randint(1, 8) for _ in range(4)]]
    r = draw.rng("ex6.dispatch")
    dispatch_lists = [[1, 2, 4, 8]] + [[r.randint(1, 64) for _ in range(r.randint(1, 6))] for _ in range(3)]
    queries = [[r.randint(1, 80), r.random() < 0.5] for _ in range(12)] + [[1, True], [8, False]]
    queries += [[r.randint(1, 70), None] for _ in range(4)] + [[1, None]]  # the flag left out
    r = draw.rng("ex6.dispatch_rejects")
    sizes = sorted(r.sample(range(1, 64), 3))
    return [
        Check("ex6", "mode_table", "decode_mode()/mixed_mode() follow vLLM's table",
              [P("mode_names", "the members of CUDAGraphMode"),
               P("mode_pairs", f"decode/mixed modes of {order}", order=order)]),
        Check("ex6", "capture_descs",
              "a list: the mixed group (if not NONE) then the uniform-decode FULL group (if decode "
              "is FULL and mixed is not), each largest first",
              [P("capture_descs", f"CudagraphDispatcher({m}, {s}).capture_descs()", mode=m, sizes=s)
               for m in MODES for s in size_lists]),
        Check("ex6", "dispatch",
              "NONE unpadded for NONE or oversized batches; else the uniform FULL graph if captured, "
              "else the mixed graph, else NONE; never an uncaptured key; uniform_decode defaults "
              "to False",
              [P("dispatch", f"CudagraphDispatcher({m}, {s}).dispatch(...)", mode=m, sizes=s,
                 queries=queries) for m in MODES for s in dispatch_lists]),
        Check("ex6", "dispatch_rejects",
              "num_tokens < 1 is a ValueError naming num_tokens; 1 and more are dispatched",
              [P("dispatch_arg", f"dispatch({n})", "num_tokens", num_tokens=n)
               for n in (0, -r.randint(1, 99))]
              + [P("dispatch_arg", f"CudagraphDispatcher(FULL, {sizes}).dispatch({n})", num_tokens=n,
                   sizes=sizes) for n in (1, r.randint(2, 70))]),
    ]


# ----------------------------------------------------------------------------- exercise 7


def norm_probes(rng: random.Random, dtype: str, count: int, eps: bool = False) -> list[Probe]:
    shapes = [[rng.randint(1, 6), rng.randint(1, 96)] for _ in range(count)]
    if not eps:
        return [P("fused_norm", f"fused_add_rms_norm on a {s} {dtype} input", shape=s, dtype=dtype,
                  seed=rng.randint(0, 2**16)) for s in shapes]
    epsilons = [rng.choice([1e-3, 0.05, 0.1, 0.5, 2.0]) for _ in shapes]
    return [P("fused_norm", f"fused_add_rms_norm(x, residual, weight, eps={e}) on a {s} {dtype} input "
              "of small values", shape=s, dtype=dtype, seed=rng.randint(0, 2**16), eps=e)
            for s, e in zip(shapes, epsilons)]


def hbm_probes(rng: random.Random, count: int) -> list[Probe]:
    chains = [(rng.randint(1, 1000), rng.randint(0, 10_000), rng.choice([1, 2, 4, 8])) for _ in range(count)]
    return [P("hbm", f"chain_hbm_bytes({n}, {m}, {b}, fused={f})", n_ops=n, numel=m, dtype_bytes=b,
              fused=f) for n, m, b in chains for f in (False, True)]


def ex7(draw: Draw) -> list[Check]:
    r = draw.rng("ex7.chain_hbm_bytes_rejects")
    bad = (((-r.randint(1, 9), 8, 4), "n_ops"), ((2, -r.randint(1, 9), 4), "numel"),
           ((2, 8, 0), "dtype_bytes"), ((2, 8, -r.randint(1, 8)), "dtype_bytes"))
    r3 = draw.rng("ex7.gpu_fused_norm_is_one_kernel")
    rejects = draw.rng("ex7.fused_norm_rejects")
    return [
        Check("ex7", "chain_hbm_bytes",
              "unfused: every op reads and writes (2 * n_ops * numel * bytes); fused: one read and "
              "one write; no ops: 0",
              hbm_probes(draw.rng("ex7.chain_hbm_bytes"), 10)
              + [P("hbm", f"chain_hbm_bytes(0, 1024, 4, fused={f})", n_ops=0, numel=1024,
                   dtype_bytes=4, fused=f) for f in (False, True)]),
        Check("ex7", "chain_hbm_bytes_rejects",
              "a negative count or size, or dtype_bytes < 1, is a ValueError naming it; zero ops, "
              "zero elements and dtype_bytes=1 are accepted",
              [P("hbm", f"chain_hbm_bytes{args}", name, n_ops=args[0], numel=args[1],
                 dtype_bytes=args[2], fused=False) for args, name in bad]
              + [P("hbm", "chain_hbm_bytes(0, 0, 1, fused=False)", n_ops=0, numel=0, dtype_bytes=1,
                   fused=False)] + hbm_probes(r, 1)),
        Check("ex7", "fused_norm_fp32",
              "new_residual = x + residual, out = rms_norm(new_residual, eps) * weight (fp32: within "
              "1e-5 * (1 + |expected|)), with the eps given; x and residual unchanged",
              norm_probes(draw.rng("ex7.fused_norm_fp32"), "float32", 8)
              + norm_probes(draw.rng("ex7.fused_norm_fp32.eps"), "float32", 3, eps=True),
              compare=same(rtol=1e-5, atol=1e-5)),
        Check("ex7", "fused_norm_bf16", "the same in bf16, within 1e-2 * (1 + |expected|)",
              norm_probes(draw.rng("ex7.fused_norm_bf16"), "bfloat16", 6), compare=same(rtol=1e-2, atol=1e-2)),
        Check("ex7", "fused_norm_rejects",
              "x must be a tensor of at least one dimension; residual a tensor matching x (shape, "
              "dtype, device); weight a tensor of shape x.shape[-1:] on x's device (ValueError "
              "naming it); matching inputs are accepted",
              [P("fused_norm_bad", f"fused_add_rms_norm with a bad {w}", w.split("-")[0], which=w)
               for w in ("residual", "weight", "x-0-d", "residual-dtype", "residual-device",
                         "residual-list", "weight-full-shape", "weight-device", "weight-list", "x-list")]
              + norm_probes(rejects, "float32", 1), compare=same(rtol=1e-5, atol=1e-5)),
        Check("ex7", "count_kernels_needs_cuda",
              "without CUDA, count_kernels raises a RuntimeError saying a CUDA device is needed "
              "(checked beside chain_hbm_bytes: a module that only raises earns nothing)",
              [P("count_kernels_no_cuda", "count_kernels(torch.add, ...)", cuda=True)]
              + hbm_probes(draw.rng("ex7.count_kernels_needs_cuda"), 1)),
        Check("ex7", "gpu_fused_norm_is_one_kernel",
              "on CUDA, fused_add_rms_norm launches one kernel (profiled by the grader) and matches "
              "the reference",
              [P("fused_kernels", f"kernels of fused_add_rms_norm ({d})", dtype=d)
               for d in ("float32", "bfloat16")]
              + [P("fused_norm", "fused_add_rms_norm on CUDA (8, 4096) bf16", shape=[8, 4096],
                   dtype="bfloat16", seed=r3.randint(0, 2**16), device="cuda")],
              compare=same(rtol=1e-2, atol=1e-2), gpu=True, triton=True),
        Check("ex7", "gpu_count_kernels",
              "count_kernels counts the kernels of one call after a warm-up, copies left out",
              [P("counted_kernels", "count_kernels of three small functions")], gpu=True),
    ]


# ----------------------------------------------------------------------------- exercise 8


def requests(rng: random.Random, count: int = 4) -> tuple[list[list[int]], list[int]]:
    """``count`` prompts of 1 to 4 tokens and how many tokens each wants (1 to 6)."""
    prompts = [[rng.randint(0, 511) for _ in range(rng.randint(1, 4))] for _ in range(count)]
    return prompts, [rng.randint(1, 6) for _ in prompts]


def step_batches(rng: random.Random) -> list[list[list[int]]]:
    """Steps of 1 to 9 rows (beyond the largest bucket, 8), one row per slot."""
    steps = []
    for n in range(1, 10):
        slots = rng.sample(range(8), n) if n <= 8 else None
        if slots is None:  # 9 rows: one sequence has two rows (a prompt chunk), so not uniform
            slots = list(range(8)) + [0]
            position = rng.randint(0, 20)
            positions = [position] * 8 + [position + 1]
        else:
            positions = [rng.randint(0, 20) for _ in slots]
        steps.append([[rng.randint(0, 511) for _ in slots], positions, slots])
    return steps


#: The argument a bad step's ValueError must name.
BAD_ROW_NAMES = {"step-int32": "tokens", "step-float-positions": "positions", "step-2d-slots": "slots",
                 "step-list": "tokens", "step-negative-slot": "slots", "step-negative-position": "positions"}


def ex8(draw: Draw) -> list[Check]:
    sizes = [1, 2, 4, 8, 16]
    r = draw.rng("ex8.generate_every_mode")
    prompts, new_tokens = requests(r)
    seed = r.randint(0, 2**16)
    steps = step_batches(draw.rng("ex8.step_logits"))
    r = draw.rng("ex8.padding_uses_the_padding_slot")
    pad_slots = r.sample(range(8), 3)
    pad_positions = [r.randint(0, 60) for _ in pad_slots]
    pad_tokens = [r.randint(0, 511) for _ in pad_slots]
    r = draw.rng("ex8.capture_largest_first_in_one_pool")
    capture_sizes = r.sample([1, 2, 3, 4, 6, 8], 3)
    # A different warm-up count for each probe: a hard-coded count can match one of them only.
    capture_warmups = dict(zip(("FULL", "PIECEWISE", "FULL_AND_PIECEWISE"), r.sample(range(1, 6), 3)))
    r = draw.rng("ex8.piecewise_attention_is_eager")
    n = r.randint(1, 4)
    attention_rows = dict(tokens=[r.randint(0, 511) for _ in range(n)], positions=[0] * n,
                          slots=r.sample(range(8), n))
    shrink_prompts, shrink_new = requests(draw.rng("ex8.generate_shrinks_the_batch"))
    r = draw.rng("ex8.engine_rejects")
    token = r.randint(0, 511)
    bad_kinds = list(BAD_ROW_NAMES)
    r = draw.rng("ex8.step_logits.before_capture")
    early = [[[r.randint(0, 511) for _ in range(n)], [r.randint(0, 20) for _ in range(n)],
              r.sample(range(8), n)] for n in (r.randint(1, 4), r.randint(5, 8))]
    r = draw.rng("ex8.padding_uses_the_padding_slot.rows")
    refill = [[[r.randint(1, 511) for _ in range(4)], [r.randint(1, 60) for _ in range(4)], [4, 5, 6, 7]]]
    refill += [[[r.randint(1, 511) for _ in range(n)], [r.randint(1, 60) for _ in range(n)],
                r.sample(range(8), n)] for n in (r.randint(1, 3), r.randint(1, 3))]
    r = draw.rng("ex8.generate_shrinks_the_batch.flags")
    # Always distinct slots in descending order (uniform: every slot distinct), which a rule
    # such as "the slots ascend" gets wrong; drawn in any order they may happen to ascend.
    flag_slots = [sorted(r.sample(range(8), r.randint(2, 4)), reverse=True), r.sample(range(8), r.randint(1, 4))]
    a, b = r.randint(0, 3), r.randint(4, 7)  # two slots; a repeated one is a prompt chunk
    flag_slots += [[a, a, b], [a, b, b], [b, a, b], [a] * r.randint(2, 4)]
    r2 = draw.rng("ex8.gpu_engine")
    gpu_prompts, gpu_new = requests(r2)
    gpu_steps = step_batches(r2)
    return [
        Check("ex8", "generate_every_mode",
              "every mode yields the tokens of eager decoding: the prompt step, then one token per "
              "unfinished sequence, greedy",
              [P("engine_generate", f"DecodeEngine({m}, {sizes}).generate({prompts}, {new_tokens})",
                 mode=m, sizes=sizes, prompts=prompts, new_tokens=new_tokens, seed=seed) for m in MODES]),
        Check("ex8", "step_logits",
              "step returns one row of logits per token, within 1e-5 of the eager model, for 1 to "
              "9 rows (buckets up to 8; 9 runs eagerly); before capture_model() nothing is "
              "captured, so every step runs eagerly",
              [P("engine_steps", f"DecodeEngine({m}, [1, 2, 4, 8]): steps of 1..9 rows", mode=m,
                 sizes=[1, 2, 4, 8], steps=steps) for m in MODES]
              + [P("engine_steps", f"DecodeEngine({m}, [1, 2, 4, 8]): steps before capture_model()",
                   mode=m, sizes=[1, 2, 4, 8], steps=early, capture_now=False) for m in ("FULL", "PIECEWISE")],
              compare=same(rtol=0, atol=1e-5)),
        Check("ex8", "padding_uses_the_padding_slot",
              "rows that only pad a batch are reset before every replay to token 0, position 0 and "
              "model.padding_slot, so they read and write only the padding slot, never a real "
              "sequence's cache",
              [P("engine_padding", f"a 3-row step padded to 4 ({m})", mode=m, sizes=[4],
                 tokens=pad_tokens, positions=pad_positions, slots=pad_slots) for m in ("FULL", "PIECEWISE")]
              + [P("engine_padding_rows", f"padding rows of the static buffers after steps of "
                   f"{[len(t) for t, _, _ in refill]} rows padded to 4 ({m})", mode=m, sizes=[4], steps=refill)
                 for m in ("FULL", "PIECEWISE")]),
        Check("ex8", "capture_largest_first_in_one_pool",
              "capture_model captures capture_descs() in order (largest first), PIECEWISE one graph "
              "per segment, all in the first graph's pool, with the engine's warmup_iters",
              [P("engine_captures", f"DecodeEngine({m}, {capture_sizes}, warmup_iters={w})"
                 ".capture_model()", mode=m, sizes=capture_sizes, warmup_iters=w)
               for m, w in capture_warmups.items()]),
        Check("ex8", "piecewise_attention_is_eager",
              "PIECEWISE captures the segments between attention calls and runs attention eagerly; "
              "FULL captures the whole forward pass",
              [P("engine_attention", f"where attention runs ({m}), a {n}-row step", mode=m,
                 **attention_rows) for m in ("PIECEWISE", "FULL")]),
        Check("ex8", "generate_shrinks_the_batch",
              "the first step feeds every prompt token (a mixed batch), later steps only the "
              "unfinished sequences (uniform decode); stats count each (mode, descriptor) replayed; "
              "step(uniform_decode=None) is uniform exactly when every slot is distinct",
              [P("engine_batches", f"step sizes of generate({shrink_prompts}, {shrink_new})",
                 prompts=shrink_prompts, new_tokens=shrink_new)]
              + [P("engine_stats", f"stats after generate in {m}", mode=m, prompts=shrink_prompts,
                   new_tokens=shrink_new) for m in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY")]
              + [P("engine_uniform_flags", f"what steps with slots {flag_slots} replay in "
                   "FULL_AND_PIECEWISE without uniform_decode", slot_lists=flag_slots)]),
        Check("ex8", "engine_rejects",
              "bad rows (lengths, the padding slot, positions) and bad requests are ValueErrors "
              "naming the argument (rows: 1-D int64 tensors of one length >= 1); the largest good "
              "ones (last slot, last position, max_seqs prompts filling the cache) are accepted",
              [P("engine_bad", kind, names, kind=kind) for kind, names in (
                  ("step-lengths", ("slots", "rows")), ("step-padding-slot", "slots"),
                  ("step-position", "positions"), ("step-empty", "tokens"), ("generate-too-many", "prompts"),
                  ("generate-empty", "prompts"), ("generate-zero-new", "max_new_tokens"),
                  ("generate-too-long", "max_new_tokens"))]
              + [P("engine_bad", kind, BAD_ROW_NAMES[kind], kind=kind) for kind in bad_kinds]
              + [P("engine_bad", kind, kind=kind, token=token) for kind in ("step-largest", "generate-largest")],
              compare=same(rtol=0, atol=1e-5)),
        Check("ex8", "gpu_engine",
              "on real CUDA graphs: every mode yields eager decoding's tokens and logits within 1e-5",
              [P("engine_generate", f"generate on CUDA ({m})", mode=m, sizes=sizes, prompts=gpu_prompts,
                 new_tokens=gpu_new, device="cuda") for m in MODES]
              + [P("engine_steps", f"steps on CUDA ({m})", mode=m, sizes=[1, 2, 4, 8], steps=gpu_steps,
                   device="cuda") for m in ("FULL", "PIECEWISE")],
              compare=same(rtol=0, atol=1e-5), gpu=True),
    ]


def per_exercise(namespace: dict, where: str) -> list[Callable[[Draw], list[Check]]]:
    """Each declared exercise's ``ex<N>(draw)`` in ``namespace``, in course order (no list of
    them is kept by hand: an exercise declared in coursekit/course.py without one is named)."""
    from coursekit.course import EXERCISES

    missing = [e.marker for e in EXERCISES if not callable(namespace.get(e.marker))]
    if missing:
        raise LookupError(f"{where} has no checks for {', '.join(missing)}: define "
                          f"{missing[0]}(draw) -> list[Check] there")
    return [namespace[e.marker] for e in EXERCISES]


def public_checks(draw: Draw | None = None) -> list[Check]:
    draw = draw or PRACTICE
    return [check for make in per_exercise(globals(), "grader/checks.py") for check in make(draw)]
