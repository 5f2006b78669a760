"""Exercise 5 · buckets — batch-size buckets, padding, and a bucketed graph runner.

Run: python -m pytest exercises -m ex5. The runner is checked on the CPU stand-in for a captured
graph (coursekit.standin), which keeps the rules that matter: static inputs, outputs overwritten
on every replay, memory pools.
"""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coursekit import strategies as S
from coursekit.checks import check_rejects
from coursekit.standin import RecordingCapture
from coursekit.vllm_recorded import VLLM_VERSION, engine_cases, explicit_max_cases

pytestmark = pytest.mark.ex5


# ------------------------------------------------------------------------------- default sizes


def test_default_capture_sizes_are_vllms(buckets):
    """vLLM 0.26.0's own lists (recorded from its code: coursekit/vllm_recorded.py) for an
    explicit max_cudagraph_capture_size of 1..600."""
    for max_size, expected in explicit_max_cases():
        got = buckets.default_capture_sizes(max_size)
        assert list(got) == expected, (
            f"default_capture_sizes({max_size}): vLLM {VLLM_VERSION} captures {expected}, got {got}\n"
            "  rule: [1, 2, 4], multiples of 8 below 256, multiples of 16 from 256, all <= max_size, "
            "ascending")


def test_default_capture_sizes_defaults_to_512(buckets):
    """The docstring's own examples run in test_examples.py; here: the default, and the type."""
    got = buckets.default_capture_sizes()
    assert type(got) is list, (
        f"default_capture_sizes() must return a list (the signature says -> list[int]), got a "
        f"{type(got).__name__}: {got!r}"
    )
    expected = dict(explicit_max_cases())[512]
    assert got == expected, (
        f"default_capture_sizes() (max_size defaults to 512): expected {expected}, got {got}"
    )


def test_engine_capture_sizes_are_vllms(buckets):
    """Every configuration recorded from vLLM 0.26.0's VllmConfig._set_cudagraph_sizes."""
    for max_num_seqs, spec, batched, expected in engine_cases():
        got = buckets.engine_capture_sizes(max_num_seqs, spec, batched)
        largest = min(2 * max_num_seqs * (1 + spec), 512, batched)
        assert type(got) is list and got == expected, (
            f"engine_capture_sizes(max_num_seqs={max_num_seqs}, num_speculative_tokens={spec}, "
            f"max_num_batched_tokens={batched}): vLLM {VLLM_VERSION} captures {expected}, got {got!r}\n"
            f"  rule: default_capture_sizes(min(2 * max_num_seqs * (1 + num_speculative_tokens), "
            f"512, max_num_batched_tokens)) = default_capture_sizes({largest}), plus "
            f"max_num_batched_tokens when it is <= that and not yet a size")


def test_engine_capture_sizes_at_the_cap_and_above_256(buckets):
    # The endings written out, not computed with the submission's own default_capture_sizes: above
    # 256 the stride is 16.
    for args, ending, want in (
            ((300, 0, 513), [480, 496, 512], "the largest is min(600, 512, 513) = 512: 513 is past it, so not added"),
            ((150, 0, 300), [272, 288, 300], "the largest is min(300, 512, 300) = 300, off the stride: added")):
        got = buckets.engine_capture_sizes(*args)
        expected = ending
        assert isinstance(got, list) and got[-3:] == expected and len(set(got)) == len(got), (
            f"engine_capture_sizes{args}: expected ...{expected[-3:]}, "
            f"got ...{got[-3:] if isinstance(got, list) else got}"
            f"\n  rule: {want} (compare the numbers by value: two equal ints above 256 are not one object)")


def test_engine_capture_sizes_defaults(buckets):
    """The defaults are vLLM's for the LLM class on a GPU under 70 GiB: 256 sequences, no
    speculative tokens, 8192 batched tokens."""
    got = buckets.engine_capture_sizes()
    expected = buckets_of(256, 0, 8192)
    assert got == expected, f"engine_capture_sizes() with vLLM's defaults: expected {expected}, got {got}"


