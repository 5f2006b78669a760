"""Mark as SKIPPED every mutant inside a type annotation (never evaluated: the modules use
`from __future__ import annotations`). Usage: python skip_annotations.py SESSION.sqlite"""

import ast
import sys
from pathlib import Path
from cosmic_ray.work_db import use_db, WorkDB
from cosmic_ray.work_item import WorkResult, WorkerOutcome


def spans(path):
    tree = ast.parse(Path(path).read_text())
    out = []
    for node in ast.walk(tree):
        anns = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if arg is not None and arg.annotation is not None:
                    anns.append(arg.annotation)
            if node.returns is not None:
                anns.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for n in anns:
            out.append(((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)))
    return out


with use_db(sys.argv[1], WorkDB.Mode.open) as db:
    cache, n = {}, 0
    for item in list(db.pending_work_items):
        for m in item.mutations:
            sp = cache.setdefault(str(m.module_path), spans(m.module_path))
            start = (m.start_pos[0], m.start_pos[1])
            if any(a <= start < b for a, b in sp):
                db.set_result(
                    item.job_id,
                    WorkResult(output="in a type annotation (never evaluated)", worker_outcome=WorkerOutcome.SKIPPED),
                )
                n += 1
                break
    print(f"skip_annotations: {n} mutants in annotations skipped")
