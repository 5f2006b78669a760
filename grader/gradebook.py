"""What is written from a class's graded results: ``gradebook.csv`` (one row per student,
per-exercise scores, the self-test), and ``summary.md`` with ``scores.svg`` (distribution, pass
rate per check, common reasons, ...: what an instructor reads after a deadline).

The self-test is graded by hand: the gradebook's ``self_test`` column is left for the TA to
fill (``python -m grader totals OUT`` then adds it into ``total``); a regrade, a replace or a
merge keeps what was filled in (``read_hand_points``).
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections import Counter
from pathlib import Path

from grader.text import safe


def _exercise_scores(data: dict) -> dict[str, float]:
    scores: dict[str, float] = {}
    for test in data.get("tests", []):
        exercise = test["name"].split(" ", 1)[0]
        if re.fullmatch(r"ex\d+", exercise):
            scores[exercise] = scores.get(exercise, 0.0) + float(test.get("score", 0.0))
    return scores


HAND = "self_test"


def read_hand_points(folder: Path) -> dict[str, str]:
    """``{student id: self_test}`` as filled in ``folder/gradebook.csv`` (empty ones left out)."""
    path = folder / "gradebook.csv"
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as f:
        return {
            row["student"]: row[HAND].strip()
            for row in csv.DictReader(f)
            if row.get("student") and (row.get(HAND) or "").strip()
        }


def write_gradebook(folder: Path, rows: dict[str, dict], hand: dict[str, str] | None = None) -> None:
    """``gradebook.csv``: a row per student; ``self_test`` as the TA filled it (``hand``), and
    ``total`` = score + self_test once it is filled."""
    hand = hand or {}
    exercises = sorted(
        {e for data in rows.values() for e in _exercise_scores(data)}, key=lambda e: int(e.removeprefix("ex"))
    )
    tmp = folder / ".gradebook.csv.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "student",
                "name",
                "lms_id",
                "entry",
                "status",
                "score",
                "max_score",
                "pending",
                *exercises,
                HAND,
                "self_test_max",
                "total",
                "notes",
            ]
        )
        for student in sorted(rows):
            data = rows[student]
            extra = data.get("extra_data", {})
            per = _exercise_scores(data)
            filled = hand.get(student, "")
            writer.writerow(
                [
                    student,
                    extra.get("name", student),
                    extra.get("lms_id", ""),
                    extra.get("entry", ""),
                    extra.get("status", "graded"),
                    f"{data['score']:g}",
                    f"{extra.get('max_score', 0):g}",
                    f"{extra.get('pending', 0):g}",
                    *[f"{per.get(e, 0.0):g}" for e in exercises],
                    filled,
                    f"{extra.get('manual', 0):g}",
                    _total(data['score'], filled),
                    safe(data.get("output", "").replace("\n", " | "), 2000),
                ]
            )
    tmp.replace(folder / "gradebook.csv")


def _total(score: float, filled: str) -> str:
    try:
        return f"{score + float(filled):g}" if filled else ""
    except ValueError:
        return ""


def totals(folder: Path) -> int:
    """``python -m grader totals OUT``: check the ``self_test`` points the TA filled into
    ``OUT/gradebook.csv`` and write each ``total``. Exit 0; 2 when a filled value is not a
    number of points between 0 and the self-test's maximum (nothing is written then)."""
    path = folder / "gradebook.csv"
    if not path.is_file():
        raise ValueError(f"OUT: {folder} holds no gradebook.csv (a grade-all or merge --out folder)")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames or [], list(reader)
    if HAND not in fields or "total" not in fields:
        raise ValueError(f"{path} has no {HAND}/total columns: regrade with this grader first")
    bad, missing = [], []
    for row in rows:
        value = row[HAND].strip()
        if not value:
            missing.append(row["student"])
            row["total"] = ""
            continue
        try:
            points = float(value)
        except ValueError:
            points = -1.0
        top = float(row.get("self_test_max") or 0)
        if not 0 <= points <= top:
            bad.append(f"{row['student']}: {value!r} (expected 0 to {top:g})")
            continue
        row["total"] = f"{float(row['score']) + points:g}"
    if bad:
        raise ValueError(f"{path}: {HAND} must be a number of points: " + "; ".join(bad))
    tmp = folder / ".gradebook.csv.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)
    print(
        f"wrote the total of {len(rows) - len(missing)} students into {path}"
        + (
            f"; {len(missing)} have no {HAND} points yet: {', '.join(missing[:10])}"
            f"{', ...' if len(missing) > 10 else ''}"
            if missing
            else ""
        )
    )
    return 0


