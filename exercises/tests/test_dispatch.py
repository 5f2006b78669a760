"""Exercise 6 · dispatch — a vLLM-style CUDA-graph dispatcher. Run: python -m pytest exercises -m ex6

The oracle is vLLM 0.26.0 itself: its answers were recorded from its own code
(coursekit/vllm_recorded.py) for every mode over 180 configurations (36,000 answers) of capture sizes,
max_num_seqs and query length q, with and without valid_modes / invalid_modes.
"""

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from coursekit import strategies as S
from coursekit.checks import check_rejects
from coursekit.vllm_recorded import VLLM_VERSION, dispatch_configs, mode_table, recorded

pytestmark = pytest.mark.ex6

HELPERS = ("separate_routine", "decode_mode", "mixed_mode", "has_full_cudagraphs", "has_piecewise_cudagraphs")
RULE = ("  rule: pad to p = padded_size(n); a uniform batch in a two-routine mode looks up "
        "BD(p, min(p // q, max_num_seqs), True), any other BD(p, min(p, max_num_seqs), False): "
        "FULL if allowed and a FULL key, else PIECEWISE with BD(p) if allowed and a key, else "
        "(NONE, BD(n))")


def plain(value):
    return value.name if hasattr(value, "name") else value


def encode(mode, desc) -> str:
    """A dispatch answer in the recording's notation: 'N', 'Ft,r,u', 'Pt' or 'Pt,r,u'."""
    short = desc.num_reqs is None and not desc.uniform
    if mode.name == "NONE" and short:
        return "N"  # the descriptor's num_tokens is checked by test_dispatch_only_returns_keys
    return f"{mode.name[0]}{desc.num_tokens}" + ("" if short else f",{desc.num_reqs},{int(desc.uniform)}")


def restrictions(dispatch):
    M = dispatch.CUDAGraphMode
    return {name: tuple(None if v is None else {M[m] for m in v} for v in pair)
            for name, pair in recorded()["dispatch"]["restrictions"].items()}


def build(dispatch, c):
    return dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[c["mode"]], list(c["capture_sizes"]),
                                        c["max_num_seqs"], c["q"])


def described(c) -> str:
    return (f"CudagraphDispatcher({c['mode']}, {c['capture_sizes']}, max_num_seqs={c['max_num_seqs']}, "
            f"uniform_decode_query_len={c['q']})")


# ------------------------------------------------------------------------------- modes


@pytest.mark.parametrize("name", list(mode_table()))
def test_modes_are_vllms(dispatch, name):
    mode, want = dispatch.CUDAGraphMode[name], mode_table()[name]
    value = list(mode.value) if isinstance(mode.value, tuple) else mode.value
    assert value == want["value"] and bool(mode) is want["bool"], (
        f"CUDAGraphMode.{name}: vLLM {VLLM_VERSION} has value {want['value']} and bool {want['bool']}, "
        f"got {mode.value!r} and {bool(mode)}")
    for helper in HELPERS:
        got = plain(getattr(mode, helper)())
        assert got == want[helper], (
            f"CUDAGraphMode.{name}.{helper}(): vLLM {VLLM_VERSION} answers {want[helper]!r}, got {got!r}")


# ------------------------------------------------------------------------------- keys and dispatch


def test_keys_and_capture_order_are_vllms(dispatch):
    for c in dispatch_configs():
        d = build(dispatch, c)
        keys = {m.name: sorted([k.num_tokens, k.num_reqs, k.uniform] for k in ks) for m, ks in d.keys().items()}
        assert keys == c["keys"], (
            f"{described(c)}.keys() as [num_tokens, num_reqs, uniform]:\n  vLLM {VLLM_VERSION}: "
            f"{c['keys']}\n  got:        {keys}\n  rule: mixed keys per size (PIECEWISE BD(s); FULL "
            "BD(s, min(s, max_num_seqs), False)); decode FULL keys for q <= s <= q * max_num_seqs "
            "in two-routine modes; sizes first rounded to multiples of q when decode is FULL")
        descs = d.capture_descs()
        assert type(descs) is list, f"capture_descs() must return a list, got a {type(descs).__name__}"
        got = [[m.name, [x.num_tokens, x.num_reqs, x.uniform]] for m, x in descs]
        want = [[m, x] for m, xs in c["capture_descs"] for x in xs]
        assert got == want, (
            f"{described(c)}.capture_descs():\n  vLLM {VLLM_VERSION}: {want}\n  got:        {got}\n"
            "  rule: the PIECEWISE keys, then the FULL keys, each largest num_tokens first")


def test_dispatch_is_vllms(dispatch):
    limits = restrictions(dispatch)
    for c in dispatch_configs():
        d = build(dispatch, c)
        for name, answers in c["dispatch"].items():
            limit, uniform = name.rsplit(" uniform=", 1)
            valid, invalid = limits[limit]
            for n, want in enumerate(answers, start=1):
                got = encode(*d.dispatch(n, bool(int(uniform)), valid, invalid))
                assert got == want, (
                    f"{described(c)}.dispatch({n}, uniform_decode={bool(int(uniform))}, "
                    f"valid_modes={valid and sorted(m.name for m in valid)}, invalid_modes="
                    f"{invalid and sorted(m.name for m in invalid)}):\n  vLLM {VLLM_VERSION}: {want}   "
                    f"got: {got}   ('Ft,r,u' = (FULL, BD(t, r, u)), 'Pt' = (PIECEWISE, BD(t)), "
                    f"'N' = (NONE, BD(n)))\n{RULE}")


