"""Exercise 6 · dispatch — how vLLM picks a CUDA graph, in its V1 and V2 runners.
Run: python -m pytest exercises -m ex6

The oracle is vLLM 0.26.0 itself: its answers were recorded from its own code for every mode over
180 configurations of capture sizes, max_num_seqs and query length q: part A from the V1 runner's
CudagraphDispatcher (coursekit/vllm_recorded.py; 36,000 answers, with and without valid_modes /
invalid_modes), part B from the V2 runner's CudaGraphManager (coursekit/vllm_runners.py).
"""

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from coursekit import strategies as S
from coursekit.checks import check_rejects
from coursekit.vllm_recorded import VLLM_VERSION, dispatch_configs, mode_table, recorded
from coursekit.vllm_runners import v2_dispatch_configs

pytestmark = pytest.mark.ex6

HELPERS = ("separate_routine", "decode_mode", "mixed_mode", "has_full_cudagraphs", "has_piecewise_cudagraphs")
RULE = ("  rule: pad to p = padded_size(n); a uniform batch in a two-routine mode looks up "
        "BD(p, min(p // q, max_num_seqs), True), any other BD(p, min(p, max_num_seqs), False): "
        "FULL if allowed and a FULL key, else PIECEWISE with BD(p) if allowed and a key, else "
        "(NONE, BD(n))")


def plain(value):
    return value.name if hasattr(value, "name") else value


def is_eager(dispatch, desc, n) -> bool:
    """``desc`` is exactly ``BatchDescriptor(n)``: num_reqs None and uniform the bool False (a 0
    or None compares equal to False in a dataclass's ==, so each field is checked by itself)."""
    return (type(desc) is dispatch.BatchDescriptor and type(desc.num_tokens) is int
            and desc.num_tokens == n and desc.num_reqs is None and desc.uniform is False)


def encode(dispatch, n, answer) -> str:
    """A dispatch(n) answer in the recording's notation: 'N' (exactly (NONE, BD(n))), 'Ft,r,u',
    'Pt' or 'Pt,r,u'; anything else spelled out."""
    if type(answer) is not tuple or len(answer) != 2:
        return f"{answer!r} (dispatch returns the tuple (mode, BatchDescriptor))"
    mode, desc = answer
    if mode.name == "NONE":
        return "N" if is_eager(dispatch, desc, n) else f"(NONE, {desc!r})"
    short = desc.num_reqs is None and desc.uniform is False
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


def check_containers(d, what):
    """The containers the docstring states: keys() a dict of sets, capture_descs() a list of
    (mode, BatchDescriptor) tuples, capture_sizes a list."""
    keys, descs = d.keys(), d.capture_descs()
    assert type(keys) is dict and all(isinstance(v, (set, frozenset)) for v in keys.values()), (
        f"{what}.keys() must be a dict {{PIECEWISE: set, FULL: set}}, got "
        f"{type(keys).__name__} of {[type(v).__name__ for v in getattr(keys, 'values', list)()]}")
    assert type(descs) is list, f"{what}.capture_descs() must return a list, got a {type(descs).__name__}"
    assert all(type(e) is tuple and len(e) == 2 for e in descs), (
        f"{what}.capture_descs() must hold (mode, BatchDescriptor) tuples, got {descs[:3]}")
    assert type(d.capture_sizes) is list, (
        f"{what}.capture_sizes must be a list, got a {type(d.capture_sizes).__name__}")


