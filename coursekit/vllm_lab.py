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

    python -m coursekit.vllm_lab run --preset lesson --out vllm-lab --dry-run   # commands, budget
    python -m coursekit.vllm_lab run --preset lesson --out vllm-lab   # GPU machine, vLLM 0.26.0
    python -m coursekit.vllm_lab analyze vllm-lab                     # any machine, saved logs

Exit status: 0 done (without tau_eff or the KV tokens when exercise 1 or 9 is unfinished: the lab
never computes them itself); 1 ``run`` without a CUDA GPU or without vLLM 0.26.0, or a module
does not import; 2 bad arguments or a folder that is not a saved run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from coursekit import lesson
from coursekit.course import by_module
from coursekit.impl import Implementation
from coursekit.lab import (ExerciseNotFinished, call_student, fit_record, load_record,
                           number_in, positive_int)
from coursekit.svgplot import figure

VLLM_VERSION = "0.26.0"
FORMATS = Path(__file__).resolve().parent / "data" / f"vllm-{VLLM_VERSION}-formats.json"

#: variant -> (what it is, the flags that select it). Only flags recorded in FORMATS are used.
VARIANTS = {
    "default": ("no flag: vLLM's default graph mode (FULL_AND_PIECEWISE)", []),
    "eager": ("--enforce-eager: no torch.compile, no graphs", ["--enforce-eager"]),
    "none": ("compiled, cudagraph_mode NONE", ["--compilation-config",
                                                '{"cudagraph_mode": "NONE"}']),
    "piecewise": ("cudagraph_mode PIECEWISE", ["--compilation-config",
                                               '{"cudagraph_mode": "PIECEWISE"}']),
    "full_decode_only": ("cudagraph_mode FULL_DECODE_ONLY", [
        "--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}']),
    "full_and_piecewise": ("cudagraph_mode FULL_AND_PIECEWISE", [
        "--compilation-config", '{"cudagraph_mode": "FULL_AND_PIECEWISE"}']),
}
#: The variants that capture graphs. ``default`` is vLLM 0.26.0's -O2 default,
#: cudagraph_mode FULL_AND_PIECEWISE (vllm/config/vllm.py:290, OPTIMIZATION_LEVEL_02).
GRAPH_VARIANTS = ("default", "piecewise", "full_decode_only", "full_and_piecewise")
COLOURS = {"default": "#8c564b", "eager": "#d62728", "none": "#ff7f0e", "piecewise": "#2ca02c",
           "full_decode_only": "#1f77b4", "full_and_piecewise": "#6a3d9a"}

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"  # small: its decode step is launch-bound on a 4090
LESSON_MODEL = "Qwen/Qwen2.5-7B-Instruct-AWQ"  # the lesson's model: ~5.5 GiB of AWQ weights
DEFAULT_BATCH_SIZES = (1, 8, 32)
DEFAULT_OUTPUT_LENS = (32, 160)
#: The estimate of kernels per decode step used when --kernels-per-step is not given (see the
#: module docstring): per decoder layer two fused add+RMSNorms, QKV GEMM, rotary, KV-cache write,
#: attention, output GEMM, gate-up GEMM, SiLU-and-mul, down GEMM and about two more small ones;
#: per step the embedding, final norm, LM head, the sampler and the input copies.
KERNELS_PER_LAYER_ESTIMATE, KERNELS_PER_STEP_EXTRA_ESTIMATE = 12, 40
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}

#: The environment ``run`` adds for every vLLM run (saved in the manifest as ``env``).
RUN_ENV = {"NO_COLOR": "1", "VLLM_LOGGING_LEVEL": "INFO"}
RUNNER_VAR = "VLLM_USE_V2_MODEL_RUNNER"
#: runner -> (what it is, the variables it sets, the variables it removes). vLLM 0.26.0's envs.py
#: reads VLLM_USE_V2_MODEL_RUNNER with maybe_convert_bool (bool(int(value)), None when unset;
#: vllm/envs.py:320-323, 1922-1924): "0" is V1, and VllmConfig.use_v2_model_runner returns it as
#: is (vllm/config/vllm.py:551-553). Unset, vLLM picks: V2 for a dense, non-hybrid generate model
#: (vllm/config/vllm.py:570-591, 605-622) unless Triton is missing or a feature it does not
#: support is on (_get_v2_model_runner_unsupported_features, vllm/config/vllm.py:2127). "default"
#: removes the variable, so a value left in the student's shell cannot decide for vLLM.
RUNNERS = {
    "default": (f"vLLM's own choice ({RUNNER_VAR} unset): V2 for a dense model", {}, (RUNNER_VAR,)),
    "v1": (f"V1 pinned ({RUNNER_VAR}=0)", {RUNNER_VAR: "0"}, ()),
}
#: What each runner does with the graphs' memory before it sizes the KV cache.
GRAPH_RESERVE = {
    "V1": ("V1 subtracts its estimate ('Estimated CUDA graph memory') before sizing the KV cache "
           "(vllm/v1/worker/gpu_worker.py:500-545, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1, "
           "the default)"),
    "V2": ("V2 reserves none: its profile_cudagraph_memory returns 0 "
           "(vllm/v1/worker/gpu/model_runner.py:705-707), so it logs no 'Estimated CUDA graph "
           "memory' (expected) and sizes the KV cache without subtracting the graphs, which then "
           "come out of the memory outside --gpu-memory-utilization"),
}

#: preset -> the run options it sets; an option given on the command line wins.
PRESETS = {
    "modes": {"help": "the graph modes of one small model (the default)",
              "models": [DEFAULT_MODEL],
              "variants": ["eager", "none", "piecewise", "full_decode_only", "full_and_piecewise"],
              "batch_sizes": list(DEFAULT_BATCH_SIZES), "output_lens": list(DEFAULT_OUTPUT_LENS),
              "runners": list(RUNNERS)},
    "lesson": {"help": f"the lesson's command, quick path: {LESSON_MODEL}, default vs "
                       "--enforce-eager, batch 1, on a 24 GB GPU",
               "models": [LESSON_MODEL], "variants": ["default", "eager"], "batch_sizes": [1],
               "output_lens": list(DEFAULT_OUTPUT_LENS), "runners": list(RUNNERS)},
    "small-vs-large": {"help": f"{DEFAULT_MODEL} beside {LESSON_MODEL}, default vs eager, batch "
                               "1: smaller compute, bigger gain from graphs",
                       "models": [DEFAULT_MODEL, LESSON_MODEL], "variants": ["default", "eager"],
                       "batch_sizes": [1], "output_lens": list(DEFAULT_OUTPUT_LENS),
                       "runners": list(RUNNERS)},
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

MANIFEST, RESULT_JSON, RESULT_SVG, MODEL_CONFIG = ("runs.json", "vllm-lab.json", "vllm-lab.svg",
                                                   "model-config.json")


def slug(model: str) -> str:
    """A model name as a file name: ``Qwen/Qwen2.5-0.5B-Instruct`` -> ``Qwen--Qwen2.5-0.5B-Instruct``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model.replace("/", "--"))


def model_config_name(model: str) -> str:
    """The file a model's config.json is saved as in the folder (``model-config.json`` is read when
    it is missing: folders written before the lab ran several models)."""
    return f"model-config-{slug(model)}.json"


# --- the commands ------------------------------------------------------------------------------


def bench_command(variant: str, model: str, batch_size: int, output_len: int, input_len: int,
                  json_path: str, num_iters: int = 10, num_iters_warmup: int = 3,
                  max_model_len: int = 2048, gpu_memory_utilization: float = 0.9,
                  vllm: str = "vllm") -> list[str]:
    """One ``vllm bench latency`` command line (a list of words) for ``variant``."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {list(VARIANTS)}, got {variant!r}")
    return [vllm, "bench", "latency", "--model", model, "--seed", "0",
            "--max-model-len", str(max_model_len),
            "--gpu-memory-utilization", str(gpu_memory_utilization),
            "--input-len", str(input_len), "--output-len", str(output_len),
            "--batch-size", str(batch_size), "--num-iters-warmup", str(num_iters_warmup),
            "--num-iters", str(num_iters), "--disable-detokenize", "--output-json", json_path,
            *VARIANTS[variant][1]]


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
    return shlex.join(["env", *(w for var in unsets for w in ("-u", var)),
                       *(f"{k}={v}" for k, v in {**RUN_ENV, **sets}.items())])


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
                        runs.append({**({"model": m} if m else {}), "runner": r, "variant": v,
                                     "batch_size": b, "output_len": o, "log": f"{stem}.log",
                                     "json": f"{stem}.json"})
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
    return (f"time budget: about {seconds / 60:.0f} min for {len(runs)} vLLM starts (an ESTIMATE, "
            f"not measured: {START_S} s a start, +{COMPILE_S} s to compile, +{CAPTURE_S} s to "
            f"capture, {STEP_S * 1e3:.0f} ms a decode step; without the first download)")


