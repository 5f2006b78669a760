"""Labs: the lesson's experiments, run on your GPU with your own code, and its models drawn.

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

Four more labs draw models, on any machine (``--out`` folder, ``--impl`` as above):

    python -m coursekit.lab speedup [--reference]   # speedup.json/.svg: which model is right
    python -m coursekit.lab timeline                # timeline.json/.svg: needs exercise 9
    python -m coursekit.lab prefill                 # prefill.json/.svg: decode vs prefill
    python -m coursekit.lab fusion [--reference]    # fusion.json/.svg: fused vs unfused

``speedup``: the graph's speedup against the step's compute time for the lesson's step (N = 430,
τ = 5 µs), under the lesson's additive model and exercise 1's CPU-GPU pipeline (your
``simulate_eager_ms``; ``--reference``: its equal-kernel closed form), with the AWQ and BF16
steps and the CPU-bound turn marked. ``timeline``: exercise 9's ``eager_timeline`` drawn as CPU
and GPU lanes for tiny kernels, long kernels and a Qwen2.5-7B layer, each against a graph replay.
``prefill``: the graph's gain against the size of each kernel at N = 200 (Part A's chain), through
exercise 1's models and exercise 9's turn, with the H200's τ and ν; with CUDA your exercise 2
``measure_launch_tax`` measures each size too: decode's tiny kernels pay the launch tax,
prefill's large ones hide it. ``fusion``: exercise 7's HBM-traffic model of the unfused and the
fused add + RMS norm as the rows grow, and with CUDA the two timed (your ``fused_add_rms_norm``); without CUDA, or with
``--reference`` (the model by arithmetic), it says the figures are modelled, not measured.

Exit status: 0 done (launch-tax: without the fits when exercise 1 is unfinished); 1 an exercise
the lab needs is unfinished (it says which), or a module does not import; 2 bad arguments or no
CUDA device for measuring. Everything except measuring is pure Python over plain dicts (the JSON
files' shapes), so the reports and the charts are tested on the CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

from coursekit import lesson
from coursekit.course import by_module
from coursekit.impl import NAMED, REPO_ROOT, Implementation
from coursekit.svgplot import figure, timeline

PART_A_OPS, PART_A_NUMEL = 200, 1024  # the lesson's Part A: 200 tiny kernels on 1024 floats
DEFAULT_SIZES = (25, 50, 100, 200, 400, 800)
EAGER_COLOUR, GRAPH_COLOUR, SPEEDUP_COLOUR = "#d62728", "#1f77b4", "#6a3d9a"
# The lesson's model (exercise 1's DecodeStep defaults; coursekit may not import the exercise
# modules, and coursekit.lesson keeps them only inside SEED_REPORT, "430 个 kernel" and
# "启动 2.15 ms"):
# eager N·τ, a graph one launch τ, no GPU cost per kernel node (gpu_node_us = 0).
LESSON_LAUNCH_US = 5.0  # τ, DecodeStep.launch_us
LESSON_STEP_KERNELS = 28 * 15 + 10  # DecodeStep.n_kernels: 28 layers x 15 kernels + 10 others


class ExerciseNotFinished(Exception):
    """A student function raised NotImplementedError: ``number`` is the exercise behind it."""

    def __init__(self, number: int, message: str):
        super().__init__(message)
        self.number = number


def call_student(impl: Implementation, module: str, function: str, *args, **kwargs):
    """``impl``'s ``module.function(*args, **kwargs)``; NotImplementedError becomes
    ExerciseNotFinished, a missing function an ImportError, so main can say what is left."""
    mod = impl.module(module)
    fn = getattr(mod, function, None)
    if fn is None:
        raise ImportError(f"module {module!r} from {impl.folder} has no {function!r}")
    return student(module, fn, *args, **kwargs)


def student(module: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` for student code of exercise module ``module`` that is already in
    hand (a method, or a property read in a lambda: ``student("launch_model", lambda:
    step.compute_ms)``); NotImplementedError becomes ExerciseNotFinished, as in call_student."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as exc:
        number = by_module(module).number
        message = str(exc).removeprefix(f"exercise {number}: ")  # the stubs' own prefix
        raise ExerciseNotFinished(number, message) from None


# --- the record: one plain dict in the shape of coursekit/data/h200-anchor-*.json ------------


def make_record(gpu: str, torch_version: str, eager_us: float, graph_us: float,
                replay_correct: bool, sweep_ms: dict) -> dict:
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
        "partA": {"eager_us": eager_us, "graph_us": graph_us, "ratio": eager_us / graph_us,
                  "replay_correct": bool(replay_correct)},
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
        return make_record(str(data.get("gpu", "unknown GPU")), str(data.get("torch", "unknown")),
                           part_a["eager_us"], part_a["graph_us"],
                           part_a.get("replay_correct", False), sweep)
    except OSError as exc:
        raise ValueError(f"{arg}: cannot read {path}: {exc.strerror}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        # json.JSONDecodeError is a ValueError too.
        raise ValueError(f"{arg}: {path} is not a launch-tax measurement (expected the shape of "
                         f"launch-tax.json: partA.eager_us, partA.graph_us, sweep_ms): "
                         f"{type(exc).__name__}: {exc}") from None


def fit_record(record: dict, fit) -> dict:
    """``record`` plus the two fitted lines, with ``fit`` = exercise 1's ``fit_launch_model``
    (n_kernels, step_ms) -> (slope µs per kernel, intercept ms). Keys as in the anchor JSON:
    ``tau_eager_us``/``t0_eager_us`` (eager slope/intercept) and ``tau_graph_us``/``t0_graph_us``
    (graph slope ν and intercept), all in µs."""
    ns = [int(n) for n in record["sweep_ms"]]
    tau_e, c_e = fit(ns, [e for e, _ in record["sweep_ms"].values()])
    tau_g, c_g = fit(ns, [g for _, g in record["sweep_ms"].values()])
    return {**record, "tau_eager_us": tau_e, "t0_eager_us": c_e * 1e3,
            "tau_graph_us": tau_g, "t0_graph_us": c_g * 1e3}


# --- report and chart: pure functions of a record, fitted (see fit_record) or not --------------


def _times(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "n/a"


def is_fitted(record: dict) -> bool:
    """Whether ``record`` carries the two fitted lines (``fit_record``'s keys)."""
    return all(key in record for key in ("tau_eager_us", "t0_eager_us", "tau_graph_us",
                                         "t0_graph_us"))


def decode7b() -> dict:
    """The bundled H200 run's 7B-shaped decode step at batch 1 (``decode7b["1"]`` of the anchor:
    ``kernels``, ``eager_ms``, ``graph_ms``, ``speedup``, ``floor_ms``...)."""
    return lesson.h200_anchor()["decode7b"]["1"]


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
        f"  {'speedup':11}{_times(a['eager_us'], a['graph_us']):>10}"
        f"{_times(ref_eager, ref_graph):>17}",
        "  graph replay matches eager: "
        + ("yes" if a["replay_correct"] else "NO: the replay's output differs (exercise 2)"),
        "",
    ]
    if not is_fitted(record):
        return "\n".join(lines + _unfitted_report(record))
    tau, nu = record["tau_eager_us"], record["tau_graph_us"]
    lines += [
        "N-sweep: µs per iteration of a chain of N tiny kernels; model = the two fitted lines",
        "     N | eager meas | eager model | graph meas | graph model | speedup meas | "
        "speedup model",
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
        f"{'Fitted per-kernel costs (exercise 1: fit_launch_model)':56}{label:>10}"
        f"{'H200 reference':>17}",
        f"  {'τ, eager: CPU cost of one launch':54}{tau:7.2f} µs"
        f"{lesson.H200_TAU_EAGER_US:14.2f} µs",
        f"  {'ν, graph: GPU cost of one kernel node':54}{nu:7.2f} µs"
        f"{lesson.H200_TAU_GRAPH_US:14.2f} µs",
        f"  intercepts: eager {record['t0_eager_us']:.1f} µs, graph {record['t0_graph_us']:.1f} µs",
        "",
        "The lesson's model (gpu_node_us = 0) says a graph costs one launch whatever N is.",
        f"Measured, each node still costs ν = {nu:.2f} µs on the GPU: DecodeStep(gpu_node_us="
        f"{nu:.2f}) models it,",
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
        "     N | eager meas | eager lesson | graph meas | graph lesson | speedup meas | "
        "speedup lesson",
    ]
    for n, (eager_ms, graph_ms) in record["sweep_ms"].items():
        lines.append(
            f"{n:>6} | {eager_ms * 1e3:10.1f} | {int(n) * tau:12.1f} | {graph_ms * 1e3:10.1f} | "
            f"{tau:12.1f} | {_times(eager_ms, graph_ms):>12} | {_times(int(n) * tau, tau):>14}"
        )
    return lines + [
        "",
        "Not fitted yet. " + UNFITTED,
        "Finish it in launch_model.py, then run this again, or re-plot the saved launch-tax.json "
        "with --from.",
        "The lesson's model gives a graph no GPU cost per kernel node (gpu_node_us = 0), so it "
        "predicts a",
        "speedup of N; the measured graph time grows with N too, and exercise 1's fit says by how "
        "much.",
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

    return "\n".join([
        f"Why Part A says {_times(a['eager_us'], a['graph_us'])} and the sweep's N = {PART_A_OPS} "
        f"says {_times(eager, graph)}: they are two separate measurements of the",
        f"same chain of {PART_A_OPS} tiny kernels, made one after the other in one run:",
        f"  {'Part A':15}eager {a['eager_us']:6.0f} µs, graph {a['graph_us']:5.0f} µs -> "
        f"{_times(a['eager_us'], a['graph_us']):>5}",
        f"  {f'sweep, N = {PART_A_OPS}':15}eager {eager:6.0f} µs, graph {graph:5.0f} µs -> "
        f"{_times(eager, graph):>5}",
        f"Eager differs by {moved(eager, a['eager_us'])}, graph by {moved(graph, a['graph_us'])}, "
        f"and their ratio by {moved(ratio_s, ratio_a)}: a ratio of two noisy times moves",
        "more than either time. Repeat each measurement and take the median before you quote a "
        "speedup.",
    ])


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
    return "\n".join([
        f"Against a real step: the bundled H200 7B decode step (batch 1, {n} kernels) took eager "
        f"{d['eager_ms']:.1f} ms,",
        f"graph {d['graph_ms']:.2f} ms ({_times(d['eager_ms'], d['graph_ms'])}). {what} "
        f"N = {n}: eager {eager / 1e3:.2f} ms,",
        f"graph {graph / 1e3:.3f} ms ({_times(eager, graph)}). The real step also reads its "
        f"weights (floor {d['floor_ms']:.2f} ms), and its",
        "kernels cost more than x + 1.",
    ])


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
        {"name": "eager, measured", "colour": EAGER_COLOUR, "style": "points",
         "points": [(n, sweep[n][0]) for n in ns]},
        {"name": "graph, measured", "colour": GRAPH_COLOUR, "style": "points",
         "points": [(n, sweep[n][1]) for n in ns]},
    ]
    speedups = [{"name": "eager ÷ graph, measured", "colour": SPEEDUP_COLOUR, "style": "points",
                 "points": [(n, sweep[n][0] / sweep[n][1]) for n in ns]}]
    if fitted:
        eager, graph = line("eager"), line("graph")

        def drawn(points):  # a log axis shows times > 0 only, and a fit may dip below 0 at small N
            return [(n, y) for n, y in points if math.isfinite(y) and y > 0]

        fits = [(f"{kind} fit: {record[f't0_{kind}_us']:.1f} + "
                 f"{record[f'tau_{kind}_us']:.2f}·N µs",
                 colour, drawn((n, line(kind)(n)) for n in xs), times)
                for kind, colour in (("eager", EAGER_COLOUR), ("graph", GRAPH_COLOUR))]
        # Where the graph fit nears 0 (a negative intercept) the fitted ratio soars: it is drawn
        # up to twice the largest measured speedup only, so it cannot flatten the measured points.
        top = 2 * max([sweep[n][0] / sweep[n][1] for n in ns] + [a["eager_us"] / a["graph_us"]])
        fits.append(("eager fit ÷ graph fit", SPEEDUP_COLOUR,
                     [p for p in drawn((n, eager(n) / graph(n)) for n in xs if graph(n) > 0)
                      if p[1] <= top], speedups))
        for name, colour, points, panel in fits:
            if len(points) >= 2:
                panel.append({"name": name, "colour": colour, "style": "line",
                              "dashed_after": last, "points": points})
    times += [
        {"name": f"lesson's model, eager: N × {tau:g} µs", "colour": EAGER_COLOUR,
         "style": "line", "dash": "dotted", "points": [(n, n * tau) for n in xs]},
        {"name": f"lesson's model, graph: one launch, {tau:g} µs", "colour": GRAPH_COLOUR,
         "style": "line", "dash": "dotted", "points": [(min(ns), tau), (end, tau)]},
        {"name": f"Part A eager, N = {PART_A_OPS} (separate run)", "colour": EAGER_COLOUR,
         "style": "points", "marker": "square", "points": [(PART_A_OPS, a["eager_us"])]},
        {"name": f"Part A graph, N = {PART_A_OPS} (separate run)", "colour": GRAPH_COLOUR,
         "style": "points", "marker": "square", "points": [(PART_A_OPS, a["graph_us"])]},
        {"name": "7B decode step, eager (H200, batch 1)", "colour": EAGER_COLOUR,
         "style": "points", "marker": "diamond", "points": [(n7b, d["eager_ms"] * 1e3)]},
        {"name": "7B decode step, graph (H200, batch 1)", "colour": GRAPH_COLOUR,
         "style": "points", "marker": "diamond", "points": [(n7b, d["graph_ms"] * 1e3)]},
    ]
    speedups += [
        {"name": f"Part A, N = {PART_A_OPS} (separate run): "
                 f"{_times(a['eager_us'], a['graph_us'])}",
         "colour": SPEEDUP_COLOUR, "style": "points", "marker": "square",
         "points": [(PART_A_OPS, a["eager_us"] / a["graph_us"])]},
        {"name": f"7B decode step (H200, batch 1): {_times(d['eager_ms'], d['graph_ms'])}",
         "colour": SPEEDUP_COLOUR, "style": "points", "marker": "diamond",
         "points": [(n7b, d["eager_ms"] / d["graph_ms"])]},
    ]
    marks = [{"x": LESSON_STEP_KERNELS, "label": f"N = {LESSON_STEP_KERNELS}"},
             {"x": n7b, "label": f"N = {n7b}"}]
    notes = [f"N = {LESSON_STEP_KERNELS}: the lesson's decode step (28 × 15 + 10 kernels)",
             f"N = {n7b}: the bundled 7B decode step's kernels"]
    notes += ([f"dashed: a fitted line extrapolated past N = {last}"] if fitted else
              ["Not fitted yet: the fitted lines appear once", "exercise 1's fit_launch_model "
               "is done."])
    sweep_200 = sweep.get(PART_A_OPS)
    speed_notes = ["The lesson's model predicts a speedup of N", f"({LESSON_STEP_KERNELS}x at "
                   f"N = {LESSON_STEP_KERNELS}), far off this scale:", "it gives a graph no GPU "
                   "cost per kernel node."]
    if sweep_200:
        speed_notes += [f"At N = {PART_A_OPS}: Part A {_times(a['eager_us'], a['graph_us'])}, the "
                        f"sweep {_times(*sweep_200)}:", "two measurements of one chain (see the "
                        "report)."]
    panels = [
        {"name": "(a) step time per iteration (log scale)", "y_label": "step time (µs, log scale)",
         "y_scale": "log", "height": 340, "series": times, "marks": marks, "notes": notes},
        {"name": "(b) speedup of the CUDA graph", "y_label": "speedup, eager ÷ graph",
         "height": 220, "series": speedups, "marks": marks, "notes": speed_notes},
    ]
    caption = [f"Points: the sweep (circles), Part A (squares); the 7B decode step (diamonds) is "
               f"the bundled H200 run ({lesson.H200_DATE}).",
               "Fitted lines: exercise 1's fit_launch_model through the sweep." if fitted else
               "Not fitted yet. " + UNFITTED]
    return panels, caption


