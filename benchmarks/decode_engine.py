"""The decode engine (exercise 8) against the lesson's launch model, on a GPU. A benchmark, not a test.

    python benchmarks/decode_engine.py                        # toy model, and Qwen2.5-7B shapes if they fit
    python benchmarks/decode_engine.py --configs toy          # one configuration: toy, qwen7b (or all)
    python benchmarks/decode_engine.py --impl exercises       # with your own exercises
    python benchmarks/decode_engine.py --no-compile           # without the torch.compile peer (minutes less)
    python benchmarks/decode_engine.py --device cpu --quick   # smoke run of the code path (stand-in graphs)

Per configuration (the toy model in fp32; Qwen2.5-7B's shapes in bf16 with 28 layers, random
weights and a 1024-token KV cache, where the GPU has the memory) and batch size (1 and 8):
eager, piecewise, full, full with the fused add + RMSNorm (exercise 7), a bare ``replay()`` of
the full graph, and ``torch.compile(mode="reduce-overhead")`` as a peer (inductor may decline its
own CUDA graphs because the step writes the KV cache in place; its time is then fusion only):
ms per step, tokens/s,
kernels per step (profiler). A layer-count sweep fits the per-kernel cost of eager steps (tau)
and of graph replays (gpu_node_us) with exercise 1's ``fit_launch_model``; the extended launch
model then predicts the full model's eager and graph step times and speedup, shown next to the
measured ones. The memory floor is the bytes a step must read (weights, KV cache) over a
measured device-to-device copy bandwidth. Prints a table and the issue's targets (met or not),
writes ``lab-output/decode-engine.json`` and ``lab-output/decode-engine.svg``.

The Qwen2.5-7B-shaped configuration runs only where the GPU has the free memory for it
(``torch.cuda.mem_get_info()``: one bf16 model, 15.2 GB, its KV cache and 2 GiB of headroom;
about 17.9 GB, so a 24 GB RTX 4090 fits); otherwise it is skipped with a one-line reason. Where
``torch.compile`` cannot build GPU kernels (no C compiler, no ``Python.h``, no ``libcuda.so.1``, no
``triton``: ``coursekit.platform.triton_problem``), the rows that need it (full + fused, compile)
are skipped with a one-line reason, and so is any of them that fails.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coursekit.impl import Implementation  # noqa: E402
from coursekit.platform import triton_problem  # noqa: E402
from coursekit.svgplot import line_chart  # noqa: E402
from coursekit.toymodel import ModelConfig, ToyModel  # noqa: E402

POSITION = 100  # each sequence decodes its token 101, or its last (attention reads the whole row anyway)
HEADROOM_BYTES = 2 << 30  # beyond the model and its cache: graph pools, activations, cuBLAS, compile
CONFIGS = ("toy", "qwen7b")


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
        raise argparse.ArgumentTypeError(f"expected a torch device such as cpu, cuda or cuda:1, "
                                         f"got {text!r}") from None


def batch(model: ToyModel, rows: int):
    d = model.device
    return (torch.arange(rows, device=d) % model.config.vocab_size,
            torch.full((rows,), min(POSITION, model.config.max_seq_len - 1), device=d),
            torch.arange(rows, device=d))


def copy_bandwidth_bps(impl: Implementation, device: str) -> float | None:
    """Device-to-device copy: bytes read plus written per second."""
    if not on_cuda(device):
        return None
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = timer(impl, 20)(lambda: dst.copy_(src))
    del src, dst
    torch.cuda.empty_cache()  # give the 2 GiB back before the models are built
    return 2 * (1 << 30) / (ms / 1e3)


def model_bytes(config: ModelConfig, dtype) -> int:
    """A model's weights and KV cache, as ``ToyModel`` allocates them."""
    c = config
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    per_layer = 2 * c.hidden_size + (c.hidden_size + 1) * (q + 2 * kv) + q * c.hidden_size \
        + 3 * c.hidden_size * c.intermediate_size
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
        return (f"{name}: skipped (needs {need / 1e9:.1f} GB of free GPU memory: the model "
                f"{model_bytes(config, dtype) / 1e9:.1f} GB with its KV cache, and "
                f"{HEADROOM_BYTES / 2**30:.0f} GiB headroom; {free / 1e9:.1f} GB free of "
                f"{total / 1e9:.1f} GB on {torch.cuda.get_device_name()})")
    return None


def bytes_per_step(config: ModelConfig, dtype, rows: int) -> int:
    """What a step must read at least: every weight but the embedding (only ``rows`` of it are
    gathered), and each row's slot of the KV cache in every layer."""
    c = config
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    per_layer = 2 * c.hidden_size + (c.hidden_size + 1) * (q + 2 * kv) + q * c.hidden_size \
        + 3 * c.hidden_size * c.intermediate_size
    weights = c.n_layers * per_layer + c.hidden_size + c.hidden_size * c.vocab_size + rows * c.hidden_size
    cache = 2 * c.n_layers * rows * c.max_seq_len * kv
    return (weights + cache) * dtype.itemsize


