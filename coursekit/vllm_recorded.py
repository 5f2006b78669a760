"""What vLLM 0.26.0 itself answered, recorded from its own code (its V1 GPU model runner; the V2
runner's record is ``coursekit/vllm_runners.py``'s): the course's rules for capture
sizes, modes and dispatch are checked against these answers, not against our reading of vLLM.

The file is ``coursekit/data/vllm-0.26.0-cases.json``, written by the course staff's recording
script (in the staff repository, with the recipe: vLLM's CPU wheel in a venv of its own), which
drives vLLM's code and writes what it answered. It holds:

* ``engine_cases()``: ``(max_num_seqs, num_speculative_tokens, max_num_batched_tokens, sizes)``,
  the sizes ``VllmConfig._set_cudagraph_sizes`` chose for that configuration;
* ``explicit_max_cases()``: ``(max_cudagraph_capture_size, sizes)`` for an explicit maximum and
  room for every token (vLLM's stride pattern up to it);
* ``mode_table()``: every ``CUDAGraphMode`` member's value, truth value and helpers;
* ``dispatch_configs()``: the V1 runner's ``CudagraphDispatcher``'s keys and ``dispatch`` answers per mode,
  capture sizes, ``max_num_seqs`` and query length ``q``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

VLLM_VERSION = "0.26.0"
CASES = Path(__file__).resolve().parent / "data" / f"vllm-{VLLM_VERSION}-cases.json"


@lru_cache(maxsize=1)
def recorded() -> dict:
    return json.loads(CASES.read_text(encoding="ascii"))


def engine_cases() -> list[tuple[int, int, int, list[int]]]:
    return [tuple(case) for case in recorded()["capture_sizes"]["engine"]["cases"]]


def explicit_max_cases() -> list[tuple[int, list[int]]]:
    return [tuple(case) for case in recorded()["capture_sizes"]["explicit_max"]["cases"]]


def mode_table() -> dict[str, dict]:
    return recorded()["modes"]["members"]


def dispatch_configs() -> list[dict]:
    return recorded()["dispatch"]["configs"]


def resolved_modes(support: str = "uniform_batch", attention_split: bool = True) -> dict[str, str]:
    """``{mode asked for: mode vLLM runs}`` from ``CompilationConfig.resolve_cudagraph_mode_and_sizes``
    for an attention backend declaring ``support`` (an ``AttentionCGSupport`` name, any case:
    FlashAttention 2 declares ``uniform_batch``) with attention among the splitting ops or not. A
    mode vLLM refuses maps to ``"error ..."``."""
    return {
        r["mode"]: r["runs"]
        for r in recorded()["mode_resolution"]
        if r["support"] == support.upper() and r["attention_split"] is attention_split
    }
