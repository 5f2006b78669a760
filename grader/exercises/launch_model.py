"""Exercise 1 (launch_model): the probes a worker runs on the submission's ``launch_model`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from coursekit.course import FORMAT
from grader.checks import Check, P, same
from grader.probes import _as_list, call, probe

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


@probe
def decode_step(mod, kwargs: dict, attr: str):
    """``DecodeStep(**kwargs).<attr>``, called when it is a method."""
    value = call(getattr, call(mod.DecodeStep, **kwargs), attr)
    return call(value) if callable(value) else value


@probe
def seed_report(mod):
    return call(mod.report, mod.SEED_ROWS)


@probe
def seed_rows(mod):
    return [[label, float(step.weight_gib)] for label, step in mod.SEED_ROWS]


@probe
def report(mod, rows: list):
    return call(mod.report, [(label, call(mod.DecodeStep, **kwargs)) for label, kwargs in rows])


@probe
def simulate(mod, kernel_us: list, launch_us: float):
    return call(mod.simulate_eager_ms, list(kernel_us), launch_us)


@probe
def fit(mod, n_kernels: list, step_ms: list):
    return _as_list(call(mod.fit_launch_model, list(n_kernels), list(step_ms)))


# ------------------------------------------------------------------------- checks


ATTRS = ("n_kernels", "compute_ms", "launch_ms", "eager_ms", "graph_ms", "speedup")


def decode_step_kwargs(rng: random.Random) -> dict:
    return dict(
        weight_gib=round(rng.uniform(0.001, 200), 3),
        n_layers=rng.randint(0, 128),
        kernels_per_layer=rng.randint(0, 64),
        launch_us=round(rng.uniform(0, 50), 3),
        bandwidth_bps=rng.choice([1e9, 3.35e12, 1e12, 4.27e12, 8e11, round(rng.uniform(1e9, 9e12))]),
        gpu_node_us=rng.choice([0.0, 1.1, 2.5, round(rng.uniform(0, 5), 2)]),
    )


def step_label(kwargs: dict, attr: str) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    call = "()" if attr in ("eager_ms", "graph_ms", "speedup") else ""
    return f"DecodeStep({args}).{attr}{call}"


def report_rows(rng: random.Random, count: int) -> list:
    return [[f"row {rng.randint(0, 999)}", decode_step_kwargs(rng)] for _ in range(count)]


def fit_lines(rng: random.Random, count: int) -> list[tuple[list[int], list[float]]]:
    lines = []
    for _ in range(count):
        a, b = rng.uniform(0, 20), rng.uniform(0, 5)
        ns = rng.sample(range(1, 3000), rng.randint(2, 10))
        lines.append((ns, [b + n * a / 1e3 for n in ns]))
    return lines


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex1.decode_step_formulas")
    steps = [dict(weight_gib=5.5), dict(weight_gib=14.2)] + [decode_step_kwargs(r) for _ in range(20)]
    # Whole counts given as floats (a number >= 0): n_kernels is still an int.
    steps.append(dict(weight_gib=5.5, n_layers=float(r.randint(1, 64)), kernels_per_layer=float(r.randint(1, 32))))
    # No layers at all (zero is a valid field): the 10 kernels outside the layers remain.
    steps.append(
        dict(
            weight_gib=0.0,
            n_layers=0,
            kernels_per_layer=0,
            launch_us=float(r.randint(1, 9)),
            bandwidth_bps=round(r.uniform(1, 1e12), 1),
            gpu_node_us=0.0,
        )
    )
    r = draw.rng("ex1.simulate_eager_ms")
    kernels = [[float(r.randint(0, 50)) for _ in range(r.randint(0, 30))] for _ in range(25)]
    # Kernel times in fractions of a microsecond: nothing may round them.
    kernels += [[r.randint(1, 400) / 8 for _ in range(r.randint(1, 30))] for _ in range(3)]
    launches = [float(r.randint(0, 30)) for _ in kernels]
    r = draw.rng("ex1.fit_launch_model")
    lines = fit_lines(r, 10)
    repeated, single = r.randint(1, 500), r.randint(1, 500)
    # a line through 300 points: however long, a noiseless line is fitted exactly
    many_a, many_b, many_n = r.uniform(0, 20), r.uniform(0, 5), r.sample(range(1, 3000), 300)
    many = (many_n, [many_b + n * many_a / 1e3 for n in many_n])
    return [
        Check(
            "ex1",
            "decode_step_formulas",
            "n_kernels = layers*kernels_per_layer + 10 (an int); compute, launch, eager, graph "
            "and speedup follow the lesson's formulas",
            [P("decode_step", step_label(kw, a), kwargs=kw, attr=a) for kw in steps for a in ATTRS],
            points=3,
        ),
        Check(
            "ex1",
            "seed_report",
            "report(SEED_ROWS) prints the lesson's table byte for byte, and other rows in its format",
            [
                P("seed_report", "report(SEED_ROWS)"),
                P("seed_rows", "SEED_ROWS"),
                P("report", "report(other rows)", rows=report_rows(draw.rng("ex1.seed_report"), 2)),
            ],
            idea=FORMAT,
            points=2,
        ),
        Check(
            "ex1",
            "simulate_eager_ms",
            "kernel k starts at max(k*launch_us, end of kernel k-1); the result is the last end, in ms",
            [
                P("simulate", f"simulate_eager_ms({k}, {launch})", kernel_us=k, launch_us=launch)
                for k, launch in zip(kernels, launches)
            ],
            points=3,
        ),
        Check(
            "ex1",
            "fit_launch_model",
            "least squares: (launch_us per kernel, compute_ms); fewer than two distinct kernel "
            "counts is a ValueError naming n_kernels (a line through one x is not determined)",
            [P("fit", f"fit_launch_model({ns}, ...)", n_kernels=ns, step_ms=ms) for ns, ms in lines]
            + [
                P(
                    "fit",
                    "fit_launch_model(300 kernel counts on a line, 300 times)",
                    n_kernels=many[0],
                    step_ms=many[1],
                ),
                P(
                    "fit",
                    f"fit_launch_model([{repeated}, {repeated}], [1.0, 2.0])",
                    "n_kernels",
                    n_kernels=[repeated, repeated],
                    step_ms=[1.0, 2.0],
                ),
                P("fit", f"fit_launch_model([{single}], [1.0])", "n_kernels", n_kernels=[single], step_ms=[1.0]),
            ],
            compare=same(rel=1e-6, abs_=1e-9),
            points=2,
        ),
    ]