def decode_step(model: ToyModel):
    """An eager uniform decode step of ``model``: ``forward`` with the decode kernel
    (``max_query_len=1``), as a FULL graph holds it, so eager and graph run the same kernels."""
    return lambda tokens, positions, slots: model.forward(tokens, positions, slots, max_query_len=1)


def measure(impl: Implementation, config: ModelConfig, dtype, device: str, rows_list, iters: int,
            with_compile: bool, with_fused: bool = True) -> dict:
    """Per batch size: eager, piecewise and full steps (and a bare replay), kernels per step; the
    full step with exercise 7's fused add + RMSNorm (``with_fused``) and the compile peer
    (``with_compile``), each skipped with a one-line reason if it fails."""
    engine_mod, fusion = impl.module("engine"), impl.module("fusion")
    modes = engine_mod.CUDAGraphMode
    time_ms = timer(impl, iters)
    count = fusion.count_kernels if on_cuda(device) else (lambda fn, *a: None)
    sizes = sorted(set(rows_list))
    out = {rows: {} for rows in rows_list}

    def engine_row(model, row, args, rows, mode, name):
        engine = engine_mod.DecodeEngine(model, mode=mode, capture_sizes=sizes)
        engine.capture_model()
        row[f"{name}_ms"] = time_ms(lambda: engine.step(*args, uniform_decode=True))
        row[f"{name}_capture_s"] = engine.capture_seconds
        row[f"{name}_capture_bytes"] = engine.capture_memory_bytes
        if name == "full":
            graph = next(g for (m, d), g in engine.graphs.items() if m is modes.FULL and d.num_tokens == rows)
            engine.step(*args, uniform_decode=True)  # the static buffers hold this batch
            row["bare_replay_ms"] = time_ms(graph.replay)

    model = ToyModel(config, device=device, dtype=dtype)
    decode = decode_step(model)
    for rows in rows_list:
        args, row = batch(model, rows), out[rows]
        row["eager_ms"] = time_ms(lambda: decode(*args))
        row["kernels"] = count(decode, *args)
        engine_row(model, row, args, rows, modes.PIECEWISE, "piecewise")
        # FULL_DECODE_ONLY: full graphs alone (FULL would capture piecewise ones for mixed
        # batches too, and count their time and memory); these batches are uniform decode.
        engine_row(model, row, args, rows, modes.FULL_DECODE_ONLY, "full")
        free(device)
        if with_compile:
            def peer():
                compiled = torch.compile(decode, mode="reduce-overhead")
                t0 = time.perf_counter()
                compiled(*args)
                compiled(*args)
                row["compile_s"] = time.perf_counter() - t0
                row["compile_ms"] = time_ms(lambda: compiled(*args))

            optional(f"compile peer (batch {rows})", peer)
            torch._dynamo.reset()  # the compiled code holds the model: free both before the next one
            free(device)
    del model, args
    free(device)
    if with_fused:
        def fused_rows():
            model = ToyModel(config, device=device, dtype=dtype, add_rms_norm=fusion.fused_add_rms_norm)
            for rows in rows_list:
                engine_row(model, out[rows], batch(model, rows), rows, modes.FULL_DECODE_ONLY, "full_fused")
                free(device)
            for rows in rows_list:
                out[rows]["fused_kernels"] = count(decode_step(model), *batch(model, rows))

        optional("full + fused add-RMSNorm", fused_rows)
        free(device)
    return out


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


def sweep(impl: Implementation, config: ModelConfig, dtype, device: str, layers: list[int], iters: int) -> dict:
    """Eager and full-graph step time at batch 1 over a layer count sweep, with kernel counts."""
    engine_mod, fusion = impl.module("engine"), impl.module("fusion")
    time_ms = timer(impl, iters)
    points = []
    for n in layers:
        model = ToyModel(ModelConfig(**{**config.__dict__, "n_layers": n}), device=device, dtype=dtype)
        args = batch(model, 1)
        engine = engine_mod.DecodeEngine(model, mode=engine_mod.CUDAGraphMode.FULL_DECODE_ONLY, capture_sizes=[1])
        engine.capture_model()
        decode = decode_step(model)
        # Without CUDA there is no profiler count: a nominal one lets a smoke run exercise the fit.
        kernels = fusion.count_kernels(decode, *args) if on_cuda(device) else 20 * n + 10
        points.append({"layers": n, "kernels": kernels, "eager_ms": time_ms(lambda: decode(*args)),
                       "graph_ms": time_ms(lambda: engine.step(*args, uniform_decode=True))})
        del engine, model
        free(device)
    fit = impl.module("launch_model").fit_launch_model
    ks = [p["kernels"] for p in points]
    tau_us, eager_intercept_ms = fit(ks, [p["eager_ms"] for p in points])
    node_us, graph_intercept_ms = fit(ks, [p["graph_ms"] for p in points])
    return {"points": points, "tau_us": tau_us, "eager_intercept_ms": eager_intercept_ms,
            "gpu_node_us": node_us, "graph_intercept_ms": graph_intercept_ms}


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
    per_token = tradeoffs.kv_bytes_per_token(config.n_layers, config.n_kv_heads, config.head_dim,
                                             dtype.itemsize)
    shared = tradeoffs.graph_memory_bytes(alone.values())
    separate = tradeoffs.graph_memory_bytes(alone.values(), shared_pool=False)
    return {"sizes": sizes, "alone_bytes": alone, "one_pool_bytes": measured,
            "model_shared_bytes": shared, "model_separate_bytes": separate,
            "kv_bytes_per_token": per_token,
            "kv_tokens_forgone": tradeoffs.kv_tokens_forgone(measured, per_token)}


