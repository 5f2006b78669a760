"""Exercise 6 · dispatch — a vLLM-style CUDA-graph dispatcher. Run: python -m pytest exercises -m ex6"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coursekit import strategies as S
from coursekit.checks import check_rejects

pytestmark = pytest.mark.ex6

#: mode -> (decode_mode, mixed_mode), as vLLM defines them.
ROUTINES = {
    "NONE": ("NONE", "NONE"),
    "PIECEWISE": ("PIECEWISE", "PIECEWISE"),
    "FULL": ("FULL", "FULL"),
    "FULL_DECODE_ONLY": ("FULL", "NONE"),
    "FULL_AND_PIECEWISE": ("FULL", "PIECEWISE"),
}


def key(pair):
    """A (mode, BatchDescriptor) pair as plain values, for comparisons and messages."""
    mode, desc = pair
    return (mode.name, desc.num_tokens, bool(desc.uniform_decode))


def expected_descs(mode_name, sizes):
    decode, mixed = ROUTINES[mode_name]
    order = sorted(set(sizes), reverse=True)
    descs = []
    if mixed != "NONE":
        descs += [(mixed, s, False) for s in order]
    if decode == "FULL" and mixed != "FULL":
        descs += [("FULL", s, True) for s in order]
    return descs


def expected_dispatch(mode_name, sizes, n, uniform):
    """The spec's rule, written as a lookup in the captured keys."""
    captured = set(expected_descs(mode_name, sizes))
    fitting = [s for s in sizes if s >= n]
    if mode_name != "NONE" and fitting:
        s = min(fitting)
        if uniform and ("FULL", s, True) in captured:
            return ("FULL", s, True)
        mixed = ROUTINES[mode_name][1]
        if (mixed, s, False) in captured:
            return (mixed, s, False)
    return ("NONE", n, uniform)


@pytest.mark.parametrize("mode_name", list(ROUTINES))
def test_decode_and_mixed_modes(dispatch, mode_name):
    mode = dispatch.CUDAGraphMode[mode_name]
    got = (mode.decode_mode().name, mode.mixed_mode().name)
    assert got == ROUTINES[mode_name], (
        f"CUDAGraphMode.{mode_name}: (decode_mode(), mixed_mode()) expected {ROUTINES[mode_name]}, "
        f"got {got}"
    )


@given(S.mode_names, S.unique_size_lists)
def test_capture_descs(dispatch, mode_name, sizes):
    d = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[mode_name], list(sizes))
    descs = d.capture_descs()
    assert type(descs) is list, (
        f"CudagraphDispatcher({mode_name}, {sizes}).capture_descs() must return a list of "
        f"(mode, BatchDescriptor) pairs, got a {type(descs).__name__}"
    )
    got = [key(p) for p in descs]
    expected = expected_descs(mode_name, sizes)
    assert got == expected, (
        f"CudagraphDispatcher({mode_name}, {sizes}).capture_descs() as (mode, num_tokens, "
        f"uniform_decode):\n  expected {expected}\n  got      {got}\n"
        "  rule: mixed-batch graphs (mixed_mode, BD(s, False)) when mixed_mode is not NONE, then "
        "uniform-decode graphs (FULL, BD(s, True)) when decode_mode is FULL and mixed_mode is not "
        "FULL; each group largest size first"
    )


@given(S.mode_names, S.size_lists, S.batch_sizes, st.booleans())
def test_dispatch_follows_the_rule(dispatch, mode_name, sizes, n, uniform):
    d = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[mode_name], list(sizes))
    got = key(d.dispatch(n, uniform))
    expected = expected_dispatch(mode_name, sizes, n, uniform)
    call = f"CudagraphDispatcher({mode_name}, {sorted(set(sizes))}).dispatch({n}, uniform_decode={uniform})"
    if expected[0] == "NONE":
        assert got[:2] == expected[:2], (
            f"{call}: expected NONE with the unpadded descriptor (num_tokens={n}), got {got}\n"
            "  rule: run eagerly when the mode is NONE, the batch exceeds every bucket, or no "
            "captured graph fits"
        )
    else:
        assert got == expected, (
            f"{call}: expected {expected}, got {got}\n  rule: pad to s = padded_size(n); a "
            "uniform-decode batch takes (FULL, BD(s, True)) if captured, else every batch takes "
            "(mixed_mode, BD(s, False)) if captured, else NONE"
        )


