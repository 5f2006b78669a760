"""A class at once: ``grade-all`` (one folder of submissions -> a gradebook) and ``merge`` (a CPU
pass and a GPU pass -> one gradebook). The class folder is read by ``grader/lms.py``; the
gradebook and the summary an instructor reads after a deadline are written by
``grader/gradebook.py``.

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
regraded). Each student's folder under ``students/`` is named by the safe id ``grader/lms.py``
gives it.

The self-test points the TA filled into the gradebook (``self_test``) are kept by a regrade, a
replace or a merge.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from grader.gradebook import read_hand_points, write_gradebook, write_summary
from grader.lms import Entry, lms_entries, load_entry
from grader.text import safe


def _progress(done: int, total: int, elapsed: float) -> None:
    width = 30
    filled = width * done // max(total, 1)
    print(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} graded, {elapsed:.0f} s",
        end="",
        file=sys.stderr,
        flush=True,
    )


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


def grade_class(
    judge,
    root: Path,
    out: Path,
    jobs: int,
    hidden_visibility: str,
    students: tuple[str, ...] = (),
    replace: bool = False,
    student_deadline_s: float = STUDENT_DEADLINE_S,
) -> int:
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
        print(
            f"grader: --out {out} already holds a grading run (gradebook.csv, students/): "
            "pass --replace to replace it whole, or --students ID,... to regrade some students "
            "into it; or choose a new folder",
            file=sys.stderr,
        )
        return 2
    if students:
        if not before:
            print(f"grader: --students regrades into an earlier run, and --out {out} holds none", file=sys.stderr)
            return 2
        wanted = set(students)
        chosen = [e for e in entries if wanted & {e.id, e.name, e.lms_id}]
        unknown = sorted(wanted - {k for e in chosen for k in (e.id, e.name, e.lms_id)})
        if unknown:
            print(
                f"grader: --students: no submission in {root} for {', '.join(unknown)} "
                f"(ids: {', '.join(e.id for e in entries[:20])}{', ...' if len(entries) > 20 else ''})",
                file=sys.stderr,
            )
            return 2
        mine = judge.fingerprint()
        old = before["fingerprint"]
        for key in ("seed_id", "rubric"):
            if old and old.get(key) != mine.get(key):
                print(
                    f"grader: --students: {out} was graded with {key} {old.get(key)}, this run "
                    f"has {mine.get(key)}; a regrade must use the same grading secret and rubric "
                    "(or regrade everyone with --replace)",
                    file=sys.stderr,
                )
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
        data["extra_data"].update(
            status=status,
            student=entry.id,
            name=safe(entry.name, 200),
            lms_id=safe(entry.lms_id, 40),
            entry=safe(entry.entry, 500),
            wall_s=round(wall_s, 2),
        )
        name = entry.id
        folder = staging / "students" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(data, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
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
            report = Report(
                entry.id,
                [],
                [
                    f"not graded: timed out (its grading had not ended after "
                    f"{student_deadline_s:g} s, --student-deadline; the class "
                    "went on without it); regrade it with --students"
                ],
            )
            status = "not gradable"
            with lock:
                timed_out.append(entry.id)
        elif isinstance(error, (ReferenceFailure, EnvironmentProblem)):
            fatal.append(error)
            stop.set()
            return
        elif isinstance(error, Exception):  # the grader failed on it: not a wrong answer
            report = Report(
                entry.id,
                [],
                [
                    f"not gradable: the grader failed on this "
                    f"submission ({type(error).__name__}: {safe(error, 300)}); "
                    "regrade it after fixing the grader"
                ],
            )
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
    what = f"regraded {len(graded)} of {len(everyone)} students" if students else f"graded {len(graded)} submissions"
    if timed_out:
        print(
            f"grader: {len(timed_out)} student(s) not graded, timed out after "
            f"{student_deadline_s:g} s: {', '.join(timed_out)} (regrade with --students)",
            file=sys.stderr,
        )
    print(
        f"{what} in {elapsed:.1f} s ({60 * len(graded) / max(elapsed, 1e-9):.1f} per minute); "
        f"refused {len(entries) - len(graded)}; wrote {out / 'gradebook.csv'} and "
        f"{out / 'summary.md'}" + (f"; kept {len(hand)} hand-graded self-test points" if hand else "")
    )
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
    return {
        str(d["extra_data"].get("pass")) for d in data.values() if d.get("extra_data", {}).get("status") == "graded"
    }


def merge(cpu_out: Path, gpu_out: Path, final: Path) -> int:
    """Join the CPU pass and the GPU pass per student and per check into ``final``. Both must be
    grade-all outputs of the same secret and rubric, one without the GPU checks (``cpu``), the
    other with only them (``--only-gpu``); ``final`` must not hold a run already."""
    if cpu_out.resolve() == gpu_out.resolve():
        raise ValueError(
            f"CPU_OUT and GPU_OUT are the same folder ({cpu_out}): give the CPU pass "
            "and the GPU pass (grade-all --only-gpu on a CUDA machine)"
        )
    cpu, gpu = _read_pass(cpu_out, "CPU_OUT"), _read_pass(gpu_out, "GPU_OUT")
    for which, data, want in (("CPU_OUT", cpu, "cpu"), ("GPU_OUT", gpu, "gpu")):
        kinds = _passes(data)
        if kinds and kinds != {want}:
            how = (
                "grade-all --gpu off (or on a machine without CUDA)"
                if want == "cpu"
                else "grade-all --only-gpu on a CUDA machine"
            )
            raise ValueError(
                f"{which}: {cpu_out if want == 'cpu' else gpu_out} holds a pass of kind "
                f"{', '.join(sorted(kinds))}, not a {want} pass ({how})"
            )
    for key, what in (("seed_id", "secrets"), ("rubric", "rubrics")):
        values = {
            d["extra_data"].get(key)
            for d in list(cpu.values()) + list(gpu.values())
            if d["extra_data"].get("status") == "graded"
        }
        if len(values) > 1:
            raise ValueError(
                f"the passes were graded with different {what} ({key}s "
                f"{sorted(map(str, values))}): their inputs or points differ; grade both "
                "with the same --secret-file and the same grader/rubric.toml"
            )
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
            (folder / "results.json").write_text(
                json.dumps(merged, indent=1, ensure_ascii=True) + "\n", encoding="utf-8"
            )
        publish(staging, final)
        write_gradebook(final, rows, {**read_hand_points(gpu_out), **read_hand_points(cpu_out)})
        write_summary(final, rows)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    only = [s for s in rows if (s in cpu) != (s in gpu)]
    print(
        f"merged {len(rows)} students ({len(only)} in one pass only: listed, with a note); "
        f"wrote {final / 'gradebook.csv'}"
    )
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
        by_check = {
            t["extra_data"]["check"]: t
            for t in gpu.get("tests", [])
            if t.get("extra_data", {}).get("state") in ("passed", "failed")
        }
        tests = []
        for test in cpu.get("tests", []):
            check = test.get("extra_data", {}).get("check")
            tests.append(
                by_check.pop(check) if test["extra_data"].get("state") == "pending" and check in by_check else test
            )
        listed = {t.get("extra_data", {}).get("check") for t in cpu.get("tests", [])}
        tests += [t for c, t in by_check.items() if c not in listed]  # checks only the GPU pass has
        base["tests"] = sorted(tests, key=lambda t: [int(x) for x in t["number"].split(".")])
        statuses = {cpu["extra_data"].get("status"), gpu["extra_data"].get("status")}
        base["extra_data"]["status"] = (
            "graded"
            if statuses == {"graded"}
            else next(s for s in ("not gradable", "refused", "graded") if s in statuses)
        )
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