def write_json(out_dir, name: str, record: dict) -> tuple[Path, Path]:
    """``record`` as ``out_dir/name`` (the folder made if need be): ``(out_dir, that path)``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return out_dir, path


def write_outputs(record: dict, out_dir) -> tuple[Path, Path]:
    """Write ``launch-tax.json`` (the record, fitted or not) and ``launch-tax.svg`` (the chart of
    ``chart_panels``) into ``out_dir``."""
    out_dir, json_path = write_json(out_dir, "launch-tax.json", record)
    panels, caption = chart_panels(record)
    svg_path = figure(out_dir / "launch-tax.svg", panels,
                      title=f"Launch tax on {record['gpu']}: eager vs CUDA graph",
                      x_label="number of kernels N", caption=caption)
    return json_path, svg_path


# --- speedup: which model is right (exercise 1's two answers, side by side) -------------------

# The lab's own arithmetic for the lesson's two steps is for --reference only: without it the
# AWQ and BF16 points come from your exercise 1 DecodeStep (student_step).
LESSON_BANDWIDTH_BPS = 1.0e12  # DecodeStep.bandwidth_bps: the lesson's 1 TB/s
ADDITIVE_COLOUR, PIPELINE_COLOUR, GRAPH_STEP_COLOUR = "#e6550d", "#3182bd", "#31a354"
SPEEDUP_CLIP = 5.0  # panel (b) draws speedups up to this; as T -> 0 both models reach N


def lesson_compute_ms(weight_gib: float) -> float:
    """DecodeStep.compute_ms for ``weight_gib`` at the lesson's 1 TB/s (GiB = 1024**3 bytes)."""
    return weight_gib * 1024**3 / LESSON_BANDWIDTH_BPS * 1e3