def test_keys_and_capture_order_are_vllms(dispatch):
    for c in dispatch_configs():
        d = build(dispatch, c)
        check_containers(d, described(c))
        keys = {m.name: sorted([k.num_tokens, k.num_reqs, k.uniform] for k in ks) for m, ks in d.keys().items()}
        assert keys == c["keys"], (
            f"{described(c)}.keys() as [num_tokens, num_reqs, uniform]:\n  vLLM {VLLM_VERSION}: "
            f"{c['keys']}\n  got:        {keys}\n  rule: mixed keys per size (PIECEWISE BD(s); FULL "
            "BD(s, min(s, max_num_seqs), False)); decode FULL keys for q <= s <= q * max_num_seqs "
            "in two-routine modes; sizes first rounded to multiples of q when decode is FULL")
        descs = d.capture_descs()
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
                got = encode(dispatch, n, d.dispatch(n, bool(int(uniform)), valid, invalid))
                assert got == want, (
                    f"{described(c)}.dispatch({n}, uniform_decode={bool(int(uniform))}, "
                    f"valid_modes={valid and sorted(m.name for m in valid)}, invalid_modes="
                    f"{invalid and sorted(m.name for m in invalid)}):\n  vLLM {VLLM_VERSION}: {want}   "
                    f"got: {got}   ('Ft,r,u' = (FULL, BD(t, r, u)), 'Pt' = (PIECEWISE, BD(t)), "
                    f"'N' = (NONE, BD(n)), exactly: num_reqs None, uniform False)\n{RULE}")


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
        assert is_eager(dispatch, desc, n), (
            f"an eager batch carries exactly BatchDescriptor(num_tokens) (num_reqs None, uniform "
            f"False), as in vLLM; got {desc!r}")


@given(S.mode_names, S.size_lists, st.integers(1, 40), S.batch_sizes)
def test_dispatch_without_the_flag_is_a_mixed_batch(dispatch, mode_name, sizes, max_num_seqs, n):
    """uniform_decode defaults to False: a batch is not uniform decode unless the caller says so."""
    d = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[mode_name], list(sizes), max_num_seqs, 1)
    assert d.dispatch(n) == d.dispatch(n, False), (
        f"dispatch({n}) with no uniform_decode must equal dispatch({n}, False): it defaults to False")


@pytest.mark.parametrize("flag", [False, True])
def test_an_eager_batch_carries_exactly_its_token_count(dispatch, flag):
    """(NONE, BatchDescriptor(n)) on every eager path: mode NONE, n above every size, only NONE
    allowed, no key found; whatever uniform_decode says."""
    M = dispatch.CUDAGraphMode
    cases = [("NONE", 4, 3, {}), ("FULL_AND_PIECEWISE", 4, 5, {}),
             ("FULL_AND_PIECEWISE", 4, 3, {"valid_modes": {M.NONE}}),
             ("FULL_DECODE_ONLY", 1, 3, {})]  # no key for 4 tokens
    for mode, max_num_seqs, n, kwargs in cases:
        got = dispatch.CudagraphDispatcher(M[mode], [1, 2, 4], max_num_seqs).dispatch(n, flag, **kwargs)
        assert type(got) is tuple and got[0] is M.NONE and is_eager(dispatch, got[1], n), (
            f"CudagraphDispatcher({mode}, [1, 2, 4], {max_num_seqs}).dispatch({n}, {flag}"
            f"{', valid_modes={NONE}' if kwargs else ''}): expected the tuple (NONE, BatchDescriptor({n})) "
            f"with num_reqs None and uniform False (the bool), got {got!r}")


@pytest.mark.parametrize("q, sizes, expected", [
    (1, [8, 2, 8, 4, 2], [2, 4, 8]),
    (2, [8, 3, 8, 2], [2, 4, 8]),  # rounded up to multiples of q, then sorted, each once
])
def test_capture_sizes_are_sorted_and_each_once(dispatch, q, sizes, expected):
    got = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode.FULL, sizes, 8, q).capture_sizes
    assert got == expected, (
        f"CudagraphDispatcher(FULL, {sizes}, 8, uniform_decode_query_len={q}).capture_sizes: "
        f"expected {expected}, got {got!r}\n  rule: a list of the sizes kept, ascending, each once")


def test_uniform_decode_query_len_defaults_to_1(dispatch):
    M = dispatch.CUDAGraphMode
    for mode in M:
        plain = dispatch.CudagraphDispatcher(mode, [1, 5, 13], 3)
        one = dispatch.CudagraphDispatcher(mode, [1, 5, 13], 3, 1)
        assert (plain.capture_sizes, plain.keys(), plain.capture_descs()) == (
            one.capture_sizes, one.keys(), one.capture_descs()), (
            f"CudagraphDispatcher({mode.name}, [1, 5, 13], 3) must equal the one with "
            f"uniform_decode_query_len=1 (its default): capture_sizes {plain.capture_sizes} vs "
            f"{one.capture_sizes}, keys {plain.keys()} vs {one.keys()}")


