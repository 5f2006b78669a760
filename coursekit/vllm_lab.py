"""Part B: vLLM end to end. The same model served by vLLM 0.26.0 with CUDA graphs off and in
three of its graph modes, on one GPU (written for a rented RTX 4090), read back from vLLM's own
logs and benchmark output.

Status: nothing of this lab has run on a GPU yet. Its command lines were checked against vLLM
0.26.0's source, and its log parser was tested on text built from vLLM 0.26.0's own format
strings (``coursekit/data/vllm-0.26.0-formats.json``, written by ``python -m
coursekit.record_vllm_formats``), not on a real GPU log. Treat the first GPU run as the test.

``run`` starts ``vllm bench latency`` once per variant, batch size and output length, and keeps
each run's log and ``--output-json``. It runs vLLM with ``VLLM_USE_V2_MODEL_RUNNER=0`` (saved in
the manifest's ``env``): vLLM 0.26.0 would give a dense model like the default Qwen2.5-0.5B its
V2 model runner, whose ``profile_cudagraph_memory`` returns 0, so no "Estimated CUDA graph
memory" is logged and nothing is set aside for the graphs before the KV cache is sized. The
course follows the V1 runner (``GPUModelRunner.capture_model`` and its CudagraphDispatcher), so
the lab pins it. The five variants:

    eager               --enforce-eager (vLLM turns off torch.compile and CUDA graphs)
    none                --compilation-config '{"cudagraph_mode": "NONE"}' (compiled, no graphs)
    piecewise           ... "PIECEWISE": graphs between the attention calls, attention eager
    full_decode_only    ... "FULL_DECODE_ONLY": one graph per decode step, prefill eager
    full_and_piecewise  ... "FULL_AND_PIECEWISE": full graphs for decode, piecewise for the rest

Two output lengths make prefill cancel: the decode step's time is the slope of the benchmark's
latency against the output length. ``analyze`` (no GPU needed) reads the saved folder and reports,
per variant: the decode step time at each batch size and the speedup over eager; the graph capture
time and memory ("Graph capturing finished in ... secs, took ... GiB"), vLLM's estimate of that
memory, and the KV cache ("Available KV cache memory: ... GiB", "GPU KV cache size: ... tokens").
Then two of your exercises:

* tau_eff, with exercise 1's ``fit_launch_model``: the line through (1 launch, graph step time)
  and (K launches, step time without graphs) has slope tau_eff, the time each removed launch cost.
  It is set beside exercise 2's tau, the CPU cost of one tiny launch (``--tau-from`` your
  ``launch-tax.json`` from ``python -m coursekit.lab launch-tax``; by default the bundled H200
  figure). K, the kernels per decode step, is NOT in vLLM's log: it is an input
  (``--kernels-per-step``). Without it the lab uses an ESTIMATE, 12 kernels per decoder layer
  plus 40 per step (embedding, final norm, LM head, sampler, input copies), and says so
  everywhere it is used; tau_eff scales as 1/(K-1), so a K 30 % off moves tau_eff 30 %. Count
  the kernels of one decode step in an Nsight Systems trace of the ``none`` variant to replace it.
  The baseline is ``none`` (same compiled kernels, only the graphs differ) when it was run, else
  ``eager`` (which also drops torch.compile's fusion, so its K is larger).
* KV tokens forgone, with exercise 9's ``kv_bytes_per_token`` (the model's layers, KV heads, head
  size and dtype, from the saved ``model-config.json`` and the log's dtype, or ``--kv-shape``) and
  ``kv_tokens_forgone``: the graphs' memory from the log in tokens of KV cache, beside the
  measured drop of "GPU KV cache size" from the baseline run to the graph run (the same
  baseline as tau_eff: ``none`` when run, as ``eager`` also turns off torch.compile, which
  changes the profiled peak memory and so the KV cache).

It writes ``vllm-lab.json`` and the chart ``vllm-lab.svg`` into the folder.

    python -m coursekit.vllm_lab run --out vllm-lab              # on the GPU machine, vLLM 0.26.0
    python -m coursekit.vllm_lab run --out vllm-lab --dry-run    # print the commands only
    python -m coursekit.vllm_lab analyze vllm-lab                # any machine, saved logs

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
GRAPH_VARIANTS = ("piecewise", "full_decode_only", "full_and_piecewise")
COLOURS = {"eager": "#d62728", "none": "#ff7f0e", "piecewise": "#2ca02c",
           "full_decode_only": "#1f77b4", "full_and_piecewise": "#6a3d9a"}

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"  # small: its decode step is launch-bound on a 4090
DEFAULT_BATCH_SIZES = (1, 8, 32)
DEFAULT_OUTPUT_LENS = (32, 160)
#: The estimate of kernels per decode step used when --kernels-per-step is not given (see the
#: module docstring): per decoder layer two fused add+RMSNorms, QKV GEMM, rotary, KV-cache write,
#: attention, output GEMM, gate-up GEMM, SiLU-and-mul, down GEMM and about two more small ones;
#: per step the embedding, final norm, LM head, the sampler and the input copies.
KERNELS_PER_LAYER_ESTIMATE, KERNELS_PER_STEP_EXTRA_ESTIMATE = 12, 40
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}

#: The environment ``run`` adds for vLLM (saved in the manifest as ``env``). vLLM 0.26.0 gives a
#: dense model such as the default one its V2 model runner unless VLLM_USE_V2_MODEL_RUNNER is set
#: (config/vllm.py, VllmConfig.use_v2_model_runner; envs.py reads the variable as bool(int(...)),
#: so "0" selects V1). The V2 runner's profile_cudagraph_memory returns 0: it logs no "Estimated
#: CUDA graph memory" and reserves nothing for the graphs before sizing the KV cache. The course
#: follows the V1 runner (GPUModelRunner.capture_model, CudagraphDispatcher), so the lab pins it.
RUN_ENV = {"VLLM_USE_V2_MODEL_RUNNER": "0", "NO_COLOR": "1", "VLLM_LOGGING_LEVEL": "INFO"}

MANIFEST, RESULT_JSON, RESULT_SVG, MODEL_CONFIG = ("runs.json", "vllm-lab.json", "vllm-lab.svg",
                                                   "model-config.json")


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


def plan(variants, batch_sizes, output_lens) -> list[dict]:
    """The runs, one per variant, batch size and output length, with their file names."""
    return [{"variant": v, "batch_size": b, "output_len": o,
             "log": f"runs/{v}-b{b}-o{o}.log", "json": f"runs/{v}-b{b}-o{o}.json"}
            for v in variants for b in batch_sizes for o in output_lens]


# --- reading vLLM's log ------------------------------------------------------------------------

NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
#: key -> the message's pattern, found anywhere in a line (vLLM prefixes its lines with the level,
#: the time and [file:line], and the engine process adds "(EngineCore pid=4242) "). Each is
#: checked against the recorded format string of the same key in FORMATS by the tests.
PATTERNS = {
    "model_loading": re.compile(rf"Model loading took (?P<gib>{NUMBER}) GiB(?: memory)? and "
                                rf"(?P<secs>{NUMBER}) seconds"),
    "kv_cache_memory": re.compile(rf"Available KV cache memory: (?P<gib>{NUMBER}) GiB"),
    "kv_cache_tokens": re.compile(r"GPU KV cache size: (?P<tokens>\d[\d,]*) tokens"),
    "max_concurrency": re.compile(rf"Maximum concurrency for (?P<tokens>\d[\d,]*) tokens per "
                                  rf"request: (?P<x>{NUMBER})x"),
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
}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def parse_log(text: str) -> dict:
    """What one run's log says: a dict of floats, ints, strings and flags; a key is missing when
    its message is not in the log. The first occurrence of a message counts."""
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
            if key in ("graph_capture_skipped", "enforce_eager"):
                facts[key] = True
            elif key == "kv_cache_tokens":
                facts[key] = int(got["tokens"].replace(",", ""))
            elif key == "max_concurrency":
                facts[key] = {"tokens_per_request": int(got["tokens"].replace(",", "")),
                              "times": float(got["x"])}
            elif key in ("mode_changed", "engine_config"):
                facts[key] = got
            else:
                facts[key] = {k: float(v) for k, v in got.items()}
    if percentiles:
        facts["bench_percentiles"] = percentiles
    return facts


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
    """The manifest of a saved folder, each run with its parsed log (``facts``) and latency."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        runs = manifest["runs"]
    except OSError:
        raise NotARun(f"FOLDER: {folder} has no {MANIFEST}: not a folder written by "
                      f"'python -m coursekit.vllm_lab run'") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise NotARun(f"FOLDER: {folder / MANIFEST} is not this lab's manifest: "
                      f"{type(exc).__name__}: {exc}") from None
    for run in runs:
        log, out = folder / run["log"], folder / run["json"]
        run["facts"] = parse_log(log.read_text(encoding="utf-8", errors="replace")
                                 if log.is_file() else "")
        run["latency_s"] = latency_seconds(
            out.read_text(encoding="utf-8") if out.is_file() else None, run["facts"])
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


