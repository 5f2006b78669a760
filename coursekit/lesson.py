"""Facts from the lesson, kept once for exercises, solutions and tests, and the bundled H200
reference measurement (``coursekit/data/h200-anchor-2026-11-30.json``, see its README).

The H200 figures are read from that file the first time one of them is used, not at import:
a grading worker imports this module (for the seed rows) with only ``coursekit/*.py`` present.

* ``H200_SWEEP``: chain length N -> (eager ms, graph ms) per iteration of N tiny ``x + 1``
  kernels.
* ``H200_PART_A``: the lesson's Part A (200 tiny kernels on 1024 floats), (eager µs, graph µs)
  per iteration (about 10x).
* ``H200_TAU_EAGER_US``, ``H200_TAU_GRAPH_US``: the slopes fitted through ``H200_SWEEP`` (µs per
  kernel): the eager launch cost and the graph node cost.
* ``H200_DECODE_7B``: batch -> ``{"eager_ms", "graph_ms", "kernels", ...}``, one bf16 decode step
  shaped like Qwen2.5-7B (the data README says how it was made).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

#: The lesson's two decode steps: (label, GiB of weights read per step).
SEED_WEIGHTS = (
    ("AWQ  权重 (~5.5 GiB)", 5.5),
    ("BF16 权重 (~14.2 GiB)", 14.2),
)

#: What ``report(SEED_ROWS)`` prints, byte for byte (the lesson's "expected output" block).
SEED_REPORT = """\
AWQ  权重 (~5.5 GiB): 430 个 kernel | 计算   5.9 ms | 启动 2.15 ms
   eager   8.1 ms -> 124.1 tok/s | graph   5.9 ms -> 169.2 tok/s | 加速比 1.36x
BF16 权重 (~14.2 GiB): 430 个 kernel | 计算  15.2 ms | 启动 2.15 ms
   eager  17.4 ms ->  57.5 tok/s | graph  15.3 ms ->  65.6 tok/s | 加速比 1.14x"""

#: Qwen2.5-7B's KV-cache shape (its config.json): layers, KV heads, head size; bf16 is 2 bytes.
QWEN25_7B_KV = dict(n_layers=28, n_kv_heads=4, head_dim=128, dtype_bytes=2)


def tradeoff_figures(implied_launch_us, cpu_bound_launch_us, kv_bytes_per_token, kv_tokens_forgone) -> str:
    """Exercise 9's figures, computed with its functions (``python -m exercises.tradeoffs``):
    the tau the H200's 7B decode step implies under each model, where its kernels turn it
    CPU-bound, and the KV cache a GiB of graphs costs Qwen2.5-7B under each of vLLM 0.26.0's
    GPU model runners (V1 takes its graph estimate out of the KV cache; V2 does not)."""
    decode = _decode_7b()
    lines = []
    for batch, step in sorted(decode.items()):
        additive, cpu_bound = implied_launch_us(step["eager_ms"], step["graph_ms"], step["kernels"])
        lines.append(
            f"H200 7B decode, batch {batch}: {step['kernels']} kernels, eager "
            f"{step['eager_ms']:.1f} ms, graph {step['graph_ms']:.2f} ms -> tau "
            f"{additive:.1f} us if additive, {cpu_bound:.1f} us if CPU-bound"
        )
    one = decode[1]
    mean_kernel_us = one["graph_ms"] * 1e3 / one["kernels"]
    tau_star = cpu_bound_launch_us([mean_kernel_us] * one["kernels"])
    lines.append(
        f"its {one['kernels']} kernels average {mean_kernel_us:.2f} us on the GPU: the step is "
        f"CPU-bound for any tau above {tau_star:.2f} us"
    )
    per_token = kv_bytes_per_token(**QWEN25_7B_KV)
    lines.append(f"Qwen2.5-7B (bf16): {per_token} bytes of KV cache per token ({per_token / 1024:g} KiB)")
    lines.append(
        f"  V1 runner: 1 GiB of graphs forgoes {kv_tokens_forgone(1024**3, per_token, runner='v1')} tokens "
        "(its graph estimate is taken out of the KV cache)"
    )
    lines.append(
        f"  V2 runner: 1 GiB of graphs forgoes {kv_tokens_forgone(1024**3, per_token, runner='v2')} tokens "
        "(the KV cache is sized first; the graphs use the headroom)"
    )
    return "\n".join(lines)


#: The bundled H200 run, in the shape the lab reads and writes (``launch-tax.json``).
H200_ANCHOR = Path(__file__).resolve().parent / "data" / "h200-anchor-2026-11-30.json"
H200_ENGINE = H200_ANCHOR.with_name("h200-engine-2026-12-04.json")
#: The day of that run (in its file name).
H200_DATE = H200_ANCHOR.stem.removeprefix("h200-anchor-")


@cache
def h200_anchor() -> dict:
    """The bundled H200 measurement, as read from ``H200_ANCHOR``."""
    return json.loads(H200_ANCHOR.read_text(encoding="utf-8"))


def h200_engine() -> dict:
    """The decode engine's benchmark on its first H200 (2026-12-04), beside the same step written
    as one function, compiled and captured, as read from ``H200_ENGINE`` (its ``about`` says how
    it was measured)."""
    return json.loads(H200_ENGINE.read_text(encoding="utf-8"))


def _decode_7b() -> dict[int, dict]:
    return {int(batch): dict(step) for batch, step in h200_anchor()["decode7b"].items()}


def __getattr__(name: str):
    anchor = h200_anchor() if name.startswith("H200_") else None
    if name == "H200_SWEEP":
        return {int(n): (pair[0], pair[1]) for n, pair in anchor["sweep_ms"].items()}
    if name == "H200_PART_A":
        return (anchor["partA"]["eager_us"], anchor["partA"]["graph_us"])
    if name == "H200_TAU_EAGER_US":
        return anchor["tau_eager_us"]
    if name == "H200_TAU_GRAPH_US":
        return anchor["tau_graph_us"]
    if name == "H200_DECODE_7B":
        return _decode_7b()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
