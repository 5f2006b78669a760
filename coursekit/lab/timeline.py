"""The timeline lab: the eager pipeline kernel by kernel (exercise 9's eager_timeline).

    python -m coursekit.lab timeline    # timeline.json/.svg: needs exercise 9

Exercise 9's ``eager_timeline`` drawn as CPU and GPU lanes for tiny kernels, long kernels and a
Qwen2.5-7B layer, each against a graph replay.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from coursekit import lesson
from coursekit.impl import Implementation
from coursekit.lab.common import ExerciseNotFinished, call_student, copy_bandwidth_bps, write_json, wrote
from coursekit.svgplot import timeline

CPU_COLOUR, KERNEL_COLOUR, IDLE_COLOUR, NODE_COLOUR = "#fd8d3c", "#3182bd", "#fcbba1", "#969696"
#: Qwen2.5-7B's shapes (its config.json): hidden size, the q, k and v projections' outputs (28
#: query and 4 key/value heads of 128), the MLP's intermediate size; bf16 is 2 bytes. The KV cache
#: holds 1024 tokens, as in the bundled H200 7B step.
QWEN_HIDDEN, QWEN_QKV, QWEN_KV, QWEN_MLP, QWEN_CONTEXT, BF16 = 3584, 3584 + 2 * 512, 512, 18944, 1024, 2
#: A Qwen2.5-7B layer at batch 1 as the lesson's 15 kernels, by the bytes each reads and writes.
#: The four projections read the layer's weights, 466 MB; every other kernel moves a few KB (the
#: attention, its 2 MiB of cache).
LAYER_7B_BYTES = (
    ("rms_norm", 3 * QWEN_HIDDEN * BF16),
    ("qkv", (QWEN_HIDDEN * QWEN_QKV + QWEN_HIDDEN + QWEN_QKV) * BF16),
    ("qkv bias", 3 * QWEN_QKV * BF16),
    ("rotary", 2 * (QWEN_HIDDEN + QWEN_KV) * BF16),
    ("kv write", 4 * QWEN_KV * BF16),
    ("attention", (2 * QWEN_CONTEXT * QWEN_KV + 2 * QWEN_HIDDEN) * BF16),
    ("attn reduce", 2 * QWEN_HIDDEN * BF16),
    ("o_proj", (QWEN_HIDDEN * QWEN_HIDDEN + 2 * QWEN_HIDDEN) * BF16),
    ("residual add", 3 * QWEN_HIDDEN * BF16),
    ("rms_norm", 3 * QWEN_HIDDEN * BF16),
    ("gate_up", (QWEN_HIDDEN * 2 * QWEN_MLP + QWEN_HIDDEN + 2 * QWEN_MLP) * BF16),
    ("silu·mul", 3 * QWEN_MLP * BF16),
    ("down", (QWEN_MLP * QWEN_HIDDEN + QWEN_MLP + QWEN_HIDDEN) * BF16),
    ("residual add", 3 * QWEN_HIDDEN * BF16),
    ("copy", 2 * QWEN_HIDDEN * BF16),
)


def layer_7b() -> tuple[tuple[str, float], ...]:
    """``LAYER_7B_BYTES`` as kernel times in µs: each kernel's bytes over the H200's copy
    bandwidth. What a kernel costs beyond its bytes, ν, the timeline adds to every kernel."""
    bandwidth = copy_bandwidth_bps()
    return tuple((name, size / bandwidth * 1e6) for name, size in LAYER_7B_BYTES)


def timeline_inputs() -> tuple[tuple[str, tuple[tuple[str, float], ...]], ...]:
    """The timeline lab's scenarios: (name, ((kernel, µs of bytes), ...))."""
    layer = layer_7b()
    return (
        ("tiny kernels: 12 × 0.5 µs", tuple(("", 0.5) for _ in range(12))),
        ("long kernels: 12 × 20 µs", tuple(("", 20.0) for _ in range(12))),
        (f"a 7B layer: 15 kernels, {sum(t for _, t in layer):.1f} µs", layer),
    )