def lesson_step(weight_gib: float) -> dict:
    """The lesson's ``DecodeStep(weight_gib)`` by the lab's own arithmetic (--reference only):
    ``compute_ms``, ``eager_additive_ms`` (eager_ms()), ``graph_ms`` and ``speedup_additive``."""
    t = lesson_compute_ms(weight_gib)
    eager, graph = t + LESSON_STEP_KERNELS * LESSON_LAUNCH_US / 1e3, t + LESSON_LAUNCH_US / 1e3
    return {"compute_ms": t, "eager_additive_ms": eager, "graph_ms": graph,
            "speedup_additive": eager / graph}


def student_step(impl: Implementation):
    """``lesson_step``'s figures from ``impl``'s exercise 1 ``DecodeStep(weight_gib)``, all other
    fields at their defaults (the lesson's step): what the lab draws without --reference."""
    def step(weight_gib: float) -> dict:
        s = call_student(impl, "launch_model", "DecodeStep", weight_gib)
        return {"compute_ms": float(student("launch_model", lambda: s.compute_ms)),
                "eager_additive_ms": float(student("launch_model", s.eager_ms)),
                "graph_ms": float(student("launch_model", s.graph_ms)),
                "speedup_additive": float(student("launch_model", s.speedup))}
    return step


def pipeline_eager_ms_equal(compute_ms: float, n_kernels: int | None = None,
                            launch_us: float | None = None) -> float:
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


def speedup_record(pipeline_ms, source: str, step=lesson_step,
                   steps: str = "arithmetic") -> dict:
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
        return {"compute_ms": t, "eager_additive_ms": t + n * tau / 1e3,
                "eager_pipeline_ms": float(pipeline_ms(t)), "graph_ms": t + tau / 1e3}

    curve = [row(t) for t in ts]  # the pipeline first: an unfinished one is named first
    points = {}
    for label, gib in lesson.SEED_WEIGHTS:
        point = {"weight_gib": gib, **step(gib)}
        point["eager_pipeline_ms"] = float(pipeline_ms(point["compute_ms"]))
        point["speedup_pipeline"] = point["eager_pipeline_ms"] / point["graph_ms"]
        points[label.split()[0]] = point
    return {"n_kernels": n, "launch_us": tau, "gpu_node_us": 0.0,
            "bandwidth_bps": LESSON_BANDWIDTH_BPS, "cpu_bound_below_ms": turn, "pipeline": source,
            "steps": steps, "curve": curve, "points": points}


def speedup_report(record: dict) -> str:
    """The speedup lab's text: the models, a table over T_compute, the lesson's two steps."""
    n, tau, turn = record["n_kernels"], record["launch_us"], record["cpu_bound_below_ms"]
    closed = record["pipeline"] == "closed form"
    points = record["points"]
    lines = [
        f"The lesson's decode step: N = {n} kernels, τ = {tau:g} µs per launch, a graph = one "
        "launch (gpu_node_us = 0).",
        "T = T_compute, the GPU's work per step; the pipeline shares it equally among the N "
        "kernels (t = T/N each).",
        "  additive (the lesson):  eager = T + N·τ             graph = T + τ",
        "  pipeline (exercise 1):  eager = " + ("max(N·τ + t, τ + N·t)" if closed else
                                                 "simulate_eager_ms([t] * N, τ)")
        + ("   graph = T + τ" if closed else "  graph = T + τ"),
        "",
        "  T_compute |  t/kernel | eager additive | eager pipeline |    graph | speedup additive "
        "| speedup pipeline",
    ]
    table = [(row, "turn" if math.isclose(row["compute_ms"], turn, rel_tol=1e-9) else "")
             for row in record["curve"] if any(math.isclose(row["compute_ms"], w, rel_tol=1e-9)
                                               for w in (*SPEEDUP_TABLE_MS, turn))]
    table += [(p, name) for name, p in points.items()]  # the AWQ and BF16 steps themselves
    for row, tag in sorted(table, key=lambda entry: entry[0]["compute_ms"]):
        t = row["compute_ms"]
        lines.append(
            f"{t:8.2f} ms | {t * 1e3 / n:6.2f} µs | {row['eager_additive_ms']:11.2f} ms | "
            f"{row['eager_pipeline_ms']:11.2f} ms | {row['graph_ms']:5.2f} ms | "
            f"{row['eager_additive_ms'] / row['graph_ms']:15.2f}x | "
            f"{row['eager_pipeline_ms'] / row['graph_ms']:15.2f}x  {tag}".rstrip())
    lines.append("")
    for name, p in points.items():
        lines.append(f"{name} ({p['weight_gib']:g} GiB at 1 TB/s, T = {p['compute_ms']:.2f} ms): "
                     f"additive {p['speedup_additive']:.2f}x, pipeline "
                     f"{p['speedup_pipeline']:.2f}x")
    lines += [
        f"The step turns CPU-bound below T = N·τ = {turn:.2f} ms (equal kernels: when t = T/N "
        f"drops under τ = {tau:g} µs).",
        "",
        "Which model is right? Both say a graph saves the launches; they disagree about what the "
        "launches cost",
        "while the GPU is busy. In the pipeline the CPU launches the next kernel while the GPU "
        "runs this one,",
        "so a kernel longer than τ hides the next launch: above the turn the eager step costs "
        "T + τ, the same",
        "as the graph (1.00x). The additive model charges every launch on top of the compute: an "
        "upper bound.",
        "Below the turn both have the GPU wait for the CPU, and a graph pays off (as T -> 0 "
        "both reach N x). A real step is not",
        "made of equal kernels: its tiny ops expose their launches even when the mean kernel is "
        "longer than τ",
        "(python -m coursekit.lab timeline; exercise 9's cpu_bound_launch_us), and the bundled "
        "H200 7B step",
        f"measured {decode7b()['speedup']:.1f}x.",
    ]
    return "\n".join(lines)


def speedup_panels(record: dict) -> tuple[list[dict], list[str]]:
    """(a) step times against T on log axes, (b) the speedups on a linear axis (clipped)."""
    curve, n, tau = record["curve"], record["n_kernels"], record["launch_us"]
    turn, points = record["cpu_bound_below_ms"], record["points"]
    pipeline = ("pipeline, equal kernels: max(N·τ + t, τ + N·t)" if record["pipeline"] ==
                "closed form" else "pipeline: your simulate_eager_ms")
    times = [
        {"name": "eager, additive: T + N·τ", "colour": ADDITIVE_COLOUR, "style": "line",
         "dash": "dotted", "points": [(r["compute_ms"], r["eager_additive_ms"]) for r in curve]},
        {"name": f"eager, {pipeline}", "colour": PIPELINE_COLOUR, "style": "line",
         "points": [(r["compute_ms"], r["eager_pipeline_ms"]) for r in curve
                    if r["eager_pipeline_ms"] > 0]},
        {"name": "graph: T + τ (both models)", "colour": GRAPH_STEP_COLOUR, "style": "line",
         "dash": "dashed", "points": [(r["compute_ms"], r["graph_ms"]) for r in curve]},
    ]
    speedups = [
        {"name": "additive: (T + N·τ) ÷ (T + τ)", "colour": ADDITIVE_COLOUR, "style": "line",
         "dash": "dotted", "points": [(r["compute_ms"], r["eager_additive_ms"] / r["graph_ms"])
                                      for r in curve
                                      if r["eager_additive_ms"] / r["graph_ms"] <= SPEEDUP_CLIP]},
        {"name": "pipeline ÷ (T + τ)", "colour": PIPELINE_COLOUR, "style": "line",
         "points": [(r["compute_ms"], r["eager_pipeline_ms"] / r["graph_ms"]) for r in curve
                    if 0 < r["eager_pipeline_ms"] / r["graph_ms"] <= SPEEDUP_CLIP]},
    ]
    for name, p in points.items():
        marker = "diamond" if name == "AWQ" else "square"
        times += [{"name": f"{name}, eager {model}: {p[f'eager_{model}_ms']:.2f} ms",
                   "colour": colour, "style": "points", "marker": marker,
                   "points": [(p["compute_ms"], p[f"eager_{model}_ms"])]}
                  for model, colour in (("additive", ADDITIVE_COLOUR),
                                        ("pipeline", PIPELINE_COLOUR))
                  if p[f"eager_{model}_ms"] > 0]
        speedups += [{"name": f"{name}, {model}: {p[f'speedup_{model}']:.2f}x",
                      "colour": colour, "style": "points", "marker": marker,
                      "points": [(p["compute_ms"], p[f"speedup_{model}"])]}
                     for model, colour in (("additive", ADDITIVE_COLOUR),
                                           ("pipeline", PIPELINE_COLOUR))
                     if 0 < p[f"speedup_{model}"] <= SPEEDUP_CLIP]
    marks = [{"x": turn, "label": f"CPU-bound below N·τ = {turn:.2f} ms"}] + [
        {"x": p["compute_ms"], "label": f"{name} {p['compute_ms']:.2f} ms"}
        for name, p in points.items()]
    panels = [
        {"name": "(a) step time (log scale)", "y_label": "step time (ms, log scale)",
         "y_scale": "log", "height": 300, "series": times, "marks": marks,
         "notes": [f"N = {n} kernels, τ = {tau:g} µs; a graph is one launch",
                   "(gpu_node_us = 0).",
                   "Left of the turn the GPU waits for launches;",
                   "right of it the pipeline hides them behind",
                   "the kernels: eager = T + τ, on the graph's line."]},
        {"name": "(b) speedup of the CUDA graph, eager ÷ graph", "y_label": "speedup",
         "height": 240, "series": speedups, "marks": marks, "mark_labels": "top",
         "notes": [f"Drawn up to {SPEEDUP_CLIP:g}x: as T -> 0 both models reach",
                   f"N = {n}x (one launch instead of N).",
                   "AWQ (diamonds), BF16 (squares); the lesson's",
                   "table prints the additive model's: " + " and ".join(
                       f"{p['speedup_additive']:.2f}x" for p in points.values()) + "."]},
    ]
    caption = [f"The lesson's step (N = {n}, τ = {tau:g} µs) under both models of exercise 1. "
               "T_compute = weights read at 1 TB/s for AWQ (5.5 GiB) and BF16 (14.2 GiB).",
               "Pipeline: " + ("the equal-kernel closed form (--reference)." if record["pipeline"]
                               == "closed form" else "your simulate_eager_ms, N equal kernels.")]
    return panels, caption


