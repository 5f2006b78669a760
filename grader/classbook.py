"""A class at once: ``grade-all`` (one folder of submissions -> a gradebook), ``merge`` (a CPU
pass and a GPU pass -> one gradebook) and the summary an instructor reads after a deadline.

Layout of an output folder (class-level files at the top, one folder per student below, so no
student's name can collide with a class-level file)::

    OUT/gradebook.csv                 one row per student, per-exercise scores, the self-test
    OUT/summary.md, OUT/scores.svg    distribution, pass rate per check, common reasons, ...
    OUT/students/ID/results.json      Gradescope's format (grader/results.py)

A run writes into a staging folder and moves it into place at the end: when nobody can be graded
(the reference failed, no worker can run), nothing is written and the exit status is 3. A folder
that already holds a run is never mixed with a new one: ``grade-all`` refuses it unless told to
``--replace`` it whole or to regrade ``--students`` into it (their rows and results replaced,
everyone else's kept, under the same secret and rubric).

Every entry of the submissions folder is accounted for: graded, or refused with a reason (a
symbolic link, a FIFO, a file that is no submission), or *not gradable* (the grader itself
failed on it: a fault of ours, not a wrong answer; it is listed apart, worth no points until
regraded). What an LMS adds is read as it adds it (``lms_entries``): hidden files and
``__MACOSX/`` are not students; Canvas's and Blackboard's loose files are grouped per student;
Moodle's folder names give the student's name. Each student gets a safe id (the folder name
under ``students/``; accents folded, so ``Lena Müller`` is ``Lena_Muller``) and the gradebook
keeps the name as the LMS wrote it, and the LMS's number for the student where it gives one.

The self-test is graded by hand: the gradebook's ``self_test`` column is left for the TA to
fill (``python -m grader totals OUT`` then adds it into ``total``); a regrade, a replace or a
merge keeps what was filled in.
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
import unicodedata
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from grader.text import safe

SUBMISSION_SUFFIXES = (".zip", ".ipynb")
#: What operating systems and LMS exports add beside the submissions: never a student.
JUNK = ("__MACOSX", "Thumbs.db", "desktop.ini", "__pycache__")
#: Canvas's bulk download names each file ``<login>[_LATE]_<user id>_<submission id>_<file>``
#: (e.g. ``smithbob_340934_208490284_BobsWork.zip``), and renames a file handed in again under
#: the same name ``<file>-1``.
CANVAS = re.compile(r"^(?P<name>[^_]+?)(?:_LATE)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$")
CANVAS_RENAMED = re.compile(r"^(?P<stem>.+)-\d+(?P<ext>\.[A-Za-z0-9]+)$")
#: Moodle's "download all submissions" gives a folder per student:
#: ``<Full Name>_<participant id>_assignsubmission_file_``.
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_(?:file|onlinetext)_?$")
#: Blackboard's: ``<assignment>_<user>_attempt_<yyyy-mm-dd-hh-mm-ss>[_<file>]`` (the file-less
#: one is its receipt).
BLACKBOARD = re.compile(r"^(?P<assignment>.+)_(?P<name>[^_]+)_attempt_"
                        r"(?P<date>\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2})(?:_(?P<file>.+))?$")
MAX_LOOSE_FILES = 64


@dataclass
class Entry:
    """One student's submission as the class folder holds it."""

    name: str  # as the LMS (or the folder) writes it
    paths: list[Path] = field(default_factory=list)  # one folder/zip/notebook, or loose files
    lms_id: str = ""
    refused: str | None = None
    id: str = ""  # safe and unique: students/ID/, the gradebook's ``student``

    @property
    def entry(self) -> str:
        return "; ".join(p.name for p in self.paths)


def _display(entry: Path) -> str:
    name = entry.name
    for suffix in SUBMISSION_SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def lms_entries(root: Path) -> list[Entry]:
    """The class folder's students, with what each handed in (see the module docstring)."""
    entries: list[Entry] = []
    loose: dict[tuple[str, str], Entry] = {}
    for path in sorted(root.iterdir()):
        if path.name.startswith(".") or path.name in JUNK:
            continue
        if path.is_symlink():
            entries.append(Entry(_display(path), [path], refused=(
                "a symbolic link: refused, not followed (submit the folder or file itself)")))
            continue
        if path.is_dir():
            moodle = MOODLE.match(path.name)
            entries.append(Entry(moodle["name"], [path], moodle["uid"]) if moodle
                           else Entry(_display(path), [path]))
            continue
        canvas, board = CANVAS.match(path.name), BLACKBOARD.match(path.name)
        if path.is_file() and (canvas or board):
            if board and not board["file"]:
                continue  # Blackboard's receipt, not a submission
            key = (canvas["name"], canvas["uid"]) if canvas else (board["name"], "")
            loose.setdefault(key, Entry(key[0], [], key[1])).paths.append(path)
        elif path.is_file():
            entries.append(Entry(_display(path), [path], refused=None if path.suffix in SUBMISSION_SUFFIXES
                                 else "not a submission: expected a folder, a .zip or a .ipynb"))
        else:
            entries.append(Entry(_display(path), [path], refused=(
                "not a regular file or folder (a FIFO, socket or device): refused")))
    entries += loose.values()
    ids(entries)
    return sorted(entries, key=lambda e: e.id.lower())


