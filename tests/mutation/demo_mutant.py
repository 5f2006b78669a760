"""python tests/mutation/demo_mutant.py MODULE LINE SUBSTRING EXPR  (from the repo root; OUT=mutation-out)
Re-applies the surviving mutant of MODULE at LINE whose + line contains SUBSTRING to a copy of solutions/ and
evaluates EXPR (M = the module, impl = its Implementation, torch) on the reference and on the mutant."""

import json
import os
import pathlib
import shutil
import sqlite3
import sys
import tempfile

from cosmic_ray.mutating import apply_mutation
from cosmic_ray.plugins import get_operator

sys.path.insert(0, os.getcwd())

from coursekit.impl import Implementation

m, line, sub, expr = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
c = sqlite3.connect(f"{os.environ.get('OUT', 'mutation-out')}/{m}.sqlite")
SURVIVORS = (
    "select s.start_pos_row, r.diff, s.operator_name, s.occurrence, s.operator_args "
    "from work_results r join mutation_specs s using(job_id) "
    "where r.test_outcome='SURVIVED' and s.start_pos_row=?"
)
rows = [
    r
    for r in c.execute(SURVIVORS, (line,))
    if any(d.startswith('+') and not d.startswith('+++') and sub in d for d in r[1].splitlines())
]
assert len(rows) >= 1, "no such survivor"
diff = rows[0][1]
tmp = pathlib.Path(tempfile.mkdtemp())
for f in pathlib.Path("solutions").glob("*.py"):
    shutil.copy(f, tmp)
args = rows[0][4] or "{}"
while isinstance(args, str):
    args = json.loads(args)
apply_mutation(tmp / f"{m}.py", get_operator(rows[0][2])(**args), rows[0][3])
print([d for d in diff.splitlines() if d[:1] in '+-' and d[:3] not in ('+++', '---')])
for label, impl in (("reference", Implementation("solutions")), ("mutant", Implementation(str(tmp)))):
    M = impl.module(m)
    try:
        val = eval(expr, {"M": M, "torch": __import__("torch"), "impl": impl})
        print(f"{label}: {val!r}"[:600])
    except Exception as e:
        print(f"{label}: {type(e).__name__}: {e}"[:600])