def write_summary(folder: Path, rows: dict[str, dict]) -> None:
    """``summary.md`` and ``scores.svg``: what an instructor reads after a deadline."""
    from coursekit.svgplot import bar_chart

    graded = {s: d for s, d in rows.items() if d["extra_data"].get("status") == "graded"}
    others = {s: d for s, d in rows.items() if s not in graded}
    scores = sorted(d["score"] for d in graded.values())
    maximum = max((d["extra_data"].get("max_score", 0) for d in graded.values()), default=0)
    pending = max((d["extra_data"].get("pending", 0) for d in graded.values()), default=0)
    lines = ["# Grading summary", ""]
    lines.append(
        f"{len(graded)} submissions graded, {len(others)} refused or not gradable; "
        f"maximum {maximum:g} points in this pass"
        + (f" (+{pending:g} pending: GPU checks, graded in the GPU pass)" if pending else "")
        + "."
    )
    if scores:
        lines.append(
            f"Scores: mean {statistics.mean(scores):.1f}, median {statistics.median(scores):g}, "
            f"min {scores[0]:g}, max {scores[-1]:g}."
        )
    fingerprint = next(iter(graded.values()))["extra_data"] if graded else {}
    if fingerprint:
        lines.append(
            f"Graded by {fingerprint.get('grader')} on torch {fingerprint.get('torch')}, "
            f"GPU {fingerprint.get('gpu')}, {fingerprint.get('mode')} mode (seed id "
            f"{fingerprint.get('seed_id')}), rubric {fingerprint.get('rubric')}, "
            f"isolation {fingerprint.get('isolation')}."
        )
        off = fingerprint.get("protections_off") or []
        if off:
            lines.append(f"Sandbox protections off on the grading machine: {', '.join(off)}.")
    renamed = [
        (s, d["extra_data"].get("name"))
        for s, d in sorted(rows.items())
        if d["extra_data"].get("name") not in (None, s)
    ]
    if renamed:
        lines += [
            "",
            "## Students and their ids",
            "",
            "Ids are safe folder names; the gradebook keeps each name as the LMS wrote it.",
            "",
            "| id | name | LMS id | handed in |",
            "| --- | --- | --- | --- |",
        ]
        lines += [
            f"| {s} | {_cell(n)} | {_cell(rows[s]['extra_data'].get('lms_id', ''))} | "
            f"{_cell(rows[s]['extra_data'].get('entry', ''))} |"
            for s, n in renamed
        ]
    lines += ["", "## Score distribution", ""]
    bins = _bins(scores, maximum)
    if bins:
        lines += ["| points | submissions |", "| --- | --- |"]
        lines += [f"| {label} | {count} {'#' * count} |" for label, count in bins]
        bar_chart(folder / "scores.svg", bins, "Scores", "points", "submissions")
        lines += ["", "![score distribution](scores.svg)"]
    lines += [
        "",
        "## Pass rate per check (worst first)",
        "",
        "| check | points | passed | pass rate |",
        "| --- | --- | --- | --- |",
    ]
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
        lines += [
            f"- {s} ({d['extra_data'].get('status')}): {safe((d.get('output') or '-').splitlines()[-1], 300)}"
            for s, d in sorted(others.items())
        ]
    else:
        lines.append("None.")
    lines += [
        "",
        "## Submissions that reach into the grader",
        "",
        "Code that walks the grader's frames or objects, uses /proc, ctypes, signals or other "
        "processes, or things the sandbox found left behind (grader/flags.py). Not scored: "
        "read the lines.",
        "",
    ]
    from grader.flags import describe

    flagged = [(s, d["extra_data"].get("flags") or []) for s, d in sorted(rows.items())]
    flagged = [(s, f) for s, f in flagged if f]
    for student, found in flagged:
        lines.append(
            f"- **{student}** ({len(found)}): "
            + "; ".join(_cell(describe(f)) for f in found[:6])
            + ("; ..." if len(found) > 6 else "")
        )
    if not flagged:
        lines.append("None.")
    lines += ["", "## Slowest submissions", ""]
    slow = sorted(graded.items(), key=lambda kv: -kv[1]["extra_data"].get("wall_s", 0))[:5]
    lines += [f"- {s}: {d['extra_data'].get('wall_s', 0):.1f} s" for s, d in slow] or ["None."]
    (folder / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _cell(text) -> str:
    """A value for a markdown table cell, whatever a file name holds."""
    return safe(str(text), 120).replace("|", "\\|")


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
    return [
        (f"{low}" if width == 1 else f"{low}-{low + width - 1}", sum(1 for s in scores if low <= s < low + width))
        for low in lows
    ]
