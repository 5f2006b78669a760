"""Grade every mutant that survived the public tests with the grader.

    python tests/mutation/grade_survivors.py OUT [MODULE ...]      (from the repository root)

For each surviving mutant in OUT/M.sqlite (a cosmic-ray session of tests/mutation/run.sh): a folder =
copy of solutions/*.py with the mutant's diff applied to M.py. All of a module's folders, plus
one unmutated copy ("base"), are graded in one grader run:

    python -m grader grade-all DIR --practice --jobs 1 --only exN --out GRADED

which is ``python -m grader grade FOLDER --only exN --json`` for every folder (practice inputs, no
secret), with the reference's answers computed once instead of once per folder (about 3x
faster). A test whose score differs from the base's = points lost = the grader catches the
mutant. Writes OUT/M.grader.jsonl (one line per survivor) and prints one line per survivor.
A module whose OUT/M.grader.jsonl already covers the same survivors is not graded again.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from cosmic_ray.mutating import apply_mutation
from cosmic_ray.plugins import get_operator

from coursekit.course import MARKERS as MARKER  # module -> its pytest marker


def scores(results: Path) -> dict[str, float | None]:
    data = json.loads(results.read_text())
    return {t.get("name"): t.get("score") for t in data["tests"]}


def main() -> None:
    out_dir = Path(sys.argv[1]).resolve()
    modules = sys.argv[2:] or list(MARKER)
    root = Path.cwd()
    for m in modules:
        db = out_dir / f"{m}.sqlite"
        if not db.exists():
            continue
        ex = MARKER[m]
        rows = (
            sqlite3.connect(db)
            .execute(
                "select s.job_id, s.start_pos_row, s.operator_name, s.occurrence, r.diff, s.operator_args "
                "from work_results r join mutation_specs s using(job_id) "
                "where r.worker_outcome = 'NORMAL' and r.test_outcome = 'SURVIVED' "
                "order by s.start_pos_row, s.start_pos_col, s.operator_name"
            )
            .fetchall()
        )
        secret = os.environ.get("GRADER_SECRET")  # official mode: inputs drawn from the secret
        tag = "grader-secret" if secret else "grader"
        only = os.environ.get("ONLY_JOBS")  # a file of job ids: grade just those survivors
        if only:
            keep = set(Path(only).read_text().split())
            rows = [r for r in rows if r[0] in keep]
        cached = out_dir / f"{m}.{tag}.jsonl"
        if cached.exists():
            old = [json.loads(line) for line in cached.read_text().splitlines()]
            if sorted(r["job_id"] for r in old) == sorted(r[0] for r in rows):
                print(
                    f"{m}: {len(rows)} survivors, grader catches "
                    f"{sum(r.get('caught', False) for r in old)} (graded before: {cached.name})"
                )
                continue
        if not rows:
            cached.write_text("")
            print(f"{m}: 0 survivors")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            subs = Path(tmp) / "subs"
            base = subs / "base"
            base.mkdir(parents=True)
            for f in (root / "solutions").glob("*.py"):
                shutil.copy(f, base)
            results, by_job = [], {}
            for job_id, line, op, occ, diff, op_args in rows:
                folder = subs / job_id
                shutil.copytree(base, folder)
                r = dict(
                    job_id=job_id,
                    line=line,
                    op=op,
                    occurrence=occ,
                    diff=[x for x in diff.splitlines() if x[:1] in "+-" and not x.startswith(("---", "+++"))],
                )
                # the same mutation cosmic-ray made (operator + occurrence), on the copy of M.py
                args = op_args or "{}"
                while isinstance(args, str):  # stored JSON-encoded, sometimes twice
                    args = json.loads(args)
                _, mutated = apply_mutation(folder / f"{m}.py", get_operator(op)(**args), occ)
                plus = [x[1:] for x in r["diff"] if x.startswith("+")]
                if mutated is None or not all(x in mutated for x in plus):
                    r["error"] = "cosmic-ray's re-applied mutation differs from the session's diff"
                    shutil.rmtree(folder)
                by_job[job_id] = r
                results.append(r)
            graded = Path(tmp) / "graded"
            mode = ["--secret-file", secret] if secret else ["--practice"]
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "grader",
                    "grade-all",
                    str(subs),
                    *mode,
                    "--jobs",
                    "1",
                    "--only",
                    ex,
                    "--out",
                    str(graded),
                ],
                capture_output=True,
                text=True,
            )
            (out_dir / f"{m}.{tag}.log").write_text(run.stdout[-20000:] + run.stderr[-20000:])
            shutil.copy(graded / "gradebook.csv", out_dir / f"{m}.{tag}.gradebook.csv")
            reference = scores(graded / "students" / "base" / "results.json")
            for r in results:
                if "error" in r:
                    continue
                got = scores(graded / "students" / r["job_id"] / "results.json")
                lost = {
                    name: [reference[name], got.get(name)] for name in reference if got.get(name) != reference[name]
                }
                r["caught"], r["lost"] = bool(lost), lost
                print(f"{m}:{r['line']} {r['op']} caught={r['caught']} {r['diff']} lost={lost}", flush=True)
        with open(cached, "w") as fh:
            for r in results:
                fh.write(json.dumps(r) + "\n")
        print(f"{m}: {len(rows)} survivors, grader catches {sum(r.get('caught', False) for r in results)}", flush=True)


if __name__ == "__main__":
    main()
