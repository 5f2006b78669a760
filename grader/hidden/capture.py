"""Exercise 3 (capture): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.checks import Check, P

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex3.gpu_many_warmups")
    return [
        Check(
            "ex3",
            "gpu_many_warmups",
            "exactly warmup_iters warm-up calls for larger counts",
            [P("capture_warmup", f"capture(fn, x, warmup_iters={w})", warmup_iters=w) for w in (2, r.randint(3, 7))],
            gpu=True,
            hidden=True,
            points=1,
        ),
    ]
