"""Exercise 3 · capture — warm-up, capture and replay on real CUDA graphs.

Run: python -m pytest exercises -m ex3. Everything but the order of streams (checked with
torch.cuda's streams simulated on a CPU: ``coursekit/cudasim.py``) and two tests of the given
argument checks (marked ``given``) needs a GPU (marked ``gpu``; skipped with a reason elsewhere). Inputs are
fresh random numbers on every call, never zeros, so a graph that reads a stale buffer cannot
pass by luck.

The tests that make a capture fail on purpose (``.item()``, a CPU-to-GPU copy) each run in a
fresh Python process of their own, so that a capture that forgets ``end_failed_capture`` (the
allocator left believing a capture is under way: ``coursekit/allocator.py``) fails that test
alone and not every graph test after it.
"""

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from coursekit.checks import check_rejects, check_says_cuda_is_needed
from coursekit.cudasim import capture_stream_problem, trace_capture_streams
from coursekit.impl import NAMED, REPO_ROOT, Implementation

pytestmark = pytest.mark.ex3
gpu = pytest.mark.gpu


def fresh(*shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.rand(*shape, generator=g, device="cuda") + 0.5


def mlp(x, w):
    return torch.relu(x @ w) * 2.0 + x.mean()


def raise_if_stub(exc):
    if isinstance(exc, NotImplementedError):  # a subclass of RuntimeError: the stub
        raise exc


@pytest.mark.given
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised on a machine without CUDA")
@pytest.mark.parametrize("warmup_iters", [None, 1])
def test_capture_without_cuda_says_a_gpu_is_needed(capture, warmup_iters):
    kwargs = {} if warmup_iters is None else {"warmup_iters": warmup_iters}
    check_says_cuda_is_needed(lambda: capture.capture(lambda: torch.ones(3), **kwargs), "capture")


@pytest.mark.given
@pytest.mark.parametrize("warmup_iters", [0, -2])
def test_warmup_iters_below_one_is_refused_on_any_machine(capture, warmup_iters):
    check_rejects(lambda: capture.capture(lambda: torch.ones(3), warmup_iters=warmup_iters), "warmup_iters",
                  "warmup_iters < 1 is a ValueError naming it, checked first (before CUDA is looked "
                  "for), so on any machine")


# --------------------------------------------------------------------- on any machine


def test_warm_up_and_capture_on_one_stream_with_streams_simulated(capture):
    """Two captures, the second into the first's pool, with torch.cuda's streams simulated on
    this machine: each warms up on a side stream and records on that same stream, and both use
    one stream (the device's capture stream)."""
    problem = capture_stream_problem(trace_capture_streams(capture.capture, simulated=True))
    assert problem is None, problem


# ------------------------------------------------------------------------------- on a GPU


@gpu
def test_capture_records_on_the_stream_it_warmed_up_on(capture):
    """The same two captures on the GPU's own streams."""
    problem = capture_stream_problem(trace_capture_streams(capture.capture, simulated=False))
    assert problem is None, problem


@gpu
def test_replay_equals_eager_on_fresh_inputs(capture):
    x, w = fresh(8, 16, seed=1), fresh(16, 16, seed=2)
    graph = capture.capture(mlp, x, w)
    inputs = graph.static_inputs
    assert isinstance(inputs, tuple) and len(inputs) == 2 and inputs[0] is x and inputs[1] is w, (
        "CapturedGraph.static_inputs must be the tensors passed to capture, as a tuple"
    )
    for step in range(3):
        new_x, new_w = fresh(8, 16, seed=10 + step), fresh(16, 16, seed=20 + step)
        x.copy_(new_x)
        w.copy_(new_w)
        out = graph.replay()
        assert out is graph.static_outputs, (
            "replay() must return static_outputs, the very tensors the capture produced"
        )
        expected = mlp(new_x, new_w)
        assert torch.allclose(out, expected, rtol=1e-5, atol=1e-5), (
            f"replay {step}: the graph's output differs from running fn eagerly on the same inputs "
            f"(max difference {(out - expected).abs().max().item():.3g})"
        )


@gpu
def test_static_outputs_keep_fns_structure(capture):
    x = fresh(32, seed=3)
    graph = capture.capture(lambda t: (t * 3.0, {"sum": t.sum()}), x)
    outs = graph.static_outputs
    assert isinstance(outs, tuple) and isinstance(outs[1], dict), (
        f"static_outputs must be exactly what fn returned (here a tuple holding a dict), got "
        f"{type(outs).__name__}"
    )
    x.copy_(fresh(32, seed=4))
    triple, parts = graph.replay()
    assert torch.allclose(triple, x * 3.0) and torch.allclose(parts["sum"], x.sum(), rtol=1e-5), (
        "after copying new values into the static input and replaying, the outputs must hold "
        "fn's results for those values"
    )


@gpu
@pytest.mark.parametrize("warmup_iters", [1, 3, None])
def test_warmup_runs_exactly_n_times_on_a_side_stream(capture, warmup_iters):
    """None: warmup_iters left out, so 3 warm-up calls."""
    caller = torch.cuda.current_stream()
    calls = []

    def fn(x):
        calls.append((torch.cuda.current_stream(), torch.cuda.is_current_stream_capturing()))
        return x * 2.0

    kwargs = {} if warmup_iters is None else {"warmup_iters": warmup_iters}
    graph = capture.capture(fn, fresh(64, seed=5), **kwargs)
    called = ("capture(fn, x) (warmup_iters left out: 3)" if warmup_iters is None
              else f"capture(fn, x, warmup_iters={warmup_iters})")
    warmup_iters = 3 if warmup_iters is None else warmup_iters
    warmups = [stream for stream, capturing in calls if not capturing]
    captures = [stream for stream, capturing in calls if capturing]
    assert len(warmups) == warmup_iters and len(captures) == 1 and calls[-1][1], (
        f"{called} ran fn {len(warmups)} times outside the "
        f"capture and {len(captures)} times inside it, expected {warmup_iters} warm-up calls then "
        "exactly one captured call"
    )
    assert all(stream != caller for stream in warmups), (
        "the warm-up ran on the caller's current stream; run it on the capture stream, a side "
        "stream (torch.cuda.Stream()) that waits on the current one"
    )
    assert torch.cuda.current_stream() == caller, (
        "after capture returns, the caller's stream must be current again"
    )
    graph.replay()
    assert len(calls) == warmup_iters + 1, "replay() must not call fn: it replays the recorded kernels"


@gpu
def test_warmup_waits_for_work_queued_on_the_current_stream(capture):
    x = torch.full((4096,), -1.0, device="cuda")
    new = fresh(4096, seed=6)
    snapshot = torch.empty_like(x)  # allocated up front: a cudaMalloc inside fn may serialize streams
    torch.cuda.synchronize()
    torch.cuda._sleep(50_000_000)  # keep the current stream busy for a while (tens of ms)...
    x.copy_(new)  # ...so this copy is still queued when the warm-up starts
    calls = []

    def fn(t):
        if not calls:
            snapshot.copy_(t)
        calls.append(1)
        return t + 1.0

    capture.capture(fn, x, warmup_iters=1)
    torch.cuda.synchronize()
    assert torch.equal(snapshot, new), (
        "the warm-up read the input before the copy queued on the current stream had run\n"
        "  rule: the side stream must wait on the current stream before warming up "
        "(side.wait_stream(torch.cuda.current_stream()))"
    )


@gpu
def test_capture_into_a_given_pool(capture):
    x, y = fresh(128, seed=7), fresh(128, seed=8)
    first = capture.capture(lambda t: t * 2.0, x)
    second = capture.capture(lambda t: t + 3.0, y, pool=first.graph.pool())
    alone = capture.capture(lambda t: t - 1.0, y)
    assert second.graph.pool() == first.graph.pool(), (
        f"capture(..., pool=first.graph.pool()) captured into pool {second.graph.pool()}, expected "
        f"{first.graph.pool()}\n  rule: pass pool to torch.cuda.graph(g, pool=pool)"
    )
    assert alone.graph.pool() != first.graph.pool(), "pool=None must start a new memory pool"
    x.copy_(fresh(128, seed=9))
    y.copy_(fresh(128, seed=10))
    first.replay()
    second.replay()
    assert torch.equal(first.static_outputs, x * 2.0) and torch.equal(second.static_outputs, y + 3.0), (
        "graphs sharing a pool, replayed in capture order, must both produce the right results"
    )


@pytest.mark.given
@gpu
def test_capture_rejects_bad_arguments(capture):
    x = fresh(8, seed=11)
    check_rejects(lambda: capture.capture(lambda t: t * 2, x, warmup_iters=0), "warmup_iters",
                  "at least one warm-up call (capturing cold work records allocator side effects)")
    check_rejects(lambda: capture.capture(lambda a, b: a + b.cuda(), x, torch.ones(8)),
                  "static_inputs", "every static input must be a CUDA tensor (a CPU tensor has no "
                  "place in a captured graph)")
    check_rejects(lambda: capture.capture(lambda a, b: a * b, x, 2.0),
                  "static_inputs", "every static input must be a CUDA tensor (2.0 is no tensor at all)")


def check_capture_fails(capture, fn, x, words, what):
    before = torch.cuda.current_stream()
    with pytest.raises(RuntimeError) as caught:
        capture.capture(fn, x)
    raise_if_stub(caught.value)
    message = str(caught.value)
    # Match at the start of a word: every raw CUDA error says "asynchronously reported", which
    # names no cause.
    assert any(re.search(rf"\b{word}", message, re.IGNORECASE) for word in words), (
        f"capturing a function that {what} must raise a RuntimeError naming the cause (one of "
        f"{words}), got: {message}"
    )
    error = caught.value
    chained = error.__cause__ is not None or (
        error.__context__ is not None and not error.__suppress_context__
    )
    assert chained, "chain the original error (raise RuntimeError(...) from exc), do not hide it"
    assert torch.cuda.current_stream() == before, (
        "after a failed capture the caller's stream must be current again (torch.cuda.graph leaves "
        "its capture stream current when the capture fails: restore it with torch.cuda.set_stream)"
    )
    good_x = fresh(16, seed=12)
    graph = capture.capture(lambda t: t * 4.0, good_x)
    good_x.copy_(fresh(16, seed=13))
    graph.replay()
    assert torch.equal(graph.static_outputs, good_x * 4.0), (
        "after a failed capture, capturing a good function must still work\n  rule: after restoring "
        "the stream, call end_failed_capture(pool) with the pool the failed capture used"
    )


#: What cannot be captured: (fn, numel, seed, words the error must use, what fn does).
CANNOT_CAPTURE = {
    "item": (lambda t: t * t.sum().item(), 16, 14, ("item", "sync", "host", "wait"), "calls .item()"),
    "cpu_copy": (lambda t: t + torch.tensor([1.0, 2.0, 3.0, 4.0], device="cuda"), 4, 15,
                 ("cpu", "host", "copy"), "copies a CPU tensor to the GPU"),
}
RESULT = "launch-tax failed-capture result: "
ALONE_TIMEOUT_S = 240


def check_capture_fails_alone(impl, kind):
    """``check_capture_fails`` for ``CANNOT_CAPTURE[kind]`` in a fresh interpreter (see the module
    docstring), reported here as if it had run here."""
    spec = impl.label if impl.label in NAMED else str(impl.folder)
    code = "from exercises.tests.test_capture import failed_capture_in_this_process as f; f()"
    try:
        done = subprocess.run([sys.executable, "-c", code, spec, kind], cwd=REPO_ROOT,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])},
                              capture_output=True, text=True, timeout=ALONE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"capture of a function that {CANNOT_CAPTURE[kind][4]} did not finish in "
                    f"{ALONE_TIMEOUT_S} s", pytrace=False)
    results = [line[len(RESULT):] for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if not results:
        pytest.fail(f"the process running this test ended without a result (exit status "
                    f"{done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}", pytrace=False)
    result = json.loads(results[-1])
    if result["outcome"] == "NotImplementedError":
        raise NotImplementedError(result["message"])
    if result["outcome"] != "passed":
        prefix = "" if result["outcome"] in ("AssertionError", "Failed") else f"{result['outcome']}: "
        pytest.fail(prefix + result["message"], pytrace=False)


def failed_capture_in_this_process():
    """The child's side: ``python -c ... IMPL KIND``; prints one result line, then ends the
    process at once (nothing may run after a failed capture, not even interpreter teardown)."""
    spec, kind = sys.argv[1:3]
    result = {"outcome": "passed", "message": ""}
    try:
        fn, numel, seed, words, what = CANNOT_CAPTURE[kind]
        capture = Implementation(spec).module("capture")
        check_capture_fails(capture, fn, fresh(numel, seed=seed), words, what)
    except BaseException as exc:  # noqa: BLE001 - every outcome goes back to the parent
        result = {"outcome": type(exc).__name__, "message": str(exc)}
    sys.stdout.write(RESULT + json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)


@gpu
def test_item_cannot_be_captured(impl, capture):
    check_capture_fails_alone(impl, "item")


@gpu
def test_copy_from_cpu_cannot_be_captured(impl, capture):
    check_capture_fails_alone(impl, "cpu_copy")
