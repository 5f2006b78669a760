"""Part B: vLLM end to end. The same model served by vLLM 0.26.0 with CUDA graphs off and in
its graph modes, on one GPU (written for a rented 24 GB card such as an RTX 4090), by both of its
GPU model runners, read back from vLLM's own logs and benchmark output.

Status: nothing of this lab has run on a GPU yet. Its command lines were checked against vLLM
0.26.0's source, and its log parser was tested on text built from vLLM 0.26.0's own format
strings (``coursekit/data/vllm-0.26.0-formats.json``, written by ``python -m
coursekit.record_vllm_formats``, the lines telling the two runners apart included), not on a
real GPU log. Treat the first GPU run as the test.

``run`` starts ``vllm bench latency`` once per model, variant, batch size, output length and
runner, and keeps each run's log and ``--output-json``. The runners (saved per run in the
manifest; both by default, each configuration's two runs one after the other):

    default   VLLM_USE_V2_MODEL_RUNNER unset (removed from the environment): vLLM's own choice,
              which the lesson's plain command gets. vLLM 0.26.0 gives every dense, non-hybrid
              generate model (Qwen2.5 among them) its V2 model runner
              (vllm/config/vllm.py:549-591, VllmConfig.use_v2_model_runner) unless Triton is
              missing or a V2-unsupported feature is on (vllm/config/vllm.py:2127).
    v1        VLLM_USE_V2_MODEL_RUNNER=0: the V1 runner (GPUModelRunner.capture_model and its
              CudagraphDispatcher), the one the course's exercises follow.

Which runner a run really used is read from its log, not assumed: V2 logs "Using V2 Model
Runner"; the two runners word "Model loading took" differently; only V1 logs "Estimated CUDA graph
memory". The runners size the KV cache differently: V1 subtracts its graph-memory estimate first
(vllm/v1/worker/gpu_worker.py:500-545, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default 1); V2's
profile_cudagraph_memory returns 0 (vllm/v1/worker/gpu/model_runner.py:705-707), so it reserves
none and logs no estimate (expected, not an error). The variants:

    default             no flag: vLLM's default graph mode (FULL_AND_PIECEWISE at -O2)
    eager               --enforce-eager (vLLM turns off torch.compile and CUDA graphs)
    none                --compilation-config '{"cudagraph_mode": "NONE"}' (compiled, no graphs)
    piecewise           ... "PIECEWISE": graphs between the attention calls, attention eager
    full_decode_only    ... "FULL_DECODE_ONLY": one graph per decode step, prefill eager
    full_and_piecewise  ... "FULL_AND_PIECEWISE": full graphs for decode, piecewise for the rest

Presets (``--preset``; any option given on the command line wins over the preset's):

    modes           Qwen2.5-0.5B, the five variants but default, batch 1, 8, 32 (the default)
    lesson          the lesson's command: Qwen/Qwen2.5-7B-Instruct-AWQ, default vs --enforce-eager,
                    batch 1, on a 24 GB GPU; the quick path
    small-vs-large  Qwen2.5-0.5B beside Qwen2.5-7B-AWQ, default vs eager, batch 1: smaller
                    compute, bigger gain from graphs (the speedup per model side by side)

``--dry-run`` prints the commands and a time budget: an ESTIMATE from fixed per-start costs
(``START_S``, ``COMPILE_S``, ``CAPTURE_S``, ``STEP_S``), not a measurement.

Two output lengths make prefill cancel: the decode step's time is the slope of the benchmark's
latency against the output length. ``analyze`` (no GPU needed) reads the saved folder and reports,
per model and runner (never mixing them): which runner ran, the decode step time at each batch
size and the speedup over eager; the graph capture time and memory ("Graph capturing finished in
... secs, took ... GiB"), vLLM's estimate of that memory (V1 only), and the KV cache ("Available
KV cache memory: ... GiB", "GPU KV cache size: ... tokens"); then the runners side by side and,
with several models, the speedup per model side by side. Then two of your exercises:

* tau_eff, with exercise 1's ``fit_launch_model``: the line through (1 launch, graph step time)
  and (K launches, step time without graphs) has slope tau_eff, the time each removed launch cost.
  It is set beside exercise 2's tau, the CPU cost of one tiny launch (``--tau-from`` your
  ``launch-tax.json`` from ``python -m coursekit.lab launch-tax``; by default the bundled H200
  figure). K, the kernels per decode step, is NOT in vLLM's log: it is an input
  (``--kernels-per-step``, one per model). Without it the lab uses an ESTIMATE, 12 kernels per
  decoder layer plus 40 per step (embedding, final norm, LM head, sampler, input copies), and says
  so everywhere it is used; tau_eff scales as 1/(K-1), so a K 30 % off moves tau_eff 30 %. Count
  the kernels of one decode step in an Nsight Systems trace of the ``none`` variant to replace it.
  The baseline is ``none`` (same compiled kernels, only the graphs differ) when it was run, else
  ``eager`` (which also drops torch.compile's fusion, so its K is larger).
* KV tokens forgone, with exercise 9's ``kv_bytes_per_token`` (the model's layers, KV heads, head
  size and dtype, from the saved model config and the log's dtype, or ``--kv-shape``) and
  ``kv_tokens_forgone``: the graphs' memory from the log in tokens of KV cache, beside the
  measured drop of "GPU KV cache size" from the baseline run to the graph run (the same
  baseline as tau_eff: ``none`` when run, as ``eager`` also turns off torch.compile, which
  changes the profiled peak memory and so the KV cache). Under V2 expect a drop near 0.

It writes ``vllm-lab.json`` and the chart ``vllm-lab.svg`` into the folder.

    python -m coursekit.lab vllm run --preset lesson --out vllm-lab --dry-run   # commands, budget
    python -m coursekit.lab vllm run --preset lesson --out vllm-lab   # GPU machine, vLLM 0.26.0
    python -m coursekit.lab vllm analyze vllm-lab                     # any machine, saved logs

Exit status: 0 done (without tau_eff or the KV tokens when exercise 1 or 9 is unfinished: the lab
never computes them itself); 1 ``run`` without a CUDA GPU or without vLLM 0.26.0, or a module
does not import; 2 bad arguments or a folder that is not a saved run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from coursekit.impl import Implementation
from coursekit.lab.common import ExerciseNotFinished, number_in, positive_int
from coursekit.lab.vllm_analysis import KERNELS_PER_LAYER_ESTIMATE, KERNELS_PER_STEP_EXTRA_ESTIMATE, analyze
from coursekit.lab.vllm_report import report, write_outputs
from coursekit.lab.vllm_runs import (
    GRAPH_VARIANTS,
    MANIFEST,
    RUNNERS,
    VARIANTS,
    VLLM_VERSION,
    _short,
    model_config_name,
    slug,
)

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"  # small: its decode step is launch-bound on a 4090
LESSON_MODEL = "Qwen/Qwen2.5-7B-Instruct-AWQ"  # the lesson's model: ~5.5 GiB of AWQ weights
DEFAULT_BATCH_SIZES = (1, 8, 32)
DEFAULT_OUTPUT_LENS = (32, 160)

#: The environment ``run`` adds for every vLLM run (saved in the manifest as ``env``).
RUN_ENV = {"NO_COLOR": "1", "VLLM_LOGGING_LEVEL": "INFO"}

#: preset -> the run options it sets; an option given on the command line wins.
PRESETS = {
    "modes": {
        "help": "the graph modes of one small model (the default)",
        "models": [DEFAULT_MODEL],
        "variants": ["eager", "none", "piecewise", "full_decode_only", "full_and_piecewise"],
        "batch_sizes": list(DEFAULT_BATCH_SIZES),
        "output_lens": list(DEFAULT_OUTPUT_LENS),
        "runners": list(RUNNERS),
    },
    "lesson": {
        "help": f"the lesson's command, quick path: {LESSON_MODEL}, default vs "
        "--enforce-eager, batch 1, on a 24 GB GPU",
        "models": [LESSON_MODEL],
        "variants": ["default", "eager"],
        "batch_sizes": [1],
        "output_lens": list(DEFAULT_OUTPUT_LENS),
        "runners": list(RUNNERS),
    },
    "small-vs-large": {
        "help": f"{DEFAULT_MODEL} beside {LESSON_MODEL}, default vs eager, batch "
        "1: smaller compute, bigger gain from graphs",
        "models": [DEFAULT_MODEL, LESSON_MODEL],
        "variants": ["default", "eager"],
        "batch_sizes": [1],
        "output_lens": list(DEFAULT_OUTPUT_LENS),
        "runners": list(RUNNERS),
    },
}
DEFAULT_PRESET = "modes"

#: The time budget's assumptions, seconds; an ESTIMATE, never measured on a GPU. Per vLLM start:
#: starting the engine, loading the weights from the local disk, profiling memory, allocating the
#: KV cache and shutting down; torch.compile for a compiled variant (vLLM caches the compiled code
#: under ~/.cache/vllm, so a repeated configuration is faster: the estimate ignores that); graph
#: capture ("This usually takes 5~20 seconds", vllm/v1/worker/gpu_model_runner.py:6843); and per
#: benchmark iteration a prefill plus output_len decode steps of at most STEP_S. The first download
#: of the weights (about 1 GB for the 0.5B model, 5.5 GB for the 7B AWQ one) is not included.
START_S, COMPILE_S, CAPTURE_S, PREFILL_S, STEP_S = 60, 60, 20, 0.1, 0.02


# --- the commands ------------------------------------------------------------------------------


def bench_command(
    variant: str,
    model: str,
    batch_size: int,
    output_len: int,
    input_len: int,
    json_path: str,
    num_iters: int = 10,
    num_iters_warmup: int = 3,
    max_model_len: int = 2048,
    gpu_memory_utilization: float = 0.9,
    vllm: str = "vllm",
) -> list[str]:
    """One ``vllm bench latency`` command line (a list of words) for ``variant``."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {list(VARIANTS)}, got {variant!r}")
    return [
        vllm,
        "bench",
        "latency",
        "--model",
        model,
        "--seed",
        "0",
        "--max-model-len",
        str(max_model_len),
        "--gpu-memory-utilization",
        str(gpu_memory_utilization),
        "--input-len",
        str(input_len),
        "--output-len",
        str(output_len),
        "--batch-size",
        str(batch_size),
        "--num-iters-warmup",
        str(num_iters_warmup),
        "--num-iters",
        str(num_iters),
        "--disable-detokenize",
        "--output-json",
        json_path,
        *VARIANTS[variant][1],
    ]


