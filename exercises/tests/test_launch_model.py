"""Exercise 1 · launch_model — the launch-overhead model. Run: python -m pytest exercises -m ex1"""

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from coursekit import strategies as S
from coursekit.checks import check_close, check_rejects, run_as_script
from coursekit.lesson import H200_SWEEP, SEED_REPORT, SEED_WEIGHTS

pytestmark = pytest.mark.ex1


def show(kwargs):
    return "DecodeStep(" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"


# ------------------------------------------------------------------------------- DecodeStep


@given(S.decode_step_kwargs())
def test_n_kernels_is_layers_times_kernels_plus_ten(launch_model, kw):
    n = launch_model.DecodeStep(**kw).n_kernels
    expected = kw["n_layers"] * kw["kernels_per_layer"] + 10
    assert isinstance(n, int) and not isinstance(n, bool), (
        f"{show(kw)}.n_kernels: expected an int, got {type(n).__name__} {n!r}"
    )
    assert n == expected, (
        f"{show(kw)}.n_kernels: expected {expected}, got {n}\n"
        "  rule: n_layers * kernels_per_layer + 10 (embedding, final norm, lm_head...)"
    )


def test_n_kernels_is_an_int_for_whole_counts_given_as_floats(launch_model):
    step = launch_model.DecodeStep(5.5, n_layers=28.0, kernels_per_layer=15.0)
    n = step.n_kernels
    assert type(n) is int and n == 430, (
        f"DecodeStep(5.5, n_layers=28.0, kernels_per_layer=15.0).n_kernels: expected the int 430, "
        f"got {type(n).__name__} {n!r}\n  rule: n_kernels is an int (a count of kernels), whatever "
        "number type the fields came in"
    )


@given(S.decode_step_kwargs())
def test_compute_ms_is_gib_over_bandwidth(launch_model, kw):
    check_close(
        launch_model.DecodeStep(**kw).compute_ms,
        kw["weight_gib"] * 1024**3 / kw["bandwidth_bps"] * 1e3,
        f"{show(kw)}.compute_ms",
        "weight_gib * 1024**3 / bandwidth_bps * 1e3 (GiB = 1024**3 bytes; result in ms)",
    )


@given(S.decode_step_kwargs())
def test_launch_ms_is_n_times_tau(launch_model, kw):
    n = kw["n_layers"] * kw["kernels_per_layer"] + 10
    check_close(
        launch_model.DecodeStep(**kw).launch_ms,
        n * kw["launch_us"] / 1e3,
        f"{show(kw)}.launch_ms",
        "n_kernels * launch_us / 1e3 (us -> ms)",
    )


@given(S.decode_step_kwargs())
def test_eager_graph_and_speedup(launch_model, kw):
    step = launch_model.DecodeStep(**kw)
    n = kw["n_layers"] * kw["kernels_per_layer"] + 10
    compute = kw["weight_gib"] * 1024**3 / kw["bandwidth_bps"] * 1e3
    eager = compute + n * kw["launch_us"] / 1e3 + n * kw["gpu_node_us"] / 1e3
    graph = compute + kw["launch_us"] / 1e3 + n * kw["gpu_node_us"] / 1e3
    check_close(step.eager_ms(), eager, f"{show(kw)}.eager_ms()",
                "compute_ms + launch_ms + n_kernels * gpu_node_us / 1e3 (eager kernels pay the "
                "GPU cost of each kernel too)")
    check_close(
        step.graph_ms(), graph, f"{show(kw)}.graph_ms()",
        "compute_ms + launch_us / 1e3 + n_kernels * gpu_node_us / 1e3 "
        "(one submission, plus the GPU cost of each kernel)",
    )
    assume(graph > 0)
    check_close(step.speedup(), eager / graph, f"{show(kw)}.speedup()", "eager_ms() / graph_ms()")


