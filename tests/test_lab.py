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
    assert set(record) == {"gpu", "torch", "partA", "sweep_ms", "tau_eager_us", "t0_eager_us",
                           "tau_graph_us", "t0_graph_us"}
    assert record["partA"] == pytest.approx({"eager_us": 1851.64794921875,
                                             "graph_us": 185.4217529296875,
                                             "ratio": 9.986141970736847, "replay_correct": True})
    assert record["sweep_ms"] == {str(n): list(t) for n, t in lesson.H200_SWEEP.items()}
    assert record["tau_eager_us"] == pytest.approx(lesson.H200_TAU_EAGER_US, rel=1e-9)
    assert record["tau_graph_us"] == pytest.approx(lesson.H200_TAU_GRAPH_US, rel=1e-9)


def svg_parts(path):
    """(root, panels by data-name, {panel name: {series name: <g>}}) of a lab chart."""
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    panels = {g.get("data-name"): g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"}
    series = {name: {g.get("data-name"): g for g in panel.iter(f"{SVG}g")
                     if g.get("class") == "series"} for name, panel in panels.items()}
    return root, panels, series


STEP, SPEEDUP = "(a) step time per iteration (log scale)", "(b) speedup of the CUDA graph"
LESSON_SERIES = {"lesson's model, eager: N × 5 µs", "lesson's model, graph: one launch, 5 µs"}
MARKED_SERIES = {"Part A eager, N = 200 (separate run)", "Part A graph, N = 200 (separate run)",
                 "7B decode step, eager (H200, batch 1)", "7B decode step, graph (H200, batch 1)"}


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
    assert speedup_7b.endswith(f"{seven_b['eager_ms'] / seven_b['graph_ms']:.1f}x") and \
        speedup_7b.endswith("4.5x")
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
    assert set(series[STEP]) == {"eager, measured", "eager fit: 25.0 + 7.99·N µs",
                                 "graph, measured", "graph fit: 1.3 + 1.10·N µs"} \
        | LESSON_SERIES | MARKED_SERIES
    for name, g in series[STEP].items():
        if "measured" in name:  # one point per N
            assert len(g.findall(f"{SVG}circle")) == len(lesson.H200_SWEEP), name
        elif "fit:" in name:  # the fitted line: solid over the sweep, dashed on to N = 1579
            solid, dashed = g.findall(f"{SVG}polyline")
            assert solid.get("stroke-dasharray") is None and dashed.get("stroke-dasharray"), name
    assert set(series[SPEEDUP]) == {"eager ÷ graph, measured", "eager fit ÷ graph fit",
                                    "Part A, N = 200 (separate run): 10.0x",
                                    "7B decode step (H200, batch 1): 4.5x"}
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
    code, reference, err = lab(capsys, "--reference", "--impl", "solutions",
                               "--out", tmp_path / "a")
    assert code == 0, err
    code, anchor, err = lab(capsys, "--from", ANCHOR, "--impl", "solutions",
                            "--out", tmp_path / "b")
    assert code == 0, err
    assert report_part(anchor) == report_part(reference)


def test_reference_says_it_shows_the_bundled_measurement(tmp_path, capsys):
    code, out, err = lab(capsys, "--reference", "--impl", "solutions", "--out", tmp_path)
    assert code == 0, err
    assert "this run" not in out, out
    first = out.splitlines()[0]
    for named in ("bundled", "NVIDIA H200", "2.11.0+cu130", "2026-11-30",
                  "coursekit/data/h200-anchor-2026-11-30.json", "not measured here"):
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
    assert (lesson.H200_TAU_EAGER_US, lesson.H200_TAU_GRAPH_US) == (anchor["tau_eager_us"],
                                                                    anchor["tau_graph_us"])
    assert lesson.H200_DATE == "2026-11-30" and anchor["gpu"] == "NVIDIA H200"


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason="checks the message on a machine without CUDA")
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