def runner_env(runner: str, base=None) -> dict:
    """The environment a run of ``runner`` gets: ``base`` (default os.environ) with RUN_ENV and the
    runner's variables set and the ones it removes removed."""
    if runner not in RUNNERS:
        raise ValueError(f"runner: expected one of {list(RUNNERS)}, got {runner!r}")
    _, sets, unsets = RUNNERS[runner]
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in unsets}
    return {**env, **RUN_ENV, **sets}


def env_prefix(runner: str) -> str:
    """The runner's environment as the start of a shell line: ``env [-u VAR] VAR=VALUE ...``."""
    _, sets, unsets = RUNNERS[runner]
    return shlex.join(
        ["env", *(w for var in unsets for w in ("-u", var)), *(f"{k}={v}" for k, v in {**RUN_ENV, **sets}.items())]
    )


def plan(variants, batch_sizes, output_lens, runners=("v1",), models=(None,)) -> list[dict]:
    """The runs, one per model, variant, batch size, output length and runner (the runners of one
    configuration one after the other), with their file names. A model of None leaves the model
    out of the run and its file names (one model, named by the manifest)."""
    runs = []
    for m in models:
        for v in variants:
            for b in batch_sizes:
                for o in output_lens:
                    for r in runners:
                        stem = f"runs/{slug(m) + '-' if m else ''}{r}-{v}-b{b}-o{o}"
                        runs.append(
                            {
                                **({"model": m} if m else {}),
                                "runner": r,
                                "variant": v,
                                "batch_size": b,
                                "output_len": o,
                                "log": f"{stem}.log",
                                "json": f"{stem}.json",
                            }
                        )
    return runs


