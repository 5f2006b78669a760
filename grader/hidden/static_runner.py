"""Exercise 4 (static_runner): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.checks import Check, P, same

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex4.runner_many_inputs")
    shapes = [[r.randint(1, 3) for _ in range(r.randint(1, 3))] for _ in range(r.randint(3, 5))]
    r2 = draw.rng("ex4.runner_structured_outputs_not_cloned")
    n = r2.randint(1, 6)
    return [
        Check(
            "ex4",
            "runner_many_inputs",
            "buffers and copy-in for many inputs of many shapes",
            [
                P(
                    "graph_runner",
                    f"GraphRunner(combine, {len(shapes)} inputs)",
                    fn="combine",
                    shapes=shapes,
                    seeds=r.sample(range(1, 10_000), 4),
                    warmup_iters=1,
                )
            ],
            compare=same(keys=("outputs", "buffer_count", "buffers_are_examples", "num_captures")),
            hidden=True,
            points=1,
        ),
        Check(
            "ex4",
            "runner_structured_outputs_not_cloned",
            "clone_outputs=False hands out the static outputs of a structured result",
            [
                P(
                    "graph_runner",
                    "GraphRunner(pair, clone_outputs=False) called 3 times",
                    fn="pair",
                    shapes=[[n], [n]],
                    seeds=r2.sample(range(1, 10_000), 3),
                    clone_outputs=False,
                )
            ],
            compare=same(keys=("held_first_now", "outputs_share_static", "output_type")),
            hidden=True,
            points=1,
        ),
    ]
