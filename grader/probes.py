"""Probes: the calls a worker makes on a submission's module, returning plain data.

A probe knows *what to call*, never what the answer should be: the judge runs the same probe on
the reference (in its own process) and compares. Each probe is ``name(module, **args)`` and
returns values ``grader.wire`` can encode; it normalizes only what the spec leaves open (a
``Counter`` or a ``dict`` for ``stats``, a list or a tuple of sizes), so an incidental choice never
costs a point. Probes run inside the worker, next to untrusted code: they hold no expected values
and decide nothing.

Every call into the submission goes through ``call``: right after it returns (or raises) the
worker puts back whatever the submission patched (``torch.equal``, ``Tensor.data_ptr``, this
module's helpers...), so the facts a probe computes next about it (an input left unchanged, a
buffer that did not move) are computed with the worker's own functions.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch

from coursekit.standin import RecordingCapture, capture_on_cpu, tensors_in

PROBES: dict[str, Callable[..., Any]] = {}
_restore: Callable[[], None] = lambda: None  # the worker binds its namespace restore here


def bind(restore: Callable[[], None]) -> None:
    global _restore
    _restore = restore


def call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` for code of the submission's; whatever it patched is put back
    before the probe goes on."""
    try:
        return fn(*args, **kwargs)
    finally:
        _restore()


def probe(fn):
    PROBES[fn.__name__] = fn
    return fn


def rows(n: int, width: int, seed: int, device: str = "cpu") -> torch.Tensor:
    """``n`` rows of random values in [0.5, 1.5): fresh data, never zeros."""
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.rand(n, width, generator=g, device=device) + 0.5


def rowwise(x: torch.Tensor) -> torch.Tensor:
    """Each output row depends only on its input row."""
    return torch.tanh(x * 1.5 + 0.25).sum(dim=-1, keepdim=True) + x


def combine(*xs: torch.Tensor) -> torch.Tensor:
    """Depends on every element of every input, so a stale buffer shows."""
    return torch.tanh(xs[0]) * 0.5 + sum(x.sum() for x in xs)


def pair(x: torch.Tensor, y: torch.Tensor):
    return x * 2.0, {"y_plus_x_mean": y + x.mean()}


def listed(x: torch.Tensor, y: torch.Tensor):
    return [x * 2.0, y - x]


FUNCTIONS = {"rowwise": rowwise, "combine": combine, "pair": pair, "listed": listed}


def _pool_key(pool: Any) -> Any:
    """A pool handle as plain data (CUDA pools are tuples of ints; stand-in pools have an id)."""
    if isinstance(pool, tuple):
        return list(pool)
    return getattr(pool, "id", repr(pool))


