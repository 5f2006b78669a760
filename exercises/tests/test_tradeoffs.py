"""Exercise 9 · tradeoffs — which model is right, and what graphs cost. Run: python -m pytest exercises -m ex9"""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coursekit import strategies as S
from coursekit.checks import check_close, check_rejects, run_as_script
from coursekit.lesson import H200_DECODE_7B, QWEN25_7B_KV

pytestmark = pytest.mark.ex9

PIPELINE = ("kernel k is launched at k * launch_us and starts at max(k * launch_us, end of "
            "kernel k-1); it ends kernel_us[k-1] later")
TAU_STAR = ("tau* = the smallest mean of the first m kernels, m = 1 .. N-1 (the last kernel never "
            "waits for a launch after it); fewer than two kernels -> math.inf")
NOT_A_NUMBER = [-1.0, float("nan"), float("inf"), True, "3"]


def oracle_timeline(kernel_us, launch_us):
    """The docstring's recursion, kernel by kernel."""
    rows, end = [], 0.0
    for k, t in enumerate(kernel_us, start=1):
        start = max(k * launch_us, end)
        end = start + t
        rows.append((k * launch_us, start, end))
    return rows


def as_rows(got, what):
    assert isinstance(got, list), f"{what}: expected a list of (launched, start, end), got {type(got).__name__}"
    rows = []
    for i, row in enumerate(got):
        try:
            launched, start, end = row
        except (TypeError, ValueError):
            raise AssertionError(f"{what}[{i}]: expected a (launched, start, end) triple, got {row!r}") from None
        rows.append((launched, start, end))
    return rows


def check_timeline(got, expected, what):
    rows = as_rows(got, what)
    for k, row in enumerate(rows, start=1):
        for name, value in zip(("launched", "start", "end"), row):
            assert type(value) is float, (
                f"{what}: kernel {k}'s {name} is {type(value).__name__} {value!r}, expected a float\n"
                "  rule: times in microseconds, as floats (whatever number type the inputs came in)"
            )
    assert len(rows) == len(expected), (
        f"{what}: expected one (launched, start, end) per kernel, {len(expected)} in all, got {len(rows)}"
    )
    for k, (row, want) in enumerate(zip(rows, expected), start=1):
        for name, g, w in zip(("launched", "start", "end"), row, want):
            check_close(g, w, f"{what}: kernel {k}'s {name}", PIPELINE)


# ------------------------------------------------------------------------------- eager_timeline


def test_timeline_worked_example(tradeoffs):
    # launches end at 5, 10, 15 us; the 10 us kernel delays the third, which was launched at 15.
    check_timeline(tradeoffs.eager_timeline([1.0, 10.0, 1.0], 5.0),
                   [(5.0, 5.0, 6.0), (10.0, 10.0, 20.0), (15.0, 20.0, 21.0)],
                   "eager_timeline([1, 10, 1], launch_us=5)")


def test_timeline_no_kernels_is_empty(tradeoffs):
    got = tradeoffs.eager_timeline([], 5.0)
    assert got == [], f"eager_timeline([], 5): expected [], got {got!r}\n  rule: no kernels -> []"


def test_timeline_times_are_floats_for_int_inputs(tradeoffs):
    check_timeline(tradeoffs.eager_timeline([4, 2, 3], 3), [(3.0, 3.0, 7.0), (6.0, 7.0, 9.0), (9.0, 9.0, 12.0)],
                   "eager_timeline([4, 2, 3], launch_us=3)")


def test_timeline_keeps_fractions_of_a_microsecond(tradeoffs):
    check_timeline(tradeoffs.eager_timeline([0.25, 0.375], 2.0), [(2.0, 2.0, 2.25), (4.0, 4.0, 4.375)],
                   "eager_timeline([0.25, 0.375], launch_us=2)")


@given(S.kernel_times, S.whole_us)
def test_timeline_follows_the_pipeline(tradeoffs, kernel_us, launch_us):
    check_timeline(tradeoffs.eager_timeline(kernel_us, launch_us), oracle_timeline(kernel_us, launch_us),
                   f"eager_timeline({kernel_us}, launch_us={launch_us})")


