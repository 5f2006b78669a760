"""A class at once: ``grade-all`` (one folder of submissions -> a gradebook), ``merge`` (a CPU
pass and a GPU pass -> one gradebook) and the summary an instructor reads after a deadline.

Layout of an output folder (class-level files at the top, one folder per student below, so no
student's name can collide with a class-level file)::

    OUT/gradebook.csv                 one row per student, per-exercise scores
    OUT/summary.md, OUT/scores.svg    distribution, pass rate per check, common reasons, ...
    OUT/students/NAME/results.json    Gradescope's format (grader/results.py)

A run writes into a staging folder and moves it into place at the end: when nobody can be graded
(the reference failed, no worker can run), nothing is written and the exit status is 3.

Every entry of the submissions folder is accounted for: graded, or refused with a reason (a
symbolic link, a FIFO, a file that is no submission), or *not gradable* (the grader itself
failed on it: a fault of ours, not a wrong answer; it is listed apart, worth no points until
regraded).
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader.text import safe

SUBMISSION_SUFFIXES = (".zip", ".ipynb")


def classify(root: Path) -> tuple[list[Path], dict[Path, str]]:
    """The entries of ``root`` to grade, and those refused with the reason."""
    graded, refused = [], {}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_symlink():
            refused[entry] = "a symbolic link: refused, not followed (submit the folder or file itself)"
        elif entry.is_dir():
            graded.append(entry)
        elif entry.is_file():
            if entry.suffix in SUBMISSION_SUFFIXES:
                graded.append(entry)
            else:
                refused[entry] = "not a submission: expected a folder, a .zip or a .ipynb"
        else:
            refused[entry] = "not a regular file or folder (a FIFO, socket or device): refused"
    return graded, refused


def student_names(entries: list[Path]) -> dict[Path, str]:
    """A safe, unique name per entry (``alice/`` and ``alice.zip`` become alice, alice-2)."""
    names, taken = {}, set()
    for entry in entries:
        base = entry.name
        for suffix in SUBMISSION_SUFFIXES:
            base = base.removesuffix(suffix)
        base = re.sub(r"[^A-Za-z0-9._-]", "_", base).strip(".")[:100] or "submission"
        name, k = base, 2
        while name.lower() in taken:
            name, k = f"{base}-{k}", k + 1
        taken.add(name.lower())
        names[entry] = name
    return names


def _progress(done: int, total: int, elapsed: float) -> None:
    width = 30
    filled = width * done // max(total, 1)
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} graded, {elapsed:.0f} s",
          end="", file=sys.stderr, flush=True)


def grade_class(judge, root: Path, out: Path, jobs: int, hidden_visibility: str) -> int:
    from grader.judge import EnvironmentProblem, ReferenceFailure, Report
    from grader.results import gradescope
    from grader.submission import Submission, load

    graded, refused = classify(root)
    names = student_names(graded + list(refused))
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile_dir(out))
    start, lock, done = time.monotonic(), threading.Lock(), [0]
    rows: dict[str, dict] = {}
    stop = threading.Event()
    fatal: list[BaseException] = []

    def record(name: str, report, status: str, wall_s: float) -> None:
        data = gradescope(report, hidden_visibility)
        data["extra_data"].update(status=status, student=name, wall_s=round(wall_s, 2))
        folder = staging / "students" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(data, indent=1, ensure_ascii=True) + "\n",
                                             encoding="utf-8")
        with lock:
            rows[name] = data

    def one(entry: Path) -> None:
        if stop.is_set():
            return
        name, began = names[entry], time.monotonic()
        try:
            try:
                submission = load(entry)
            except Exception as exc:  # noqa: BLE001 - refused with the reason, graded as empty
                submission = Submission(str(entry), problems=[f"not graded: {safe(exc, 500)}"])
            report, status = judge.grade(submission), "graded"
        except (ReferenceFailure, EnvironmentProblem) as exc:
            fatal.append(exc)
            stop.set()
            return
        except Exception as exc:  # noqa: BLE001 - the grader failed on it: not a wrong answer
            report = Report(safe(entry.name), [], [f"not gradable: the grader failed on this "
                                                   f"submission ({type(exc).__name__}: {safe(exc, 300)}); "
                                                   "regrade it after fixing the grader"])
            status = "not gradable"
        record(name, report, status, time.monotonic() - began)
        with lock:
            done[0] += 1
            _progress(done[0], len(graded), time.monotonic() - start)

    try:
        for entry, why in refused.items():
            report = Report(safe(entry.name), [], [f"refused: {safe(entry.name)} is {why}"])
            record(names[entry], report, "refused", 0.0)
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, graded))
        print(file=sys.stderr)
        if fatal:
            print(f"grader: nothing was graded: {fatal[0]}", file=sys.stderr)
            return 3
        write_gradebook(staging, rows)
        write_summary(staging, rows)
        publish(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    elapsed = time.monotonic() - start
    print(f"graded {len(graded)} submissions in {elapsed:.1f} s "
          f"({60 * len(graded) / max(elapsed, 1e-9):.1f} per minute); refused {len(refused)}; "
          f"wrote {out / 'gradebook.csv'} and {out / 'summary.md'}")
    return 0


def tempfile_dir(out: Path) -> str:
    import tempfile

    return tempfile.mkdtemp(prefix=".grading-", dir=out)


def publish(staging: Path, out: Path) -> None:
    """Move a finished run's files into ``out`` (each student's folder replaced whole)."""
    students = out / "students"
    students.mkdir(exist_ok=True)
    for folder in sorted((staging / "students").iterdir()) if (staging / "students").exists() else []:
        target = students / folder.name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        folder.replace(target)
    for name in ("gradebook.csv", "summary.md", "scores.svg"):
        if (staging / name).exists():
            target = out / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            (staging / name).replace(target)


# ----------------------------------------------------------------------------- the gradebook


def _exercise_scores(data: dict) -> dict[str, float]:
    scores: dict[str, float] = {}
    for test in data.get("tests", []):
        exercise = test["name"].split(" ", 1)[0]
        scores[exercise] = scores.get(exercise, 0.0) + float(test.get("score", 0.0))
    return scores


def write_gradebook(folder: Path, rows: dict[str, dict]) -> None:
    exercises = sorted({e for data in rows.values() for e in _exercise_scores(data)},
                       key=lambda e: int(e.removeprefix("ex")) if e.removeprefix("ex").isdigit() else 99)
    with open(folder / "gradebook.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "status", "score", "max_score", "pending", *exercises, "notes"])
        for student in sorted(rows):
            data = rows[student]
            extra = data.get("extra_data", {})
            per = _exercise_scores(data)
            writer.writerow([student, extra.get("status", "graded"), f"{data['score']:g}",
                             f"{extra.get('max_score', 0):g}", f"{extra.get('pending', 0):g}",
                             *[f"{per.get(e, 0.0):g}" for e in exercises],
                             safe(data.get("output", "").replace("\n", " | "), 2000)])


def write_summary(folder: Path, rows: dict[str, dict]) -> None:
    """``summary.md`` and ``scores.svg``: what an instructor reads after a deadline."""
    from coursekit.svgplot import bar_chart

    graded = {s: d for s, d in rows.items() if d["extra_data"].get("status") == "graded"}
    others = {s: d for s, d in rows.items() if s not in graded}
    scores = sorted(d["score"] for d in graded.values())
    maximum = max((d["extra_data"].get("max_score", 0) for d in graded.values()), default=0)
    pending = max((d["extra_data"].get("pending", 0) for d in graded.values()), default=0)
    lines = ["# Grading summary", ""]
    lines.append(f"{len(graded)} submissions graded, {len(others)} refused or not gradable; "
                 f"maximum {maximum:g} points in this pass"
                 + (f" (+{pending:g} pending: GPU checks, graded in the GPU pass)" if pending else "")
                 + ".")
    if scores:
        lines.append(f"Scores: mean {statistics.mean(scores):.1f}, median {statistics.median(scores):g}, "
                     f"min {scores[0]:g}, max {scores[-1]:g}.")
    fingerprint = next(iter(graded.values()))["extra_data"] if graded else {}
    if fingerprint:
        lines.append(f"Graded by {fingerprint.get('grader')} on torch {fingerprint.get('torch')}, "
                     f"GPU {fingerprint.get('gpu')}, {fingerprint.get('mode')} mode (seed id "
                     f"{fingerprint.get('seed_id')}), isolation {fingerprint.get('isolation')}.")
    lines += ["", "## Score distribution", ""]
    bins = _bins(scores, maximum)
    if bins:
        lines += ["| points | submissions |", "| --- | --- |"]
        lines += [f"| {label} | {count} {'#' * count} |" for label, count in bins]
        bar_chart(folder / "scores.svg", bins, "Scores", "points", "submissions")
        lines += ["", "![score distribution](scores.svg)"]
    lines += ["", "## Pass rate per check (worst first)", "",
              "| check | points | passed | pass rate |", "| --- | --- | --- | --- |"]
    rates: dict[str, list] = {}
    for data in graded.values():
        for test in data["tests"]:
            state = test.get("extra_data", {}).get("state")
            if state in ("passed", "failed"):
                entry = rates.setdefault(test["name"], [test["max_score"], 0, 0])
                entry[1 if state == "passed" else 2] += 1
    for name, (points, ok, bad) in sorted(rates.items(), key=lambda kv: (kv[1][1] / (kv[1][1] + kv[1][2]), kv[0])):
        lines.append(f"| {name} | {points:g} | {ok}/{ok + bad} | {100 * ok / (ok + bad):.0f}% |")
    lines += ["", "## Most common first lost point, per exercise", ""]
    firsts: dict[str, Counter] = {}
    for data in graded.values():
        seen = set()
        for test in data["tests"]:
            exercise = test["name"].split(" ", 1)[0]
            if test.get("extra_data", {}).get("state") == "failed" and exercise not in seen:
                seen.add(exercise)
                firsts.setdefault(exercise, Counter())[_gist(test)] += 1
    for exercise in sorted(firsts, key=lambda e: int(e.removeprefix("ex")) if e[2:].isdigit() else 99):
        gist, count = firsts[exercise].most_common(1)[0]
        lines.append(f"- **{exercise}** ({count} of {len(graded)}): {gist}")
    lines += ["", "## Refused or not gradable", ""]
    if others:
        lines += [f"- {s} ({d['extra_data'].get('status')}): {safe(d.get('output', ''), 300).splitlines()[-1]}"
                  for s, d in sorted(others.items())]
    else:
        lines.append("None.")
    lines += ["", "## Slowest submissions", ""]
    slow = sorted(graded.items(), key=lambda kv: -kv[1]["extra_data"].get("wall_s", 0))[:5]
    lines += [f"- {s}: {d['extra_data'].get('wall_s', 0):.1f} s" for s, d in slow] or ["None."]
    (folder / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _gist(test: dict) -> str:
    """A failed test's reason without the values that differ between students."""
    first = test.get("output", "").splitlines()[0] if test.get("output") else ""
    name = test["name"].split(" · ", 1)[-1]
    if "not implemented yet" in first:
        return f"{name}: not implemented yet"
    if "timed out" in first:
        return f"{name}: timed out"
    if "importing the module raised" in first:
        return f"{name}: {safe(first, 120)}"
    if first.startswith("rule:"):
        return f"{name} (hidden): {safe(first, 150)}"
    return f"{name}: {safe(re.sub(r'[-+]?[0-9][0-9.e+-]*', 'N', first), 150)}"