def write_speedup(record: dict, out_dir) -> tuple[Path, Path]:
    out_dir, json_path = write_json(out_dir, "speedup.json", record)
    panels, caption = speedup_panels(record)
    svg_path = figure(out_dir / "speedup.svg", panels, x_scale="log",
                      title="Which model is right? Eager vs graph against compute time",
                      x_label="T_compute per step (ms, log scale)", caption=caption)
    return json_path, svg_path


def step_disagreements(record: dict) -> str:
    """Lines for each AWQ/BF16 figure of the student's DecodeStep that differs from the lesson's
    rule (``lesson_step``; "" if none): a difference points at exercise 1."""
    bad = []
    for name, p in record["points"].items():
        want = lesson_step(p["weight_gib"])
        bad += [f"  {name}: DecodeStep({p['weight_gib']:g}).{key} gave "
                f"{p[field]:.6g}, expected {want[field]:.6g}"
                for key, field in (("compute_ms", "compute_ms"), ("eager_ms()", "eager_additive_ms"),
                                   ("graph_ms()", "graph_ms"), ("speedup()", "speedup_additive"))
                if not math.isclose(p[field], want[field], rel_tol=1e-9)]
    if not bad:
        return ""
    return "\n".join(["Your DecodeStep differs from the lesson's rule (compute = GiB·1024**3 / "
                      "1e12 s, eager = compute + N·τ, graph = compute + τ, N = 430, τ = 5 µs): "
                      "check exercise 1."] + bad)


def pipeline_disagreements(record: dict) -> str:
    """A line when the student's pipeline differs from the equal-kernel closed form ("" if not):
    for equal kernels the two must agree, so a difference points at exercise 1."""
    n, tau = record["n_kernels"], record["launch_us"]
    closed = [(r["compute_ms"], r["eager_pipeline_ms"],
               pipeline_eager_ms_equal(r["compute_ms"], n, tau)) for r in record["curve"]]
    bad = [row for row in closed if not math.isclose(row[1], row[2], rel_tol=1e-6)]
    if not bad:
        return ""
    t, got, want = bad[0]
    return (f"Your simulate_eager_ms differs from the equal-kernel closed form at {len(bad)} of "
            f"{len(record['curve'])} points (first at T = {t:.3g} ms: got {got:.4g} ms, expected "
            f"max(N·τ + t, τ + N·t) = {want:.4g} ms): check exercise 1.")


# --- timeline: the eager pipeline kernel by kernel (exercise 9's eager_timeline) ------------

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


def copy_bandwidth_bps() -> float:
    """The bundled H200's copy bandwidth (bytes read plus written per second)."""
    return lesson.h200_anchor()["copy_TBps"] * 1e12


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
            ok = len(eager) == len(times) and all(
                len(e) == 3 and all(math.isfinite(v) for v in e) for e in eager)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"exercise 9's eager_timeline({[round(t, 3) for t in gpu_us]}, "
                             f"{launch_us:g}) returned {got!r:.200}; expected one (launched, "
                             f"start, end) per kernel, {len(times)} in all")
        graph, clock = [], launch_us
        for t in gpu_us:
            graph.append((clock, clock + t))
            clock += t
        scenarios.append({"name": name, "kernels": [k for k, _ in kernels], "kernel_us": times,
                          "gpu_us": gpu_us, "eager": [list(e) for e in eager],
                          "graph": [list(g) for g in graph]})
    return {"launch_us": launch_us, "gpu_node_us": node_us, "scenarios": scenarios}


def _scenario_figures(s: dict, launch_us: float) -> dict:
    eager_end, graph_end = s["eager"][-1][2], s["graph"][-1][1]  # every scenario has kernels
    busy = sum(s["gpu_us"])
    return {"n": len(s["kernel_us"]), "busy": busy, "eager_end": eager_end,
            "graph_end": graph_end, "idle": eager_end - busy,
            "additive": len(s["kernel_us"]) * launch_us + busy}


def timeline_report(record: dict, tau_stars=None) -> str:
    """The timeline lab's text; ``tau_stars``: exercise 9's ``cpu_bound_launch_us`` of each
    scenario's kernels (their GPU times, ν included), in order, when it is done (else None)."""
    tau, nu = record["launch_us"], record["gpu_node_us"]
    layer = layer_7b()
    gemms = ("qkv", "o_proj", "gate_up", "down")
    weights = sum(size for name, size in LAYER_7B_BYTES if name in gemms)
    lines = [f"Every kernel costs the GPU its bytes over the bandwidth plus ν = {nu:.2f} µs (H200), "
             "eager and in a graph alike.",
             f"Eager: launch k ends at k·τ (τ = {tau:g} µs); kernel k starts at max(k·τ, end of "
             "kernel k-1) (exercise 9's eager_timeline).",
             "Graph replay: one launch (τ), then the same kernels back to back.", "",
             f"{'scenario':38}|  N | GPU busy | eager end | GPU idle | additive |    graph | "
             "eager ÷ graph"]
    for k, s in enumerate(record["scenarios"]):
        f = _scenario_figures(s, tau)
        lines.append(f"{s['name']:38}| {f['n']:2} | {f['busy']:5.1f} µs | {f['eager_end']:6.1f} µs"
                     f" | {f['idle']:5.1f} µs | {f['additive']:5.1f} µs | {f['graph_end']:5.1f} µs"
                     f" | {f['eager_end'] / f['graph_end']:12.2f}x")
        if tau_stars is not None:
            lines.append(f"{'':38}  CPU-bound for τ above τ* = {tau_stars[k]:.2f} µs "
                         f"(exercise 9's cpu_bound_launch_us)")
    lines += ["",
              "GPU busy = the kernels' bytes time plus N·ν; additive = N·τ + GPU busy, the "
              "lesson's model: an upper bound on the eager end.",
              "Tiny kernels: the GPU idles between launches and the graph wins. Long kernels: the "
              "launches hide behind them,",
              "eager ends one launch after the GPU starts, as the graph does: 1.00x, nothing left "
              "to remove. A graph never adds GPU work.",
              "The 7B layer: the CPU gets ahead during the GEMMs, but the tiny ops between them "
              "expose their launches.",
              f"The 7B layer's {len(layer)} kernels (the lesson's kernels_per_layer), µs of bytes "
              f"at the H200's {copy_bandwidth_bps() / 1e12:.2f} TB/s copy bandwidth:",
              "  " + ", ".join(f"{name} {t:.2f}" for name, t in layer[:8]) + ",",
              "  " + ", ".join(f"{name} {t:.2f}" for name, t in layer[8:]) + ".",
              f"The four projections read {weights / 1e6:.0f} MB of bf16 weights (Qwen2.5-7B): "
              f"{sum(t for name, t in layer if name in gemms):.1f} of the layer's "
              f"{sum(t for _, t in layer):.1f} µs; the other {len(layer) - len(gemms)} kernels "
              "cost little more than ν."]
    if tau_stars is None:
        lines.append("(τ*, the launch time above which a step turns CPU-bound, comes with "
                     "exercise 9's cpu_bound_launch_us.)")
    return "\n".join(lines)


def timeline_scenarios(record: dict) -> list[dict]:
    """The timeline figure's scenarios (see ``coursekit.svgplot.timeline``)."""
    tau, nu = record["launch_us"], record["gpu_node_us"]
    out = []
    for s in record["scenarios"]:
        f = _scenario_figures(s, tau)
        launches = [{"start": k * tau, "end": (k + 1) * tau, "colour": CPU_COLOUR,
                     "kind": "launch"} for k in range(len(s["kernel_us"]))]

        def kernel_and_node(name, start, end):
            return [{"start": start, "end": end - nu, "colour": KERNEL_COLOUR, "kind": "kernel",
                     "label": name},
                    {"start": end - nu, "end": end, "colour": NODE_COLOUR, "kind": "node"}]

        kernels, idle, previous = [], [], 0.0
        for name, (_, start, end) in zip(s["kernels"], s["eager"]):
            if start > previous + 1e-9:
                idle.append({"start": previous, "end": start, "colour": IDLE_COLOUR,
                             "kind": "idle"})
            kernels += kernel_and_node(name, start, end)
            previous = end
        replay = [{"start": 0.0, "end": tau, "colour": CPU_COLOUR, "kind": "launch"}]
        for name, (start, end) in zip(s["kernels"], s["graph"]):
            replay += kernel_and_node(name, start, end)
        out.append({"name": s["name"], "lanes": [
            {"name": "eager: CPU launches", "boxes": launches},
            {"name": "eager: GPU kernels", "boxes": idle + kernels},
            {"name": "graph: launch + replay", "boxes": replay},
        ], "notes": [f"eager ends at {f['eager_end']:.1f} µs (GPU idle {f['idle']:.1f} µs)",
                     f"graph ends at {f['graph_end']:.1f} µs",
                     f"eager ÷ graph = {f['eager_end'] / f['graph_end']:.2f}x",
                     f"additive model: {f['additive']:.1f} µs"]})
    return out