def test_lesson_numbers(launch_model):
    awq = launch_model.DecodeStep(5.5)
    assert awq.n_kernels == 430, f"DecodeStep(5.5).n_kernels: expected 430 (28*15+10), got {awq.n_kernels}"
    check_close(awq.launch_ms, 2.15, "DecodeStep(5.5).launch_ms", "430 kernels * 5 us = 2.15 ms")
    check_close(awq.compute_ms, 5.5 * 1.073741824, "DecodeStep(5.5).compute_ms",
                "5.5 GiB = 5.5 * 1.073741824e9 bytes at 1e12 B/s -> 5.9056 ms (not 5.5 ms: GiB, not GB)")
    check_close(awq.graph_ms(), 5.5 * 1.073741824 + 0.005, "DecodeStep(5.5).graph_ms()",
                "with gpu_node_us = 0 the graph pays one launch: compute_ms + 0.005 ms")


@pytest.mark.given
@pytest.mark.parametrize("field", ["weight_gib", "n_layers", "kernels_per_layer", "launch_us",
                                   "bandwidth_bps", "gpu_node_us"])
def test_negative_field_is_rejected(launch_model, field):
    kwargs = {"weight_gib": 1.0, field: -1}
    check_rejects(lambda: launch_model.DecodeStep(**kwargs), field,
                  f"DecodeStep({field}=-1): negative values are rejected at construction")


@pytest.mark.given
@pytest.mark.parametrize("field", ["weight_gib", "n_layers", "kernels_per_layer", "launch_us",
                                   "bandwidth_bps", "gpu_node_us"])
def test_nan_field_is_rejected(launch_model, field):
    # NaN is not a number >= 0, yet `value < 0` is False for it: argcheck.number tests
    # math.isfinite, or NaN would slip through and poison every time computed from the step.
    kwargs = {"weight_gib": 1.0, field: float("nan")}
    check_rejects(lambda: launch_model.DecodeStep(**kwargs), field,
                  f"DecodeStep({field}=nan): every field is a number >= 0, and NaN is not")


@pytest.mark.given
@pytest.mark.parametrize("field", ["weight_gib", "n_layers", "kernels_per_layer", "launch_us",
                                   "bandwidth_bps", "gpu_node_us"])
@pytest.mark.parametrize("value", [float("inf"), True], ids=["inf", "True"])
def test_inf_and_bool_fields_are_rejected(launch_model, field, value):
    # inf >= 0 holds and True == 1: both pass a plain `value >= 0` check.
    kwargs = {"weight_gib": 1.0, field: value}
    check_rejects(lambda: launch_model.DecodeStep(**kwargs), field,
                  f"DecodeStep({field}={value!r}): every field is a finite number, and a bool is not "
                  "a number here")


@pytest.mark.given
def test_simulate_rejects_non_finite_times(launch_model):
    check_rejects(lambda: launch_model.simulate_eager_ms([1.0, 2.0], float("inf")), "launch_us",
                  "simulate_eager_ms([1, 2], launch_us=inf): a non-finite launch_us is refused")
    check_rejects(lambda: launch_model.simulate_eager_ms([1.0, float("nan")], 5.0), "kernel_us",
                  "simulate_eager_ms([1, nan], 5): a non-finite kernel time is refused")


def test_zero_fields_are_accepted_and_kept(launch_model):
    """Zero is >= 0: the given field checks keep a step of zeros, and its n_kernels is the 10
    kernels outside the layers (the formula's part, the student's)."""
    kwargs = dict(weight_gib=0.0, n_layers=0, kernels_per_layer=0, launch_us=0.0, bandwidth_bps=1.0,
                  gpu_node_us=0.0)
    step = launch_model.DecodeStep(**kwargs)
    got = {k: getattr(step, k) for k in kwargs}
    assert got == kwargs, f"{show(kwargs)}: zero is >= 0, so the fields must be accepted and kept; got {got}"
    assert step.n_kernels == 10, f"{show(kwargs)}.n_kernels: expected 10 (0 * 0 + 10), got {step.n_kernels}"


@pytest.mark.given
def test_zero_bandwidth_is_rejected(launch_model):
    check_rejects(lambda: launch_model.DecodeStep(1.0, bandwidth_bps=0.0), "bandwidth_bps",
                  "DecodeStep(bandwidth_bps=0): bandwidth must be > 0")


# ------------------------------------------------------------------------------- report


def _diff(got: str, expected: str) -> str:
    lines = []
    for i, (g, e) in enumerate(zip(got.split("\n") + [""] * 9, expected.split("\n") + [""] * 9)):
        if g != e:
            lines.append(f"  line {i + 1}:\n    expected {e!r}\n    got      {g!r}")
    return "\n".join(lines[:4])


