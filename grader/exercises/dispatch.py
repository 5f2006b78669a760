"""Exercise 6 (dispatch): the probes a worker runs on the submission's ``dispatch`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from coursekit.strategies import MODES
from coursekit.vllm_recorded import dispatch_configs
from coursekit.vllm_runners import v2_dispatch_configs
from grader.checks import Check, P
from grader.probes import call, probe

if TYPE_CHECKING:
    from grader.secret import Draw

HELPERS = ("separate_routine", "decode_mode", "mixed_mode", "has_full_cudagraphs", "has_piecewise_cudagraphs")
RUNTIME = ("NONE", "PIECEWISE", "FULL")


# ------------------------------------------------------------------------- probes


def _plain(value):
    return value.name if hasattr(value, "name") and hasattr(value, "value") else value


@probe
def mode_table(mod, order: list | None = None):
    """For each member named in ``order``: its value (a pair as a list), its truth value and what
    each helper answers (a mode by its name)."""
    modes = mod.CUDAGraphMode
    names = order if order is not None else [m.name for m in modes]
    out = {"members": sorted(m.name for m in modes)}
    for n in names:
        m = modes[n]
        value = list(m.value) if isinstance(m.value, tuple) else m.value
        out[n] = [value, bool(m)] + [_plain(call(getattr(m, h))) for h in HELPERS]
    return out


def _desc(desc) -> list:
    return [desc.num_tokens, desc.num_reqs, desc.uniform]


def _dispatcher(mod, mode: str, sizes: list, max_num_seqs: int, q: int | None):
    """``CudagraphDispatcher(mode, sizes, max_num_seqs, q)``; ``q`` None: left out (its default)."""
    args = (mod.CUDAGraphMode[mode], list(sizes), max_num_seqs) + (() if q is None else (q,))
    return call(mod.CudagraphDispatcher, *args)


def _not_a(value, kind: type) -> str | None:
    """A marker for a value of the wrong container type (the docstring states each one)."""
    return None if type(value) is kind else f"<a {type(value).__name__}, not a {kind.__name__}>"


@probe
def dispatcher_keys(mod, mode: str, sizes: list, max_num_seqs: int, q: int | None = 1):
    """keys() (a dict of two sets), capture_descs() (a list of (mode, descriptor) tuples) and
    capture_sizes (a list); a container of another type answers a marker saying so."""
    d = _dispatcher(mod, mode, sizes, max_num_seqs, q)
    keys = call(d.keys)
    descs = call(d.capture_descs)
    if _not_a(descs, list):
        descs = _not_a(descs, list)
    else:
        descs = [_not_a(e, tuple) or [e[0].name, _desc(e[1])] for e in descs]
    if _not_a(keys, dict):
        keys = _not_a(keys, dict)
    else:
        keys = {
            m.name: (
                sorted(_desc(k) for k in ks)
                if isinstance(ks, (set, frozenset))
                else f"<a {type(ks).__name__}, not a set>"
            )
            for m, ks in keys.items()
        }
    sizes = d.capture_sizes
    return {"keys": keys, "capture_descs": descs, "capture_sizes": _not_a(sizes, list) or list(sizes)}


@probe
def dispatch(mod, mode: str, sizes: list, max_num_seqs: int, queries: list, q: int = 1):
    """Each query is ``[num_tokens, uniform_decode or None (left out), valid, invalid]``, the
    last two lists of runtime-mode names or None. The answers are keyed by the call, each a
    ``[mode, num_tokens, num_reqs, uniform]`` (a failure names the batch)."""
    d = _dispatcher(mod, mode, sizes, max_num_seqs, q)
    M = mod.CUDAGraphMode
    out = {}
    for n, uniform, valid, invalid in queries:
        name = ", ".join(
            [str(n)]
            + ([] if uniform is None else [f"uniform_decode={uniform}"])
            + ([] if valid is None else [f"valid_modes={valid}"])
            + ([] if invalid is None else [f"invalid_modes={invalid}"])
        )
        kwargs = {} if uniform is None else {"uniform_decode": uniform}
        if valid is not None:
            kwargs["valid_modes"] = {M[v] for v in valid}
        if invalid is not None:
            kwargs["invalid_modes"] = {M[v] for v in invalid}
        result = call(d.dispatch, n, **kwargs)
        if _not_a(result, tuple):  # the docstring says the tuple (mode, descriptor)
            out[f"dispatch({name})"] = _not_a(result, tuple)
            continue
        mode_got, desc = result
        if type(desc) is not mod.BatchDescriptor:
            out[f"dispatch({name})"] = f"<a {type(desc).__name__}, not a BatchDescriptor>"
        else:
            out[f"dispatch({name})"] = [mode_got.name, *_desc(desc)]
    return out


@probe
def dispatch_refused(
    mod, mode: str, sizes: list, max_num_seqs: int, num_tokens: int, valid: list | None, invalid: list | None
):
    """``CudagraphDispatcher(mode, sizes, max_num_seqs).dispatch(num_tokens, valid_modes=...,
    invalid_modes=...)`` (a list of runtime-mode names, None: left out), for a restriction that
    leaves no mode: the error it raises (an answer instead is spelled out)."""
    d = _dispatcher(mod, mode, sizes, max_num_seqs, None)
    M, kwargs = mod.CUDAGraphMode, {}
    if valid is not None:
        kwargs["valid_modes"] = {M[v] for v in valid}
    if invalid is not None:
        kwargs["invalid_modes"] = {M[v] for v in invalid}
    result = call(d.dispatch, num_tokens, **kwargs)
    return f"<answered {result!r}>"


@probe
def make_dispatcher(mod, mode: str, sizes: list, max_num_seqs: int, q: int = 1):
    """Build one, for sizes it cannot capture: the error it raises ("accepted" otherwise)."""
    call(mod.CudagraphDispatcher, mod.CUDAGraphMode[mode], list(sizes), max_num_seqs, q)
    return "accepted"


# -- part B: the V2 runner's CudaGraphManager


def _exec_desc(mod, desc) -> dict | str:
    """A BatchExecutionDescriptor field by field (a failure names the field that differs)."""
    if type(desc) is not mod.BatchExecutionDescriptor:
        return f"<a {type(desc).__name__}, not a BatchExecutionDescriptor>"
    return {
        "cg_mode": _plain(desc.cg_mode),
        "num_tokens": desc.num_tokens,
        "num_reqs": desc.num_reqs,
        "uniform_token_count": desc.uniform_token_count,
    }


def _manager(mod, mode: str, sizes: list, max_num_seqs: int, q: int | None):
    """``CudaGraphManager(mode, sizes, max_num_seqs, q)``; ``q`` None: left out (its default)."""
    args = (mod.CUDAGraphMode[mode], list(sizes), max_num_seqs) + (() if q is None else (q,))
    return call(mod.CudaGraphManager, *args)


def _descs(mod, descs) -> list | str:
    if _not_a(descs, list):
        return _not_a(descs, list)
    return [_exec_desc(mod, d) for d in descs]


@probe
def manager_graphs(mod, mode: str, sizes: list, max_num_seqs: int, q: int | None, tokens: list):
    """capture_descs() and candidates(n) for each n in ``tokens`` (lists of descriptors), keyed by
    the call (a failure names it)."""
    m = _manager(mod, mode, sizes, max_num_seqs, q)
    return {
        "capture_descs()": _descs(mod, call(m.capture_descs)),
        **{f"candidates({n})": _descs(mod, call(m.candidates, n)) for n in tokens},
    }


@probe
def manager_dispatch(mod, mode: str, sizes: list, max_num_seqs: int, q: int | None, queries: list):
    """Each query is ``[num_reqs, num_tokens, uniform_token_count or "left out"]``; the answers are
    keyed by the call (a failure names the batch and the field)."""
    m = _manager(mod, mode, sizes, max_num_seqs, q)
    out = {}
    for r, n, u in queries:
        name = f"dispatch({r}, {n})" if u == "left out" else f"dispatch({r}, {n}, {u})"
        out[name] = _exec_desc(mod, call(m.dispatch, r, n) if u == "left out" else call(m.dispatch, r, n, u))
    return out


@probe
def uniform_counts(mod, batches: list):
    """``get_uniform_token_count(num_reqs, num_tokens, max_query_len)`` for each batch, keyed by the call."""
    return {
        f"get_uniform_token_count({a}, {b}, {c})": call(mod.get_uniform_token_count, a, b, c) for a, b, c in batches
    }


# ------------------------------------------------------------------------- checks


def dispatcher_setups(r: random.Random) -> list[tuple[list[int], int, int]]:
    """(sizes, max_num_seqs, q) that tell vLLM's rule from the plausible wrong ones, in every draw:
    decode graphs cut at max_num_seqs requests (a max_num_seqs below the largest size), num_reqs
    capped (a mixed FULL size above max_num_seqs), sizes rounded to multiples of q (q > 1, sizes
    that are not multiples of it, one rounding past the largest), and one of vLLM's recorded
    configurations; then the limits, at them and one past: a size exactly q * max_num_seqs and
    the next one (q = 1, and q = 2 after rounding), and sizes that all round past the largest
    (the sizes become [q]), also from a single size."""
    small = sorted(r.sample(range(1, 33), r.randint(3, 6)))
    setups = [
        ([1, 2, 4, 8, 16], r.randint(5, 7), 1),
        (small, r.randint(2, max(2, small[-1] - 1)), 1),
        ([r.randint(1, 2), 5, 7, 10, 16 + r.randint(0, 4)], r.randint(3, 6), r.choice((2, 3))),
        ([1, 2, 4, 8, 16, 24, 32], 40, 1),
    ]
    c = r.choice(dispatch_configs())
    setups.append((c["capture_sizes"], c["max_num_seqs"], c["q"]))
    m, m2 = r.randint(2, 9), r.randint(2, 5)
    setups += [
        ([1, m, m + 1, 2 * m + 3], m, 1),
        ([1, 2, 2 * m2 - 1, 2 * m2, 2 * m2 + 1, 2 * m2 + 2, 4 * m2 + 1], m2, 2),
        ([4, 5], r.randint(1, 6), 3),
    ]
    q = r.randint(2, 5)  # one size between q and 2q: it rounds past itself, so [q] (q <= that size)
    setups.append(([r.randint(q + 1, 2 * q - 1)], r.randint(1, 8), q))
    return setups


#: (valid_modes, invalid_modes) that leave no runtime mode allowed: a ValueError naming invalid_modes
#: (an empty valid_modes is every mode, so every one must be invalid).
NO_MODE_LEFT = [
    (None, list(RUNTIME)),
    (["FULL"], ["FULL"]),
    (["NONE", "PIECEWISE"], list(RUNTIME)),
    ([], list(RUNTIME)),
    (["NONE"], ["NONE"]),
]

#: (valid_modes, invalid_modes) of the dispatch queries, by runtime-mode name (None: left out);
#: the first is the default, an empty valid_modes means every runtime mode.
RESTRICTIONS = [
    (None, None),
    (None, ["FULL"]),
    (None, ["PIECEWISE"]),
    (["NONE"], None),
    (["FULL", "NONE"], None),
    ([], None),
    ([], ["FULL"]),
]


def queries_for(r: random.Random, sizes: list[int]) -> list[list]:
    top = max(sizes) + 2
    out = [[n, u, *RESTRICTIONS[0]] for n in range(1, top + 1) for u in (False, True)]
    out += [[r.randint(1, top), r.random() < 0.5, *res] for res in RESTRICTIONS[1:] for _ in range(4)]
    out += [[r.randint(1, top), None, None, None] for _ in range(3)]  # the flag left out
    return out


def manager_setups(r: random.Random) -> list[tuple[list[int], int, int | None]]:
    """(sizes, max_num_seqs, q) for the V2 manager: V1's setups (q above 1 with sizes that are not
    its multiples; decode graphs cut at q * max_num_seqs; two sizes rounding to one r), one of
    vLLM's recorded V2 configurations, no sizes, and q left out."""
    setups = [(s, n, q) for s, n, q in dispatcher_setups(r)]
    c = r.choice(v2_dispatch_configs())
    setups.append((c["capture_sizes"], c["max_num_seqs"], c["q"]))
    setups += [([], r.randint(1, 8), 1), (sorted(r.sample(range(1, 40), 5)), r.randint(2, 9), None)]
    return setups


