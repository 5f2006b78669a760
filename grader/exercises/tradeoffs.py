"""Exercise 9 (tradeoffs): the probes a worker runs on the submission's ``tradeoffs`` and the
public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are the
staff repository's, never released."""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

from coursekit import lesson
from coursekit.lesson import QWEN25_7B_KV
from grader.checks import Check, P
from grader.probes import _as_list, call, probe

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


def _rows(value):
    """A timeline as lists, so that a tuple per kernel and a list per kernel answer alike."""
    if isinstance(value, list):
        return [_as_list(row) for row in value]
    return value


@probe
def timeline(mod, kernel_us: list, launch_us):
    return _rows(call(mod.eager_timeline, kernel_us, launch_us))


@probe
def tau_star(mod, kernel_us: list):
    return call(mod.cpu_bound_launch_us, kernel_us)


@probe
def implied(mod, eager_ms, compute_ms, n_kernels):
    return _as_list(call(mod.implied_launch_us, eager_ms, compute_ms, n_kernels))


@probe
def kv_bytes(mod, kwargs: dict):
    return call(mod.kv_bytes_per_token, **kwargs)


@probe
def graph_memory(mod, per_graph_bytes: list, kwargs: dict | None = None, once: bool = False):
    """``graph_memory_bytes(footprints, **kwargs)`` (no ``shared_pool`` in ``kwargs``: its default);
    ``once``: the footprints come as an iterator (read once)."""
    footprints = iter(per_graph_bytes) if once else list(per_graph_bytes)
    return call(mod.graph_memory_bytes, footprints, **(kwargs or {}))


@probe
def tokens(mod, graph_bytes, bytes_per_token, runner: str | None = None):
    """``kv_tokens_forgone(graph_bytes, bytes_per_token)``, with ``runner=`` when one is given
    (``None``: its default)."""
    if runner is None:
        return call(mod.kv_tokens_forgone, graph_bytes, bytes_per_token)
    return call(mod.kv_tokens_forgone, graph_bytes, bytes_per_token, runner=runner)


# ------------------------------------------------------------------------- inputs


def kernel_profile(rng: random.Random) -> list[float]:
    """Kernel times in microseconds, of one of the shapes a decode step has."""
    n = rng.randint(2, 40)
    shape = rng.choice(("tiny", "long", "mixed", "fractions"))
    if shape == "tiny":
        return [float(rng.randint(0, 4)) for _ in range(n)]
    if shape == "long":
        return [float(rng.randint(20, 200)) for _ in range(n)]
    if shape == "mixed":  # a layer: a few long GEMMs among many tiny elementwise kernels
        return [float(rng.choice((rng.randint(30, 120), rng.randint(1, 5), rng.randint(1, 5)))) for _ in range(n)]
    return [rng.randint(1, 400) / 8 for _ in range(n)]


def kv_config(rng: random.Random) -> dict:
    return dict(
        n_layers=rng.randint(1, 96),
        n_kv_heads=rng.choice((1, 2, 4, 8, rng.randint(1, 64))),
        head_dim=rng.choice((64, 80, 128, 256, rng.randint(1, 300))),
        dtype_bytes=rng.choice((1, 2, 4)),
    )


# ------------------------------------------------------------------------- checks