def test_dispatch_examples(dispatch):
    """The cases where the course's rule before vLLM's differed: decode graphs stop at
    max_num_seqs requests."""
    M, BD = dispatch.CUDAGraphMode, dispatch.BatchDescriptor
    sizes_100 = [1, 2, 4] + list(range(8, 201, 8))  # vLLM's sizes for max_num_seqs=100
    d = dispatch.CudagraphDispatcher(M.FULL_AND_PIECEWISE, sizes_100, max_num_seqs=100)
    got = d.dispatch(100, uniform_decode=True)
    assert got == (M.PIECEWISE, BD(104)), (
        f"FULL_AND_PIECEWISE, max_num_seqs=100: 100 decode requests pad to 104 tokens, more than "
        f"any decode graph (<= 100 requests): vLLM runs (PIECEWISE, BD(104)); got {got}")
    assert d.dispatch(96, uniform_decode=True) == (M.FULL, BD(96, 96, True))
    sizes_54 = [1, 2, 4] + list(range(8, 109, 8))
    got = dispatch.CudagraphDispatcher(M.FULL_DECODE_ONLY, sizes_54, max_num_seqs=54).dispatch(49, True)
    assert got == (M.NONE, BD(49)), (
        f"FULL_DECODE_ONLY, max_num_seqs=54: 49 decode requests pad to 56 > 54, no decode graph: "
        f"vLLM runs eagerly, (NONE, BD(49)); got {got}")
    spec = dispatch.CudagraphDispatcher(M.FULL_AND_PIECEWISE, [1, 2, 4, 8, 16], max_num_seqs=8,
                                        uniform_decode_query_len=3)
    assert spec.capture_sizes == [3, 6, 9], (
        f"q = 3 with decode FULL: sizes rounded up to multiples of 3 (3, 3, 6, 9, 18), none above 16 "
        f"-> [3, 6, 9]; "
        f"got {spec.capture_sizes}")
    assert spec.dispatch(5, uniform_decode=True) == (M.FULL, BD(6, 2, True))
    assert spec.dispatch(5, uniform_decode=True, invalid_modes={M.FULL}) == (M.PIECEWISE, BD(6))
    assert spec.dispatch(5, valid_modes={M.NONE}) == (M.NONE, BD(5))


@given(S.mode_names, S.size_lists, st.integers(1, 40), st.integers(1, 4), S.batch_sizes, st.booleans())
def test_dispatch_only_returns_keys(dispatch, mode_name, sizes, max_num_seqs, q, n, uniform):
    assume(q <= max(sizes))  # else no size rounds to a multiple of q (a ValueError, tested below)
    d = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[mode_name], list(sizes), max_num_seqs, q)
    mode, desc = d.dispatch(n, uniform)
    hash(desc)  # a descriptor keys a dict of graphs
    assert isinstance(desc, dispatch.BatchDescriptor), (
        f"dispatch() must return a BatchDescriptor, got {type(desc).__name__}")
    if mode.name != "NONE":
        assert desc in d.keys()[mode], (
            f"dispatch({n}, {uniform}) in mode {mode_name} returned ({mode.name}, {desc}), not one of "
            "its keys: replaying a graph that was never captured")
        assert desc.num_tokens >= n, f"dispatch({n}) returned {desc}: a batch is padded up, never cut"
    else:
        assert desc == dispatch.BatchDescriptor(n), (
            f"an eager batch carries BatchDescriptor(num_tokens) alone, as in vLLM; got {desc}")


@given(S.mode_names, S.size_lists, st.integers(1, 40), S.batch_sizes)
def test_dispatch_without_the_flag_is_a_mixed_batch(dispatch, mode_name, sizes, max_num_seqs, n):
    """uniform_decode defaults to False: a batch is not uniform decode unless the caller says so."""
    d = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[mode_name], list(sizes), max_num_seqs)
    assert d.dispatch(n) == d.dispatch(n, False), (
        f"dispatch({n}) with no uniform_decode must equal dispatch({n}, False): it defaults to False")


def test_dispatch_rejects(dispatch):
    M = dispatch.CUDAGraphMode
    d = dispatch.CudagraphDispatcher(M.FULL, [1, 2, 4], max_num_seqs=4)
    check_rejects(lambda: d.dispatch(0), "num_tokens", "a batch has at least one token")
    check_rejects(lambda: d.dispatch(2, invalid_modes={M.NONE, M.PIECEWISE, M.FULL}), "invalid_modes",
                  "at least one runtime mode must stay allowed")


@pytest.mark.parametrize("args, name", [
    (("FULL", [1, 2], 4), "mode"), ((None, [0, 2], 4), "capture_sizes"), ((None, [], 4), "capture_sizes"),
    ((None, [1, 2], 0), "max_num_seqs"), ((None, [1, 2], 4, 0), "uniform_decode_query_len"),
    ((None, [1, 2], 4, 3), "capture_sizes")])
def test_dispatcher_rejects(dispatch, args, name):
    mode = dispatch.CUDAGraphMode.FULL if args[0] is None else args[0]
    check_rejects(lambda: dispatch.CudagraphDispatcher(mode, *args[1:]), name,
                  "a CUDAGraphMode, sizes >= 1 (at least one unless NONE; one that rounds to a "
                  "multiple of q), max_num_seqs and q >= 1")