def buckets_of(max_num_seqs: int, spec: int, batched: int) -> list[int]:
    return next(c[3] for c in engine_cases() if c[:3] == (max_num_seqs, spec, batched))


@pytest.mark.given
@pytest.mark.parametrize("kwargs, name", [
    ({"max_num_seqs": 0}, "max_num_seqs"), ({"num_speculative_tokens": -1}, "num_speculative_tokens"),
    ({"max_num_batched_tokens": 0}, "max_num_batched_tokens")])
def test_engine_capture_sizes_rejects(buckets, kwargs, name):
    check_rejects(lambda: buckets.engine_capture_sizes(**kwargs), name,
                  "max_num_seqs and max_num_batched_tokens >= 1, num_speculative_tokens >= 0")


@pytest.mark.given
@pytest.mark.parametrize("max_size", [0, -8])
def test_default_capture_sizes_rejects_small_max(buckets, max_size):
    check_rejects(lambda: buckets.default_capture_sizes(max_size), "max_size",
                  "max_size < 1 has no buckets")


# ------------------------------------------------------------------------------- padded_size


@given(S.batch_sizes, S.size_lists)
def test_padded_size_is_the_smallest_fitting_bucket(buckets, n, sizes):
    got = buckets.padded_size(n, list(sizes))
    fitting = [s for s in sizes if s >= n]
    expected = min(fitting) if fitting else None
    assert got == expected, (
        f"padded_size({n}, {sizes}): expected {expected}, got {got}\n"
        "  rule: the smallest capture size >= n (sizes may be unsorted or repeated); None when n "
        "exceeds every size"
    )


@given(S.size_lists)
def test_padded_size_of_a_bucket_is_itself(buckets, sizes):
    for s in sizes:
        got = buckets.padded_size(s, sizes)
        assert got == s, f"padded_size({s}, {sizes}): a batch that fits a bucket exactly needs no padding; got {got}"
    above = max(sizes) + 1
    got = buckets.padded_size(above, sizes)
    assert got is None, (
        f"padded_size({above}, {sizes}): expected None (larger than every bucket: run eagerly), got {got!r}"
    )


def test_padded_size_accepts_one_row(buckets):
    """n = 1 is the smallest batch (the boundary of the n < 1 rule): it is a bucket's, not an error."""
    for sizes, expected in (([1, 2], 1), ([8, 3], 3), ([4], 4)):
        got = buckets.padded_size(1, sizes)
        assert got == expected, f"padded_size(1, {sizes}): expected {expected}, got {got!r}"


def test_padded_size_reads_a_generator_once(buckets):
    sizes = [16, 1, 4, 8, 2]
    got = [buckets.padded_size(n, (s for s in sizes)) for n in (1, 3, 16)]
    assert got == [1, 4, 16], (
        f"padded_size(n, a generator of {sizes}) for n = 1, 3, 16: expected [1, 4, 16], got {got}\n"
        "  rule: capture_sizes is any iterable, a generator too: read it once (list(...) first)"
    )


@pytest.mark.given
def test_padded_size_rejects_bad_input(buckets):
    check_rejects(lambda: buckets.padded_size(0, [1, 2]), "n", "a batch has at least one row")
    check_rejects(lambda: buckets.padded_size(3, []), "capture_sizes", "no buckets to choose from")
    # An empty generator is still no sizes (a generator object is truthy until it is read).
    check_rejects(lambda: buckets.padded_size(3, iter([])), "capture_sizes",
                  "no buckets to choose from, whatever iterable brings none")


# ------------------------------------------------------------------------------- pad_rows


@given(st.integers(1, 12), st.integers(0, 12), st.lists(st.integers(1, 4), max_size=2),
       st.sampled_from([0.0, -1.5, math.nan]),
       st.sampled_from([torch.float32, torch.float64, torch.bfloat16]))