def test_empty_valid_modes_means_every_mode(dispatch):
    M = dispatch.CUDAGraphMode
    for mode in M:
        d = dispatch.CudagraphDispatcher(mode, [1, 2, 4, 8], 3, 2 if mode.decode_mode() is M.FULL else 1)
        for n in range(1, 10):
            for uniform in (False, True):
                for invalid in (None, {M.FULL}):
                    got = d.dispatch(n, uniform, set(), invalid)
                    want = d.dispatch(n, uniform, None, invalid)
                    assert got == want, (
                        f"{mode.name}: dispatch({n}, {uniform}, valid_modes=set(), invalid_modes="
                        f"{invalid}) must equal valid_modes=None ({want}), got {got}\n  rule: "
                        "valid_modes None or empty means every runtime mode")


def test_keys_at_their_limits(dispatch):
    """Decode keys stop at s = q * max_num_seqs (kept), the next size is not one; sizes that all
    round past the largest become [q]."""
    M, BD = dispatch.CUDAGraphMode, dispatch.BatchDescriptor
    d = dispatch.CudagraphDispatcher(M.FULL_AND_PIECEWISE, [1, 4, 5, 11], 4)
    decode = sorted((k for k in d.keys()[M.FULL] if k.uniform), key=lambda k: k.num_tokens)
    assert decode == [BD(1, 1, True), BD(4, 4, True)], (
        f"FULL_AND_PIECEWISE, sizes [1, 4, 5, 11], max_num_seqs=4: decode keys for 1 <= s <= 4 "
        f"(4 kept, 5 is one past), expected [BD(1, 1, True), BD(4, 4, True)], got {decode}")
    assert d.dispatch(5, True) == (M.PIECEWISE, BD(5)) and d.dispatch(4, True) == (M.FULL, BD(4, 4, True))
    spec = dispatch.CudagraphDispatcher(M.FULL_DECODE_ONLY, [1, 2, 5, 6, 7, 8, 13], 3, 2)
    assert spec.capture_sizes == [2, 6, 8], (
        f"q = 2: [1, 2, 5, 6, 7, 8, 13] round to 2, 2, 6, 6, 8, 8, 14 (past 13: dropped) -> [2, 6, 8]; "
        f"got {spec.capture_sizes}")
    decode = sorted(spec.keys()[M.FULL], key=lambda k: k.num_tokens)
    assert decode == [BD(2, 1, True), BD(6, 3, True)], (
        f"q = 2, max_num_seqs = 3: decode keys for 2 <= s <= 6 (6 kept, 8 is past it), got {decode}")
    for mode, want in ((M.FULL_DECODE_ONLY, [3]), (M.FULL, [3]), (M.PIECEWISE, [4, 5])):
        got = dispatch.CudagraphDispatcher(mode, [4, 5], 2, 3).capture_sizes
        assert got == want, (
            f"CudagraphDispatcher({mode.name}, [4, 5], 2, uniform_decode_query_len=3).capture_sizes: "
            f"expected {want} (rounded only when decode is FULL; 4 and 5 both round to 6, past 5, so "
            f"[q] as 3 <= 5), got {got}")
    got = dispatch.CudagraphDispatcher(M.FULL, [5], 8, 3).capture_sizes
    assert got == [3], (
        f"CudagraphDispatcher(FULL, [5], 8, uniform_decode_query_len=3).capture_sizes: expected [3] "
        f"(5 rounds to 6, past the largest 5, so [q] as 3 <= 5, the largest; one size is enough), "
        f"got {got}")


@pytest.mark.given
@pytest.mark.parametrize("bad", [0, -3, 2.0, True], ids=repr)
def test_dispatch_rejects_a_bad_token_count(dispatch, bad):
    d = dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode.FULL, [1, 2, 4], max_num_seqs=4)
    check_rejects(lambda: d.dispatch(bad), "num_tokens",
                  f"dispatch({bad!r}): num_tokens is an int >= 1 (a batch has at least one token; a bool "
                  "is not an int here)")


@pytest.mark.parametrize("valid, invalid", [(None, {"NONE", "PIECEWISE", "FULL"}), ({"FULL"}, {"FULL"}),
                                            ({"NONE", "PIECEWISE"}, {"NONE", "PIECEWISE", "FULL"})])