@pytest.mark.given
@pytest.mark.parametrize("bad", NOT_A_NUMBER, ids=repr)
def test_timeline_rejects_a_bad_launch_time(tradeoffs, bad):
    check_rejects(lambda: tradeoffs.eager_timeline([1.0, 2.0], bad), "launch_us",
                  f"eager_timeline([1, 2], launch_us={bad!r}): a negative, NaN, infinite or non-number "
                  "time is a ValueError naming launch_us")


@pytest.mark.given
@pytest.mark.parametrize("bad", NOT_A_NUMBER, ids=repr)
def test_timeline_rejects_a_bad_kernel_time(tradeoffs, bad):
    check_rejects(lambda: tradeoffs.eager_timeline([1.0, bad, 3.0], 5.0), "kernel_us",
                  f"eager_timeline([1, {bad!r}, 3], launch_us=5): a negative, NaN, infinite or "
                  "non-number kernel time is a ValueError naming kernel_us")


# ------------------------------------------------------------------------------- cpu_bound_launch_us


def oracle_tau_star(kernel_us):
    means = [sum(kernel_us[:m]) / m for m in range(1, len(kernel_us))]
    return min(means) if means else math.inf


def test_tau_star_worked_example(tradeoffs):
    # means of the first 1 and first 2 kernels: 4 and 3; the last kernel (9) does not count.
    check_close(tradeoffs.cpu_bound_launch_us([4.0, 2.0, 9.0]), 3.0, "cpu_bound_launch_us([4, 2, 9])",
                TAU_STAR)


@pytest.mark.parametrize("kernel_us, expected", [([1.0, 100.0], 1.0), ([100.0, 1.0], 100.0),
                                                 ([6.0, 6.0, 6.0, 6.0], 6.0)])
def test_tau_star_ignores_the_last_kernel(tradeoffs, kernel_us, expected):
    check_close(tradeoffs.cpu_bound_launch_us(kernel_us), expected, f"cpu_bound_launch_us({kernel_us})",
                TAU_STAR)


@pytest.mark.parametrize("kernel_us", [[], [7.0]])
def test_tau_star_of_fewer_than_two_kernels_is_infinite(tradeoffs, kernel_us):
    got = tradeoffs.cpu_bound_launch_us(kernel_us)
    assert got == math.inf, f"cpu_bound_launch_us({kernel_us}): expected math.inf, got {got!r}\n  rule: {TAU_STAR}"


@given(S.kernel_times)
def test_tau_star_is_the_smallest_running_mean(tradeoffs, kernel_us):
    expected = oracle_tau_star(kernel_us)
    got = tradeoffs.cpu_bound_launch_us(kernel_us)
    if expected == math.inf:
        assert got == math.inf, f"cpu_bound_launch_us({kernel_us}): expected math.inf, got {got!r}\n  rule: {TAU_STAR}"
    else:
        check_close(got, expected, f"cpu_bound_launch_us({kernel_us})", TAU_STAR, rel=1e-9)


@given(S.kernel_times.filter(lambda ts: len(ts) >= 2))
def test_tau_star_is_where_the_step_turns_cpu_bound(tradeoffs, kernel_us):
    tau = tradeoffs.cpu_bound_launch_us(kernel_us)
    gpu_bound = tau + sum(kernel_us)
    at = oracle_timeline(kernel_us, tau)[-1][2]
    assert math.isclose(at, gpu_bound, rel_tol=1e-9, abs_tol=1e-9), (
        f"cpu_bound_launch_us({kernel_us}) = {tau!r}, but at that launch time the pipeline ends at "
        f"{at} us, after launch + sum(t) = {gpu_bound} us: the GPU already waits\n  rule: {TAU_STAR}"
    )
    above = tau + 0.5
    late = oracle_timeline(kernel_us, above)[-1][2]
    assert late > above + sum(kernel_us) + 1e-9, (
        f"cpu_bound_launch_us({kernel_us}) = {tau!r}, but at launch_us = {above} the pipeline still ends "
        f"at launch + sum(t) = {late} us: the step is not CPU-bound yet\n  rule: {TAU_STAR}"
    )


@pytest.mark.given
@pytest.mark.parametrize("bad", NOT_A_NUMBER, ids=repr)
def test_tau_star_rejects_a_bad_kernel_time(tradeoffs, bad):
    check_rejects(lambda: tradeoffs.cpu_bound_launch_us([1.0, bad, 3.0]), "kernel_us",
                  f"cpu_bound_launch_us([1, {bad!r}, 3]): a negative, NaN, infinite or non-number "
                  "kernel time is a ValueError naming kernel_us")