# --- reading vLLM's log ------------------------------------------------------------------------

NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
#: key -> the message's pattern, found anywhere in a line (vLLM prefixes its lines with the level,
#: the time and [file:line], and the engine process adds "(EngineCore pid=4242) "). The tests
#: build each message from its recorded format string (coursekit/data/vllm-0.26.0-formats.json:
#: the key itself, or the keys named in the comment above the pattern).
PATTERNS = {
    # V1: "Model loading took %s GiB memory and %.6f seconds" (vllm/v1/worker/
    # gpu_model_runner.py:5347-5348); V2: "Model loading took %s GiB and %.6f seconds" (vllm/v1/
    # worker/gpu/model_runner.py:305-306). The word "memory" tells the runners apart.
    "model_loading": re.compile(rf"Model loading took (?P<gib>{NUMBER}) GiB(?P<memory> memory)? "
                                rf"and (?P<secs>{NUMBER}) seconds"),
    "kv_cache_memory": re.compile(rf"Available KV cache memory: (?P<gib>{NUMBER}) GiB"),
    "kv_cache_tokens": re.compile(r"GPU KV cache size: (?P<tokens>\d[\d,]*) tokens"),
    "max_concurrency": re.compile(rf"Maximum concurrency for (?P<tokens>\d[\d,]*) tokens per "
                                  rf"request: (?P<x>{NUMBER})x"),
    # V1 only (vllm/v1/worker/gpu_model_runner.py:6737-6740); V2's estimate is 0 and not logged.
    "graph_memory_estimate": re.compile(rf"Estimated CUDA graph memory: (?P<gib>{NUMBER}) GiB "
                                        "total"),
    "graph_capture": re.compile(rf"Graph capturing finished in (?P<secs>{NUMBER}) secs, took "
                                rf"(?P<gib>{NUMBER}) GiB"),
    "graph_pool_memory": re.compile(rf"CUDA graph pool memory: (?P<actual>{NUMBER}) GiB "
                                    rf"\(actual\), (?P<estimated>{NUMBER}) GiB \(estimated\)"),
    "graph_capture_skipped": re.compile(r"Skipping CUDA graph capture"),
    "enforce_eager": re.compile(r"Enforce eager set, disabling torch\.compile and CUDAGraphs"),
    "mode_changed": re.compile(r"; setting cudagraph_mode=(?P<mode>[A-Z_]+)"),
    "engine_config": re.compile(r"Initializing a V1 LLM engine \(v(?P<version>[^)\s]+)\) with "
                                r"config: .*?\bdtype=(?:torch\.)?(?P<dtype>\w+), .*?"
                                r"\bkv_cache_dtype=(?P<kv_dtype>\w+)"),
    "bench_avg_latency": re.compile(rf"^Avg latency: (?P<secs>{NUMBER}) seconds"),
    "bench_percentile": re.compile(rf"^(?P<pct>\d+)% percentile latency: (?P<secs>{NUMBER}) "
                                   "seconds"),
    # logger.info_once("Using V2 Model Runner") (vllm/v1/worker/gpu_worker.py:377-378): V2 only.
    "runner_v2": re.compile(r"Using V2 Model Runner"),
    # Recorded as runner_v2_declined_triton and runner_v2_declined_unsupported. vLLM chose V1
    # although the variable was unset (vllm/config/vllm.py:577-579: "Model Runner
    # V2 requires Triton; using the V1 model runner instead."; vllm/config/vllm.py:584-588: "Model
    # Runner V2 does not yet support %s; using the V1 model runner instead.").
    "runner_v2_declined": re.compile(r"Model Runner V2 (?P<why>requires Triton|does not yet "
                                     r"support .*?); using the V1 model runner instead"),
    # Recorded as graph_estimate_applied_enabled and _disabled. Logged only when a V1 estimate > 0
    # (vllm/v1/worker/gpu_worker.py:565-600): "CUDA graph
    # memory profiling is enabled (default since v0.21.0). ..." (575-576) or "... is disabled
    # (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). ..." (592-593, the estimate is not subtracted).
    "graph_estimate_applied": re.compile(r"CUDA graph memory profiling is (?P<state>enabled|"
                                         r"disabled)"),
}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def parse_log(text: str) -> dict:
    """What one run's log says: a dict of floats, ints, strings and flags; a key is missing when
    its message is not in the log. The first occurrence of a message counts. ``runner`` ("V1",
    "V2", "V1 and V2" when the log contradicts itself, or missing) and ``runner_evidence`` (the
    messages that told) say which model runner ran."""
    facts: dict = {}
    percentiles = {}
    for raw in re.split(r"[\r\n]+", ANSI.sub("", text)):
        line = raw.strip()
        for key, pattern in PATTERNS.items():
            match = pattern.search(line)
            if match is None:
                continue
            got = match.groupdict()
            if key == "bench_percentile":
                percentiles.setdefault(int(got["pct"]), float(got["secs"]))
                continue
            if key in facts:
                continue
            if key in ("graph_capture_skipped", "enforce_eager", "runner_v2"):
                facts[key] = True
            elif key == "kv_cache_tokens":
                facts[key] = int(got["tokens"].replace(",", ""))
            elif key == "max_concurrency":
                facts[key] = {"tokens_per_request": int(got["tokens"].replace(",", "")),
                              "times": float(got["x"])}
            elif key == "model_loading":
                facts[key] = {"gib": float(got["gib"]), "secs": float(got["secs"])}
                facts["model_loading_runner"] = "V1" if got["memory"] else "V2"
            elif key == "graph_estimate_applied":
                facts[key] = got["state"] == "enabled"
            elif key in ("mode_changed", "engine_config", "runner_v2_declined"):
                facts[key] = got
            else:
                facts[key] = {k: float(v) for k, v in got.items()}
    if percentiles:
        facts["bench_percentiles"] = percentiles
    evidence = runner_evidence(facts)
    if evidence:
        facts["runner_evidence"] = evidence
        found = sorted({runner for runner, _ in evidence})
        facts["runner"] = " and ".join(found)
    return facts