def _as_list(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def _attr(obj: Any, name: str) -> Any:
    """``obj.name``, or a marker saying it is missing: one missing attribute costs the checks
    that need it, not every check sharing the probe."""
    try:
        return call(getattr, obj, name)
    except Exception:  # noqa: BLE001 - a property that raises is as good as missing
        return f"<no attribute {name!r}>"


def _buffers(runner: Any) -> tuple:
    value = _attr(runner, "static_inputs")
    return tuple(value) if isinstance(value, (tuple, list)) else ()


# ---------------------------------------------------------------- exercise 1: launch_model


@probe
def decode_step(mod, kwargs: dict, attr: str):
    """``DecodeStep(**kwargs).<attr>``, called when it is a method."""
    value = call(getattr, call(mod.DecodeStep, **kwargs), attr)
    return call(value) if callable(value) else value


FIELDS = ("weight_gib", "n_layers", "kernels_per_layer", "launch_us", "bandwidth_bps", "gpu_node_us")


@probe
def make_decode_step(mod, kwargs: dict):
    """``DecodeStep(**kwargs)``: the fields it holds (or the error it raises)."""
    step = call(mod.DecodeStep, **kwargs)
    return [_attr(step, f) for f in FIELDS]


def _text(value):
    """A report, allowing one trailing newline (print adds its own)."""
    return value.removesuffix("\n") if isinstance(value, str) else value


@probe
def seed_report(mod):
    return _text(call(mod.report, mod.SEED_ROWS))


@probe
def seed_rows(mod):
    return [[label, float(step.weight_gib)] for label, step in mod.SEED_ROWS]


@probe
def report(mod, rows: list):
    return _text(call(mod.report, [(label, call(mod.DecodeStep, **kwargs)) for label, kwargs in rows]))


@probe
def simulate(mod, kernel_us: list, launch_us: float):
    return call(mod.simulate_eager_ms, list(kernel_us), launch_us)


@probe
def fit(mod, n_kernels: list, step_ms: list):
    return _as_list(call(mod.fit_launch_model, list(n_kernels), list(step_ms)))


# ---------------------------------------------------------------- exercise 2: launch_tax


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
def time_ms_observed(mod, iters: int, warmup: int, timed_ms: tuple, warmup_ms: float,
                     wall_clock_jumps: bool = False):
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
def time_ms_args(mod, kwargs: dict):
    return call(mod.time_ms, lambda: None, **kwargs)


@probe
def measure(mod, kwargs: dict):
    result = call(mod.measure_launch_tax, **kwargs)
    return {"type": type(result).__name__, "n_ops": result.n_ops, "numel": result.numel,
            "eager_positive": isinstance(result.eager_us, float) and result.eager_us > 0,
            "graph_positive": isinstance(result.graph_us, float) and result.graph_us > 0,
            "replay_matches_eager": result.replay_matches_eager}


@probe
def sweep(mod, lengths: list, iters: int):
    results = call(mod.sweep_launch_tax, list(lengths), iters=iters)
    return [[r.n_ops, r.replay_matches_eager] for r in results] if isinstance(results, list) else None


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
        answer.update(result=float(result) if isinstance(result, float) else None,
                      lower_ms=marks["first"].elapsed_time(marks["last"]) / iters,
                      upper_ms=marks.get("warm", start).elapsed_time(returned) / iters)
    return answer


# ---------------------------------------------------------------- exercise 3: capture


@probe
def capture_no_inputs(mod, warmup_iters: int = 3):
    call(mod.capture, lambda: torch.ones(3), warmup_iters=warmup_iters)
    return "captured"


@probe
def capture_args(mod, warmup_iters: int, cpu_input: bool):
    x = rows(2, 4, seed=1, device="cuda")
    inputs = (x, torch.ones(2, 4)) if cpu_input else (x,)
    call(mod.capture, lambda *ts: ts[0] * 2.0, *inputs, warmup_iters=warmup_iters)
    return "captured"


@probe
def capture_replays(mod, seeds: list):
    x, w = rows(8, 16, seed=0, device="cuda"), rows(16, 16, seed=1, device="cuda")
    fn = lambda a, b: torch.relu(a @ b) * 2.0 + a.mean()  # noqa: E731
    graph = call(mod.capture, fn, x, w)
    same_inputs = (isinstance(graph.static_inputs, tuple) and len(graph.static_inputs) == 2
                   and graph.static_inputs[0] is x and graph.static_inputs[1] is w)
    results = []
    for seed in seeds:
        new_x, new_w = rows(8, 16, seed=seed, device="cuda"), rows(16, 16, seed=seed + 1, device="cuda")
        x.copy_(new_x)
        w.copy_(new_w)
        out = call(graph.replay)
        expected = fn(new_x, new_w)
        results.append({"is_static": out is graph.static_outputs,
                        "max_error": float((out - expected).abs().max()),
                        "scale": float(expected.abs().max())})
    return {"static_inputs_are_the_inputs": same_inputs, "replays": results}


@probe
def capture_warmup(mod, warmup_iters: int):
    caller = torch.cuda.current_stream()
    calls = []

    def fn(x):
        calls.append((torch.cuda.current_stream() == caller, torch.cuda.is_current_stream_capturing()))
        return x * 2.0

    graph = call(mod.capture, fn, rows(4, 16, seed=2, device="cuda"), warmup_iters=warmup_iters)
    before_replay = len(calls)
    call(graph.replay)
    return {"warmups": sum(1 for _, capturing in calls if not capturing),
            "captures": sum(1 for _, capturing in calls if capturing),
            "warmups_on_caller_stream": sum(1 for on_caller, c in calls if on_caller and not c),
            "last_is_capture": bool(calls) and calls[-1][1],
            "caller_current_after": torch.cuda.current_stream() == caller,
            "replay_called_fn": len(calls) != before_replay}


@probe
def capture_waits_for_current_stream(mod):
    x = torch.full((4096,), -1.0, device="cuda")
    new = rows(1, 4096, seed=3, device="cuda")[0]
    snapshot = torch.empty_like(x)
    torch.cuda.synchronize()
    torch.cuda._sleep(50_000_000)
    x.copy_(new)
    calls = []

    def fn(t):
        if not calls:
            snapshot.copy_(t)
        calls.append(1)
        return t + 1.0

    call(mod.capture, fn, x, warmup_iters=1)
    torch.cuda.synchronize()
    return bool(torch.equal(snapshot, new))


@probe
def capture_pools(mod):
    x, y = rows(1, 128, seed=4, device="cuda")[0], rows(1, 128, seed=5, device="cuda")[0]
    first = call(mod.capture, lambda t: t * 2.0, x)
    second = call(mod.capture, lambda t: t + 3.0, y, pool=first.graph.pool())
    alone = call(mod.capture, lambda t: t - 1.0, y)
    x.copy_(rows(1, 128, seed=6, device="cuda")[0])
    y.copy_(rows(1, 128, seed=7, device="cuda")[0])
    call(first.replay)
    call(second.replay)
    return {"shared": second.graph.pool() == first.graph.pool(),
            "fresh_when_none": alone.graph.pool() != first.graph.pool(),
            "results_right": bool(torch.equal(first.static_outputs, x * 2.0)
                                  and torch.equal(second.static_outputs, y + 3.0))}


@probe
def capture_failure(mod, kind: str):
    """Capture a function that cannot be captured, then a good one."""
    before = torch.cuda.current_stream()
    x = rows(1, 4, seed=8, device="cuda")[0]
    bad = {"item": lambda t: t * t.sum().item(),
           "cpu_copy": lambda t: t + torch.tensor([1.0, 2.0, 3.0, 4.0], device="cuda")}[kind]
    error = None
    try:
        call(mod.capture, bad, x)
    except NotImplementedError:
        raise
    except BaseException as exc:  # noqa: BLE001 - we report whatever came
        error = {"types": [c.__name__ for c in type(exc).__mro__], "message": str(exc)[:2000],
                 "chained": exc.__cause__ is not None
                 or (exc.__context__ is not None and not exc.__suppress_context__)}
    restored = torch.cuda.current_stream() == before
    good_x = rows(1, 16, seed=9, device="cuda")[0]
    graph = call(mod.capture, lambda t: t * 4.0, good_x)
    good_x.copy_(rows(1, 16, seed=10, device="cuda")[0])
    call(graph.replay)
    return {"error": error, "stream_restored": restored,
            "good_capture_after": bool(torch.equal(graph.static_outputs, good_x * 4.0))}


# ---------------------------------------------------------------- exercise 4: static_runner


def _inputs(shapes: list, seed: int, device: str) -> list[torch.Tensor]:
    """One random tensor per shape (values in [0.5, 1.5)), each from its own seed."""
    return [torch.rand(*s, generator=torch.Generator(device=device).manual_seed(seed + i),
                       device=device) + 0.5 for i, s in enumerate(shapes)]


@probe
def graph_runner(mod, fn: str, shapes: list, seeds: list, warmup_iters: int = 3,
                 clone_outputs: bool = True, device: str = "cpu", spy: bool = True):
    """Build a runner, call it once per seed; report what came back and what the graph saw."""
    function = FUNCTIONS[fn]
    examples = _inputs(shapes, seed=100, device=device)
    kept = [x.clone() for x in examples]
    recorder = None
    if spy:
        recorder = RecordingCapture(capture_on_cpu if device == "cpu" else _sibling(mod, "capture").capture)
    kwargs = dict(warmup_iters=warmup_iters, clone_outputs=clone_outputs)
    if recorder is not None:
        kwargs["capture"] = recorder
    runner = call(mod.GraphRunner, function, *examples, **kwargs)
    buffers = _buffers(runner)
    first_pointers = [b.data_ptr() for b in buffers]
    outputs, hold, moved, held = [], [], [], []
    for seed in seeds:
        inputs = _inputs(shapes, seed=seed * 10, device=device)
        out = call(runner, *inputs)
        held.append(out)
        outputs.append(_plain_outputs(out))
        now = _buffers(runner)
        hold.append(len(now) == len(inputs) and all(torch.equal(b, x) for b, x in zip(now, inputs)))
        moved.append([b.data_ptr() for b in now] != first_pointers)
    static = set()
    if recorder is not None and recorder.calls:
        static = {t.data_ptr() for t in tensors_in(recorder.calls[0]["graph"].static_outputs)}
    return {
        "buffer_count": len(buffers),
        "buffers_are_examples": any(b.data_ptr() == x.data_ptr() for b, x in zip(buffers, examples)),
        "examples_unchanged": all(torch.equal(x, k) for x, k in zip(examples, kept)),
        "outputs": outputs,
        "buffers_hold_inputs": hold,
        "buffers_moved": moved,
        "held_first_now": _plain_outputs(held[0]) if held else None,
        "outputs_share_static": bool(held) and bool(static & {t.data_ptr() for t in tensors_in(held[-1])}),
        "output_type": type(held[0]).__name__ if held else None,
        "num_captures": _attr(runner, "num_captures"),
        "captures_seen": None if recorder is None else len(recorder.calls),
        "warmups_passed": None if recorder is None else [c["warmup_iters"] for c in recorder.calls],
        "captured_buffers": None if recorder is None or not recorder.calls else
        [t.data_ptr() for t in recorder.calls[0]["inputs"]] == first_pointers,
    }


@probe
def graph_runner_bad_example(mod, kind: str):
    """``GraphRunner(combine, tensor, <something that is not a tensor>)``; for ``"tensors"``
    two good example inputs (the answer: the first call's outputs)."""
    second = {"list": [1.0, 2.0], "float": 3.0, "none": None, "tensors": rows(1, 2, seed=1)[0]}[kind]
    runner = call(mod.GraphRunner, combine, rows(1, 2, seed=0)[0], second)
    return _plain_outputs(call(runner, rows(1, 2, seed=2)[0], rows(1, 2, seed=3)[0]))


@probe
def graph_runner_bad_call(mod, kind: str, device: str = "cpu"):
    examples = [rows(1, 2, seed=0, device=device)[0], rows(1, 3, seed=1, device=device)[0],
                rows(1, 1, seed=2, device=device)[0]]
    runner = call(mod.GraphRunner, combine, *examples)
    good = [rows(1, 2, seed=3, device=device)[0], rows(1, 3, seed=4, device=device)[0],
            rows(1, 1, seed=5, device=device)[0]]
    bad = {
        "none": None, "too_few": None, "too_many": None,
        "shape": torch.ones(4, 3, device=device),
        "float64": torch.ones(3, dtype=torch.float64, device=device),
        "int64": torch.ones(3, dtype=torch.int64, device=device),
        "device": torch.empty(3, device="meta") if device == "cpu" else torch.ones(3),
    }[kind]
    if kind == "none":  # a good call
        return _plain_outputs(call(runner, *good))
    if kind == "too_few":
        return _plain_outputs(call(runner, *good[:2]))
    if kind == "too_many":
        return _plain_outputs(call(runner, *good, good[0]))
    return _plain_outputs(call(runner, good[0], bad, good[2]))


def _plain_outputs(obj: Any) -> Any:
    """Outputs with their structure kept: tensors, tuples, lists and dicts of them."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu").clone()
    if isinstance(obj, tuple):
        return tuple(_plain_outputs(o) for o in obj)
    if isinstance(obj, list):
        return [_plain_outputs(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _plain_outputs(v) for k, v in obj.items()}
    return obj


def _sibling(mod, name: str):
    import importlib

    return importlib.import_module(f"{mod.__package__}.{name}")


# ---------------------------------------------------------------- exercise 5: buckets


@probe
def default_sizes(mod, max_size=None):
    """The sizes as returned: the signature says ``-> list[int]``, so a tuple is not the answer."""
    return call(mod.default_capture_sizes) if max_size is None else call(mod.default_capture_sizes, max_size)


@probe
def padded(mod, n: int, sizes: list):
    return call(mod.padded_size, n, list(sizes))


@probe
def pad(mod, n: int, width: int, size: int, value: float, dtype: str):
    x = rows(n, width, seed=n * 7 + size).to(getattr(torch, dtype))
    before = x.clone()
    out = call(mod.pad_rows, x, size, value)
    unchanged = torch.equal(x, before)
    shares = False
    if type(out) is torch.Tensor:  # a subclass would run its own code
        kept = out.clone()
        out.fill_(7.0)  # writing into the result must not reach x
        shares = not torch.equal(x, before)
        out = kept
    return {"out": out, "x_unchanged": unchanged, "shares_memory": shares}


@probe
def bucket_runner(mod, max_rows: int, sizes, batches: list, warmup_iters: int = 3,
                  pad_value: float = math.nan, device: str = "cpu", width: int = 3,
                  use_default_capture: bool = False):
    seen = {}

    def fn(x):
        seen["last"] = x.detach().clone()
        return rowwise(x)

    example = rows(max_rows, width, seed=0, device=device)
    example_before = example.clone()
    capture = capture_on_cpu if device == "cpu" else _sibling(mod, "capture").capture
    recorder = RecordingCapture(capture)
    kwargs = dict(capture_sizes=None if sizes is None else list(sizes), warmup_iters=warmup_iters,
                  pad_value=pad_value)
    if not use_default_capture:
        kwargs["capture"] = recorder
    runner = call(mod.BucketedGraphRunner, fn, example, **kwargs)
    results, first = [], None
    for i, n in enumerate(batches):
        seen.pop("last", None)
        x = rows(n, width, seed=i + 1, device=device)
        out = call(runner, x)
        if first is None and type(out) is torch.Tensor:  # a subclass would run its own code
            first = (out, out.clone())  # the result itself, and what it held when returned
        last = seen.get("last")
        results.append({"output": _plain_outputs(out),
                        "fn_saw": None if last is None else last.to("cpu")})
    stats = _attr(runner, "stats")
    if isinstance(stats, dict):  # a Counter or a dict: the keys that were counted
        stats = {str(k): v for k, v in stats.items() if v}
    return {
        "calls": results,
        "first_output_unchanged": first is None or torch.equal(*first),
        "capture_sizes_seen": [len(c["inputs"][0]) for c in recorder.calls],
        "capture_order": _as_list(_attr(runner, "capture_order")),
        "inputs_per_capture": [len(c["inputs"]) for c in recorder.calls],
        "buffer_addresses": len({c["inputs"][0].data_ptr() for c in recorder.calls}),
        "buffer_is_example": any(c["inputs"][0].data_ptr() == example.data_ptr() for c in recorder.calls),
        "pools": len({str(_pool_key(c["graph"].graph.pool())) for c in recorder.calls}),
        "warmups_passed": sorted({c["warmup_iters"] for c in recorder.calls}),
        "replays": {str(len(c["inputs"][0])): c["graph"].graph.replays for c in recorder.calls
                    if getattr(c["graph"].graph, "replays", 0)},
        "stats": stats,
        "example_unchanged": bool(torch.equal(example, example_before)),
    }


BAD_BATCHES = {
    "float64": lambda: rows(3, 3, seed=1).double(),
    "int64": lambda: torch.ones(3, 3, dtype=torch.long),
    "wider": lambda: rows(3, 4, seed=1),
    "narrower": lambda: rows(3, 2, seed=1),
    "rank": lambda: rows(3, 3, seed=1).unsqueeze(-1),
    "empty": lambda: rows(0, 3, seed=1),
    "0-d": lambda: torch.tensor(1.0),
    "device": lambda: torch.empty(3, 3, device="meta"),
    "list": lambda: [[1.0, 2.0, 3.0]],
}


@probe
def bucket_runner_bad_batch(mod, kind: str, rows_in: int = 3):
    """A runner over 8 rows of width 3 (float32, buckets 4 and 8) called with a bad batch; for
    ``"good"`` a batch of ``rows_in`` good rows (the answer: the output)."""
    runner = call(mod.BucketedGraphRunner, rowwise, rows(8, 3, seed=0), capture_sizes=[4, 8])
    x = rows(rows_in, 3, seed=2) if kind == "good" else BAD_BATCHES[kind]()
    return _plain_outputs(call(runner, x))


@probe
def bucket_runner_bad_sizes(mod, sizes: list, max_rows: int = 8):
    """Build a runner over ``max_rows`` rows with these sizes: the order it captured them in."""
    runner = call(mod.BucketedGraphRunner, rowwise, rows(max_rows, 3, seed=0), capture_sizes=list(sizes))
    return _as_list(_attr(runner, "capture_order"))


# ---------------------------------------------------------------- exercise 6: dispatch


@probe
def mode_pairs(mod, order: list | None = None):
    """``[name, decode_mode().name, mixed_mode().name]`` for the members named in ``order``."""
    modes = mod.CUDAGraphMode
    names = order if order is not None else [m.name for m in modes]
    return [[n, call(modes[n].decode_mode).name, call(modes[n].mixed_mode).name] for n in names]


@probe
def mode_names(mod):
    return sorted(m.name for m in mod.CUDAGraphMode)


def _desc(mode_and_desc) -> list:
    """[mode, num_tokens, uniform_decode]; for NONE just [mode, num_tokens]: an eager batch's
    descriptor may carry either uniform flag."""
    mode, desc = mode_and_desc
    if mode.name == "NONE":
        return [mode.name, desc.num_tokens]
    return [mode.name, desc.num_tokens, desc.uniform_decode]


@probe
def capture_descs(mod, mode: str, sizes: list):
    dispatcher = call(mod.CudagraphDispatcher, mod.CUDAGraphMode[mode], list(sizes))
    descs = call(dispatcher.capture_descs)
    if type(descs) is not list:  # the signature says a list
        return f"<a {type(descs).__name__}, not a list>"
    return [_desc(d) for d in descs]


@probe
def dispatch(mod, mode: str, sizes: list, queries: list):
    """Each query is ``[num_tokens, uniform_decode]``; ``None`` for the flag calls without it."""
    dispatcher = call(mod.CudagraphDispatcher, mod.CUDAGraphMode[mode], list(sizes))
    return [_desc(call(dispatcher.dispatch, n) if u is None else call(dispatcher.dispatch, n, uniform_decode=u))
            for n, u in queries]


@probe
def dispatch_arg(mod, num_tokens: int, sizes: list | None = None):
    dispatcher = call(mod.CudagraphDispatcher, mod.CUDAGraphMode.FULL, list(sizes or [1, 2, 4]))
    return _desc(call(dispatcher.dispatch, num_tokens))


# ---------------------------------------------------------------- exercise 7: fusion


@probe
def hbm(mod, n_ops: int, numel: int, dtype_bytes: int, fused: bool):
    return call(mod.chain_hbm_bytes, n_ops, numel, dtype_bytes, fused=fused)


def _norm_inputs(shape: list, dtype: str, seed: int, device: str = "cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    x, residual = (torch.randn(*shape, generator=g, device=device).to(getattr(torch, dtype))
                   for _ in range(2))
    weight = (torch.rand(shape[-1], generator=g, device=device) + 0.5).to(getattr(torch, dtype))
    return x, residual, weight


@probe
def fused_norm(mod, shape: list, dtype: str, seed: int, device: str = "cpu", eps: float | None = None):
    x, residual, weight = _norm_inputs(shape, dtype, seed, device)
    if eps is not None:  # small values, so that eps is not lost next to the mean square
        x, residual = x * 0.1, residual * 0.1
    before = (x.clone(), residual.clone())
    if eps is None:
        out, new_residual = call(mod.fused_add_rms_norm, x, residual, weight)
    else:
        out, new_residual = call(mod.fused_add_rms_norm, x, residual, weight, eps)
    return {"out": out.float().cpu(), "residual": new_residual.float().cpu(),
            "dtypes": [str(out.dtype), str(new_residual.dtype)],
            "inputs_unchanged": bool(torch.equal(x, before[0]) and torch.equal(residual, before[1]))}


BAD_NORM_INPUTS = {
    "residual": lambda x, r, w: (x, r[:, :8], w),
    "residual-dtype": lambda x, r, w: (x, r.double(), w),
    "residual-device": lambda x, r, w: (x, torch.empty(r.shape, device="meta"), w),
    "residual-list": lambda x, r, w: (x, r.tolist(), w),
    "weight": lambda x, r, w: (x, r, w[:8]),
    "weight-full-shape": lambda x, r, w: (x, r, torch.ones(x.shape)),
    "weight-device": lambda x, r, w: (x, r, torch.empty(w.shape, device="meta")),
    "weight-list": lambda x, r, w: (x, r, w.tolist()),
    "x-0-d": lambda x, r, w: (torch.tensor(1.0), torch.tensor(1.0), torch.tensor(1.0)),
    "x-list": lambda x, r, w: (x.tolist(), r, w),
}


@probe
def fused_norm_bad(mod, which: str):
    x, residual, weight = _norm_inputs([4, 16], "float32", 0)
    call(mod.fused_add_rms_norm, *BAD_NORM_INPUTS[which](x, residual, weight))
    return "accepted"


@probe
def count_kernels_no_cuda(mod):
    return call(mod.count_kernels, torch.add, torch.ones(2), 1.0)


def _kernels(fn, *args) -> int:
    """The probe's own count (it is the student's fused function being measured, not their
    counter): CUDA kernel events of one call after a warm-up call, copies and sets left out."""
    from torch.profiler import ProfilerActivity, profile

    call(fn, *args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call(fn, *args)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())


@probe
def fused_kernels(mod, dtype: str):
    x, residual, weight = _norm_inputs([8, 4096], dtype, 1, "cuda")
    return {"kernels": _kernels(mod.fused_add_rms_norm, x, residual, weight)}


@probe
def counted_kernels(mod):
    x = torch.ones(1024, device="cuda")
    return [call(mod.count_kernels, lambda t: ((t + 1) * 2).neg(), x),
            call(mod.count_kernels, lambda t: t + torch.ones(1024).to("cuda"), x),
            call(mod.count_kernels, lambda t: torch.nn.functional.softmax(t, dim=0) + t, x)]


# ---------------------------------------------------------------- exercise 8: engine


def _engine(mod, mode: str, sizes, device: str = "cpu", warmup_iters: int = 1, seed: int = 0,
            capture=None, capture_now: bool = True):
    from coursekit.toymodel import ModelConfig, ToyModel

    model = ToyModel(ModelConfig(seed=seed), device=device)
    kwargs = {"capture_sizes": None if sizes is None else list(sizes), "warmup_iters": warmup_iters}
    if capture is not None:
        kwargs["capture"] = capture
    engine = call(mod.DecodeEngine, model, mode=_sibling(mod, "dispatch").CUDAGraphMode[mode], **kwargs)
    if capture_now:
        call(engine.capture_model)
    return model, engine


def _rows(device: str, *columns) -> list[torch.Tensor]:
    return [torch.tensor(c, dtype=torch.long, device=device) for c in columns]


@probe
def engine_generate(mod, mode: str, sizes, prompts: list, new_tokens, seed: int = 0,
                    device: str = "cpu"):
    _, engine = _engine(mod, mode, sizes, device, seed=seed)
    out = call(engine.generate, [list(p) for p in prompts], new_tokens)
    return [[int(t) for t in seq] for seq in out]


@probe
def engine_steps(mod, mode: str, sizes, steps: list, device: str = "cpu", capture_now: bool = True):
    """Each step is ``[tokens, positions, slots]``; the answers are the logits, on the CPU.
    ``capture_now=False``: steps before ``capture_model()``, which must run eagerly."""
    _, engine = _engine(mod, mode, sizes, device, capture_now=capture_now)
    out = []
    for tokens, positions, slots in steps:
        logits = call(engine.step, *_rows(device, tokens, positions, slots))
        out.append(logits.float().cpu())
    if not capture_now:
        out.append(_stats_kinds(engine))
    return out


@probe
def engine_padding_rows(mod, mode: str, sizes: list, steps: list):
    """Steps of ``[tokens, positions, slots]`` (each smaller than its bucket after the first);
    after each, what rows ``n..bucket-1`` of the static buffers hold."""
    _, engine = _engine(mod, mode, sizes)
    held = []
    for tokens, positions, slots in steps:
        call(engine.step, *_rows("cpu", tokens, positions, slots))
        n, bucket = len(tokens), min(s for s in sizes if s >= len(tokens))
        held.append({name: _buffer_rows(engine, name, n, bucket) for name in ("tokens", "positions", "slots")})
    return held


def _buffer_rows(engine, name: str, start: int, stop: int):
    buffer = _attr(engine, name)
    if type(buffer) is not torch.Tensor or buffer.dim() != 1 or len(buffer) < stop:
        return f"<no 1-D static buffer {name!r} of {stop} rows>"
    return [int(v) for v in buffer[start:stop].tolist()]


@probe
def engine_uniform_flags(mod, slot_lists: list):
    """FULL_AND_PIECEWISE with one bucket of 4: one step per slot list without
    ``uniform_decode``; what each step replayed."""
    _, engine = _engine(mod, "FULL_AND_PIECEWISE", [4])
    kinds = []
    for slots in slot_lists:
        n = len(slots)
        before = {k: v for k, v in _stats_kinds_counts(engine).items()}
        call(engine.step, *_rows("cpu", [7] * n, list(range(n)), slots))
        after = _stats_kinds_counts(engine)
        kinds.append(sorted(k for k, v in after.items() if v != before.get(k, 0)))
    return kinds


def _stats_kinds_counts(engine) -> dict:
    return {repr(k[:-1]): k[-1] for k in _stats_kinds(engine)}


@probe
def engine_default_captures(mod, max_seqs: int, mode: str = "FULL"):
    """``DecodeEngine(model, mode)`` with the default capture sizes for a model of ``max_seqs``
    slots: the sizes ``capture_model()`` captured, in order."""
    from coursekit.toymodel import ModelConfig, ToyModel

    model = ToyModel(ModelConfig(max_seqs=max_seqs, n_layers=1))
    recorder = RecordingCapture()
    engine = call(mod.DecodeEngine, model, mode=_sibling(mod, "dispatch").CUDAGraphMode[mode],
                  capture=recorder)
    call(engine.capture_model)
    return [len(c["inputs"][0]) for c in recorder.calls]


@probe
def engine_padding(mod, mode: str, sizes: list, tokens: list, positions: list, slots: list):
    model, engine = _engine(mod, mode, sizes)
    call(engine.step, *_rows("cpu", [21, 22, 23, 24], [1, 1, 1, 1], [4, 5, 6, 7]))  # rows used once
    g = torch.Generator().manual_seed(5)
    model.k_cache.copy_(torch.randn(model.k_cache.shape, generator=g))
    model.v_cache.copy_(torch.randn(model.v_cache.shape, generator=g))
    before = (model.k_cache.clone(), model.v_cache.clone())
    call(engine.step, *_rows("cpu", tokens, positions, slots))
    changed = set()
    for old, new in zip(before, (model.k_cache, model.v_cache)):
        diff = (old != new).any(dim=(0, 3, 4))
        diff[model.padding_slot] = False
        changed |= {tuple(i) for i in diff.nonzero().tolist()}
    return sorted(list(c) for c in changed)


@probe
def engine_captures(mod, mode: str, sizes: list, warmup_iters: int):
    recorder = RecordingCapture()
    model, engine = _engine(mod, mode, sizes, warmup_iters=warmup_iters, capture=recorder)
    calls = recorder.calls
    first_pool = calls[0]["graph"].graph.pool() if calls else None
    return {"sizes": [len(c["inputs"][0]) for c in calls],
            "first_pool_none": bool(calls) and calls[0]["pool"] is None,
            "shared_pool": all(c["pool"] is first_pool for c in calls[1:]),
            "warmups": sorted({c["warmup_iters"] for c in calls}),
            "graphs": len(engine.graphs) if isinstance(getattr(engine, "graphs", None), dict) else None}


@probe
def engine_attention(mod, mode: str, sizes: list | None = None, tokens: list | None = None,
                     positions: list | None = None, slots: list | None = None):
    from coursekit.standin import inside_graph

    tokens, positions, slots = tokens or [1, 2, 3], positions or [0, 0, 0], slots or [0, 1, 2]
    model, engine = _engine(mod, mode, sizes or [4], capture_now=False)
    calls, attention = [], model.attention

    def spy(*args, **kwargs):
        calls.append(inside_graph())
        return attention(*args, **kwargs)

    model.attention = spy
    call(engine.capture_model)
    captured = list(calls)
    calls.clear()
    call(engine.step, *_rows("cpu", tokens, positions, slots))
    return {"captured_any": any(captured), "eager_in_step": sum(1 for c in calls if not c),
            "replayed": _stats_kinds(engine)}


def _stats_kinds(engine) -> list:
    """What ``stats`` counted: [mode, num_tokens, uniform] per replayed key, and "eager"."""
    stats = _attr(engine, "stats")
    if not isinstance(stats, dict):
        return [str(stats)]
    kinds = []
    for key, count in stats.items():
        if not count:
            continue
        if key == "eager":
            kinds.append(["eager", count])
        elif isinstance(key, tuple) and len(key) == 2:
            kinds.append([getattr(key[0], "name", str(key[0])), getattr(key[1], "num_tokens", None),
                          bool(getattr(key[1], "uniform_decode", None)), count])
        else:
            kinds.append([repr(key), count])
    return sorted(kinds, key=repr)


@probe
def engine_stats(mod, mode: str, prompts: list, new_tokens):
    _, engine = _engine(mod, mode, [1, 2, 4, 8, 16])
    call(engine.generate, [list(p) for p in prompts], new_tokens)
    return _stats_kinds(engine)


@probe
def engine_batches(mod, prompts: list, new_tokens):
    _, engine = _engine(mod, "FULL", [1, 2, 4, 8, 16])
    sizes, step = [], engine.step

    def spy(tokens, positions, slots, *args, **kwargs):
        sizes.append(len(tokens))
        return step(tokens, positions, slots, *args, **kwargs)

    engine.step = spy
    call(engine.generate, [list(p) for p in prompts], new_tokens)
    return sizes


@probe
def engine_bad(mod, kind: str, token: int = 1):
    """A bad (or, for the ``*-largest`` kinds, the largest good) request to a FULL engine with
    one bucket of 2; a good one's answer is its logits or tokens."""
    _, engine = _engine(mod, "FULL", [2])
    if kind.startswith("step"):
        long = torch.long
        made = {"step-int32": lambda: [torch.tensor([1, 2], dtype=torch.int32), *_rows("cpu", [0, 1], [0, 1])],
                "step-float-positions": lambda: [*_rows("cpu", [1]), torch.tensor([0.0]), *_rows("cpu", [0])],
                "step-2d-slots": lambda: [*_rows("cpu", [1], [0]), torch.tensor([[0]], dtype=long)],
                "step-empty": lambda: [torch.zeros(0, dtype=long)] * 3,
                "step-list": lambda: [[1], *_rows("cpu", [0], [0])]}
        if kind in made:
            args = made[kind]()
        else:
            args = _rows("cpu", *{"step-lengths": ([1, 2], [0, 1], [0]), "step-padding-slot": ([1], [0], [8]),
                                  "step-negative-slot": ([1], [0], [-1]),
                                  "step-position": ([1], [64], [0]), "step-negative-position": ([1], [-1], [0]),
                                  "step-largest": ([token, token], [63, 63], [7, 0])}[kind])
        logits = call(engine.step, *args)
        return logits.float()
    prompts, new = {"generate-too-many": ([[1]] * 9, 1), "generate-empty": ([[1], []], 1),
                    "generate-zero-new": ([[1]], 0), "generate-too-long": ([[1] * 60], 10),
                    "generate-largest": ([[token] * 55] + [[token]] * 7, [10, 1, 1, 1, 1, 1, 1, 2])}[kind]
    out = call(engine.generate, prompts, new)
    return [[int(t) for t in seq] for seq in out]