def test_dispatch_refuses_when_no_mode_is_allowed(dispatch, valid, invalid):
    M = dispatch.CUDAGraphMode
    d = dispatch.CudagraphDispatcher(M.FULL, [1, 2, 4], max_num_seqs=4)
    valid_modes = None if valid is None else {M[v] for v in valid}
    check_rejects(lambda: d.dispatch(2, valid_modes=valid_modes, invalid_modes={M[v] for v in invalid}),
                  "invalid_modes",
                  f"dispatch(2, valid_modes={valid and sorted(valid)}, invalid_modes={sorted(invalid)}): "
                  "at least one runtime mode must stay allowed, else a ValueError naming invalid_modes")


@pytest.mark.given
@pytest.mark.parametrize("args, name", [
    (("FULL", [1, 2], 4), "mode"), ((None, [0, 2], 4), "capture_sizes"), ((None, [1, 2.5], 4), "capture_sizes"),
    ((None, [1, True], 4), "capture_sizes"), ((None, [1, 2], 0), "max_num_seqs"),
    ((None, [1, 2], 4.0), "max_num_seqs"), ((None, [1, 2], True), "max_num_seqs"),
    ((None, [1, 2], 4, 0), "uniform_decode_query_len"), ((None, [1, 2], 4, 2.0), "uniform_decode_query_len")])
def test_dispatcher_rejects(dispatch, args, name):
    mode = dispatch.CUDAGraphMode.FULL if args[0] is None else args[0]
    check_rejects(lambda: dispatch.CudagraphDispatcher(mode, *args[1:]), name,
                  f"CudagraphDispatcher({mode!r}, {', '.join(map(repr, args[1:]))}): a CUDAGraphMode, sizes "
                  "ints >= 1, max_num_seqs and q ints >= 1 (a bool or a float is not an int here)")


@pytest.mark.parametrize("mode, args", [
    ("FULL", ([], 4)), ("PIECEWISE", ([], 4)), ("FULL_DECODE_ONLY", ([], 4)), ("FULL_AND_PIECEWISE", ([], 4)),
    ("FULL", ([1, 2], 4, 3)), ("FULL_DECODE_ONLY", ([1, 2, 4], 4, 5)), ("FULL_AND_PIECEWISE", ([2], 4, 3))])
def test_dispatcher_refuses_sizes_it_cannot_capture(dispatch, mode, args):
    """Graphs on and no size, or (decode FULL) a q above every size: no size rounds to a multiple
    of q without passing the largest, and [q] would pass it too."""
    check_rejects(lambda: dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[mode], *args), "capture_sizes",
                  f"CudagraphDispatcher({mode}, {', '.join(map(repr, args))}): a mode other than NONE needs "
                  "a size, and with decode FULL a q above every size leaves none: a ValueError naming "
                  "capture_sizes")


@pytest.mark.parametrize("mode, args", [("NONE", ([], 1)), ("FULL", ([1, 2], 1)),
                                        ("FULL_AND_PIECEWISE", ([1, 2], 4, 2)), ("FULL_DECODE_ONLY", ([5], 4, 5)),
                                        ("PIECEWISE", ([1, 2], 4, 3)), ("NONE", ([1, 2], 4, 3))])
def test_dispatcher_accepts_arguments_at_their_limits(dispatch, mode, args):
    """NONE needs no size; max_num_seqs = 1 and q = 1 are allowed, and so is a q equal to the
    largest size, or a q above every size where decode is not FULL (no size is rounded); a batch
    of one token is dispatched (what it answers: the other tests)."""
    dispatch.CudagraphDispatcher(dispatch.CUDAGraphMode[mode], *args).dispatch(1)


# ------------------------------------------------------------------------------- part B: the V2 runner

V2_RULE = ("  rule: the candidates are the graphs at the smallest token count >= num_tokens (decode graph "
           "first); the first whose uniform_token_count is None or the batch's and whose num_reqs is None "
           "or >= the batch's; none -> (NONE, num_tokens, num_reqs, None); never a larger token count")