def lms_file_name(path: Path) -> str:
    """The name a student gave a file an LMS renamed (``kimhana_1_2_buckets-1.py`` -> buckets.py)."""
    match = CANVAS.match(path.name) or BLACKBOARD.match(path.name)
    name = match["file"] if match and match["file"] else path.name
    renamed = CANVAS_RENAMED.match(name)
    return f"{renamed['stem']}{renamed['ext']}" if renamed else name


def safe_id(name: str) -> str:
    """A name fit for a folder and a gradebook cell: accents dropped (``Müller`` -> ``Muller``),
    letters and digits of any script kept (``김하나``), anything else one ``_``."""
    bare = "".join(ch for ch in unicodedata.normalize("NFKD", name) if unicodedata.category(ch) != "Mn")
    text = "".join(ch if (ch.isalnum() and ch.isprintable()) or ch in ".-" else "_"
                   for ch in unicodedata.normalize("NFC", bare))
    return re.sub(r"_+", "_", text).strip("._")[:100] or "submission"


def ids(entries: list[Entry]) -> None:
    """A safe, unique id per entry (``alice/`` and ``alice.zip`` become alice, alice-2)."""
    taken: set[str] = set()
    for entry in entries:
        base = safe_id(entry.name)
        name, k = base, 2
        while name.lower() in taken:
            name, k = f"{base}-{k}", k + 1
        taken.add(name.lower())
        entry.id = name


def load_entry(entry: Entry, scratch: Path):
    """``entry``'s submission: its one folder, zip or notebook, or its loose files gathered
    under their own names into a folder of ``scratch``."""
    from grader.submission import MAX_FILE_BYTES, load, read_regular

    if len(entry.paths) == 1 and not (CANVAS.match(entry.paths[0].name) or BLACKBOARD.match(entry.paths[0].name)):
        return load(entry.paths[0])
    if len(entry.paths) == 1 and entry.paths[0].suffix in SUBMISSION_SUFFIXES:
        submission = load(entry.paths[0])
    else:
        folder = scratch / entry.id
        folder.mkdir(parents=True)
        for path in entry.paths[:MAX_LOOSE_FILES]:
            target = folder / lms_file_name(path)
            if not target.exists():  # Canvas lists the latest attempt's files only; keep the first
                target.write_bytes(read_regular(path, MAX_FILE_BYTES + 1))
        submission = load(folder)
    submission.label = entry.id
    return submission


def _progress(done: int, total: int, elapsed: float) -> None:
    width = 30
    filled = width * done // max(total, 1)
    print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} graded, {elapsed:.0f} s",
          end="", file=sys.stderr, flush=True)


def previous_run(out: Path) -> dict | None:
    """What an earlier run left in ``out`` (``{"students": [...], "fingerprint": extra_data of
    one graded student}``), or None when ``out`` holds no run."""
    held = out / "students"
    if not (out / "gradebook.csv").exists() and not held.is_dir():
        return None
    found, fingerprint = [], {}
    for folder in sorted(held.iterdir()) if held.is_dir() else []:
        results = folder / "results.json"
        if folder.is_dir() and not folder.is_symlink() and results.is_file():
            found.append(folder.name)
            try:
                data = json.loads(results.read_text(encoding="utf-8"))
            except ValueError:
                continue
            if not fingerprint and data.get("extra_data", {}).get("status") == "graded":
                fingerprint = data["extra_data"]
    return {"students": found, "fingerprint": fingerprint}


#: How long one student's grading may take before the class goes on without it (``grade-all
#: --student-deadline``): far above what a submission that hangs in every exercise costs (each
#: worker is killed at its own limit, and tried once more), so only a hang of the grader itself
#: reaches it.
STUDENT_DEADLINE_S = 3600.0


