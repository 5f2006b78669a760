"""Exercise 8 (engine): the probes a worker runs on the submission's ``engine`` (registered in
``grader.probes.PROBES`` when this module is imported: ``grader/exercises/engine.py``, which
declares the checks, imports it). Apart from the checks only because there are many of both."""

from __future__ import annotations

import time

import torch

from coursekit.standin import RecordingCapture, RecordingCompiler
from grader.probes import _attr, _sibling, call, probe


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