def manager(dispatch, c):
    return dispatch.CudaGraphManager(dispatch.CUDAGraphMode[c["mode"]], list(c["capture_sizes"]),
                                     c["max_num_seqs"], c["q"])


def described_v2(c) -> str:
    return (f"CudaGraphManager({c['mode']}, {c['capture_sizes']}, max_num_seqs={c['max_num_seqs']}, "
            f"decode_query_len={c['q']})")


def plain_v2(dispatch, desc):
    """A BatchExecutionDescriptor as [mode, num_tokens, num_reqs, uniform_token_count]; anything
    else spelled out."""
    if type(desc) is not dispatch.BatchExecutionDescriptor:
        return f"{desc!r} (expected a BatchExecutionDescriptor)"
    return [plain(desc.cg_mode), desc.num_tokens, desc.num_reqs, desc.uniform_token_count]


def encode_v2(dispatch, desc, n, num_reqs) -> str:
    """A V2 answer in the recording's notation: 'N' (exactly (NONE, n, num_reqs, None)), 'Ft,r,u'
    (u = 1 for a decode graph), 'Pt' (num_reqs and uniform_token_count None) or 'Pt,r,u'."""
    p = plain_v2(dispatch, desc)
    if isinstance(p, str):
        return p
    mode, t, r, u = p
    if mode == "NONE":
        return "N" if [t, r, u] == [n, num_reqs, None] and type(t) is int else f"(NONE, {t}, {r}, {u})"
    return f"{mode[0]}{t}" if r is None and u is None else f"{mode[0]}{t},{r},{int(u is not None)}"


