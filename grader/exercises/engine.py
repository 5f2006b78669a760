"""Exercise 8 (engine): the probes a worker runs on the submission's ``engine`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import torch

from coursekit.standin import RecordingCapture, RecordingCompiler
from coursekit.strategies import MODES
from grader.checks import Answer, Check, P, Probe, same
from grader.probes import _attr, _sibling, call, probe

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


#: The model dtypes a probe may ask for (``dtype=`` travels as its name).
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: How far a step's logits may be from the eager model's, by the model's dtype (the stub's rule).
TOLERANCE = {"float32": 1e-5, "bfloat16": 5e-2}


#: Where CPU probes run the engine: an indexed name, whose tensors say ``cpu``, so that an engine
#: comparing device names instead of devices fails here as it would on CUDA (``cuda`` vs ``cuda:0``).
CPU = "cpu:0"


def _engine(
    mod,
    mode: str,
    sizes,
    device: str = CPU,
    warmup_iters: int = 1,
    seed: int = 0,
    capture=None,
    capture_now: bool = True,
    dtype: str = "float32",
    compiler=None,
):
    from coursekit.toymodel import ModelConfig, ToyModel

    model = ToyModel(ModelConfig(seed=seed), device=device, dtype=DTYPES[dtype])
    kwargs = {"capture_sizes": None if sizes is None else list(sizes), "warmup_iters": warmup_iters}
    if capture is not None:
        kwargs["capture"] = capture
    if compiler is not None:
        kwargs["compiler"] = compiler
    engine = call(mod.DecodeEngine, model, mode=_sibling(mod, "dispatch").CUDAGraphMode[mode], **kwargs)
    if capture_now:
        call(engine.capture_model)
    return model, engine


def _rows(device: str, *columns) -> list[torch.Tensor]:
    return [torch.tensor(c, dtype=torch.long, device=device) for c in columns]


@probe
def engine_generate(
    mod, mode: str, sizes, prompts: list, new_tokens, seed: int = 0, device: str = CPU, dtype: str = "float32"
):
    """The tokens as returned: a list of lists of ints must come back as one (the wire keeps a
    tuple a tuple and a tensor a tensor, which never equal the reference's lists of ints)."""
    _, engine = _engine(mod, mode, sizes, device, seed=seed, dtype=dtype)
    return call(engine.generate, [list(p) for p in prompts], new_tokens)


@probe
def engine_steps(
    mod, mode: str, sizes, steps: list, device: str = CPU, capture_now: bool = True, dtype: str = "float32"
):
    """Each step is ``[tokens, positions, slots]``; the answers are the logits, on the CPU, in
    the dtype they came in. ``capture_now=False``: steps before ``capture_model()``, which must
    run eagerly."""
    _, engine = _engine(mod, mode, sizes, device, capture_now=capture_now, dtype=dtype)
    out = []
    for tokens, positions, slots in steps:
        logits = call(engine.step, *_rows(device, tokens, positions, slots))
        out.append(logits.cpu())
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
    engine = call(mod.DecodeEngine, model, mode=_sibling(mod, "dispatch").CUDAGraphMode[mode], capture=recorder)
    call(engine.capture_model)
    return [len(c["inputs"][0]) for c in recorder.calls]


@probe
def engine_buffers(mod, mode: str, sizes, dtype: str = "float32"):
    """A new engine's static buffers (dtype, shape, device, and what they hold: every value of
    the 1-D ones, whether ``hidden`` and ``attn`` are all zeros), then whether
    ``capture_model()`` left every real slot's cache at zero. ``hidden`` and ``attn`` are asked
    of engines with piecewise graphs only."""
    model, engine = _engine(mod, mode, sizes, dtype=dtype, capture_now=False)
    names = ["tokens", "positions", "slots"] + (["hidden", "attn"] if "PIECEWISE" in mode else [])
    held = {}
    for name in names:
        buffer = _attr(engine, name)
        if type(buffer) is not torch.Tensor:
            held[name] = f"<no static buffer {name!r}>"
            continue
        values = (
            [int(v) for v in buffer.tolist()]
            if buffer.dim() == 1 and not buffer.is_floating_point()
            else bool((buffer == 0).all())
        )
        held[name] = {
            "dtype": str(buffer.dtype).removeprefix("torch."),
            "shape": list(buffer.shape),
            "device": buffer.device.type,
            "values": values,
        }
    call(engine.capture_model)
    real = model.config.max_seqs
    held["real_slots_untouched_by_capture"] = bool(
        (model.k_cache[:, :real] == 0).all() and (model.v_cache[:, :real] == 0).all()
    )
    return held


@probe
def engine_defaults(mod, max_seqs: int = 8):
    """``DecodeEngine(model, capture=recorder)``: every other argument left to its default (mode,
    capture_sizes, warmup_iters); what ``capture_model()`` captured and how."""
    from coursekit.toymodel import ModelConfig, ToyModel

    model = ToyModel(ModelConfig(max_seqs=max_seqs, n_layers=1))
    recorder = RecordingCapture()
    engine = call(mod.DecodeEngine, model, capture=recorder)
    call(engine.capture_model)
    keys = _graph_keys(engine)
    return {
        "graphs": sorted(keys, key=repr) if isinstance(keys, list) else keys,
        "sizes": [len(c["inputs"][0]) for c in recorder.calls],
        "warmups": sorted({c["warmup_iters"] for c in recorder.calls}),
    }


def _graph_keys(engine) -> list | str:
    """``graphs``' keys as ``[mode, num_tokens, num_reqs, uniform]``, in the dict's order (which
    the callers sort: the docstring leaves it open)."""
    graphs = _attr(engine, "graphs")
    if not isinstance(graphs, dict):
        return f"<graphs is {type(graphs).__name__}, not a dict>"
    keys = []
    for key in graphs:
        if isinstance(key, tuple) and len(key) == 2:
            m, d = key
            keys.append(
                [
                    getattr(m, "name", repr(m)),
                    getattr(d, "num_tokens", None),
                    getattr(d, "num_reqs", None),
                    bool(getattr(d, "uniform", None)),
                ]
            )
        else:
            keys.append(repr(key))
    return keys


def _graph_values(engine, recorder) -> list | str:
    """Each ``graphs`` value (sorted by key) as the index of the capture that returned it, or,
    for a list, ``["list", indices]``; anything else as its type's name."""
    graphs = _attr(engine, "graphs")
    if not isinstance(graphs, dict):
        return f"<graphs is {type(graphs).__name__}, not a dict>"
    made = [c["graph"] for c in recorder.calls]

    def index(value):
        return next((i for i, g in enumerate(made) if g is value), f"<not a captured graph: {type(value).__name__}>")

    values = []
    for key, value in zip(_graph_keys(engine), graphs.values()):
        values.append([key, ["list", [index(v) for v in value]] if type(value) is list else index(value)])
    return sorted(values, key=repr)


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
    model, engine = _engine(mod, mode, sizes, warmup_iters=warmup_iters, capture=recorder, capture_now=False)
    start = time.perf_counter()
    call(engine.capture_model)
    wall = time.perf_counter() - start
    calls = recorder.calls
    first_pool = calls[0]["graph"].graph.pool() if calls else None
    seconds, memory = _attr(engine, "capture_seconds"), _attr(engine, "capture_memory_bytes")
    return {
        "sizes": [len(c["inputs"][0]) for c in calls],
        "first_pool_none": bool(calls) and calls[0]["pool"] is None,
        "shared_pool": all(c["pool"] is first_pool for c in calls[1:]),
        "warmups": sorted({c["warmup_iters"] for c in calls}),
        "graphs": len(engine.graphs) if isinstance(getattr(engine, "graphs", None), dict) else None,
        "graph_values": _graph_values(engine, recorder),
        "capture_seconds": (
            "a float above 0, at most capture_model()'s wall time"
            if type(seconds) is float and 0 < seconds <= wall
            else f"{seconds!r} (capture_model() took {wall:.4f} s)"
        ),
        # An int, 0 on a CPU: anything else (None, 0.0) comes back as itself and differs.
        "capture_memory_bytes": memory if type(memory) in (int, float, type(None)) else repr(memory),
    }


@probe
def engine_attention(
    mod,
    mode: str,
    sizes: list | None = None,
    tokens: list | None = None,
    positions: list | None = None,
    slots: list | None = None,
):
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
    return {
        "captured_any": any(captured),
        "eager_in_step": sum(1 for c in calls if not c),
        "replayed": _stats_kinds(engine),
    }


@probe
def engine_compiles(mod, mode: str, sizes: list, prompts: list, new_tokens):
    """``DecodeEngine(mode, sizes, compiler=stand-in)``: for each capture, in order, whether it
    captured a function the compiler returned ("compiled") or another ("as written"); how many
    compilations ``generate`` made after ``capture_model()``; the tokens ``generate`` returned."""
    recorder, compiler = RecordingCapture(), RecordingCompiler()
    _, engine = _engine(mod, mode, sizes, capture=recorder, compiler=compiler)
    captured = compiler.captured(recorder)
    before = len(compiler.made)
    tokens = call(engine.generate, [list(p) for p in prompts], new_tokens)
    return {"captures": captured, "compiled_by_steps": len(compiler.made) - before, "tokens": tokens}


@probe
def engine_mode(mod, mode: str):
    """The mode an engine asked for ``mode`` runs (``engine.mode``), by name."""
    _, engine = _engine(mod, mode, [4], capture_now=False)
    got = _attr(engine, "mode")
    return getattr(got, "name", repr(got))


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
            kinds.append(
                [
                    getattr(key[0], "name", str(key[0])),
                    getattr(key[1], "num_tokens", None),
                    bool(getattr(key[1], "uniform", None)),
                    count,
                ]
            )
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
    """Each step generate makes: its rows' slots and positions, and the uniform_decode flag it
    passes ("not passed" when it leaves the engine to work it out)."""
    _, engine = _engine(mod, "FULL", [1, 2, 4, 8, 16])
    steps, step = [], engine.step

    def spy(tokens, positions, slots, *args, **kwargs):
        flag = args[0] if args else kwargs.get("uniform_decode", "not passed")
        steps.append(
            {
                "slots": [int(v) for v in slots.tolist()],
                "positions": [int(v) for v in positions.tolist()],
                "uniform_decode": flag,
            }
        )
        return step(tokens, positions, slots, *args, **kwargs)

    engine.step = spy
    call(engine.generate, [list(p) for p in prompts], new_tokens)
    return steps


@probe
def engine_largest(mod, kind: str, token: int = 1):
    """The largest good requests to a FULL engine with one bucket of 2 (the given argument checks'
    accepted side): ``step-largest`` (the last token, slot and position) and ``step-300-rows``
    (past the bucket: eager; its last three rows) answer logits, ``generate-largest`` (max_seqs
    prompts, one of them filling the cache exactly) its tokens."""
    _, engine = _engine(mod, "FULL", [2])
    if kind == "step-largest":
        return call(engine.step, *_rows("cpu", [token, 511], [63, 63], [7, 0])).cpu()
    if kind == "step-300-rows":
        # Each row its own (slot, position): rows sharing a cache cell would race for it, and the
        # logits would depend on which write lands last, which no rule fixes.
        rows = torch.arange(300)
        return call(engine.step, (rows * 7 + token) % 512, rows % 64, rows // 64).cpu()[-3:]
    if kind == "generate-largest":
        return call(engine.generate, [[token] * 55] + [[token]] * 7, [10, 1, 1, 1, 1, 1, 1, 2])
    raise ValueError(f"kind: expected step-largest, step-300-rows or generate-largest, got {kind!r}")


# ------------------------------------------------------------------------- checks


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


def _logits_close(probe: Probe, got: Answer, expected: Answer) -> str | None:
    """The reference's logits within the stub's tolerance for the probe's model dtype (and in
    that dtype: ``same`` compares dtypes and shapes first)."""
    atol = TOLERANCE[probe.args.get("dtype", "float32")]
    return same(rtol=0, atol=atol)(probe, got, expected)


_logits_close.needs_reference = True


def checks(draw: Draw) -> list[Check]:
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
    attention_rows = dict(tokens=[r.randint(0, 511) for _ in range(n)], positions=[0] * n, slots=r.sample(range(8), n))
    prompt_n = r.randint(2, 4)  # one sequence's prompt tokens: a mixed batch, never in a full graph
    prompt_rows = dict(
        tokens=[r.randint(0, 511) for _ in range(prompt_n)],
        positions=list(range(prompt_n)),
        slots=[r.randint(0, 7)] * prompt_n,
    )
    shrink_prompts, shrink_new = requests(draw.rng("ex8.generate_shrinks_the_batch"))
    # A prompt step of at most max_seqs (8) tokens, some sequences with several: padded, it still
    # fits a decode graph (<= max_seqs requests), so only the uniform flag keeps it off one.
    r = draw.rng("ex8.generate_shrinks_the_batch.short")
    short_prompts = [[r.randint(0, 511) for _ in range(k)] for k in (2, 1, r.randint(2, 4))]
    short_new = [r.randint(2, 4) for _ in short_prompts]
    # The given argument checks' accepted side, run for its answers: the largest token, slot and
    # position, a step far past the buckets, max_seqs prompts with one filling the cache exactly.
    token = draw.rng("ex8.step_logits.largest").randint(0, 511)
    r = draw.rng("ex8.step_logits.before_capture")
    early = [
        [[r.randint(0, 511) for _ in range(n)], [r.randint(0, 20) for _ in range(n)], r.sample(range(8), n)]
        for n in (r.randint(1, 4), r.randint(5, 8))
    ]
    r = draw.rng("ex8.padding_uses_the_padding_slot.rows")
    refill = [[[r.randint(1, 511) for _ in range(4)], [r.randint(1, 60) for _ in range(4)], [4, 5, 6, 7]]]
    refill += [
        [[r.randint(1, 511) for _ in range(n)], [r.randint(1, 60) for _ in range(n)], r.sample(range(8), n)]
        for n in (r.randint(1, 3), r.randint(1, 3))
    ]
    r = draw.rng("ex8.generate_shrinks_the_batch.flags")
    # prompts of one token each (a uniform prompt step) and of two each (not uniform), 2 or 3 of them
    one_token_prompts = [
        [[r.randint(0, 511)] for _ in range(r.randint(2, 3))],
        [[r.randint(0, 511), r.randint(0, 511)] for _ in range(r.randint(2, 3))],
    ]
    # Always distinct slots in descending order (uniform: every slot distinct), which a rule
    # such as "the slots ascend" gets wrong; drawn in any order they may happen to ascend.
    flag_slots = [sorted(r.sample(range(8), r.randint(2, 4)), reverse=True), r.sample(range(8), r.randint(1, 4))]
    a, b = r.randint(0, 3), r.randint(4, 7)  # two slots; a repeated one is a prompt chunk
    flag_slots += [[a, a, b], [a, b, b], [b, a, b], [a] * r.randint(2, 4)]
    r2 = draw.rng("ex8.gpu_engine")
    gpu_prompts, gpu_new = requests(r2)
    gpu_steps = step_batches(r2)
    r = draw.rng("ex8.generate_every_mode.more")
    bf16_prompts, bf16_new = requests(r)
    bf16_seed = r.randint(0, 2**16)
    every_count = r.randint(2, 5)  # one int max_new_tokens for every sequence
    r = draw.rng("ex8.padding_uses_the_padding_slot.buffers")
    buffer_sizes = r.sample([1, 2, 3, 4, 6, 8, 12], 3)  # in any order: the buffers take the largest
    default_seqs = r.randint(2, 7)  # a second max_seqs for the defaults (8 is the first)
    r = draw.rng("ex8.compile_then_capture")
    compile_sizes = sorted(r.sample([1, 2, 3, 4, 6, 8], 2))
    compile_prompts, compile_new = requests(r, count=3)
    return [
        Check(
            "ex8",
            "generate_every_mode",
            "every mode yields the tokens of eager decoding, for a float32 and a bfloat16 model: "
            "the prompt step, then one token per unfinished sequence, greedy; max_new_tokens is "
            "an int or one count per sequence; the tokens come back as a list of lists of ints; "
            "max_seqs prompts, one of them filling the cache exactly, run right too",
            [
                P(
                    "engine_generate",
                    f"DecodeEngine({m}, {sizes}).generate({prompts}, {new_tokens})",
                    mode=m,
                    sizes=sizes,
                    prompts=prompts,
                    new_tokens=new_tokens,
                    seed=seed,
                )
                for m in MODES
            ]
            + [
                P(
                    "engine_generate",
                    f"DecodeEngine({m}, {sizes}) on a bfloat16 model: generate({bf16_prompts}, {bf16_new})",
                    mode=m,
                    sizes=sizes,
                    prompts=bf16_prompts,
                    new_tokens=bf16_new,
                    seed=bf16_seed,
                    dtype="bfloat16",
                )
                for m in MODES
            ]
            + [
                P(
                    "engine_generate",
                    f"DecodeEngine(FULL_AND_PIECEWISE, {sizes}).generate({prompts}, {every_count})",
                    mode="FULL_AND_PIECEWISE",
                    sizes=sizes,
                    prompts=prompts,
                    new_tokens=every_count,
                    seed=seed,
                )
            ]
            + [
                P(
                    "engine_largest",
                    f"DecodeEngine(FULL, [2]).generate(max_seqs prompts: [[{token}] * 55] + "
                    f"[[{token}]] * 7, [10, 1, 1, 1, 1, 1, 1, 2]) (one sequence fills the cache exactly)",
                    kind="generate-largest",
                    token=token,
                )
            ],
            points=3,
        ),
        Check(
            "ex8",
            "step_logits",
            "step returns one row of logits per token, in the model's dtype, within 1e-5 of the "
            "eager model in float32 and 5e-2 in bfloat16, for every "
            "batch up to one row past the largest capture size (which runs eagerly); before "
            "capture_model() nothing is captured, so every step runs eagerly; the last token, "
            "slot and position and a step of hundreds of rows (eager) run right too",
            [
                P(
                    "engine_steps",
                    f"DecodeEngine({m}, [1, 2, 4, 8]): steps of 1..9 rows",
                    mode=m,
                    sizes=[1, 2, 4, 8],
                    steps=steps,
                )
                for m in MODES
            ]
            + [
                P(
                    "engine_steps",
                    f"DecodeEngine({m}, [1, 2, 4, 8]) on a bfloat16 model: steps of 1..9 rows",
                    mode=m,
                    sizes=[1, 2, 4, 8],
                    steps=steps,
                    dtype="bfloat16",
                )
                for m in MODES
            ]
            + [
                P(
                    "engine_steps",
                    f"DecodeEngine({m}, [1, 2, 4, 8]): steps before capture_model()",
                    mode=m,
                    sizes=[1, 2, 4, 8],
                    steps=early,
                    capture_now=False,
                )
                for m in ("FULL", "PIECEWISE")
            ]
            + [
                P(
                    "engine_largest",
                    f"DecodeEngine(FULL, [2]).step(tokens [{token}, 511], positions [63, 63], "
                    "slots [7, 0]): the last token, position and slot",
                    kind="step-largest",
                    token=token,
                ),
                P(
                    "engine_largest",
                    "DecodeEngine(FULL, [2]).step of 300 rows (eager, past the bucket): its last three rows",
                    kind="step-300-rows",
                    token=token,
                ),
            ],
            compare=_logits_close,
            points=2,
        ),
        Check(
            "ex8",
            "padding_uses_the_padding_slot",
            "rows that only pad a batch are reset before every replay to token 0, position 0 and "
            "model.padding_slot, so they read and write only the padding slot, never a real "
            "sequence's cache; a new engine's static buffers are as stated (tokens, positions, "
            "slots 1-D int64; hidden, attn in the model's dtype; max(capture_sizes) rows; slots "
            "filled with model.padding_slot, the rest zeros) and capture_model() leaves the real "
            "slots' cache unchanged",
            [
                P(
                    "engine_padding",
                    f"a 3-row step padded to 4 ({m})",
                    mode=m,
                    sizes=[4],
                    tokens=pad_tokens,
                    positions=pad_positions,
                    slots=pad_slots,
                )
                for m in ("FULL", "PIECEWISE")
            ]
            + [
                P(
                    "engine_padding_rows",
                    f"padding rows of the static buffers after steps of "
                    f"{[len(t) for t, _, _ in refill]} rows padded to 4 ({m})",
                    mode=m,
                    sizes=[4],
                    steps=refill,
                )
                for m in ("FULL", "PIECEWISE")
            ]
            + [
                P(
                    "engine_buffers",
                    f"the static buffers of a new DecodeEngine({m}, {s}) on a {d} model",
                    mode=m,
                    sizes=s,
                    dtype=d,
                )
                for m, s, d in (
                    ("PIECEWISE", buffer_sizes, "float32"),
                    ("PIECEWISE", buffer_sizes, "bfloat16"),
                    ("FULL_AND_PIECEWISE", None, "bfloat16"),
                    ("FULL", buffer_sizes, "float32"),
                )
            ],
            points=2,
        ),
        Check(
            "ex8",
            "capture_largest_first_in_one_pool",
            "capture_model captures capture_descs() in order (largest first), PIECEWISE one graph "
            "per segment, all in the first graph's pool, with the engine's warmup_iters; the "
            "defaults are mode=CUDAGraphMode.FULL, capture_sizes=None and warmup_iters=1; graphs "
            "holds what capture returned under each (mode, desc) key (PIECEWISE: the list of "
            "segment graphs); capture_seconds is a float above 0, at most capture_model()'s wall "
            "time, and capture_memory_bytes the int 0 on a CPU",
            [
                P(
                    "engine_captures",
                    f"DecodeEngine({m}, {capture_sizes}, warmup_iters={w}).capture_model()",
                    mode=m,
                    sizes=capture_sizes,
                    warmup_iters=w,
                )
                for m, w in capture_warmups.items()
            ]
            + [
                P(
                    "engine_defaults",
                    f"DecodeEngine(model of max_seqs={k}, capture=recorder), every "
                    "other argument left to its default: capture_model()",
                    max_seqs=k,
                )
                for k in (8, default_seqs)
            ],
            points=2,
        ),
        Check(
            "ex8",
            "piecewise_attention_is_eager",
            "PIECEWISE captures the segments between attention calls and runs attention eagerly; "
            "FULL captures the whole forward pass of a uniform decode batch; the model's attention "
            "holds only such batches in a full graph, so FULL runs as FULL_AND_PIECEWISE (engine.mode): "
            "a prompt step replays the PIECEWISE graphs, and with full graphs alone "
            "(FULL_DECODE_ONLY) it runs eagerly; every other mode runs as given",
            [
                P("engine_attention", f"where attention runs ({m}), a {n}-row step", mode=m, **attention_rows)
                for m in ("PIECEWISE", "FULL")
            ]
            + [P("engine_mode", f"DecodeEngine(mode={m}).mode", mode=m) for m in MODES]
            + [
                P(
                    "engine_attention",
                    f"where attention runs ({m}), a {len(prompt_rows['tokens'])}-token prompt step",
                    mode=m,
                    **prompt_rows,
                )
                for m in ("FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
            ],
            points=2,
        ),
        Check(
            "ex8",
            "generate_shrinks_the_batch",
            "the first step feeds every prompt token (a mixed batch), later steps only the "
            "unfinished sequences (uniform decode); stats count each (mode, descriptor) replayed; "
            "step(uniform_decode=None) is uniform exactly when every slot is distinct; "
            "sequence i in slot i, generate passing the flag",
            [
                P(
                    "engine_batches",
                    f"the steps of generate({shrink_prompts}, {shrink_new}): rows, "
                    "slots, positions and the uniform_decode flag passed",
                    prompts=shrink_prompts,
                    new_tokens=shrink_new,
                )
            ]
            + [
                P("engine_stats", f"stats after generate in {m}", mode=m, prompts=shrink_prompts, new_tokens=shrink_new)
                for m in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY")
            ]
            + [
                P(
                    "engine_stats",
                    f"stats after generate({short_prompts}, {short_new}) in {m}",
                    mode=m,
                    prompts=short_prompts,
                    new_tokens=short_new,
                )
                for m in ("FULL_AND_PIECEWISE", "FULL_DECODE_ONLY")
            ]
            + [
                P(
                    "engine_stats",
                    f"stats after generate({p}, 1) in FULL_DECODE_ONLY (the prompt step is "
                    "uniform exactly when every prompt is one token)",
                    mode="FULL_DECODE_ONLY",
                    prompts=p,
                    new_tokens=1,
                )
                for p in one_token_prompts
            ]
            + [
                P(
                    "engine_uniform_flags",
                    f"what steps with slots {flag_slots} replay in FULL_AND_PIECEWISE without uniform_decode",
                    slot_lists=flag_slots,
                )
            ],
            points=1,
        ),
        Check(
            "ex8",
            "compile_then_capture",
            "with a compiler, every function capture_model() captures (the FULL forward, each "
            "PIECEWISE segment) is one the compiler returned; the compiler is never called by "
            "step; generate still yields eager decoding's tokens",
            [
                P(
                    "engine_compiles",
                    f"DecodeEngine({m}, {compile_sizes}, compiler=stand-in): what was "
                    f"captured, then generate({compile_prompts}, {compile_new})",
                    mode=m,
                    sizes=compile_sizes,
                    prompts=compile_prompts,
                    new_tokens=compile_new,
                )
                for m in ("FULL", "PIECEWISE", "FULL_DECODE_ONLY")
            ],
            points=1,
        ),
        Check(
            "ex8",
            "gpu_engine",
            "on real CUDA graphs: every mode yields eager decoding's tokens and logits within 1e-5",
            [
                P(
                    "engine_generate",
                    f"generate on CUDA ({m})",
                    mode=m,
                    sizes=sizes,
                    prompts=gpu_prompts,
                    new_tokens=gpu_new,
                    device="cuda",
                )
                for m in MODES
            ]
            + [
                P("engine_steps", f"steps on CUDA ({m})", mode=m, sizes=[1, 2, 4, 8], steps=gpu_steps, device="cuda")
                for m in ("FULL", "PIECEWISE")
            ],
            compare=same(rtol=0, atol=1e-5),
            gpu=True,
            points=3,
        ),
    ]
