"""The speedup lab: which model is right (exercise 1's two answers, side by side).

    python -m coursekit.lab speedup [--reference]   # speedup.json/.svg

The graph's speedup against the step's compute time for the lesson's step (N = 430, τ = 5 µs),
under the lesson's additive model and exercise 1's CPU-GPU pipeline (your ``simulate_eager_ms``;
``--reference``: its equal-kernel closed form), with the AWQ and BF16 steps and the CPU-bound
turn marked.
"""

from __future__ import annotations

import math
from pathlib import Path

from coursekit import lesson
from coursekit.impl import Implementation
from coursekit.lab.common import (
    ADDITIVE_COLOUR,
    GRAPH_STEP_COLOUR,
    LESSON_LAUNCH_US,
    LESSON_STEP_KERNELS,
    PIPELINE_COLOUR,
    call_student,
    decode7b,
    student,
    write_json,
    wrote,
)
from coursekit.svgplot import figure

# The lab's own arithmetic for the lesson's two steps is for --reference only: without it the
# AWQ and BF16 points come from your exercise 1 DecodeStep (student_step).
LESSON_BANDWIDTH_BPS = 1.0e12  # DecodeStep.bandwidth_bps: the lesson's 1 TB/s
SPEEDUP_CLIP = 5.0  # panel (b) draws speedups up to this; as T -> 0 both models reach N


def lesson_compute_ms(weight_gib: float) -> float:
    """DecodeStep.compute_ms for ``weight_gib`` at the lesson's 1 TB/s (GiB = 1024**3 bytes)."""
    return weight_gib * 1024**3 / LESSON_BANDWIDTH_BPS * 1e3


def lesson_step(weight_gib: float) -> dict:
    """The lesson's ``DecodeStep(weight_gib)`` by the lab's own arithmetic (--reference only):
    ``compute_ms``, ``eager_additive_ms`` (eager_ms()), ``graph_ms`` and ``speedup_additive``."""
    t = lesson_compute_ms(weight_gib)
    eager, graph = t + LESSON_STEP_KERNELS * LESSON_LAUNCH_US / 1e3, t + LESSON_LAUNCH_US / 1e3
    return {"compute_ms": t, "eager_additive_ms": eager, "graph_ms": graph, "speedup_additive": eager / graph}


def student_step(impl: Implementation):
    """``lesson_step``'s figures from ``impl``'s exercise 1 ``DecodeStep(weight_gib)``, all other
    fields at their defaults (the lesson's step): what the lab draws without --reference."""

    def step(weight_gib: float) -> dict:
        s = call_student(impl, "launch_model", "DecodeStep", weight_gib)
        return {
            "compute_ms": float(student("launch_model", lambda: s.compute_ms)),
            "eager_additive_ms": float(student("launch_model", s.eager_ms)),
            "graph_ms": float(student("launch_model", s.graph_ms)),
            "speedup_additive": float(student("launch_model", s.speedup)),
        }

    return step


def pipeline_eager_ms_equal(compute_ms: float, n_kernels: int | None = None, launch_us: float | None = None) -> float:
    """Exercise 1's pipeline (``simulate_eager_ms``) in its simplest case, N equal kernels of
    t = T/N: when t <= tau every kernel waits for its launch and the last ends at N*tau + t;
    when t >= tau they run back to back after the first launch and end at tau + N*t. So
    ``max(N*tau + t, tau + N*t)``. This closed form is only the equal-kernel case: exercise 1
    simulates any list of kernel times (and exercise 9's ``eager_timeline`` shows it kernel by
    kernel), which is what a real step's mix of long GEMMs and tiny ops needs. N and tau default
    to the lesson's (``LESSON_STEP_KERNELS``, ``LESSON_LAUNCH_US``)."""
    n_kernels = LESSON_STEP_KERNELS if n_kernels is None else n_kernels
    launch_us = LESSON_LAUNCH_US if launch_us is None else launch_us
    t = compute_ms * 1e3 / n_kernels
    return max(n_kernels * launch_us + t, launch_us + n_kernels * t) / 1e3


def _log_samples(lo: float, hi: float, per_decade: int = 24) -> list[float]:
    count = round(math.log10(hi / lo) * per_decade)
    return [lo * (hi / lo) ** (k / count) for k in range(count + 1)]


SPEEDUP_RANGE_MS = (0.1, 90.0)  # T_compute drawn: far into the CPU-bound side, past BF16
SPEEDUP_TABLE_MS = (0.1, 0.5, 1.0, 50.0)  # rows of the report's table, with the marked points


