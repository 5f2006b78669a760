"""Exercise 4 · static_runner — static buffers, copy-in, one capture.

Run: python -m pytest exercises -m ex4. On the CPU the runner is checked with the course's
stand-in for a captured graph (coursekit.standin): replay runs on the captured input tensors and
writes into the captured output tensors, so rebinding a buffer instead of copying into it, or
handing out the static outputs, shows up exactly as on a GPU. The ``gpu`` tests repeat the key
checks on real CUDA graphs, captured with your exercise 3.
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from coursekit import strategies as S
from coursekit.checks import check_rejects
from coursekit.standin import RecordingCapture, tensors_in

pytestmark = pytest.mark.ex4
gpu = pytest.mark.gpu


def combine(*xs):
    """Output depends on every input (and on every element of each), so a stale buffer shows."""
    total = sum(x.sum() for x in xs)
    return torch.tanh(xs[0]) * 0.5 + total


def pair(x, y):
    return x * 2.0, {"y_plus_x_mean": y + x.mean()}


def listed(x, y):
    return [x * 2.0, y - x]


FUNCTIONS = [combine, pair, listed]
FUNCTION_IDS = ["tensor", "tuple-with-dict", "list"]


class ValuesAtCapture(RecordingCapture):
    """A recording capture that also keeps a copy of what the static inputs hold when the capture
    is asked for (a later copy_ into the buffers does not change it)."""

    def __init__(self):
        super().__init__()
        self.values = []

    def __call__(self, fn, *static_inputs, **kwargs):
        self.values.append([t.clone() if isinstance(t, torch.Tensor) else t for t in static_inputs])
        return super().__call__(fn, *static_inputs, **kwargs)


def randoms(shapes, seed, device="cpu"):
    g = torch.Generator(device=device).manual_seed(seed)
    return [torch.rand(*s, generator=g, device=device) + 0.5 for s in shapes]


# ------------------------------------------------------------------------------- on the CPU


@given(S.input_shape_lists, st.integers(1, 4), st.integers(1, 3))
def test_runner_returns_fn_of_the_latest_inputs(static_runner, shapes, calls, warmup_iters):
    examples = randoms(shapes, seed=0)
    runner = static_runner.GraphRunner(combine, *examples, warmup_iters=warmup_iters)
    for call in range(calls):
        inputs = randoms(shapes, seed=call + 1)
        got = runner(*inputs)
        expected = combine(*inputs)
        assert isinstance(got, torch.Tensor) and torch.allclose(got, expected, rtol=1e-6, atol=1e-6), (
            f"call {call}: runner(*inputs) differs from fn(*inputs) for inputs shaped {shapes}\n"
            "  rule: copy each input into its static buffer with copy_ and replay; the graph reads "
            "the buffers it was captured with, not the tensors you pass"
        )


@given(S.input_shape_lists)
def test_static_buffers_are_owned_stable_and_filled_by_copy(static_runner, shapes):
    examples = randoms(shapes, seed=0)
    kept = [x.clone() for x in examples]
    runner = static_runner.GraphRunner(combine, *examples)
    buffers = runner.static_inputs
    assert isinstance(buffers, tuple) and len(buffers) == len(examples), (
        f"static_inputs: expected a tuple of {len(examples)} buffers, got {buffers!r}"
    )
    assert all(b.data_ptr() != x.data_ptr() for b, x in zip(buffers, examples)), (
        "a static buffer shares memory with the caller's example input: the runner must own "
        "copies (x.clone()), or the caller's later writes would change what the graph reads"
    )
    pointers = [b.data_ptr() for b in buffers]
    for call in range(3):
        inputs = randoms(shapes, seed=call + 1)
        runner(*inputs)
        now = runner.static_inputs
        assert [b.data_ptr() for b in now] == pointers, (
            f"after call {call} the static buffers live at new addresses: a captured graph only "
            "reads the addresses it was captured with, so fill the buffers with copy_, never "
            "replace them"
        )
        assert all(torch.equal(b, x) for b, x in zip(now, inputs)), (
            f"after call {call} the static buffers do not hold the inputs of that call (copy_ them in)"
        )
    assert all(torch.equal(x, k) for x, k in zip(examples, kept)), (
        "the runner wrote into the caller's example inputs"
    )


@given(S.input_shape_lists)
def test_static_buffers_hold_the_example_values_at_capture(static_runner, shapes):
    examples = randoms(shapes, seed=0)
    spy = ValuesAtCapture()
    static_runner.GraphRunner(combine, *examples, capture=spy)
    assert len(spy.values) == 1, f"expected one capture at construction, got {len(spy.values)}"
    seen = spy.values[0]
    assert len(seen) == len(examples) and all(
        isinstance(v, torch.Tensor) and v.shape == x.shape and torch.equal(v, x)
        for v, x in zip(seen, examples)), (
        "when fn was captured the static buffers did not hold the example inputs' values (got "
        f"{[v.flatten()[:4].tolist() if isinstance(v, torch.Tensor) else v for v in seen]}, expected "
        f"{[x.flatten()[:4].tolist() for x in examples]})\n  rule: each buffer is x.clone(), not "
        "zeros_like / empty_like: warm-up and capture run fn on the buffers, and a function such as "
        "a Cholesky factorization fails on zeros"
    )


def test_a_function_that_fails_on_zeros_can_be_captured(static_runner):
    """torch.linalg.cholesky needs a positive-definite matrix: the example is one, zeros are not."""
    a = torch.rand(4, 4, generator=torch.Generator().manual_seed(0))
    spd = a @ a.T + 4 * torch.eye(4)
    try:
        runner = static_runner.GraphRunner(torch.linalg.cholesky, spd)
    except NotImplementedError:  # a RuntimeError too: the unfinished stub says so itself
        raise
    except RuntimeError as exc:
        raise AssertionError(
            f"GraphRunner(torch.linalg.cholesky, spd) failed at capture: {exc}\n  rule: the static "
            "buffers are clones of the example inputs, so warm-up runs fn on the example's values"
        ) from exc
    b = torch.rand(4, 4, generator=torch.Generator().manual_seed(1))
    spd2 = b @ b.T + 4 * torch.eye(4)
    assert torch.allclose(runner(spd2), torch.linalg.cholesky(spd2), rtol=1e-5, atol=1e-5), (
        "runner(spd) differs from torch.linalg.cholesky(spd)"
    )


def test_captures_once_with_the_given_warmup(static_runner):
    spy = RecordingCapture()
    examples = randoms([(3, 4), (4,)], seed=0)
    runner = static_runner.GraphRunner(combine, *examples, warmup_iters=2, capture=spy)
    for call in range(4):
        runner(*randoms([(3, 4), (4,)], seed=call + 1))
    assert len(spy.calls) == 1 and runner.num_captures == 1, (
        f"{len(spy.calls)} captures (num_captures = {runner.num_captures}) after 4 calls, "
        "expected exactly 1: capture once at construction, then only copy in and replay"
    )
    call = spy.calls[0]
    assert [b.data_ptr() for b in call["inputs"]] == [b.data_ptr() for b in runner.static_inputs], (
        "capture must be given the runner's static buffers: capture(fn, *static_inputs, ...)"
    )
    assert call["warmup_iters"] == 2, (
        f"capture(..., warmup_iters=...) got {call['warmup_iters']}; pass the runner's own (2 here)"
    )
    assert call["graph"].graph.replays == 4, (
        f"the graph was replayed {call['graph'].graph.replays} times for 4 calls, expected 4"
    )


def test_warmup_iters_defaults_to_3(static_runner):
    spy = RecordingCapture()
    static_runner.GraphRunner(combine, *randoms([(3,), (2, 2)], seed=0), capture=spy)
    got = [c["warmup_iters"] for c in spy.calls]
    assert got == [3], (
        f"GraphRunner(fn, *inputs) without warmup_iters: capture got warmup_iters {got}, expected "
        "[3]\n  rule: warmup_iters defaults to 3, passed on to capture(..., warmup_iters=warmup_iters)"
    )


@pytest.mark.parametrize("fn", FUNCTIONS, ids=FUNCTION_IDS)
def test_cloned_outputs_survive_the_next_call(static_runner, fn):
    spy = RecordingCapture()
    shapes = [(5,), (5,)]
    runner = static_runner.GraphRunner(fn, *randoms(shapes, seed=0), capture=spy)
    first = runner(*randoms(shapes, seed=1))
    kept = [t.clone() for t in tensors_in(first)]
    runner(*randoms(shapes, seed=2))
    assert all(torch.equal(t, k) for t, k in zip(tensors_in(first), kept)), (
        "clone_outputs not given (it defaults to True): a result changed when the runner was called again: "
        "return fresh copies (tensor.clone()) of the graph's outputs, not the static outputs themselves"
    )
    static = {t.data_ptr() for t in tensors_in(spy.calls[0]["graph"].static_outputs)}
    assert not static & {t.data_ptr() for t in tensors_in(first)}, (
        "clone_outputs not given (it defaults to True): the result shares memory with the graph's static outputs"
    )
    assert type(first) is type(fn(*randoms(shapes, seed=3))), (
        f"the result must keep fn's structure ({type(fn(*randoms(shapes, seed=3))).__name__}), got "
        f"{type(first).__name__}"
    )


@pytest.mark.parametrize("fn", FUNCTIONS, ids=FUNCTION_IDS)
def test_static_outputs_are_overwritten_when_not_cloned(static_runner, fn):
    shapes = [(5,), (5,)]
    runner = static_runner.GraphRunner(fn, *randoms(shapes, seed=0), clone_outputs=False)
    first = runner(*randoms(shapes, seed=1))
    second_inputs = randoms(shapes, seed=2)
    second = runner(*second_inputs)
    expected = list(tensors_in(fn(*second_inputs)))
    assert all(torch.allclose(t, e) for t, e in zip(tensors_in(first), expected)), (
        "with clone_outputs=False the runner must return the graph's static output tensors, so a "
        "result held from one call shows the next call's values (no copy); this one did not change"
    )
    assert [t.data_ptr() for t in tensors_in(first)] == [t.data_ptr() for t in tensors_in(second)], (
        "with clone_outputs=False every call must return the same static output tensors"
    )


def test_runner_uses_the_stand_in_for_cputensors_in(static_runner):
    runner = static_runner.GraphRunner(combine, *randoms([(2, 3)], seed=0), warmup_iters=1)
    x = randoms([(2, 3)], seed=4)[0]
    assert torch.allclose(runner(x), combine(x)), (
        "with capture=None and CPU tensors the runner must capture with coursekit.standin.capture_on_cpu"
    )


@pytest.mark.given
@pytest.mark.parametrize("bad", [[1.0, 2.0], 3.0, None], ids=["list", "float", "None"])
def test_example_inputs_must_be_tensors(static_runner, bad):
    check_rejects(lambda: static_runner.GraphRunner(combine, torch.ones(3), bad), "example_inputs[1]",
                  "every example input must be a tensor: the runner copies each into a static "
                  "buffer (ValueError naming example_inputs[i])")


@pytest.mark.given
def test_call_checks_the_number_of_inputs(static_runner):
    runner = static_runner.GraphRunner(combine, *randoms([(3,), (3,)], seed=0))
    check_rejects(lambda: runner(*randoms([(3,)], seed=1)), ("2", "inputs"),
                  "call with as many inputs as the runner was built with", error=TypeError)
    check_rejects(lambda: runner(*randoms([(3,), (3,), (3,)], seed=1)), ("2", "inputs"),
                  "call with as many inputs as the runner was built with", error=TypeError)


POSITION = ("inputs[1]", "input 1", "position 1", "argument 1", "input #1")


@pytest.mark.given
@pytest.mark.parametrize(
    "bad, what",
    [
        (torch.ones(4, 3), "shape"),
        (torch.ones(1, 3), "shape (as many elements, another shape)"),
        (torch.ones(3, 1), "shape (as many elements, another shape)"),
        (torch.ones(3, dtype=torch.float64), "dtype"),
        (torch.ones(3, dtype=torch.int64), "dtype"),
        (torch.empty(3, device="meta"), "device"),
        ([1.0, 2.0, 3.0], "type (a list, not a tensor)"),
    ],
    ids=["shape", "shape-1x3", "shape-3x1", "float64", "int64", "device", "list"],
)
def test_call_checks_each_input_against_its_buffer(static_runner, bad, what):
    runner = static_runner.GraphRunner(combine, *randoms([(2,), (3,), (1,)], seed=0))
    good = randoms([(2,), (3,), (1,)], seed=1)
    check_rejects(lambda: runner(good[0], bad, good[2]), POSITION,
                  f"an input with the wrong {what} cannot be copied into the graph's buffer; the "
                  "error must name the position, e.g. inputs[1]")


@pytest.mark.given
@pytest.mark.parametrize("shape", [(3, 2), (6,), (1, 2, 3)], ids=["3x2", "6", "1x2x3"])
def test_call_checks_the_shape_not_the_element_count(static_runner, shape):
    runner = static_runner.GraphRunner(combine, *randoms([(4,), (2, 3)], seed=0))
    good = randoms([(4,), (2, 3)], seed=1)
    bad = randoms([shape], seed=2)[0]
    check_rejects(lambda: runner(good[0], bad), POSITION,
                  f"a buffer shaped (2, 3) takes an input shaped (2, 3) only: {shape} holds as many "
                  "elements but is another shape (ValueError naming inputs[1]); compare shapes, "
                  "not numel()")


# ------------------------------------------------------------------------------- on a GPU


@gpu
def test_gpu_runner_replays_fn_of_fresh_inputs(static_runner):
    shapes = [(16, 32), (32,)]
    examples = randoms(shapes, seed=0, device="cuda")
    runner = static_runner.GraphRunner(combine, *examples)
    pointers = [b.data_ptr() for b in runner.static_inputs]
    assert all(b.is_cuda for b in runner.static_inputs), "static buffers must stay on the GPU"
    for call in range(4):
        inputs = randoms(shapes, seed=call + 1, device="cuda")
        got = runner(*inputs)
        expected = combine(*inputs)
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-5), (
            f"call {call}: the replayed result differs from fn on the same inputs (stale buffer? "
            "copy_ the inputs into static_inputs before replaying)"
        )
    assert [b.data_ptr() for b in runner.static_inputs] == pointers, (
        "the static buffers moved: a graph only reads the addresses it captured"
    )
    assert runner.num_captures == 1, f"num_captures: expected 1 after 4 calls, got {runner.num_captures}"


@gpu
def test_gpu_held_outputs_overwritten_only_without_clone(static_runner):
    shapes = [(64,), (64,)]
    for clone_outputs in (True, False):
        runner = static_runner.GraphRunner(combine, *randoms(shapes, seed=0, device="cuda"),
                                           clone_outputs=clone_outputs)
        first_inputs = randoms(shapes, seed=1, device="cuda")
        first = runner(*first_inputs)
        second_inputs = randoms(shapes, seed=2, device="cuda")
        runner(*second_inputs)
        now_equals = combine(*second_inputs) if not clone_outputs else combine(*first_inputs)
        assert torch.allclose(first, now_equals, rtol=1e-5, atol=1e-5), (
            f"clone_outputs={clone_outputs}: a held result "
            + ("must be overwritten by the next call (return the static outputs themselves)"
               if not clone_outputs else "must not change on the next call (return clones)")
        )


@pytest.mark.given
@gpu
def test_gpu_runner_rejects_a_cpu_tensor(static_runner):
    runner = static_runner.GraphRunner(combine, *randoms([(4,), (4,)], seed=0, device="cuda"))
    check_rejects(lambda: runner(randoms([(4,)], seed=1, device="cuda")[0], torch.ones(4)),
                  POSITION, "a CPU tensor cannot be copied into a CUDA graph's buffer unchecked; "
                  "name the position, e.g. inputs[1]")