def within(seconds: float, work: Callable[[], object]) -> tuple[bool, object, BaseException | None]:
    """``work()`` in a thread of its own, waited for ``seconds`` at most: ``(finished, its
    result, what it raised)``. A thread still running is left behind (a daemon: it cannot keep
    the process alive), so that one hang never holds up the rest of a class."""
    done: dict = {}

    def run() -> None:
        try:
            done["result"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            done["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name="launch-tax-student")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return False, None, None
    return True, done.get("result"), done.get("error")


def grade_class(judge, root: Path, out: Path, jobs: int, hidden_visibility: str,
                students: tuple[str, ...] = (), replace: bool = False,
                student_deadline_s: float = STUDENT_DEADLINE_S) -> int:
    """Grade the class folder ``root`` into ``out``. ``students``: regrade only these (ids, LMS
    names or LMS numbers) into the run ``out`` already holds; ``replace``: ``out`` holds a run
    to be replaced whole. Without either, a used ``out`` is refused (exit 2). A student whose
    grading has not ended after ``student_deadline_s`` gets a "not graded: timed out" row (not
    gradable: a fault of the grader's, regraded with ``--students``) and the class goes on."""
    from grader.judge import EnvironmentProblem, ReferenceFailure, Report
    from grader.results import gradescope
    from grader.submission import Submission

    entries = lms_entries(root)
    before = previous_run(out)
    if before and not (students or replace):
        print(f"grader: --out {out} already holds a grading run (gradebook.csv, students/): "
              "pass --replace to replace it whole, or --students ID,... to regrade some students "
              "into it; or choose a new folder", file=sys.stderr)
        return 2
    if students:
        if not before:
            print(f"grader: --students regrades into an earlier run, and --out {out} holds none",
                  file=sys.stderr)
            return 2
        wanted = set(students)
        chosen = [e for e in entries if wanted & {e.id, e.name, e.lms_id}]
        unknown = sorted(wanted - {k for e in chosen for k in (e.id, e.name, e.lms_id)})
        if unknown:
            print(f"grader: --students: no submission in {root} for {', '.join(unknown)} "
                  f"(ids: {', '.join(e.id for e in entries[:20])}{', ...' if len(entries) > 20 else ''})",
                  file=sys.stderr)
            return 2
        mine = judge.fingerprint()
        old = before["fingerprint"]
        for key in ("seed_id", "rubric"):
            if old and old.get(key) != mine.get(key):
                print(f"grader: --students: {out} was graded with {key} {old.get(key)}, this run "
                      f"has {mine.get(key)}; a regrade must use the same grading secret and rubric "
                      "(or regrade everyone with --replace)", file=sys.stderr)
                return 2
        entries = chosen
    graded = [e for e in entries if e.refused is None]
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile_dir(out))
    start, lock, done = time.monotonic(), threading.Lock(), [0]
    rows: dict[str, dict] = {}
    stop = threading.Event()
    fatal: list[BaseException] = []
    timed_out: list[str] = []

    def record(entry: Entry, report, status: str, wall_s: float) -> None:
        data = gradescope(report, hidden_visibility)
        data["extra_data"].update(status=status, student=entry.id, name=safe(entry.name, 200),
                                  lms_id=safe(entry.lms_id, 40), entry=safe(entry.entry, 500),
                                  wall_s=round(wall_s, 2))
        name = entry.id
        folder = staging / "students" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(data, indent=1, ensure_ascii=True) + "\n",
                                             encoding="utf-8")
        with lock:
            rows[name] = data

    def one(entry: Entry) -> None:
        if stop.is_set():
            return
        began = time.monotonic()

        def grade():
            try:
                submission = load_entry(entry, staging / "lms")
            except Exception as exc:  # noqa: BLE001 - refused with the reason, graded as empty
                submission = Submission(entry.id, problems=[f"not graded: {safe(exc, 500)}"])
            return judge.grade(submission)

        finished, report, error = within(student_deadline_s, grade)
        status = "graded"
        if not finished:
            report = Report(entry.id, [], [f"not graded: timed out (its grading had not ended after "
                                           f"{student_deadline_s:g} s, --student-deadline; the class "
                                           "went on without it); regrade it with --students"])
            status = "not gradable"
            with lock:
                timed_out.append(entry.id)
        elif isinstance(error, (ReferenceFailure, EnvironmentProblem)):
            fatal.append(error)
            stop.set()
            return
        elif isinstance(error, Exception):  # the grader failed on it: not a wrong answer
            report = Report(entry.id, [], [f"not gradable: the grader failed on this "
                                           f"submission ({type(error).__name__}: {safe(error, 300)}); "
                                           "regrade it after fixing the grader"])
            status = "not gradable"
        elif error is not None:
            raise error
        record(entry, report, status, time.monotonic() - began)
        with lock:
            done[0] += 1
            _progress(done[0], len(graded), time.monotonic() - start)

    try:
        for entry in entries:
            if entry.refused is not None:
                report = Report(entry.id, [], [f"refused: {safe(entry.entry)} is {entry.refused}"])
                record(entry, report, "refused", 0.0)
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, graded))
        print(file=sys.stderr)
        if fatal:
            print(f"grader: nothing was graded: {fatal[0]}", file=sys.stderr)
            return 3
        hand = read_hand_points(out)
        if before and replace:
            clear_run(out)
        publish(staging, out)
        everyone = _read_pass(out, "OUT") if students else rows
        write_gradebook(out, everyone, hand)
        write_summary(out, everyone)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    elapsed = time.monotonic() - start
    what = f"regraded {len(graded)} of {len(everyone)} students" if students else \
        f"graded {len(graded)} submissions"
    if timed_out:
        print(f"grader: {len(timed_out)} student(s) not graded, timed out after "
              f"{student_deadline_s:g} s: {', '.join(timed_out)} (regrade with --students)", file=sys.stderr)
    print(f"{what} in {elapsed:.1f} s ({60 * len(graded) / max(elapsed, 1e-9):.1f} per minute); "
          f"refused {len(entries) - len(graded)}; wrote {out / 'gradebook.csv'} and "
          f"{out / 'summary.md'}" + (f"; kept {len(hand)} hand-graded self-test points" if hand else ""))
    return 0