def speedup_record(pipeline_ms, source: str, step=lesson_step, steps: str = "arithmetic") -> dict:
    """Both models' eager times, the graph's, over T_compute, for the lesson's step (N = 430,
    tau = 5 µs, gpu_node_us = 0). ``pipeline_ms(T)`` gives the pipeline's eager time in ms:
    the closed form (``pipeline_eager_ms_equal``) or the student's ``simulate_eager_ms``.
    ``step(weight_gib)`` gives the AWQ and BF16 points' compute, additive eager and graph times
    and speedup: ``lesson_step`` (the lab's arithmetic, --reference) or ``student_step(impl)``
    (exercise 1's DecodeStep); ``steps`` names which in the record. The curves are the models
    drawn by arithmetic over T_compute."""
    n, tau = LESSON_STEP_KERNELS, LESSON_LAUNCH_US
    turn = n * tau / 1e3
    ts = sorted(set(_log_samples(*SPEEDUP_RANGE_MS)) | set(SPEEDUP_TABLE_MS) | {turn})

    def row(t: float) -> dict:
        return {
            "compute_ms": t,
            "eager_additive_ms": t + n * tau / 1e3,
            "eager_pipeline_ms": float(pipeline_ms(t)),
            "graph_ms": t + tau / 1e3,
        }

    curve = [row(t) for t in ts]  # the pipeline first: an unfinished one is named first
    points = {}
    for label, gib in lesson.SEED_WEIGHTS:
        point = {"weight_gib": gib, **step(gib)}
        point["eager_pipeline_ms"] = float(pipeline_ms(point["compute_ms"]))
        point["speedup_pipeline"] = point["eager_pipeline_ms"] / point["graph_ms"]
        points[label.split()[0]] = point
    return {
        "n_kernels": n,
        "launch_us": tau,
        "gpu_node_us": 0.0,
        "bandwidth_bps": LESSON_BANDWIDTH_BPS,
        "cpu_bound_below_ms": turn,
        "pipeline": source,
        "steps": steps,
        "curve": curve,
        "points": points,
    }


def speedup_report(record: dict) -> str:
    """The speedup lab's text: the models, a table over T_compute, the lesson's two steps."""
    n, tau, turn = record["n_kernels"], record["launch_us"], record["cpu_bound_below_ms"]
    closed = record["pipeline"] == "closed form"
    points = record["points"]
    lines = [
        f"The lesson's decode step: N = {n} kernels, τ = {tau:g} µs per launch, a graph = one "
        "launch (gpu_node_us = 0).",
        "T = T_compute, the GPU's work per step; the pipeline shares it equally among the N kernels (t = T/N each).",
        "  additive (the lesson):  eager = T + N·τ             graph = T + τ",
        "  pipeline (exercise 1):  eager = "
        + ("max(N·τ + t, τ + N·t)" if closed else "simulate_eager_ms([t] * N, τ)")
        + ("   graph = T + τ" if closed else "  graph = T + τ"),
        "",
        "  T_compute |  t/kernel | eager additive | eager pipeline |    graph | speedup additive | speedup pipeline",
    ]
    table = [
        (row, "turn" if math.isclose(row["compute_ms"], turn, rel_tol=1e-9) else "")
        for row in record["curve"]
        if any(math.isclose(row["compute_ms"], w, rel_tol=1e-9) for w in (*SPEEDUP_TABLE_MS, turn))
    ]
    table += [(p, name) for name, p in points.items()]  # the AWQ and BF16 steps themselves
    for row, tag in sorted(table, key=lambda entry: entry[0]["compute_ms"]):
        t = row["compute_ms"]
        lines.append(
            f"{t:8.2f} ms | {t * 1e3 / n:6.2f} µs | {row['eager_additive_ms']:11.2f} ms | "
            f"{row['eager_pipeline_ms']:11.2f} ms | {row['graph_ms']:5.2f} ms | "
            f"{row['eager_additive_ms'] / row['graph_ms']:15.2f}x | "
            f"{row['eager_pipeline_ms'] / row['graph_ms']:15.2f}x  {tag}".rstrip()
        )
    lines.append("")
    for name, p in points.items():
        lines.append(
            f"{name} ({p['weight_gib']:g} GiB at 1 TB/s, T = {p['compute_ms']:.2f} ms): "
            f"additive {p['speedup_additive']:.2f}x, pipeline "
            f"{p['speedup_pipeline']:.2f}x"
        )
    lines += [
        f"The step turns CPU-bound below T = N·τ = {turn:.2f} ms (equal kernels: when t = T/N "
        f"drops under τ = {tau:g} µs).",
        "",
        "Which model is right? Both say a graph saves the launches; they disagree about what the launches cost",
        "while the GPU is busy. In the pipeline the CPU launches the next kernel while the GPU runs this one,",
        "so a kernel longer than τ hides the next launch: above the turn the eager step costs T + τ, the same",
        "as the graph (1.00x). The additive model charges every launch on top of the compute: an upper bound.",
        "Below the turn both have the GPU wait for the CPU, and a graph pays off (as T -> 0 "
        "both reach N x). A real step is not",
        "made of equal kernels: its tiny ops expose their launches even when the mean kernel is longer than τ",
        "(python -m coursekit.lab timeline; exercise 9's cpu_bound_launch_us), and the bundled H200 7B step",
        f"measured {decode7b()['speedup']:.1f}x.",
    ]
    return "\n".join(lines)


