"""Exercise 6 (dispatch): the probes a worker runs on the submission's ``dispatch`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coursekit.strategies import MODES
from grader.checks import Check, P
from grader.probes import call, probe

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


@probe
def mode_pairs(mod, order: list | None = None):
    """``[name, decode_mode().name, mixed_mode().name]`` for the members named in ``order``."""
    modes = mod.CUDAGraphMode
    names = order if order is not None else [m.name for m in modes]
    return [[n, call(modes[n].decode_mode).name, call(modes[n].mixed_mode).name] for n in names]


@probe
def mode_names(mod):
    return sorted(m.name for m in mod.CUDAGraphMode)


def _desc(mode_and_desc) -> list:
    """[mode, num_tokens, uniform_decode]; for NONE just [mode, num_tokens]: an eager batch's
    descriptor may carry either uniform flag."""
    mode, desc = mode_and_desc
    if mode.name == "NONE":
        return [mode.name, desc.num_tokens]
    return [mode.name, desc.num_tokens, desc.uniform_decode]


@probe
def capture_descs(mod, mode: str, sizes: list):
    dispatcher = call(mod.CudagraphDispatcher, mod.CUDAGraphMode[mode], list(sizes))
    descs = call(dispatcher.capture_descs)
    if type(descs) is not list:  # the signature says a list
        return f"<a {type(descs).__name__}, not a list>"
    return [_desc(d) for d in descs]


@probe
def dispatch(mod, mode: str, sizes: list, queries: list):
    """Each query is ``[num_tokens, uniform_decode]``; ``None`` for the flag calls without it."""
    dispatcher = call(mod.CudagraphDispatcher, mod.CUDAGraphMode[mode], list(sizes))
    return [_desc(call(dispatcher.dispatch, n) if u is None else call(dispatcher.dispatch, n, uniform_decode=u))
            for n, u in queries]


@probe
def dispatch_arg(mod, num_tokens: int, sizes: list | None = None):
    dispatcher = call(mod.CudagraphDispatcher, mod.CUDAGraphMode.FULL, list(sizes or [1, 2, 4]))
    return _desc(call(dispatcher.dispatch, num_tokens))


# ------------------------------------------------------------------------- checks


def checks(draw: Draw) -> list[Check]:
    r = draw.rng("ex6.mode_table")
    order = [m for m in MODES]
    r.shuffle(order)
    r = draw.rng("ex6.capture_descs")
    size_lists = [[1, 2, 4, 8], [r.randint(1, 64) for _ in range(5)], [r.randint(1, 32)],
                  [r.randint(1, 8) for _ in range(4)]]
    r = draw.rng("ex6.dispatch")
    dispatch_lists = [[1, 2, 4, 8]] + [[r.randint(1, 64) for _ in range(r.randint(1, 6))] for _ in range(3)]
    queries = [[r.randint(1, 80), r.random() < 0.5] for _ in range(12)] + [[1, True], [8, False]]
    queries += [[r.randint(1, 70), None] for _ in range(4)] + [[1, None]]  # the flag left out
    r = draw.rng("ex6.dispatch_rejects")
    sizes = sorted(r.sample(range(1, 64), 3))
    return [
        Check("ex6", "mode_table", "decode_mode()/mixed_mode() follow vLLM's table",
              [P("mode_names", "the members of CUDAGraphMode"),
               P("mode_pairs", f"decode/mixed modes of {order}", order=order)], points=2),
        Check("ex6", "capture_descs",
              "a list: the mixed group (if not NONE) then the uniform-decode FULL group (if decode "
              "is FULL and mixed is not), each largest first",
              [P("capture_descs", f"CudagraphDispatcher({m}, {s}).capture_descs()", mode=m, sizes=s)
               for m in MODES for s in size_lists], points=3),
        Check("ex6", "dispatch",
              "NONE unpadded for NONE or oversized batches; else the uniform FULL graph if captured, "
              "else the mixed graph, else NONE; never an uncaptured key; uniform_decode defaults "
              "to False",
              [P("dispatch", f"CudagraphDispatcher({m}, {s}).dispatch(...)", mode=m, sizes=s,
                 queries=queries) for m in MODES for s in dispatch_lists], points=4),
        Check("ex6", "dispatch_rejects",
              "num_tokens < 1 is a ValueError naming num_tokens; 1 and more are dispatched",
              [P("dispatch_arg", f"dispatch({n})", "num_tokens", num_tokens=n)
               for n in (0, -r.randint(1, 99))]
              + [P("dispatch_arg", f"CudagraphDispatcher(FULL, {sizes}).dispatch({n})", num_tokens=n,
                   sizes=sizes) for n in (1, r.randint(2, 70))], points=1),
    ]
