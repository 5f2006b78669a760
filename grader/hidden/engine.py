"""Exercise 8 (engine): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coursekit.strategies import MODES
from grader.checks import Check, P
from grader.exercises.engine import requests

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex8.generate_other_requests")
    prompts, new_tokens = requests(r, 6)
    seed = r.randint(0, 2**16)
    r2 = draw.rng("ex8.engine_default_sizes")
    small, small_new = requests(r2, 2)
    # Each range holds a count whose default sizes differ from every simpler rule's (powers of
    # two, [1, 2, 4, 8], every size): 24 and up adds 24, 40, 48... which powers of two lack.
    slot_counts = [r2.randint(2, 7), r2.randint(9, 15), r2.randint(24, 40), r2.randint(41, 100)]
    return [
        Check(
            "ex8",
            "generate_other_requests",
            "eager decoding's tokens for another batch and model, float32 and bfloat16",
            [
                P(
                    "engine_generate",
                    f"generate in mode {m}",
                    mode=m,
                    sizes=[1, 2, 4, 8, 16, 32],
                    prompts=prompts,
                    new_tokens=new_tokens,
                    seed=seed,
                )
                for m in MODES
            ]
            + [
                P(
                    "engine_generate",
                    f"generate in mode {m} on a bfloat16 model",
                    mode=m,
                    sizes=[1, 2, 4, 8, 16, 32],
                    prompts=prompts,
                    new_tokens=new_tokens,
                    seed=seed,
                    dtype="bfloat16",
                )
                for m in ("PIECEWISE", "FULL_AND_PIECEWISE")
            ],
            hidden=True,
            points=2,
        ),
        Check(
            "ex8",
            "engine_default_sizes",
            "capture_sizes=None means engine_capture_sizes(model.config.max_seqs): those sizes "
            "are captured, largest first",
            [
                P(
                    "engine_generate",
                    f"generate with the default sizes ({m})",
                    mode=m,
                    sizes=None,
                    prompts=small,
                    new_tokens=small_new,
                )
                for m in ("FULL", "PIECEWISE")
            ]
            + [
                P("engine_default_captures", f"what capture_model() captures by default for max_seqs={n}", max_seqs=n)
                for n in slot_counts
            ],
            hidden=True,
            points=1,
        ),
    ]
