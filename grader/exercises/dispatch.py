"""Exercise 6 (dispatch): the probes a worker runs on the submission's ``dispatch`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from coursekit.course import ARGUMENTS
from coursekit.strategies import MODES
from coursekit.vllm_recorded import dispatch_configs
from grader.checks import Check, P, acceptance
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
        keys = {m.name: (sorted(_desc(k) for k in ks) if isinstance(ks, (set, frozenset))
                         else f"<a {type(ks).__name__}, not a set>") for m, ks in keys.items()}
    sizes = d.capture_sizes
    return {"keys": keys, "capture_descs": descs,
            "capture_sizes": _not_a(sizes, list) or list(sizes)}


@probe
def dispatch(mod, mode: str, sizes: list, max_num_seqs: int, queries: list, q: int = 1):
    """Each query is ``[num_tokens, uniform_decode or None (left out), valid, invalid]``, the
    last two lists of runtime-mode names or None."""
    d = _dispatcher(mod, mode, sizes, max_num_seqs, q)
    M = mod.CUDAGraphMode
    out = []
    for n, uniform, valid, invalid in queries:
        kwargs = {} if uniform is None else {"uniform_decode": uniform}
        if valid is not None:
            kwargs["valid_modes"] = {M[v] for v in valid}
        if invalid is not None:
            kwargs["invalid_modes"] = {M[v] for v in invalid}
        result = call(d.dispatch, n, **kwargs)
        if _not_a(result, tuple):  # the docstring says the tuple (mode, descriptor)
            out.append(_not_a(result, tuple))
            continue
        mode_got, desc = result
        if type(desc) is not mod.BatchDescriptor:
            out.append(f"<a {type(desc).__name__}, not a BatchDescriptor>")
        else:
            out.append([mode_got.name, *_desc(desc)])
    return out


@probe
def dispatch_arg(mod, num_tokens, sizes: list | None = None, invalid: list | None = None):
    """``CudagraphDispatcher(FULL, sizes, 4).dispatch(num_tokens, ...)``: "accepted", or the
    error (what it answers is the dispatch check's)."""
    d = call(mod.CudagraphDispatcher, mod.CUDAGraphMode.FULL, list(sizes or [1, 2, 4]), 4)
    kwargs = {} if invalid is None else {"invalid_modes": {mod.CUDAGraphMode[v] for v in invalid}}
    call(d.dispatch, num_tokens, **kwargs)
    return "accepted"


@probe
def make_dispatcher(mod, mode: str, sizes: list, max_num_seqs, q=1):
    """Build one (a mode given as a plain string is not a CUDAGraphMode): "accepted", or the
    error (the sizes it keeps are the capture_descs check's)."""
    the_mode = mod.CUDAGraphMode[mode] if mode in mod.CUDAGraphMode.__members__ else mode
    call(mod.CudagraphDispatcher, the_mode, list(sizes), max_num_seqs, q)
    return "accepted"


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
    setups = [([1, 2, 4, 8, 16], r.randint(5, 7), 1), (small, r.randint(2, max(2, small[-1] - 1)), 1),
              ([r.randint(1, 2), 5, 7, 10, 16 + r.randint(0, 4)], r.randint(3, 6), r.choice((2, 3))),
              ([1, 2, 4, 8, 16, 24, 32], 40, 1)]
    c = r.choice(dispatch_configs())
    setups.append((c["capture_sizes"], c["max_num_seqs"], c["q"]))
    m, m2 = r.randint(2, 9), r.randint(2, 5)
    setups += [([1, m, m + 1, 2 * m + 3], m, 1),
               ([1, 2, 2 * m2 - 1, 2 * m2, 2 * m2 + 1, 2 * m2 + 2, 4 * m2 + 1], m2, 2),
               ([4, 5], r.randint(1, 6), 3)]
    q = r.randint(2, 5)  # one size between q and 2q: it rounds past itself, so [q] (q <= that size)
    setups.append(([r.randint(q + 1, 2 * q - 1)], r.randint(1, 8), q))
    return setups


#: (valid_modes, invalid_modes) of the dispatch queries, by runtime-mode name (None: left out);
#: the first is the default, an empty valid_modes means every runtime mode.
RESTRICTIONS = [(None, None), (None, ["FULL"]), (None, ["PIECEWISE"]), (["NONE"], None),
                (["FULL", "NONE"], None), ([], None), ([], ["FULL"])]


def queries_for(r: random.Random, sizes: list[int]) -> list[list]:
    top = max(sizes) + 2
    out = [[n, u, *RESTRICTIONS[0]] for n in range(1, top + 1) for u in (False, True)]
    out += [[r.randint(1, top), r.random() < 0.5, *res] for res in RESTRICTIONS[1:] for _ in range(4)]
    out += [[r.randint(1, top), None, None, None] for _ in range(3)]  # the flag left out
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
    r2 = draw.rng("ex6.dispatch_rejects")
    sizes = sorted(r2.sample(range(1, 64), 3))
    bad = (("full", [1, 2], 4, 1, "mode"), ("FULL", [0, 2], 4, 1, "capture_sizes"),
           ("FULL", [], 4, 1, "capture_sizes"), ("FULL", [1, 2.5], 4, 1, "capture_sizes"),
           ("FULL", [1, 2], 0, 1, "max_num_seqs"), ("FULL", [1, 2], 4.0, 1, "max_num_seqs"),
           ("FULL", [1, 2], 4, 0, "uniform_decode_query_len"),
           ("FULL", [1, 2], 4, 2.0, "uniform_decode_query_len"),
           ("FULL", [1, 2], 4, 3, "capture_sizes"))  # q one past the largest size
    good = (("NONE", [], 1, 1), ("FULL", [1, 2], 1, 1), ("FULL_AND_PIECEWISE", [1, 2], 4, 2))
    return [
        Check("ex6", "mode_table",
              "vLLM's CUDAGraphMode: values (pairs for the two-routine modes), NONE falsy, and "
              "separate_routine/decode_mode/mixed_mode/has_full_cudagraphs/has_piecewise_cudagraphs",
              [P("mode_table", f"CUDAGraphMode members and helpers, in the order {order}", order=order)],
              points=2),
        Check("ex6", "capture_descs",
              "keys: mixed keys per size (PIECEWISE BD(s); FULL BD(s, min(s, max_num_seqs), False)); "
              "decode FULL keys BD(s, min(s // q, max_num_seqs), True) for q <= s <= q * max_num_seqs "
              "in two-routine modes; sizes rounded up to multiples of q when decode is FULL ([q] when "
              "every one rounds past the largest); uniform_decode_query_len defaults to 1; "
              "keys() a dict of two sets, capture_sizes a list, capture_descs a list of (mode, BD) "
              "tuples: PIECEWISE keys then FULL keys, each largest first",
              [P("dispatcher_keys", f"CudagraphDispatcher({m}, {s}, max_num_seqs={n}, "
                 f"uniform_decode_query_len={q})", mode=m, sizes=s, max_num_seqs=n, q=q)
               for m in MODES for s, n, q in setups]
              + [P("dispatcher_keys", f"CudagraphDispatcher({m}, {default_q[0]}, max_num_seqs="
                   f"{default_q[1]}) (uniform_decode_query_len left out)", mode=m, sizes=default_q[0],
                   max_num_seqs=default_q[1], q=None) for m in MODES], points=2),
        Check("ex6", "dispatch",
              "allowed = valid_modes (None or empty: all) minus invalid_modes; NONE with exactly "
              "BD(n) (num_reqs None, uniform False) when the mode is NONE, n is above every size or "
              "only NONE is allowed; else pad to p and look up "
              "BD(p, min(p // q, max_num_seqs), True) for a uniform batch in a two-routine mode, "
              "BD(p, min(p, max_num_seqs), False) otherwise: FULL if allowed and a key, else "
              "PIECEWISE with BD(p) if allowed and a key, else NONE; uniform_decode defaults to "
              "False; the answer is a tuple",
              [P("dispatch", f"CudagraphDispatcher({m}, {s}, max_num_seqs={n}, "
                 f"uniform_decode_query_len={q}).dispatch(...)", mode=m, sizes=s, max_num_seqs=n, q=q,
                 queries=queries_for(r, s)) for m in MODES for s, n, q in dispatch_setups], points=3),
        Check("ex6", "dispatch_rejects",
              "ValueError naming the argument: num_tokens not an int >= 1, invalid_modes leaving no "
              "mode, a mode that is not a CUDAGraphMode, sizes not ints >= 1 or none (NONE with none "
              "is fine), max_num_seqs or uniform_decode_query_len not an int >= 1, a q above every "
              "size; good ones, at the limits too, are accepted",
              [P("dispatch_arg", f"dispatch({n})", "num_tokens", num_tokens=n)
               for n in (0, -r2.randint(1, 99), 2.0)]
              + [P("dispatch_arg", "dispatch(2, invalid_modes=every runtime mode)", "invalid_modes",
                   num_tokens=2, invalid=list(RUNTIME))]
              + [P("make_dispatcher", f"CudagraphDispatcher({m!r}, {s}, {n!r}, {q!r})", arg, mode=m, sizes=s,
                   max_num_seqs=n, q=q) for m, s, n, q, arg in bad]
              + [P("dispatch_arg", f"CudagraphDispatcher(FULL, {sizes}, 4).dispatch({n})", num_tokens=n,
                   sizes=sizes) for n in (1, r2.randint(2, 70))]
              + [P("make_dispatcher", f"CudagraphDispatcher({m}, {s}, {n}, {q})", mode=m, sizes=s,
                   max_num_seqs=n, q=q) for m, s, n, q in good],
              compare=acceptance(), idea=ARGUMENTS, points=1),
    ]
