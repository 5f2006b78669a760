"""Per-module counts of a tests/mutation/run.sh run: python summary.py OUT MUT_WALL_S MODULE..."""

import collections
import importlib.metadata as md
import json
import sqlite3
import sys
from pathlib import Path

out, wall, modules = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
print(f"cosmic-ray {md.version('cosmic-ray')}, mutation wall time {wall} s")
print(
    f"{'module':14} {'generated':>9} {'skipped':>7} {'run':>4} {'killed':>6} {'survived':>8} "
    f"{'timeout':>7} {'other':>5} {'score':>6}  grader catches"
)
for m in modules:
    db = out / f"{m}.sqlite"
    if not db.exists():
        continue
    c = sqlite3.connect(db)
    total = c.execute("select count(*) from work_items").fetchone()[0]
    n = collections.Counter(
        c.execute("select worker_outcome, test_outcome, output from work_results").fetchall()
        and [
            (w, t, (o or "")[:7] == "timeout")
            for w, t, o in c.execute("select worker_outcome, test_outcome, output from work_results")
        ]
    )
    skipped = sum(v for (w, t, to), v in n.items() if w == "SKIPPED")
    timeout = sum(v for (w, t, to), v in n.items() if w != "SKIPPED" and (to or w == "ABNORMAL"))
    killed = sum(v for (w, t, to), v in n.items() if w == "NORMAL" and t == "KILLED" and not to)
    survived = sum(v for (w, t, to), v in n.items() if w == "NORMAL" and t == "SURVIVED")
    done = sum(n.values())
    other = done - skipped - timeout - killed - survived + (total - done)
    run = total - skipped
    graded = out / f"{m}.grader.jsonl"
    caught = ""
    if graded.exists():
        rows = [json.loads(line) for line in graded.read_text().splitlines()]
        caught = f"{sum(r.get('caught', False) for r in rows)} of {len(rows)} survivors"
    score = f"{(killed + timeout) / run:.0%}" if run else "-"
    print(f"{m:14} {total:9} {skipped:7} {run:4} {killed:6} {survived:8} {timeout:7} {other:5} {score:>6}  {caught}")