def runner_evidence(facts: dict) -> list[tuple[str, str]]:
    """(runner, the message that says so) for each message of ``facts`` that only one runner logs."""
    evidence = []
    if facts.get("runner_v2"):
        evidence.append(("V2", "'Using V2 Model Runner'"))
    if "model_loading_runner" in facts:
        evidence.append((facts["model_loading_runner"], "'Model loading took ... GiB "
                         + ("memory and'" if facts["model_loading_runner"] == "V1" else "and'")))
    if "graph_memory_estimate" in facts:
        evidence.append(("V1", "'Estimated CUDA graph memory'"))
    if "graph_estimate_applied" in facts:
        evidence.append(("V1", "'CUDA graph memory profiling is ...'"))
    if "runner_v2_declined" in facts:
        evidence.append(("V1", f"'Model Runner V2 {facts['runner_v2_declined']['why']}; using the "
                               "V1 model runner instead'"))
    return evidence


def latency_seconds(json_text: str | None, facts: dict) -> float | None:
    """The run's latency in seconds: the median (percentile 50) of ``--output-json``, else its
    mean, else the "Avg latency" line of the log; None when there is none."""
    if json_text:
        try:
            data = json.loads(json_text)
        except ValueError:
            data = {}
        median = (data.get("percentiles") or {}).get("50")
        if isinstance(median, (int, float)):
            return float(median)
        if isinstance(data.get("avg_latency"), (int, float)):
            return float(data["avg_latency"])
    median = facts.get("bench_percentiles", {}).get(50)
    if median is not None:
        return median
    avg = facts.get("bench_avg_latency")
    return avg["secs"] if avg else None


# --- analysis: pure Python over the saved folder ------------------------------------------------


class NotARun(ValueError):
    """The folder is not a saved run of this lab."""


def load_runs(folder) -> dict:
    """The manifest of a saved folder, each run with its model, runner, parsed log (``facts``)
    and latency. Folders written before the lab had runners ran V1 only (their ``env`` pinned
    it); each of their runs is given that runner and the manifest's one model."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        runs = manifest["runs"]
        old_runner = ("v1" if (manifest.get("env") or {}).get(RUNNER_VAR) == "0"
                      else "default")
        for run in runs:
            run.setdefault("model", manifest.get("model"))
            run.setdefault("runner", old_runner)
            if not (isinstance(run["log"], str) and isinstance(run["json"], str)):
                raise TypeError(f"run {run!r}: 'log' and 'json' must be file names")
    except OSError:
        raise NotARun(f"FOLDER: {folder} has no {MANIFEST}: not a folder written by "
                      f"'python -m coursekit.vllm_lab run'") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NotARun(f"FOLDER: {folder / MANIFEST} is not this lab's manifest: "
                      f"{type(exc).__name__}: {exc}") from None
    for run in runs:
        log, out = folder / run["log"], folder / run["json"]
        run["facts"] = parse_log(log.read_text(encoding="utf-8", errors="replace")
                                 if log.is_file() else "")
        run["latency_s"] = latency_seconds(
            out.read_text(encoding="utf-8") if out.is_file() else None, run["facts"])
    manifest["models"] = list(dict.fromkeys(
        manifest.get("models") or [r["model"] for r in runs]))
    manifest["runners"] = list(dict.fromkeys(
        [r for r in manifest.get("runners") or [] if any(x["runner"] == r for x in runs)]
        + [r["runner"] for r in runs]))
    return manifest


def _slope(xs, ys) -> float:
    """Least-squares slope of ys against xs (at least two distinct xs)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _whole(value):
    return None if value is None else round(value)


def summarize(runs: list[dict], order=None) -> dict:
    """Per variant of ``runs`` (one model, one runner): the decode step time per batch size (ms,
    the slope of latency against output length), and the medians over its runs of what the logs
    say about memory and capture. ``order``: the variants' order (default: as they come)."""
    variants = {}
    names = list(dict.fromkeys([*(order or []), *(r["variant"] for r in runs)]))
    for name in names:
        mine = [r for r in runs if r["variant"] == name]
        if not mine:
            continue
        decode = {}
        for batch in sorted({r["batch_size"] for r in mine}):
            points = [(r["output_len"], r["latency_s"]) for r in mine
                      if r["batch_size"] == batch and r["latency_s"] is not None]
            if len({o for o, _ in points}) >= 2:
                decode[str(batch)] = _slope(*zip(*points)) * 1e3
        facts = [r["facts"] for r in mine]

        def pick(key, field, facts=facts):
            return _median([f[key][field] for f in facts if key in f])

        changed = sorted({f["mode_changed"]["mode"] for f in facts if "mode_changed" in f})
        variants[name] = {
            "label": VARIANTS.get(name, (name,))[0],
            "runs": len(mine), "runs_with_latency": sum(r["latency_s"] is not None for r in mine),
            "decode_ms": decode,
            "model_load_gib": pick("model_loading", "gib"),
            "kv_cache_gib": pick("kv_cache_memory", "gib"),
            "kv_cache_tokens": _whole(_median([f.get("kv_cache_tokens") for f in facts])),
            "graph_estimate_gib": pick("graph_memory_estimate", "gib"),
            "graph_capture_s": pick("graph_capture", "secs"),
            "graph_gib": pick("graph_capture", "gib"),
            "graph_skipped": any(f.get("graph_capture_skipped") for f in facts),
            "mode_changed_to": changed,
        }
    return variants