# ------------------------------------------------------------------------------- implied_launch_us

IMPLIED = ("(additive, cpu_bound) = ((eager_ms - compute_ms) * 1e3 / n_kernels, "
           "eager_ms * 1e3 / n_kernels), in microseconds")


def check_implied(got, eager_ms, compute_ms, n_kernels):
    what = f"implied_launch_us({eager_ms!r}, {compute_ms!r}, {n_kernels!r})"
    try:
        additive, cpu_bound = got
    except (TypeError, ValueError):
        raise AssertionError(f"{what}: expected a pair (additive, cpu_bound), got {got!r}") from None
    # abs_: (eager - compute) cancels when the two are close; a rounding of eager's size is allowed
    check_close(additive, (eager_ms - compute_ms) * 1e3 / n_kernels, f"{what}[0] (additive)", IMPLIED,
                rel=1e-9, abs_=1e-12 * eager_ms * 1e3 / n_kernels)
    check_close(cpu_bound, eager_ms * 1e3 / n_kernels, f"{what}[1] (cpu_bound)", IMPLIED, rel=1e-9)


@pytest.mark.parametrize("batch", sorted(H200_DECODE_7B))
def test_implied_tau_of_the_h200_7b_step(tradeoffs, batch):
    step = H200_DECODE_7B[batch]
    check_implied(tradeoffs.implied_launch_us(step["eager_ms"], step["graph_ms"], step["kernels"]),
                  step["eager_ms"], step["graph_ms"], step["kernels"])


@given(st.floats(0, 1000, allow_nan=False), st.floats(0, 1, allow_nan=False), st.integers(1, 5000))
def test_implied_tau_follows_both_models(tradeoffs, eager_ms, share, n_kernels):
    compute_ms = eager_ms * share
    check_implied(tradeoffs.implied_launch_us(eager_ms, compute_ms, n_kernels), eager_ms, compute_ms, n_kernels)


@pytest.mark.parametrize("eager_ms, compute_ms", [(5.0, 6.0), (0.0, 1e-9), (2.5, 2.5 + 2.5e-12)])
def test_implied_tau_refuses_a_step_shorter_than_its_compute(tradeoffs, eager_ms, compute_ms):
    check_rejects(lambda: tradeoffs.implied_launch_us(eager_ms, compute_ms, 10), "compute_ms",
                  f"implied_launch_us({eager_ms!r}, {compute_ms!r}, 10): compute_ms > eager_ms is a "
                  "ValueError naming compute_ms (no model explains a step shorter than its compute)")


@pytest.mark.given
@pytest.mark.parametrize("args, name", [
    ((-1.0, 0.0, 10), "eager_ms"), ((float("nan"), 1.0, 10), "eager_ms"),
    ((5.0, -1.0, 10), "compute_ms"), ((5.0, float("inf"), 10), "compute_ms"), ((5.0, 1.0, 0), "n_kernels"),
    ((5.0, 1.0, 1.5), "n_kernels"), ((5.0, 1.0, True), "n_kernels"), ((5.0, 1.0, 10.0), "n_kernels"),
    ((True, 1.0, 10), "eager_ms"),
])
def test_implied_tau_rejects_bad_input(tradeoffs, args, name):
    check_rejects(lambda: tradeoffs.implied_launch_us(*args), name,
                  f"implied_launch_us{args}: times are finite numbers >= 0, n_kernels an int >= 1; "
                  "otherwise a ValueError naming the argument")


# ------------------------------------------------------------------------------- kv_bytes_per_token

KV_RULE = "2 * n_layers * n_kv_heads * head_dim * dtype_bytes (a key and a value per layer and KV head)"


def test_kv_bytes_of_qwen25_7b(tradeoffs):
    got = tradeoffs.kv_bytes_per_token(28, 4, 128)
    assert type(got) is int and got == 57344, (
        f"kv_bytes_per_token(28, 4, 128): expected the int 57344 (56 KiB: bf16, dtype_bytes defaults "
        f"to 2), got {type(got).__name__} {got!r}\n  rule: {KV_RULE}"
    )