def estimate_seconds(runs, num_iters: int = 10, num_iters_warmup: int = 3) -> float:
    """The time budget of ``runs``: an ESTIMATE from START_S, COMPILE_S, CAPTURE_S, PREFILL_S and
    STEP_S (see there), not a measurement; the weights' first download not included."""
    total = 0.0
    for r in runs:
        total += START_S + (COMPILE_S if r["variant"] != "eager" else 0)
        total += CAPTURE_S if r["variant"] in GRAPH_VARIANTS else 0
        total += (num_iters + num_iters_warmup) * (PREFILL_S + STEP_S * r["output_len"])
    return total


def budget_line(runs, num_iters: int = 10, num_iters_warmup: int = 3) -> str:
    seconds = estimate_seconds(runs, num_iters, num_iters_warmup)
    return (
        f"time budget: about {seconds / 60:.0f} min for {len(runs)} vLLM starts (an ESTIMATE, "
        f"not measured: {START_S} s a start, +{COMPILE_S} s to compile, +{CAPTURE_S} s to "
        f"capture, {STEP_S * 1e3:.0f} ms a decode step; without the first download)"
    )


# --- running: the only part that needs a GPU and vLLM ------------------------------------------


def refusal() -> str | None:
    """Why ``run`` cannot run here (one line), or None."""
    problems = []
    try:
        import torch

        if not torch.cuda.is_available():
            problems.append("no CUDA device (torch.cuda.is_available() is False)")
    except ImportError:
        problems.append("no torch, so no CUDA")
    try:
        from importlib.metadata import PackageNotFoundError, version

        found = version("vllm")
        if found != VLLM_VERSION:
            problems.append(
                f"vLLM {found} is installed, this lab reads vLLM {VLLM_VERSION}'s "
                f"logs (pip install vllm=={VLLM_VERSION})"
            )
    except PackageNotFoundError:
        problems.append(f"vLLM is not installed (pip install vllm=={VLLM_VERSION})")
    if not problems:
        return None
    return (
        "vllm_lab run: needs a CUDA GPU and vLLM "
        + VLLM_VERSION
        + "; here: "
        + "; ".join(problems)
        + ". Saved logs are read anywhere: python -m coursekit.lab vllm "
        "analyze FOLDER"
    )


