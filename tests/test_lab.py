"""``python -m coursekit.lab launch-tax``: the report, the chart and the JSON, checked on the CPU
with the bundled H200 figures (``--reference``) and saved files (``--from``)."""

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import torch

from coursekit import lesson
from coursekit.impl import REPO_ROOT
from coursekit.lab import main
from coursekit.svgplot import figure, line_chart

SVG = "{http://www.w3.org/2000/svg}"
ANCHOR = REPO_ROOT / "coursekit/data/h200-anchor-2026-11-30.json"  # bundled, shipped


def lab(capsys, *args):
    """Run the lab in-process; return (exit status, stdout, stderr)."""
    code = main(["launch-tax", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def report_part(out):
    """stdout without the first line (where the figures came from) and the 'wrote' lines."""
    return [line for line in out.splitlines()[1:] if not line.startswith("wrote ")]


def test_reference_report(tmp_path, capsys):
    code, out, err = lab(capsys, "--reference", "--impl", "solutions", "--out", tmp_path)
    assert code == 0, err
    # Part A, next to the H200 reference.
    assert re.search(r"eager\s+1852 µs\s+1852 µs", out), out
    assert re.search(r"graph\s+185 µs\s+185 µs", out), out
    assert re.search(r"speedup\s+10\.0x\s+10\.0x", out), out
    assert "replay matches eager: yes" in out
    # The fitted slopes: tau (eager) and nu (graph), in µs per kernel.
    assert re.search(r"τ, eager.*\b7\.99 µs", out), out
    assert re.search(r"ν, graph.*\b1\.10 µs", out), out
    assert "DecodeStep(gpu_node_us=1.10)" in out
    # One table row per N of the sweep, in order.
    rows = [int(m.group(1)) for m in re.finditer(r"^\s*(\d+) \|", out, re.MULTILINE)]
    assert rows == sorted(lesson.H200_SWEEP), out
    for name in ("launch-tax.json", "launch-tax.svg"):
        assert f"wrote {tmp_path / name}" in out, out


def test_reference_json_has_the_anchor_shape(tmp_path, capsys):
    assert lab(capsys, "--reference", "--impl", "solutions", "--out", tmp_path)[0] == 0
    record = json.loads((tmp_path / "launch-tax.json").read_text(encoding="utf-8"))
    assert set(record) == {
        "gpu",
        "torch",
        "partA",
        "sweep_ms",
        "tau_eager_us",
        "t0_eager_us",
        "tau_graph_us",
        "t0_graph_us",
    }
    assert record["partA"] == pytest.approx(
        {
            "eager_us": 1851.64794921875,
            "graph_us": 185.4217529296875,
            "ratio": 9.986141970736847,
            "replay_correct": True,
        }
    )
    assert record["sweep_ms"] == {str(n): list(t) for n, t in lesson.H200_SWEEP.items()}
    assert record["tau_eager_us"] == pytest.approx(lesson.H200_TAU_EAGER_US, rel=1e-9)
    assert record["tau_graph_us"] == pytest.approx(lesson.H200_TAU_GRAPH_US, rel=1e-9)


def svg_parts(path):
    """(root, panels by data-name, {panel name: {series name: <g>}}) of a lab chart."""
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    panels = {g.get("data-name"): g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"}
    series = {
        name: {g.get("data-name"): g for g in panel.iter(f"{SVG}g") if g.get("class") == "series"}
        for name, panel in panels.items()
    }
    return root, panels, series


STEP, SPEEDUP = "(a) step time per iteration (log scale)", "(b) speedup of the CUDA graph"
LESSON_SERIES = {"lesson's model, eager: N × 5 µs", "lesson's model, graph: one launch, 5 µs"}
MARKED_SERIES = {
    "Part A eager, N = 200 (separate run)",
    "Part A graph, N = 200 (separate run)",
    "7B decode step, eager (H200, batch 1)",
    "7B decode step, graph (H200, batch 1)",
}


def check_panels_and_marks(panels, series):
    """What every lab chart has, fitted or not: two panels, the step-time one on a log axis, the
    marks at the lesson's decode step and the bundled 7B step in both, the measured 7B step."""
    assert list(panels) == [STEP, SPEEDUP]
    assert panels[STEP].get("data-y-scale") == "log"
    assert panels[SPEEDUP].get("data-y-scale") == "linear"
    seven_b = lesson.h200_anchor()["decode7b"]["1"]
    assert seven_b["kernels"] == 1579
    for name, panel in panels.items():
        marks = {g.get("data-x") for g in panel.iter(f"{SVG}g") if g.get("class") == "mark"}
        assert marks == {"430", "1579"}, name
    # The measured 7B step: one diamond each, at N = 1579, above the mark's line.
    for name in ("7B decode step, eager (H200, batch 1)", "7B decode step, graph (H200, batch 1)"):
        assert len(series[STEP][name].findall(f"{SVG}polygon")) == 1, name
    (speedup_7b,) = [n for n in series[SPEEDUP] if n.startswith("7B decode step")]
    assert speedup_7b.endswith(f"{seven_b['eager_ms'] / seven_b['graph_ms']:.1f}x") and speedup_7b.endswith("4.5x")
    # Readable: on the log axis the graph's measured points span over a quarter of the plot's height
    # (on the old 0-8000 µs linear axis they were squashed into its bottom tenth).
    frame = [r for r in panels[STEP].findall(f"{SVG}rect") if r.get("fill") == "none"][-1]
    ys = [float(c.get("cy")) for c in series[STEP]["graph, measured"].findall(f"{SVG}circle")]
    assert len(ys) == len(lesson.H200_SWEEP)
    assert max(ys) - min(ys) > float(frame.get("height")) / 4, (ys, frame.attrib)


def test_reference_svg_is_a_chart_of_both_series(tmp_path, capsys):
    assert lab(capsys, "--reference", "--impl", "solutions", "--out", tmp_path)[0] == 0
    root, panels, series = svg_parts(tmp_path / "launch-tax.svg")
    check_panels_and_marks(panels, series)
    assert (
        set(series[STEP])
        == {"eager, measured", "eager fit: 25.0 + 7.99·N µs", "graph, measured", "graph fit: 1.3 + 1.10·N µs"}
        | LESSON_SERIES
        | MARKED_SERIES
    )
    for name, g in series[STEP].items():
        if "measured" in name:  # one point per N
            assert len(g.findall(f"{SVG}circle")) == len(lesson.H200_SWEEP), name
        elif "fit:" in name:  # the fitted line: solid over the sweep, dashed on to N = 1579
            solid, dashed = g.findall(f"{SVG}polyline")
            assert solid.get("stroke-dasharray") is None and dashed.get("stroke-dasharray"), name
    assert set(series[SPEEDUP]) == {
        "eager ÷ graph, measured",
        "eager fit ÷ graph fit",
        "Part A, N = 200 (separate run): 10.0x",
        "7B decode step (H200, batch 1): 4.5x",
    }
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "step time (µs, log scale)" in texts and "number of kernels N" in texts
    assert "100 000" in texts and "1" in texts  # the log axis's decades
    assert not any("appear once" in (t or "") for t in texts)


def test_from_reads_a_saved_run_back_to_the_same_report(tmp_path, capsys):
    code, first, err = lab(capsys, "--reference", "--impl", "solutions", "--out", tmp_path / "a")
    assert code == 0, err
    saved = tmp_path / "a/launch-tax.json"
    code, again, err = lab(capsys, "--from", saved, "--impl", "solutions", "--out", tmp_path / "b")
    assert code == 0, err
    assert report_part(again) == report_part(first)
    assert (tmp_path / "b/launch-tax.json").read_text() == saved.read_text()


def test_from_reads_the_bundled_h200_anchor(tmp_path, capsys):
    assert lesson.H200_ANCHOR == ANCHOR and ANCHOR.is_file()
    code, reference, err = lab(capsys, "--reference", "--impl", "solutions", "--out", tmp_path / "a")
    assert code == 0, err
    code, anchor, err = lab(capsys, "--from", ANCHOR, "--impl", "solutions", "--out", tmp_path / "b")
    assert code == 0, err
    assert report_part(anchor) == report_part(reference)


def test_reference_says_it_shows_the_bundled_measurement(tmp_path, capsys):
    code, out, err = lab(capsys, "--reference", "--impl", "solutions", "--out", tmp_path)
    assert code == 0, err
    assert "this run" not in out, out
    first = out.splitlines()[0]
    for named in (
        "bundled",
        "NVIDIA H200",
        "2.11.0+cu130",
        "2026-11-30",
        "coursekit/data/h200-anchor-2026-11-30.json",
        "not measured here",
    ):
        assert named in first, first


def test_from_says_it_replots_the_file(tmp_path, capsys):
    code, out, err = lab(capsys, "--from", ANCHOR, "--impl", "solutions", "--out", tmp_path)
    assert code == 0, err
    assert "this run" not in out, out
    assert f"re-plotting {ANCHOR}" in out.splitlines()[0], out


def test_the_lesson_reads_the_bundled_anchor():
    anchor = json.loads(ANCHOR.read_text(encoding="utf-8"))
    assert lesson.H200_PART_A == (anchor["partA"]["eager_us"], anchor["partA"]["graph_us"])
    assert lesson.H200_SWEEP == {int(n): tuple(t) for n, t in anchor["sweep_ms"].items()}
    assert (lesson.H200_TAU_EAGER_US, lesson.H200_TAU_GRAPH_US) == (anchor["tau_eager_us"], anchor["tau_graph_us"])
    assert lesson.H200_DATE == "2026-11-30" and anchor["gpu"] == "NVIDIA H200"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_measuring_without_cuda_says_what_to_do(tmp_path, capsys):
    code, out, err = lab(capsys, "--out", tmp_path)
    assert code == 2 and "CUDA" in err and "--reference" in err and "--from" in err, err
    assert out == "" and not (tmp_path / "launch-tax.json").exists()


FAKE_LAUNCH_TAX = """
from coursekit.measurements import LaunchTax

def measure_launch_tax(n_ops=200, numel=1024, iters=100):
    # Exactly on two lines: eager 25 + 8 N µs, graph 1 + 1 N µs.
    return LaunchTax(n_ops, numel, 25.0 + 8.0 * n_ops, 1.0 + 1.0 * n_ops, True)

def sweep_launch_tax(n_ops_list, numel=1024, iters=100):
    return [measure_launch_tax(n, numel, iters) for n in n_ops_list]
"""


def measuring_submission(tmp_path, **modules):
    """A submission folder whose launch_tax.py measures on two exact lines (FAKE_LAUNCH_TAX) and
    whose other modules are copied from a folder: ``launch_model="solutions"``."""
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "launch_tax.py").write_text(FAKE_LAUNCH_TAX)
    for module, folder in modules.items():
        (submission / f"{module}.py").write_text((REPO_ROOT / folder / f"{module}.py").read_text())
    return submission


def pretend_cuda(monkeypatch):
    """The measuring path on the CPU: CUDA 'is available' and the lab's torch calls are faked."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: "Fake GPU")


def test_measuring_fits_exercise_2_results_with_exercise_1(tmp_path, capsys, monkeypatch):
    pretend_cuda(monkeypatch)
    submission = measuring_submission(tmp_path, launch_model="solutions")
    code, out, err = lab(capsys, "--impl", submission, "--sizes", 40, 10, 20, "--iters", 3, "--out", tmp_path / "out")
    assert code == 0, err
    record = json.loads((tmp_path / "out/launch-tax.json").read_text(encoding="utf-8"))
    assert record["gpu"] == "Fake GPU" and list(record["sweep_ms"]) == ["10", "20", "40"]
    assert record["partA"]["eager_us"] == 1625.0 and record["partA"]["graph_us"] == 201.0
    fits = {"tau_eager_us": 8.0, "t0_eager_us": 25.0, "tau_graph_us": 1.0, "t0_graph_us": 1.0}
    assert {key: record[key] for key in fits} == pytest.approx(fits)
    assert "GPU: Fake GPU" in out and re.search(r"τ, eager.*\b8\.00 µs", out), out


def test_unfinished_exercise_2_is_named_when_measuring(tmp_path, capsys, monkeypatch):
    pretend_cuda(monkeypatch)
    code, out, err = lab(capsys, "--impl", "exercises", "--out", tmp_path)
    assert code == 1 and "exercise 2 is not finished: measure_launch_tax" in err, err
    assert "Traceback" not in err


UNFITTED = "The fitted lines appear once exercise 1's fit_launch_model is done."


@pytest.mark.parametrize("source", ["--reference", "--from"])
def test_unfinished_exercise_1_shows_the_points_and_the_lesson_without_fits(tmp_path, capsys, source):
    args = ["--reference"] if source == "--reference" else ["--from", ANCHOR]
    code, out, err = lab(capsys, *args, "--impl", "exercises", "--out", tmp_path)
    assert code == 0 and err == "", out + err
    assert "Traceback" not in out
    first = out.splitlines()[0]
    assert "not fitted: exercise 1 is not finished (fit_launch_model)" in first, first
    assert UNFITTED in out, out
    # The measured sweep beside the lesson's model (τ = 5 µs, a graph one launch): no fit of the
    # lab's own, so no fitted slope and no model column.
    assert "τ, eager" not in out and "ν, graph" not in out and "eager model" not in out, out
    assert re.search(
        r"^\s+200 \|\s+1585\.4 \|\s+1000\.0 \|\s+220\.5 \|\s+5\.0 \|\s+7\.2x \|"
        r"\s+200\.0x$",
        out,
        re.MULTILINE,
    ), out
    record = json.loads((tmp_path / "launch-tax.json").read_text(encoding="utf-8"))
    assert set(record) == {"gpu", "torch", "partA", "sweep_ms"}
    root, panels, series = svg_parts(tmp_path / "launch-tax.svg")
    check_panels_and_marks(panels, series)
    assert set(series[STEP]) == {"eager, measured", "graph, measured"} | LESSON_SERIES | MARKED_SERIES
    assert set(series[SPEEDUP]) == {
        "eager ÷ graph, measured",
        "Part A, N = 200 (separate run): 10.0x",
        "7B decode step (H200, batch 1): 4.5x",
    }
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "Not fitted yet" in texts and "fit_launch_model is done" in texts, texts


def test_an_unfitted_file_is_fitted_once_exercise_1_is_done(tmp_path, capsys):
    assert lab(capsys, "--reference", "--out", tmp_path / "stubs")[0] == 0
    code, again, err = lab(
        capsys, "--from", tmp_path / "stubs/launch-tax.json", "--impl", "solutions", "--out", tmp_path / "b"
    )
    assert code == 0, err
    code, reference, err = lab(capsys, "--from", ANCHOR, "--impl", "solutions", "--out", tmp_path / "c")
    assert code == 0, err
    assert report_part(again) == report_part(reference)
    assert "DecodeStep(gpu_node_us=1.10)" in again and UNFITTED not in again


def test_measuring_with_exercise_1_unfinished_reports_without_fits(tmp_path, capsys, monkeypatch):
    pretend_cuda(monkeypatch)
    submission = measuring_submission(tmp_path, launch_model="exercises")
    code, out, err = lab(capsys, "--impl", submission, "--sizes", 40, 10, 20, "--iters", 3, "--out", tmp_path / "out")
    assert code == 0, err
    assert UNFITTED in out and "GPU: Fake GPU" in out, out
    record = json.loads((tmp_path / "out/launch-tax.json").read_text(encoding="utf-8"))
    assert list(record["sweep_ms"]) == ["10", "20", "40"] and "tau_eager_us" not in record
    # No N = 200 in this sweep: nothing to compare Part A with.
    assert "two separate measurements" not in out


@pytest.mark.parametrize("impl", ["exercises", "solutions"])
def test_part_a_against_the_sweep_at_200_is_explained(tmp_path, capsys, impl):
    code, out, err = lab(capsys, "--reference", "--impl", impl, "--out", tmp_path)
    assert code == 0, err
    assert (
        "Why Part A says 10.0x and the sweep's N = 200 says 7.2x: they are two separate measurements of the" in out
    ), out
    assert "same chain of 200 tiny kernels, made one after the other in one run" in out
    assert re.search(r"Part A\s+eager\s+1852 µs, graph\s+185 µs -> 10\.0x", out), out
    assert re.search(r"sweep, N = 200\s+eager\s+1585 µs, graph\s+221 µs ->\s+7\.2x", out), out
    assert "Eager differs by 14 %, graph by 19 %, and their ratio by 28 %: a ratio of two noisy times moves" in out, out
    assert "Repeat each measurement and take the median before you quote a speedup." in out
    # The 7B step against what the tiny-kernel lines say at its N.
    assert "7B decode step (batch 1, 1579 kernels) took eager 29.7 ms" in out, out
    assert (
        "extrapolated to N = 1579: eager 12.64 ms"
        if impl == "solutions"
        else "The lesson's model at N = 1579: eager 7.89 ms"
    ) in out, out


def test_the_lessons_model_constants_are_the_lessons():
    """The lab draws the lesson's model with DecodeStep's defaults (coursekit may not import the
    exercises): τ = 5 µs and 28 x 15 + 10 = 430 kernels, as in the lesson's expected output."""
    from coursekit.lab import common as lab_module

    assert lab_module.LESSON_STEP_KERNELS == 430 and lab_module.LESSON_LAUNCH_US == 5.0
    for line in lesson.SEED_REPORT.splitlines()[::2]:
        kernels, launch_ms = re.search(r"(\d+) 个 kernel .* 启动 ([\d.]+) ms", line).groups()
        assert int(kernels) == lab_module.LESSON_STEP_KERNELS
        assert float(launch_ms) == pytest.approx(int(kernels) * lab_module.LESSON_LAUNCH_US / 1e3)


def test_missing_module_is_reported(tmp_path, capsys):
    (tmp_path / "submission").mkdir()
    code, _, err = lab(capsys, "--reference", "--impl", tmp_path / "submission", "--out", tmp_path)
    assert code == 1 and "module 'launch_model' not in submission" in err, err


@pytest.mark.parametrize(
    "args, named",
    [
        (["--reference", "--iters", "0"], "--iters"),
        (["--reference", "--sizes", "100", "100"], "--sizes"),
        (["--reference", "--impl", "no/such/dir"], "--impl"),
        (["--from", "no/such/file.json"], "--from"),
        (["--reference", "--from", "x.json"], "--from"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(tmp_path, capsys, args, named):
    code, _, err = lab(capsys, *args, "--out", tmp_path)
    assert code == 2 and named in err, err


def test_from_rejects_a_file_of_another_shape(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"partA": {"eager_us": 1.0, "graph_us": 1.0}, "sweep_ms": {"25": [1.0, 1.0]}}')
    code, _, err = lab(capsys, "--from", bad, "--impl", "solutions", "--out", tmp_path)
    assert code == 2 and "--from" in err and "at least two chain lengths" in err, err


def test_svgplot_ticks_and_rules(tmp_path):
    path = line_chart(
        tmp_path / "c.svg",
        [
            {"name": "a & b", "colour": "red", "style": "line", "points": [(0, -0.3), (2.5, 0.7)]},
        ],
        title="<t>",
        x_label="x",
        y_label="y",
    )
    root = ET.parse(path).getroot()  # '&' and '<' are escaped
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "-0.4" in labels and "0.8" in labels and "a & b" in labels and "<t>" in labels, labels
    with pytest.raises(ValueError, match=r"series\[0\]\.style"):
        line_chart(
            tmp_path / "d.svg", [{"name": "a", "colour": "red", "style": "bars", "points": [(0, 1)]}], "t", "x", "y"
        )


def test_svgplot_figure_panels_log_axis_marks_and_legend(tmp_path):
    panels = [
        {
            "name": "times",
            "y_label": "µs",
            "y_scale": "log",
            "marks": [{"x": 30, "label": "N = 30"}],
            "series": [
                {
                    "name": "a",
                    "colour": "red",
                    "style": "points",
                    "marker": "diamond",
                    "points": [(10, 3.0), (40, 2500.0)],
                },
                {
                    "name": "b",
                    "colour": "blue",
                    "style": "line",
                    "dashed_after": 20,
                    "points": [(10, 5.0), (20, 6.0), (40, 8.0)],
                },
            ],
            "notes": ["a note"],
        },
        {
            "name": "ratio",
            "y_label": "x",
            "series": [{"name": "c", "colour": "green", "style": "points", "points": [(10, 10.0)]}],
        },
    ]
    root = ET.parse(figure(tmp_path / "f.svg", panels, "t", "N", caption=["cap"])).getroot()
    groups = [g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"]
    assert [(g.get("data-name"), g.get("data-y-scale")) for g in groups] == [("times", "log"), ("ratio", "linear")]
    texts = [t.text for t in root.iter(f"{SVG}text")]
    # Decades 1 ... 10 000 (2500 needs 10 000), the linear axis past 10 with headroom.
    assert {"1", "10", "100", "1 000", "10 000"} <= set(texts) and "100 000" not in texts, texts
    assert "12" in texts and "cap" in texts and "a note" in texts
    (mark,) = [g for g in groups[0].iter(f"{SVG}g") if g.get("class") == "mark"]
    assert mark.get("data-x") == "30" and mark.find(f"{SVG}line") is not None
    solid, dashed = [g for g in groups[0].iter(f"{SVG}g") if g.get("data-name") == "b"][0]
    assert solid.get("stroke-dasharray") is None and dashed.get("stroke-dasharray")
    # Every legend sits right of every plot frame: never over the data.
    frames = [r for g in groups for r in g.findall(f"{SVG}rect") if r.get("fill") == "none"]
    right = max(float(r.get("x")) + float(r.get("width")) for r in frames)
    legends = [g for g in root.iter(f"{SVG}g") if g.get("class") == "legend"]
    assert len(legends) == 2 and all(float(t.get("x")) > right for g in legends for t in g.iter(f"{SVG}text"))
    bad = [{**panels[0], "series": [{**panels[0]["series"][0], "points": [(1, 0.0)]}]}]
    with pytest.raises(ValueError, match=r"panels\[0\]\.series\[0\]\.points: a log axis"):
        figure(tmp_path / "g.svg", bad, "t", "N")
    with pytest.raises(ValueError, match=r"panels\[0\]\.y_scale"):
        figure(tmp_path / "h.svg", [{**panels[0], "y_scale": "symlog"}], "t", "N")


def test_module_entry_point(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "coursekit.lab",
            "launch-tax",
            "--reference",
            "--impl",
            "solutions",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "7.99 µs" in run.stdout and (tmp_path / "launch-tax.svg").is_file()


# --- the model labs: speedup, timeline, fusion (no GPU needed) ---------------------------------


def run_lab(capsys, name, *args):
    """Run ``python -m coursekit.lab NAME ARGS`` in-process; return (status, stdout, stderr)."""
    code = main([name, *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def simulate_equal(compute_ms, n=430, tau=5.0):
    """The pipeline walked kernel by kernel (exercise 1's reference simulate_eager_ms), for N
    equal kernels: independent of the lab's closed form."""
    from solutions.launch_model import simulate_eager_ms

    return simulate_eager_ms([compute_ms * 1e3 / n] * n, tau)


def lesson_speedups():
    """{name: (additive, pipeline)} for the lesson's AWQ and BF16 steps, computed here."""
    out = {}
    for label, gib in lesson.SEED_WEIGHTS:
        compute = gib * 1024**3 / 1e12 * 1e3
        graph = compute + 5e-3
        out[label.split()[0]] = ((compute + 430 * 5e-3) / graph, simulate_equal(compute) / graph)
    return out


@pytest.mark.parametrize("steps", ["arithmetic", "DecodeStep"])
def test_the_lessons_speedups_are_the_seed_reports(steps):
    """1.36x and 1.14x are the lesson's printed figures (SEED_REPORT's 加速比): the lab's
    speedup_record gives them as the additive speedups of its AWQ and BF16 points, by its own
    arithmetic (--reference) and from exercise 1's DecodeStep (solutions)."""
    from coursekit.lab import speedup as lab_module
    from coursekit.impl import Implementation

    step = lab_module.lesson_step if steps == "arithmetic" else lab_module.student_step(Implementation("solutions"))
    record = lab_module.speedup_record(lab_module.pipeline_eager_ms_equal, "closed form", step, steps)
    printed = [float(x) for x in re.findall(r"加速比 ([\d.]+)x", lesson.SEED_REPORT)]
    assert printed == [1.36, 1.14]
    points = record["points"]
    assert list(points) == ["AWQ", "BF16"] and record["steps"] == steps
    assert [round(points[name]["speedup_additive"], 2) for name in points] == printed
    assert [round(points[name]["speedup_pipeline"], 2) for name in points] == [1.0, 1.0]


def speedup_lines():
    return [
        f"{name} ({gib:g} GiB at 1 TB/s, T = {gib * 1024**3 / 1e9:.2f} ms): additive "
        f"{lesson_speedups()[name][0]:.2f}x, pipeline {lesson_speedups()[name][1]:.2f}x"
        for name, gib in (("AWQ", 5.5), ("BF16", 14.2))
    ]


@pytest.mark.parametrize("impl", ["exercises", "solutions"])
def test_speedup_reference_works_on_any_implementation(tmp_path, capsys, impl):
    code, out, err = run_lab(capsys, "speedup", "--reference", "--impl", impl, "--out", tmp_path)
    assert code == 0 and err == "", err
    assert "equal-kernel closed form (--reference)" in out.splitlines()[0]
    for line in speedup_lines():
        assert line in out, (line, out)
    assert "AWQ (5.5 GiB at 1 TB/s, T = 5.91 ms): additive 1.36x, pipeline 1.00x" in out
    assert "BF16 (14.2 GiB at 1 TB/s, T = 15.25 ms): additive 1.14x, pipeline 1.00x" in out
    assert "turns CPU-bound below T = N·τ = 2.15 ms" in out
    # A row of the table, below the turn: the two models part (3.13x against 2.14x).
    assert re.search(
        r"^\s+1\.00 ms \|\s+2\.33 µs \|\s+3\.15 ms \|\s+2\.15 ms \|\s+1\.00 ms \|"
        r"\s+3\.13x \|\s+2\.14x$",
        out,
        re.MULTILINE,
    ), out
    for name in ("speedup.json", "speedup.svg"):
        assert f"wrote {tmp_path / name}" in out
    record = json.loads((tmp_path / "speedup.json").read_text(encoding="utf-8"))
    for name, (additive, pipeline) in lesson_speedups().items():
        point = record["points"][name]
        assert point["speedup_additive"] == pytest.approx(additive, rel=1e-12), name
        assert point["speedup_pipeline"] == pytest.approx(pipeline, rel=1e-12), name
    for row in record["curve"][::7]:  # the closed form is the walked pipeline, everywhere
        assert row["eager_pipeline_ms"] == pytest.approx(simulate_equal(row["compute_ms"]), rel=1e-9), row


def test_speedup_svg_marks_both_models_and_the_turn(tmp_path, capsys):
    assert run_lab(capsys, "speedup", "--reference", "--out", tmp_path)[0] == 0
    root, panels, series = svg_parts(tmp_path / "speedup.svg")
    step, speed = "(a) step time (log scale)", "(b) speedup of the CUDA graph, eager ÷ graph"
    assert list(panels) == [step, speed]
    assert panels[step].get("data-y-scale") == "log"
    assert {"AWQ, additive: 1.36x", "AWQ, pipeline: 1.00x", "BF16, additive: 1.14x", "BF16, pipeline: 1.00x"} <= set(
        series[speed]
    ), set(series[speed])
    assert {
        "eager, additive: T + N·τ",
        "graph: T + τ (both models)",
        "eager, pipeline, equal kernels: max(N·τ + t, τ + N·t)",
    } <= set(series[step])
    for panel in panels.values():
        marks = [g for g in panel.iter(f"{SVG}g") if g.get("class") == "mark"]
        assert [g.get("data-name") for g in marks] == ["CPU-bound below N·τ = 2.15 ms", "AWQ 5.91 ms", "BF16 15.25 ms"]
        # Readable: close marks' labels are stacked, not drawn over each other.
        ys = [float(g.find(f"{SVG}text").get("y")) for g in marks]
        assert len(set(ys)) == 3, ys
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert {"0.1", "1", "10", "100"} <= set(texts) and "T_compute per step (ms, log scale)" in texts


def test_speedup_without_reference_needs_exercise_1(tmp_path, capsys):
    code, out, err = run_lab(capsys, "speedup", "--impl", "exercises", "--out", tmp_path)
    assert code == 1 and out == "", out
    assert "exercise 1 is not finished: simulate_eager_ms" in err and "--reference" in err, err
    assert "Traceback" not in err and not (tmp_path / "speedup.svg").exists()


def test_speedup_with_solutions_draws_simulate_eager_ms(tmp_path, capsys):
    code, out, err = run_lab(capsys, "speedup", "--impl", "solutions", "--out", tmp_path)
    assert code == 0, err
    assert "your simulate_eager_ms (exercise 1, --impl solutions)" in out.splitlines()[0]
    for line in speedup_lines():
        assert line in out, out
    assert "differs from the equal-kernel closed form" not in out
    _, _, series = svg_parts(tmp_path / "speedup.svg")
    assert "eager, pipeline: your simulate_eager_ms" in series["(a) step time (log scale)"]


def test_speedup_numbers_follow_the_model_not_a_stale_copy(tmp_path, capsys, monkeypatch):
    """With another τ every figure moves: the report computes them, it does not keep 1.36x."""
    from coursekit.lab import speedup as lab_module

    monkeypatch.setattr(lab_module, "LESSON_LAUNCH_US", 10.0)
    code, out, err = run_lab(capsys, "speedup", "--reference", "--out", tmp_path)
    assert code == 0, err
    compute = 5.5 * 1024**3 / 1e9
    additive = (compute + 4.3) / (compute + 0.01)
    pipeline = simulate_equal(compute, tau=10.0) / (compute + 0.01)
    assert f"additive {additive:.2f}x, pipeline {pipeline:.2f}x" in out, out
    assert "additive 1.36x" not in out and "N·τ = 4.30 ms" in out


def submission_with(tmp_path, old, new):
    """A submission folder whose launch_model.py is exercise 1's reference with ``old`` made
    ``new`` (a planted mistake)."""
    source = (REPO_ROOT / "solutions/launch_model.py").read_text(encoding="utf-8")
    assert source.count(old) == 1, old
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "launch_model.py").write_text(source.replace(old, new), encoding="utf-8")
    return submission


def test_speedup_points_come_from_the_students_decode_step(tmp_path, capsys):
    """Without --reference the AWQ and BF16 points are exercise 1's DecodeStep: a wrong eager_ms
    (the launches counted twice) moves the printed additive speedup, and the lab says so."""
    submission = submission_with(
        tmp_path, "return self.compute_ms + self.launch_ms", "return self.compute_ms + 2 * self.launch_ms"
    )
    code, out, err = run_lab(capsys, "speedup", "--impl", submission, "--out", tmp_path / "o")
    assert code == 0, err
    compute = 5.5 * 1024**3 / 1e9
    wrong = (compute + 2 * 430 * 5e-3) / (compute + 5e-3)
    assert f"AWQ (5.5 GiB at 1 TB/s, T = 5.91 ms): additive {wrong:.2f}x, pipeline 1.00x" in out
    assert "additive 1.36x" not in out, out
    assert "Your DecodeStep differs from the lesson's rule" in out, out
    assert "AWQ: DecodeStep(5.5).eager_ms() gave" in out and "check exercise 1" in out, out
    record = json.loads((tmp_path / "o/speedup.json").read_text(encoding="utf-8"))
    assert record["steps"] == "DecodeStep"
    assert record["points"]["AWQ"]["speedup_additive"] == pytest.approx(wrong, rel=1e-12)


def test_speedup_says_which_decode_step_method_is_unfinished(tmp_path, capsys):
    """A NotImplementedError from a DecodeStep method (not a module function) is an unfinished
    exercise 1, said as such, not a traceback."""
    submission = submission_with(
        tmp_path,
        "return self.compute_ms + self.launch_ms + self.n_kernels * self.gpu_node_us / 1e3",
        'raise NotImplementedError("exercise 1: DecodeStep.eager_ms")',
    )
    code, out, err = run_lab(capsys, "speedup", "--impl", submission, "--out", tmp_path / "o")
    assert code == 1 and out == "", out
    assert "exercise 1 is not finished: DecodeStep.eager_ms" in err, err
    assert "Traceback" not in err and not (tmp_path / "o/speedup.svg").exists()


def test_speedup_says_when_simulate_eager_ms_misses_the_closed_form(tmp_path, capsys):
    # Wrong on purpose: the additive model, not the pipeline.
    submission = submission_with(
        tmp_path, "    return end_us / 1e3\n", "    return (len(kernel_us) * launch_us + sum(kernel_us)) / 1e3\n"
    )
    code, out, err = run_lab(capsys, "speedup", "--impl", submission, "--out", tmp_path / "o")
    assert code == 0, err
    assert "Your simulate_eager_ms differs from the equal-kernel closed form at" in out, out
    assert "check exercise 1" in out


def timeline_boxes(path):
    """{scenario: {lane: [(kind, start, end)]}} of a timeline SVG."""
    root = ET.parse(path).getroot()
    return {
        s.get("data-name"): {
            lane.get("data-name"): [
                (r.get("data-kind"), float(r.get("data-start")), float(r.get("data-end")))
                for r in lane.iter(f"{SVG}rect")
                if r.get("class") == "box"
            ]
            for lane in s.iter(f"{SVG}g")
            if lane.get("class") == "lane"
        }
        for s in root.iter(f"{SVG}g")
        if s.get("class") == "scenario"
    }


def scenario_texts(path, name):
    """The <text> elements of one scenario of a timeline SVG."""
    (scenario,) = [
        s
        for s in ET.parse(path).getroot().iter(f"{SVG}g")
        if s.get("class") == "scenario" and s.get("data-name") == name
    ]
    return list(scenario.iter(f"{SVG}text"))


def test_timeline_draws_exercise_9_against_a_graph_replay(tmp_path, capsys):
    from solutions.launch_model import simulate_eager_ms

    from coursekit.lab import timeline as lab_module

    code, out, err = run_lab(capsys, "timeline", "--impl", "solutions", "--out", tmp_path)
    assert code == 0 and err == "", err
    nu = lesson.H200_TAU_GRAPH_US
    boxes = timeline_boxes(tmp_path / "timeline.svg")
    inputs = lab_module.timeline_inputs()
    assert list(boxes) == [name for name, _ in inputs]
    for name, kernels in inputs:
        # every kernel costs the GPU its bytes' time plus nu, eager and in the graph alike
        times = [t + nu for _, t in kernels]
        lanes = boxes[name]
        assert list(lanes) == ["eager: CPU launches", "eager: GPU kernels", "graph: launch + replay"]
        assert [(s, e) for _, s, e in lanes["eager: CPU launches"]] == [
            (pytest.approx(5.0 * k), pytest.approx(5.0 * (k + 1))) for k in range(len(times))
        ]
        gpu = [b for b in lanes["eager: GPU kernels"] if b[0] in ("kernel", "node")]
        assert [k for k, _, _ in gpu] == ["kernel", "node"] * len(times)
        eager_end = simulate_eager_ms(times, 5.0) * 1e3
        assert max(e for _, _, e in gpu) == pytest.approx(eager_end, abs=1e-3)
        # The GPU idles for whatever of the eager step is not its kernels; the lesson's additive
        # model charges every launch on top of them.
        idle, additive = eager_end - sum(times), len(times) * 5.0 + sum(times)
        idle_boxes = [e - s for kind, s, e in lanes["eager: GPU kernels"] if kind == "idle"]
        assert idle > 0 and sum(idle_boxes) == pytest.approx(idle, abs=1e-3), (name, idle_boxes)
        assert len(idle_boxes) + len(gpu) == len(lanes["eager: GPU kernels"])
        replay = lanes["graph: launch + replay"]
        assert replay[0] == ("launch", 0.0, 5.0)
        assert [k for k, _, _ in replay[1:]] == ["kernel", "node"] * len(times)
        graph_end = 5.0 + sum(times)
        assert replay[-1][2] == pytest.approx(graph_end, abs=1e-3)
        assert eager_end >= graph_end - 1e-9, "a graph never adds GPU work"
        assert re.search(
            rf"^{re.escape(name)}\s+\|\s+{len(times)} \|\s+{sum(times):.1f} µs \|"
            rf"\s+{eager_end:.1f} µs \|\s+{idle:.1f} µs \|\s+{additive:.1f} µs \|"
            rf"\s+{graph_end:.1f} µs \|\s+{eager_end / graph_end:.2f}x$",
            out,
            re.MULTILINE,
        ), (name, out)
        notes = [t.text for t in scenario_texts(tmp_path / "timeline.svg", name)]
        assert f"eager ends at {eager_end:.1f} µs (GPU idle {idle:.1f} µs)" in notes, notes
        assert f"additive model: {additive:.1f} µs" in notes, notes
    assert f"CPU-bound for τ above τ* = {20 + nu:.2f} µs" in out  # exercise 9's cpu_bound_launch_us
    assert "1.00x" in out  # long kernels: eager and graph end together
    record = json.loads((tmp_path / "timeline.json").read_text(encoding="utf-8"))
    assert record["launch_us"] == 5.0 and record["gpu_node_us"] == nu


def test_timeline_7b_layer_is_its_bytes_over_the_bandwidth():
    """The 7B layer's kernels are Qwen2.5-7B's bytes at batch 1 over the bundled copy bandwidth:
    about 466 MB of weights in four projections, about 109 µs at 4.27 TB/s."""
    from coursekit.lab import timeline as lab_module

    layer = lab_module.layer_7b()
    assert len(layer) == 15  # the lesson's kernels_per_layer
    hidden, qkv, mlp = 3584, 3584 + 2 * 4 * 128, 18944  # Qwen2.5-7B's config.json
    weights = 2 * (hidden * qkv + hidden * hidden + hidden * 2 * mlp + mlp * hidden)
    sizes = dict(lab_module.LAYER_7B_BYTES)
    assert sum(sizes[k] for k in ("qkv", "o_proj", "gate_up", "down")) == pytest.approx(weights, rel=1e-3)
    bandwidth = lesson.h200_anchor()["copy_TBps"] * 1e12
    assert sum(t for _, t in layer) == pytest.approx(sum(b for _, b in lab_module.LAYER_7B_BYTES) / bandwidth * 1e6)
    assert 105 < sum(t for _, t in layer) < 115
    assert sum(t < 1.0 for _, t in layer) == 11  # everything but the four projections is tiny


def test_timeline_needs_exercise_9(tmp_path, capsys):
    code, out, err = run_lab(capsys, "timeline", "--impl", "exercises", "--out", tmp_path)
    assert code == 1 and out == "", out
    assert "exercise 9 is not finished: eager_timeline" in err and "--impl solutions" in err, err
    assert "Traceback" not in err and not (tmp_path / "timeline.svg").exists()


def test_timeline_refuses_a_malformed_eager_timeline(tmp_path, capsys):
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "tradeoffs.py").write_text("def eager_timeline(kernel_us, launch_us):\n    return [(0.0, 1.0)]\n")
    code, out, err = run_lab(capsys, "timeline", "--impl", submission, "--out", tmp_path / "o")
    assert code == 1 and "eager_timeline" in err and "(launched, start, end) per kernel" in err
    assert "Traceback" not in err


def fusion_bytes(rows, hidden=3584):
    """(unfused, fused) HBM bytes of add + RMS norm on rows x hidden bf16: unfused, 7 passes of
    a read and a write each (14 tensor transfers); fused, x and residual read, out and
    new_residual written (4 tensor transfers): 3.5x fewer bytes."""
    tensor = rows * hidden * 2
    return 14 * tensor, 4 * tensor


def test_fusion_reference_is_modelled_and_says_so(tmp_path, capsys):
    code, out, err = run_lab(capsys, "fusion", "--reference", "--impl", "exercises", "--out", tmp_path)
    assert code == 0 and err == "", err
    assert "modelled, not measured" in out.splitlines()[0]
    assert "no bundled fused measurement exists" in out
    record = json.loads((tmp_path / "fusion.json").read_text(encoding="utf-8"))
    bandwidth = lesson.h200_anchor()["copy_TBps"] * 1e12
    assert record["measured"] is None and record["rows"][0] == 1 and record["rows"][-1] == 65536
    for k, rows in enumerate(record["rows"]):
        unfused, fused = fusion_bytes(rows)
        assert (record["unfused_bytes"][k], record["fused_bytes"][k]) == (unfused, fused)
        assert record["unfused_model_us"][k] == pytest.approx(unfused / bandwidth * 1e6)
        assert f"{rows:7} | {unfused:13,} | {fused:12,} |" in out, out
    assert "fusion pays by moving 3.5 times fewer bytes" in out, out
    root, panels, series = svg_parts(tmp_path / "fusion.svg")
    title = [t.text for t in root.iter(f"{SVG}text")][0]
    assert "modelled, not measured" in title, title
    assert all(p.get("data-y-scale") == "log" for p in panels.values())
    assert not any("measured" == n.split(", ")[-1] for s in series.values() for n in s)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the model-only path without CUDA")
def test_fusion_without_cuda_draws_exercise_7s_model(tmp_path, capsys):
    code, out, err = run_lab(capsys, "fusion", "--impl", "exercises", "--out", tmp_path / "a")
    assert code == 1 and "exercise 7 is not finished: chain_hbm_bytes" in err, err
    assert "Traceback" not in err
    code, out, err = run_lab(capsys, "fusion", "--impl", "solutions", "--out", tmp_path / "b")
    assert code == 0, err
    assert "your chain_hbm_bytes" in out.splitlines()[0] and "modelled, not measured" in out
    assert run_lab(capsys, "fusion", "--reference", "--out", tmp_path / "c")[0] == 0
    got = json.loads((tmp_path / "b/fusion.json").read_text(encoding="utf-8"))
    want = json.loads((tmp_path / "c/fusion.json").read_text(encoding="utf-8"))
    assert got["unfused_bytes"] == want["unfused_bytes"] and got["model"] == "chain_hbm_bytes"


def test_fusion_chart_draws_measured_points_when_there_are_some(tmp_path):
    """The GPU path's chart, from a made-up measurement (no GPU here: nothing is timed)."""
    from coursekit.lab import fusion as lab_module

    record = lab_module.fusion_record(lab_module._chain_bytes_rule, [1, 64, 4096], 3584, "x")
    record["measured"] = {
        "gpu": "Fake GPU",
        "torch": "0",
        "iters": 5,
        "unfused_us": [70.0, 72.0, 150.0],
        "fused_us": [9.0, 9.5, 30.0],
    }
    _, svg = lab_module.write_fusion(record, tmp_path)
    root, panels, series = svg_parts(svg)
    assert "measured on Fake GPU" in [t.text for t in root.iter(f"{SVG}text")][0]
    (time_panel,) = [name for name in panels if name.startswith("(a)")]
    assert {"unfused, measured", "fused (yours), measured"} <= set(series[time_panel])
    assert "5.00x" in lab_module.fusion_report(record)


def test_fusion_checks_the_fused_result_before_drawing_its_time(tmp_path):
    """measure_fusion's check (exercise 7's bf16 rule), on the CPU, and a wrong fused kernel's
    record: the unfused times only, and the report says why (nothing is timed here)."""
    from coursekit.lab import fusion as lab_module
    from coursekit.fusion import add_rms_norm_reference
    from solutions.fusion import fused_add_rms_norm

    g = torch.Generator().manual_seed(0)
    x, res = (torch.randn(4, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    w = (torch.rand(64, generator=g) + 0.5).to(torch.bfloat16)
    want = add_rms_norm_reference(x, res, w)
    assert lab_module.fused_mismatch(fused_add_rms_norm(x, res, w), want) == ""
    out, new_res = want
    assert "out: |got - expected| > 0.01" in lab_module.fused_mismatch((out * 1.1, new_res), want)
    assert "new_residual" in lab_module.fused_mismatch((out, new_res.float()), want)
    assert "tuple (out, new_residual)" in lab_module.fused_mismatch(out, want)

    record = lab_module.fusion_record(lab_module._chain_bytes_rule, [1, 64, 4096], 3584, "x")
    record["measured"] = {
        "gpu": "Fake GPU",
        "torch": "0",
        "iters": 5,
        "unfused_us": [70.0, 72.0, 150.0],
        "fused_us": None,
        "fused_mismatch": "at 1 x 3584: out: wrong",
    }
    text = lab_module.fusion_report(record)
    assert "does not match add_rms_norm_reference" in text and "at 1 x 3584: out: wrong" in text
    assert "| fused meas" not in text and "meas ratio" not in text, text
    assert re.search(r"^\s+1 \|.*\| +0\.01 µs \| +70\.0 µs$", text, re.MULTILINE), text
    _, svg = lab_module.write_fusion(record, tmp_path)
    _, panels, series = svg_parts(svg)
    (time_panel,) = [name for name in panels if name.startswith("(a)")]
    assert "unfused, measured" in series[time_panel]
    assert "fused (yours), measured" not in series[time_panel]


@pytest.mark.parametrize(
    "lab_name, args, named",
    [
        ("timeline", ["--launch-us", "0"], "--launch-us"),
        ("fusion", ["--reference", "--rows", "8", "8"], "--rows"),
        ("fusion", ["--reference", "--rows", "0", "8"], "--rows"),
        ("speedup", ["--impl", "no/such/dir"], "--impl"),
    ],
)
def test_model_labs_bad_arguments_exit_2(tmp_path, capsys, lab_name, args, named):
    code, _, err = run_lab(capsys, lab_name, *args, "--out", tmp_path)
    assert code == 2 and named in err, err


def test_svgplot_log_x_axis_and_stacked_mark_labels(tmp_path):
    panels = [
        {
            "name": "p",
            "y_label": "y",
            "series": [{"name": "a", "colour": "red", "style": "line", "points": [(0.2, 1.0), (40.0, 2.0)]}],
            "marks": [{"x": 2.0, "label": "a long label at two"}, {"x": 2.5, "label": "close by"}],
        }
    ]
    root = ET.parse(figure(tmp_path / "f.svg", panels, "t", "x", x_scale="log")).getroot()
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert {"0.1", "1", "10", "100"} <= set(texts), texts
    marks = [g for g in root.iter(f"{SVG}g") if g.get("class") == "mark"]
    assert len({g.find(f"{SVG}text").get("y") for g in marks}) == 2
    with pytest.raises(ValueError, match="x_scale: a log x axis needs every x > 0"):
        figure(tmp_path / "g.svg", [{**panels[0], "marks": [{"x": 0, "label": "0"}]}], "t", "x", x_scale="log")
    with pytest.raises(ValueError, match="x_scale: expected one of"):
        figure(tmp_path / "h.svg", panels, "t", "x", x_scale="symlog")
    with pytest.raises(
        ValueError,
        match=r"panels\[0\]\.mark_labels: expected 'bottom' or 'top', "
        r"got 'middle'",
    ):
        figure(tmp_path / "i.svg", [{**panels[0], "mark_labels": "middle"}], "t", "x")


def test_svgplot_timeline_lanes_and_rules(tmp_path):
    from coursekit.svgplot import timeline

    scenarios = [
        {
            "name": "s",
            "lanes": [
                {"name": "cpu", "boxes": [{"start": 0, "end": 5, "colour": "orange", "kind": "launch"}]},
                {"name": "gpu", "boxes": [{"start": 5, "end": 25, "colour": "blue", "label": "gemm"}]},
            ],
            "notes": ["a note"],
        }
    ]
    boxes = timeline_boxes(timeline(tmp_path / "t.svg", scenarios, "t", legend=[("red", "x")]))
    assert boxes == {"s": {"cpu": [("launch", 0.0, 5.0)], "gpu": [(None, 5.0, 25.0)]}}
    bad = [{"name": "s", "lanes": [{"name": "l", "boxes": [{"start": 3, "end": 1}]}]}]
    with pytest.raises(ValueError, match=r"scenarios\[0\]\.lanes\[0\]\.boxes\[0\]"):
        timeline(tmp_path / "u.svg", bad, "t")


# --- the prefill lab: decode vs prefill, the graph's gain against the size of each kernel -------


def test_prefill_models_decode_paying_the_tax_and_prefill_hiding_it(tmp_path, capsys):
    """Through exercise 1's models: at N = 200 the graph wins about N·τ ÷ N·ν on decode-sized
    kernels and nothing once each kernel (its bytes plus ν) outlasts a launch: exercise 9's τ*."""
    code, out, err = run_lab(capsys, "prefill", "--impl", "solutions", "--model-only", "--out", tmp_path)
    assert code == 0 and err == "", err
    assert "modelled, not measured: --model-only" in out.splitlines()[0], out
    record = json.loads((tmp_path / "prefill.json").read_text(encoding="utf-8"))
    tau, nu, n = lesson.H200_TAU_EAGER_US, lesson.H200_TAU_GRAPH_US, record["n_ops"]
    assert record["measured"] is None and n == 200
    bandwidth = lesson.h200_anchor()["copy_TBps"] * 1e12
    for r in record["rows"]:
        kernel = 8 * r["numel"] / bandwidth * 1e6  # x + 1 on float32: 4 bytes read, 4 written
        assert r["kernel_us"] == pytest.approx(kernel)
        assert r["graph_us"] == pytest.approx(tau + n * (kernel + nu))
        assert r["eager_additive_us"] == pytest.approx(n * (tau + kernel + nu))
        assert r["eager_pipeline_us"] == pytest.approx(max(n * tau + kernel + nu, tau + n * (kernel + nu)))
        assert r["tau_star_us"] == pytest.approx(kernel + nu)  # exercise 9: equal kernels
        assert r["graph_us"] <= r["eager_pipeline_us"] + 1e-9 <= r["eager_additive_us"] + 2e-9
    first, last = record["rows"][0], record["rows"][-1]
    assert first["eager_pipeline_us"] / first["graph_us"] > 5  # decode-sized: launch-bound
    assert last["eager_pipeline_us"] / last["graph_us"] == pytest.approx(1.0)  # prefill-sized
    turn = record["turn_numel"]
    assert 8 * turn / bandwidth * 1e6 + nu == pytest.approx(tau)  # the size where kernel + ν = τ
    for r in record["rows"]:  # left of the turn CPU-bound (τ above τ*), right of it not
        assert (r["numel"] < turn) == (tau > r["tau_star_us"])
    assert "1.00x" in out
    assert "<svg" in (tmp_path / "prefill.svg").read_text(encoding="utf-8")


def test_prefill_needs_exercises_1_and_9(tmp_path, capsys):
    code, out, err = run_lab(capsys, "prefill", "--impl", "exercises", "--model-only", "--out", tmp_path)
    assert code == 1 and "exercise 1 is not finished: DecodeStep" in err, err
    assert "Traceback" not in err and not (tmp_path / "prefill.svg").exists()


def test_prefill_measures_every_size_with_exercise_2_where_there_is_cuda(tmp_path, capsys, monkeypatch):
    pretend_cuda(monkeypatch)
    submission = measuring_submission(tmp_path, launch_model="solutions", tradeoffs="solutions")
    code, out, err = run_lab(capsys, "prefill", "--impl", submission, "--iters", 2, "--out", tmp_path / "out")
    assert code == 0, err
    assert out.startswith("prefill lab: measured on Fake GPU with your measure_launch_tax"), out
    record = json.loads((tmp_path / "out/prefill.json").read_text(encoding="utf-8"))
    assert [m["numel"] for m in record["measured"]] == [r["numel"] for r in record["rows"]]
    assert {(m["eager_us"], m["graph_us"]) for m in record["measured"]} == {(1625.0, 201.0)}
    assert "measured eager" in out and "8.08x" in out, out
    assert "Measured points" in (tmp_path / "out/prefill.svg").read_text(encoding="utf-8")


def test_prefill_says_when_a_measured_replay_did_not_match_eager():
    from solutions.launch_model import DecodeStep, simulate_eager_ms
    from solutions.tradeoffs import cpu_bound_launch_us

    from coursekit.lab import prefill as lab_module

    record = lab_module.prefill_record(
        DecodeStep, simulate_eager_ms, cpu_bound_launch_us, 8.0, 1.1, 4e12, numels=(1024, 4096)
    )
    record["measured"] = [
        {"numel": 1024, "eager_us": 1600.0, "graph_us": 230.0, "gpu": "Fake GPU", "replay_matches_eager": True},
        {"numel": 4096, "eager_us": 1600.0, "graph_us": 230.0, "gpu": "Fake GPU", "replay_matches_eager": False},
    ]
    text = lab_module.prefill_report(record)
    assert "Measured at 4,096 values: the replay did not match eager" in text, text
    assert "1,024 values: the replay" not in text