#: Qwen2.5-7B's KV shape, dtype_bytes left to its default (2, bf16).
QWEN = {k: v for k, v in QWEN25_7B_KV.items() if k != "dtype_bytes"}


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex9.eager_timeline")
    profiles = [kernel_profile(r) for _ in range(12)] + [[], [float(r.randint(1, 50))]]
    launches = [float(r.randint(0, 30)) + r.choice((0.0, 0.25, 0.5)) for _ in profiles]
    # ints in, floats out: "times in microseconds, as floats"
    profiles.append([r.randint(0, 50) for _ in range(r.randint(2, 12))])
    launches.append(r.randint(1, 20))
    r = draw.rng("ex9.cpu_bound_launch_us")
    star = [kernel_profile(r) for _ in range(12)]
    t = float(r.randint(1, 40))
    star += [
        [],
        [t],
        [t] * r.randint(2, 30),  # equal kernels: tau* is their length
        [1.0] + [float(r.randint(50, 100))] * r.randint(1, 9),  # a short first kernel decides
        [float(r.randint(50, 100))] * r.randint(1, 9) + [1.0],
    ]  # a short last kernel does not
    r = draw.rng("ex9.implied_launch_us")
    implied = [(step["eager_ms"], step["graph_ms"], step["kernels"]) for step in lesson.H200_DECODE_7B.values()]
    for _ in range(8):
        eager = round(r.uniform(0.01, 200), 4)
        implied.append((eager, round(eager * r.uniform(0, 1), 4), r.randint(1, 5000)))
    implied.append((eager, eager, r.randint(1, 5000)))  # compute = eager is allowed: tau 0 if additive
    r = draw.rng("ex9.kv_bytes_per_token")
    configs = [QWEN] + [kv_config(r) for _ in range(10)]
    r = draw.rng("ex9.graph_memory_bytes")
    footprints = [[r.randint(0, 2**33) for _ in range(r.randint(1, 12))] for _ in range(6)]
    pools = [(f, shared, once) for f in footprints for shared in (True, False) for once in (False, True)]
    pools += [([], True, False), ([], False, True), ([r.randint(0, 2**30)], False, False)]
    r = draw.rng("ex9.kv_tokens_forgone")
    per_token = 2 * math.prod(QWEN25_7B_KV.values())  # a key and a value: 57344 bytes
    forgone = [
        (1024**3, per_token),
        (per_token * r.randint(1, 999), per_token),
        (per_token * r.randint(1, 999) - 1, per_token),
        (0, per_token),
        (per_token - 1, per_token),
    ]
    forgone += [(r.randint(0, 2**40), r.randint(1, 2**22)) for _ in range(8)]
    r = draw.rng("ex9.kv_tokens_by_runner")
    # V1 takes its graph estimate out of the KV cache, V2 sizes the cache before capture: the same
    # graphs under both runners, the lesson's GiB among them.
    by_runner = [(1024**3, per_token), (per_token * r.randint(1, 999) - 1, per_token), (0, per_token)]
    by_runner += [(r.randint(1, 2**40), r.randint(1, 2**22)) for _ in range(5)]
    longer, extra = round(r.uniform(1, 50), 3), round(r.uniform(0.001, 5), 3)
    return [
        Check(
            "ex9",
            "eager_timeline",
            "one (launched, start, end) per kernel: launched at k*launch_us, started at max(k*launch_us, "
            "end of kernel k-1), ended kernel_us[k-1] later (us); no kernels -> []",
            [
                P("timeline", f"eager_timeline({k}, {launch})", kernel_us=k, launch_us=launch)
                for k, launch in zip(profiles, launches)
            ],
            points=1,
        ),
        Check(
            "ex9",
            "cpu_bound_launch_us",
            "tau* = the smallest mean of the first m kernels, m = 1 .. N-1; fewer than two kernels -> math.inf",
            [P("tau_star", f"cpu_bound_launch_us({k})", kernel_us=k) for k in star],
            points=1,
        ),
        Check(
            "ex9",
            "implied_launch_us",
            "(additive, cpu_bound) = ((eager_ms - compute_ms) * 1e3 / n_kernels, eager_ms * 1e3 / n_kernels); "
            "compute_ms > eager_ms is a ValueError naming compute_ms (no model explains it)",
            [
                P("implied", f"implied_launch_us({e}, {c}, {n})", eager_ms=e, compute_ms=c, n_kernels=n)
                for e, c, n in implied
            ]
            + [
                P(
                    "implied",
                    f"implied_launch_us({longer}, {longer + extra}, 10)",
                    "compute_ms",
                    eager_ms=longer,
                    compute_ms=longer + extra,
                    n_kernels=10,
                )
            ],
            points=1,
        ),
        Check(
            "ex9",
            "kv_bytes_per_token",
            "2 * n_layers * n_kv_heads * head_dim * dtype_bytes, an int (dtype_bytes defaults to 2)",
            [P("kv_bytes", f"kv_bytes_per_token(**{kw})", kwargs=kw) for kw in configs],
            points=1,
        ),
        Check(
            "ex9",
            "graph_memory_bytes",
            "shared_pool=True (the default): the largest footprint; False: the sum; no graphs -> 0; an int; "
            "any iterable",
            [
                P(
                    "graph_memory",
                    f"graph_memory_bytes({'iter' if once else ''}({f}), shared_pool={s})",
                    per_graph_bytes=f,
                    kwargs={"shared_pool": s},
                    once=once,
                )
                for f, s, once in pools
            ]
            + [P("graph_memory", f"graph_memory_bytes({f})", per_graph_bytes=f) for f in footprints[:3]],
            points=1,
        ),
        Check(
            "ex9",
            "kv_tokens_forgone",
            "whole tokens: graph_bytes // bytes_per_token, an int (runner defaults to \"v1\")",
            [P("tokens", f"kv_tokens_forgone({g}, {b})", graph_bytes=g, bytes_per_token=b) for g, b in forgone],
            points=1,
        ),
        Check(
            "ex9",
            "kv_tokens_by_runner",
            "runner \"v1\": its graph estimate leaves the KV cache's budget, graph_bytes // bytes_per_token; "
            "runner \"v2\": the KV cache is sized before capture, the int 0 (vLLM 0.26.0)",
            [
                P(
                    "tokens",
                    f"kv_tokens_forgone({g}, {b}, runner={runner!r})",
                    graph_bytes=g,
                    bytes_per_token=b,
                    runner=runner,
                )
                for g, b in by_runner
                for runner in ("v1", "v2")
            ],
            points=1,
        ),
    ]