def run(args) -> Path:
    """Every run of the plan, one after the other; each log and JSON kept in ``args.out``."""
    import torch

    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    runs = plan(args.variants, args.batch_sizes, args.output_lens, args.runners, args.models)
    print(budget_line(runs, args.num_iters, args.num_iters_warmup))
    for i, entry in enumerate(runs, 1):
        entry["command"] = bench_command(
            entry["variant"],
            entry["model"],
            entry["batch_size"],
            entry["output_len"],
            args.input_len,
            str(out / entry["json"]),
            args.num_iters,
            args.num_iters_warmup,
            args.max_model_len,
            args.gpu_memory_utilization,
        )
        entry["env"] = env_prefix(entry["runner"])
        print(
            f"[{i}/{len(runs)}] {_short(entry['model'])}, runner {entry['runner']}, "
            f"{entry['variant']}, batch {entry['batch_size']}, output {entry['output_len']} ...",
            end=" ",
            flush=True,
        )
        start = time.perf_counter()
        with open(out / entry["log"], "w", encoding="utf-8") as log:
            try:
                done = subprocess.run(
                    entry["command"],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=runner_env(entry["runner"]),
                    timeout=args.run_timeout,
                )
                entry["returncode"] = done.returncode
            except subprocess.TimeoutExpired:
                entry["returncode"] = "timeout"
        entry["seconds"] = round(time.perf_counter() - start, 1)
        print(
            f"{entry['seconds']:.0f} s, exit {entry['returncode']}"
            + ("" if entry["returncode"] == 0 else f" (see {out / entry['log']})")
        )
    manifest = {
        "lab": "vllm_lab",
        "vllm": VLLM_VERSION,
        "gpu": torch.cuda.get_device_name(),
        "env": RUN_ENV,
        "preset": args.preset,
        "models": args.models,
        "model": " vs ".join(args.models),
        "runners": args.runners,
        "runner_env": {r: {"set": RUNNERS[r][1], "unset": list(RUNNERS[r][2])} for r in args.runners},
        "input_len": args.input_len,
        "variants": args.variants,
        "batch_sizes": args.batch_sizes,
        "output_lens": args.output_lens,
        "budget_estimate_s": estimate_seconds(runs, args.num_iters, args.num_iters_warmup),
        "runs": runs,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    for model in args.models:  # each model's config.json, for exercise 9's KV shape
        try:  # transformers comes with vLLM
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(model).to_dict()
            (out / model_config_name(model)).write_text(
                json.dumps(config, indent=1, default=str) + "\n", encoding="utf-8"
            )
        except Exception as exc:  # noqa: BLE001 - analyze says what is missing and how to give it
            print(
                f"could not save {model}'s config ({type(exc).__name__}: {exc}); give --kv-shape to analyze",
                file=sys.stderr,
            )
    return out


# --- command line ------------------------------------------------------------------------------


def _shape(text: str) -> dict:
    parts = text.split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 4 or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected LAYERS,KV_HEADS,HEAD_DIM,DTYPE_BYTES (four ints >= 1, e.g. 24,2,64,2), got {text!r}"
        )
    return dict(zip(("n_layers", "n_kv_heads", "head_dim", "dtype_bytes"), values))