@given(S.mode_names, S.size_lists, S.batch_sizes, st.booleans())
def test_dispatch_only_returns_captured_graphs(dispatch, mode_name, sizes, n, uniform):
    d = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[mode_name], list(sizes))
    captured = {key(p) for p in d.capture_descs()}
    mode, desc = d.dispatch(n, uniform)
    hash(desc)  # a descriptor keys a dict of graphs
    assert isinstance(desc, dispatch.BatchDescriptor), (
        f"dispatch() must return a BatchDescriptor, got {type(desc).__name__}"
    )
    if mode.name != "NONE":
        assert key((mode, desc)) in captured, (
            f"dispatch({n}, {uniform}) in mode {mode_name} returned {key((mode, desc))}, which "
            "capture_descs() never listed: replaying a graph that was not captured"
        )
        assert desc.num_tokens >= n, (
            f"dispatch({n}) returned a graph for {desc.num_tokens} tokens: a batch is padded up, "
            "never cut"
        )


def test_dispatch_examples(dispatch):
    M, BD = dispatch.CUDAGraphMode, dispatch.BatchDescriptor
    sizes = [8, 1, 4, 2]
    cases = [
        (M.FULL_AND_PIECEWISE, 3, True, (M.FULL, BD(4, True))),
        (M.FULL_AND_PIECEWISE, 3, False, (M.PIECEWISE, BD(4, False))),
        (M.FULL_AND_PIECEWISE, 8, True, (M.FULL, BD(8, True))),
        (M.FULL, 5, True, (M.FULL, BD(8, False))),
        (M.FULL_DECODE_ONLY, 2, True, (M.FULL, BD(2, True))),
        (M.PIECEWISE, 6, True, (M.PIECEWISE, BD(8, False))),
    ]
    for mode, n, uniform, expected in cases:
        got = dispatch.CudagraphDispatcher(mode, sizes).dispatch(n, uniform)
        assert key(got) == key(expected), (
            f"CudagraphDispatcher({mode.name}, {sizes}).dispatch({n}, uniform_decode={uniform}): "
            f"expected {expected}, got {got}"
        )
    for mode, n, uniform in [(M.FULL_DECODE_ONLY, 3, False), (M.NONE, 3, True),
                             (M.FULL_AND_PIECEWISE, 9, True)]:
        got_mode, desc = dispatch.CudagraphDispatcher(mode, sizes).dispatch(n, uniform)
        assert got_mode == M.NONE and desc.num_tokens == n, (
            f"CudagraphDispatcher({mode.name}, {sizes}).dispatch({n}, uniform_decode={uniform}): "
            f"expected NONE with num_tokens={n} (eager, unpadded), got ({got_mode}, {desc})"
        )


@given(S.mode_names, S.size_lists, S.batch_sizes)
def test_dispatch_without_the_flag_is_a_mixed_batch(dispatch, mode_name, sizes, n):
    """uniform_decode defaults to False: a batch is not uniform decode unless the caller says so
    (vLLM's default too); a dispatcher must never guess it."""
    d = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[mode_name], list(sizes))
    got = key(d.dispatch(n))
    expected = expected_dispatch(mode_name, sizes, n, False)
    call = f"CudagraphDispatcher({mode_name}, {sorted(set(sizes))}).dispatch({n})"
    same = got[:2] == expected[:2] if expected[0] == "NONE" else got == expected
    assert same, (
        f"{call} (no uniform_decode given): expected {expected} as for uniform_decode=False, got "
        f"{got}\n  rule: uniform_decode defaults to False"
    )


def test_dispatch_rejects_empty_batches(dispatch):
    d = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode.FULL, [1, 2, 4])
    check_rejects(lambda: d.dispatch(0), "num_tokens", "a batch has at least one token")