def write_timeline(record: dict, out_dir) -> tuple[Path, Path]:
    out_dir, json_path = write_json(out_dir, "timeline.json", record)
    tau, nu = record["launch_us"], record["gpu_node_us"]
    svg_path = timeline(
        out_dir / "timeline.svg", timeline_scenarios(record),
        title=f"The eager pipeline kernel by kernel (τ = {tau:g} µs) against a graph replay",
        legend=[(CPU_COLOUR, f"CPU launch (τ = {tau:g} µs)"), (KERNEL_COLOUR, "kernel on the GPU"),
                (IDLE_COLOUR, "GPU idle, waiting for a launch"),
                (NODE_COLOUR, f"GPU cost per kernel beyond its bytes (ν = {nu:.2f} µs, H200)")],
        caption=["Eager lanes: your exercise 9 eager_timeline (launched, start, end) per kernel. "
                 "Graph lane: one launch, then the same kernels, each its bytes' time plus ν.",
                 "The 7B layer: the lesson's 15 kernels per layer, each its bytes (Qwen2.5-7B, "
                 "bf16, batch 1) over the H200's copy bandwidth."])
    return json_path, svg_path


# --- prefill vs decode: the graph's gain against the work in each kernel (exercises 1, 2, 9) -

#: Elements per kernel, 4**5 .. 4**13: Part A's 1024 floats (a decode step's elementwise op on
#: one token's hidden state is a few thousand) up to 67 million (a prefill's over a long prompt).
PREFILL_NUMELS = tuple(4 ** k for k in range(5, 14))
PREFILL_OPS = 200  # Part A's chain length, N


def chain_kernel_us(numel: int, bandwidth_bps: float) -> float:
    """The bytes' time of one ``x + 1`` kernel over ``numel`` float32 values, in µs: it reads
    and writes 4 bytes per value, over the copy bandwidth (bytes read plus written per second)."""
    return 8 * numel / bandwidth_bps * 1e6


def prefill_record(step_cls, simulate, cpu_bound, launch_us: float, node_us: float,
                   bandwidth_bps: float, numels=PREFILL_NUMELS, n_ops: int = PREFILL_OPS) -> dict:
    """The chain of ``n_ops`` kernels at each size in ``numels``, through exercise 1's models
    and exercise 9's turn: each kernel costs the GPU its bytes' time plus ``node_us`` (ν), eager
    and in a graph. ``step_cls``: exercise 1's ``DecodeStep`` (the additive eager time and the
    graph time of a step of ``n_ops`` kernels reading the chain's bytes); ``simulate``: its
    ``simulate_eager_ms`` (the pipeline); ``cpu_bound``: exercise 9's ``cpu_bound_launch_us``
    (τ* of the chain: it is CPU-bound when ``launch_us`` is above). Times in µs."""
    rows = []
    for numel in numels:
        kernel = chain_kernel_us(numel, bandwidth_bps)
        step = step_cls(weight_gib=n_ops * 8 * numel / 1024**3, n_layers=1,
                        kernels_per_layer=n_ops - 10, launch_us=launch_us,
                        bandwidth_bps=bandwidth_bps, gpu_node_us=node_us)
        gpu = [kernel + node_us] * n_ops
        rows.append({"numel": numel, "kernel_us": kernel,
                     "eager_additive_us": float(step.eager_ms()) * 1e3,
                     "eager_pipeline_us": float(simulate(gpu, launch_us)) * 1e3,
                     "graph_us": float(step.graph_ms()) * 1e3,
                     "tau_star_us": float(cpu_bound(gpu))})
    # the turn: kernel + ν = τ, so kernels of more bytes than (τ - ν) worth hide the launches
    turn = max(launch_us - node_us, 0.0) * 1e-6 * bandwidth_bps / 8
    return {"n_ops": n_ops, "launch_us": launch_us, "gpu_node_us": node_us,
            "bandwidth_bps": bandwidth_bps, "turn_numel": turn, "rows": rows, "measured": None}


def prefill_report(record: dict) -> str:
    """The prefill lab's text: the model's table (and the measured columns when there are)."""
    n, tau, nu = record["n_ops"], record["launch_us"], record["gpu_node_us"]
    measured = {m["numel"]: m for m in record["measured"] or []}
    lines = [f"A chain of N = {n} kernels (x + 1 on float32) at τ = {tau:.2f} µs per launch and "
             f"ν = {nu:.2f} µs of GPU time per kernel,",
             f"each kernel its bytes (8 per value) over {record['bandwidth_bps'] / 1e12:.2f} TB/s. "
             "Times per run of the chain, µs.", "",
             f"{'numel':>10} | kernel |     τ* | eager pipeline | eager additive |    graph | speedup "
             "pipeline | additive" + (" | measured eager | graph | speedup" if measured else "")]
    for r in record["rows"]:
        line = (f"{r['numel']:>10,} | {r['kernel_us']:6.2f} | {r['tau_star_us']:6.2f} | "
                f"{r['eager_pipeline_us']:14.1f} | "
                f"{r['eager_additive_us']:14.1f} | {r['graph_us']:8.1f} | "
                f"{r['eager_pipeline_us'] / r['graph_us']:15.2f}x | "
                f"{r['eager_additive_us'] / r['graph_us']:7.2f}x")
        m = measured.get(r["numel"])
        if m:
            line += (f" | {m['eager_us']:14.1f} | {m['graph_us']:5.1f} | "
                     f"{m['eager_us'] / m['graph_us']:6.2f}x")
        lines.append(line)
    turn = record["turn_numel"]
    lines += ["",
              f"τ*: exercise 9's cpu_bound_launch_us of the chain (kernel + ν). The chain is "
              f"CPU-bound while τ > τ*, i.e. below {turn / 1e6:.2f} million values per kernel.",
              "Decode's kernels sit far left of it: one token's elementwise "
              "ops are a few thousand values, and the graph",
              "wins about τ ÷ ν. A prefill over a long prompt makes every kernel thousands "
              "of times larger: past the turn",
              "the launches hide behind the kernels, eager ends one launch after the GPU starts, "
              "and the graph gains nothing."]
    wrong = [f"{m['numel']:,}" for m in record["measured"] or [] if not m["replay_matches_eager"]]
    if wrong:
        lines.append(f"Measured at {', '.join(wrong)} values: the replay did not match eager "
                     "(exercise 2's measure_launch_tax), so those times are not of the same work.")
    return "\n".join(lines)


def prefill_panels(record: dict) -> tuple[list[dict], list[str]]:
    rows, turn = record["rows"], record["turn_numel"]
    speedups = [
        {"name": "additive (exercise 1's DecodeStep)", "colour": ADDITIVE_COLOUR, "style": "line",
         "dash": "dotted", "points": [(r["numel"], r["eager_additive_us"] / r["graph_us"])
                                      for r in rows]},
        {"name": "pipeline (exercise 1's simulate_eager_ms)", "colour": PIPELINE_COLOUR,
         "style": "line", "points": [(r["numel"], r["eager_pipeline_us"] / r["graph_us"])
                                     for r in rows]},
    ]
    if record["measured"]:
        speedups.append({"name": f"measured ({record['measured'][0].get('gpu', 'this GPU')})",
                         "colour": GRAPH_STEP_COLOUR, "style": "points", "marker": "diamond",
                         "points": [(m["numel"], m["eager_us"] / m["graph_us"])
                                    for m in record["measured"]]})
    panels = [{"name": "speedup of the CUDA graph, eager ÷ graph", "y_label": "speedup",
               "height": 300, "series": speedups,
               "marks": [{"x": turn, "label": f"τ* = kernel + ν: {turn / 1e6:.2f} million values"}],
               "notes": [f"N = {record['n_ops']} kernels, τ = {record['launch_us']:.2f} µs,",
                         f"ν = {record['gpu_node_us']:.2f} µs per kernel (H200).",
                         "Left: decode-sized kernels, launch-bound.",
                         "Right: prefill-sized, the launches hide."]}]
    caption = ["Model: each kernel's bytes over the H200's copy bandwidth plus ν; τ and ν as "
               f"measured on the H200 ({lesson.H200_DATE}).",
               "Measured points: your measure_launch_tax at each size (exercise 2), where a GPU "
               "ran it." if record["measured"] else "Modelled, not measured: no GPU ran this "
               "sweep (run the lab on one to add its points)."]
    return panels, caption