RUN_STATUS = (
    "Runs vllm bench latency per model, variant, batch size, output length and model "
    "runner on this GPU (vLLM 0.26.0), then analyzes the folder. Not yet run on a GPU: "
    "the commands were checked against vLLM 0.26.0's source and the parser tested on "
    "text built from its format strings only."
)


def _add_analysis_options(parser) -> None:
    parser.add_argument(
        "--impl",
        default="exercises",
        help="your exercises (default), or a folder of module files: exercise "
        "1's fit_launch_model and exercise 9's kv_bytes_per_token and "
        "kv_tokens_forgone come from it",
    )
    parser.add_argument(
        "--kernels-per-step",
        type=positive_int,
        nargs="+",
        metavar="K",
        help="kernels one decode step launches without graphs, one per model in "
        "the folder's order; NOT in vLLM's log. Default: an ESTIMATE, "
        f"{KERNELS_PER_LAYER_ESTIMATE} per decoder layer + "
        f"{KERNELS_PER_STEP_EXTRA_ESTIMATE}",
    )
    parser.add_argument(
        "--tau-from",
        metavar="FILE",
        help="your launch-tax.json (python -m coursekit.lab launch-tax) for "
        "exercise 2's tau; default: the bundled H200 tau",
    )
    parser.add_argument(
        "--kv-shape",
        type=_shape,
        nargs="+",
        metavar="L,H,D,B",
        help="layers, KV heads, head size, dtype bytes, one per model in the "
        "folder's order; default: from the folder's saved model config and the "
        "log's dtype",
    )


def add_parser(labs) -> None:
    """Part B as ``python -m coursekit.lab vllm``, among the labs' subcommands ``labs``: this
    module's docstring is its --help."""
    parser = labs.add_parser(
        "vllm",
        help="Part B: vLLM end to end, its graph modes under both "
        "model runners (run: a GPU and vLLM 0.26.0; analyze: any machine)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run_p = commands.add_parser(
        "run",
        help="run vLLM's latency benchmark per variant and runner (GPU, vLLM 0.26.0), then analyze",
        description=RUN_STATUS,
    )
    run_p.add_argument("--out", default="vllm-lab", help="folder for the logs and results (default: %(default)s)")
    run_p.add_argument(
        "--preset",
        choices=list(PRESETS),
        default=DEFAULT_PRESET,
        help="; ".join(f"{k}: {v['help']}" for k, v in PRESETS.items())
        + " (default: %(default)s); the options below win over it",
    )
    run_p.add_argument(
        "--model",
        nargs="+",
        dest="models",
        metavar="MODEL",
        help=f"one or more (default: the preset's; {DEFAULT_MODEL} for modes)",
    )
    run_p.add_argument(
        "--runners",
        nargs="+",
        choices=list(RUNNERS),
        metavar="RUNNER",
        help="; ".join(f"{k}: {v[0]}" for k, v in RUNNERS.items()) + " (default: both)",
    )
    run_p.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        metavar="VARIANT",
        help=f"of {', '.join(VARIANTS)} (default: the preset's)",
    )
    run_p.add_argument("--batch-sizes", type=positive_int, nargs="+", metavar="B", help="default: the preset's")
    run_p.add_argument(
        "--output-lens",
        type=positive_int,
        nargs="+",
        metavar="N",
        help="at least two, so prefill cancels (default: the preset's)",
    )
    run_p.add_argument("--input-len", type=positive_int, default=32, help="default: %(default)s")
    run_p.add_argument("--num-iters", type=positive_int, default=10, help="default: %(default)s")
    run_p.add_argument("--num-iters-warmup", type=positive_int, default=3, help="default: %(default)s")
    run_p.add_argument("--max-model-len", type=positive_int, default=2048, help="default: %(default)s")
    run_p.add_argument(
        "--gpu-memory-utilization", type=number_in(0, 1, high_closed=True), default=0.9, help="default: %(default)s"
    )
    run_p.add_argument(
        "--run-timeout",
        type=positive_int,
        default=1800,
        metavar="SECONDS",
        help="per benchmark run (default: %(default)s)",
    )
    run_p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the commands and the time budget (an estimate) and exit; runs nothing, needs nothing",
    )
    _add_analysis_options(run_p)
    analyze_p = commands.add_parser("analyze", help="read a saved folder: report, JSON and SVG (any machine)")
    analyze_p.add_argument("folder", metavar="FOLDER", help="a folder written by run")
    _add_analysis_options(analyze_p)