def v2_batch(dispatch, c, n: int, uniform: bool) -> tuple[int, int | None]:
    """How the V2 record called dispatch for a batch of n tokens: a uniform-decode batch is
    ceil(n / q) requests with get_uniform_token_count's answer; a mixed one min(n, max_num_seqs)
    requests and no uniform count."""
    if uniform:
        reqs = -(-n // c["q"])
        return reqs, dispatch.get_uniform_token_count(reqs, n, c["q"])
    return min(n, c["max_num_seqs"]), None


def test_v2_capture_descs_are_vllms(dispatch):
    for c in v2_dispatch_configs():
        descs = manager(dispatch, c).capture_descs()
        assert type(descs) is list, f"{described_v2(c)}.capture_descs() must return a list, got {type(descs).__name__}"
        got = [plain_v2(dispatch, d) for d in descs]
        want = [[m, t, r, c["q"] if u else None] for m, ds in c["capture_descs"] for t, r, u in ds]
        assert got == want, (
            f"{described_v2(c)}.capture_descs() as [mode, num_tokens, num_reqs, uniform_token_count]:\n"
            f"  vLLM {VLLM_VERSION} (V2): {want}\n  got:            {got}\n  rule: per size s, ascending: in a "
            "two-routine mode a decode graph (FULL, r, r // q, q) at r = s rounded up to a multiple of q, "
            "unless r > q * max_num_seqs or r > the largest size, or it is already there; then a mixed graph "
            "(PIECEWISE, s, None) or (FULL, s, min(s, max_num_seqs)); listed PIECEWISE first, then FULL, "
            "each largest first")


def test_v2_dispatch_is_vllms(dispatch):
    for c in v2_dispatch_configs():
        m = manager(dispatch, c)
        for name, answers in c["dispatch"].items():
            uniform = name.endswith("=1")
            for n, want in enumerate(answers, start=1):
                reqs, count = v2_batch(dispatch, c, n, uniform)
                got = encode_v2(dispatch, m.dispatch(reqs, n, count), n, reqs)
                assert got == want, (
                    f"{described_v2(c)}.dispatch(num_reqs={reqs}, num_tokens={n}, uniform_token_count={count}):"
                    f"\n  vLLM {VLLM_VERSION} (V2): {want}   got: {got}   ('Ft,r,u' = FULL with t tokens, r "
                    f"requests, u 1 for a decode graph; 'Pt' = PIECEWISE, num_reqs None; 'N' = (NONE, "
                    f"{n}, {reqs}, None))\n  candidates({n}): "
                    f"{[plain_v2(dispatch, d) for d in m.candidates(n)]}\n{V2_RULE}")


@given(st.integers(1, 64), st.integers(1, 8), st.integers(1, 8))
def test_uniform_token_count_is_the_tokens_per_request(dispatch, num_reqs, per_request, max_query_len):
    """Exactly max_query_len tokens per request: max_query_len; any other batch: None."""
    num_tokens = num_reqs * per_request
    got = dispatch.get_uniform_token_count(num_reqs, num_tokens, max_query_len)
    want = max_query_len if per_request == max_query_len else None
    assert got == want and type(got) is type(want), (
        f"get_uniform_token_count({num_reqs}, {num_tokens}, {max_query_len}): expected {want!r}, got {got!r}"
        f"\n  rule: max_query_len when num_tokens == max_query_len * num_reqs, else None")
    if max_query_len > 1:  # one token short of max_query_len per request: not uniform
        short = dispatch.get_uniform_token_count(num_reqs, num_reqs * max_query_len - 1, max_query_len)
        assert short is None, (
            f"get_uniform_token_count({num_reqs}, {num_reqs * max_query_len - 1}, {max_query_len}): one "
            f"request is a token short, so the batch is not uniform: expected None, got {short!r}")


@given(S.mode_names, S.size_lists, st.integers(1, 40), st.integers(1, 4), st.integers(1, 120), st.data())
def test_v2_answers_a_candidate_or_eager(dispatch, mode_name, sizes, max_num_seqs, q, n, data):
    """The manager never moves to a larger size: its answer is one of candidates(n), all captured
    at one token count, the smallest graph >= n; or eager at exactly (n, num_reqs)."""
    m = dispatch.CudaGraphManager(dispatch.CUDAGraphMode[mode_name], list(sizes), max_num_seqs, q)
    reqs = data.draw(st.integers(1, n), label="num_reqs")
    count = data.draw(st.sampled_from([None, q, n // reqs]), label="uniform_token_count")
    everything = [plain_v2(dispatch, d) for d in m.capture_descs()]
    cands = [plain_v2(dispatch, d) for d in m.candidates(n)]
    above = sorted({d[1] for d in everything if not isinstance(d, str) and d[1] >= n})
    # As a multiset: the order within one token count is the recorded tests' business.
    assert sorted(map(str, cands)) == sorted(str(d) for d in everything if above and d[1] == above[0]), (
        f"{mode_name}, sizes {sorted(set(sizes))}, max_num_seqs={max_num_seqs}, q={q}: candidates({n}) must be "
        f"the graphs captured at the smallest token count >= {n} ({above[:1] or 'none: []'}), got {cands}")
    got = plain_v2(dispatch, m.dispatch(reqs, n, count))
    if got[0] == "NONE":
        assert got == ["NONE", n, reqs, None], (
            f"an eager answer is exactly (NONE, num_tokens={n}, num_reqs={reqs}, None), got {got}")
        assert not [d for d in cands if d[3] in (None, count) and (d[2] is None or d[2] >= reqs)], (
            f"dispatch({reqs}, {n}, {count}) ran eagerly though a candidate fits: {cands}\n{V2_RULE}")
    else:
        assert got in cands, (
            f"dispatch({reqs}, {n}, {count}) answered {got}, not one of candidates({n}) = {cands}: the V2 "
            f"runner never moves to a larger token count\n{V2_RULE}")


def test_v2_examples(dispatch):
    """The notes' examples: candidate order, a non-uniform batch, sizes not rounded for q > 1,
    and the one place V1 and V2 part at q = 1 (more requests than max_num_seqs)."""
    M, E = dispatch.CUDAGraphMode, dispatch.BatchExecutionDescriptor
    m = dispatch.CudaGraphManager(M.FULL_AND_PIECEWISE, [1, 2, 4, 8], max_num_seqs=4, decode_query_len=2)
    got = m.candidates(3)
    assert got == [E(M.FULL, 4, 2, 2), E(M.PIECEWISE, 4, None, None)], (
        f"FULL_AND_PIECEWISE, [1, 2, 4, 8], max_num_seqs=4, q=2: candidates(3) are the graphs at 4 tokens, "
        f"the decode graph first: [(FULL, 4, 2, 2), (PIECEWISE, 4, None, None)]; got {got}")
    assert m.dispatch(2, 4, 2) == E(M.FULL, 4, 2, 2)
    got = m.dispatch(2, 3, None)
    assert got == E(M.PIECEWISE, 4, None, None), (
        f"a batch of 2 + 1 tokens is not uniform (uniform_token_count None): the decode graph does not "
        f"fit, the PIECEWISE one does; expected (PIECEWISE, 4, None, None), got {got}")
    got = m.dispatch(1, 1)
    assert got == E(M.PIECEWISE, 1, None, None), (
        f"V2 keeps size 1 for mixed batches at q = 2 (V1 rounds the sizes to [2, 4, 8]); expected "
        f"(PIECEWISE, 1, None, None), got {got}")
    got = m.dispatch(5, 9)
    assert got == E(M.NONE, 9, 5, None), f"9 tokens, above every graph: expected (NONE, 9, 5, None), got {got}"
    got = dispatch.CudaGraphManager(M.FULL, [1, 2, 4, 8], max_num_seqs=2).dispatch(3, 3, 1)
    assert got == E(M.NONE, 3, 3, None), (
        f"FULL, max_num_seqs=2: 3 requests of one token; the graph at 4 tokens holds 2 requests, V2 does "
        f"not cap the count (V1 does) and runs eagerly: expected (NONE, 3, 3, None), got {got}")
    assert dispatch.CudaGraphManager(M.NONE, [1, 2], 4).capture_descs() == []
    assert dispatch.CudaGraphManager(M.FULL, [], 4).dispatch(1, 1) == E(M.NONE, 1, 1, None)


def test_v2_decode_query_len_defaults_to_1(dispatch):
    M = dispatch.CUDAGraphMode
    for mode in M:
        plain_m, one = dispatch.CudaGraphManager(mode, [1, 5, 13], 3), dispatch.CudaGraphManager(mode, [1, 5, 13], 3, 1)
        assert plain_m.capture_descs() == one.capture_descs(), (
            f"CudaGraphManager({mode.name}, [1, 5, 13], 3) must equal the one with decode_query_len=1 "
            f"(its default): {plain_m.capture_descs()} vs {one.capture_descs()}")
        assert plain_m.dispatch(2, 2) == plain_m.dispatch(2, 2, None)


@pytest.mark.given
@pytest.mark.parametrize("args, name", [
    (("FULL", [1, 2], 4), "mode"), ((None, [0, 2], 4), "capture_sizes"), ((None, [1, 2.5], 4), "capture_sizes"),
    ((None, [1, True], 4), "capture_sizes"), ((None, [1, 2], 0), "max_num_seqs"),
    ((None, [1, 2], 4, 0), "decode_query_len"), ((None, [1, 2], 4, True), "decode_query_len")])
def test_v2_manager_rejects(dispatch, args, name):
    mode = dispatch.CUDAGraphMode.FULL if args[0] is None else args[0]
    check_rejects(lambda: dispatch.CudaGraphManager(mode, *args[1:]), name,
                  f"CudaGraphManager({mode!r}, {', '.join(map(repr, args[1:]))}): a CUDAGraphMode, sizes ints "
                  ">= 1, max_num_seqs and decode_query_len ints >= 1 (a bool or a float is not an int here)")


@pytest.mark.given
@pytest.mark.parametrize("call, name", [
    ((0, 1), "num_reqs"), ((2, 1), "num_tokens"), ((1, 2.0), "num_tokens"), ((True, 2), "num_reqs"),
    ((1, 1, 0), "uniform_token_count"), ((1, 1, 1.0), "uniform_token_count")])
def test_v2_dispatch_rejects(dispatch, call, name):
    m = dispatch.CudaGraphManager(dispatch.CUDAGraphMode.FULL, [1, 2, 4], 4)
    check_rejects(lambda: m.dispatch(*call), name,
                  f"dispatch{call}: num_reqs an int >= 1, num_tokens an int >= num_reqs, uniform_token_count "
                  "None or an int >= 1")
    if name != "uniform_token_count":
        check_rejects(lambda: dispatch.get_uniform_token_count(*call[:2], 1), name,
                      f"get_uniform_token_count{call[:2] + (1,)}: num_reqs an int >= 1, num_tokens >= num_reqs")
