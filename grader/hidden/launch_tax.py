"""Exercise 2 (launch_tax): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.checks import Check, P

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex2.time_ms_without_warmup")
    return [
        Check(
            "ex2",
            "time_ms_without_warmup",
            "warmup=0 is allowed: exactly iters calls",
            [
                P("time_ms_calls", f"time_ms(fn, iters={i}, warmup=0)", iters=i, warmup=0)
                for i in (1, r.randint(2, 9), r.randint(10, 40))
            ],
            hidden=True,
            points=1,
        ),
    ]
