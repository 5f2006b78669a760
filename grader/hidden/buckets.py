"""Exercise 5 (buckets): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.checks import Check, P, same
from grader.exercises.buckets import bucket_probe, runner_setups

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex5.default_capture_sizes_large")
    r2 = draw.rng("ex5.runner_default_sizes_and_zero_padding")
    setups = runner_setups(r2, 4)
    max_rows = r2.randint(9, 40)
    return [
        Check(
            "ex5",
            "default_capture_sizes_large",
            "the default rule for large max_size",
            [P("default_sizes", f"default_capture_sizes({m})", max_size=m) for m in (2048, r.randint(2049, 9000))],
            hidden=True,
            points=1,
        ),
        Check(
            "ex5",
            "runner_default_sizes_and_zero_padding",
            "capture_sizes=None means default_capture_sizes(len(max_example)), capture=None the "
            "CPU stand-in; pad_value 0",
            [
                bucket_probe(
                    max_rows,
                    None,
                    [r2.randint(1, max_rows + 6) for _ in range(4)],
                    pad_value=0.0,
                    use_default_capture=True,
                )
            ]
            + [bucket_probe(*s, pad_value=-2.0, warmup_iters=1) for s in setups],
            compare=same(keys=("calls", "capture_order", "stats")),
            hidden=True,
            points=1,
        ),
    ]