def speedup_panels(record: dict) -> tuple[list[dict], list[str]]:
    """(a) step times against T on log axes, (b) the speedups on a linear axis (clipped)."""
    curve, n, tau = record["curve"], record["n_kernels"], record["launch_us"]
    turn, points = record["cpu_bound_below_ms"], record["points"]
    pipeline = (
        "pipeline, equal kernels: max(N·τ + t, τ + N·t)"
        if record["pipeline"] == "closed form"
        else "pipeline: your simulate_eager_ms"
    )
    times = [
        {
            "name": "eager, additive: T + N·τ",
            "colour": ADDITIVE_COLOUR,
            "style": "line",
            "dash": "dotted",
            "points": [(r["compute_ms"], r["eager_additive_ms"]) for r in curve],
        },
        {
            "name": f"eager, {pipeline}",
            "colour": PIPELINE_COLOUR,
            "style": "line",
            "points": [(r["compute_ms"], r["eager_pipeline_ms"]) for r in curve if r["eager_pipeline_ms"] > 0],
        },
        {
            "name": "graph: T + τ (both models)",
            "colour": GRAPH_STEP_COLOUR,
            "style": "line",
            "dash": "dashed",
            "points": [(r["compute_ms"], r["graph_ms"]) for r in curve],
        },
    ]
    speedups = [
        {
            "name": "additive: (T + N·τ) ÷ (T + τ)",
            "colour": ADDITIVE_COLOUR,
            "style": "line",
            "dash": "dotted",
            "points": [
                (r["compute_ms"], r["eager_additive_ms"] / r["graph_ms"])
                for r in curve
                if r["eager_additive_ms"] / r["graph_ms"] <= SPEEDUP_CLIP
            ],
        },
        {
            "name": "pipeline ÷ (T + τ)",
            "colour": PIPELINE_COLOUR,
            "style": "line",
            "points": [
                (r["compute_ms"], r["eager_pipeline_ms"] / r["graph_ms"])
                for r in curve
                if 0 < r["eager_pipeline_ms"] / r["graph_ms"] <= SPEEDUP_CLIP
            ],
        },
    ]
    for name, p in points.items():
        marker = "diamond" if name == "AWQ" else "square"
        times += [
            {
                "name": f"{name}, eager {model}: {p[f'eager_{model}_ms']:.2f} ms",
                "colour": colour,
                "style": "points",
                "marker": marker,
                "points": [(p["compute_ms"], p[f"eager_{model}_ms"])],
            }
            for model, colour in (("additive", ADDITIVE_COLOUR), ("pipeline", PIPELINE_COLOUR))
            if p[f"eager_{model}_ms"] > 0
        ]
        speedups += [
            {
                "name": f"{name}, {model}: {p[f'speedup_{model}']:.2f}x",
                "colour": colour,
                "style": "points",
                "marker": marker,
                "points": [(p["compute_ms"], p[f"speedup_{model}"])],
            }
            for model, colour in (("additive", ADDITIVE_COLOUR), ("pipeline", PIPELINE_COLOUR))
            if 0 < p[f"speedup_{model}"] <= SPEEDUP_CLIP
        ]
    marks = [{"x": turn, "label": f"CPU-bound below N·τ = {turn:.2f} ms"}] + [
        {"x": p["compute_ms"], "label": f"{name} {p['compute_ms']:.2f} ms"} for name, p in points.items()
    ]
    panels = [
        {
            "name": "(a) step time (log scale)",
            "y_label": "step time (ms, log scale)",
            "y_scale": "log",
            "height": 300,
            "series": times,
            "marks": marks,
            "notes": [
                f"N = {n} kernels, τ = {tau:g} µs; a graph is one launch",
                "(gpu_node_us = 0).",
                "Left of the turn the GPU waits for launches;",
                "right of it the pipeline hides them behind",
                "the kernels: eager = T + τ, on the graph's line.",
            ],
        },
        {
            "name": "(b) speedup of the CUDA graph, eager ÷ graph",
            "y_label": "speedup",
            "height": 240,
            "series": speedups,
            "marks": marks,
            "mark_labels": "top",
            "notes": [
                f"Drawn up to {SPEEDUP_CLIP:g}x: as T -> 0 both models reach",
                f"N = {n}x (one launch instead of N).",
                "AWQ (diamonds), BF16 (squares); the lesson's",
                "table prints the additive model's: "
                + " and ".join(f"{p['speedup_additive']:.2f}x" for p in points.values())
                + ".",
            ],
        },
    ]
    caption = [
        f"The lesson's step (N = {n}, τ = {tau:g} µs) under both models of exercise 1. "
        "T_compute = weights read at 1 TB/s for AWQ (5.5 GiB) and BF16 (14.2 GiB).",
        "Pipeline: "
        + (
            "the equal-kernel closed form (--reference)."
            if record["pipeline"] == "closed form"
            else "your simulate_eager_ms, N equal kernels."
        ),
    ]
    return panels, caption


