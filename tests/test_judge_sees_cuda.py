"""A CPU check means the same on every machine, and no grading step can hang a class.

On its first GPU (an H200, 2026-12-04) the grader broke on what no CPU test had modelled: the
judge computed the reference's answers in its own process, where CUDA was in sight, so exercise
2's reference timer took its CUDA path while the CPU worker read the probe's fake clock, and
every correct submission lost ``ex2.time_ms_exact_mean`` (expected 0.0033 ms, got 1.583, in
practice and official grading, ``grade`` and ``grade-all``); and ``grade-all``'s GPU pass printed
only "External init callback must run in same thread as registerClient" (CUPTI: reference work
moved between the class's threads) and wrote no gradebook.

Here a GPU is put in sight of the judge (``tests/fake_cuda``: a ``torch.cuda`` that answers as the
driver does, honouring ``CUDA_VISIBLE_DEVICES``, whose device belongs to the first thread that
uses it), and the reference must keep every CPU point, in ``grade`` and in ``grade-all``, with
several students graded side by side. Without a GPU in sight, the reference's work must still
stay on one thread (a stand-in for every probe that raises on a second thread). A judge that
hangs on one student costs that student a "not graded: timed out" row, never the class.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from coursekit.impl import REPO_ROOT
from tests.harness import submission

FAKE_CUDA = REPO_ROOT / "tests" / "fake_cuda"
EX2_CPU_POINTS = 6  # exercise 2's CPU checks (time_ms and the sweep), the GPU's pending


def cuda_in_sight(log: Path) -> dict[str, str]:
    """This environment, with a GPU in sight of every Python started in it (not of the sandboxed
    workers, which start ``python -I`` in an environment of their own)."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return {**env, "PYTHONPATH": os.pathsep.join([str(FAKE_CUDA), str(REPO_ROOT)]),
            "LAUNCH_TAX_FAKE_CUDA": "1", "LAUNCH_TAX_FAKE_CUDA_LOG": str(log)}


def seen(log: Path) -> dict[str, bool]:
    """``{pid: saw a GPU}`` of every process that asked."""
    return {pid: answer == "True" for pid, answer in (line.split() for line in log.read_text().splitlines())
            if answer != "exit"}


def ended(log: Path) -> list[str]:
    """The pids of the processes that ended, in the order they ended."""
    return [pid for pid, what in (line.split() for line in log.read_text().splitlines()) if what == "exit"]


def test_the_fake_gpu_is_seen_and_hidden_as_the_driver_would(tmp_path):
    log = tmp_path / "seen.log"
    code = ("import torch; e = [torch.cuda.Event(enable_timing=True) for _ in range(2)]; e[0].record(); "
            "e[1].record(); print(torch.cuda.is_available(), torch.cuda.device_count(), e[0].elapsed_time(e[1]) >= 0)")
    shown = subprocess.run([sys.executable, "-c", code], env=cuda_in_sight(log), capture_output=True, text=True)
    hidden = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                            env={**cuda_in_sight(log), "CUDA_VISIBLE_DEVICES": ""}, capture_output=True, text=True)
    assert shown.stdout.split() == ["True", "1", "True"], shown.stderr
    assert hidden.stdout.strip() == "False", hidden.stderr
    threaded = ("import threading, torch; torch.cuda.synchronize(); out = []\n"
                "def run():\n    try:\n        torch.cuda.synchronize()\n    except RuntimeError as e:\n        out.append(str(e))\n"
                "t = threading.Thread(target=run); t.start(); t.join(); print(out[0])")
    other = subprocess.run([sys.executable, "-c", threaded], env=cuda_in_sight(log), capture_output=True, text=True)
    assert "same thread as registerClient" in other.stdout, other.stdout + other.stderr


