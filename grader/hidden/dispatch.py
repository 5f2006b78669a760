"""Exercise 6 (dispatch): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coursekit.strategies import MODES
from grader.checks import Check, P

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex6.dispatch_many_batches")
    sizes = sorted(r.sample(range(1, 300), 12))
    seqs, q = r.randint(20, 150), r.choice((1, 1, 2, 4))
    queries = [
        [r.randint(1, 320), r.random() < 0.5, None, r.choice((None, ["FULL"], ["PIECEWISE"]))] for _ in range(60)
    ]
    r2 = draw.rng("ex6.capture_descs_repeated_sizes")
    repeated = [r2.choice([1, 2, 4, 8, 16]) for _ in range(7)]
    return [
        Check(
            "ex6",
            "dispatch_many_batches",
            "the dispatch rule on many batches",
            [
                P("dispatch", f"dispatch in mode {m}", mode=m, sizes=sizes, max_num_seqs=seqs, q=q, queries=queries)
                for m in MODES
            ],
            hidden=True,
            points=1,
        ),
        Check(
            "ex6",
            "capture_descs_repeated_sizes",
            "repeated sizes are captured once",
            [
                P(
                    "dispatcher_keys",
                    f"capture_descs in mode {m} with repeated sizes",
                    mode=m,
                    sizes=repeated,
                    max_num_seqs=r2.randint(2, 16),
                )
                for m in MODES
            ],
            hidden=True,
            points=1,
        ),
    ]