def summarize(manifest: dict) -> dict:
    """Per variant: the decode step time per batch size (ms, the slope of latency against output
    length), and the medians over its runs of what the logs say about memory and capture."""
    variants = {}
    for name in manifest.get("variants", list(VARIANTS)):
        runs = [r for r in manifest["runs"] if r["variant"] == name]
        if not runs:
            continue
        decode = {}
        for batch in sorted({r["batch_size"] for r in runs}):
            points = [(r["output_len"], r["latency_s"]) for r in runs
                      if r["batch_size"] == batch and r["latency_s"] is not None]
            if len({o for o, _ in points}) >= 2:
                decode[str(batch)] = _slope(*zip(*points)) * 1e3
        facts = [r["facts"] for r in runs]

        def pick(key, field, facts=facts):
            return _median([f[key][field] for f in facts if key in f])

        changed = sorted({f["mode_changed"]["mode"] for f in facts if "mode_changed" in f})
        variants[name] = {
            "label": VARIANTS.get(name, (name,))[0],
            "runs": len(runs), "runs_with_latency": sum(r["latency_s"] is not None for r in runs),
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


def analyze(folder, impl: Implementation, kernels: int | None = None, tau_from=None,
            shape: dict | None = None) -> dict:
    """The lab's record for a saved folder (see the module docstring). ``kernels``: kernels per
    decode step (None: the estimate); ``tau_from``: a ``launch-tax.json`` (None: the bundled
    H200 tau); ``shape``: the KV shape (None: from the folder's model config and the log)."""
    folder = Path(folder)
    manifest = load_runs(folder)
    variants = summarize(manifest)
    config_path = folder / MODEL_CONFIG
    model_config = (json.loads(config_path.read_text(encoding="utf-8"))
                    if config_path.is_file() else None)
    engine = next((r["facts"]["engine_config"] for r in manifest["runs"]
                   if "engine_config" in r["facts"]), {})
    record = {
        "lab": "vllm_lab", "model": manifest.get("model"), "gpu": manifest.get("gpu"),
        "vllm": engine.get("version") or manifest.get("vllm"),
        "input_len": manifest.get("input_len"), "variants": variants, "notes": [],
    }
    if engine.get("version") and engine["version"] != VLLM_VERSION:
        record["notes"].append(f"the logs are from vLLM {engine['version']}; this lab reads "
                               f"vLLM {VLLM_VERSION}'s formats")
    for name, v in variants.items():
        if v["mode_changed_to"]:
            record["notes"].append(f"{name}: vLLM changed the graph mode to "
                                   f"{', '.join(v['mode_changed_to'])} (see its log)")

    # K: given, or the estimate from the model's layer count.
    layers = None
    if model_config:
        layers = (model_config.get("text_config") or model_config).get("num_hidden_layers")
    if kernels is not None:
        record["kernels_per_step"] = kernels
        record["kernels_per_step_source"] = "given (--kernels-per-step)"
    elif isinstance(layers, int):
        record["kernels_per_step"] = (KERNELS_PER_LAYER_ESTIMATE * layers
                                      + KERNELS_PER_STEP_EXTRA_ESTIMATE)
        record["kernels_per_step_source"] = (
            f"ESTIMATE, not measured: {KERNELS_PER_LAYER_ESTIMATE} per layer x {layers} layers "
            f"+ {KERNELS_PER_STEP_EXTRA_ESTIMATE}; give --kernels-per-step")
    else:
        record["kernels_per_step"] = None
        record["kernels_per_step_source"] = (f"unknown: no {MODEL_CONFIG} to estimate it from; "
                                             "give --kernels-per-step")

    def fit(ns, ms):
        return call_student(impl, "launch_model", "fit_launch_model", ns, ms)

    # Exercise 2's tau, and tau_eff per graph variant and batch size with exercise 1's fit.
    k = record["kernels_per_step"]
    baseline = "none" if variants.get("none", {}).get("decode_ms") else "eager"
    record["baseline"] = baseline
    record["tau_us"] = lesson.H200_TAU_EAGER_US
    record["tau_source"] = f"the bundled H200 run ({lesson.H200_DATE}), not measured on this GPU"
    try:
        if tau_from is not None:
            record["tau_us"], record["tau_source"] = None, f"your {tau_from}, not fitted yet"
            own = fit_record(load_record(tau_from, arg="--tau-from"), fit)
            record["tau_us"] = own["tau_eager_us"]
            record["tau_source"] = f"your {tau_from}, fitted by exercise 1"
        tau_eff = {}
        base_ms = variants.get(baseline, {}).get("decode_ms", {})
        for name in GRAPH_VARIANTS if k is not None and k >= 2 else ():
            for batch, graph_ms in variants.get(name, {}).get("decode_ms", {}).items():
                if batch in base_ms:
                    slope, _ = fit([1, k], [graph_ms, base_ms[batch]])
                    tau_eff.setdefault(name, {})[batch] = slope
        record["tau_eff_us"] = tau_eff
    except ExerciseNotFinished as exc:
        if exc.number != by_module("launch_model").number:
            raise
        record["tau_eff_missing"] = (f"not computed: exercise 1 is not finished ({exc}); "
                                     "tau_eff comes with its fit_launch_model")

    # KV tokens the graphs cost, with exercise 9.
    if shape is None:
        dtype = engine.get("dtype") if engine.get("kv_dtype", "auto") == "auto" else None
        shape = kv_shape(model_config, dtype)
    record["kv_shape"] = shape
    try:
        per_token = call_student(impl, "tradeoffs", "kv_bytes_per_token", **shape)
        forgone = {}
        base_tokens = variants.get(baseline, {}).get("kv_cache_tokens")
        for name in GRAPH_VARIANTS:
            v = variants.get(name)
            if not v:
                continue
            row = {}
            for key, gib in (("from_graph_memory", v["graph_gib"]),
                             ("from_graph_estimate", v["graph_estimate_gib"])):
                if gib is not None:
                    row[key] = call_student(impl, "tradeoffs", "kv_tokens_forgone",
                                            max(0, round(gib * 1024 ** 3)), per_token)
            if base_tokens is not None and v["kv_cache_tokens"] is not None:
                row["measured"] = base_tokens - v["kv_cache_tokens"]
            forgone[name] = row
        record["kv_bytes_per_token"] = per_token
        record["kv_tokens_forgone"] = forgone
    except ExerciseNotFinished as exc:
        if exc.number != by_module("tradeoffs").number:
            raise
        record["kv_missing"] = (f"not computed: exercise 9 is not finished ({exc}); the tokens "
                                "come with its kv_bytes_per_token and kv_tokens_forgone")
    return record


def _f(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def report(record: dict) -> str:
    """The lab's text report for a record from ``analyze`` (exercises 1 and 9 may be missing)."""
    v = record["variants"]
    batches = sorted({int(b) for x in v.values() for b in x["decode_ms"]})
    lines = [f"vLLM {record.get('vllm')} on {record.get('gpu')}, model {record.get('model')}", "",
             "Decode step (ms; slope of latency against output length) and speedup over eager",
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
    lines += ["", "Memory and capture (medians over each variant's runs; '-': not in the log)",
              f"  {'variant':20}{'KV GiB':>8}{'KV tokens':>12}{'graphs GiB':>12}"
              f"{'estimate':>10}{'capture s':>11}"]
    for name, x in v.items():
        lines.append(f"  {name:20}{_f(x['kv_cache_gib'], '8.2f', '       -')}"
                     f"{_f(x['kv_cache_tokens'], '12,.0f', '           -')}"
                     f"{_f(x['graph_gib'], '12.2f', '           -')}"
                     f"{_f(x['graph_estimate_gib'], '10.2f', '         -')}"
                     f"{_f(x['graph_capture_s'], '11.0f', '          -')}")
    lines += ["", f"Kernels per decode step K = {record['kernels_per_step']}: "
              f"{record['kernels_per_step_source']}",
              f"Exercise 2's tau = {_f(record['tau_us'], '.2f')} µs: {record['tau_source']}"]
    if "tau_eff_us" not in record:
        lines.append("tau_eff: " + record.get("tau_eff_missing", "not computed"))
    elif not record["tau_eff_us"]:
        lines.append("tau_eff: nothing to fit (needs K and decode times of a graph variant and "
                     "of the baseline)")
    else:
        lines.append(f"tau_eff (exercise 1's fit through (1, graph ms) and (K, {record['baseline']}"
                     " ms)), µs per launch removed; tau_eff / tau:")
        for name, row in record["tau_eff_us"].items():
            lines.append(f"  {name:20}" + "  ".join(
                f"batch {b}: {t:.2f} ({t / record['tau_us']:.1f}x)" for b, t in row.items()))
    if "kv_tokens_forgone" not in record:
        lines.append("KV tokens forgone: " + record.get("kv_missing", "not computed"))
    else:
        lines.append(f"KV cache per token (exercise 9): {record['kv_bytes_per_token']} bytes "
                     f"{record['kv_shape']}")
        for name, row in record["kv_tokens_forgone"].items():
            lines.append(f"  {name:20}graphs' memory -> {_f(row.get('from_graph_memory'), ',')} "
                         f"tokens; vLLM's estimate -> {_f(row.get('from_graph_estimate'), ',')}; "
                         f"measured {record['baseline']} - {name}: "
                         f"{_f(row.get('measured'), ',')}")
    lines += [f"note: {n}" for n in record.get("notes", [])]
    return "\n".join(lines)


def chart_panels(record: dict) -> tuple[list[dict], list[str]]:
    """The chart: (a) decode step time against batch size per variant, (b) speedup over eager,
    (c) tau_eff beside exercise 2's tau (when fitted)."""
    v = record["variants"]
    times, speedups, taus = [], [], []
    eager = v.get("eager", {}).get("decode_ms", {})
    for name, x in v.items():
        points = sorted((int(b), ms) for b, ms in x["decode_ms"].items() if ms > 0)
        if points:
            times.append({"name": f"{name}: {x['label']}", "colour": COLOURS.get(name, "#333"),
                          "style": "line", "points": points})
            times.append({"name": f"{name}, measured", "colour": COLOURS.get(name, "#333"),
                          "style": "points", "points": points})
        ratio = [(b, eager[str(b)] / ms) for b, ms in points if str(b) in eager]
        if name != "eager" and ratio:
            speedups += [{"name": name if style == "line" else f"{name}, measured",
                          "colour": COLOURS.get(name, "#333"), "style": style, "points": ratio}
                         for style in ("line", "points")]
    for name, row in record.get("tau_eff_us", {}).items():
        points = sorted((int(b), t) for b, t in row.items())
        taus.append({"name": f"tau_eff, {name}", "colour": COLOURS.get(name, "#333"),
                     "style": "line", "points": points})
    if not times:
        raise ValueError("FOLDER: no variant has decode times (each batch size needs two output "
                         "lengths that ran)")
    panels = [{"name": "(a) decode step time", "y_label": "ms per decode step", "height": 280,
               "series": times}]
    if speedups:
        panels.append({"name": "(b) speedup over --enforce-eager", "y_label": "eager ÷ variant",
                       "height": 200, "series": speedups})
    if taus:
        xs = [x for s in taus for x, _ in s["points"]]
        taus.append({"name": f"exercise 2's tau: {record['tau_us']:.2f} µs", "colour": "#555",
                     "style": "line", "dash": "dotted",
                     "points": [(min(xs), record["tau_us"]), (max(xs), record["tau_us"])]})
        panels.append({"name": "(c) tau_eff: µs per launch the graphs removed",
                       "y_label": "µs per launch", "height": 200, "series": taus,
                       "notes": [f"K = {record['kernels_per_step']} kernels per decode step,",
                                 "given" if record["kernels_per_step_source"].startswith("given")
                                 else "an ESTIMATE, not measured"]})
    caption = [f"vLLM {record.get('vllm')}, {record.get('model')}, on {record.get('gpu')}; decode "
               "time = slope of latency against output length."]
    for name, x in v.items():
        graphs = ("no graphs captured" if x["graph_gib"] is None else
                  f"graphs {x['graph_gib']:.2f} GiB, captured in "
                  f"{_f(x['graph_capture_s'], '.0f')} s")
        caption.append(f"{name}: KV cache {_f(x['kv_cache_tokens'], ',')} tokens "
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
    runs = plan(args.variants, args.batch_sizes, args.output_lens)
    env = {**os.environ, **RUN_ENV}
    for i, entry in enumerate(runs, 1):
        entry["command"] = bench_command(
            entry["variant"], args.model, entry["batch_size"], entry["output_len"],
            args.input_len, str(out / entry["json"]), args.num_iters, args.num_iters_warmup,
            args.max_model_len, args.gpu_memory_utilization)
        print(f"[{i}/{len(runs)}] {entry['variant']}, batch {entry['batch_size']}, output "
              f"{entry['output_len']} ...", end=" ", flush=True)
        start = time.perf_counter()
        with open(out / entry["log"], "w", encoding="utf-8") as log:
            try:
                done = subprocess.run(entry["command"], stdout=log, stderr=subprocess.STDOUT,
                                      env=env, timeout=args.run_timeout)
                entry["returncode"] = done.returncode
            except subprocess.TimeoutExpired:
                entry["returncode"] = "timeout"
        print(f"{time.perf_counter() - start:.0f} s, exit {entry['returncode']}"
              + ("" if entry["returncode"] == 0 else f" (see {out / entry['log']})"))
    manifest = {"lab": "vllm_lab", "vllm": VLLM_VERSION, "gpu": torch.cuda.get_device_name(),
                "env": RUN_ENV, "model": args.model, "input_len": args.input_len, "variants": args.variants,
                "batch_sizes": args.batch_sizes, "output_lens": args.output_lens, "runs": runs}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    try:  # the model's config.json, for exercise 9's KV shape (transformers comes with vLLM)
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(args.model).to_dict()
        (out / MODEL_CONFIG).write_text(json.dumps(config, indent=1, default=str) + "\n",
                                        encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - analyze says what is missing and how to give it
        print(f"could not save the model's config ({type(exc).__name__}: {exc}); give "
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


RUN_STATUS = ("Runs vllm bench latency per variant, batch size and output length on this GPU "
              "(vLLM 0.26.0), then analyzes the folder. Not yet run on a GPU: the commands were "
              "checked against vLLM 0.26.0's source and the parser tested on text built from its "
              "format strings only.")


def _add_analysis_options(parser) -> None:
    parser.add_argument("--impl", default="exercises",
                        help="your exercises (default), or a folder of module files: exercise "
                        "1's fit_launch_model and exercise 9's kv_bytes_per_token and "
                        "kv_tokens_forgone come from it")
    parser.add_argument("--kernels-per-step", type=positive_int, metavar="K",
                        help="kernels one decode step launches without graphs; NOT in vLLM's log. "
                        f"Default: an ESTIMATE, {KERNELS_PER_LAYER_ESTIMATE} per decoder layer + "
                        f"{KERNELS_PER_STEP_EXTRA_ESTIMATE}")
    parser.add_argument("--tau-from", metavar="FILE",
                        help="your launch-tax.json (python -m coursekit.lab launch-tax) for "
                        "exercise 2's tau; default: the bundled H200 tau")
    parser.add_argument("--kv-shape", type=_shape, metavar="L,H,D,B",
                        help="layers, KV heads, head size, dtype bytes; default: from the "
                        f"folder's {MODEL_CONFIG} and the log's dtype")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m coursekit.vllm_lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run_p = commands.add_parser("run", help="run vLLM's latency benchmark per variant (GPU, "
                                "vLLM 0.26.0), then analyze", description=RUN_STATUS)
    run_p.add_argument("--out", default="vllm-lab",
                       help="folder for the logs and results (default: %(default)s)")
    run_p.add_argument("--model", default=DEFAULT_MODEL, help="default: %(default)s")
    run_p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS),
                       metavar="VARIANT", help=f"of {', '.join(VARIANTS)} (default: all)")
    run_p.add_argument("--batch-sizes", type=positive_int, nargs="+", metavar="B",
                       default=list(DEFAULT_BATCH_SIZES), help="default: %(default)s")
    run_p.add_argument("--output-lens", type=positive_int, nargs="+", metavar="N",
                       default=list(DEFAULT_OUTPUT_LENS),
                       help="at least two, so prefill cancels (default: %(default)s)")
    run_p.add_argument("--input-len", type=positive_int, default=32, help="default: %(default)s")
    run_p.add_argument("--num-iters", type=positive_int, default=10, help="default: %(default)s")
    run_p.add_argument("--num-iters-warmup", type=positive_int, default=3, help="default: %(default)s")
    run_p.add_argument("--max-model-len", type=positive_int, default=2048, help="default: %(default)s")
    run_p.add_argument("--gpu-memory-utilization", type=number_in(0, 1, high_closed=True), default=0.9,
                       help="default: %(default)s")
    run_p.add_argument("--run-timeout", type=positive_int, default=1800, metavar="SECONDS",
                       help="per benchmark run (default: %(default)s)")
    run_p.add_argument("--dry-run", action="store_true",
                       help="print the commands and exit; runs nothing, needs nothing")
    _add_analysis_options(run_p)
    analyze_p = commands.add_parser("analyze", help="read a saved folder: report, JSON and SVG "
                                    "(any machine)")
    analyze_p.add_argument("folder", metavar="FOLDER", help="a folder written by run")
    _add_analysis_options(analyze_p)
    return parser


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage error (or --help)
        return exc.code
    if args.command == "run":
        if len(set(args.output_lens)) < 2:
            print(f"vllm_lab: --output-lens: expected at least two distinct lengths (prefill "
                  f"cancels in their difference), got {args.output_lens}", file=sys.stderr)
            return 2
        if args.max_model_len < args.input_len + max(args.output_lens):
            print(f"vllm_lab: --max-model-len: expected at least --input-len + the longest "
                  f"--output-lens = {args.input_len + max(args.output_lens)}, got "
                  f"{args.max_model_len}", file=sys.stderr)
            return 2
        if args.dry_run:
            for entry in plan(args.variants, args.batch_sizes, args.output_lens):
                print(" ".join(f"{k}={shlex.quote(v)}" for k, v in RUN_ENV.items()) + " "
                      + shlex.join(bench_command(
                    entry["variant"], args.model, entry["batch_size"], entry["output_len"],
                    args.input_len, str(Path(args.out) / entry["json"]), args.num_iters,
                    args.num_iters_warmup, args.max_model_len, args.gpu_memory_utilization))
                    + f" > {Path(args.out) / entry['log']} 2>&1")
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