def write_prefill(record: dict, out_dir) -> tuple[Path, Path]:
    out_dir, json_path = write_json(out_dir, "prefill.json", record)
    panels, caption = prefill_panels(record)
    svg_path = figure(out_dir / "prefill.svg", panels, x_scale="log",
                      title="Decode pays the launch tax, prefill does not: the graph's gain "
                      "against kernel size", x_label="values per kernel (log scale)",
                      caption=caption)
    return json_path, svg_path


# --- fusion: fused vs unfused add + RMS norm as tensors grow (exercise 7) -----------------

FUSION_HIDDEN = 3584  # Qwen2.5-7B's hidden size
FUSION_ROWS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)  # tokens: decode batches to prefill
FUSION_DTYPE_BYTES = 2  # bf16
#: add_rms_norm_reference's full-size passes over the rows x hidden tensor: the add, the cast to
#: fp32, the square, the mean's read, the scaling, the cast back, the weight multiply. The model
#: counts each as one read and one write of a bf16 tensor (the fp32 ones move more: a lower bound).
UNFUSED_PASSES = 7
#: Its torch ops (bf16 input): those seven plus "+ eps" and rsqrt on one value per row: 9 launches.
UNFUSED_OPS = 9
#: The fused kernel still moves four full-size bf16 tensors: it reads x and residual and writes
#: out and new_residual (the weight, one row, is negligible). chain_hbm_bytes(1, ..., fused=True)
#: is one read and one write, so the fused traffic is two such chains: 4 tensor reads/writes,
#: against the unfused 7 x (read + write) = 14. Ratio 14 / 4 = 3.5x, not 7x.
FUSED_CHAINS = 2


def fusion_ratio(record: dict) -> float:
    """How many times fewer bytes the fused version moves: unfused_bytes / fused_bytes (the same
    at every row count)."""
    return record["unfused_bytes"][-1] / record["fused_bytes"][-1]


def fusion_record(chain_bytes, rows, hidden: int, source: str) -> dict:
    """The HBM-traffic model of the unfused and the fused add + RMS norm over ``rows``, with
    ``chain_bytes(n_ops, numel, dtype_bytes, fused)`` (exercise 7's ``chain_hbm_bytes``)."""
    anchor = lesson.h200_anchor()
    bandwidth = anchor["copy_TBps"] * 1e12
    unfused = [int(chain_bytes(UNFUSED_PASSES, r * hidden, FUSION_DTYPE_BYTES, False))
               for r in rows]
    fused = [FUSED_CHAINS * int(chain_bytes(1, r * hidden, FUSION_DTYPE_BYTES, True))
             for r in rows]
    return {"hidden": hidden, "dtype_bytes": FUSION_DTYPE_BYTES, "passes": UNFUSED_PASSES,
            "fused_passes": 2 * FUSED_CHAINS, "unfused_ops": UNFUSED_OPS, "copy_TBps": anchor["copy_TBps"],
            "tau_us": anchor["tau_eager_us"], "model": source, "rows": list(rows),
            "unfused_bytes": unfused, "fused_bytes": fused,
            "unfused_model_us": [b / bandwidth * 1e6 for b in unfused],
            "fused_model_us": [b / bandwidth * 1e6 for b in fused], "measured": None}


#: Exercise 7's docstring: |got - expected| <= tol * (1 + |expected|), tol 1e-2 for bf16.
FUSED_BF16_TOL = 1e-2


def fused_mismatch(got, expected, tol: float = FUSED_BF16_TOL) -> str:
    """"" when ``got`` (a fused_add_rms_norm result) matches ``expected`` =
    ``add_rms_norm_reference``'s ``(out, new_residual)`` by exercise 7's rule
    ``|got - expected| <= tol * (1 + |expected|)``; else what is wrong, in words."""
    import torch

    if not (isinstance(got, tuple) and len(got) == 2
            and all(isinstance(t, torch.Tensor) for t in got)):
        return f"expected a tuple (out, new_residual) of two tensors, got {type(got).__name__}"
    for name, g, e in zip(("out", "new_residual"), got, expected):
        if g.shape != e.shape or g.dtype != e.dtype:
            return (f"{name}: expected shape {tuple(e.shape)} and {e.dtype}, got "
                    f"{tuple(g.shape)} and {g.dtype}")
        err = (g.float() - e.float()).abs() - tol * (1 + e.float().abs())
        if not bool((err <= 0).all()):
            worst = int(err.argmax())
            return (f"{name}: |got - expected| > {tol:g} * (1 + |expected|) at flat index "
                    f"{worst}: got {g.flatten()[worst].item():.6g}, expected "
                    f"{e.flatten()[worst].item():.6g}")
    return ""


def measure_fusion(impl: Implementation, rows, hidden: int, iters: int) -> dict:
    """Time the eager add + RMS norm (separate torch ops) and ``impl``'s fused_add_rms_norm on
    this GPU, µs per call (CUDA events around ``iters`` calls after 3 untimed ones). Before a
    size is timed, the fused result is checked once against ``add_rms_norm_reference`` with
    exercise 7's bf16 tolerance; on a mismatch the fused times are dropped (``fused_us`` None)
    and ``fused_mismatch`` says why: a wrong kernel's time is not drawn as the fused time."""
    import torch

    from coursekit.fusion import add_rms_norm_reference

    # The first call goes through call_student (NotImplementedError -> ExerciseNotFinished, a
    # missing function -> ImportError); the timed loops then call the function itself.
    fused = None

    def per_call_us(fn, *args) -> float:
        for _ in range(3):  # compiling and caching happen here
            fn(*args)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn(*args)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e3 / iters

    unfused_us, fused_us, mismatch = [], [], ""
    for r in rows:
        print(f"timing {r} x {hidden} ...", file=sys.stderr)
        g = torch.Generator(device="cuda").manual_seed(r)
        x, res = (torch.randn(r, hidden, generator=g, device="cuda").to(torch.bfloat16)
                  for _ in range(2))
        w = (torch.rand(hidden, generator=g, device="cuda") + 0.5).to(torch.bfloat16)
        unfused_us.append(per_call_us(add_rms_norm_reference, x, res, w))
        if fused_us is None:
            continue  # a mismatch already: the unfused times only
        if fused is None:
            got = call_student(impl, "fusion", "fused_add_rms_norm", x, res, w)
            fused = impl.module("fusion").fused_add_rms_norm
        else:
            got = fused(x, res, w)
        if wrong := fused_mismatch(got, add_rms_norm_reference(x, res, w)):
            mismatch, fused_us = f"at {r} x {hidden}: {wrong}", None
            continue
        fused_us.append(per_call_us(fused, x, res, w))
    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "iters": iters,
            "unfused_us": unfused_us, "fused_us": fused_us, "fused_mismatch": mismatch}


def fusion_report(record: dict) -> str:
    m, tau = record["measured"], record["tau_us"]
    timed = bool(m and m["fused_us"] is not None)  # False: no GPU, or the fused result was wrong
    lines = [f"add + RMS norm on rows x {record['hidden']} bf16. Model: the unfused version makes "
             f"{record['passes']} full passes, each a read and a write of the tensor",
             f"({2 * record['passes']} tensor reads/writes, counted in bf16: a lower bound, its "
             "fp32 passes move more); the fused one",
             "reads x and residual and writes out and new_residual: "
             f"{record['fused_passes']} tensor reads/writes. Time = bytes over",
             f"the H200's measured copy bandwidth ({record['copy_TBps']:.2f} TB/s). The passes and "
             "the ops are read off",
             "coursekit.fusion.add_rms_norm_reference's code, not counted on a GPU.",
             f"Measured on {m['gpu']} (torch {m['torch']}), {m['iters']} calls per point, "
             "after 3 untimed ones." if m else "Modelled, not measured: no CUDA run here, and no "
             "bundled fused measurement exists.", "",
             "   rows | unfused bytes |  fused bytes | unfused model | fused model"
             + ((" | unfused meas | fused meas | meas ratio" if timed else " | unfused meas")
                if m else "")]
    for k, r in enumerate(record["rows"]):
        line = (f"{r:7} | {record['unfused_bytes'][k]:13,} | {record['fused_bytes'][k]:12,} | "
                f"{record['unfused_model_us'][k]:10.2f} µs | {record['fused_model_us'][k]:8.2f} µs")
        if m:
            line += f" | {m['unfused_us'][k]:9.1f} µs"
        if timed:
            line += (f" | {m['fused_us'][k]:7.1f} µs | "
                     f"{m['unfused_us'][k] / m['fused_us'][k]:9.2f}x")
        lines.append(line)
    launches = record["unfused_ops"] * tau
    lines += ["",
              f"Launches: the unfused version's {record['unfused_ops']} ops cost the CPU about "
              f"{launches:.0f} µs ({record['unfused_ops']} × τ = {tau:.2f} µs, H200), the fused "
              f"one {tau:.0f} µs.",
              "At decode sizes (a few rows) the traffic is well under a microsecond and the "
              "launches dominate:",
              "fusion pays by launching less. As the rows grow (prefill) the traffic passes the "
              "launches and",
              f"fusion pays by moving {fusion_ratio(record):.1f} times fewer bytes (unfused "
              "bytes ÷ fused bytes)."]
    if m and not timed:
        lines += ["", "Your fused_add_rms_norm does not match add_rms_norm_reference (exercise 7's "
                  f"bf16 tolerance) {m['fused_mismatch']}:", "its times are not measured or "
                  "drawn; fix exercise 7 (python -m pytest exercises -m ex7)."]
    return "\n".join(lines)