@given(st.integers(1, 200), st.integers(1, 128), st.integers(1, 512), st.sampled_from([1, 2, 4]))
def test_kv_bytes_per_token(tradeoffs, n_layers, n_kv_heads, head_dim, dtype_bytes):
    got = tradeoffs.kv_bytes_per_token(n_layers, n_kv_heads, head_dim, dtype_bytes)
    expected = 2 * n_layers * n_kv_heads * head_dim * dtype_bytes
    assert type(got) is int and got == expected, (
        f"kv_bytes_per_token({n_layers}, {n_kv_heads}, {head_dim}, {dtype_bytes}): expected the int "
        f"{expected}, got {type(got).__name__} {got!r}\n  rule: {KV_RULE}"
    )


@pytest.mark.given
@pytest.mark.parametrize("name", ["n_layers", "n_kv_heads", "head_dim", "dtype_bytes"])
@pytest.mark.parametrize("bad", [0, -2, 2.0, True], ids=repr)
def test_kv_bytes_rejects_bad_input(tradeoffs, name, bad):
    kwargs = dict(QWEN25_7B_KV)
    kwargs[name] = bad
    check_rejects(lambda: tradeoffs.kv_bytes_per_token(**kwargs), name,
                  f"kv_bytes_per_token({name}={bad!r}): every argument is an int >= 1 (a bool is not)")


# ------------------------------------------------------------------------------- graph_memory_bytes

POOL_RULE = "shared_pool=True (the default): the largest footprint; shared_pool=False: the sum; no graphs -> 0"


@given(st.lists(st.integers(0, 2**34), max_size=12), st.booleans())
def test_graph_memory_is_max_shared_and_sum_separate(tradeoffs, footprints, shared):
    got = tradeoffs.graph_memory_bytes(iter(footprints), shared_pool=shared)
    expected = (max(footprints) if shared else sum(footprints)) if footprints else 0
    assert type(got) is int and got == expected, (
        f"graph_memory_bytes(iter({footprints}), shared_pool={shared}): expected the int {expected}, "
        f"got {type(got).__name__} {got!r}\n  rule: {POOL_RULE} (any iterable, read once)"
    )


def test_graph_memory_shares_one_pool_by_default(tradeoffs):
    got = tradeoffs.graph_memory_bytes([3 << 20, 5 << 20, 1 << 20])
    assert got == 5 << 20, (
        f"graph_memory_bytes([3 MiB, 5 MiB, 1 MiB]): expected {5 << 20} (the largest), got {got!r}\n"
        f"  rule: {POOL_RULE}"
    )


@pytest.mark.given
@pytest.mark.parametrize("footprints", [[1, -1], [1.5], [True], [10, "2"]], ids=repr)
def test_graph_memory_rejects_a_bad_footprint(tradeoffs, footprints):
    check_rejects(lambda: tradeoffs.graph_memory_bytes(footprints), "per_graph_bytes",
                  f"graph_memory_bytes({footprints!r}): each footprint is an int >= 0 (a bool is not)")


@pytest.mark.given
@pytest.mark.parametrize("flag", [1, "yes", None], ids=repr)
def test_graph_memory_rejects_a_flag_that_is_no_bool(tradeoffs, flag):
    check_rejects(lambda: tradeoffs.graph_memory_bytes([1, 2], shared_pool=flag), "shared_pool",
                  f"graph_memory_bytes([1, 2], shared_pool={flag!r}): shared_pool is a bool")


# ------------------------------------------------------------------------------- kv_tokens_forgone

TOKENS_RULE = "whole tokens, graph_bytes // bytes_per_token (runner defaults to \"v1\")"
RUNNER_RULE = {
    "v1": ("runner \"v1\": vLLM's V1 runner takes its estimate of the graphs' memory out of the KV "
           "cache's budget (Worker.determine_available_memory): whole tokens, graph_bytes // bytes_per_token"),
    "v2": ("runner \"v2\": vLLM's V2 runner sizes the KV cache before it captures (its "
           "profile_cudagraph_memory returns 0): the graphs cost no tokens, the int 0, whatever graph_bytes is"),
}


def check_tokens(got, expected, what, rule):
    assert type(got) is int and got == expected, (
        f"{what}: expected the int {expected}, got {type(got).__name__} {got!r}\n  rule: {rule}"
    )