def test_report_prints_the_lesson_table_byte_for_byte(launch_model):
    got = launch_model.report(launch_model.SEED_ROWS)
    assert isinstance(got, str), f"report(): expected a str, got {type(got).__name__}"
    assert got == SEED_REPORT, (
        "report(SEED_ROWS) differs from the lesson's expected output:\n" + _diff(got, SEED_REPORT)
        + ("\n  rule: the lines are joined with \"\\n\", so no newline at the end: print() adds "
           "its own, and print(report(SEED_ROWS)) must print the lesson's output byte for byte"
           if got == SEED_REPORT + "\n" else "")
    )


@given(st.lists(st.tuples(st.text("abcXYZ 权重", min_size=1, max_size=12), S.decode_step_kwargs()),
                max_size=3))
def test_report_formats_every_row(launch_model, rows):
    rows = [(label, kw) for label, kw in rows if kw["launch_us"] > 0]  # keeps 1000/ms finite
    steps = [(label, launch_model.DecodeStep(**kw)) for label, kw in rows]
    got = launch_model.report(steps)
    expected = []
    for label, step in steps:  # the step's own numbers: this test checks the layout only
        n, compute, launch = step.n_kernels, step.compute_ms, step.launch_ms
        e, g = step.eager_ms(), step.graph_ms()
        expected.append(f"{label}: {n} 个 kernel | 计算 {compute:5.1f} ms | 启动 {launch:4.2f} ms")
        expected.append(f"   eager {e:5.1f} ms -> {1000 / e:5.1f} tok/s | graph {g:5.1f} ms -> "
                        f"{1000 / g:5.1f} tok/s | 加速比 {e / g:.2f}x")
    expected = "\n".join(expected)
    assert got == expected, (
        f"report() of {len(rows)} row(s) is not two lines per row in the lesson's format:\n"
        + _diff(got, expected)
    )


def test_seed_rows_are_the_lessons(launch_model):
    rows = list(launch_model.SEED_ROWS)
    got = [(label, step.weight_gib, step.n_kernels) for label, step in rows]
    expected = [(label, w, 430) for label, w in SEED_WEIGHTS]
    assert got == expected, f"SEED_ROWS: expected (label, weight_gib, n_kernels) {expected}, got {got}"


def test_running_the_module_prints_the_table(impl, launch_model):
    """``python -m <impl>.launch_model`` prints report(SEED_ROWS) and nothing else."""
    out = run_as_script(impl, "launch_model")
    assert out == SEED_REPORT + "\n", (
        "`python -m ...launch_model` must print the lesson's table and nothing else:\n"
        + _diff(out, SEED_REPORT + "\n")
    )


# ------------------------------------------------------------------------------- simulate_eager_ms


def pipeline_ms(kernel_us, launch_us):
    """The spec's recursion, step by step: kernel k starts at max(k * launch, end of k-1)."""
    end = 0.0
    for k, t in enumerate(kernel_us, start=1):
        end = max(k * launch_us, end) + t
    return end / 1e3


def test_simulate_worked_example(launch_model):
    # launches end at 5, 10, 15 us; kernels run 5-6, 10-20, 20-21.
    check_close(launch_model.simulate_eager_ms([1.0, 10.0, 1.0], 5.0), 0.021,
                "simulate_eager_ms([1, 10, 1], launch_us=5)",
                "kernel k starts at max(k * launch_us, end of kernel k-1); result in ms")


@pytest.mark.given
@pytest.mark.parametrize("kernel_us, launch_us, name", [
    ([1.0, 2.0], -0.5, "launch_us"),
    ([1.0, -2.0, 3.0], 5.0, "kernel_us"),
    ([-0.25], 0.0, "kernel_us"),
])
def test_simulate_rejects_negative_times(launch_model, kernel_us, launch_us, name):
    check_rejects(lambda: launch_model.simulate_eager_ms(kernel_us, launch_us), name,
                  f"simulate_eager_ms({kernel_us}, launch_us={launch_us}): a negative time is a "
                  "ValueError naming the argument")