def pretend_cuda(monkeypatch):
    """The measuring path on the CPU: CUDA 'is available' and the lab's torch calls are faked."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *args: "Fake GPU")


def test_measuring_fits_exercise_2_results_with_exercise_1(tmp_path, capsys, monkeypatch):
    pretend_cuda(monkeypatch)
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "launch_tax.py").write_text(FAKE_LAUNCH_TAX)
    reference_model = (REPO_ROOT / "solutions/launch_model.py").read_text()
    (submission / "launch_model.py").write_text(reference_model)
    code, out, err = lab(capsys, "--impl", submission, "--sizes", 40, 10, 20, "--iters", 3,
                         "--out", tmp_path / "out")
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
def test_unfinished_exercise_1_shows_the_points_and_the_lesson_without_fits(tmp_path, capsys,
                                                                              source):
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
    assert re.search(r"^\s+200 \|\s+1585\.4 \|\s+1000\.0 \|\s+220\.5 \|\s+5\.0 \|\s+7\.2x \|"
                     r"\s+200\.0x$", out, re.MULTILINE), out
    record = json.loads((tmp_path / "launch-tax.json").read_text(encoding="utf-8"))
    assert set(record) == {"gpu", "torch", "partA", "sweep_ms"}
    root, panels, series = svg_parts(tmp_path / "launch-tax.svg")
    check_panels_and_marks(panels, series)
    assert set(series[STEP]) == {"eager, measured", "graph, measured"} | LESSON_SERIES \
        | MARKED_SERIES
    assert set(series[SPEEDUP]) == {"eager ÷ graph, measured",
                                    "Part A, N = 200 (separate run): 10.0x",
                                    "7B decode step (H200, batch 1): 4.5x"}
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "Not fitted yet" in texts and "fit_launch_model is done" in texts, texts


def test_an_unfitted_file_is_fitted_once_exercise_1_is_done(tmp_path, capsys):
    assert lab(capsys, "--reference", "--out", tmp_path / "stubs")[0] == 0
    code, again, err = lab(capsys, "--from", tmp_path / "stubs/launch-tax.json", "--impl",
                           "solutions", "--out", tmp_path / "b")
    assert code == 0, err
    code, reference, err = lab(capsys, "--from", ANCHOR, "--impl", "solutions",
                               "--out", tmp_path / "c")
    assert code == 0, err
    assert report_part(again) == report_part(reference)
    assert "DecodeStep(gpu_node_us=1.10)" in again and UNFITTED not in again


def test_measuring_with_exercise_1_unfinished_reports_without_fits(tmp_path, capsys,
                                                                   monkeypatch):
    pretend_cuda(monkeypatch)
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "launch_tax.py").write_text(FAKE_LAUNCH_TAX)
    stub = (REPO_ROOT / "exercises/launch_model.py").read_text()
    (submission / "launch_model.py").write_text(stub)
    code, out, err = lab(capsys, "--impl", submission, "--sizes", 40, 10, 20, "--iters", 3,
                         "--out", tmp_path / "out")
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
    assert "Why Part A says 10.0x and the sweep's N = 200 says 7.2x: they are two separate " \
        "measurements of the" in out, out
    assert "same chain of 200 tiny kernels, made one after the other in one run" in out
    assert re.search(r"Part A\s+eager\s+1852 µs, graph\s+185 µs -> 10\.0x", out), out
    assert re.search(r"sweep, N = 200\s+eager\s+1585 µs, graph\s+221 µs ->\s+7\.2x", out), out
    assert "Eager differs by 14 %, graph by 19 %, and their ratio by 28 %: a ratio of two noisy " \
        "times moves" in out, out
    assert "Repeat each measurement and take the median before you quote a speedup." in out
    # The 7B step against what the tiny-kernel lines say at its N.
    assert "7B decode step (batch 1, 1579 kernels) took eager 29.7 ms" in out, out
    assert ("extrapolated to N = 1579: eager 12.64 ms" if impl == "solutions"
            else "The lesson's model at N = 1579: eager 7.89 ms") in out, out


def test_the_lessons_model_constants_are_the_lessons():
    """The lab draws the lesson's model with DecodeStep's defaults (coursekit may not import the
    exercises): τ = 5 µs and 28 x 15 + 10 = 430 kernels, as in the lesson's expected output."""
    from coursekit import lab as lab_module

    assert lab_module.LESSON_STEP_KERNELS == 430 and lab_module.LESSON_LAUNCH_US == 5.0
    for line in lesson.SEED_REPORT.splitlines()[::2]:
        kernels, launch_ms = re.search(r"(\d+) 个 kernel .* 启动 ([\d.]+) ms", line).groups()
        assert int(kernels) == lab_module.LESSON_STEP_KERNELS
        assert float(launch_ms) == pytest.approx(int(kernels) * lab_module.LESSON_LAUNCH_US / 1e3)


