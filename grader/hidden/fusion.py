"""Exercise 7 (fusion): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.checks import Check, P, same

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex7.fused_norm_other_shapes")
    shapes = [[1, 1], [r.randint(1, 4), 2, r.randint(1, 64)], [2, 1, 3, r.randint(1, 16)], [1, 4096]]
    return [
        Check(
            "ex7",
            "fused_norm_other_shapes",
            "the norm is over the last dimension, any rank",
            [
                P("fused_norm", f"fused_add_rms_norm on {s}", shape=s, dtype="float32", seed=r.randint(0, 2**16))
                for s in shapes
            ],
            compare=same(rtol=1e-5, atol=1e-5),
            hidden=True,
            points=1,
        ),
    ]
