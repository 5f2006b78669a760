"""Exercise 5 (buckets): the probes a worker runs on the submission's ``buckets`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

import torch

from coursekit.standin import RecordingCapture
from coursekit.standin import capture_on_cpu
from coursekit.vllm_recorded import engine_cases, explicit_max_cases
from grader.checks import Check, P, Probe, same
from grader.probes import _as_list, _attr, _plain_outputs, _pool_key, _sibling, call, probe, rows, rowwise

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


@probe
def default_sizes(mod, max_size=None):
    """The sizes as returned: the signature says ``-> list[int]``, so a tuple is not the answer."""
    return call(mod.default_capture_sizes) if max_size is None else call(mod.default_capture_sizes, max_size)


@probe
def engine_sizes(mod, kwargs: dict):
    return call(mod.engine_capture_sizes, **kwargs)


def _kwargs(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


@probe
def padded(mod, n: int, sizes: list, generator: bool = False):
    """``padded_size(n, sizes)``; ``generator``: the sizes as a generator (an Iterable, read once)."""
    return call(mod.padded_size, n, (s for s in sizes) if generator else list(sizes))


@probe
def pad(mod, n: int, width: int, size: int, value: float | None, dtype: str, row_shape: list | None = None):
    """``pad_rows(x, size, value)``; ``value`` None: not passed (the default); ``row_shape``: rows
    of that shape instead of ``width`` numbers."""
    x = (rows(n, width, seed=n * 7 + size) if row_shape is None else _shaped(n, row_shape, seed=n * 7 + size)).to(
        getattr(torch, dtype)
    )
    before = x.clone()
    out = call(mod.pad_rows, x, size) if value is None else call(mod.pad_rows, x, size, value)
    unchanged = torch.equal(x, before)
    shares = False
    if type(out) is torch.Tensor:  # a subclass would run its own code
        kept = out.clone()
        out.fill_(7.0)  # writing into the result must not reach x
        shares = not torch.equal(x, before)
        out = kept
    return {"out": out, "x_unchanged": unchanged, "shares_memory": shares}


def _shaped(n: int, row_shape: list, seed: int, device: str = "cpu") -> torch.Tensor:
    """``n`` rows of ``row_shape`` (random values in [0.5, 1.5))."""
    return rows(n, math.prod(row_shape), seed=seed, device=device).reshape(n, *row_shape)


def _rowwise(x: torch.Tensor) -> torch.Tensor:
    """``rowwise``, elementwise over 1-D rows (a scalar per row: summing the last dim would mix rows)."""
    return rowwise(x) if x.dim() > 1 else torch.tanh(x * 1.5 + 0.25) + x


@probe
def bucket_runner(
    mod,
    max_rows: int,
    sizes,
    batches: list,
    warmup_iters: int = 3,
    pad_value: float = math.nan,
    device: str = "cpu",
    width: int = 3,
    use_default_capture: bool = False,
    row_shape: list | None = None,
    omit: list = (),
):
    """``omit``: the keyword arguments not passed at all (``capture_sizes``, ``warmup_iters``,
    ``pad_value``: the runner's defaults); ``row_shape``: rows of that shape instead of ``width``
    values."""
    seen = {}

    def fn(x):
        seen["last"] = x.detach().clone()
        return _rowwise(x)

    shape = [width] if row_shape is None else list(row_shape)
    example = _shaped(max_rows, shape, seed=0, device=device)
    example_before = example.clone()
    capture = capture_on_cpu if device == "cpu" else _sibling(mod, "capture").capture
    recorder = RecordingCapture(capture)
    kwargs = dict(capture_sizes=None if sizes is None else list(sizes), warmup_iters=warmup_iters, pad_value=pad_value)
    for name in omit:
        kwargs.pop(name, None)
    if not use_default_capture:
        kwargs["capture"] = recorder
    runner = call(mod.BucketedGraphRunner, fn, example, **kwargs)
    results, first = [], None
    for i, n in enumerate(batches):
        seen.pop("last", None)
        x = _shaped(n, shape, seed=i + 1, device=device)
        out = call(runner, x)
        if first is None and type(out) is torch.Tensor:  # a subclass would run its own code
            first = (out, out.clone())  # the result itself, and what it held when returned
        last = seen.get("last")
        results.append({"output": _plain_outputs(out), "fn_saw": None if last is None else last.to("cpu")})
    stats = _attr(runner, "stats")
    if isinstance(stats, dict):  # a Counter or a dict: the keys that were counted
        stats = {str(k): v for k, v in stats.items() if v}
    return {
        "calls": results,
        "first_output_unchanged": first is None or torch.equal(*first),
        "capture_sizes_seen": [len(c["inputs"][0]) for c in recorder.calls],
        "capture_shapes": [list(c["inputs"][0].shape) for c in recorder.calls],
        "capture_order": _as_list(_attr(runner, "capture_order")),
        "inputs_per_capture": [len(c["inputs"]) for c in recorder.calls],
        "buffer_addresses": len({c["inputs"][0].data_ptr() for c in recorder.calls}),
        "buffer_is_example": any(c["inputs"][0].data_ptr() == example.data_ptr() for c in recorder.calls),
        "pools": len({str(_pool_key(c["graph"].graph.pool())) for c in recorder.calls}),
        "warmups_passed": sorted({c["warmup_iters"] for c in recorder.calls}),
        "replays": {
            str(len(c["inputs"][0])): c["graph"].graph.replays
            for c in recorder.calls
            if getattr(c["graph"].graph, "replays", 0)
        },
        "stats": stats,
        "example_unchanged": bool(torch.equal(example, example_before)),
    }


# ------------------------------------------------------------------------- checks


def runner_setups(rng: random.Random, count: int) -> list[tuple[int, list[int], list[int]]]:
    setups = []
    for _ in range(count):
        max_rows = rng.randint(1, 40)
        sizes = rng.sample(range(1, max_rows + 1), rng.randint(1, min(6, max_rows)))
        batches = [rng.randint(1, max(sizes))] + [rng.randint(1, max_rows + 8) for _ in range(rng.randint(0, 6))]
        # the first batch comes back once more at the end: its bucket is replayed again, so a
        # runner that returned a view of the static output sees its first result overwritten
        batches.append(batches[0])
        setups.append((max_rows, sizes, batches))
    return setups


def bucket_probe(max_rows, sizes, batches, warmup_iters=2, **extra) -> Probe:
    return P(
        "bucket_runner",
        f"BucketedGraphRunner(fn, {max_rows} rows, capture_sizes={sizes}, "
        f"warmup_iters={warmup_iters}) on batches {batches}",
        max_rows=max_rows,
        sizes=sizes,
        batches=batches,
        warmup_iters=warmup_iters,
        **extra,
    )


#: The rule's words live in the stub's docstring; its numbers, in vLLM's recorded lists.
BUCKET_RULE = "vLLM's bucket pattern, as default_capture_sizes' docstring states it"


def bucket_boundaries() -> tuple[int, ...]:
    """Every ``max_size`` where vLLM's stride changes, with its neighbours: read from vLLM 0.26.0's
    own recorded lists (``coursekit.vllm_recorded``), so they move when the rule does."""
    cases = dict(explicit_max_cases())
    sizes = cases[max(cases)]
    turns = {sizes[0]} | {b for a, b, c in zip(sizes, sizes[1:], sizes[2:]) if c - b != b - a}
    after = {sizes[sizes.index(t) + 1] for t in turns}
    return tuple(sorted({p + d for p in turns | after | {512} for d in (-1, 0, 1) if p + d >= 1}))


def engine_configs(r: random.Random) -> list[dict]:
    """Configurations that tell vLLM's rule from the plausible wrong ones, in every draw: below the
    512 cap with room to spare (2 * max_num_seqs, not max_num_seqs), speculative tokens, the cap,
    max_num_batched_tokens on and off the stride (added only when it is <= the largest size), and
    vLLM's defaults; plus a few of vLLM's own recorded configurations."""
    seqs = r.randint(20, 120)
    configs = [
        {"max_num_seqs": seqs},
        {"max_num_seqs": r.randint(3, 40), "num_speculative_tokens": r.randint(1, 4)},
        {"max_num_seqs": r.randint(257, 1024)},
        # one past the 512 cap: 512 is the largest, the batched tokens are not added
        {"max_num_seqs": r.randint(257, 1024), "max_num_batched_tokens": 513},
        # the batched tokens equal to 2 * max_num_seqs, above 256 and off the stride: added (the
        # two are equal ints, not one object: compare by value)
        {"max_num_seqs": (s := 8 * r.randint(17, 31) + r.randint(1, 7)), "max_num_batched_tokens": 2 * s},
        {"max_num_seqs": r.randint(64, 300), "max_num_batched_tokens": 8 * r.randint(2, 30) + r.randint(1, 7)},
        {"max_num_seqs": r.randint(64, 300), "max_num_batched_tokens": 16 * r.randint(16, 31)},
        {"max_num_seqs": r.randint(2, 50), "max_num_batched_tokens": r.randint(2, 8) * 1000 + r.randint(1, 999)},
        {},
    ]
    recorded = r.sample(engine_cases(), 6)
    configs += [
        {"max_num_seqs": s, "num_speculative_tokens": k, "max_num_batched_tokens": t} for s, k, t, _ in recorded
    ]
    return configs


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex5.default_capture_sizes")
    fixed = bucket_boundaries() + (1000,)
    drawn = [r.randint(1, 300), r.randint(300, 2000), r.randint(2000, 5000)]
    rs = draw.rng("ex5.engine_capture_sizes")
    r = draw.rng("ex5.padded_size")
    size_lists = [[r.randint(1, 600) for _ in range(r.randint(1, 12))] for _ in range(12)]
    padded_probes = [
        P("padded", f"padded_size({n}, {s})", n=n, sizes=s)
        for s in size_lists
        for n in (r.randint(1, 700), min(s), max(s), max(s) + 1)
    ]
    r = draw.rng("ex5.pad_rows")
    pads = [
        (r.randint(1, 6), r.randint(0, 6), v, d)
        for v, d in [
            (0.0, "float32"),
            (round(r.uniform(-9, 9), 2), "float32"),
            (math.nan, "float64"),
            (0.0, "bfloat16"),
            (round(r.uniform(-9, 9), 1), "float32"),
        ]
    ]
    # Always one x that needs no padding at all: it must still come back as a new tensor.
    pads.append((r.randint(1, 6), 0, round(r.uniform(-9, 9), 1), r.choice(["float32", "float64"])))
    # value not given: the default, 0 (None travels as "not passed")
    pads.append((r.randint(1, 6), r.randint(1, 6), None, "float32"))
    pad_shaped = (r.randint(1, 5), r.randint(1, 4))  # rows that are matrices keep their shape
    r = draw.rng("ex5.runner_returns_fn_of_real_rows")
    runners = [bucket_probe(*setup, warmup_iters=r.randint(1, 3)) for setup in runner_setups(r, 10)]
    # Every default the docstring states, in every draw: capture_sizes, warmup_iters and pad_value
    # not passed (default_capture_sizes(len(max_example)), 3, 0); and rows that are matrices, so a
    # buffer that flattens them (the right number of elements, the wrong shape) shows.
    max_rows = 8 * r.randint(2, 5)  # itself a default size: its batch replays, never eager
    defaults = P(
        "bucket_runner",
        f"BucketedGraphRunner(fn, {max_rows} rows) with capture_sizes, warmup_iters and pad_value not given",
        # 3 and 5..7 rows need padding (buckets 4 and 8) in every draw
        max_rows=max_rows,
        sizes=None,
        batches=[3, r.randint(5, 7), max_rows, max_rows + r.randint(1, 5)],
        omit=["capture_sizes", "warmup_iters", "pad_value"],
    )
    shaped_rows = r.randint(4, 12)
    shaped_sizes = sorted({shaped_rows, r.randint(1, shaped_rows - 1)})
    shaped_batches = [r.randint(1, shaped_rows), shaped_rows, shaped_rows + 1]
    shaped = [
        P(
            "bucket_runner",
            f"BucketedGraphRunner(fn, {shaped_rows} rows shaped {tuple(s)}, "
            f"capture_sizes={shaped_sizes}) on batches {shaped_batches}",
            max_rows=shaped_rows,
            sizes=shaped_sizes,
            batches=shaped_batches,
            warmup_iters=2,
            row_shape=s,
        )
        for s in ([2, 3], [])
    ]  # matrices, and scalars (a 1-D max_example)
    r2 = draw.rng("ex5.gpu_runner")
    return [
        Check(
            "ex5",
            "default_capture_sizes",
            f"{BUCKET_RULE}, <= max_size, ascending",
            [P("default_sizes", "default_capture_sizes()")]
            + [P("default_sizes", f"default_capture_sizes({m})", max_size=m) for m in fixed + tuple(drawn)],
            points=1,
        ),
        Check(
            "ex5",
            "engine_capture_sizes",
            "vLLM 0.26.0's sizes: default_capture_sizes(min(2 * max_num_seqs * (1 + "
            "num_speculative_tokens), 512, max_num_batched_tokens)), plus max_num_batched_tokens "
            "when it is <= that and not yet a size",
            [P("engine_sizes", f"engine_capture_sizes({_kwargs(c)})", kwargs=c) for c in engine_configs(rs)]
            # exactly at the limits: 1 sequence, 1 batched token
            + [
                P("engine_sizes", f"engine_capture_sizes({_kwargs(c)})", kwargs=c)
                for c in (
                    {"max_num_seqs": 1},
                    {"max_num_batched_tokens": 1},
                    {"max_num_seqs": 1, "num_speculative_tokens": 0, "max_num_batched_tokens": 1},
                )
            ],
            points=1,
        ),
        Check(
            "ex5",
            "padded_size",
            "the smallest size >= n (sizes unsorted or repeated), None above every size",
            padded_probes
            + [P("padded", f"padded_size(1, {s})", n=1, sizes=s) for s in size_lists[:3]]
            + [
                P("padded", f"padded_size({n}, a generator of {s})", n=n, sizes=s, generator=True)
                for s in size_lists[3:5]
                for n in (s[0], min(s), max(s))
            ],  # s[0]: read once
            points=2,
        ),
        Check(
            "ex5",
            "pad_rows",
            "size rows: x first, then value (0 when not given); x untouched, no shared memory",
            [
                P(
                    "pad",
                    f"pad_rows(x of {n} rows, {n + e}" + ("" if v is None else f", {v}") + ")",
                    n=n,
                    width=3,
                    size=n + e,
                    value=v,
                    dtype=d,
                )
                for n, e, v, d in pads
            ]
            + [
                P(
                    "pad",
                    f"pad_rows(x of {pad_shaped[0]} rows shaped (2, 3), {sum(pad_shaped)}, 1.5)",
                    n=pad_shaped[0],
                    width=6,
                    size=sum(pad_shaped),
                    value=1.5,
                    dtype="float32",
                    row_shape=[2, 3],
                )
            ],
            points=1,
        ),
        Check(
            "ex5",
            "runner_returns_fn_of_real_rows",
            "pad to the bucket with pad_value (NaN here, 0 when not given), replay, return the "
            "real rows (in max_example's row shape) as a fresh tensor; batches above every "
            "bucket run eagerly",
            runners + [defaults, *shaped],
            compare=same(keys=("calls", "first_output_unchanged", "example_unchanged")),
            points=2,
        ),
        Check(
            "ex5",
            "runner_captures_largest_first_in_one_pool",
            "one capture per size (default_capture_sizes(len(max_example)) when not given), "
            "largest first, all over one static buffer shaped like max_example (not the "
            "caller's) and one memory pool, each with the runner's warmup_iters (3 when not given)",
            runners + [defaults, *shaped],
            compare=same(
                keys=(
                    "capture_sizes_seen",
                    "capture_shapes",
                    "capture_order",
                    "inputs_per_capture",
                    "buffer_addresses",
                    "buffer_is_example",
                    "pools",
                    "warmups_passed",
                )
            ),
            points=2,
        ),
        Check(
            "ex5",
            "runner_stats",
            "stats counts replays per size and eager fallbacks under 'eager'",
            runners,
            compare=same(keys=("stats", "replays")),
            points=1,
        ),
        Check(
            "ex5",
            "gpu_runner",
            "on real CUDA graphs: NaN padding never reaches real rows, eager above the largest "
            "bucket, largest first into one pool",
            [bucket_probe(16, [1, 2, 4, 8, 16], [r2.randint(1, 20) for _ in range(8)], device="cuda", width=8)],
            compare=same(keys=("calls", "capture_order", "pools", "buffer_addresses", "stats")),
            gpu=True,
            points=1,
        ),
    ]
