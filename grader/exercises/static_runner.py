"""Exercise 4 (static_runner): the probes a worker runs on the submission's ``static_runner`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import torch

from coursekit.standin import RecordingCapture
from coursekit.standin import capture_on_cpu
from coursekit.standin import tensors_in
from grader.checks import Check, P, same
from grader.probes import _attr, _buffers, _plain_outputs, _sibling, call, FUNCTIONS, probe

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


def _inputs(shapes: list, seed: int, device: str) -> list[torch.Tensor]:
    """One random tensor per shape (values in [0.5, 1.5)), each from its own seed."""
    return [
        torch.rand(*s, generator=torch.Generator(device=device).manual_seed(seed + i), device=device) + 0.5
        for i, s in enumerate(shapes)
    ]


@probe
def graph_runner(
    mod,
    fn: str,
    shapes: list,
    seeds: list,
    warmup_iters: int | None = 3,
    clone_outputs: bool | None = True,
    device: str = "cpu",
    spy: bool = True,
):
    """Build a runner, call it once per seed; report what came back and what the graph saw.
    ``warmup_iters`` or ``clone_outputs`` None: not passed (the runner's default)."""
    function = FUNCTIONS[fn]
    examples = _inputs(shapes, seed=100, device=device)
    kept = [x.clone() for x in examples]
    recorder, at_capture = None, []
    if spy:
        recorder = RecordingCapture(capture_on_cpu if device == "cpu" else _sibling(mod, "capture").capture)

        def capture(fn, *static_inputs, **kwargs):
            # what the buffers hold when the capture is asked for (warm-up runs fn on them)
            at_capture.append([t.detach().clone() if isinstance(t, torch.Tensor) else t for t in static_inputs])
            return recorder(fn, *static_inputs, **kwargs)

    kwargs = {}
    if warmup_iters is not None:
        kwargs["warmup_iters"] = warmup_iters
    if clone_outputs is not None:
        kwargs["clone_outputs"] = clone_outputs
    if recorder is not None:
        kwargs["capture"] = capture
    runner = call(mod.GraphRunner, function, *examples, **kwargs)
    buffers_type = type(_attr(runner, "static_inputs")).__name__
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
    values_at_capture = None
    if at_capture:
        seen = at_capture[0]
        values_at_capture = len(seen) == len(examples) and all(
            isinstance(v, torch.Tensor) and v.shape == x.shape and v.dtype == x.dtype and torch.equal(v, x)
            for v, x in zip(seen, examples)
        )
    return {
        "buffer_count": len(buffers),
        "buffers_type": buffers_type,
        "buffers_hold_examples_at_capture": values_at_capture,
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
        "captured_buffers": None
        if recorder is None or not recorder.calls
        else [t.data_ptr() for t in recorder.calls[0]["inputs"]] == first_pointers,
    }


# ------------------------------------------------------------------------- checks


RUNNER_KEYS = (
    "buffer_count",
    "buffers_type",
    "buffers_hold_examples_at_capture",
    "buffers_are_examples",
    "examples_unchanged",
    "buffers_hold_inputs",
    "buffers_moved",
)


def input_shapes(rng: random.Random) -> list[list[int]]:
    return [[rng.randint(1, 6) for _ in range(rng.randint(1, 3))] for _ in range(rng.randint(1, 3))]


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex4.runner_returns_fn_of_latest_inputs")
    # A different warm-up count for each runner: a hard-coded count can match one of them only.
    runs = [
        P(
            "graph_runner",
            f"GraphRunner(combine, inputs shaped {s}) called 3 times",
            fn="combine",
            shapes=s,
            seeds=r.sample(range(1, 10_000), 3),
            warmup_iters=w,
        )
        for s, w in [(input_shapes(r), w) for w in r.sample(range(1, 6), 4)]
    ]
    r = draw.rng("ex4.runner_captures_once")
    # warmup_iters not given: capture must receive the default, 3
    default_warmup = [
        P(
            "graph_runner",
            f"GraphRunner(combine, inputs shaped {s}) without warmup_iters, called twice",
            fn="combine",
            shapes=s,
            seeds=r.sample(range(1, 10_000), 2),
            warmup_iters=None,
        )
        for s in [input_shapes(r)]
    ]
    r = draw.rng("ex4.runner_clone_outputs")
    # clone_outputs None: not given, the default (True) must clone
    clone = [
        P(
            "graph_runner",
            f"GraphRunner({fn}, ..."
            + (", clone_outputs not given)" if c is None else f", clone_outputs={c})")
            + " called twice",
            fn=fn,
            shapes=[[n], [n]],
            seeds=r.sample(range(1, 10_000), 2),
            clone_outputs=c,
            spy=True,
        )
        for fn in ("combine", "pair", "listed")
        for c in (True, False, None)
        for n in [r.randint(1, 9)]
    ]
    r2 = draw.rng("ex4.gpu_runner")
    return [
        Check(
            "ex4",
            "runner_returns_fn_of_latest_inputs",
            "copy every input into its static buffer (copy_), replay, return fn of these inputs",
            runs,
            compare=same(keys=("outputs",)),
            points=2,
        ),
        Check(
            "ex4",
            "runner_owns_stable_buffers",
            "static_inputs is a tuple of one buffer per input, a copy the runner owns that holds "
            "the example's values when fn is captured, same address on every call",
            runs,
            compare=same(keys=RUNNER_KEYS),
            points=1,
        ),
        Check(
            "ex4",
            "runner_captures_once",
            "capture once at construction, with the runner's buffers and warmup_iters (3 when not given)",
            runs + default_warmup,
            compare=same(keys=("num_captures", "captures_seen", "warmups_passed", "captured_buffers")),
            points=1,
        ),
        Check(
            "ex4",
            "runner_clone_outputs",
            "clone_outputs=True (the default) returns fresh copies in fn's structure (a tensor, "
            "tuple, list or dict stays one); False returns the static outputs, overwritten by "
            "the next call",
            clone,
            compare=same(keys=("held_first_now", "outputs_share_static", "output_type")),
            points=1,
        ),
        Check(
            "ex4",
            "gpu_runner",
            "on CUDA tensors the runner captures with exercise 3 and replays fn of fresh inputs",
            [
                P(
                    "graph_runner",
                    "GraphRunner(combine, cuda inputs) called 4 times",
                    fn="combine",
                    shapes=[[r2.randint(1, 32), 32], [32]],
                    seeds=r2.sample(range(1, 10_000), 4),
                    device="cuda",
                    spy=False,
                ),
                P(
                    "graph_runner",
                    "GraphRunner(combine, cuda, clone_outputs=False) called twice",
                    fn="combine",
                    shapes=[[64], [64]],
                    seeds=r2.sample(range(1, 10_000), 2),
                    clone_outputs=False,
                    device="cuda",
                    spy=False,
                ),
            ],
            compare=same(keys=("outputs", "held_first_now", "num_captures", "buffers_are_examples")),
            gpu=True,
            points=1,
        ),
    ]
