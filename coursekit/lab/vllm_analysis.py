"""The Part B lab's analysis: a saved folder of runs read back into one record, one group per
model and runner (never mixed), with tau_eff from exercise 1's fit and the KV tokens the graphs
cost from exercise 9 (see ``coursekit.lab.vllm``). Pure Python: no GPU, no vLLM.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from coursekit import lesson
from coursekit.course import by_module
from coursekit.impl import Implementation
from coursekit.lab.common import ExerciseNotFinished, call_student
from coursekit.lab.launch_tax import fit_record, load_record
from coursekit.lab.vllm_runs import (
    GRAPH_VARIANTS,
    MANIFEST,
    MODEL_CONFIG,
    RUNNER_VAR,
    RUNNERS,
    VARIANTS,
    VLLM_VERSION,
    latency_seconds,
    model_config_name,
    parse_log,
)

#: The estimate of kernels per decode step used when --kernels-per-step is not given (see
#: coursekit.lab.vllm's docstring): per decoder layer two fused add+RMSNorms, QKV GEMM, rotary,
#: KV-cache write, attention, output GEMM, gate-up GEMM, SiLU-and-mul, down GEMM and about two
#: more small ones; per step the embedding, final norm, LM head, the sampler and the input copies.
KERNELS_PER_LAYER_ESTIMATE, KERNELS_PER_STEP_EXTRA_ESTIMATE = 12, 40
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
#: What each runner does with the graphs' memory before it sizes the KV cache.
GRAPH_RESERVE = {
    "V1": (
        "V1 subtracts its estimate ('Estimated CUDA graph memory') before sizing the KV cache "
        "(vllm/v1/worker/gpu_worker.py:500-545, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1, "
        "the default)"
    ),
    "V2": (
        "V2 reserves none: its profile_cudagraph_memory returns 0 "
        "(vllm/v1/worker/gpu/model_runner.py:705-707), so it logs no 'Estimated CUDA graph "
        "memory' (expected) and sizes the KV cache without subtracting the graphs, which then "
        "come out of the memory outside --gpu-memory-utilization"
    ),
}


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
        old_runner = "v1" if (manifest.get("env") or {}).get(RUNNER_VAR) == "0" else "default"
        for run in runs:
            run.setdefault("model", manifest.get("model"))
            run.setdefault("runner", old_runner)
            if not (isinstance(run["log"], str) and isinstance(run["json"], str)):
                raise TypeError(f"run {run!r}: 'log' and 'json' must be file names")
    except OSError:
        raise NotARun(
            f"FOLDER: {folder} has no {MANIFEST}: not a folder written by 'python -m coursekit.lab vllm run'"
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NotARun(f"FOLDER: {folder / MANIFEST} is not this lab's manifest: {type(exc).__name__}: {exc}") from None
    for run in runs:
        log, out = folder / run["log"], folder / run["json"]
        run["facts"] = parse_log(log.read_text(encoding="utf-8", errors="replace") if log.is_file() else "")
        run["latency_s"] = latency_seconds(out.read_text(encoding="utf-8") if out.is_file() else None, run["facts"])
    manifest["models"] = list(dict.fromkeys(manifest.get("models") or [r["model"] for r in runs]))
    manifest["runners"] = list(
        dict.fromkeys(
            [r for r in manifest.get("runners") or [] if any(x["runner"] == r for x in runs)]
            + [r["runner"] for r in runs]
        )
    )
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
            points = [
                (r["output_len"], r["latency_s"])
                for r in mine
                if r["batch_size"] == batch and r["latency_s"] is not None
            ]
            if len({o for o, _ in points}) >= 2:
                decode[str(batch)] = _slope(*zip(*points)) * 1e3
        facts = [r["facts"] for r in mine]

        def pick(key, field, facts=facts):
            return _median([f[key][field] for f in facts if key in f])

        changed = sorted({f["mode_changed"]["mode"] for f in facts if "mode_changed" in f})
        variants[name] = {
            "label": VARIANTS.get(name, (name,))[0],
            "runs": len(mine),
            "runs_with_latency": sum(r["latency_s"] is not None for r in mine),
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
        raise ValueError(
            f"--kv-shape: no {MODEL_CONFIG} in the folder; give --kv-shape LAYERS,KV_HEADS,HEAD_DIM,DTYPE_BYTES"
        )
    config = model_config.get("text_config") or model_config
    try:
        heads = int(config["num_attention_heads"])
        shape = {
            "n_layers": int(config["num_hidden_layers"]),
            "n_kv_heads": int(config.get("num_key_value_heads") or heads),
            "head_dim": int(config.get("head_dim") or config["hidden_size"] // heads),
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"--kv-shape: {MODEL_CONFIG} lacks {exc}; give --kv-shape LAYERS,KV_HEADS,HEAD_DIM,DTYPE_BYTES"
        ) from None
    dtype = dtype or config.get("torch_dtype") or config.get("dtype") or model_config.get("torch_dtype")
    if str(dtype) not in DTYPE_BYTES:
        raise ValueError(
            f"--kv-shape: cannot tell the bytes of dtype {dtype!r}; give --kv-shape "
            "LAYERS,KV_HEADS,HEAD_DIM,DTYPE_BYTES"
        )
    return {**shape, "dtype_bytes": DTYPE_BYTES[str(dtype)]}


def _per_model(value, models: list, option: str, example: str) -> list:
    """``value`` (None, one value, or a list of one per model) as a list of one per model."""
    if value is None:
        return [None] * len(models)
    values = value if isinstance(value, list) else [value]
    if len(values) != len(models):
        raise ValueError(
            f"{option}: the folder holds {len(models)} model(s) ({', '.join(models)}):"
            f" give one {example} per model, in that order; got {len(values)}"
        )
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
    evidence = sorted({f"{who}: {msg}" for r in runs for who, msg in r["facts"].get("runner_evidence", [])})
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
    engines = [r["facts"]["engine_config"] for r in manifest["runs"] if "engine_config" in r["facts"]]
    version = next((e["version"] for e in engines), None)
    record = {
        "lab": "vllm_lab",
        "model": " vs ".join(models),
        "models": models,
        "runners": runners,
        "gpu": manifest.get("gpu"),
        "vllm": version or manifest.get("vllm"),
        "input_len": manifest.get("input_len"),
        "groups": [],
        "notes": [],
    }
    if version and version != VLLM_VERSION:
        record["notes"].append(f"the logs are from vLLM {version}; this lab reads vLLM {VLLM_VERSION}'s formats")

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
            group = _analyze_group(
                model,
                runner,
                runs,
                manifest.get("variants"),
                model_config,
                k_given,
                shape_given,
                impl,
                fit,
                record["tau_us"],
                tau_missing,
                several=len(models) > 1,
            )
            record["groups"].append(group)
            record["notes"] += group.pop("notes")
    record["speedup_by_model"] = speedup_by_model(record) if len(models) > 1 else {}
    return record


def _analyze_group(
    model, runner, runs, order, model_config, kernels, shape, impl, fit, tau_us, tau_missing, several
) -> dict:
    """One model under one runner: its variants, tau_eff and KV tokens (see ``analyze``)."""
    variants = summarize(runs, order)
    ran, evidence = _ran(runs)
    name = f"{model}, runner {runner}"
    group = {
        "model": model,
        "runner": runner,
        "runner_asked": RUNNERS.get(runner, (runner,))[0],
        "runner_ran": ran,
        "runner_evidence": evidence,
        "graph_reserve": GRAPH_RESERVE.get(ran, "unknown: the log does not say which runner ran"),
        "variants": variants,
        "notes": [],
    }
    notes = group["notes"]
    expected = "V1" if runner == "v1" else None
    if ran is None:
        notes.append(f"{name}: no log says which model runner ran (see the logs)")
    elif " and " in ran:
        notes.append(f"{name}: the logs name both runners ({'; '.join(evidence)}); read its numbers with care")
    elif expected and ran != expected:
        notes.append(f"{name}: asked for {expected}, but the log says {ran} ran")
    elif runner == "default" and ran == "V1":
        why = next((r["facts"]["runner_v2_declined"]["why"] for r in runs if "runner_v2_declined" in r["facts"]), None)
        notes.append(f"{name}: vLLM chose V1 for this model" + (f" (Model Runner V2 {why})" if why else ""))
    for v, x in variants.items():
        if x["mode_changed_to"]:
            notes.append(f"{name}, {v}: vLLM changed the graph mode to {', '.join(x['mode_changed_to'])} (see its log)")
        if ran == "V1" and x["graph_gib"] is not None and x["graph_estimate_gib"] is None:
            notes.append(
                f"{name}, {v}: V1 captured graphs but its log has no 'Estimated CUDA "
                "graph memory' line, which V1 logs before it sizes the KV cache (see "
                "the log)"
            )

    # K: given, or the estimate from the model's layer count.
    layers = None
    if model_config:
        layers = (model_config.get("text_config") or model_config).get("num_hidden_layers")
    if kernels is not None:
        group["kernels_per_step"] = kernels
        group["kernels_per_step_source"] = "given (--kernels-per-step)"
    elif isinstance(layers, int):
        group["kernels_per_step"] = KERNELS_PER_LAYER_ESTIMATE * layers + KERNELS_PER_STEP_EXTRA_ESTIMATE
        group["kernels_per_step_source"] = (
            f"ESTIMATE, not measured: {KERNELS_PER_LAYER_ESTIMATE} per layer x {layers} layers "
            f"+ {KERNELS_PER_STEP_EXTRA_ESTIMATE}; give --kernels-per-step"
        )
    else:
        group["kernels_per_step"] = None
        group["kernels_per_step_source"] = f"unknown: no {MODEL_CONFIG} to estimate it from; give --kernels-per-step"

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
        group["tau_eff_missing"] = (
            f"not computed: exercise 1 is not finished ({exc}); tau_eff comes with its fit_launch_model"
        )

    # KV tokens the graphs cost, with exercise 9.
    if shape is None:
        engine = next((r["facts"]["engine_config"] for r in runs if "engine_config" in r["facts"]), {})
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
            for key, gib in (("from_graph_memory", x["graph_gib"]), ("from_graph_estimate", x["graph_estimate_gib"])):
                if gib is not None:
                    # Exercise 9's rule for the runner that ran: V2 sizes the cache before its graphs.
                    row[key] = call_student(
                        impl,
                        "tradeoffs",
                        "kv_tokens_forgone",
                        max(0, round(gib * 1024**3)),
                        per_token,
                        runner="v2" if group["runner_ran"] == "V2" else "v1",
                    )
            if base_tokens is not None and x["kv_cache_tokens"] is not None:
                row["measured"] = base_tokens - x["kv_cache_tokens"]
            forgone[v] = row
        group["kv_bytes_per_token"] = per_token
        group["kv_tokens_forgone"] = forgone
    except ExerciseNotFinished as exc:
        if exc.number != by_module("tradeoffs").number:
            raise
        group["kv_missing"] = (
            f"not computed: exercise 9 is not finished ({exc}); the tokens "
            "come with its kv_bytes_per_token and kv_tokens_forgone"
        )
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
                    table.setdefault(group["runner"], {}).setdefault(name, {}).setdefault(batch, {})[group["model"]] = (
                        eager[batch] / ms
                    )
    return table


def group_of(record: dict, model: str | None = None, runner: str | None = None) -> dict:
    """The record's group of ``model`` (default: the first) under ``runner`` (default: the first)."""
    model = model or record["models"][0]
    runner = runner or record["runners"][0]
    for group in record["groups"]:
        if group["model"] == model and group["runner"] == runner:
            return group
    raise KeyError(f"no runs of {model} under runner {runner}")