@pytest.mark.parametrize("graph_bytes, per_token, expected", [
    (1024**3, 57344, 18724), (57344 * 3, 57344, 3), (57343, 57344, 0), (0, 57344, 0),
])
def test_kv_tokens_forgone_examples(tradeoffs, graph_bytes, per_token, expected):
    check_tokens(tradeoffs.kv_tokens_forgone(graph_bytes, per_token), expected,
                 f"kv_tokens_forgone({graph_bytes}, {per_token})", TOKENS_RULE)


@given(st.integers(0, 2**40), st.integers(1, 2**22))
def test_kv_tokens_forgone_is_whole_tokens(tradeoffs, graph_bytes, per_token):
    check_tokens(tradeoffs.kv_tokens_forgone(graph_bytes, per_token), graph_bytes // per_token,
                 f"kv_tokens_forgone({graph_bytes}, {per_token})", TOKENS_RULE)


@pytest.mark.parametrize("runner, expected", [("v1", 18724), ("v2", 0)])
def test_kv_tokens_forgone_of_a_gib_by_runner(tradeoffs, runner, expected):
    # The lesson's Qwen2.5-7B (57344 bytes a token) with 1 GiB of graphs, under each runner.
    check_tokens(tradeoffs.kv_tokens_forgone(1024**3, 57344, runner=runner), expected,
                 f"kv_tokens_forgone(1 GiB, 57344, runner={runner!r})", RUNNER_RULE[runner])


@given(st.integers(0, 2**40), st.integers(1, 2**22))
def test_kv_tokens_forgone_v1_takes_the_graphs_out_of_the_cache(tradeoffs, graph_bytes, per_token):
    check_tokens(tradeoffs.kv_tokens_forgone(graph_bytes, per_token, runner="v1"), graph_bytes // per_token,
                 f"kv_tokens_forgone({graph_bytes}, {per_token}, runner='v1')", RUNNER_RULE["v1"])


@given(st.integers(0, 2**40), st.integers(1, 2**22))
def test_kv_tokens_forgone_v2_costs_no_tokens(tradeoffs, graph_bytes, per_token):
    check_tokens(tradeoffs.kv_tokens_forgone(graph_bytes, per_token, runner="v2"), 0,
                 f"kv_tokens_forgone({graph_bytes}, {per_token}, runner='v2')", RUNNER_RULE["v2"])


@pytest.mark.given
@pytest.mark.parametrize("args, name", [((-1, 10), "graph_bytes"), ((1.5, 10), "graph_bytes"),
                                        ((True, 10), "graph_bytes"), ((100, 0), "bytes_per_token"),
                                        ((100, 2.0), "bytes_per_token"), ((100, True), "bytes_per_token"),
                                        ((-1, 10, "v2"), "graph_bytes"), ((100, 0, "v2"), "bytes_per_token")])
def test_kv_tokens_forgone_rejects_bad_input(tradeoffs, args, name):
    check_rejects(lambda: tradeoffs.kv_tokens_forgone(*args), name,
                  f"kv_tokens_forgone{args}: graph_bytes an int >= 0, bytes_per_token an int >= 1 "
                  "(a bool is not an int here), for either runner")


@pytest.mark.given
@pytest.mark.parametrize("runner", ["v3", "V1", "", "v1 ", None, True, 1], ids=repr)
def test_kv_tokens_forgone_rejects_a_runner_it_does_not_know(tradeoffs, runner):
    check_rejects(lambda: tradeoffs.kv_tokens_forgone(100, 10, runner=runner), "runner",
                  f"kv_tokens_forgone(100, 10, runner={runner!r}): runner is the string \"v1\" or \"v2\" "
                  "(vLLM 0.26.0's two GPU model runners); anything else is a ValueError naming runner")


# ------------------------------------------------------------------------------- the figures


def test_running_the_module_prints_the_figures(impl, tradeoffs):
    """``python -m <impl>.tradeoffs`` prints the course's figures through the exercise's functions."""
    out = run_as_script(impl, "tradeoffs")
    for figure in ("tau 14.6 us if additive, 18.8 us if CPU-bound", "57344 bytes of KV cache per token",
                   "V1 runner: 1 GiB of graphs forgoes 18724 tokens", "V2 runner: 1 GiB of graphs forgoes 0 tokens"):
        assert figure in out, f"`python -m ...tradeoffs` should print {figure!r}; it printed:\n{out}"