def fusion_panels(record: dict) -> tuple[list[dict], list[str]]:
    rows, m, tau = record["rows"], record["measured"], record["tau_us"]
    launches = record["unfused_ops"] * tau
    times = [
        {"name": f"unfused, traffic model ({record['passes']} × read + write)", "colour": EAGER_COLOUR,
         "style": "line", "dash": "dotted",
         "points": list(zip(rows, record["unfused_model_us"]))},
        {"name": "fused, traffic model (2 reads + 2 writes)", "colour": GRAPH_COLOUR, "style": "line",
         "dash": "dotted", "points": list(zip(rows, record["fused_model_us"]))},
        {"name": f"unfused launches: {record['unfused_ops']} × τ = {launches:.0f} µs",
         "colour": EAGER_COLOUR, "style": "line", "dash": "dashed",
         "points": [(rows[0], launches), (rows[-1], launches)]},
        {"name": f"fused launch: τ = {tau:.1f} µs", "colour": GRAPH_COLOUR, "style": "line",
         "dash": "dashed", "points": [(rows[0], tau), (rows[-1], tau)]},
    ]
    if m:
        times.append({"name": "unfused, measured", "colour": EAGER_COLOUR, "style": "points",
                      "points": list(zip(rows, m["unfused_us"]))})
    if m and m["fused_us"] is not None:  # None: the fused result did not match the reference
        times.append({"name": "fused (yours), measured", "colour": GRAPH_COLOUR,
                      "style": "points", "points": list(zip(rows, m["fused_us"]))})
    traffic = [
        {"name": "unfused", "colour": EAGER_COLOUR, "style": "line",
         "points": [(r, b / 1e6) for r, b in zip(rows, record["unfused_bytes"])]},
        {"name": "fused", "colour": GRAPH_COLOUR, "style": "line",
         "points": [(r, b / 1e6) for r, b in zip(rows, record["fused_bytes"])]},
    ]
    panels = [
        {"name": "(a) time per call (log scale)" + ("" if m else ": modelled, not measured"),
         "y_label": "µs per call (log scale)", "y_scale": "log", "height": 300, "series": times,
         "notes": ["dotted: HBM bytes ÷ copy bandwidth", f"({record['copy_TBps']:.2f} TB/s, H200)",
                   "dashed: the CPU's launches (τ from the H200)",
                   "Where dotted passes dashed, traffic", "outweighs launches."]
         + ([] if m else ["No measured points: no CUDA run,", "no bundled fused measurement."])
         + (["No fused points: your fused_add_rms_norm", "did not match the reference."]
            if m and m["fused_us"] is None else [])},
        {"name": "(b) HBM traffic per call (model, log scale)", "y_label": "MB moved (log scale)",
         "y_scale": "log", "height": 220, "series": traffic,
         "notes": [f"unfused: {record['passes']} passes, each a read and a write",
                   f"({2 * record['passes']} tensor reads/writes); fused: read x and",
                   f"residual, write out and new_residual ({record['fused_passes']}):",
                   f"{fusion_ratio(record):.1f}x fewer bytes (bf16 tensors),",
                   "your chain_hbm_bytes" if record["model"] == "chain_hbm_bytes" else
                   "by arithmetic (--reference)"]},
    ]
    caption = [f"add + RMS norm on rows × {record['hidden']} (Qwen2.5-7B's hidden size), bf16. "
               "Decode: a few rows per step; prefill: thousands.",
               ("Measured on " + m["gpu"] + f", torch {m['torch']}, {m['iters']} calls per "
                "point.") if m else "Modelled, not measured: no CUDA here, and no bundled "
               "measurement of a fused kernel exists."]
    return panels, caption


def write_fusion(record: dict, out_dir) -> tuple[Path, Path]:
    out_dir, json_path = write_json(out_dir, "fusion.json", record)
    panels, caption = fusion_panels(record)
    what = (f"measured on {record['measured']['gpu']}" if record["measured"] else
            "modelled, not measured")
    svg_path = figure(out_dir / "fusion.svg", panels, x_scale="log", caption=caption,
                      title=f"Fused vs unfused add + RMS norm as tensors grow ({what})",
                      x_label=f"rows (tokens) of {record['hidden']} values, log scale")
    return json_path, svg_path


# --- measuring: the only part that needs CUDA -------------------------------------------------


def measure(impl: Implementation, sizes: list[int], iters: int) -> dict:
    """Part A and the N-sweep on this machine's GPU, with ``impl``'s exercise 2."""
    import torch  # only measuring needs torch

    print(f"measuring Part A and N = {' '.join(map(str, sizes))} ({iters} iterations each) ...",
          file=sys.stderr)
    part_a = call_student(impl, "launch_tax", "measure_launch_tax", PART_A_OPS, PART_A_NUMEL, iters)
    sweep = call_student(impl, "launch_tax", "sweep_launch_tax", sizes, iters=iters)
    return make_record(torch.cuda.get_device_name(), torch.__version__, part_a.eager_us,
                       part_a.graph_us, part_a.replay_matches_eager,
                       {r.n_ops: (r.eager_us / 1e3, r.graph_us / 1e3) for r in sweep})


# --- command line ----------------------------------------------------------------------------


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}")
    return value


def _named() -> list[str]:
    """The named implementations this repository has (a student repository: only exercises)."""
    return [name for name in NAMED if (REPO_ROOT / name / "__init__.py").is_file()]


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    path = Path(path).resolve()
    return path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)


def number_in(low: float, high: float = math.inf, *, high_closed: bool = False):
    """An argparse ``type`` for a finite float above ``low`` and below ``high`` (or up to it,
    ``high_closed``); its error names the range and the text given."""
    span = (f"> {low:g}" if high == math.inf else
            f"in ({low:g}, {high:g}{']' if high_closed else ')'}")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        inside = math.isfinite(value) and low < value and (value <= high if high_closed
                                                           else value < high)
        if not inside:
            raise argparse.ArgumentTypeError(f"expected a finite number {span}, got {text!r}")
        return value

    parse.__name__ = f"number {span}"
    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m coursekit.lab", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    labs = parser.add_subparsers(dest="lab", required=True, metavar="LAB")

    def impl_and_out(sub, outputs: str):
        sub.add_argument("--impl", default="exercises",
                         help=f"{' or '.join(_named())} (default: exercises), or a folder of "
                         "module files")
        sub.add_argument("--out", default="lab-output",
                         help=f"folder for {outputs} (default: %(default)s)")

    tax = labs.add_parser("launch-tax", help="Part A: eager vs CUDA graph over chain lengths N")
    impl_and_out(tax, "launch-tax.json and launch-tax.svg")
    tax.add_argument("--sizes", type=positive_int, nargs="+", default=list(DEFAULT_SIZES),
                     metavar="N", help="chain lengths to sweep (default: %(default)s)")
    tax.add_argument("--iters", type=positive_int, default=100,
                     help="timed iterations per measurement (default: %(default)s)")
    source = tax.add_mutually_exclusive_group()
    source.add_argument("--from", dest="from_file", metavar="FILE",
                        help="read a saved launch-tax.json (or the H200 anchor) instead of "
                        "measuring; no GPU needed")
    source.add_argument("--reference", action="store_true",
                        help="use the bundled H200 figures (coursekit/data/) instead of "
                        "measuring; no GPU needed")

    speed = labs.add_parser("speedup", help="which model is right: the graph's speedup against "
                            "compute time, additive vs pipeline (exercise 1)")
    impl_and_out(speed, "speedup.json and speedup.svg")
    speed.add_argument("--reference", action="store_true",
                       help="draw the pipeline from its equal-kernel closed form instead of "
                       "your simulate_eager_ms")

    line = labs.add_parser("timeline", help="the eager pipeline kernel by kernel against a graph "
                           "replay (exercise 9's eager_timeline)")
    impl_and_out(line, "timeline.json and timeline.svg")
    line.add_argument("--launch-us", type=number_in(0), default=LESSON_LAUNCH_US,
                      help="τ, the CPU's time per launch in µs (default: %(default)s, the "
                      "lesson's)")

    pre = labs.add_parser("prefill", help="decode vs prefill: the graph's gain against the "
                          "size of each kernel (exercises 1 and 9; with CUDA, exercise 2 measures)")
    impl_and_out(pre, "prefill.json and prefill.svg")
    pre.add_argument("--iters", type=positive_int, default=50,
                     help="timed iterations per measured size (default: %(default)s)")
    pre.add_argument("--model-only", action="store_true",
                     help="draw the model without measuring, even where there is CUDA")

    fuse = labs.add_parser("fusion", help="fused vs unfused add + RMS norm as tensors grow "
                           "(exercise 7; measured with CUDA, else modelled)")
    impl_and_out(fuse, "fusion.json and fusion.svg")
    fuse.add_argument("--rows", type=positive_int, nargs="+", default=list(FUSION_ROWS), metavar="R",
                      help="row counts (tokens) to draw (default: %(default)s)")
    fuse.add_argument("--hidden", type=positive_int, default=FUSION_HIDDEN,
                      help="values per row (default: %(default)s, Qwen2.5-7B's)")
    fuse.add_argument("--iters", type=positive_int, default=50,
                      help="timed calls per point when measuring (default: %(default)s)")
    fuse.add_argument("--reference", action="store_true",
                      help="the traffic model by plain arithmetic, no measuring, no exercise 7")
    return parser


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error (or --help)
        return exc.code
    try:
        impl = Implementation(args.impl)
    except ValueError as exc:
        print(f"lab: --{exc}", file=sys.stderr)
        return 2
    run = {"launch-tax": _launch_tax, "speedup": _speedup, "timeline": _timeline,
           "prefill": _prefill, "fusion": _fusion}[args.lab]
    try:
        return run(args, impl)
    except ExerciseNotFinished as exc:
        return _unfinished(exc, args.impl, reference=args.lab in ("speedup", "fusion"))
    except ImportError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 1