def test_missing_module_is_reported(tmp_path, capsys):
    (tmp_path / "submission").mkdir()
    code, _, err = lab(capsys, "--reference", "--impl", tmp_path / "submission", "--out", tmp_path)
    assert code == 1 and "module 'launch_model' not in submission" in err, err


@pytest.mark.parametrize("args, named", [
    (["--reference", "--iters", "0"], "--iters"),
    (["--reference", "--sizes", "100", "100"], "--sizes"),
    (["--reference", "--impl", "no/such/dir"], "--impl"),
    (["--from", "no/such/file.json"], "--from"),
    (["--reference", "--from", "x.json"], "--from"),
])
def test_bad_arguments_exit_2_naming_the_argument(tmp_path, capsys, args, named):
    code, _, err = lab(capsys, *args, "--out", tmp_path)
    assert code == 2 and named in err, err


def test_from_rejects_a_file_of_another_shape(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"partA": {"eager_us": 1.0, "graph_us": 1.0}, "sweep_ms": {"25": [1.0, 1.0]}}')
    code, _, err = lab(capsys, "--from", bad, "--impl", "solutions", "--out", tmp_path)
    assert code == 2 and "--from" in err and "at least two chain lengths" in err, err


def test_svgplot_ticks_and_rules(tmp_path):
    path = line_chart(tmp_path / "c.svg", [
        {"name": "a & b", "colour": "red", "style": "line", "points": [(0, -0.3), (2.5, 0.7)]},
    ], title="<t>", x_label="x", y_label="y")
    root = ET.parse(path).getroot()  # '&' and '<' are escaped
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "-0.4" in labels and "0.8" in labels and "a & b" in labels and "<t>" in labels, labels
    with pytest.raises(ValueError, match=r"series\[0\]\.style"):
        line_chart(tmp_path / "d.svg", [{"name": "a", "colour": "red", "style": "bars",
                                         "points": [(0, 1)]}], "t", "x", "y")


def test_svgplot_figure_panels_log_axis_marks_and_legend(tmp_path):
    panels = [
        {"name": "times", "y_label": "µs", "y_scale": "log",
         "marks": [{"x": 30, "label": "N = 30"}],
         "series": [{"name": "a", "colour": "red", "style": "points", "marker": "diamond",
                     "points": [(10, 3.0), (40, 2500.0)]},
                    {"name": "b", "colour": "blue", "style": "line", "dashed_after": 20,
                     "points": [(10, 5.0), (20, 6.0), (40, 8.0)]}],
         "notes": ["a note"]},
        {"name": "ratio", "y_label": "x", "series": [
            {"name": "c", "colour": "green", "style": "points", "points": [(10, 10.0)]}]},
    ]
    root = ET.parse(figure(tmp_path / "f.svg", panels, "t", "N", caption=["cap"])).getroot()
    groups = [g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"]
    assert [(g.get("data-name"), g.get("data-y-scale")) for g in groups] == [
        ("times", "log"), ("ratio", "linear")]
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
    assert len(legends) == 2 and all(float(t.get("x")) > right for g in legends
                                     for t in g.iter(f"{SVG}text"))
    bad = [{**panels[0], "series": [{**panels[0]["series"][0], "points": [(1, 0.0)]}]}]
    with pytest.raises(ValueError, match=r"panels\[0\]\.series\[0\]\.points: a log axis"):
        figure(tmp_path / "g.svg", bad, "t", "N")
    with pytest.raises(ValueError, match=r"panels\[0\]\.y_scale"):
        figure(tmp_path / "h.svg", [{**panels[0], "y_scale": "symlog"}], "t", "N")


def test_module_entry_point(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "coursekit.lab", "launch-tax", "--reference", "--impl", "solutions",
         "--out", str(tmp_path)],
        cwd=REPO_ROOT, capture_output=True, text=True, encoding="utf-8", timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "7.99 µs" in run.stdout and (tmp_path / "launch-tax.svg").is_file()
