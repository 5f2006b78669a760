"""The prefill lab: the graph's gain against the work in each kernel (exercises 1, 2 and 9).

    python -m coursekit.lab prefill     # prefill.json/.svg: decode vs prefill

The graph's gain against the size of each kernel at N = 200 (Part A's chain), through exercise
1's models and exercise 9's turn, with the H200's τ and ν; with CUDA your exercise 2
``measure_launch_tax`` measures each size too: decode's tiny kernels pay the launch tax,
prefill's large ones hide it.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from coursekit import lesson
from coursekit.impl import Implementation
from coursekit.lab.common import (
    ADDITIVE_COLOUR,
    GRAPH_STEP_COLOUR,
    PIPELINE_COLOUR,
    call_student,
    copy_bandwidth_bps,
    student,
    write_json,
    wrote,
)
from coursekit.svgplot import figure

#: Elements per kernel, 4**5 .. 4**13: Part A's 1024 floats (a decode step's elementwise op on
#: one token's hidden state is a few thousand) up to 67 million (a prefill's over a long prompt).
PREFILL_NUMELS = tuple(4**k for k in range(5, 14))
PREFILL_OPS = 200  # Part A's chain length, N


def chain_kernel_us(numel: int, bandwidth_bps: float) -> float:
    """The bytes' time of one ``x + 1`` kernel over ``numel`` float32 values, in µs: it reads
    and writes 4 bytes per value, over the copy bandwidth (bytes read plus written per second)."""
    return 8 * numel / bandwidth_bps * 1e6


def prefill_record(
    step_cls,
    simulate,
    cpu_bound,
    launch_us: float,
    node_us: float,
    bandwidth_bps: float,
    numels=PREFILL_NUMELS,
    n_ops: int = PREFILL_OPS,
) -> dict:
    """The chain of ``n_ops`` kernels at each size in ``numels``, through exercise 1's models
    and exercise 9's turn: each kernel costs the GPU its bytes' time plus ``node_us`` (ν), eager
    and in a graph. ``step_cls``: exercise 1's ``DecodeStep`` (the additive eager time and the
    graph time of a step of ``n_ops`` kernels reading the chain's bytes); ``simulate``: its
    ``simulate_eager_ms`` (the pipeline); ``cpu_bound``: exercise 9's ``cpu_bound_launch_us``
    (τ* of the chain: it is CPU-bound when ``launch_us`` is above). Times in µs."""
    rows = []
    for numel in numels:
        kernel = chain_kernel_us(numel, bandwidth_bps)
        step = step_cls(
            weight_gib=n_ops * 8 * numel / 1024**3,
            n_layers=1,
            kernels_per_layer=n_ops - 10,
            launch_us=launch_us,
            bandwidth_bps=bandwidth_bps,
            gpu_node_us=node_us,
        )
        gpu = [kernel + node_us] * n_ops
        rows.append(
            {
                "numel": numel,
                "kernel_us": kernel,
                "eager_additive_us": float(step.eager_ms()) * 1e3,
                "eager_pipeline_us": float(simulate(gpu, launch_us)) * 1e3,
                "graph_us": float(step.graph_ms()) * 1e3,
                "tau_star_us": float(cpu_bound(gpu)),
            }
        )
    # the turn: kernel + ν = τ, so kernels of more bytes than (τ - ν) worth hide the launches
    turn = max(launch_us - node_us, 0.0) * 1e-6 * bandwidth_bps / 8
    return {
        "n_ops": n_ops,
        "launch_us": launch_us,
        "gpu_node_us": node_us,
        "bandwidth_bps": bandwidth_bps,
        "turn_numel": turn,
        "rows": rows,
        "measured": None,
    }


def prefill_report(record: dict) -> str:
    """The prefill lab's text: the model's table (and the measured columns when there are)."""
    n, tau, nu = record["n_ops"], record["launch_us"], record["gpu_node_us"]
    measured = {m["numel"]: m for m in record["measured"] or []}
    lines = [
        f"A chain of N = {n} kernels (x + 1 on float32) at τ = {tau:.2f} µs per launch and "
        f"ν = {nu:.2f} µs of GPU time per kernel,",
        f"each kernel its bytes (8 per value) over {record['bandwidth_bps'] / 1e12:.2f} TB/s. "
        "Times per run of the chain, µs.",
        "",
        f"{'numel':>10} | kernel |     τ* | eager pipeline | eager additive |    graph | speedup "
        "pipeline | additive" + (" | measured eager | graph | speedup" if measured else ""),
    ]
    for r in record["rows"]:
        line = (
            f"{r['numel']:>10,} | {r['kernel_us']:6.2f} | {r['tau_star_us']:6.2f} | "
            f"{r['eager_pipeline_us']:14.1f} | "
            f"{r['eager_additive_us']:14.1f} | {r['graph_us']:8.1f} | "
            f"{r['eager_pipeline_us'] / r['graph_us']:15.2f}x | "
            f"{r['eager_additive_us'] / r['graph_us']:7.2f}x"
        )
        m = measured.get(r["numel"])
        if m:
            line += f" | {m['eager_us']:14.1f} | {m['graph_us']:5.1f} | {m['eager_us'] / m['graph_us']:6.2f}x"
        lines.append(line)
    turn = record["turn_numel"]
    lines += [
        "",
        f"τ*: exercise 9's cpu_bound_launch_us of the chain (kernel + ν). The chain is "
        f"CPU-bound while τ > τ*, i.e. below {turn / 1e6:.2f} million values per kernel.",
        "Decode's kernels sit far left of it: one token's elementwise ops are a few thousand values, and the graph",
        "wins about τ ÷ ν. A prefill over a long prompt makes every kernel thousands of times larger: past the turn",
        "the launches hide behind the kernels, eager ends one launch after the GPU starts, "
        "and the graph gains nothing.",
    ]
    wrong = [f"{m['numel']:,}" for m in record["measured"] or [] if not m["replay_matches_eager"]]
    if wrong:
        lines.append(
            f"Measured at {', '.join(wrong)} values: the replay did not match eager "
            "(exercise 2's measure_launch_tax), so those times are not of the same work."
        )
    return "\n".join(lines)


def prefill_panels(record: dict) -> tuple[list[dict], list[str]]:
    rows, turn = record["rows"], record["turn_numel"]
    speedups = [
        {
            "name": "additive (exercise 1's DecodeStep)",
            "colour": ADDITIVE_COLOUR,
            "style": "line",
            "dash": "dotted",
            "points": [(r["numel"], r["eager_additive_us"] / r["graph_us"]) for r in rows],
        },
        {
            "name": "pipeline (exercise 1's simulate_eager_ms)",
            "colour": PIPELINE_COLOUR,
            "style": "line",
            "points": [(r["numel"], r["eager_pipeline_us"] / r["graph_us"]) for r in rows],
        },
    ]
    if record["measured"]:
        speedups.append(
            {
                "name": f"measured ({record['measured'][0].get('gpu', 'this GPU')})",
                "colour": GRAPH_STEP_COLOUR,
                "style": "points",
                "marker": "diamond",
                "points": [(m["numel"], m["eager_us"] / m["graph_us"]) for m in record["measured"]],
            }
        )
    panels = [
        {
            "name": "speedup of the CUDA graph, eager ÷ graph",
            "y_label": "speedup",
            "height": 300,
            "series": speedups,
            "marks": [{"x": turn, "label": f"τ* = kernel + ν: {turn / 1e6:.2f} million values"}],
            "notes": [
                f"N = {record['n_ops']} kernels, τ = {record['launch_us']:.2f} µs,",
                f"ν = {record['gpu_node_us']:.2f} µs per kernel (H200).",
                "Left: decode-sized kernels, launch-bound.",
                "Right: prefill-sized, the launches hide.",
            ],
        }
    ]
    caption = [
        "Model: each kernel's bytes over the H200's copy bandwidth plus ν; τ and ν as "
        f"measured on the H200 ({lesson.H200_DATE}).",
        "Measured points: your measure_launch_tax at each size (exercise 2), where a GPU ran it."
        if record["measured"]
        else "Modelled, not measured: no GPU ran this sweep (run the lab on one to add its points).",
    ]
    return panels, caption


def write_prefill(record: dict, out_dir) -> tuple[Path, Path]:
    out_dir, json_path = write_json(out_dir, "prefill.json", record)
    panels, caption = prefill_panels(record)
    svg_path = figure(
        out_dir / "prefill.svg",
        panels,
        x_scale="log",
        title="Decode pays the launch tax, prefill does not: the graph's gain against kernel size",
        x_label="values per kernel (log scale)",
        caption=caption,
    )
    return json_path, svg_path


def command(args, impl: Implementation) -> int:
    def student_step_cls(**kwargs):  # its methods' NotImplementedError: exercise 1 unfinished
        s = call_student(impl, "launch_model", "DecodeStep", **kwargs)
        return SimpleNamespace(
            eager_ms=lambda: student("launch_model", s.eager_ms), graph_ms=lambda: student("launch_model", s.graph_ms)
        )

    record = prefill_record(
        student_step_cls,
        lambda kernels, tau: call_student(impl, "launch_model", "simulate_eager_ms", kernels, tau),
        lambda kernels: call_student(impl, "tradeoffs", "cpu_bound_launch_us", kernels),
        lesson.H200_TAU_EAGER_US,
        lesson.H200_TAU_GRAPH_US,
        copy_bandwidth_bps(),
    )
    import torch

    if torch.cuda.is_available() and not args.model_only:
        gpu = torch.cuda.get_device_name()
        record["measured"] = []
        for numel in PREFILL_NUMELS:
            r = call_student(impl, "launch_tax", "measure_launch_tax", PREFILL_OPS, numel, args.iters)
            record["measured"].append(
                {
                    "numel": numel,
                    "eager_us": float(r.eager_us),
                    "graph_us": float(r.graph_us),
                    "gpu": gpu,
                    "replay_matches_eager": bool(r.replay_matches_eager),
                }
            )
        source = (
            f"measured on {gpu} with your measure_launch_tax (exercise 2); the model from "
            f"your DecodeStep, simulate_eager_ms and cpu_bound_launch_us (--impl {args.impl})"
        )
    else:
        why = "--model-only" if args.model_only else "no CUDA here"
        source = (
            f"the model from your DecodeStep, simulate_eager_ms (exercise 1) and "
            f"cpu_bound_launch_us (exercise 9, --impl {args.impl}), with the H200's τ, ν and "
            f"copy bandwidth ({lesson.H200_DATE}); modelled, not measured: {why}, and no "
            "measured sweep is bundled yet"
        )
    print(f"prefill lab: {source}\n")
    print(prefill_report(record))
    wrote(write_prefill(record, args.out))
    return 0