def tempfile_dir(out: Path) -> str:
    import tempfile

    return tempfile.mkdtemp(prefix=".grading-", dir=out)


def clear_run(out: Path) -> None:
    """Remove what a grading run wrote into ``out`` (``--replace``)."""
    shutil.rmtree(out / "students", ignore_errors=True)
    for name in ("gradebook.csv", "summary.md", "scores.svg"):
        if (out / name).is_file() or (out / name).is_symlink():
            (out / name).unlink()


def publish(staging: Path, out: Path) -> None:
    """Move a finished run's student folders into ``out`` (each replaced whole)."""
    students = out / "students"
    students.mkdir(exist_ok=True)
    for folder in sorted((staging / "students").iterdir()) if (staging / "students").exists() else []:
        target = students / folder.name
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.exists():
            shutil.rmtree(target)
        folder.replace(target)


# ----------------------------------------------------------------------------- the gradebook


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
        return {row["student"]: row[HAND].strip() for row in csv.DictReader(f)
                if row.get("student") and (row.get(HAND) or "").strip()}


def write_gradebook(folder: Path, rows: dict[str, dict], hand: dict[str, str] | None = None) -> None:
    """``gradebook.csv``: a row per student; ``self_test`` as the TA filled it (``hand``), and
    ``total`` = score + self_test once it is filled."""
    hand = hand or {}
    exercises = sorted({e for data in rows.values() for e in _exercise_scores(data)},
                       key=lambda e: int(e.removeprefix("ex")))
    tmp = folder / ".gradebook.csv.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "name", "lms_id", "entry", "status", "score", "max_score",
                         "pending", *exercises, HAND, "self_test_max", "total", "notes"])
        for student in sorted(rows):
            data = rows[student]
            extra = data.get("extra_data", {})
            per = _exercise_scores(data)
            filled = hand.get(student, "")
            writer.writerow([student, extra.get("name", student), extra.get("lms_id", ""),
                             extra.get("entry", ""), extra.get("status", "graded"),
                             f"{data['score']:g}", f"{extra.get('max_score', 0):g}",
                             f"{extra.get('pending', 0):g}",
                             *[f"{per.get(e, 0.0):g}" for e in exercises],
                             filled, f"{extra.get('manual', 0):g}", _total(data['score'], filled),
                             safe(data.get("output", "").replace("\n", " | "), 2000)])
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
    print(f"wrote the total of {len(rows) - len(missing)} students into {path}"
          + (f"; {len(missing)} have no {HAND} points yet: {', '.join(missing[:10])}"
             f"{', ...' if len(missing) > 10 else ''}" if missing else ""))
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
                     f"{fingerprint.get('seed_id')}), rubric {fingerprint.get('rubric')}, "
                     f"isolation {fingerprint.get('isolation')}.")
        off = fingerprint.get("protections_off") or []
        if off:
            lines.append(f"Sandbox protections off on the grading machine: {', '.join(off)}.")
    renamed = [(s, d["extra_data"].get("name")) for s, d in sorted(rows.items())
               if d["extra_data"].get("name") not in (None, s)]
    if renamed:
        lines += ["", "## Students and their ids", "",
                  "Ids are safe folder names; the gradebook keeps each name as the LMS wrote it.", "",
                  "| id | name | LMS id | handed in |", "| --- | --- | --- | --- |"]
        lines += [f"| {s} | {_cell(n)} | {_cell(rows[s]['extra_data'].get('lms_id', ''))} | "
                  f"{_cell(rows[s]['extra_data'].get('entry', ''))} |" for s, n in renamed]
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
        lines += [f"- {s} ({d['extra_data'].get('status')}): "
                  f"{safe((d.get('output') or '-').splitlines()[-1], 300)}"
                  for s, d in sorted(others.items())]
    else:
        lines.append("None.")
    lines += ["", "## Submissions that reach into the grader", "",
              "Code that walks the grader's frames or objects, uses /proc, ctypes, signals or other "
              "processes, or things the sandbox found left behind (grader/flags.py). Not scored: "
              "read the lines.", ""]
    from grader.flags import describe

    flagged = [(s, d["extra_data"].get("flags") or []) for s, d in sorted(rows.items())]
    flagged = [(s, f) for s, f in flagged if f]
    for student, found in flagged:
        lines.append(f"- **{student}** ({len(found)}): " + "; ".join(_cell(describe(f)) for f in found[:6])
                     + ("; ..." if len(found) > 6 else ""))
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