def wrote(paths: tuple[Path, Path]) -> None:
    """Say where a lab's JSON and SVG went."""
    json_path, svg_path = paths
    print(f"\nwrote {json_path}\nwrote {svg_path}")


def _speedup(args, impl: Implementation) -> int:
    if args.reference:
        record = speedup_record(pipeline_eager_ms_equal, "closed form")
        source = ("the pipeline from its equal-kernel closed form (--reference), the additive "
                  "model and the AWQ and BF16 steps by the lab's arithmetic; nothing measured")
    else:
        n, tau = LESSON_STEP_KERNELS, LESSON_LAUNCH_US
        record = speedup_record(lambda t: call_student(
            impl, "launch_model", "simulate_eager_ms", [t * 1e3 / n] * n, tau),
            "simulate_eager_ms", student_step(impl), "DecodeStep")
        source = (f"the AWQ and BF16 steps from your DecodeStep and the pipeline from your "
                  f"simulate_eager_ms (exercise 1, --impl {args.impl}), the additive curve by "
                  "arithmetic; nothing measured")
    print(f"speedup lab: {source}\n")
    print(speedup_report(record))
    if not args.reference:
        for warning in (step_disagreements(record), pipeline_disagreements(record)):
            if warning:
                print(f"\n{warning}")
    wrote(write_speedup(record, args.out))
    return 0


def _timeline(args, impl: Implementation) -> int:
    try:
        record = timeline_record(lambda kernels, tau: call_student(
            impl, "tradeoffs", "eager_timeline", kernels, tau), args.launch_us,
            lesson.H200_TAU_GRAPH_US)
    except ValueError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 1
    try:  # τ* of each scenario, computed once; the report reads them
        tau_stars = [float(call_student(impl, "tradeoffs", "cpu_bound_launch_us", s["gpu_us"]))
                     for s in record["scenarios"]]
    except ExerciseNotFinished:
        tau_stars = None
    print(f"timeline lab: eager timelines from exercise 9's eager_timeline (--impl {args.impl}); "
          f"every kernel costs the H200's ν = {lesson.H200_TAU_GRAPH_US:.2f} µs beyond its bytes; "
          "nothing measured\n")
    print(timeline_report(record, tau_stars))
    wrote(write_timeline(record, args.out))
    return 0


def _prefill(args, impl: Implementation) -> int:
    def student_step_cls(**kwargs):  # its methods' NotImplementedError: exercise 1 unfinished
        s = call_student(impl, "launch_model", "DecodeStep", **kwargs)
        return SimpleNamespace(eager_ms=lambda: student("launch_model", s.eager_ms),
                               graph_ms=lambda: student("launch_model", s.graph_ms))

    record = prefill_record(
        student_step_cls,
        lambda kernels, tau: call_student(impl, "launch_model", "simulate_eager_ms", kernels, tau),
        lambda kernels: call_student(impl, "tradeoffs", "cpu_bound_launch_us", kernels),
        lesson.H200_TAU_EAGER_US, lesson.H200_TAU_GRAPH_US, copy_bandwidth_bps())
    import torch

    if torch.cuda.is_available() and not args.model_only:
        gpu = torch.cuda.get_device_name()
        record["measured"] = []
        for numel in PREFILL_NUMELS:
            r = call_student(impl, "launch_tax", "measure_launch_tax", PREFILL_OPS, numel, args.iters)
            record["measured"].append({"numel": numel, "eager_us": float(r.eager_us),
                                       "graph_us": float(r.graph_us), "gpu": gpu,
                                       "replay_matches_eager": bool(r.replay_matches_eager)})
        source = (f"measured on {gpu} with your measure_launch_tax (exercise 2); the model from "
                  f"your DecodeStep, simulate_eager_ms and cpu_bound_launch_us (--impl {args.impl})")
    else:
        why = "--model-only" if args.model_only else "no CUDA here"
        source = (f"the model from your DecodeStep, simulate_eager_ms (exercise 1) and "
                  f"cpu_bound_launch_us (exercise 9, --impl {args.impl}), with the H200's τ, ν and "
                  f"copy bandwidth ({lesson.H200_DATE}); modelled, not measured: {why}, and no "
                  "measured sweep is bundled yet")
    print(f"prefill lab: {source}\n")
    print(prefill_report(record))
    wrote(write_prefill(record, args.out))
    return 0


def _chain_bytes_rule(n_ops: int, numel: int, dtype_bytes: int, fused: bool) -> int:
    """chain_hbm_bytes's docstring rule, for --reference: a read and a write per pass."""
    return 0 if n_ops == 0 else 2 * (1 if fused else n_ops) * numel * dtype_bytes


def _fusion(args, impl: Implementation) -> int:
    rows = sorted(set(args.rows))
    if len(rows) < 2:
        print(f"lab: --rows: expected at least two distinct row counts, got {args.rows}",
              file=sys.stderr)
        return 2
    if args.reference:
        record = fusion_record(_chain_bytes_rule, rows, args.hidden, "arithmetic")
        source = ("the traffic model by arithmetic (--reference); modelled, not measured: no "
                  "bundled fused measurement exists")
    else:
        record = fusion_record(lambda *a: call_student(impl, "fusion", "chain_hbm_bytes", *a),
                               rows, args.hidden, "chain_hbm_bytes")
        import torch

        if torch.cuda.is_available():
            record["measured"] = measure_fusion(impl, rows, args.hidden, args.iters)
            yours = ("with your fused_add_rms_norm" if record["measured"]["fused_us"] is not None
                     else "the unfused version only (your fused_add_rms_norm gave a wrong "
                     "result)")
            source = (f"measured on {record['measured']['gpu']} {yours}, the traffic model from "
                      f"your chain_hbm_bytes (--impl {args.impl})")
        else:
            source = (f"the traffic model from your chain_hbm_bytes (--impl {args.impl}); "
                      "modelled, not measured: no CUDA here, and no bundled fused measurement "
                      "exists")
    print(f"fusion lab: {source}\n")
    print(fusion_report(record))
    wrote(write_fusion(record, args.out))
    return 0


def _launch_tax(args, impl: Implementation) -> int:
    if len(set(args.sizes)) < 2:
        print(f"lab: --sizes: expected at least two distinct chain lengths to fit a line, "
              f"got {args.sizes}", file=sys.stderr)
        return 2

    label = "from file"
    if args.reference:
        record = reference_record()
        source = (f"the bundled H200 measurement ({record['gpu']}, torch {record['torch']}, one "
                  f"run on {lesson.H200_DATE}) from {_shown(lesson.H200_ANCHOR)}, not measured here")
    elif args.from_file:
        try:
            record = load_record(args.from_file)
        except ValueError as exc:
            print(f"lab: {exc}", file=sys.stderr)
            return 2
        source = (f"re-plotting {args.from_file} ({record['gpu']}, torch {record['torch']}), not "
                  "measured here")
    else:
        import torch

        if not torch.cuda.is_available():
            print("lab: measuring needs a CUDA GPU, and torch.cuda.is_available() is False here. "
                  "On a laptop, try --reference (the bundled H200 figures) or --from FILE "
                  "(a saved launch-tax.json).", file=sys.stderr)
            return 2
        record, source = None, "measured on this GPU by exercise 2"  # measured below
        label = "this run"

    if record is None:  # an unfinished exercise 2 or a missing module: main says so
        record = measure(impl, sorted(set(args.sizes)), args.iters)
    try:
        record = fit_record(record, lambda ns, ms: call_student(
            impl, "launch_model", "fit_launch_model", ns, ms))
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


def _unfinished(exc: ExerciseNotFinished, impl: str, reference: bool = False) -> int:
    other = [name for name in _named() if name != impl]
    print(f"lab: exercise {exc.number} is not finished: {exc}; finish it"
          + "".join(f", or run with --impl {name}" for name in other)
          + (", or with --reference" if reference else ""), file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