def _bins(scores: list[float], maximum: float) -> list[tuple[str, int]]:
    """About ten bins of equal width from 0 to ``maximum``: [low, low + width) each."""
    if not scores or maximum <= 0:
        return []
    width = max(1, math.ceil(maximum / 10))
    lows = range(0, int(maximum) + 1, width)
    return [(f"{low}" if width == 1 else f"{low}-{low + width - 1}",
             sum(1 for s in scores if low <= s < low + width)) for low in lows]


# ----------------------------------------------------------------------------- two passes


def _read_pass(folder: Path, which: str) -> dict[str, dict]:
    students = folder / "students"
    if not students.is_dir():
        raise ValueError(f"{which}: {folder} holds no students/ folder (not a grade-all --out folder)")
    found = {}
    for path in sorted(students.iterdir()):
        results = path / "results.json"
        if path.is_dir() and not path.is_symlink() and results.is_file() and not results.is_symlink():
            found[path.name] = json.loads(results.read_text(encoding="utf-8"))
    return found


def merge(cpu_out: Path, gpu_out: Path, final: Path) -> int:
    """Join the CPU pass and the GPU pass per student and per check into ``final``."""
    cpu, gpu = _read_pass(cpu_out, "CPU_OUT"), _read_pass(gpu_out, "GPU_OUT")
    seeds = {d["extra_data"].get("seed_id") for d in list(cpu.values()) + list(gpu.values())
             if d["extra_data"].get("status") == "graded"}
    if len(seeds) > 1:
        raise ValueError(f"the passes were graded with different secrets (seed ids {sorted(map(str, seeds))}): "
                         "their inputs differ; grade both with the same --secret-file")
    final.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile_dir(final))
    rows = {}
    try:
        for student in sorted(set(cpu) | set(gpu)):
            rows[student] = merged = merge_student(cpu.get(student), gpu.get(student))
            folder = staging / "students" / student
            folder.mkdir(parents=True)
            (folder / "results.json").write_text(json.dumps(merged, indent=1, ensure_ascii=True) + "\n",
                                                 encoding="utf-8")
        write_gradebook(staging, rows)
        write_summary(staging, rows)
        publish(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    only = [s for s in rows if (s in cpu) != (s in gpu)]
    print(f"merged {len(rows)} students ({len(only)} in one pass only: listed, with a note); "
          f"wrote {final / 'gradebook.csv'}")
    return 0


def merge_student(cpu: dict | None, gpu: dict | None) -> dict:
    """One student's results: each check from the pass that graded it (a GPU check pending in
    the CPU pass comes from the GPU pass); a student missing from a pass keeps what the other
    pass has, with a note."""
    base = json.loads(json.dumps(cpu or gpu))
    notes = []
    if cpu is None:
        notes.append("missing from the CPU pass: only its GPU checks are graded")
    if gpu is None:
        notes.append("missing from the GPU pass: its GPU checks stay pending")
    if cpu is not None and gpu is not None:
        by_check = {t["extra_data"]["check"]: t for t in gpu.get("tests", [])
                    if t.get("extra_data", {}).get("state") in ("passed", "failed")}
        tests = []
        for test in cpu.get("tests", []):
            check = test.get("extra_data", {}).get("check")
            tests.append(by_check.pop(check) if test["extra_data"].get("state") == "pending"
                         and check in by_check else test)
        listed = {t.get("extra_data", {}).get("check") for t in cpu.get("tests", [])}
        tests += [t for c, t in by_check.items() if c not in listed]  # checks only the GPU pass has
        base["tests"] = sorted(tests, key=lambda t: [int(x) for x in t["number"].split(".")])
        statuses = {cpu["extra_data"].get("status"), gpu["extra_data"].get("status")}
        base["extra_data"]["status"] = "graded" if statuses == {"graded"} else \
            next(s for s in ("not gradable", "refused", "graded") if s in statuses)
        base["execution_time"] = round(cpu.get("execution_time", 0) + gpu.get("execution_time", 0), 2)
        base["extra_data"]["gpu"] = gpu["extra_data"].get("gpu", "none")
        base["extra_data"]["pass"] = "cpu+gpu (merged)"
    tests = base.get("tests", [])
    base["score"] = sum(t["score"] for t in tests)
    max_score = sum(t["max_score"] for t in tests)
    pending = sum(t["extra_data"].get("points", 0) for t in tests if t["extra_data"].get("state") == "pending")
    base["extra_data"].update(max_score=max_score, pending=pending)
    summary = f"{base['score']:g} of {max_score:g} points (CPU and GPU passes merged)"
    if pending:
        summary += f"; {pending:g} points still pending"
    keep = [line for line in base.get("output", "").splitlines()[1:] if "pending" not in line]
    base["output"] = "\n".join([summary] + notes + keep)
    return base