def timeline_record(timeline_fn, launch_us: float, node_us: float) -> dict:
    """Each scenario's eager timeline from ``timeline_fn(gpu_us, launch_us)`` (exercise 9's
    ``eager_timeline``) and its graph replay: one launch, then the kernels back to back. Every
    kernel costs the GPU its bytes' time plus ``node_us`` (ν) in both: ``gpu_us`` is that sum. A
    malformed timeline -> ValueError saying what came back."""
    scenarios = []
    for name, kernels in timeline_inputs():
        times = [t for _, t in kernels]
        gpu_us = [t + node_us for t in times]
        got = timeline_fn(gpu_us, launch_us)
        try:
            eager = [tuple(float(v) for v in entry) for entry in got]
            ok = len(eager) == len(times) and all(len(e) == 3 and all(math.isfinite(v) for v in e) for e in eager)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(
                f"exercise 9's eager_timeline({[round(t, 3) for t in gpu_us]}, "
                f"{launch_us:g}) returned {got!r:.200}; expected one (launched, "
                f"start, end) per kernel, {len(times)} in all"
            )
        graph, clock = [], launch_us
        for t in gpu_us:
            graph.append((clock, clock + t))
            clock += t
        scenarios.append(
            {
                "name": name,
                "kernels": [k for k, _ in kernels],
                "kernel_us": times,
                "gpu_us": gpu_us,
                "eager": [list(e) for e in eager],
                "graph": [list(g) for g in graph],
            }
        )
    return {"launch_us": launch_us, "gpu_node_us": node_us, "scenarios": scenarios}


def _scenario_figures(s: dict, launch_us: float) -> dict:
    eager_end, graph_end = s["eager"][-1][2], s["graph"][-1][1]  # every scenario has kernels
    busy = sum(s["gpu_us"])
    return {
        "n": len(s["kernel_us"]),
        "busy": busy,
        "eager_end": eager_end,
        "graph_end": graph_end,
        "idle": eager_end - busy,
        "additive": len(s["kernel_us"]) * launch_us + busy,
    }


def timeline_report(record: dict, tau_stars=None) -> str:
    """The timeline lab's text; ``tau_stars``: exercise 9's ``cpu_bound_launch_us`` of each
    scenario's kernels (their GPU times, ν included), in order, when it is done (else None)."""
    tau, nu = record["launch_us"], record["gpu_node_us"]
    layer = layer_7b()
    gemms = ("qkv", "o_proj", "gate_up", "down")
    weights = sum(size for name, size in LAYER_7B_BYTES if name in gemms)
    lines = [
        f"Every kernel costs the GPU its bytes over the bandwidth plus ν = {nu:.2f} µs (H200), "
        "eager and in a graph alike.",
        f"Eager: launch k ends at k·τ (τ = {tau:g} µs); kernel k starts at max(k·τ, end of "
        "kernel k-1) (exercise 9's eager_timeline).",
        "Graph replay: one launch (τ), then the same kernels back to back.",
        "",
        f"{'scenario':38}|  N | GPU busy | eager end | GPU idle | additive |    graph | eager ÷ graph",
    ]
    for k, s in enumerate(record["scenarios"]):
        f = _scenario_figures(s, tau)
        lines.append(
            f"{s['name']:38}| {f['n']:2} | {f['busy']:5.1f} µs | {f['eager_end']:6.1f} µs"
            f" | {f['idle']:5.1f} µs | {f['additive']:5.1f} µs | {f['graph_end']:5.1f} µs"
            f" | {f['eager_end'] / f['graph_end']:12.2f}x"
        )
        if tau_stars is not None:
            lines.append(
                f"{'':38}  CPU-bound for τ above τ* = {tau_stars[k]:.2f} µs (exercise 9's cpu_bound_launch_us)"
            )
    lines += [
        "",
        "GPU busy = the kernels' bytes time plus N·ν; additive = N·τ + GPU busy, the "
        "lesson's model: an upper bound on the eager end.",
        "Tiny kernels: the GPU idles between launches and the graph wins. Long kernels: the launches hide behind them,",
        "eager ends one launch after the GPU starts, as the graph does: 1.00x, nothing left "
        "to remove. A graph never adds GPU work.",
        "The 7B layer: the CPU gets ahead during the GEMMs, but the tiny ops between them expose their launches.",
        f"The 7B layer's {len(layer)} kernels (the lesson's kernels_per_layer), µs of bytes "
        f"at the H200's {copy_bandwidth_bps() / 1e12:.2f} TB/s copy bandwidth:",
        "  " + ", ".join(f"{name} {t:.2f}" for name, t in layer[:8]) + ",",
        "  " + ", ".join(f"{name} {t:.2f}" for name, t in layer[8:]) + ".",
        f"The four projections read {weights / 1e6:.0f} MB of bf16 weights (Qwen2.5-7B): "
        f"{sum(t for name, t in layer if name in gemms):.1f} of the layer's "
        f"{sum(t for _, t in layer):.1f} µs; the other {len(layer) - len(gemms)} kernels "
        "cost little more than ν.",
    ]
    if tau_stars is None:
        lines.append(
            "(τ*, the launch time above which a step turns CPU-bound, comes with exercise 9's cpu_bound_launch_us.)"
        )
    return "\n".join(lines)


