"""A CPU check means the same on every machine.

On its first GPU (an H200, 2026-12-04) the grader broke on what no CPU test had modelled: the
judge computed the reference's answers in its own process, where CUDA was in sight, so exercise
2's reference timer took its CUDA path while the CPU worker read the probe's fake clock, and
every correct submission lost ``ex2.time_ms_exact_mean`` (expected 0.0033 ms, got 1.583, in
practice and official grading).

Here a GPU is put in sight of the judge (``tests/fake_cuda``: a ``torch.cuda`` that answers as the
driver does, honouring ``CUDA_VISIBLE_DEVICES``, whose device belongs to the first thread that
uses it), and the reference must keep every CPU point. The rest of what that GPU broke (a class
graded side by side, the reference's one thread, its process ended with the judge, a grading
that hangs, GPU memory other processes hold) is in tests/test_adversarial_class.py, each case
also run with its defence switched off.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from coursekit.impl import REPO_ROOT
from tests.harness import cuda_in_sight, gpu_seen


def test_the_fake_gpu_is_seen_and_hidden_as_the_driver_would(tmp_path):
    log = tmp_path / "seen.log"
    code = (
        "import torch; e = [torch.cuda.Event(enable_timing=True) for _ in range(2)]; e[0].record(); "
        "e[1].record(); print(torch.cuda.is_available(), torch.cuda.device_count(), e[0].elapsed_time(e[1]) >= 0)"
    )
    shown = subprocess.run([sys.executable, "-c", code], env=cuda_in_sight(log), capture_output=True, text=True)
    hidden = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
        env={**cuda_in_sight(log), "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
    )
    assert shown.stdout.split() == ["True", "1", "True"], shown.stderr
    assert hidden.stdout.strip() == "False", hidden.stderr
    threaded = (
        "import threading, torch; torch.cuda.synchronize(); out = []\n"
        "def run():\n    try:\n        torch.cuda.synchronize()\n"
        "    except RuntimeError as e:\n        out.append(str(e))\n"
        "t = threading.Thread(target=run); t.start(); t.join(); print(out[0])"
    )
    other = subprocess.run([sys.executable, "-c", threaded], env=cuda_in_sight(log), capture_output=True, text=True)
    assert "same thread as registerClient" in other.stdout, other.stdout + other.stderr


@pytest.mark.parametrize("mode", ["practice", "official"])
def test_a_cpu_check_means_the_same_where_the_judge_sees_a_gpu(tmp_path, secret_file, mode):
    """``python -m grader grade solutions --gpu off`` on a machine whose judge sees a GPU: the
    reference keeps every CPU point of exercise 2 (its timer's fake-clock check included), and
    the reference's answers came from a process that saw no GPU."""
    log, out = tmp_path / "seen.log", tmp_path / "results.json"
    command = [
        sys.executable,
        "-m",
        "grader",
        "grade",
        "solutions",
        "--gpu",
        "off",
        "--only",
        "ex2",
        "--json",
        str(out),
    ]
    if mode == "official":
        command += ["--secret-file", str(secret_file)]
    done = subprocess.run(command, cwd=REPO_ROOT, env=cuda_in_sight(log), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lost = [
        t["name"]
        for t in json.loads(out.read_text())["tests"]
        if t.get("max_score") and t.get("score", 0) < t["max_score"] and "gpu" not in t.get("tags", [])
    ]
    assert not lost, (
        f"with a GPU in sight of the judge the reference lost CPU checks {lost} in {mode} "
        f"grading:\n{done.stdout[-3000:]}\n  rule: a CPU check's reference answer is "
        "computed as the CPU worker computes it, CUDA hidden"
    )
    answers = gpu_seen(log)
    assert True in answers.values() and False in answers.values(), (
        f"the judge must see the fake GPU and its CPU reference must not: {answers}"
    )
