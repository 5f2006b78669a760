"""Exercise 1 (launch_model): hidden checks, more cases of its rules drawn from their own names.
Never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coursekit.course import FORMAT
from coursekit.lesson import H200_SWEEP
from grader.checks import Check, P, same
from grader.exercises.launch_model import ATTRS, decode_step_kwargs, report_rows, step_label

if TYPE_CHECKING:
    from grader.secret import Draw


def checks(draw: Draw) -> list[Check]:
    rows = report_rows(draw.rng("ex1.report_other_rows"), 4)
    r = draw.rng("ex1.simulate_edge_cases")
    kernels = [
        [],
        [0.0],
        [0.0] * r.randint(2, 9),
        [1000.0] * r.randint(2, 9),
        [float(r.randint(0, 2000)) for _ in range(200)],
    ]
    launches = (0.0, 5.0, float(r.randint(6, 40)))
    ns = sorted(H200_SWEEP)
    r = draw.rng("ex1.fit_h200_sweep")
    return [
        Check(
            "ex1",
            "report_other_rows",
            "report prints two lines per row in the lesson's format",
            [P("report", "report(other rows)", rows=rows)],
            hidden=True,
            idea=FORMAT,
            points=1,
        ),
        Check(
            "ex1",
            "simulate_edge_cases",
            "no kernels -> 0; zero launch cost; long chains",
            [
                P("simulate", f"simulate_eager_ms({len(k)} kernels, {launch})", kernel_us=k, launch_us=launch)
                for k in kernels
                for launch in launches
            ],
            hidden=True,
            points=1,
        ),
        Check(
            "ex1",
            "fit_h200_sweep",
            "least squares through the H200 sweep",
            [
                P("fit", "fit_launch_model(H200 sweep, eager)", n_kernels=ns, step_ms=[H200_SWEEP[n][0] for n in ns]),
                P("fit", "fit_launch_model(H200 sweep, graph)", n_kernels=ns, step_ms=[H200_SWEEP[n][1] for n in ns]),
            ]
            + [
                P("decode_step", step_label(kw, a), kwargs=kw, attr=a)
                for kw in [decode_step_kwargs(r) for _ in range(3)]
                for a in ATTRS
            ],
            compare=same(rel=1e-6, abs_=1e-9),
            hidden=True,
            points=1,
        ),
    ]