def timeline_scenarios(record: dict) -> list[dict]:
    """The timeline figure's scenarios (see ``coursekit.svgplot.timeline``)."""
    tau, nu = record["launch_us"], record["gpu_node_us"]
    out = []
    for s in record["scenarios"]:
        f = _scenario_figures(s, tau)
        launches = [
            {"start": k * tau, "end": (k + 1) * tau, "colour": CPU_COLOUR, "kind": "launch"}
            for k in range(len(s["kernel_us"]))
        ]

        def kernel_and_node(name, start, end):
            return [
                {"start": start, "end": end - nu, "colour": KERNEL_COLOUR, "kind": "kernel", "label": name},
                {"start": end - nu, "end": end, "colour": NODE_COLOUR, "kind": "node"},
            ]

        kernels, idle, previous = [], [], 0.0
        for name, (_, start, end) in zip(s["kernels"], s["eager"]):
            if start > previous + 1e-9:
                idle.append({"start": previous, "end": start, "colour": IDLE_COLOUR, "kind": "idle"})
            kernels += kernel_and_node(name, start, end)
            previous = end
        replay = [{"start": 0.0, "end": tau, "colour": CPU_COLOUR, "kind": "launch"}]
        for name, (start, end) in zip(s["kernels"], s["graph"]):
            replay += kernel_and_node(name, start, end)
        out.append(
            {
                "name": s["name"],
                "lanes": [
                    {"name": "eager: CPU launches", "boxes": launches},
                    {"name": "eager: GPU kernels", "boxes": idle + kernels},
                    {"name": "graph: launch + replay", "boxes": replay},
                ],
                "notes": [
                    f"eager ends at {f['eager_end']:.1f} µs (GPU idle {f['idle']:.1f} µs)",
                    f"graph ends at {f['graph_end']:.1f} µs",
                    f"eager ÷ graph = {f['eager_end'] / f['graph_end']:.2f}x",
                    f"additive model: {f['additive']:.1f} µs",
                ],
            }
        )
    return out


def write_timeline(record: dict, out_dir) -> tuple[Path, Path]:
    out_dir, json_path = write_json(out_dir, "timeline.json", record)
    tau, nu = record["launch_us"], record["gpu_node_us"]
    svg_path = timeline(
        out_dir / "timeline.svg",
        timeline_scenarios(record),
        title=f"The eager pipeline kernel by kernel (τ = {tau:g} µs) against a graph replay",
        legend=[
            (CPU_COLOUR, f"CPU launch (τ = {tau:g} µs)"),
            (KERNEL_COLOUR, "kernel on the GPU"),
            (IDLE_COLOUR, "GPU idle, waiting for a launch"),
            (NODE_COLOUR, f"GPU cost per kernel beyond its bytes (ν = {nu:.2f} µs, H200)"),
        ],
        caption=[
            "Eager lanes: your exercise 9 eager_timeline (launched, start, end) per kernel. "
            "Graph lane: one launch, then the same kernels, each its bytes' time plus ν.",
            "The 7B layer: the lesson's 15 kernels per layer, each its bytes (Qwen2.5-7B, "
            "bf16, batch 1) over the H200's copy bandwidth.",
        ],
    )
    return json_path, svg_path


def command(args, impl: Implementation) -> int:
    try:
        record = timeline_record(
            lambda kernels, tau: call_student(impl, "tradeoffs", "eager_timeline", kernels, tau),
            args.launch_us,
            lesson.H200_TAU_GRAPH_US,
        )
    except ValueError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 1
    try:  # τ* of each scenario, computed once; the report reads them
        tau_stars = [
            float(call_student(impl, "tradeoffs", "cpu_bound_launch_us", s["gpu_us"])) for s in record["scenarios"]
        ]
    except ExerciseNotFinished:
        tau_stars = None
    print(
        f"timeline lab: eager timelines from exercise 9's eager_timeline (--impl {args.impl}); "
        f"every kernel costs the H200's ν = {lesson.H200_TAU_GRAPH_US:.2f} µs beyond its bytes; "
        "nothing measured\n"
    )
    print(timeline_report(record, tau_stars))
    wrote(write_timeline(record, args.out))
    return 0