def manager_queries(r: random.Random, sizes: list[int], max_num_seqs: int, q: int | None) -> list[list]:
    """Every token count up to two past the largest size, as a uniform-decode batch (ceil(n / q)
    requests and their uniform count) and as a mixed one (min(n, max_num_seqs) requests); then
    batches with more requests than max_num_seqs, uniform counts that are not q, and the count
    left out."""
    q1 = q or 1
    top = max(sizes, default=1) + 2
    out = []
    for n in range(1, top + 1):
        reqs = -(-n // q1)
        out.append([reqs, n, q1 if n == q1 * reqs else None])
        out.append([min(n, max_num_seqs), n, None])
    for _ in range(6):
        n = r.randint(1, top)
        out.append([r.randint(1, n), n, r.choice([None, q1, q1 + 1, r.randint(1, 4)])])
    out += [
        [max_num_seqs + 1, max(max_num_seqs + 1, r.randint(1, top)), r.choice([None, 1])],
        [1, r.randint(1, top), "left out"],
        [1, 1, "left out"],
    ]
    return out


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex6.mode_table")
    order = list(MODES)
    r.shuffle(order)
    r = draw.rng("ex6.capture_descs")
    setups = dispatcher_setups(r)
    default_q = (sorted({1, r.randint(2, 4) * 2 + 1, r.randint(5, 9) * 2 + 1}), r.randint(2, 6))
    r = draw.rng("ex6.dispatch")
    dispatch_setups = dispatcher_setups(r)
    r2 = draw.rng("ex6.capture_descs.refused")
    none_n = r2.randint(1, 8)
    few = sorted(r2.sample(range(1, 17), r2.randint(1, 3)))  # q above them all: one past, and further
    past, far = few[-1] + 1, few[-1] + r2.randint(2, 6)
    decode_full = [m for m in MODES if m.startswith("FULL")]  # the modes whose decode_mode() is FULL
    refused_sizes = [(m, [], r2.randint(1, 8), 1) for m in MODES if m != "NONE"] + [
        (m, few, r2.randint(1, 8), q) for m in decode_full for q in (past, far)
    ]
    kept_sizes = (
        [("NONE", [], none_n, 1), ("NONE", [], none_n, r2.randint(2, 5))]
        + [(m, few, r2.randint(1, 8), few[-1]) for m in MODES]  # q the largest size: [q]
        + [(m, few, r2.randint(1, 8), q) for m in MODES if m not in decode_full for q in (past, far)]
    )
    r3 = draw.rng("ex6.dispatch.refused")
    refused_sizes_d = sorted(r3.sample(range(1, 33), 3))
    refused_calls = [
        (m, r3.randint(1, refused_sizes_d[-1]), valid, invalid) for m in MODES for valid, invalid in NO_MODE_LEFT
    ]
    refused_calls += [(m, refused_sizes_d[-1] + r3.randint(1, 9), None, list(RUNTIME)) for m in MODES]
    r4 = draw.rng("ex6.v2_capture_descs")
    graph_setups = manager_setups(r4)
    r5 = draw.rng("ex6.v2_dispatch")
    v2_setups = manager_setups(r5)
    batches = [[r5.randint(1, 12), 0, r5.randint(1, 4)] for _ in range(12)]
    batches = [[reqs, reqs * r5.choice((per, per, per + 1, 1)), per] for reqs, _, per in batches]
    batches += [[3, 5, 2], [1, 1, 1], [4, 4, 1], [2, 7, 3], [5, 15, 3], [1, 3, 3]]
    return [
        Check(
            "ex6",
            "mode_table",
            "vLLM's CUDAGraphMode: values (pairs for the two-routine modes), NONE falsy, and "
            "separate_routine/decode_mode/mixed_mode/has_full_cudagraphs/has_piecewise_cudagraphs",
            [P("mode_table", f"CUDAGraphMode members and helpers, in the order {order}", order=order)],
            points=1,
        ),
        Check(
            "ex6",
            "capture_descs",
            "keys: mixed keys per size (PIECEWISE BD(s); FULL BD(s, min(s, max_num_seqs), False)); "
            "decode FULL keys BD(s, min(s // q, max_num_seqs), True) for q <= s <= q * max_num_seqs "
            "in two-routine modes; sizes rounded up to multiples of q when decode is FULL ([q] when "
            "every one rounds past the largest; with decode FULL, a q above every size is a "
            "ValueError naming capture_sizes); a mode other than NONE with no size is a ValueError "
            "naming capture_sizes (NONE with none is fine); uniform_decode_query_len defaults to 1; "
            "keys() a dict of two sets, capture_sizes a list, capture_descs a list of (mode, BD) "
            "tuples: PIECEWISE keys then FULL keys, each largest first",
            [
                P(
                    "dispatcher_keys",
                    f"CudagraphDispatcher({m}, {s}, max_num_seqs={n}, uniform_decode_query_len={q})",
                    mode=m,
                    sizes=s,
                    max_num_seqs=n,
                    q=q,
                )
                for m in MODES
                for s, n, q in setups
            ]
            + [
                P(
                    "dispatcher_keys",
                    f"CudagraphDispatcher({m}, {default_q[0]}, max_num_seqs="
                    f"{default_q[1]}) (uniform_decode_query_len left out)",
                    mode=m,
                    sizes=default_q[0],
                    max_num_seqs=default_q[1],
                    q=None,
                )
                for m in MODES
            ]
            + [
                P(
                    "dispatcher_keys",
                    f"CudagraphDispatcher({m}, {s}, max_num_seqs={n}, uniform_decode_query_len={q})",
                    mode=m,
                    sizes=s,
                    max_num_seqs=n,
                    q=q,
                )
                for m, s, n, q in kept_sizes
            ]
            + [
                P(
                    "make_dispatcher",
                    f"CudagraphDispatcher({m}, {s}, max_num_seqs={n}, uniform_decode_query_len={q})",
                    "capture_sizes",
                    mode=m,
                    sizes=s,
                    max_num_seqs=n,
                    q=q,
                )
                for m, s, n, q in refused_sizes
            ],
            points=2,
        ),
        Check(
            "ex6",
            "dispatch",
            "allowed = valid_modes (None or empty: all) minus invalid_modes; NONE with exactly "
            "BD(n) (num_reqs None, uniform False) when the mode is NONE, n is above every size or "
            "only NONE is allowed; else pad to p and look up "
            "BD(p, min(p // q, max_num_seqs), True) for a uniform batch in a two-routine mode, "
            "BD(p, min(p, max_num_seqs), False) otherwise: FULL if allowed and a key, else "
            "PIECEWISE with BD(p) if allowed and a key, else NONE; uniform_decode defaults to "
            "False; the answer is a tuple; a restriction that leaves no mode allowed is a "
            "ValueError naming invalid_modes (in every mode, for any num_tokens)",
            [
                P(
                    "dispatch",
                    f"CudagraphDispatcher({m}, {s}, max_num_seqs={n}, uniform_decode_query_len={q}).dispatch(...)",
                    mode=m,
                    sizes=s,
                    max_num_seqs=n,
                    q=q,
                    queries=queries_for(r, s),
                )
                for m in MODES
                for s, n, q in dispatch_setups
            ]
            + [
                P(
                    "dispatch_refused",
                    f"CudagraphDispatcher({m}, {refused_sizes_d}, 4).dispatch({n}, "
                    f"valid_modes={valid}, invalid_modes={invalid})",
                    "invalid_modes",
                    mode=m,
                    sizes=refused_sizes_d,
                    max_num_seqs=4,
                    num_tokens=n,
                    valid=valid,
                    invalid=invalid,
                )
                for m, n, valid, invalid in refused_calls
            ],
            points=3,
        ),
        Check(
            "ex6",
            "v2_capture_descs",
            "V2 (CudaGraphManager): per size s ascending, in a two-routine mode a decode graph "
            "(FULL, r, r // q, q) at r = s rounded up to a multiple of q unless r > q * max_num_seqs, "
            "r > the largest size or it is already there; then a mixed graph (PIECEWISE, s, None) or "
            "(FULL, s, min(s, max_num_seqs)); sizes not rounded; NONE or no sizes: no graphs; "
            "capture_descs a list, PIECEWISE then FULL, each largest first; candidates(n) the graphs "
            "at the smallest token count >= n, decode graph first, [] above every graph; "
            "decode_query_len defaults to 1",
            [
                P(
                    "manager_graphs",
                    f"CudaGraphManager({m}, {s}, max_num_seqs={n}"
                    + ("" if q is None else f", decode_query_len={q}")
                    + ")",
                    mode=m,
                    sizes=s,
                    max_num_seqs=n,
                    q=q,
                    tokens=list(range(1, max(s, default=1) + 3)),
                )
                for m in MODES
                for s, n, q in graph_setups
            ],
            points=1,
        ),
        Check(
            "ex6",
            "v2_dispatch",
            "V2: dispatch(num_reqs, num_tokens, uniform_token_count=None) answers the first of "
            "candidates(num_tokens) whose uniform_token_count is None or the batch's and whose "
            "num_reqs is None or >= the batch's, else (NONE, num_tokens, num_reqs, None): never a "
            "larger token count, no cap at max_num_seqs; get_uniform_token_count(num_reqs, "
            "num_tokens, max_query_len) is max_query_len when num_tokens == max_query_len * "
            "num_reqs, else None",
            [
                P(
                    "manager_dispatch",
                    f"CudaGraphManager({m}, {s}, max_num_seqs={n}"
                    + ("" if q is None else f", decode_query_len={q}")
                    + ").dispatch(...)",
                    mode=m,
                    sizes=s,
                    max_num_seqs=n,
                    q=q,
                    queries=manager_queries(r5, s, n, q),
                )
                for m in MODES
                for s, n, q in v2_setups
            ]
            + [P("uniform_counts", f"get_uniform_token_count on {batches}", batches=batches)],
            points=1,
        ),
    ]