def print_graph_memory(memory: dict) -> None:
    mib = 2**20
    alone = ", ".join(f"{s}: {b / mib:.1f}" for s, b in memory["alone_bytes"].items())
    print(f"graph memory (MiB), one size per engine: {alone}")
    print(f"  all sizes in one pool: {memory['one_pool_bytes'] / mib:.1f} MiB measured; exercise 9's model: "
          f"{memory['model_shared_bytes'] / mib:.1f} shared (the largest), "
          f"{memory['model_separate_bytes'] / mib:.1f} separate (the sum)")
    print(f"  KV cache: {memory['kv_bytes_per_token']} bytes per token; the one pool forgoes "
          f"{memory['kv_tokens_forgone']} tokens")


def predict(impl: Implementation, fitted: dict, kernels: int) -> dict:
    """Exercise 1's extended launch model for a step of ``kernels`` kernels, with the sweep's
    slopes and its graph intercept as the compute time (the per-layer memory traffic is in the
    slopes, so no floor is added). The graph slope is nu, what every kernel costs the GPU; the
    model charges nu to eager kernels too, so the eager slope is launch_us + nu and launch_us is
    the eager slope less nu."""
    nu = max(fitted["gpu_node_us"], 0.0)
    step = impl.module("launch_model").DecodeStep(
        weight_gib=0.0, n_layers=1, kernels_per_layer=max(kernels - 10, 0),  # n_kernels = L*k + 10
        launch_us=max(fitted["tau_us"] - nu, 0.0), gpu_node_us=nu)
    compute_ms = max(fitted["graph_intercept_ms"], 0.0)
    eager, graph = compute_ms + step.eager_ms(), compute_ms + step.graph_ms()
    return {"eager_ms": eager, "graph_ms": graph, "speedup": eager / graph}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # The reference where there is one (the staff repository), else your own exercises.
    parser.add_argument("--impl", default="solutions" if (ROOT / "solutions").is_dir() else "exercises",
                        help="exercises, solutions or a folder")
    parser.add_argument("--device", type=device_name, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--configs", default="all", help="comma-separated: toy, qwen7b; or all")
    parser.add_argument("--quick", action="store_true", help="few iterations, small sweeps")
    parser.add_argument("--no-compile", action="store_true",
                        help="leave out the torch.compile peer (the slowest part: minutes on the 7B shapes)")
    parser.add_argument("--out", default="lab-output")
    args = parser.parse_args()
    names = CONFIGS if args.configs == "all" else tuple(args.configs.split(","))
    for name in names:
        if name not in CONFIGS:
            parser.error(f"--configs: unknown configuration {name!r} (toy, qwen7b or all)")
    impl = Implementation(args.impl)
    iters = 5 if args.quick else 50
    # torch.compile builds Triton kernels on CUDA: without what they need, skip its rows up front.
    compile_problem = triton_problem(cuda=on_cuda(args.device))
    if compile_problem:
        print(f"compiled rows (full + fused, compile) skipped: {compile_problem}")
    bandwidth = copy_bandwidth_bps(impl, args.device)
    report = {"device": torch.cuda.get_device_name() if on_cuda(args.device) else "cpu",
              "torch": torch.__version__, "impl": args.impl, "copy_bytes_per_s": bandwidth,
              "compile_problem": compile_problem, "configs": {}}
    for name in names:
        if name == "toy":
            config, dtype, layers = ModelConfig(), torch.float32, [1, 2, 4, 8]
        else:
            config, dtype, layers = ModelConfig.qwen2_5_7b(max_seq_len=1024), torch.bfloat16, [2, 4, 7, 14]
            problem = memory_problem(name, config, dtype, args.device)
            if problem:
                print(problem)
                report["configs"][name] = {"skipped": problem}
                continue
        if args.quick:
            layers = layers[:3]
        print(f"\n== {name}: {config.n_layers} layers, hidden {config.hidden_size}, {dtype} on {args.device}")
        results = measure(impl, config, dtype, args.device, [1, 8], iters,
                          with_compile=on_cuda(args.device) and not args.quick and not args.no_compile
                          and not compile_problem,
                          with_fused=not compile_problem)
        fitted = sweep(impl, config, dtype, args.device, layers, iters)
        entry = {"batches": results, "sweep": fitted}
        sizes = [s for s in (1, 2, 4, 8, 16, 32) if s <= config.max_seqs]
        optional("graph memory", lambda: entry.update(
            graph_memory=graph_memory(impl, config, dtype, args.device, sizes)))
        for rows, r in results.items():
            floor = bytes_per_step(config, dtype, rows)
            r["floor_ms"] = floor / bandwidth * 1e3 if bandwidth else None
            if r.get("kernels"):
                r["predicted"] = predict(impl, fitted, r["kernels"])
        report["configs"][name] = entry
        print_table(name, results, fitted)
        if "graph_memory" in entry:
            print_graph_memory(entry["graph_memory"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decode-engine.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    plot(report, out / "decode-engine.svg")
    print(f"\nwrote {out / 'decode-engine.json'} and {out / 'decode-engine.svg'}")


def print_table(name: str, results: dict, fitted: dict) -> None:
    columns = ("eager", "piecewise", "full", "full_fused", "bare_replay", "compile")
    print(f"{'batch':>5} " + " ".join(f"{c + ' ms':>15}" for c in columns) + f" {'kernels':>8} {'fused':>6}")
    for rows, r in results.items():
        cells = " ".join(f"{r[c + '_ms']:>15.3f}" if c + "_ms" in r else f"{'-':>15}" for c in columns)
        print(f"{rows:>5} {cells} {str(r.get('kernels', '-')):>8} {str(r.get('fused_kernels', '-')):>6}")
    for rows, r in results.items():
        tps = ", ".join(f"{c} {rows / r[c + '_ms'] * 1e3:,.0f}" for c in columns if c + "_ms" in r)
        print(f"tokens/s at batch {rows}: {tps}")
    print(f"sweep over layers: tau = {fitted['tau_us']:.2f} us per eager kernel, gpu_node_us = "
          f"{fitted['gpu_node_us']:.2f} us per graph node")
    for rows, r in results.items():
        p = r.get("predicted")
        if p:
            print(f"batch {rows}: launch model eager {p['eager_ms']:.3f} ms (measured {r['eager_ms']:.3f}), "
                  f"graph {p['graph_ms']:.3f} ms (measured {r['full_ms']:.3f}), speedup predicted "
                  f"{p['speedup']:.2f}x, measured {r['eager_ms'] / r['full_ms']:.2f}x")
    one = results.get(1, {})
    if one.get("floor_ms"):
        fused = (f"{one['full_fused_ms'] / one['floor_ms']:.2f}x" if "full_fused_ms" in one else "not measured")
        print(f"targets (batch 1): full vs eager {one['eager_ms'] / one['full_ms']:.2f}x (>= 4 on the 7B "
              f"shapes); full+fused vs floor {fused} (<= 1.6); "
              f"engine step vs bare replay {one['full_ms'] / one['bare_replay_ms']:.3f}x (<= 1.05)")
        p = one.get("predicted")
        if p:
            print(f"         launch model error: eager {abs(p['eager_ms'] / one['eager_ms'] - 1):.1%}, "
                  f"graph {abs(p['graph_ms'] / one['full_ms'] - 1):.1%} (<= 15%)")


def plot(report: dict, path: Path) -> None:
    series, colours = [], iter(["#c0392b", "#2471a3", "#e67e22", "#1e8449"])
    for name, entry in report["configs"].items():
        if "sweep" not in entry:
            continue
        points = entry["sweep"]["points"]
        for key, label in (("eager_ms", "eager"), ("graph_ms", "full graph")):
            series.append({"name": f"{name} {label}", "colour": next(colours, "#555555"), "style": "line",
                           "points": [(p["kernels"], p[key]) for p in points]})
    if series:
        line_chart(path, series, "Decode step time vs kernels per step (layer sweep, batch 1)",
                   "kernels per step", "ms per step")


def run() -> int:
    """``main()``, saying which exercise is unfinished instead of a traceback (the benchmark runs
    the student's exercises 1, 2, 5, 6, 7, 8 and 9 with ``--impl exercises``)."""
    try:
        main()
    except NotImplementedError as exc:
        print(f"decode_engine.py: {exc} is not written yet: the benchmark runs your exercises "
              "(1, 2, 5, 6, 7, 8 and 9); finish that one, then run it again", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(run())
