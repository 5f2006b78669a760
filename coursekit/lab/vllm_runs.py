"""One vLLM run as the Part B lab (``coursekit.lab.vllm``) sees it: the variant and the model
runner that select it, the files that keep it, and what its log says (``parse_log``, tested on
text built from vLLM 0.26.0's recorded format strings, not on a real GPU log).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

VLLM_VERSION = "0.26.0"
FORMATS = Path(__file__).resolve().parents[1] / "data" / f"vllm-{VLLM_VERSION}-formats.json"

#: variant -> (what it is, the flags that select it). Only flags recorded in FORMATS are used.
VARIANTS = {
    "default": ("no flag: vLLM's default graph mode (FULL_AND_PIECEWISE)", []),
    "eager": ("--enforce-eager: no torch.compile, no graphs", ["--enforce-eager"]),
    "none": ("compiled, cudagraph_mode NONE", ["--compilation-config", '{"cudagraph_mode": "NONE"}']),
    "piecewise": ("cudagraph_mode PIECEWISE", ["--compilation-config", '{"cudagraph_mode": "PIECEWISE"}']),
    "full_decode_only": (
        "cudagraph_mode FULL_DECODE_ONLY",
        ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY"}'],
    ),
    "full_and_piecewise": (
        "cudagraph_mode FULL_AND_PIECEWISE",
        ["--compilation-config", '{"cudagraph_mode": "FULL_AND_PIECEWISE"}'],
    ),
}
#: The variants that capture graphs. ``default`` is vLLM 0.26.0's -O2 default,
#: cudagraph_mode FULL_AND_PIECEWISE (vllm/config/vllm.py:290, OPTIMIZATION_LEVEL_02).
GRAPH_VARIANTS = ("default", "piecewise", "full_decode_only", "full_and_piecewise")
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

MANIFEST, RESULT_JSON, RESULT_SVG, MODEL_CONFIG = ("runs.json", "vllm-lab.json", "vllm-lab.svg", "model-config.json")


def slug(model: str) -> str:
    """A model name as a file name: ``Qwen/Qwen2.5-0.5B-Instruct`` -> ``Qwen--Qwen2.5-0.5B-Instruct``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model.replace("/", "--"))


def model_config_name(model: str) -> str:
    """The file a model's config.json is saved as in the folder (``model-config.json`` is read when
    it is missing: folders written before the lab ran several models)."""
    return f"model-config-{slug(model)}.json"


def _short(model: str) -> str:
    return model.rsplit("/", 1)[-1]


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
    "model_loading": re.compile(
        rf"Model loading took (?P<gib>{NUMBER}) GiB(?P<memory> memory)? "
        rf"and (?P<secs>{NUMBER}) seconds"
    ),
    "kv_cache_memory": re.compile(rf"Available KV cache memory: (?P<gib>{NUMBER}) GiB"),
    "kv_cache_tokens": re.compile(r"GPU KV cache size: (?P<tokens>\d[\d,]*) tokens"),
    "max_concurrency": re.compile(
        rf"Maximum concurrency for (?P<tokens>\d[\d,]*) tokens per "
        rf"request: (?P<x>{NUMBER})x"
    ),
    # V1 only (vllm/v1/worker/gpu_model_runner.py:6737-6740); V2's estimate is 0 and not logged.
    "graph_memory_estimate": re.compile(
        rf"Estimated CUDA graph memory: (?P<gib>{NUMBER}) GiB "
        "total"
    ),
    "graph_capture": re.compile(
        rf"Graph capturing finished in (?P<secs>{NUMBER}) secs, took "
        rf"(?P<gib>{NUMBER}) GiB"
    ),
    "graph_pool_memory": re.compile(
        rf"CUDA graph pool memory: (?P<actual>{NUMBER}) GiB "
        rf"\(actual\), (?P<estimated>{NUMBER}) GiB \(estimated\)"
    ),
    "graph_capture_skipped": re.compile(r"Skipping CUDA graph capture"),
    "enforce_eager": re.compile(r"Enforce eager set, disabling torch\.compile and CUDAGraphs"),
    "mode_changed": re.compile(r"; setting cudagraph_mode=(?P<mode>[A-Z_]+)"),
    "engine_config": re.compile(
        r"Initializing a V1 LLM engine \(v(?P<version>[^)\s]+)\) with "
        r"config: .*?\bdtype=(?:torch\.)?(?P<dtype>\w+), .*?"
        r"\bkv_cache_dtype=(?P<kv_dtype>\w+)"
    ),
    "bench_avg_latency": re.compile(rf"^Avg latency: (?P<secs>{NUMBER}) seconds"),
    "bench_percentile": re.compile(
        rf"^(?P<pct>\d+)% percentile latency: (?P<secs>{NUMBER}) "
        "seconds"
    ),
    # logger.info_once("Using V2 Model Runner") (vllm/v1/worker/gpu_worker.py:377-378): V2 only.
    "runner_v2": re.compile(r"Using V2 Model Runner"),
    # Recorded as runner_v2_declined_triton and runner_v2_declined_unsupported. vLLM chose V1
    # although the variable was unset (vllm/config/vllm.py:577-579: "Model Runner
    # V2 requires Triton; using the V1 model runner instead."; vllm/config/vllm.py:584-588: "Model
    # Runner V2 does not yet support %s; using the V1 model runner instead.").
    "runner_v2_declined": re.compile(
        r"Model Runner V2 (?P<why>requires Triton|does not yet "
        r"support .*?); using the V1 model runner instead"
    ),
    # Recorded as graph_estimate_applied_enabled and _disabled. Logged only when a V1 estimate > 0
    # (vllm/v1/worker/gpu_worker.py:565-600): "CUDA graph
    # memory profiling is enabled (default since v0.21.0). ..." (575-576) or "... is disabled
    # (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). ..." (592-593, the estimate is not subtracted).
    "graph_estimate_applied": re.compile(
        r"CUDA graph memory profiling is (?P<state>enabled|"
        r"disabled)"
    ),
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
                facts[key] = {"tokens_per_request": int(got["tokens"].replace(",", "")), "times": float(got["x"])}
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
        evidence.append(
            (
                facts["model_loading_runner"],
                "'Model loading took ... GiB " + ("memory and'" if facts["model_loading_runner"] == "V1" else "and'"),
            )
        )
    if "graph_memory_estimate" in facts:
        evidence.append(("V1", "'Estimated CUDA graph memory'"))
    if "graph_estimate_applied" in facts:
        evidence.append(("V1", "'CUDA graph memory profiling is ...'"))
    if "runner_v2_declined" in facts:
        evidence.append(
            ("V1", f"'Model Runner V2 {facts['runner_v2_declined']['why']}; using the V1 model runner instead'")
        )
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