def write_speedup(record: dict, out_dir) -> tuple[Path, Path]:
    out_dir, json_path = write_json(out_dir, "speedup.json", record)
    panels, caption = speedup_panels(record)
    svg_path = figure(
        out_dir / "speedup.svg",
        panels,
        x_scale="log",
        title="Which model is right? Eager vs graph against compute time",
        x_label="T_compute per step (ms, log scale)",
        caption=caption,
    )
    return json_path, svg_path


def step_disagreements(record: dict) -> str:
    """Lines for each AWQ/BF16 figure of the student's DecodeStep that differs from the lesson's
    rule (``lesson_step``; "" if none): a difference points at exercise 1."""
    bad = []
    for name, p in record["points"].items():
        want = lesson_step(p["weight_gib"])
        bad += [
            f"  {name}: DecodeStep({p['weight_gib']:g}).{key} gave {p[field]:.6g}, expected {want[field]:.6g}"
            for key, field in (
                ("compute_ms", "compute_ms"),
                ("eager_ms()", "eager_additive_ms"),
                ("graph_ms()", "graph_ms"),
                ("speedup()", "speedup_additive"),
            )
            if not math.isclose(p[field], want[field], rel_tol=1e-9)
        ]
    if not bad:
        return ""
    return "\n".join(
        [
            "Your DecodeStep differs from the lesson's rule (compute = GiB·1024**3 / "
            "1e12 s, eager = compute + N·τ, graph = compute + τ, N = 430, τ = 5 µs): "
            "check exercise 1."
        ]
        + bad
    )


def pipeline_disagreements(record: dict) -> str:
    """A line when the student's pipeline differs from the equal-kernel closed form ("" if not):
    for equal kernels the two must agree, so a difference points at exercise 1."""
    n, tau = record["n_kernels"], record["launch_us"]
    closed = [
        (r["compute_ms"], r["eager_pipeline_ms"], pipeline_eager_ms_equal(r["compute_ms"], n, tau))
        for r in record["curve"]
    ]
    bad = [row for row in closed if not math.isclose(row[1], row[2], rel_tol=1e-6)]
    if not bad:
        return ""
    t, got, want = bad[0]
    return (
        f"Your simulate_eager_ms differs from the equal-kernel closed form at {len(bad)} of "
        f"{len(record['curve'])} points (first at T = {t:.3g} ms: got {got:.4g} ms, expected "
        f"max(N·τ + t, τ + N·t) = {want:.4g} ms): check exercise 1."
    )


def command(args, impl: Implementation) -> int:
    if args.reference:
        record = speedup_record(pipeline_eager_ms_equal, "closed form")
        source = (
            "the pipeline from its equal-kernel closed form (--reference), the additive "
            "model and the AWQ and BF16 steps by the lab's arithmetic; nothing measured"
        )
    else:
        n, tau = LESSON_STEP_KERNELS, LESSON_LAUNCH_US
        record = speedup_record(
            lambda t: call_student(impl, "launch_model", "simulate_eager_ms", [t * 1e3 / n] * n, tau),
            "simulate_eager_ms",
            student_step(impl),
            "DecodeStep",
        )
        source = (
            f"the AWQ and BF16 steps from your DecodeStep and the pipeline from your "
            f"simulate_eager_ms (exercise 1, --impl {args.impl}), the additive curve by "
            "arithmetic; nothing measured"
        )
    print(f"speedup lab: {source}\n")
    print(speedup_report(record))
    if not args.reference:
        for warning in (step_disagreements(record), pipeline_disagreements(record)):
            if warning:
                print(f"\n{warning}")
    wrote(write_speedup(record, args.out))
    return 0