def test_simulate_keeps_fractions_of_a_microsecond(launch_model):
    # launches end at 2 and 4 us; kernels run 2-2.25 and 4-4.375: the step ends at 4.375 us.
    check_close(launch_model.simulate_eager_ms([0.25, 0.375], 2.0), 0.004375,
                "simulate_eager_ms([0.25, 0.375], launch_us=2)",
                "kernel k runs for kernel_us[k-1] microseconds, fractions included; result in ms")


def test_simulate_no_kernels_is_zero(launch_model):
    check_close(launch_model.simulate_eager_ms([], 5.0), 0.0, "simulate_eager_ms([], 5)",
                "no kernels -> 0 ms")


@given(S.kernel_times, S.whole_us)
def test_simulate_follows_the_pipeline(launch_model, kernel_us, launch_us):
    check_close(launch_model.simulate_eager_ms(kernel_us, launch_us),
                pipeline_ms(kernel_us, launch_us),
                f"simulate_eager_ms({kernel_us}, launch_us={launch_us})",
                "kernel k starts at max(k * launch_us, end of kernel k-1); result in ms")


@given(S.kernel_times.filter(bool), S.whole_us)
def test_simulate_bounds(launch_model, kernel_us, launch_us):
    got = launch_model.simulate_eager_ms(kernel_us, launch_us)
    n, total, last = len(kernel_us), sum(kernel_us), kernel_us[-1]
    call = f"simulate_eager_ms({kernel_us}, launch_us={launch_us}) = {got!r}"
    upper = (n * launch_us + total) / 1e3
    lower = max(launch_us + total, n * launch_us + last) / 1e3
    assert got <= upper * (1 + 1e-12), (
        f"{call} exceeds the additive model N*launch + sum(t) = {upper} ms: the pipeline can only "
        "overlap launches with kernels, never add time"
    )
    assert got >= lower * (1 - 1e-12), (
        f"{call} is below max(launch + sum(t), N*launch + t_last) = {lower} ms: the GPU cannot "
        "finish before all kernels ran after the first launch, nor before the last launch + t_last"
    )


@given(st.lists(S.whole_us, min_size=1, max_size=40), S.whole_us)
def test_simulate_long_kernels_hide_launches(launch_model, kernel_us, launch_us):
    kernel_us = [t + launch_us for t in kernel_us]  # every kernel at least launch_us long
    check_close(launch_model.simulate_eager_ms(kernel_us, launch_us),
                (launch_us + sum(kernel_us)) / 1e3,
                f"simulate_eager_ms({kernel_us}, launch_us={launch_us})",
                "when every kernel is >= launch_us the GPU never waits: launch + sum(t)")