def _passes(data: dict[str, dict]) -> set[str]:
    return {str(d["extra_data"].get("pass")) for d in data.values()
            if d.get("extra_data", {}).get("status") == "graded"}


def merge(cpu_out: Path, gpu_out: Path, final: Path) -> int:
    """Join the CPU pass and the GPU pass per student and per check into ``final``. Both must be
    grade-all outputs of the same secret and rubric, one without the GPU checks (``cpu``), the
    other with only them (``--only-gpu``); ``final`` must not hold a run already."""
    if cpu_out.resolve() == gpu_out.resolve():
        raise ValueError(f"CPU_OUT and GPU_OUT are the same folder ({cpu_out}): give the CPU pass "
                         "and the GPU pass (grade-all --only-gpu on a CUDA machine)")
    cpu, gpu = _read_pass(cpu_out, "CPU_OUT"), _read_pass(gpu_out, "GPU_OUT")
    for which, data, want in (("CPU_OUT", cpu, "cpu"), ("GPU_OUT", gpu, "gpu")):
        kinds = _passes(data)
        if kinds and kinds != {want}:
            how = "grade-all --gpu off (or on a machine without CUDA)" if want == "cpu" else \
                "grade-all --only-gpu on a CUDA machine"
            raise ValueError(f"{which}: {cpu_out if want == 'cpu' else gpu_out} holds a pass of kind "
                             f"{', '.join(sorted(kinds))}, not a {want} pass ({how})")
    for key, what in (("seed_id", "secrets"), ("rubric", "rubrics")):
        values = {d["extra_data"].get(key) for d in list(cpu.values()) + list(gpu.values())
                  if d["extra_data"].get("status") == "graded"}
        if len(values) > 1:
            raise ValueError(f"the passes were graded with different {what} ({key}s "
                             f"{sorted(map(str, values))}): their inputs or points differ; grade both "
                             "with the same --secret-file and the same grader/rubric.toml")
    if previous_run(final):
        raise ValueError(f"--out {final} already holds a grading run: choose a new folder")
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
        publish(staging, final)
        write_gradebook(final, rows, {**read_hand_points(gpu_out), **read_hand_points(cpu_out)})
        write_summary(final, rows)
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
    base["score"] = sum(t.get("score", 0.0) for t in tests)
    max_score = sum(t.get("max_score", 0.0) for t in tests)
    pending = sum(t["extra_data"].get("points", 0) for t in tests if t["extra_data"].get("state") == "pending")
    base["extra_data"].update(max_score=max_score, pending=pending)
    summary = f"{base['score']:g} of {max_score:g} points (CPU and GPU passes merged)"
    if pending:
        summary += f"; {pending:g} points still pending"
    keep = [line for line in base.get("output", "").splitlines()[1:] if "pending" not in line]
    base["output"] = "\n".join([summary] + notes + keep)
    return base
