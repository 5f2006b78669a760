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
from coursekit.svgplot import line_chart

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


def test_reference_svg_is_a_chart_of_both_series(tmp_path, capsys):
    assert lab(capsys, "--reference", "--impl", "solutions", "--out", tmp_path)[0] == 0
    root = ET.parse(tmp_path / "launch-tax.svg").getroot()
    assert root.tag == f"{SVG}svg"
    series = {g.get("data-name"): g for g in root.iter(f"{SVG}g") if g.get("class") == "series"}
    assert set(series) == {"eager, measured", "eager fit: 25.0 + 7.99·N µs",
                           "graph, measured", "graph fit: 1.3 + 1.10·N µs"}
    for name, g in series.items():
        if "measured" in name:  # one point per N
            assert len(g.findall(f"{SVG}circle")) == len(lesson.H200_SWEEP), name
        else:  # the fitted line
            assert len(g.findall(f"{SVG}polyline")) == 1, name
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "step time (µs)" in texts and "number of kernels N" in texts


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


def test_unfinished_exercise_1_is_named_without_a_traceback(tmp_path, capsys):
    code, out, err = lab(capsys, "--reference", "--impl", "exercises", "--out", tmp_path)
    assert code == 1, out + err
    assert "exercise 1 is not finished: fit_launch_model" in err, err
    assert "--impl solutions" in err, err
    assert "Traceback" not in err and out == ""


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


def test_module_entry_point(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "coursekit.lab", "launch-tax", "--reference", "--impl", "solutions",
         "--out", str(tmp_path)],
        cwd=REPO_ROOT, capture_output=True, text=True, encoding="utf-8", timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "7.99 µs" in run.stdout and (tmp_path / "launch-tax.svg").is_file()