def test_pad_rows(buckets, n, extra, row_shape, value, dtype):
    x = torch.randn(n, *row_shape).to(dtype)
    before = x.clone()
    size = n + extra
    out = buckets.pad_rows(x, size, value)
    call = f"pad_rows(x of shape {tuple(x.shape)}, size={size}, value={value})"
    assert isinstance(out, torch.Tensor) and out.shape == (size, *row_shape), (
        f"{call}: expected shape {(size, *row_shape)}, got "
        f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}"
    )
    assert out.dtype == x.dtype and out.device == x.device, (
        f"{call}: expected dtype {x.dtype} on {x.device}, got {out.dtype} on {out.device}"
    )
    assert torch.equal(out[:n], x), f"{call}: the first len(x) rows must be x itself"
    pad = out[n:]
    ok = torch.isnan(pad).all() if math.isnan(value) else (pad == value).all()
    assert ok, f"{call}: every padding row must be {value}, got {pad.flatten()[:8].tolist()}"
    assert torch.equal(x, before), f"{call} modified x; it must return a new tensor"
    out.fill_(7.0)
    assert torch.equal(x, before), f"{call} returned a tensor that shares memory with x"


def test_pad_rows_pads_with_zero_by_default(buckets):
    x = torch.rand(3, 2) + 0.5
    out = buckets.pad_rows(x, 5)
    assert isinstance(out, torch.Tensor) and out.shape == (5, 2), (
        f"pad_rows(x of shape (3, 2), 5): expected shape (5, 2), got "
        f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
    assert torch.equal(out[:3], x) and (out[3:] == 0).all(), (
        f"pad_rows(x, 5) without value: the padding rows must be 0 (value defaults to 0), got "
        f"{out[3:].flatten().tolist()}")


@pytest.mark.given
@pytest.mark.parametrize("n, size", [(4, 3), (4, 0), (1, 0)], ids=["one-short", "zero", "one-row-zero"])
def test_pad_rows_never_truncates(buckets, n, size):
    x = torch.rand(n, 2) + 0.5
    before = x.clone()
    check_rejects(lambda: buckets.pad_rows(x, size), "size",
                  f"pad_rows(x of {n} rows, size={size}): size < len(x) would drop real rows; it is a "
                  "ValueError naming size (size == len(x) is fine)")
    assert torch.equal(x, before), "pad_rows modified x"


# ------------------------------------------------------------------------------- the runner


def rowwise(x):
    """Each output row depends only on its input row, so padding cannot leak into real rows."""
    return torch.tanh(x * 1.5 + 0.25).sum(dim=-1, keepdim=True) + x


class SeenInputs:
    """A row-wise function that remembers the last input it was run on (on the stand-in,
    replaying runs the function, so this shows what the graph read)."""

    def __init__(self):
        self.last = None

    def __call__(self, x):
        self.last = x.clone()
        return rowwise(x)


def nonzero_rows(n, width=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, width, generator=g) + 0.5


@st.composite
def runner_setups(draw):
    max_rows = draw(st.integers(1, 40))
    sizes = draw(st.lists(st.integers(1, max_rows), min_size=1, max_size=6, unique=True))
    batches = draw(st.lists(st.integers(1, max_rows + 8), min_size=1, max_size=8))
    return max_rows, sizes, batches


@given(runner_setups(), st.integers(1, 3))
def test_runner_returns_fn_of_the_real_rows(buckets, setup, warmup_iters):
    max_rows, sizes, batches = setup
    fn = SeenInputs()
    runner = buckets.BucketedGraphRunner(fn, nonzero_rows(max_rows), capture_sizes=sizes,
                                         warmup_iters=warmup_iters, pad_value=math.nan)
    for i, n in enumerate(batches):
        x = nonzero_rows(n, seed=i + 1)
        got = runner(x)
        expected = rowwise(x)
        where = f"runner(x of {n} rows) with capture_sizes={sorted(sizes)}"
        assert isinstance(got, torch.Tensor) and got.shape == expected.shape, (
            f"{where}: expected {n} rows of fn(x), shape {tuple(expected.shape)}, got "
            f"{tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__}"
            "\n  rule: return only the first len(x) output rows, never the padding"
        )
        assert torch.allclose(got, expected, rtol=1e-6, atol=1e-6), (
            f"{where}: result differs from fn(x) (NaN means padding reached a real row; stale "
            "values mean the graph read an old buffer: copy x into the static buffer with copy_)"
        )
        bucket = min((s for s in sizes if s >= n), default=None)
        if bucket is not None:
            seen = fn.last
            assert seen is not None and len(seen) == bucket, (
                f"{where}: the graph for bucket {bucket} should have run on {bucket} rows, "
                f"got {None if seen is None else len(seen)}"
            )
            assert torch.equal(seen[:n], x) and torch.isnan(seen[n:]).all(), (
                f"{where}: the graph must see x in the first {n} rows and pad_value (NaN here) in "
                f"the remaining {bucket - n}; stale rows from an earlier batch are a bug"
            )


@given(runner_setups())
def test_runner_captures_largest_first_into_one_pool(buckets, setup):
    max_rows, sizes, _ = setup
    spy = RecordingCapture()
    example = nonzero_rows(max_rows)
    runner = buckets.BucketedGraphRunner(rowwise, example, capture_sizes=sizes, warmup_iters=2,
                                         capture=spy)
    order = [len(c["inputs"][0]) for c in spy.calls]
    expected = sorted(sizes, reverse=True)
    assert order == expected, (
        f"captured sizes in the order {order}, expected {expected}\n"
        "  rule: one capture per size, largest first (smaller graphs reuse the largest's memory)"
    )
    assert list(runner.capture_order) == expected, (
        f"capture_order: expected {expected}, got {list(runner.capture_order)}"
    )
    assert all(len(c["inputs"]) == 1 for c in spy.calls), "capture(fn, static_input, ...): one static input"
    pointers = {c["inputs"][0].data_ptr() for c in spy.calls}
    assert len(pointers) == 1, (
        "every graph must read a prefix buffer[:size] of one static buffer; the captured inputs "
        f"start at {len(pointers)} different addresses"
    )
    assert pointers != {example.data_ptr()}, (
        "the static buffer must be the runner's own copy, not the caller's max_example tensor"
    )
    pools = [c["graph"].graph.pool() for c in spy.calls]
    assert all(p == pools[0] for p in pools), (
        f"graphs were captured into {len(set(map(id, pools)))} memory pools; all buckets must share "
        "one (pass the first graph's graph.pool() as pool= to the later captures)"
    )
    assert [c["warmup_iters"] for c in spy.calls] == [2] * len(sizes), (
        f"capture(..., warmup_iters=...) got {[c['warmup_iters'] for c in spy.calls]}; the runner "
        "must pass its own warmup_iters (2 here)"
    )


@given(runner_setups())
def test_runner_counts_replays_and_eager_calls(buckets, setup):
    max_rows, sizes, batches = setup
    spy = RecordingCapture()
    runner = buckets.BucketedGraphRunner(rowwise, nonzero_rows(max_rows), capture_sizes=sizes,
                                         capture=spy)
    expected = {}
    for n in batches:
        runner(nonzero_rows(n))
        key = min((s for s in sizes if s >= n), default="eager")
        expected[key] = expected.get(key, 0) + 1
    got = {k: v for k, v in dict(runner.stats).items() if v}
    assert got == expected, (
        f"stats after batches {batches} with capture_sizes={sorted(sizes)}: expected {expected}, "
        f"got {got}\n  rule: count replays per bucket size, and eager fallbacks under 'eager'"
    )
    replays = {len(c["inputs"][0]): c["graph"].graph.replays for c in spy.calls}
    replayed = {s: r for s, r in replays.items() if r}
    assert replayed == {k: v for k, v in expected.items() if k != "eager"}, (
        f"graph replays per bucket: expected {expected} (no replay for eager batches), got {replayed}"
    )
    assert len(spy.calls) == len(sizes), (
        f"{len(spy.calls)} captures for {len(sizes)} sizes: capture once per size at construction, "
        "never again on a call"
    )


def test_runner_runs_large_batches_eagerly(buckets):
    spy = RecordingCapture()
    runner = buckets.BucketedGraphRunner(rowwise, nonzero_rows(8), capture_sizes=[2, 4], capture=spy)
    x = nonzero_rows(6, seed=3)
    got = runner(x)
    assert torch.equal(got, rowwise(x)), "a batch larger than every bucket must return fn(x), run eagerly"
    assert runner.stats.get("eager", 0) == 1, f"stats['eager']: expected 1, got {dict(runner.stats)}"
    assert all(c["graph"].graph.replays == 0 for c in spy.calls), (
        "a batch larger than every bucket must not replay any graph"
    )


def test_runner_returns_fresh_tensors(buckets):
    runner = buckets.BucketedGraphRunner(rowwise, nonzero_rows(8), capture_sizes=[4, 8])
    first = runner(nonzero_rows(3, seed=1))
    kept = first.clone()
    runner(nonzero_rows(3, seed=2))
    assert torch.equal(first, kept), (
        "a result changed when the runner was called again: the graph overwrites its static output "
        "on every replay, so return a copy (e.g. out[:n].clone())"
    )


def test_runner_never_writes_into_the_callers_tensors(buckets):
    example = nonzero_rows(8)
    before = example.clone()
    runner = buckets.BucketedGraphRunner(rowwise, example, capture_sizes=[4, 8])
    x = nonzero_rows(3, seed=4)
    x_before = x.clone()
    runner(x)
    assert torch.equal(example, before), (
        "calling the runner wrote into the caller's max_example: copy it into a static buffer the "
        "runner owns (max_example.clone()) and capture over that"
    )
    assert torch.equal(x, x_before), "calling the runner modified its input x"


def test_runner_default_sizes_and_stand_in(buckets):
    runner = buckets.BucketedGraphRunner(rowwise, nonzero_rows(20), warmup_iters=1)
    expected = dict(explicit_max_cases())[20][::-1]
    assert list(runner.capture_order) == expected, (
        f"capture_sizes=None with 20 example rows: expected default_capture_sizes(20) captured "
        f"largest first, {expected}; got {list(runner.capture_order)}"
    )
    x = nonzero_rows(11, seed=5)
    assert torch.equal(runner(x), rowwise(x)), (
        "with capture=None on CPU tensors the runner must use coursekit.standin.capture_on_cpu"
    )


def test_runner_defaults_warmup_3_and_pad_value_0(buckets):
    spy = RecordingCapture()
    fn = SeenInputs()
    runner = buckets.BucketedGraphRunner(fn, nonzero_rows(8), capture=spy)
    warmups = [c["warmup_iters"] for c in spy.calls]
    expected_sizes = dict(explicit_max_cases())[8]
    assert warmups == [3] * len(expected_sizes), (
        f"BucketedGraphRunner(fn, 8 rows) without warmup_iters: capture got warmup_iters {warmups}, "
        f"expected 3 for each of the {len(expected_sizes)} default sizes {expected_sizes}\n"
        "  rule: warmup_iters defaults to 3"
    )
    x = nonzero_rows(3, seed=6)
    got = runner(x)
    assert torch.allclose(got, rowwise(x), rtol=1e-6, atol=1e-6), "runner(x of 3 rows) != fn(x)"
    seen = fn.last
    assert seen is not None and len(seen) == 4 and torch.equal(seen[:3], x) and (seen[3:] == 0).all(), (
        "BucketedGraphRunner(fn, 8 rows) without pad_value, called with 3 rows: the graph for bucket "
        f"4 must see x and then one row of 0 (pad_value defaults to 0), got "
        f"{None if seen is None else seen.tolist()}"
    )


def rows_shaped(n, row_shape, seed=0):
    return nonzero_rows(n, width=math.prod(row_shape), seed=seed).reshape(n, *row_shape)


def test_runner_keeps_the_row_shape_of_max_example(buckets):
    """Rows that are matrices: the buffer is shaped like max_example, each bucket's graph reads
    buffer[:size] with rows of that shape."""
    spy = RecordingCapture()
    example = rows_shaped(8, (2, 3))
    runner = buckets.BucketedGraphRunner(rowwise, example, capture_sizes=[2, 8], capture=spy,
                                         pad_value=math.nan)
    shapes = [tuple(c["inputs"][0].shape) for c in spy.calls]
    assert shapes == [(8, 2, 3), (2, 2, 3)], (
        f"max_example shaped (8, 2, 3), capture_sizes=[2, 8]: the graphs were captured over inputs "
        f"shaped {shapes}, expected [(8, 2, 3), (2, 2, 3)]\n  rule: one static buffer shaped like "
        "max_example (its rows keep their shape, not flattened), each graph over buffer[:size]"
    )
    for i, n in enumerate((1, 2, 5, 8, 10)):
        x = rows_shaped(n, (2, 3), seed=i + 1)
        got = runner(x)
        expected = rowwise(x)
        assert isinstance(got, torch.Tensor) and got.shape == expected.shape and torch.allclose(
            got, expected, rtol=1e-6, atol=1e-6), (
            f"runner(x shaped {tuple(x.shape)}) with max_example shaped (8, 2, 3): expected fn(x), "
            f"shape {tuple(expected.shape)}, got "
            f"{tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__}")


@pytest.mark.given
@pytest.mark.parametrize("row_shape", [(3, 2), (6,), (1, 2, 3)], ids=["3x2", "6", "1x2x3"])
def test_runner_checks_the_row_shape_not_its_element_count(buckets, row_shape):
    runner = buckets.BucketedGraphRunner(rowwise, rows_shaped(8, (2, 3)), capture_sizes=[4, 8])
    bad = rows_shaped(3, row_shape, seed=2)
    check_rejects(lambda: runner(bad), "x",
                  f"a buffer of rows shaped (2, 3) takes batches of rows shaped (2, 3) only: rows "
                  f"shaped {row_shape} hold as many elements but are another shape (ValueError "
                  "naming x); compare the row shapes, not their numel()")


BAD_BATCHES = {
    "float64": lambda: nonzero_rows(3).double(),
    "int64": lambda: torch.ones(3, 3, dtype=torch.long),
    "wider-rows": lambda: nonzero_rows(3, width=4),
    "narrower-rows": lambda: nonzero_rows(3, width=2),
    "rows-of-another-rank": lambda: nonzero_rows(3).unsqueeze(-1),
    "no-rows": lambda: nonzero_rows(0),
    "0-d": lambda: torch.tensor(1.0),
    "another-device": lambda: torch.empty(3, 3, device="meta"),
    "a-list": lambda: [[1.0, 2.0, 3.0]],
}


@pytest.mark.given
@pytest.mark.parametrize("kind", list(BAD_BATCHES))
def test_runner_rejects_a_batch_it_cannot_copy_in(buckets, kind):
    runner = buckets.BucketedGraphRunner(rowwise, nonzero_rows(8), capture_sizes=[4, 8])
    bad = BAD_BATCHES[kind]()
    check_rejects(lambda: runner(bad), "x",
                  f"runner(x) with {kind}: x must be a tensor with at least one row, each shaped "
                  "like the buffer's rows (3 values here), with the buffer's dtype (float32) and "
                  "device (cpu); anything else cannot be copied into the captured buffer")


def test_runner_accepts_every_batch_up_to_the_buffer(buckets):
    """The largest batches are the boundary: len(max_example) rows replays the largest graph."""
    runner = buckets.BucketedGraphRunner(rowwise, nonzero_rows(8), capture_sizes=[8, 2])
    for n in (1, 2, 3, 8):
        x = nonzero_rows(n, seed=n)
        got = runner(x)
        assert torch.allclose(got, rowwise(x), rtol=1e-6, atol=1e-6), (
            f"runner(x of {n} rows) with capture_sizes=[8, 2] and an 8-row buffer: expected fn(x)")
    assert runner.stats.get(8, 0) == 2 and runner.stats.get(2, 0) == 2, (
        f"stats after batches of 1, 2, 3 and 8 rows with buckets [2, 8]: expected {{2: 2, 8: 2}}, "
        f"got {dict(runner.stats)}")


@pytest.mark.given
@pytest.mark.parametrize("sizes", [[0, 4], [4, 9]], ids=["zero", "above-max-example"])
def test_runner_rejects_sizes_outside_the_buffer(buckets, sizes):
    check_rejects(
        lambda: buckets.BucketedGraphRunner(rowwise, nonzero_rows(8), capture_sizes=sizes),
        "capture_sizes", f"capture_sizes={sizes}: every size must be in 1..len(max_example) = 1..8",
    )


# ------------------------------------------------------------------------------- on a GPU
# Real CUDA graphs, captured by your exercise 3 (the runner's default for CUDA tensors).


def cuda_rows(n, width=8, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.rand(n, width, generator=g, device="cuda") + 0.5


@pytest.mark.gpu
def test_gpu_runner_pads_with_nan_and_returns_only_real_rows(buckets):
    sizes = [1, 2, 4, 8, 16]
    runner = buckets.BucketedGraphRunner(rowwise, cuda_rows(16), capture_sizes=sizes,
                                         pad_value=math.nan)
    for i, n in enumerate([3, 16, 1, 5, 9, 2, 20, 7]):
        x = cuda_rows(n, seed=i + 1)
        got = runner(x)
        expected = rowwise(x)
        where = f"runner(x of {n} rows) with capture_sizes={sizes}, pad_value=NaN"
        assert got.shape == expected.shape, (
            f"{where}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)} (return only "
            "the real rows, never the padding)"
        )
        assert not torch.isnan(got).any(), f"{where}: NaN padding reached a real row"
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-5), (
            f"{where}: the result differs from fn(x) (stale buffer? copy_ x into the static buffer)"
        )
    assert runner.stats.get("eager", 0) == 1 and runner.stats.get(16, 0) == 2, (
        f"stats: expected the 20-row batch to run eagerly and two batches in bucket 16 (16 and 9 "
        f"rows), got {dict(runner.stats)}"
    )


@pytest.mark.gpu
def test_gpu_buckets_captured_largest_first_into_one_pool(buckets, capture):
    recorder = RecordingCapture(capture.capture)  # your exercise 3, recorded
    runner = buckets.BucketedGraphRunner(rowwise, cuda_rows(32), capture_sizes=[4, 32, 1, 8],
                                         capture=recorder)
    calls = recorder.calls
    order = [len(c["inputs"][0]) for c in calls]
    assert order == [32, 8, 4, 1] and list(runner.capture_order) == [32, 8, 4, 1], (
        f"captured sizes in the order {order} (capture_order {list(runner.capture_order)}), "
        "expected [32, 8, 4, 1]: largest first, so the smaller graphs fit in its memory"
    )
    pools = [c["graph"].graph.pool() for c in calls]
    assert len(set(pools)) == 1, (
        f"the bucket graphs were captured into {len(set(pools))} memory pools {pools}; all must "
        "share the first graph's pool (pass graph.pool() as pool= to later captures)"
    )
    assert len({c["inputs"][0].data_ptr() for c in calls}) == 1, (
        "every bucket's graph must read a prefix of the same static buffer"
    )


def test_runner_over_1d_rows(buckets):
    """A 1-D max_example holds rows that are scalars: a runner over it takes 1-D batches."""
    runner = buckets.BucketedGraphRunner(lambda x: x * 2, torch.arange(4.0), capture_sizes=[2, 4])
    got = runner(torch.ones(3))
    assert torch.equal(got, torch.full((3,), 2.0)), (
        f"BucketedGraphRunner(x * 2, torch.arange(4.0))(torch.ones(3)): expected tensor([2., 2., 2.]), "
        f"got {got}\n  rule: max_example's rows may be scalars (a 1-D max_example); a batch is 1-D too")


@pytest.mark.given
def test_runner_over_1d_rows_refuses_a_0d_batch(buckets):
    runner = buckets.BucketedGraphRunner(lambda x: x * 2, torch.arange(4.0), capture_sizes=[2, 4])
    check_rejects(lambda: runner(torch.tensor(1.0)), "x",
                  "runner(torch.tensor(1.0)) over a 1-D max_example: a 0-d tensor has no rows "
                  "(ValueError naming x, not a TypeError from len())")
