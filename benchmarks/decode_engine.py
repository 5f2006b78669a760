"""The decode engine (exercise 8) against the lesson's launch model, on a GPU. A benchmark, not a test.

    python benchmarks/decode_engine.py                        # toy model, and Qwen2.5-7B shapes if they fit
    python benchmarks/decode_engine.py --configs toy          # one configuration: toy, qwen7b (or all)
    python benchmarks/decode_engine.py --impl exercises       # with your own exercises
    python benchmarks/decode_engine.py --no-compile           # without the compiled rows (minutes less)
    python benchmarks/decode_engine.py --batches 1            # batch sizes, in the order measured (1,8)
    python benchmarks/decode_engine.py --device cpu --quick   # smoke run of the code path (stand-in graphs)

Per configuration (the toy model in fp32; Qwen2.5-7B's shapes in bf16 with 28 layers, random
weights and a 1024-token KV cache, where the GPU has the memory) and batch size (1 and 8), each
step with the time, tokens/s, kernels per step (profiler: the kernels the graph holds) and the
step over the memory floor:

* ``eager``: the model as written, no graph;
* ``piecewise``, ``full``: the engine's graphs (exercise 8), and ``bare_replay``: the full graph's
  ``replay()`` alone, what the engine's step costs on top;
* ``full_fused``: full graphs of the model with exercise 7's fused add + RMSNorm;
* ``compiled``: compile, then capture, as vLLM does: the engine's FULL graph of the forward
  passed through ``torch.compile`` first (``DecodeEngine(compiler=compile_piece)``), with its
  own bare replay; the compile + capture time is printed for each batch size;
* ``peer``: the same step written as one plain function over the model's weights, compiled and
  captured in one CUDA graph without the engine (what the engine's compiled row should match).

A layer-count sweep fits the per-kernel cost of eager steps (tau) and of graph replays
(gpu_node_us) with exercise 1's ``fit_launch_model``; the extended launch model predicts the full
model's eager and graph step times with them, and again with the tau of the step's own launches
(the profiler's host timeline: the time between its first and last kernel launch over the
launches); where the prediction misses by more than 15% it prints which assumption the
measurements contradict. The memory floor is the bytes a step must read (weights, KV cache) over
a measured device-to-device copy bandwidth. Targets are ratios, so they hold on any host: the
compiled full graph within 1.4x the floor on the 7B shapes, within 1.05x the one-function peer,
the engine's step within 1.05x its bare replay, the launch model's eager prediction within 15%;
eager times are printed, never a target. Writes ``lab-output/decode-engine.json`` after every
row, sweep point and configuration (``"complete": false`` until the end, so a run cut off, by
SIGINT at a deadline or a crash, keeps every figure it took) and ``lab-output/decode-engine.svg``.

The Qwen2.5-7B-shaped configuration runs only where the GPU has the free memory for it
(``torch.cuda.mem_get_info()``: one bf16 model, 15.2 GB, its KV cache and 2 GiB of headroom;
about 17.9 GB, so a 24 GB RTX 4090 fits); otherwise it is skipped with a one-line reason. Where
``torch.compile`` cannot build kernels (on a GPU: no C compiler, no ``Python.h``, no
``libcuda.so.1``, no ``triton``; on a CPU: no C++ compiler: ``coursekit.compiled.compile_problem``),
the rows that need it (full + fused, compiled, peer) are skipped with a one-line reason, and so is
any of them that fails.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from functools import partial
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coursekit.compiled import compile_piece, compile_problem
from coursekit.impl import Implementation
from coursekit.standin import RecordingCapture, capture_on_cpu
from coursekit.svgplot import line_chart
from coursekit.toymodel import ModelConfig, ToyModel

POSITION = 100  # each sequence decodes its token 101, or its last (attention reads the whole row anyway)
HEADROOM_BYTES = 2 << 30  # beyond the model and its cache: graph pools, activations, cuBLAS, compile
CONFIGS = ("toy", "qwen7b")
#: The rows of the table, in order; each is timed as ``<row>_ms``.
ROWS = ("eager", "piecewise", "full", "full_fused", "compiled", "peer")
#: What each target compares, and the ratio it must stay under (batch 1 and 8; set for the 7B shapes).
TARGETS = (
    ("compiled + full graph vs the memory floor", "compiled_ms", "floor_ms", 1.4),
    ("compiled + full graph vs the one-function peer", "compiled_ms", "peer_ms", 1.05),
    ("engine step vs bare replay (compiled)", "compiled_ms", "compiled_bare_replay_ms", 1.05),
)
LAUNCH_MODEL_ERROR = 0.15  # the eager prediction's allowed relative error
#: Host-side calls that launch one kernel each (CUDA runtime, driver API: Triton uses the latter).
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def timer(impl: Implementation, iters: int):
    """Exercise 2's ``time_ms`` (CUDA events on a GPU, a monotonic clock on a CPU)."""
    time_ms = impl.module("launch_tax").time_ms
    return lambda fn: time_ms(fn, iters=iters, warmup=max(2, iters // 10))


def on_cuda(device: str) -> bool:
    """``cuda``, ``cuda:0``, ``cuda:1``...: a GPU however it was named."""
    return torch.device(device).type == "cuda"


def device_name(text: str) -> str:
    """``--device``: a torch device (``cpu``, ``cuda``, ``cuda:1``), refused in one line otherwise."""
    try:
        return str(torch.device(text))
    except (RuntimeError, TypeError):
        raise argparse.ArgumentTypeError(f"expected a torch device such as cpu, cuda or cuda:1, got {text!r}") from None


def batch(model: ToyModel, rows: int):
    d = model.device
    return (
        torch.arange(rows, device=d) % model.config.vocab_size,
        torch.full((rows,), min(POSITION, model.config.max_seq_len - 1), device=d),
        torch.arange(rows, device=d),
    )


def copy_bandwidth_bps(impl: Implementation, device: str) -> float | None:
    """Device-to-device copy: bytes read plus written per second."""
    if not on_cuda(device):
        return None
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = timer(impl, 20)(partial(dst.copy_, src))
    del src, dst
    torch.cuda.empty_cache()  # give the 2 GiB back before the models are built
    return 2 * (1 << 30) / (ms / 1e3)


def model_bytes(config: ModelConfig, dtype) -> int:
    """A model's weights and KV cache, as ``ToyModel`` allocates them."""
    c = config
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    per_layer = (
        2 * c.hidden_size
        + (c.hidden_size + 1) * (q + 2 * kv)
        + q * c.hidden_size
        + 3 * c.hidden_size * c.intermediate_size
    )
    embeddings = c.vocab_size * c.hidden_size * (1 if c.tie_embeddings else 2)
    weights = c.n_layers * per_layer + c.hidden_size + embeddings
    cache = 2 * c.n_layers * (c.max_seqs + 1) * c.max_seq_len * kv
    return (weights + cache) * dtype.itemsize


def memory_problem(name: str, config: ModelConfig, dtype, device: str) -> str | None:
    """Why ``name`` cannot run here (one line), or None when the GPU's free memory holds it."""
    need = model_bytes(config, dtype) + HEADROOM_BYTES
    if not on_cuda(device):
        return f"{name}: skipped (needs a CUDA device with {need / 1e9:.1f} GB free)"
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    if free < need:
        return (
            f"{name}: skipped (needs {need / 1e9:.1f} GB of free GPU memory: the model "
            f"{model_bytes(config, dtype) / 1e9:.1f} GB with its KV cache, and "
            f"{HEADROOM_BYTES / 2**30:.0f} GiB headroom; {free / 1e9:.1f} GB free of "
            f"{total / 1e9:.1f} GB on {torch.cuda.get_device_name()})"
        )
    return None


def bytes_per_step(config: ModelConfig, dtype, rows: int) -> int:
    """What a step must read at least: every weight but the embedding (only ``rows`` of it are
    gathered), and each row's slot of the KV cache in every layer."""
    c = config
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    per_layer = (
        2 * c.hidden_size
        + (c.hidden_size + 1) * (q + 2 * kv)
        + q * c.hidden_size
        + 3 * c.hidden_size * c.intermediate_size
    )
    weights = c.n_layers * per_layer + c.hidden_size + c.hidden_size * c.vocab_size + rows * c.hidden_size
    cache = 2 * c.n_layers * rows * c.max_seq_len * kv
    return (weights + cache) * dtype.itemsize


def decode_step(model: ToyModel):
    """An eager uniform decode step of ``model``: ``forward`` with the decode kernel
    (``max_query_len=1``), as a FULL graph holds it, so eager and graph run the same kernels."""
    return lambda tokens, positions, slots: model.forward(tokens, positions, slots, max_query_len=1)


def measure(
    impl: Implementation,
    config: ModelConfig,
    dtype,
    device: str,
    rows_list,
    iters: int,
    with_compile: bool,
    with_fused: bool = True,
    out: dict | None = None,
    save=lambda: None,
) -> dict:
    """Per batch size, the rows of ``ROWS`` (see the module docstring) with their kernels per step
    and bare replays; the rows that need more than the engine (exercise 7's fusion, the compiler)
    are skipped with a one-line reason if they fail. ``out``: the dict to fill (``{rows: {}}``),
    ``save()`` called after every row, so that a run cut off keeps every figure it took."""
    engine_mod, fusion = impl.module("engine"), impl.module("fusion")
    modes = engine_mod.CUDAGraphMode
    time_ms = timer(impl, iters)
    count = fusion.count_kernels if on_cuda(device) else (lambda fn, *a: None)
    out = {rows: {} for rows in rows_list} if out is None else out

    def engine_row(model, row, args, rows, mode, name, compiler=None):
        """An engine of ``mode`` capturing this batch size alone, timed; for a full graph also its
        bare replay and the kernels the graph holds (its captured function, run as it is)."""
        recorder = RecordingCapture(capture_for(impl, device))
        kwargs = {"compiler": compiler} if compiler is not None else {}
        engine = engine_mod.DecodeEngine(model, mode=mode, capture_sizes=[rows], capture=recorder, **kwargs)
        engine.capture_model()
        row[f"{name}_ms"] = time_ms(partial(engine.step, *args, uniform_decode=True))
        row[f"{name}_capture_s"] = engine.capture_seconds
        row[f"{name}_capture_bytes"] = engine.capture_memory_bytes
        if mode is modes.FULL_DECODE_ONLY:
            graph = next(g for (m, d), g in engine.graphs.items() if m is modes.FULL and d.num_tokens == rows)
            engine.step(*args, uniform_decode=True)  # the static buffers hold this batch
            row[f"{name}_bare_replay_ms"] = time_ms(graph.replay)
            held = next(c for c in recorder.calls if c["graph"] is graph)
            row[f"{name}_kernels"] = count(held["fn"], *held["inputs"])
        del engine, recorder
        free(device)
        save()

    def peer_row(model, row, args):
        """The one-function peer's figures (``peer``) for this batch, in its row."""
        row.update(peer(model, args, device, time_ms, count))
        save()

    model = ToyModel(config, device=device, dtype=dtype)
    decode = decode_step(model)
    for rows in rows_list:
        args, row = batch(model, rows), out[rows]
        row["eager_ms"] = time_ms(partial(decode, *args))
        row["eager_kernels"] = count(decode, *args)
        row["launch_pace_us"] = launch_pace_us(profile_launches(decode, *args)) if on_cuda(device) else None
        save()
        engine_row(model, row, args, rows, modes.PIECEWISE, "piecewise")
        # FULL_DECODE_ONLY: full graphs alone (FULL would capture piecewise ones for mixed
        # batches too, and count their time and memory); these batches are uniform decode.
        engine_row(model, row, args, rows, modes.FULL_DECODE_ONLY, "full")
        row["bare_replay_ms"] = row.pop("full_bare_replay_ms")
        if with_compile:
            optional(
                f"compiled + full graph (batch {rows})",
                partial(engine_row, model, row, args, rows, modes.FULL_DECODE_ONLY, "compiled", compiler=compile_piece),
            )
            optional(f"one-function peer (batch {rows})", partial(peer_row, model, row, args))
            torch._dynamo.reset()  # the compiled code holds the model: free both before the next one
            free(device)
    del model, args, decode  # decode holds the model too: the fused rows build a second one
    free(device)
    if with_fused:

        def fused_rows():
            model = ToyModel(config, device=device, dtype=dtype, add_rms_norm=fusion.fused_add_rms_norm)
            for rows in rows_list:
                engine_row(model, out[rows], batch(model, rows), rows, modes.FULL_DECODE_ONLY, "full_fused")
                out[rows].pop("full_fused_bare_replay_ms", None)

        optional("full + fused add-RMSNorm", fused_rows)
        free(device)
    return out


def capture_for(impl: Implementation, device: str):
    """What the engine captures with by default: exercise 3's ``capture`` on CUDA, the stand-in
    on a CPU."""
    return impl.module("capture").capture if on_cuda(device) else capture_on_cpu


def one_function_step(model: ToyModel):
    """The model's uniform decode step written as one plain function over its weights (the way
    gpt-fast writes a model): embedding, then per layer RMSNorm, QKV with bias, RoPE, the KV cache
    written at ``[slot, position]``, attention over the slot's cache, the output projection and
    residual, RMSNorm, SwiGLU MLP and residual; final RMSNorm and the LM head. No engine, no
    segments, no static buffers of its own."""
    c = model.config
    q_size, kv_size, group = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim, c.n_heads // c.n_kv_heads

    def norm(x, weight):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + c.rms_eps)).to(x.dtype) * weight

    def rope(x, cos, sin):
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)

    def step(tokens, positions, slots):
        rows = len(tokens)
        cos, sin = model.rope_cos[positions][:, None, :], model.rope_sin[positions][:, None, :]
        later = torch.arange(c.max_seq_len, device=tokens.device)[None, :] > positions[:, None]
        hidden = model.embedding[tokens]
        for layer, w in enumerate(model.layers):
            qkv = norm(hidden, w["input_norm"]) @ w["qkv"] + w["qkv_bias"]
            q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
            q = rope(q.reshape(rows, c.n_heads, c.head_dim), cos, sin)
            model.k_cache[layer, slots, positions] = rope(k.reshape(rows, c.n_kv_heads, c.head_dim), cos, sin)
            model.v_cache[layer, slots, positions] = v.reshape(rows, c.n_kv_heads, c.head_dim)
            keys, values = model.k_cache[layer, slots], model.v_cache[layer, slots]
            scores = torch.einsum(
                "bkgd,blkd->bkgl", q.reshape(rows, c.n_kv_heads, group, c.head_dim), keys
            ).float() / math.sqrt(c.head_dim)
            probs = scores.masked_fill(later[:, None, None, :], float("-inf")).softmax(dim=-1)
            attn = torch.einsum("bkgl,blkd->bkgd", probs.to(hidden.dtype), values).reshape(rows, q_size)
            hidden = hidden + attn @ w["o_proj"]
            gate, up = (norm(hidden, w["post_norm"]) @ w["gate_up"]).chunk(2, dim=-1)
            hidden = hidden + (torch.nn.functional.silu(gate) * up) @ w["down"]
        return norm(hidden, model.final_norm) @ model.lm_head

    return step


