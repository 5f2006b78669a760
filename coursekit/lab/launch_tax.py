"""The launch-tax lab: the lesson's Part A, eager against one CUDA graph over N.

``launch-tax`` is the lesson's Part A: a chain of 200 tiny kernels run eagerly (one CPU launch per
kernel) and as one replayed CUDA graph, then a sweep over chain lengths N. Exercise 1's
``fit_launch_model`` fits a line through each curve: the eager slope τ is the CPU cost of one
launch, the graph slope ν is what each kernel node still costs on the GPU after capture. It
prints a report, and writes the figures (``launch-tax.json``) and a chart (``launch-tax.svg``):
(a) step time against N on a log axis, with the lesson's model, (b) the speedup; both with Part
A and marks at the lesson's 430-kernel decode step and the bundled 7B step (1579 kernels, whose
measured times are drawn too). Until exercise 1 is finished the lab still reports and draws the
measured points and the lesson's model, and says that the fitted lines come with exercise 1: it
never fits a line of its own.

    python -m coursekit.lab launch-tax                     # measure with exercises/ (needs CUDA)
    python -m coursekit.lab launch-tax --impl FOLDER       # measure with another folder of modules
    python -m coursekit.lab launch-tax --reference         # the bundled H200 figures, any machine
    python -m coursekit.lab launch-tax --from FILE         # re-plot a saved launch-tax.json

``--reference`` re-plots the H200 run bundled in ``coursekit/data/`` (``--from`` on that file);
neither measures anything, and the report says where its figures come from.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from coursekit import lesson
from coursekit.course import by_module
from coursekit.impl import REPO_ROOT, Implementation
from coursekit.lab.common import (
    EAGER_COLOUR,
    GRAPH_COLOUR,
    LESSON_LAUNCH_US,
    LESSON_STEP_KERNELS,
    SPEEDUP_COLOUR,
    ExerciseNotFinished,
    call_student,
    decode7b,
    write_json,
    wrote,
)
from coursekit.svgplot import figure

PART_A_OPS, PART_A_NUMEL = 200, 1024  # the lesson's Part A: 200 tiny kernels on 1024 floats
DEFAULT_SIZES = (25, 50, 100, 200, 400, 800)


# --- the record: one plain dict in the shape of coursekit/data/h200-anchor-*.json ------------


def make_record(
    gpu: str, torch_version: str, eager_us: float, graph_us: float, replay_correct: bool, sweep_ms: dict
) -> dict:
    """The lab's record before fitting. ``sweep_ms`` maps N -> (eager ms, graph ms); it is stored
    as in the JSON: string keys in increasing N, values as lists. Times must be finite and > 0,
    and the sweep needs at least two chain lengths (a line through one N is not determined)."""
    for name, value in [("partA.eager_us", eager_us), ("partA.graph_us", graph_us)] + [
        (f"sweep_ms[{n}]", t) for n, pair in sweep_ms.items() for t in pair
    ]:
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: expected a time > 0, got {value!r}")
    if len(sweep_ms) < 2:
        raise ValueError(f"sweep_ms: expected at least two chain lengths, got {list(sweep_ms)}")
    ns = sorted(sweep_ms, key=int)
    return {
        "gpu": gpu,
        "torch": torch_version,
        "partA": {
            "eager_us": eager_us,
            "graph_us": graph_us,
            "ratio": eager_us / graph_us,
            "replay_correct": bool(replay_correct),
        },
        "sweep_ms": {str(int(n)): [float(sweep_ms[n][0]), float(sweep_ms[n][1])] for n in ns},
    }


def reference_record() -> dict:
    """The bundled H200 run (``coursekit/data/h200-anchor-2026-11-30.json``, where
    ``coursekit.lesson``'s H200 figures come from), as a record."""
    return load_record(lesson.H200_ANCHOR)


def load_record(path, arg: str = "--from") -> dict:
    """A record read from a JSON file in the anchor's shape (``partA`` and ``sweep_ms`` are read,
    other keys ignored; the fits are redone). Unreadable or wrong shape -> ValueError naming
    ``arg``, the command-line option that gave ``path``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        part_a = data["partA"]
        sweep = {int(n): (pair[0], pair[1]) for n, pair in data["sweep_ms"].items()}
        return make_record(
            str(data.get("gpu", "unknown GPU")),
            str(data.get("torch", "unknown")),
            part_a["eager_us"],
            part_a["graph_us"],
            part_a.get("replay_correct", False),
            sweep,
        )
    except OSError as exc:
        raise ValueError(f"{arg}: cannot read {path}: {exc.strerror}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        # json.JSONDecodeError is a ValueError too.
        raise ValueError(
            f"{arg}: {path} is not a launch-tax measurement (expected the shape of "
            f"launch-tax.json: partA.eager_us, partA.graph_us, sweep_ms): "
            f"{type(exc).__name__}: {exc}"
        ) from None


def fit_record(record: dict, fit) -> dict:
    """``record`` plus the two fitted lines, with ``fit`` = exercise 1's ``fit_launch_model``
    (n_kernels, step_ms) -> (slope µs per kernel, intercept ms). Keys as in the anchor JSON:
    ``tau_eager_us``/``t0_eager_us`` (eager slope/intercept) and ``tau_graph_us``/``t0_graph_us``
    (graph slope ν and intercept), all in µs."""
    ns = [int(n) for n in record["sweep_ms"]]
    tau_e, c_e = fit(ns, [e for e, _ in record["sweep_ms"].values()])
    tau_g, c_g = fit(ns, [g for _, g in record["sweep_ms"].values()])
    return {**record, "tau_eager_us": tau_e, "t0_eager_us": c_e * 1e3, "tau_graph_us": tau_g, "t0_graph_us": c_g * 1e3}


# --- report and chart: pure functions of a record, fitted (see fit_record) or not --------------


def _times(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "n/a"


def is_fitted(record: dict) -> bool:
    """Whether ``record`` carries the two fitted lines (``fit_record``'s keys)."""
    return all(key in record for key in ("tau_eager_us", "t0_eager_us", "tau_graph_us", "t0_graph_us"))


def report(record: dict, label: str = "this run") -> str:
    """The lab's text report for a record; ``label`` heads the record's column (at most 10
    characters): "this run" only for figures measured now. A fitted record (see ``fit_record``)
    gets the model columns and the fitted per-kernel costs; a record without fits (exercise 1 not
    finished) gets the lesson's model instead, and a sentence saying where the fits will come
    from."""
    a, ref_eager, ref_graph = record["partA"], *lesson.H200_PART_A
    lines = [
        f"GPU: {record['gpu']}, torch {record['torch']}",
        "",
        f"Part A: {PART_A_OPS} tiny kernels on {PART_A_NUMEL} floats, µs per iteration",
        f"{'':13}{label:>10}{'H200 reference':>17}",
        f"  {'eager':11}{a['eager_us']:7.0f} µs{ref_eager:14.0f} µs",
        f"  {'graph':11}{a['graph_us']:7.0f} µs{ref_graph:14.0f} µs",
        f"  {'speedup':11}{_times(a['eager_us'], a['graph_us']):>10}{_times(ref_eager, ref_graph):>17}",
        "  graph replay matches eager: "
        + ("yes" if a["replay_correct"] else "NO: the replay's output differs (exercise 2)"),
        "",
    ]
    if not is_fitted(record):
        return "\n".join(lines + _unfitted_report(record))
    tau, nu = record["tau_eager_us"], record["tau_graph_us"]
    lines += [
        "N-sweep: µs per iteration of a chain of N tiny kernels; model = the two fitted lines",
        "     N | eager meas | eager model | graph meas | graph model | speedup meas | speedup model",
    ]
    for n, (eager_ms, graph_ms) in record["sweep_ms"].items():
        eager_model = record["t0_eager_us"] + int(n) * tau
        graph_model = record["t0_graph_us"] + int(n) * nu
        lines.append(
            f"{n:>6} | {eager_ms * 1e3:10.1f} | {eager_model:11.1f} | {graph_ms * 1e3:10.1f} | "
            f"{graph_model:11.1f} | {_times(eager_ms, graph_ms):>12} | "
            f"{_times(eager_model, graph_model):>13}"
        )
    step_kernels = LESSON_STEP_KERNELS
    lines += [
        "",
        f"{'Fitted per-kernel costs (exercise 1: fit_launch_model)':56}{label:>10}{'H200 reference':>17}",
        f"  {'τ, eager: CPU cost of one launch':54}{tau:7.2f} µs{lesson.H200_TAU_EAGER_US:14.2f} µs",
        f"  {'ν, graph: GPU cost of one kernel node':54}{nu:7.2f} µs{lesson.H200_TAU_GRAPH_US:14.2f} µs",
        f"  intercepts: eager {record['t0_eager_us']:.1f} µs, graph {record['t0_graph_us']:.1f} µs",
        "",
        "The lesson's model (gpu_node_us = 0) says a graph costs one launch whatever N is.",
        f"Measured, each node still costs ν = {nu:.2f} µs on the GPU: DecodeStep(gpu_node_us={nu:.2f}) models it,",
        "in eager mode and in a graph alike (a graph removes launches, not kernels).",
        f"For the lesson's {step_kernels}-kernel decode step that is {step_kernels * nu:.0f} µs of "
        "GPU time per step that",
        "capture cannot remove; only fewer kernels (fusion) can.",
    ]
    return "\n".join(lines)


UNFITTED = "The fitted lines appear once exercise 1's fit_launch_model is done."


def _unfitted_report(record: dict) -> list[str]:
    """The sweep and the lesson's model, for a record exercise 1 has not fitted yet."""
    tau = LESSON_LAUNCH_US
    lines = [
        f"N-sweep: µs per iteration of a chain of N tiny kernels; lesson = the lesson's model "
        f"(eager N·τ, a graph one launch τ, τ = {tau:g} µs)",
        "     N | eager meas | eager lesson | graph meas | graph lesson | speedup meas | speedup lesson",
    ]
    for n, (eager_ms, graph_ms) in record["sweep_ms"].items():
        lines.append(
            f"{n:>6} | {eager_ms * 1e3:10.1f} | {int(n) * tau:12.1f} | {graph_ms * 1e3:10.1f} | "
            f"{tau:12.1f} | {_times(eager_ms, graph_ms):>12} | {_times(int(n) * tau, tau):>14}"
        )
    return lines + [
        "",
        "Not fitted yet. " + UNFITTED,
        "Finish it in launch_model.py, then run this again, or re-plot the saved launch-tax.json with --from.",
        "The lesson's model gives a graph no GPU cost per kernel node (gpu_node_us = 0), so it predicts a",
        "speedup of N; the measured graph time grows with N too, and exercise 1's fit says by how much.",
    ]


def part_a_vs_sweep(record: dict) -> str:
    """Why Part A's speedup and the sweep's at N = 200 differ (two measurements of one chain);
    "" when the sweep has no N = 200."""
    point = record["sweep_ms"].get(str(PART_A_OPS))
    if point is None:
        return ""
    a = record["partA"]
    eager, graph = point[0] * 1e3, point[1] * 1e3
    ratio_a, ratio_s = a["eager_us"] / a["graph_us"], eager / graph

    def moved(new: float, old: float) -> str:
        return f"{abs(new - old) / old:.0%}".replace("%", " %")

    return "\n".join(
        [
            f"Why Part A says {_times(a['eager_us'], a['graph_us'])} and the sweep's N = {PART_A_OPS} "
            f"says {_times(eager, graph)}: they are two separate measurements of the",
            f"same chain of {PART_A_OPS} tiny kernels, made one after the other in one run:",
            f"  {'Part A':15}eager {a['eager_us']:6.0f} µs, graph {a['graph_us']:5.0f} µs -> "
            f"{_times(a['eager_us'], a['graph_us']):>5}",
            f"  {f'sweep, N = {PART_A_OPS}':15}eager {eager:6.0f} µs, graph {graph:5.0f} µs -> "
            f"{_times(eager, graph):>5}",
            f"Eager differs by {moved(eager, a['eager_us'])}, graph by {moved(graph, a['graph_us'])}, "
            f"and their ratio by {moved(ratio_s, ratio_a)}: a ratio of two noisy times moves",
            "more than either time. Repeat each measurement and take the median before you quote a speedup.",
        ]
    )


def against_the_real_step(record: dict) -> str:
    """The bundled 7B decode step beside the lines drawn through the tiny-kernel sweep
    (the fitted ones when ``record`` has them, else the lesson's model), at its kernel count."""
    d = decode7b()
    n = d["kernels"]
    if is_fitted(record):
        eager = record["t0_eager_us"] + n * record["tau_eager_us"]
        graph = record["t0_graph_us"] + n * record["tau_graph_us"]
        what = "The fitted lines, extrapolated to"
    else:
        eager, graph = n * LESSON_LAUNCH_US, LESSON_LAUNCH_US
        what = "The lesson's model at"
    return "\n".join(
        [
            f"Against a real step: the bundled H200 7B decode step (batch 1, {n} kernels) took eager "
            f"{d['eager_ms']:.1f} ms,",
            f"graph {d['graph_ms']:.2f} ms ({_times(d['eager_ms'], d['graph_ms'])}). {what} "
            f"N = {n}: eager {eager / 1e3:.2f} ms,",
            f"graph {graph / 1e3:.3f} ms ({_times(eager, graph)}). The real step also reads its "
            f"weights (floor {d['floor_ms']:.2f} ms), and its",
            "kernels cost more than x + 1.",
        ]
    )


def _samples(lo: float, hi: float, count: int = 60) -> list[float]:
    return [lo + (hi - lo) * k / count for k in range(count + 1)]


def chart_panels(record: dict) -> tuple[list[dict], list[str]]:
    """The chart's two panels and its caption (see ``coursekit.svgplot.figure``): (a) step time
    against N on a log axis, (b) the speedup eager/graph; both with marks at the lesson's decode
    step and the bundled 7B step's kernel counts."""
    sweep = {int(n): (e * 1e3, g * 1e3) for n, (e, g) in record["sweep_ms"].items()}
    ns, a, d = sorted(sweep), record["partA"], decode7b()
    n7b, last = d["kernels"], max(sweep)
    end = max(last, n7b)  # the fitted lines run on to the 7B step's N: extrapolated past the sweep
    xs = sorted(set(_samples(min(ns), end)) | {last})
    fitted, tau = is_fitted(record), LESSON_LAUNCH_US

    def line(kind: str):
        return lambda n: record[f"t0_{kind}_us"] + record[f"tau_{kind}_us"] * n

    times = [
        {
            "name": "eager, measured",
            "colour": EAGER_COLOUR,
            "style": "points",
            "points": [(n, sweep[n][0]) for n in ns],
        },
        {
            "name": "graph, measured",
            "colour": GRAPH_COLOUR,
            "style": "points",
            "points": [(n, sweep[n][1]) for n in ns],
        },
    ]
    speedups = [
        {
            "name": "eager ÷ graph, measured",
            "colour": SPEEDUP_COLOUR,
            "style": "points",
            "points": [(n, sweep[n][0] / sweep[n][1]) for n in ns],
        }
    ]
    if fitted:
        eager, graph = line("eager"), line("graph")

        def drawn(points):  # a log axis shows times > 0 only, and a fit may dip below 0 at small N
            return [(n, y) for n, y in points if math.isfinite(y) and y > 0]

        fits = [
            (
                f"{kind} fit: {record[f't0_{kind}_us']:.1f} + {record[f'tau_{kind}_us']:.2f}·N µs",
                colour,
                drawn((n, line(kind)(n)) for n in xs),
                times,
            )
            for kind, colour in (("eager", EAGER_COLOUR), ("graph", GRAPH_COLOUR))
        ]
        # Where the graph fit nears 0 (a negative intercept) the fitted ratio soars: it is drawn
        # up to twice the largest measured speedup only, so it cannot flatten the measured points.
        top = 2 * max([sweep[n][0] / sweep[n][1] for n in ns] + [a["eager_us"] / a["graph_us"]])
        fits.append(
            (
                "eager fit ÷ graph fit",
                SPEEDUP_COLOUR,
                [p for p in drawn((n, eager(n) / graph(n)) for n in xs if graph(n) > 0) if p[1] <= top],
                speedups,
            )
        )
        for name, colour, points, panel in fits:
            if len(points) >= 2:
                panel.append({"name": name, "colour": colour, "style": "line", "dashed_after": last, "points": points})
    times += [
        {
            "name": f"lesson's model, eager: N × {tau:g} µs",
            "colour": EAGER_COLOUR,
            "style": "line",
            "dash": "dotted",
            "points": [(n, n * tau) for n in xs],
        },
        {
            "name": f"lesson's model, graph: one launch, {tau:g} µs",
            "colour": GRAPH_COLOUR,
            "style": "line",
            "dash": "dotted",
            "points": [(min(ns), tau), (end, tau)],
        },
        {
            "name": f"Part A eager, N = {PART_A_OPS} (separate run)",
            "colour": EAGER_COLOUR,
            "style": "points",
            "marker": "square",
            "points": [(PART_A_OPS, a["eager_us"])],
        },
        {
            "name": f"Part A graph, N = {PART_A_OPS} (separate run)",
            "colour": GRAPH_COLOUR,
            "style": "points",
            "marker": "square",
            "points": [(PART_A_OPS, a["graph_us"])],
        },
        {
            "name": "7B decode step, eager (H200, batch 1)",
            "colour": EAGER_COLOUR,
            "style": "points",
            "marker": "diamond",
            "points": [(n7b, d["eager_ms"] * 1e3)],
        },
        {
            "name": "7B decode step, graph (H200, batch 1)",
            "colour": GRAPH_COLOUR,
            "style": "points",
            "marker": "diamond",
            "points": [(n7b, d["graph_ms"] * 1e3)],
        },
    ]
    speedups += [
        {
            "name": f"Part A, N = {PART_A_OPS} (separate run): {_times(a['eager_us'], a['graph_us'])}",
            "colour": SPEEDUP_COLOUR,
            "style": "points",
            "marker": "square",
            "points": [(PART_A_OPS, a["eager_us"] / a["graph_us"])],
        },
        {
            "name": f"7B decode step (H200, batch 1): {_times(d['eager_ms'], d['graph_ms'])}",
            "colour": SPEEDUP_COLOUR,
            "style": "points",
            "marker": "diamond",
            "points": [(n7b, d["eager_ms"] / d["graph_ms"])],
        },
    ]
    marks = [{"x": LESSON_STEP_KERNELS, "label": f"N = {LESSON_STEP_KERNELS}"}, {"x": n7b, "label": f"N = {n7b}"}]
    notes = [
        f"N = {LESSON_STEP_KERNELS}: the lesson's decode step (28 × 15 + 10 kernels)",
        f"N = {n7b}: the bundled 7B decode step's kernels",
    ]
    notes += (
        [f"dashed: a fitted line extrapolated past N = {last}"]
        if fitted
        else ["Not fitted yet: the fitted lines appear once", "exercise 1's fit_launch_model is done."]
    )
    sweep_200 = sweep.get(PART_A_OPS)
    speed_notes = [
        "The lesson's model predicts a speedup of N",
        f"({LESSON_STEP_KERNELS}x at N = {LESSON_STEP_KERNELS}), far off this scale:",
        "it gives a graph no GPU cost per kernel node.",
    ]
    if sweep_200:
        speed_notes += [
            f"At N = {PART_A_OPS}: Part A {_times(a['eager_us'], a['graph_us'])}, the sweep {_times(*sweep_200)}:",
            "two measurements of one chain (see the report).",
        ]
    panels = [
        {
            "name": "(a) step time per iteration (log scale)",
            "y_label": "step time (µs, log scale)",
            "y_scale": "log",
            "height": 340,
            "series": times,
            "marks": marks,
            "notes": notes,
        },
        {
            "name": "(b) speedup of the CUDA graph",
            "y_label": "speedup, eager ÷ graph",
            "height": 220,
            "series": speedups,
            "marks": marks,
            "notes": speed_notes,
        },
    ]
    caption = [
        f"Points: the sweep (circles), Part A (squares); the 7B decode step (diamonds) is "
        f"the bundled H200 run ({lesson.H200_DATE}).",
        "Fitted lines: exercise 1's fit_launch_model through the sweep." if fitted else "Not fitted yet. " + UNFITTED,
    ]
    return panels, caption


def write_outputs(record: dict, out_dir) -> tuple[Path, Path]:
    """Write ``launch-tax.json`` (the record, fitted or not) and ``launch-tax.svg`` (the chart of
    ``chart_panels``) into ``out_dir``."""
    out_dir, json_path = write_json(out_dir, "launch-tax.json", record)
    panels, caption = chart_panels(record)
    svg_path = figure(
        out_dir / "launch-tax.svg",
        panels,
        title=f"Launch tax on {record['gpu']}: eager vs CUDA graph",
        x_label="number of kernels N",
        caption=caption,
    )
    return json_path, svg_path


# --- measuring: the only part that needs CUDA -------------------------------------------------


def measure(impl: Implementation, sizes: list[int], iters: int) -> dict:
    """Part A and the N-sweep on this machine's GPU, with ``impl``'s exercise 2."""
    import torch  # only measuring needs torch

    print(f"measuring Part A and N = {' '.join(map(str, sizes))} ({iters} iterations each) ...", file=sys.stderr)
    part_a = call_student(impl, "launch_tax", "measure_launch_tax", PART_A_OPS, PART_A_NUMEL, iters)
    sweep = call_student(impl, "launch_tax", "sweep_launch_tax", sizes, iters=iters)
    return make_record(
        torch.cuda.get_device_name(),
        torch.__version__,
        part_a.eager_us,
        part_a.graph_us,
        part_a.replay_matches_eager,
        {r.n_ops: (r.eager_us / 1e3, r.graph_us / 1e3) for r in sweep},
    )


# --- command line ----------------------------------------------------------------------------


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    path = Path(path).resolve()
    return path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)


def command(args, impl: Implementation) -> int:
    if len(set(args.sizes)) < 2:
        print(
            f"lab: --sizes: expected at least two distinct chain lengths to fit a line, got {args.sizes}",
            file=sys.stderr,
        )
        return 2

    label = "from file"
    if args.reference:
        record = reference_record()
        source = (
            f"the bundled H200 measurement ({record['gpu']}, torch {record['torch']}, one "
            f"run on {lesson.H200_DATE}) from {_shown(lesson.H200_ANCHOR)}, not measured here"
        )
    elif args.from_file:
        try:
            record = load_record(args.from_file)
        except ValueError as exc:
            print(f"lab: {exc}", file=sys.stderr)
            return 2
        source = f"re-plotting {args.from_file} ({record['gpu']}, torch {record['torch']}), not measured here"
    else:
        import torch

        if not torch.cuda.is_available():
            print(
                "lab: measuring needs a CUDA GPU, and torch.cuda.is_available() is False here. "
                "On a laptop, try --reference (the bundled H200 figures) or --from FILE "
                "(a saved launch-tax.json).",
                file=sys.stderr,
            )
            return 2
        record, source = None, "measured on this GPU by exercise 2"  # measured below
        label = "this run"

    if record is None:  # an unfinished exercise 2 or a missing module: main says so
        record = measure(impl, sorted(set(args.sizes)), args.iters)
    try:
        record = fit_record(record, lambda ns, ms: call_student(impl, "launch_model", "fit_launch_model", ns, ms))
        fitted = "fitted by exercise 1"
    except ExerciseNotFinished as exc:
        if exc.number != by_module("launch_model").number:
            raise  # main reports it
        # No fit of our own: that is exercise 1's answer. The report and the chart say so.
        fitted = f"not fitted: exercise 1 is not finished ({exc})"

    print(f"launch-tax lab: {source}; {fitted}; --impl {args.impl}\n")
    print(report(record, label))
    for section in (part_a_vs_sweep(record), against_the_real_step(record)):
        if section:
            print(f"\n{section}")
    wrote(write_outputs(record, args.out))
    return 0
