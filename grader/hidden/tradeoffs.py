"""Exercise 9 (tradeoffs): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coursekit.lesson import H200_DECODE_7B
from grader.checks import Check, P
from grader.exercises.tradeoffs import kernel_profile

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex9.long_profiles")
    # A 7B-shaped step: a layer of 15 kernels (two long GEMMs, the rest tiny) repeated, then the
    # H200 step's mean kernel repeated 1579 times.
    layer = [float(r.randint(40, 90)), float(r.randint(40, 90))] + [float(r.randint(1, 4)) for _ in range(13)]
    step = layer * r.randint(20, 40)
    mean_kernel_us = H200_DECODE_7B[1]["graph_ms"] * 1e3 / H200_DECODE_7B[1]["kernels"]
    long_profiles = [step, [mean_kernel_us] * H200_DECODE_7B[1]["kernels"], kernel_profile(r) * 20]
    launches = (0.0, 5.0, float(r.randint(6, 20)))
    return [
        Check(
            "ex9",
            "long_profiles",
            "the timeline and tau* over whole decode-step profiles",
            [
                P("timeline", f"eager_timeline({len(k)} kernels, {launch})", kernel_us=k, launch_us=launch)
                for k in long_profiles
                for launch in launches
            ]
            + [P("tau_star", f"cpu_bound_launch_us({len(k)} kernels)", kernel_us=k) for k in long_profiles],
            hidden=True,
            points=1,
        ),
    ]