def _apply_preset(args) -> str | None:
    """Fill the run options not given from ``args.preset``; the error (naming the option) or None."""
    preset = PRESETS[args.preset]
    for key in ("models", "runners", "variants", "batch_sizes", "output_lens"):
        if getattr(args, key) is None:
            setattr(args, key, list(preset[key]))
        else:
            setattr(args, key, list(dict.fromkeys(getattr(args, key))))
    if len(args.output_lens) < 2:
        return (
            f"--output-lens: expected at least two distinct lengths (prefill cancels in their "
            f"difference), got {args.output_lens}"
        )
    if args.max_model_len < args.input_len + max(args.output_lens):
        return (
            f"--max-model-len: expected at least --input-len + the longest --output-lens = "
            f"{args.input_len + max(args.output_lens)}, got {args.max_model_len}"
        )
    bad = [m for m in args.models if not m.strip() or m.startswith("-")]
    if bad:
        return f"--model: expected a Hugging Face model name or a local path, got {bad[0]!r}"
    return None


def command(args) -> int:
    """``python -m coursekit.lab vllm``, its arguments parsed (``coursekit.lab.main``)."""
    if args.command == "run":
        problem = _apply_preset(args)
        if problem:
            print(f"vllm_lab: {problem}", file=sys.stderr)
            return 2
        if args.dry_run:
            runs = plan(args.variants, args.batch_sizes, args.output_lens, args.runners, args.models)
            for entry in runs:
                print(
                    env_prefix(entry["runner"])
                    + " "
                    + shlex.join(
                        bench_command(
                            entry["variant"],
                            entry["model"],
                            entry["batch_size"],
                            entry["output_len"],
                            args.input_len,
                            str(Path(args.out) / entry["json"]),
                            args.num_iters,
                            args.num_iters_warmup,
                            args.max_model_len,
                            args.gpu_memory_utilization,
                        )
                    )
                    + f" > {Path(args.out) / entry['log']} 2>&1"
                )
            print("# " + budget_line(runs, args.num_iters, args.num_iters_warmup))
            return 0
        why = refusal()
        if why:
            print(why, file=sys.stderr)
            return 1
        folder = run(args)
    else:
        folder = Path(args.folder)
    return _analyze_and_write(folder, args)


def _analyze_and_write(folder: Path, args) -> int:
    try:
        impl = Implementation(args.impl)
    except ValueError as exc:
        print(f"vllm_lab: --{exc}", file=sys.stderr)
        return 2
    try:
        record = analyze(folder, impl, args.kernels_per_step, args.tau_from, args.kv_shape)
    except ExerciseNotFinished as exc:  # not exercise 1 or 9: analyze handles those
        print(f"vllm_lab: exercise {exc.number} is not finished: {exc}", file=sys.stderr)
        return 1
    except ImportError as exc:
        print(f"vllm_lab: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"vllm_lab: {exc}", file=sys.stderr)
        return 2
    print(report(record))
    try:
        json_path, svg_path = write_outputs(record, folder)
    except ValueError as exc:
        print(f"vllm_lab: {exc}", file=sys.stderr)
        return 2
    print(f"\nwrote {json_path}\nwrote {svg_path}")
    return 0