def kv_shape(model_config: dict | None, dtype: str | None) -> dict:
    """The KV-cache shape of exercise 9's ``kv_bytes_per_token`` from a Hugging Face
    ``config.json`` (dict) and the dtype vLLM ran with (the log's, else the config's)."""
    if not model_config:
        raise ValueError(f"--kv-shape: no {MODEL_CONFIG} in the folder; give "
                         "--kv-shape LAYERS,KV_HEADS,HEAD_DIM,DTYPE_BYTES")
    config = model_config.get("text_config") or model_config
    try:
        heads = int(config["num_attention_heads"])
        shape = {"n_layers": int(config["num_hidden_layers"]),
                 "n_kv_heads": int(config.get("num_key_value_heads") or heads),
                 "head_dim": int(config.get("head_dim") or config["hidden_size"] // heads)}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"--kv-shape: {MODEL_CONFIG} lacks {exc}; give --kv-shape "
                         "LAYERS,KV_HEADS,HEAD_DIM,DTYPE_BYTES") from None
    dtype = dtype or config.get("torch_dtype") or config.get("dtype") or model_config.get(
        "torch_dtype")
    if str(dtype) not in DTYPE_BYTES:
        raise ValueError(f"--kv-shape: cannot tell the bytes of dtype {dtype!r}; give --kv-shape "
                         "LAYERS,KV_HEADS,HEAD_DIM,DTYPE_BYTES")
    return {**shape, "dtype_bytes": DTYPE_BYTES[str(dtype)]}


def _per_model(value, models: list, option: str, example: str) -> list:
    """``value`` (None, one value, or a list of one per model) as a list of one per model."""
    if value is None:
        return [None] * len(models)
    values = value if isinstance(value, list) else [value]
    if len(values) != len(models):
        raise ValueError(f"{option}: the folder holds {len(models)} model(s) ({', '.join(models)}):"
                         f" give one {example} per model, in that order; got {len(values)}")
    return values


def _read_model_config(folder: Path, model: str) -> dict | None:
    for name in (model_config_name(model), MODEL_CONFIG):
        path = folder / name
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    return None


def _ran(runs: list[dict]) -> tuple[str | None, list[str]]:
    """The runner the logs of ``runs`` say ran ("V1", "V2", "V1 and V2" when they disagree, None
    when no log tells), and the messages that told."""
    found = sorted({r["facts"]["runner"] for r in runs if "runner" in r["facts"]})
    found = sorted({part for f in found for part in f.split(" and ")})
    evidence = sorted({f"{who}: {msg}" for r in runs for who, msg in
                       r["facts"].get("runner_evidence", [])})
    return (" and ".join(found) or None), evidence


def analyze(folder, impl: Implementation, kernels=None, tau_from=None, shape=None) -> dict:
    """The lab's record for a saved folder (see the module docstring): one group per model and
    runner, never mixed. ``kernels``: kernels per decode step, one int or a list of one per model
    (None: the estimate); ``tau_from``: a ``launch-tax.json`` (None: the bundled H200 tau);
    ``shape``: the KV shape, one dict or a list of one per model (None: from the folder's model
    config and the log)."""
    folder = Path(folder)
    manifest = load_runs(folder)
    models, runners = manifest["models"], manifest["runners"]
    kernels = _per_model(kernels, models, "--kernels-per-step", "K")
    shapes = _per_model(shape, models, "--kv-shape", "LAYERS,KV_HEADS,HEAD_DIM,DTYPE_BYTES")
    engines = [r["facts"]["engine_config"] for r in manifest["runs"]
               if "engine_config" in r["facts"]]
    version = next((e["version"] for e in engines), None)
    record = {
        "lab": "vllm_lab", "model": " vs ".join(models), "models": models, "runners": runners,
        "gpu": manifest.get("gpu"), "vllm": version or manifest.get("vllm"),
        "input_len": manifest.get("input_len"), "groups": [], "notes": [],
    }
    if version and version != VLLM_VERSION:
        record["notes"].append(f"the logs are from vLLM {version}; this lab reads "
                               f"vLLM {VLLM_VERSION}'s formats")

    def fit(ns, ms):
        return call_student(impl, "launch_model", "fit_launch_model", ns, ms)

    # Exercise 2's tau, fitted by exercise 1 when it comes from the student's launch-tax.json.
    record["tau_us"] = lesson.H200_TAU_EAGER_US
    record["tau_source"] = f"the bundled H200 run ({lesson.H200_DATE}), not measured on this GPU"
    tau_missing = None
    if tau_from is not None:
        record["tau_us"], record["tau_source"] = None, f"your {tau_from}, not fitted yet"
        launch_tax = load_record(tau_from, arg="--tau-from")
        try:
            record["tau_us"] = fit_record(launch_tax, fit)["tau_eager_us"]
            record["tau_source"] = f"your {tau_from}, fitted by exercise 1"
        except ExerciseNotFinished as exc:
            if exc.number != by_module("launch_model").number:
                raise
            tau_missing = exc

    for model, k_given, shape_given in zip(models, kernels, shapes):
        model_config = _read_model_config(folder, model)
        for runner in runners:
            runs = [r for r in manifest["runs"] if r["model"] == model and r["runner"] == runner]
            if not runs:
                continue
            group = _analyze_group(model, runner, runs, manifest.get("variants"), model_config,
                                   k_given, shape_given, impl, fit, record["tau_us"],
                                   tau_missing, several=len(models) > 1)
            record["groups"].append(group)
            record["notes"] += group.pop("notes")
    record["speedup_by_model"] = speedup_by_model(record) if len(models) > 1 else {}
    return record


def _analyze_group(model, runner, runs, order, model_config, kernels, shape, impl, fit, tau_us,
                   tau_missing, several) -> dict:
    """One model under one runner: its variants, tau_eff and KV tokens (see ``analyze``)."""
    variants = summarize(runs, order)
    ran, evidence = _ran(runs)
    name = f"{model}, runner {runner}"
    group = {"model": model, "runner": runner, "runner_asked": RUNNERS.get(runner, (runner,))[0],
             "runner_ran": ran, "runner_evidence": evidence,
             "graph_reserve": GRAPH_RESERVE.get(ran, "unknown: the log does not say which runner "
                                                     "ran"),
             "variants": variants, "notes": []}
    notes = group["notes"]
    expected = "V1" if runner == "v1" else None
    if ran is None:
        notes.append(f"{name}: no log says which model runner ran (see the logs)")
    elif " and " in ran:
        notes.append(f"{name}: the logs name both runners ({'; '.join(evidence)}); read its "
                     "numbers with care")
    elif expected and ran != expected:
        notes.append(f"{name}: asked for {expected}, but the log says {ran} ran")
    elif runner == "default" and ran == "V1":
        why = next((r["facts"]["runner_v2_declined"]["why"] for r in runs
                    if "runner_v2_declined" in r["facts"]), None)
        notes.append(f"{name}: vLLM chose V1 for this model"
                     + (f" (Model Runner V2 {why})" if why else ""))
    for v, x in variants.items():
        if x["mode_changed_to"]:
            notes.append(f"{name}, {v}: vLLM changed the graph mode to "
                         f"{', '.join(x['mode_changed_to'])} (see its log)")
        if ran == "V1" and x["graph_gib"] is not None and x["graph_estimate_gib"] is None:
            notes.append(f"{name}, {v}: V1 captured graphs but its log has no 'Estimated CUDA "
                         "graph memory' line, which V1 logs before it sizes the KV cache (see "
                         "the log)")

    # K: given, or the estimate from the model's layer count.
    layers = None
    if model_config:
        layers = (model_config.get("text_config") or model_config).get("num_hidden_layers")
    if kernels is not None:
        group["kernels_per_step"] = kernels
        group["kernels_per_step_source"] = "given (--kernels-per-step)"
    elif isinstance(layers, int):
        group["kernels_per_step"] = (KERNELS_PER_LAYER_ESTIMATE * layers
                                     + KERNELS_PER_STEP_EXTRA_ESTIMATE)
        group["kernels_per_step_source"] = (
            f"ESTIMATE, not measured: {KERNELS_PER_LAYER_ESTIMATE} per layer x {layers} layers "
            f"+ {KERNELS_PER_STEP_EXTRA_ESTIMATE}; give --kernels-per-step")
    else:
        group["kernels_per_step"] = None
        group["kernels_per_step_source"] = (f"unknown: no {MODEL_CONFIG} to estimate it from; "
                                            "give --kernels-per-step")

    # tau_eff per graph variant and batch size with exercise 1's fit.
    k = group["kernels_per_step"]
    baseline = "none" if variants.get("none", {}).get("decode_ms") else "eager"
    group["baseline"] = baseline
    try:
        if tau_missing is not None:
            raise tau_missing
        tau_eff = {}
        base_ms = variants.get(baseline, {}).get("decode_ms", {})
        for v in GRAPH_VARIANTS if k is not None and k >= 2 else ():
            for batch, graph_ms in variants.get(v, {}).get("decode_ms", {}).items():
                if batch in base_ms:
                    slope, _ = fit([1, k], [graph_ms, base_ms[batch]])
                    tau_eff.setdefault(v, {})[batch] = slope
        group["tau_eff_us"] = tau_eff
    except ExerciseNotFinished as exc:
        if exc.number != by_module("launch_model").number:
            raise
        group["tau_eff_missing"] = (f"not computed: exercise 1 is not finished ({exc}); "
                                    "tau_eff comes with its fit_launch_model")

    # KV tokens the graphs cost, with exercise 9.
    if shape is None:
        engine = next((r["facts"]["engine_config"] for r in runs
                       if "engine_config" in r["facts"]), {})
        dtype = engine.get("dtype") if engine.get("kv_dtype", "auto") == "auto" else None
        try:
            shape = kv_shape(model_config, dtype)
        except ValueError as exc:
            if not several:
                raise
            raise ValueError(f"{exc} (for {model}: one per model, in the folder's order)") from None
    group["kv_shape"] = shape
    try:
        per_token = call_student(impl, "tradeoffs", "kv_bytes_per_token", **shape)
        forgone = {}
        base_tokens = variants.get(baseline, {}).get("kv_cache_tokens")
        for v in GRAPH_VARIANTS:
            x = variants.get(v)
            if not x:
                continue
            row = {}
            for key, gib in (("from_graph_memory", x["graph_gib"]),
                             ("from_graph_estimate", x["graph_estimate_gib"])):
                if gib is not None:
                    # Exercise 9's rule for the runner that ran: V2 sizes the cache before its graphs.
                    row[key] = call_student(impl, "tradeoffs", "kv_tokens_forgone",
                                            max(0, round(gib * 1024 ** 3)), per_token,
                                            runner="v2" if group["runner_ran"] == "V2" else "v1")
            if base_tokens is not None and x["kv_cache_tokens"] is not None:
                row["measured"] = base_tokens - x["kv_cache_tokens"]
            forgone[v] = row
        group["kv_bytes_per_token"] = per_token
        group["kv_tokens_forgone"] = forgone
    except ExerciseNotFinished as exc:
        if exc.number != by_module("tradeoffs").number:
            raise
        group["kv_missing"] = (f"not computed: exercise 9 is not finished ({exc}); the tokens "
                               "come with its kv_bytes_per_token and kv_tokens_forgone")
    return group


def speedup_by_model(record: dict) -> dict:
    """runner -> variant -> batch -> model -> the variant's speedup over eager: the models side by
    side (smaller compute, bigger gain from graphs)."""
    table: dict = {}
    for group in record["groups"]:
        v = group["variants"]
        eager = v.get("eager", {}).get("decode_ms", {})
        for name, x in v.items():
            if name == "eager":
                continue
            for batch, ms in x["decode_ms"].items():
                if ms > 0 and batch in eager:
                    table.setdefault(group["runner"], {}).setdefault(name, {}).setdefault(
                        batch, {})[group["model"]] = eager[batch] / ms
    return table


def group_of(record: dict, model: str | None = None, runner: str | None = None) -> dict:
    """The record's group of ``model`` (default: the first) under ``runner`` (default: the first)."""
    model = model or record["models"][0]
    runner = runner or record["runners"][0]
    for group in record["groups"]:
        if group["model"] == model and group["runner"] == runner:
            return group
    raise KeyError(f"no runs of {model} under runner {runner}")


def _f(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def _short(model: str) -> str:
    return model.rsplit("/", 1)[-1]


def _group_title(group: dict) -> str:
    ran = group["runner_ran"] or "not told by the log"
    return (f"{group['model']} · runner {group['runner']} ({group['runner_asked']}) · ran: {ran}"
            + (f" (from {'; '.join(group['runner_evidence'])})" if group["runner_evidence"]
               else ""))


def report(record: dict) -> str:
    """The lab's text report for a record from ``analyze`` (exercises 1 and 9 may be missing):
    one section per model and runner, then the runners and the models side by side."""
    lines = [f"vLLM {record.get('vllm')} on {record.get('gpu')}, model {record.get('model')}, "
             f"runners {', '.join(record['runners'])}",
             f"Exercise 2's tau = {_f(record['tau_us'], '.2f')} µs: {record['tau_source']}"]
    for group in record["groups"]:
        lines += ["", "== " + _group_title(group), *_group_lines(group, record)]
    lines += _runners_side_by_side(record)
    lines += _models_side_by_side(record)
    lines += [f"note: {n}" for n in record.get("notes", [])]
    return "\n".join(lines)


def _group_lines(group: dict, record: dict) -> list[str]:
    v = group["variants"]
    batches = sorted({int(b) for x in v.values() for b in x["decode_ms"]})
    lines = ["Decode step (ms; slope of latency against output length) and speedup over eager",
             f"  {'variant':20}" + "".join(f"{'batch ' + str(b):>18}" for b in batches)]
    eager = v.get("eager", {}).get("decode_ms", {})
    for name, x in v.items():
        cells = []
        for b in batches:
            ms = x["decode_ms"].get(str(b))
            speed = (f" ({eager[str(b)] / ms:.2f}x)" if ms and str(b) in eager and name != "eager"
                     else "")
            cells.append(f"{_f(ms, '.3f') + speed:>18}")
        lines.append(f"  {name:20}" + "".join(cells))
    lines += ["Memory and capture (medians over each variant's runs; '-': not in the log)",
              f"  {'variant':20}{'KV GiB':>8}{'KV tokens':>12}{'graphs GiB':>12}"
              f"{'estimate':>10}{'capture s':>11}"]
    for name, x in v.items():
        lines.append(f"  {name:20}{_f(x['kv_cache_gib'], '8.2f', '       -')}"
                     f"{_f(x['kv_cache_tokens'], '12,.0f', '           -')}"
                     f"{_f(x['graph_gib'], '12.2f', '           -')}"
                     f"{_f(x['graph_estimate_gib'], '10.2f', '         -')}"
                     f"{_f(x['graph_capture_s'], '11.0f', '          -')}")
    lines.append(f"Graph memory before the KV cache: {group['graph_reserve']}")
    lines.append(f"Kernels per decode step K = {group['kernels_per_step']}: "
                 f"{group['kernels_per_step_source']}")
    if "tau_eff_us" not in group:
        lines.append("tau_eff: " + group.get("tau_eff_missing", "not computed"))
    elif not group["tau_eff_us"]:
        lines.append("tau_eff: nothing to fit (needs K and decode times of a graph variant and "
                     "of the baseline)")
    else:
        lines.append(f"tau_eff (exercise 1's fit through (1, graph ms) and (K, {group['baseline']}"
                     " ms)), µs per launch removed; tau_eff / tau:")
        for name, row in group["tau_eff_us"].items():
            lines.append(f"  {name:20}" + "  ".join(
                f"batch {b}: {t:.2f}" + (f" ({t / record['tau_us']:.1f}x)" if record["tau_us"]
                                         else "") for b, t in row.items()))
    if "kv_tokens_forgone" not in group:
        lines.append("KV tokens forgone: " + group.get("kv_missing", "not computed"))
    else:
        lines.append(f"KV cache per token (exercise 9): {group['kv_bytes_per_token']} bytes "
                     f"{group['kv_shape']}")
        v2 = group["runner_ran"] == "V2"
        for name, row in group["kv_tokens_forgone"].items():
            estimate = ("none (V2 reserves none)" if v2 and "from_graph_estimate" not in row
                        else _f(row.get("from_graph_estimate"), ","))
            lines.append(f"  {name:20}graphs' memory -> {_f(row.get('from_graph_memory'), ',')} "
                         f"tokens; vLLM's estimate -> {estimate}; "
                         f"measured {group['baseline']} - {name}: "
                         f"{_f(row.get('measured'), ',')}")
    return lines


def _runners_side_by_side(record: dict) -> list[str]:
    """Per model and variant, each runner's KV cache, graphs and decode time (when >1 runner)."""
    runners = record["runners"]
    if len(runners) < 2:
        return []
    lines = ["", "Runners side by side (" + " | ".join(runners) + "): KV tokens; graphs GiB; "
             "vLLM's estimate GiB; decode ms per batch"]
    for model in record["models"]:
        groups = {g["runner"]: g for g in record["groups"] if g["model"] == model}
        lines.append(f"  {model}: " + ", ".join(f"{r} ran {_f(groups[r]['runner_ran'], 's')}"
                                                for r in runners if r in groups))
        names = list(dict.fromkeys(n for g in groups.values() for n in g["variants"]))
        for name in names:
            cells = [groups.get(r, {}).get("variants", {}).get(name) for r in runners]

            def each(key, spec, cells=cells):
                return " | ".join("-" if c is None else _f(c[key], spec) for c in cells)

            batches = sorted({int(b) for c in cells if c for b in c["decode_ms"]})
            decode = "; ".join(f"b{b} " + " | ".join(
                "-" if c is None else _f(c["decode_ms"].get(str(b)), ".3f") for c in cells)
                for b in batches)
            lines.append(f"    {name:20}KV {each('kv_cache_tokens', ',.0f')}; graphs "
                         f"{each('graph_gib', '.2f')}; estimate {each('graph_estimate_gib', '.2f')}"
                         f"; {decode}")
    return lines


def _models_side_by_side(record: dict) -> list[str]:
    """The speedup over eager per model, side by side (when >1 model)."""
    table = record.get("speedup_by_model") or {}
    if not table:
        return []
    models = record["models"]
    lines = ["", "Speedup over eager per model, side by side (" + " | ".join(map(_short, models))
             + "): smaller compute, bigger gain from graphs?"]
    for runner, rows in table.items():
        for name, per_batch in rows.items():
            for batch, per_model in sorted(per_batch.items(), key=lambda kv: int(kv[0])):
                lines.append(f"  runner {runner:8}{name:20}batch {batch:>4}: " + " | ".join(
                    f"{_short(m)} {_f(per_model.get(m), '.2f')}x" for m in models))
    return lines


def chart_panels(record: dict) -> tuple[list[dict], list[str]]:
    """The chart: (a) decode step time against batch size per model, runner and variant, (b)
    speedup over eager, (c) tau_eff beside exercise 2's tau (when fitted). Colour: the variant;
    a dashed line: the V1 pin; several models: the model's name in the series."""
    times, speedups, taus = [], [], []
    several = len(record["groups"]) > 1
    for group in record["groups"]:
        v = group["variants"]
        tag = (f"{_short(group['model']) + ' ' if len(record['models']) > 1 else ''}"
               f"{group['runner']} " if several else "")
        dash = "dashed" if group["runner"] == "v1" and len(record["runners"]) > 1 else None
        eager = v.get("eager", {}).get("decode_ms", {})
        for name, x in v.items():
            colour = COLOURS.get(name, "#333")
            points = sorted((int(b), ms) for b, ms in x["decode_ms"].items() if ms > 0)
            if points:
                times.append({"name": f"{tag}{name}: {x['label']}", "colour": colour,
                              "style": "line", "dash": dash, "points": points})
                times.append({"name": f"{tag}{name}, measured", "colour": colour,
                              "style": "points", "points": points})
            ratio = [(b, eager[str(b)] / ms) for b, ms in points if str(b) in eager]
            if name != "eager" and ratio:
                speedups.append({"name": f"{tag}{name}", "colour": colour, "style": "line",
                                 "dash": dash, "points": ratio})
                speedups.append({"name": f"{tag}{name}, measured", "colour": colour,
                                 "style": "points", "points": ratio})
        for name, row in group.get("tau_eff_us", {}).items():
            points = sorted((int(b), t) for b, t in row.items())
            taus.append({"name": f"tau_eff, {tag}{name}", "colour": COLOURS.get(name, "#333"),
                         "style": "line", "dash": dash, "points": points})
    if not times:
        raise ValueError("FOLDER: no variant has decode times (each batch size needs two output "
                         "lengths that ran)")
    panels = [{"name": "(a) decode step time", "y_label": "ms per decode step", "height": 280,
               "series": times}]
    if speedups:
        panels.append({"name": "(b) speedup over --enforce-eager", "y_label": "eager ÷ variant",
                       "height": 200, "series": speedups})
    if taus and record["tau_us"]:
        xs = [x for s in taus for x, _ in s["points"]]
        taus.append({"name": f"exercise 2's tau: {record['tau_us']:.2f} µs", "colour": "#555",
                     "style": "line", "dash": "dotted",
                     "points": [(min(xs), record["tau_us"]), (max(xs), record["tau_us"])]})
        ks = sorted({(g["kernels_per_step"], g["kernels_per_step_source"].startswith("given"))
                     for g in record["groups"] if g.get("tau_eff_us")})
        panels.append({"name": "(c) tau_eff: µs per launch the graphs removed",
                       "y_label": "µs per launch", "height": 200, "series": taus,
                       "notes": [f"K = {', '.join(str(k) for k, _ in ks)} kernels per decode "
                                 "step,", "given" if all(g for _, g in ks)
                                 else "an ESTIMATE, not measured"]})
    caption = [f"vLLM {record.get('vllm')}, {record.get('model')}, on {record.get('gpu')}; decode "
               "time = slope of latency against output length."]
    if len(record["runners"]) > 1:
        caption.append("Solid: vLLM's own runner choice (default); dashed: V1 pinned "
                       f"({RUNNER_VAR}=0).")
    for group in record["groups"]:
        for name, x in group["variants"].items():
            graphs = ("no graphs captured" if x["graph_gib"] is None else
                      f"graphs {x['graph_gib']:.2f} GiB, captured in "
                      f"{_f(x['graph_capture_s'], '.0f')} s")
            who = (f"{_short(group['model'])}, {group['runner']} "
                   f"(ran {group['runner_ran'] or '?'}), " if several else "")
            caption.append(f"{who}{name}: KV cache {_f(x['kv_cache_tokens'], ',')} tokens "
                           f"({_f(x['kv_cache_gib'], '.2f')} GiB), {graphs}")
    return panels, caption


def write_outputs(record: dict, folder) -> tuple[Path, Path]:
    folder = Path(folder)
    json_path = folder / RESULT_JSON
    json_path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    panels, caption = chart_panels(record)
    svg_path = figure(folder / RESULT_SVG, panels, x_label="batch size", caption=caption,
                      title=f"vLLM CUDA graph modes: {record.get('model')} on {record.get('gpu')}")
    return json_path, svg_path


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
            problems.append(f"vLLM {found} is installed, this lab reads vLLM {VLLM_VERSION}'s "
                            f"logs (pip install vllm=={VLLM_VERSION})")
    except PackageNotFoundError:
        problems.append(f"vLLM is not installed (pip install vllm=={VLLM_VERSION})")
    if not problems:
        return None
    return ("vllm_lab run: needs a CUDA GPU and vLLM " + VLLM_VERSION + "; here: "
            + "; ".join(problems) + ". Saved logs are read anywhere: python -m coursekit.vllm_lab "
            "analyze FOLDER")


def run(args) -> Path:
    """Every run of the plan, one after the other; each log and JSON kept in ``args.out``."""
    import torch

    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    runs = plan(args.variants, args.batch_sizes, args.output_lens, args.runners, args.models)
    print(budget_line(runs, args.num_iters, args.num_iters_warmup))
    for i, entry in enumerate(runs, 1):
        entry["command"] = bench_command(
            entry["variant"], entry["model"], entry["batch_size"], entry["output_len"],
            args.input_len, str(out / entry["json"]), args.num_iters, args.num_iters_warmup,
            args.max_model_len, args.gpu_memory_utilization)
        entry["env"] = env_prefix(entry["runner"])
        print(f"[{i}/{len(runs)}] {_short(entry['model'])}, runner {entry['runner']}, "
              f"{entry['variant']}, batch {entry['batch_size']}, output {entry['output_len']} ...",
              end=" ", flush=True)
        start = time.perf_counter()
        with open(out / entry["log"], "w", encoding="utf-8") as log:
            try:
                done = subprocess.run(entry["command"], stdout=log, stderr=subprocess.STDOUT,
                                      env=runner_env(entry["runner"]), timeout=args.run_timeout)
                entry["returncode"] = done.returncode
            except subprocess.TimeoutExpired:
                entry["returncode"] = "timeout"
        entry["seconds"] = round(time.perf_counter() - start, 1)
        print(f"{entry['seconds']:.0f} s, exit {entry['returncode']}"
              + ("" if entry["returncode"] == 0 else f" (see {out / entry['log']})"))
    manifest = {"lab": "vllm_lab", "vllm": VLLM_VERSION, "gpu": torch.cuda.get_device_name(),
                "env": RUN_ENV, "preset": args.preset, "models": args.models,
                "model": " vs ".join(args.models), "runners": args.runners,
                "runner_env": {r: {"set": RUNNERS[r][1], "unset": list(RUNNERS[r][2])}
                               for r in args.runners},
                "input_len": args.input_len, "variants": args.variants,
                "batch_sizes": args.batch_sizes, "output_lens": args.output_lens,
                "budget_estimate_s": estimate_seconds(runs, args.num_iters,
                                                      args.num_iters_warmup), "runs": runs}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    for model in args.models:  # each model's config.json, for exercise 9's KV shape
        try:  # transformers comes with vLLM
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(model).to_dict()
            (out / model_config_name(model)).write_text(
                json.dumps(config, indent=1, default=str) + "\n", encoding="utf-8")
        except Exception as exc:  # noqa: BLE001 - analyze says what is missing and how to give it
            print(f"could not save {model}'s config ({type(exc).__name__}: {exc}); give "
                  "--kv-shape to analyze", file=sys.stderr)
    return out


# --- command line ------------------------------------------------------------------------------


def _shape(text: str) -> dict:
    parts = text.split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 4 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected LAYERS,KV_HEADS,HEAD_DIM,DTYPE_BYTES (four "
                                         f"ints >= 1, e.g. 24,2,64,2), got {text!r}")
    return dict(zip(("n_layers", "n_kv_heads", "head_dim", "dtype_bytes"), values))


RUN_STATUS = ("Runs vllm bench latency per model, variant, batch size, output length and model "
              "runner on this GPU (vLLM 0.26.0), then analyzes the folder. Not yet run on a GPU: "
              "the commands were checked against vLLM 0.26.0's source and the parser tested on "
              "text built from its format strings only.")


def _add_analysis_options(parser) -> None:
    parser.add_argument("--impl", default="exercises",
                        help="your exercises (default), or a folder of module files: exercise "
                        "1's fit_launch_model and exercise 9's kv_bytes_per_token and "
                        "kv_tokens_forgone come from it")
    parser.add_argument("--kernels-per-step", type=positive_int, nargs="+", metavar="K",
                        help="kernels one decode step launches without graphs, one per model in "
                        "the folder's order; NOT in vLLM's log. Default: an ESTIMATE, "
                        f"{KERNELS_PER_LAYER_ESTIMATE} per decoder layer + "
                        f"{KERNELS_PER_STEP_EXTRA_ESTIMATE}")
    parser.add_argument("--tau-from", metavar="FILE",
                        help="your launch-tax.json (python -m coursekit.lab launch-tax) for "
                        "exercise 2's tau; default: the bundled H200 tau")
    parser.add_argument("--kv-shape", type=_shape, nargs="+", metavar="L,H,D,B",
                        help="layers, KV heads, head size, dtype bytes, one per model in the "
                        "folder's order; default: from the folder's saved model config and the "
                        "log's dtype")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m coursekit.vllm_lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run_p = commands.add_parser("run", help="run vLLM's latency benchmark per variant and runner "
                                "(GPU, vLLM 0.26.0), then analyze", description=RUN_STATUS)
    run_p.add_argument("--out", default="vllm-lab",
                       help="folder for the logs and results (default: %(default)s)")
    run_p.add_argument("--preset", choices=list(PRESETS), default=DEFAULT_PRESET,
                       help="; ".join(f"{k}: {v['help']}" for k, v in PRESETS.items())
                       + " (default: %(default)s); the options below win over it")
    run_p.add_argument("--model", nargs="+", dest="models", metavar="MODEL",
                       help=f"one or more (default: the preset's; {DEFAULT_MODEL} for modes)")
    run_p.add_argument("--runners", nargs="+", choices=list(RUNNERS), metavar="RUNNER",
                       help="; ".join(f"{k}: {v[0]}" for k, v in RUNNERS.items())
                       + " (default: both)")
    run_p.add_argument("--variants", nargs="+", choices=list(VARIANTS), metavar="VARIANT",
                       help=f"of {', '.join(VARIANTS)} (default: the preset's)")
    run_p.add_argument("--batch-sizes", type=positive_int, nargs="+", metavar="B",
                       help="default: the preset's")
    run_p.add_argument("--output-lens", type=positive_int, nargs="+", metavar="N",
                       help="at least two, so prefill cancels (default: the preset's)")
    run_p.add_argument("--input-len", type=positive_int, default=32, help="default: %(default)s")
    run_p.add_argument("--num-iters", type=positive_int, default=10, help="default: %(default)s")
    run_p.add_argument("--num-iters-warmup", type=positive_int, default=3, help="default: %(default)s")
    run_p.add_argument("--max-model-len", type=positive_int, default=2048, help="default: %(default)s")
    run_p.add_argument("--gpu-memory-utilization", type=number_in(0, 1, high_closed=True), default=0.9,
                       help="default: %(default)s")
    run_p.add_argument("--run-timeout", type=positive_int, default=1800, metavar="SECONDS",
                       help="per benchmark run (default: %(default)s)")
    run_p.add_argument("--dry-run", action="store_true",
                       help="print the commands and the time budget (an estimate) and exit; "
                       "runs nothing, needs nothing")
    _add_analysis_options(run_p)
    analyze_p = commands.add_parser("analyze", help="read a saved folder: report, JSON and SVG "
                                    "(any machine)")
    analyze_p.add_argument("folder", metavar="FOLDER", help="a folder written by run")
    _add_analysis_options(analyze_p)
    return parser


def _apply_preset(args) -> str | None:
    """Fill the run options not given from ``args.preset``; the error (naming the option) or None."""
    preset = PRESETS[args.preset]
    for key in ("models", "runners", "variants", "batch_sizes", "output_lens"):
        if getattr(args, key) is None:
            setattr(args, key, list(preset[key]))
        else:
            setattr(args, key, list(dict.fromkeys(getattr(args, key))))
    if len(args.output_lens) < 2:
        return (f"--output-lens: expected at least two distinct lengths (prefill cancels in their "
                f"difference), got {args.output_lens}")
    if args.max_model_len < args.input_len + max(args.output_lens):
        return (f"--max-model-len: expected at least --input-len + the longest --output-lens = "
                f"{args.input_len + max(args.output_lens)}, got {args.max_model_len}")
    bad = [m for m in args.models if not m.strip() or m.startswith("-")]
    if bad:
        return f"--model: expected a Hugging Face model name or a local path, got {bad[0]!r}"
    return None


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage error (or --help)
        return exc.code
    if args.command == "run":
        problem = _apply_preset(args)
        if problem:
            print(f"vllm_lab: {problem}", file=sys.stderr)
            return 2
        if args.dry_run:
            runs = plan(args.variants, args.batch_sizes, args.output_lens, args.runners,
                        args.models)
            for entry in runs:
                print(env_prefix(entry["runner"]) + " " + shlex.join(bench_command(
                    entry["variant"], entry["model"], entry["batch_size"], entry["output_len"],
                    args.input_len, str(Path(args.out) / entry["json"]), args.num_iters,
                    args.num_iters_warmup, args.max_model_len, args.gpu_memory_utilization))
                    + f" > {Path(args.out) / entry['log']} 2>&1")
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


if __name__ == "__main__":
    raise SystemExit(main())