@given(st.lists(st.integers(0, 100), min_size=1, max_size=40), st.integers(0, 100))
def test_simulate_tiny_kernels_expose_launches(launch_model, fractions, launch_us):
    kernel_us = [float(launch_us * f // 100) for f in fractions]  # none longer than launch_us
    check_close(launch_model.simulate_eager_ms(kernel_us, float(launch_us)),
                (len(kernel_us) * launch_us + kernel_us[-1]) / 1e3,
                f"simulate_eager_ms({kernel_us}, launch_us={launch_us})",
                "when no kernel outlasts a launch the GPU waits every time: N*launch + t_last")


@given(S.kernel_times.filter(bool), S.whole_us, st.data())
def test_simulate_is_monotone(launch_model, kernel_us, launch_us, data):
    base = launch_model.simulate_eager_ms(kernel_us, launch_us)
    i = data.draw(st.integers(0, len(kernel_us) - 1), label="kernel made longer")
    extra = data.draw(S.whole_us, label="extra us")
    longer = list(kernel_us)
    longer[i] += extra
    slower = launch_model.simulate_eager_ms(longer, launch_us)
    assert slower >= base * (1 - 1e-12), (
        f"making kernel {i} {extra} us longer made the step faster: {base} -> {slower} ms "
        "(the step time must be monotone in every kernel time)"
    )
    later = launch_model.simulate_eager_ms(kernel_us, launch_us + extra)
    assert later >= base * (1 - 1e-12), (
        f"a slower launch ({launch_us} -> {launch_us + extra} us) made the step faster: "
        f"{base} -> {later} ms (the step time must be monotone in launch_us)"
    )


# ------------------------------------------------------------------------------- fit_launch_model


@given(S.noiseless_line())
def test_fit_recovers_a_noiseless_line(launch_model, line):
    counts, step_ms, launch_us, compute_ms = line
    got = launch_model.fit_launch_model(counts, step_ms)
    assert isinstance(got, (tuple, list)) and len(got) == 2, (
        f"fit_launch_model: expected a tuple (launch_us, compute_ms), got {got!r}"
    )
    what = f"fit_launch_model({counts}, <points on a line>)"
    # 1e-4 us is far below anything measurable, and loose enough for the textbook normal
    # equations on nearly equal kernel counts.
    check_close(got[0], launch_us, what + "[0] (launch_us)",
                "the slope, converted from ms per kernel to us per kernel", rel=1e-6, abs_=1e-4)
    check_close(got[1], compute_ms, what + "[1] (compute_ms)", "the intercept, in ms",
                rel=1e-6, abs_=1e-4)


@given(st.lists(st.tuples(st.integers(1, 2000), st.floats(0, 50, allow_nan=False)),
                min_size=3, max_size=15))
def test_fit_is_least_squares(launch_model, points):
    counts = [n for n, _ in points]
    assume(len(set(counts)) >= 2)
    step_ms = [y for _, y in points]
    launch_us, compute_ms = launch_model.fit_launch_model(counts, step_ms)
    residuals = [y - (compute_ms + n * launch_us / 1e3) for n, y in zip(counts, step_ms)]
    size = sum(abs(y) for y in step_ms) + 1e-12
    assert abs(sum(residuals)) <= 1e-9 * size and \
        abs(sum(r * n for r, n in zip(residuals, counts))) <= 1e-9 * size * max(counts), (
            f"fit_launch_model({counts}, {step_ms}) = ({launch_us}, {compute_ms}) is not the "
            "least-squares line: its residuals should sum to 0 and be uncorrelated with n_kernels"
        )


def test_fit_on_the_h200_sweep(launch_model):
    counts = sorted(H200_SWEEP)
    launch_us, compute_ms = launch_model.fit_launch_model(counts, [H200_SWEEP[n][0] for n in counts])
    check_close(launch_us, 7.991419324624089, "eager launch cost fitted on the H200 sweep (us)",
                "least-squares slope over all points", rel=1e-9)
    check_close(compute_ms, 0.024954911417035763, "eager intercept fitted on the H200 sweep (ms)",
                "least-squares intercept over all points", rel=1e-9)


@pytest.mark.given
def test_fit_rejects_sequences_of_different_lengths(launch_model):
    check_rejects(lambda: launch_model.fit_launch_model([1, 2, 3], [1.0, 2.0]),
                  ("n_kernels", "step_ms"),
                  "n_kernels and step_ms must have the same length")
    check_rejects(lambda: launch_model.fit_launch_model([1, 2], [1.0, 2.0, 3.0]),
                  ("n_kernels", "step_ms"),
                  "n_kernels and step_ms must have the same length (fewer counts than times too)")


@pytest.mark.parametrize("n_kernels, step_ms", [([5, 5, 5], [1.0, 2.0, 3.0]), ([7, 7], [1.0, 1.0]),
                                                ([3], [0.5]), ([], [])], ids=repr)
def test_fit_needs_two_distinct_kernel_counts(launch_model, n_kernels, step_ms):
    check_rejects(lambda: launch_model.fit_launch_model(n_kernels, step_ms), "n_kernels",
                  f"fit_launch_model({n_kernels}, {step_ms}): a line needs at least two distinct kernel "
                  "counts (through one x, or none, no line is determined): a ValueError naming n_kernels")


def test_fit_on_many_points(launch_model):
    # 300 points: equal lengths are accepted however long (two equal ints above 256 are distinct
    # objects in CPython), and the fit of a noiseless line is exact.
    counts = list(range(1, 301))
    launch_us, compute_ms = launch_model.fit_launch_model(counts, [0.5 + n * 8.0 / 1e3 for n in counts])
    check_close(launch_us, 8.0, "fit_launch_model(300 points on step_ms = 0.5 + n * 8 us) launch_us",
                "equal lengths are accepted, however long; the slope of a noiseless line is exact", rel=1e-9)
    check_close(compute_ms, 0.5, "fit_launch_model(300 points on step_ms = 0.5 + n * 8 us) compute_ms",
                "the intercept of a noiseless line is exact", rel=1e-9)