@pytest.mark.parametrize("mode", ["practice", "official"])
def test_a_cpu_check_means_the_same_where_the_judge_sees_a_gpu(tmp_path, secret_file, mode):
    """``python -m grader grade solutions --gpu off`` on a machine whose judge sees a GPU: the
    reference keeps every CPU point of exercise 2 (its timer's fake-clock check included), and
    the reference's answers came from a process that saw no GPU."""
    log, out = tmp_path / "seen.log", tmp_path / "results.json"
    command = [sys.executable, "-m", "grader", "grade", "solutions", "--gpu", "off", "--only", "ex2",
               "--json", str(out)]
    if mode == "official":
        command += ["--secret-file", str(secret_file)]
    done = subprocess.run(command, cwd=REPO_ROOT, env=cuda_in_sight(log), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lost = [t["name"] for t in json.loads(out.read_text())["tests"]
            if t.get("max_score") and t.get("score", 0) < t["max_score"] and "gpu" not in t.get("tags", [])]
    assert not lost, (f"with a GPU in sight of the judge the reference lost CPU checks {lost} in {mode} "
                      f"grading:\n{done.stdout[-3000:]}\n  rule: a CPU check's reference answer is "
                      "computed as the CPU worker computes it, CUDA hidden")
    answers = seen(log)
    assert True in answers.values() and False in answers.values(), (
        f"the judge must see the fake GPU and its CPU reference must not: {answers}")
    judge = next(pid for pid, gpu in answers.items() if gpu)
    order = ended(log)
    assert judge in order and all(pid in order[:order.index(judge)] for pid in answers if pid != judge), (
        f"the judge ({judge}) must end its reference process before it ends itself; ended in the "
        f"order {order}\n  rule: a grading that ends leaves no process of the grader's behind")


def test_grade_all_with_a_gpu_in_sight_grades_everyone(tmp_path, secret_file):
    """``grade-all`` officially, two students side by side (``--jobs 2``), the judge seeing a GPU
    whose state belongs to one thread: everyone graded, every CPU point kept."""
    log, out = tmp_path / "seen.log", tmp_path / "grades"
    for name in ("ana", "bo"):
        submission(tmp_path / "class" / name)
    done = subprocess.run([sys.executable, "-m", "grader", "grade-all", str(tmp_path / "class"), "--out",
                           str(out), "--gpu", "off", "--only", "ex2", "--jobs", "2", "--secret-file",
                           str(secret_file), "--allow-unisolated"],
                          cwd=REPO_ROOT, env=cuda_in_sight(log), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {r["student"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert {s: (r["status"], float(r["score"])) for s, r in rows.items()} == {
        "ana": ("graded", EX2_CPU_POINTS), "bo": ("graded", EX2_CPU_POINTS)}, done.stderr[-3000:]


class ThreadBound:
    """Stands in for state that belongs to the thread that first used it (CUDA's profiler, on the
    H200): wraps each probe of ``grader.probes.PROBES``; a call from a second thread raises."""

    def __init__(self, probes: dict):
        self.owner: list[int] = []
        self.probes = {name: self.bind(fn) for name, fn in probes.items()}

    def bind(self, fn):
        def bound(*args, **kwargs):
            if not self.owner:
                self.owner.append(threading.get_ident())
            if self.owner[0] != threading.get_ident():
                raise RuntimeError("External init callback must run in same thread as registerClient "
                                   "[a stand-in, tests/test_judge_sees_cuda.py]")
            return fn(*args, **kwargs)

        return bound


def test_the_reference_stays_on_one_thread_whatever_grade_all_runs_side_by_side(tmp_path, secret_file,
                                                                                monkeypatch):
    """No GPU in sight: the reference answers in the judge's process, on one thread, however
    many students ``grade-all`` grades at once (official: every student's own inputs)."""
    from grader import classbook, probes
    from grader.judge import Judge
    from grader.secret import load as load_secret

    from grader.exercises import load_probes

    load_probes()  # every probe registered, then each bound to the first thread that runs one
    monkeypatch.setattr(probes, "PROBES", ThreadBound(probes.PROBES).probes)
    for name in ("ana", "bo", "cy"):
        submission(tmp_path / "class" / name)
    judge = Judge(gpu="off", exercises=("ex2",), jobs=1, secret=load_secret(str(secret_file)))
    code = classbook.grade_class(judge, tmp_path / "class", tmp_path / "grades", jobs=3,
                                 hidden_visibility="after_published")
    assert code == 0
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "grades" / "gradebook.csv").open())}
    assert {s: r["status"] for s, r in rows.items()} == {s: "graded" for s in ("ana", "bo", "cy")}
    assert all(float(r["score"]) == EX2_CPU_POINTS for r in rows.values()), rows