def peer(model: ToyModel, args: tuple, device: str, time_ms, count) -> dict:
    """``one_function_step`` compiled (``compile_piece``) and captured in one graph (CUDA's own
    ``torch.cuda.graph`` on a GPU, the stand-in on a CPU): its time, kernels, compile + capture
    time, and how far its logits are from the model's eager ones (relative to their largest)."""
    step = one_function_step(model)
    expected = decode_step(model)(*args)
    static = tuple(a.clone() for a in args)
    compiled = compile_piece(step)
    start = time.perf_counter()
    if on_cuda(device):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):  # the first call compiles
                compiled(*static)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):  # capture on the stream that warmed up
            logits = compiled(*static)
        torch.cuda.synchronize()
        replay = graph.replay
    else:
        captured = capture_on_cpu(compiled, *static, warmup_iters=3)
        logits, replay = captured.static_outputs, captured.replay
    seconds = time.perf_counter() - start
    replay()
    error = ((logits.float() - expected.float()).abs().max() / expected.float().abs().max()).item()
    return {
        "peer_ms": time_ms(replay),
        "peer_capture_s": seconds,
        "peer_kernels": count(compiled, *static),
        "peer_error": error,
    }


def profile_launches(fn, *fn_args) -> list[tuple[str, float]]:
    """One call of ``fn`` after a warm one, profiled on the host: ``(name, start in us)`` of every
    CPU-side event, in order. (The profiler stays on this thread: it must end where it began.)"""
    from torch.profiler import ProfilerActivity, profile

    fn(*fn_args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn(*fn_args)
        torch.cuda.synchronize()
    return sorted(
        ((e.name, e.time_range.start) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU),
        key=lambda e: e[1],
    )


def launch_pace_us(events: list[tuple[str, float]]) -> float | None:
    """The host's time per kernel launch in one step: from its first launch call to its last
    (``LAUNCH_CALLS``), over the launches between them. This is tau measured on the step itself:
    what issuing one kernel costs the host, Python and the framework included. None with fewer
    than two launches."""
    starts = sorted(t for name, t in events if name in LAUNCH_CALLS)
    if len(starts) < 2:
        return None
    return (starts[-1] - starts[0]) / (len(starts) - 1)


def optional(what: str, run) -> None:
    """Run a row that needs more than the engine (torch.compile, exercise 9); one line if it fails."""
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - the other rows still mean something
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        print(f"{what}: skipped ({type(exc).__name__}: {first})")
    finally:
        gc.collect()


def free(device: str) -> None:
    gc.collect()
    if on_cuda(device):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def sweep(
    impl: Implementation,
    config: ModelConfig,
    dtype,
    device: str,
    layers: list[int],
    iters: int,
    points: list | None = None,
    save=lambda: None,
) -> dict:
    """Eager and full-graph step time at batch 1 over a layer count sweep, with kernel counts
    (``points`` filled as they are measured, ``save()`` after each)."""
    engine_mod, fusion = impl.module("engine"), impl.module("fusion")
    time_ms = timer(impl, iters)
    points = [] if points is None else points
    for n in layers:
        model = ToyModel(ModelConfig(**{**config.__dict__, "n_layers": n}), device=device, dtype=dtype)
        args = batch(model, 1)
        engine = engine_mod.DecodeEngine(model, mode=engine_mod.CUDAGraphMode.FULL_DECODE_ONLY, capture_sizes=[1])
        engine.capture_model()
        decode = decode_step(model)
        # Without CUDA there is no profiler count: a nominal one lets a smoke run exercise the fit.
        kernels = fusion.count_kernels(decode, *args) if on_cuda(device) else 20 * n + 10
        points.append(
            {
                "layers": n,
                "kernels": kernels,
                "eager_ms": time_ms(partial(decode, *args)),
                "graph_ms": time_ms(partial(engine.step, *args, uniform_decode=True)),
            }
        )
        del engine, model
        free(device)
        save()
    fit = impl.module("launch_model").fit_launch_model
    ks = [p["kernels"] for p in points]
    tau_us, eager_intercept_ms = fit(ks, [p["eager_ms"] for p in points])
    node_us, graph_intercept_ms = fit(ks, [p["graph_ms"] for p in points])
    return {
        "points": points,
        "tau_us": tau_us,
        "eager_intercept_ms": eager_intercept_ms,
        "gpu_node_us": node_us,
        "graph_intercept_ms": graph_intercept_ms,
    }


def graph_memory(impl: Implementation, config: ModelConfig, dtype, device: str, sizes: list[int]) -> dict:
    """Exercise 9's trade on the engine itself: ``capture_memory_bytes`` of an engine that
    captures one size alone, for each size, and of one engine that captures them all into one
    pool, set beside exercise 9's ``graph_memory_bytes`` (the largest, or the sum) and the tokens
    of this model's KV cache that memory would hold (``kv_bytes_per_token``,
    ``kv_tokens_forgone``). Without CUDA every figure is 0 (the stand-in reserves nothing)."""
    engine_mod, tradeoffs = impl.module("engine"), impl.module("tradeoffs")
    model = ToyModel(config, device=device, dtype=dtype)
    alone = {}
    for s in sizes:
        engine = engine_mod.DecodeEngine(model, mode=engine_mod.CUDAGraphMode.FULL_DECODE_ONLY, capture_sizes=[s])
        engine.capture_model()
        # The engine's figure can come out negative (memory another capture cached is released
        # during this one): it reserved nothing new, so it counts as 0 here.
        alone[s] = max(engine.capture_memory_bytes, 0)
        del engine
        free(device)
    together = engine_mod.DecodeEngine(model, mode=engine_mod.CUDAGraphMode.FULL_DECODE_ONLY, capture_sizes=sizes)
    together.capture_model()
    measured = max(together.capture_memory_bytes, 0)
    del together, model
    free(device)
    per_token = tradeoffs.kv_bytes_per_token(config.n_layers, config.n_kv_heads, config.head_dim, dtype.itemsize)
    shared = tradeoffs.graph_memory_bytes(alone.values())
    separate = tradeoffs.graph_memory_bytes(alone.values(), shared_pool=False)
    return {
        "sizes": sizes,
        "alone_bytes": alone,
        "one_pool_bytes": measured,
        "model_shared_bytes": shared,
        "model_separate_bytes": separate,
        "kv_bytes_per_token": per_token,
        "kv_tokens_forgone": tradeoffs.kv_tokens_forgone(measured, per_token),
    }


def print_graph_memory(memory: dict) -> None:
    mib = 2**20
    alone = ", ".join(f"{s}: {b / mib:.1f}" for s, b in memory["alone_bytes"].items())
    print(f"graph memory (MiB), one size per engine: {alone}")
    print(
        f"  all sizes in one pool: {memory['one_pool_bytes'] / mib:.1f} MiB measured; exercise 9's model: "
        f"{memory['model_shared_bytes'] / mib:.1f} shared (the largest), "
        f"{memory['model_separate_bytes'] / mib:.1f} separate (the sum)"
    )
    print(
        f"  KV cache: {memory['kv_bytes_per_token']} bytes per token; the one pool forgoes "
        f"{memory['kv_tokens_forgone']} tokens"
    )


def predict(impl: Implementation, fitted: dict, kernels: int, tau_us: float | None = None) -> dict:
    """Exercise 1's extended launch model for a step of ``kernels`` kernels, with the sweep's
    slopes and its graph intercept as the compute time (the per-layer memory traffic is in the
    slopes, so no floor is added). The graph slope is nu, what every kernel costs the GPU; the
    model charges nu to eager kernels too, so the eager slope is launch_us + nu and launch_us is
    the eager slope less nu. ``tau_us``: an eager per-kernel cost measured elsewhere (the step's
    own launches) in place of the sweep's eager slope."""
    nu = max(fitted["gpu_node_us"], 0.0)
    tau = fitted["tau_us"] if tau_us is None else tau_us
    step = impl.module("launch_model").DecodeStep(
        weight_gib=0.0,
        n_layers=1,
        kernels_per_layer=max(kernels - 10, 0),  # n_kernels = L*k + 10
        launch_us=max(tau - nu, 0.0),
        gpu_node_us=nu,
    )
    compute_ms = max(fitted["graph_intercept_ms"], 0.0)
    eager, graph = compute_ms + step.eager_ms(), compute_ms + step.graph_ms()
    return {"eager_ms": eager, "graph_ms": graph, "speedup": eager / graph, "tau_us": tau}


def launch_model_misses(fitted: dict, row: dict, predicted: dict) -> list[str]:
    """Why the eager prediction for ``row`` misses (one sentence per assumption the measurements
    contradict), or [] when it is within ``LAUNCH_MODEL_ERROR``. The launch model assumes every
    eager kernel costs the same tau whatever the model's size, and that the host's launches, not
    the GPU's work, set the eager step's pace."""
    error = predicted["eager_ms"] / row["eager_ms"] - 1
    if abs(error) <= LAUNCH_MODEL_ERROR:
        return []
    kernels, reasons = row["eager_kernels"], []
    per_kernel = {p["layers"]: p["eager_ms"] * 1e3 / p["kernels"] for p in fitted["points"] if p["kernels"]}
    per_kernel["full model"] = row["eager_ms"] * 1e3 / kernels
    low, high = min(per_kernel.values()), max(per_kernel.values())
    if high > (1 + LAUNCH_MODEL_ERROR) * low:
        shown = ", ".join(f"{k if isinstance(k, str) else f'{k} layers'} {v:.2f}" for k, v in per_kernel.items())
        reasons.append(
            f"tau is not one constant: eager us per kernel {shown}; the sweep's slope "
            f"({fitted['tau_us']:.2f} us) extrapolated to {kernels} kernels does not hold"
        )
    pace = row.get("launch_pace_us")
    if pace:
        host_ms = pace * kernels / 1e3
        if row["eager_ms"] > (1 + LAUNCH_MODEL_ERROR) * host_ms:
            reasons.append(
                f"the step is not launch-bound: the host issued its {kernels} launches at "
                f"{pace:.2f} us each ({host_ms:.2f} ms), the step took {row['eager_ms']:.2f} ms: "
                "the GPU set the pace for the rest"
            )
        elif host_ms > (1 + LAUNCH_MODEL_ERROR) * row["eager_ms"]:
            reasons.append(
                f"the profiled launches ({pace:.2f} us each) were slower than the timed "
                "step: the profiler's own overhead, not the step's"
            )
    if not reasons:
        reasons.append(
            f"the graph intercept ({fitted['graph_intercept_ms']:.3f} ms, the compute "
            "time) and nu fitted on the sweep do not carry over to the full model"
        )
    return reasons


def targets(results: dict) -> list[dict]:
    """Each of ``TARGETS`` at each batch size, and the launch model's eager error: ``value`` the
    measured ratio (None: a row it needs was not measured), ``met`` True, False or None."""
    out = []
    for rows, r in results.items():
        for name, top, bottom, limit in TARGETS:
            value = r[top] / r[bottom] if r.get(top) and r.get(bottom) else None
            out.append(
                {
                    "target": name,
                    "batch": rows,
                    "value": value,
                    "limit": limit,
                    "met": None if value is None else value <= limit,
                }
            )
        p = r.get("predicted")
        value = abs(p["eager_ms"] / r["eager_ms"] - 1) if p else None
        out.append(
            {
                "target": "launch model's eager prediction, relative error",
                "batch": rows,
                "value": value,
                "limit": LAUNCH_MODEL_ERROR,
                "met": None if value is None else value <= LAUNCH_MODEL_ERROR,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # The reference where there is one (the staff repository), else your own exercises.
    parser.add_argument(
        "--impl",
        default="solutions" if (ROOT / "solutions").is_dir() else "exercises",
        help="exercises, solutions or a folder",
    )
    parser.add_argument("--device", type=device_name, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--configs", default="all", help="comma-separated: toy, qwen7b; or all")
    parser.add_argument("--quick", action="store_true", help="few iterations, small sweeps")
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="leave out the compiled rows (compiled + full, the one-function peer): "
        "compiling takes seconds to minutes per batch size",
    )
    parser.add_argument(
        "--batches",
        type=batch_sizes,
        default=[1, 8],
        help="comma-separated batch sizes, in the order measured (default: 1,8)",
    )
    parser.add_argument("--out", default="lab-output")
    args = parser.parse_args()
    names = CONFIGS if args.configs == "all" else tuple(args.configs.split(","))
    for name in names:
        if name not in CONFIGS:
            parser.error(f"--configs: unknown configuration {name!r} (toy, qwen7b or all)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if on_cuda(args.device) and torch.device(args.device).index is not None:
        # A capture records the current device's streams (exercise 3): --device cuda:1 makes it current.
        torch.cuda.set_device(torch.device(args.device))
    impl = Implementation(args.impl)
    iters = 5 if args.quick else 50
    # torch.compile builds Triton kernels on CUDA, C++ on a CPU: without what they need, skip its rows.
    problem = compile_problem(args.device)
    if problem:
        print(f"compiled rows (full + fused, compiled, peer) skipped: {problem}")
    fused_problem = problem if on_cuda(args.device) else None  # exercise 7 compiles only on CUDA
    bandwidth = copy_bandwidth_bps(impl, args.device)
    report = {
        "device": torch.cuda.get_device_name() if on_cuda(args.device) else "cpu",
        "torch": torch.__version__,
        "impl": args.impl,
        "copy_bytes_per_s": bandwidth,
        "compile_problem": problem,
        "batches": args.batches,
        "complete": False,  # until the last configuration is done: a run cut off keeps what it took
        "configs": {},
    }
    save = partial(write_json, out / "decode-engine.json", report)
    for name in names:
        if name == "toy":
            config, dtype, layers = ModelConfig(), torch.float32, [1, 2, 4, 8]
        else:
            config, dtype, layers = ModelConfig.qwen2_5_7b(max_seq_len=1024), torch.bfloat16, [2, 4, 7, 14]
            skipped = memory_problem(name, config, dtype, args.device)
            if skipped:
                print(skipped)
                report["configs"][name] = {"skipped": skipped}
                save()
                continue
        if args.quick:
            layers = layers[:3]
        print(f"\n== {name}: {config.n_layers} layers, hidden {config.hidden_size}, {dtype} on {args.device}")
        stage = time.perf_counter()
        results = {rows: {} for rows in args.batches}
        entry = report["configs"][name] = {"batches": results, "sweep": {"points": []}}
        measure(
            impl,
            config,
            dtype,
            args.device,
            args.batches,
            iters,
            with_compile=not args.no_compile and not problem,
            with_fused=not fused_problem,
            out=results,
            save=save,
        )
        fitted = entry["sweep"] = sweep(
            impl, config, dtype, args.device, layers, iters, points=entry["sweep"]["points"], save=save
        )
        sizes = [s for s in (1, 2, 4, 8, 16, 32) if s <= config.max_seqs]
        optional(
            "graph memory", lambda: entry.update(graph_memory=graph_memory(impl, config, dtype, args.device, sizes))
        )
        for rows, r in results.items():
            floor = bytes_per_step(config, dtype, rows)
            r["floor_ms"] = floor / bandwidth * 1e3 if bandwidth else None
            r["piecewise_kernels"] = r.get("eager_kernels")  # the segments' graphs and eager attention
            if r.get("eager_kernels"):
                r["predicted_by_sweep"] = predict(impl, fitted, r["eager_kernels"])
                # tau from the step's own launches where the profiler saw them, else the sweep's
                r["predicted"] = predict(impl, fitted, r["eager_kernels"], r.get("launch_pace_us"))
                r["launch_model_misses"] = launch_model_misses(fitted, r, r["predicted"])
        entry["targets"] = targets(results)
        entry["seconds"] = time.perf_counter() - stage  # compiling included
        save()
        print_table(name, results, fitted, entry)
        if "graph_memory" in entry:
            print_graph_memory(entry["graph_memory"])
    report["complete"] = True
    save()
    plot(report, out / "decode-engine.svg")
    print(f"\nwrote {out / 'decode-engine.json'} and {out / 'decode-engine.svg'}")


def batch_sizes(text: str) -> list[int]:
    """``--batches``: ``"1,8"`` -> ``[1, 8]``, each a whole number >= 1, none twice."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected batch sizes such as 1,8, got {text!r}") from None
    if not sizes or min(sizes) < 1 or len(set(sizes)) != len(sizes):
        raise argparse.ArgumentTypeError(f"expected distinct batch sizes >= 1 such as 1,8, got {text!r}")
    return sizes


def write_json(path: Path, report: dict) -> None:
    """``report`` as JSON at ``path``, written beside it and renamed: a reader (or a run cut off
    in the middle of a write) never sees half a file."""
    partial_path = path.with_suffix(".json.partial")
    partial_path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    partial_path.replace(path)


def cell(value, fmt: str, width: int) -> str:
    return f"{value:>{width}{fmt}}" if isinstance(value, (int, float)) else f"{'-':>{width}}"


def print_table(name: str, results: dict, fitted: dict, entry: dict) -> None:
    print(
        f"{'batch':>5} {'row':<12} {'ms/step':>9} {'tokens/s':>10} {'kernels':>8} {'x floor':>8} "
        f"{'compile+capture s':>17}"
    )
    for rows, r in results.items():
        for row in ROWS:
            ms = r.get(f"{row}_ms")
            if ms is None:
                continue
            floor = r.get("floor_ms")
            print(
                f"{rows:>5} {row:<12} {ms:>9.3f} {rows / ms * 1e3:>10,.0f} {cell(r.get(f'{row}_kernels'), 'd', 8)} "
                f"{cell(ms / floor if floor else None, '.2f', 8)} {cell(r.get(f'{row}_capture_s'), '.2f', 17)}"
            )
        print(
            f"{rows:>5} {'bare replay':<12} {r['bare_replay_ms']:>9.3f}   (full)"
            + (f"; {r['compiled_bare_replay_ms']:.3f} (compiled)" if "compiled_bare_replay_ms" in r else "")
            + (f"; floor {r['floor_ms']:.3f} ms" if r.get("floor_ms") else "")
        )
        if "peer_error" in r:
            print(f"{'':>5} peer's logits vs the model's: relative error {r['peer_error']:.2g}")
    print(
        f"sweep over layers: tau = {fitted['tau_us']:.2f} us per eager kernel, gpu_node_us = "
        f"{fitted['gpu_node_us']:.2f} us per graph node"
    )
    for rows, r in results.items():
        p, q = r.get("predicted"), r.get("predicted_by_sweep")
        if not p:
            continue
        source = "the step's own launches" if r.get("launch_pace_us") else "the sweep"
        print(
            f"batch {rows}: launch model (tau {p['tau_us']:.2f} us from {source}) eager {p['eager_ms']:.3f} ms "
            f"(measured {r['eager_ms']:.3f}), graph {p['graph_ms']:.3f} ms (measured {r['full_ms']:.3f}); "
            f"with the sweep's tau eager {q['eager_ms']:.3f} ms"
        )
        for reason in r.get("launch_model_misses", []):
            print(f"         misses by more than {LAUNCH_MODEL_ERROR:.0%}: {reason}")
    print(f"targets ({'set for the 7B shapes' if name != 'qwen7b' else 'the 7B shapes'}; eager is never a target):")
    for t in entry["targets"]:
        verdict = "unmeasured" if t["met"] is None else ("met" if t["met"] else "NOT MET")
        value = "-" if t["value"] is None else (f"{t['value']:.1%}" if "error" in t["target"] else f"{t['value']:.3f}x")
        limit = f"{t['limit']:.0%}" if "error" in t["target"] else f"{t['limit']}x"
        print(f"  batch {t['batch']}: {t['target']}: {value} (<= {limit}) {verdict}")
    print(f"stage time: {entry['seconds']:.1f} s (compiling included)")


def plot(report: dict, path: Path) -> None:
    series, colours = [], iter(["#c0392b", "#2471a3", "#e67e22", "#1e8449"])
    for name, entry in report["configs"].items():
        if "sweep" not in entry:
            continue
        points = entry["sweep"]["points"]
        for key, label in (("eager_ms", "eager"), ("graph_ms", "full graph")):
            series.append(
                {
                    "name": f"{name} {label}",
                    "colour": next(colours, "#555555"),
                    "style": "line",
                    "points": [(p["kernels"], p[key]) for p in points],
                }
            )
    if series:
        line_chart(
            path,
            series,
            "Decode step time vs kernels per step (layer sweep, batch 1)",
            "kernels per step",
            "ms per step",
        )


def run() -> int:
    """``main()``, saying which exercise is unfinished instead of a traceback (the benchmark runs
    the student's exercises 1, 2, 5, 6, 7, 8 and 9 with ``--impl exercises``)."""
    try:
        main()
    except KeyboardInterrupt:
        # SIGINT at a deadline (the GPU session's plan): every row measured so far is in the JSON already.
        print("decode_engine.py: interrupted; decode-engine.json holds every figure measured so far", file=sys.stderr)
        return 130
    except NotImplementedError as exc:
        print(
            f"decode_engine.py: {exc} is not written yet: the benchmark runs your exercises "
            "(1, 2, 5, 6, 7, 8 and 9); finish that one, then run it again",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
