"""Exercise 3 (capture): the probes a worker runs on the submission's ``capture`` and
the public checks the judge grades their answers with (``checks(draw)``). Its hidden checks are
the staff repository's, never released."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from coursekit.cudasim import capture_stream_problem, trace_capture_streams
from grader.checks import Answer, Check, Compare, P, Probe, raised
from grader.probes import call, probe, rows

if TYPE_CHECKING:
    from grader.secret import Draw


# ------------------------------------------------------------------------- probes


@probe
def capture_replays(mod, seeds: list):
    x, w = rows(8, 16, seed=0, device="cuda"), rows(16, 16, seed=1, device="cuda")

    def fn(a, b):
        return torch.relu(a @ b) * 2.0 + a.mean()

    graph = call(mod.capture, fn, x, w)
    same_inputs = (
        isinstance(graph.static_inputs, tuple)
        and len(graph.static_inputs) == 2
        and graph.static_inputs[0] is x
        and graph.static_inputs[1] is w
    )
    results = []
    for seed in seeds:
        new_x, new_w = rows(8, 16, seed=seed, device="cuda"), rows(16, 16, seed=seed + 1, device="cuda")
        x.copy_(new_x)
        w.copy_(new_w)
        out = call(graph.replay)
        expected = fn(new_x, new_w)
        results.append(
            {
                "is_static": out is graph.static_outputs,
                "max_error": float((out - expected).abs().max()),
                "scale": float(expected.abs().max()),
            }
        )
    return {"static_inputs_are_the_inputs": same_inputs, "replays": results}


@probe
def capture_warmup(mod, warmup_iters: int | None):
    """``capture(fn, x, warmup_iters=warmup_iters)`` (None: left out) and what fn saw."""
    caller = torch.cuda.current_stream()
    calls = []

    def fn(x):
        calls.append((torch.cuda.current_stream() == caller, torch.cuda.is_current_stream_capturing()))
        return x * 2.0

    kwargs = {} if warmup_iters is None else {"warmup_iters": warmup_iters}
    graph = call(mod.capture, fn, rows(4, 16, seed=2, device="cuda"), **kwargs)
    before_replay = len(calls)
    call(graph.replay)
    return {
        "warmups": sum(1 for _, capturing in calls if not capturing),
        "captures": sum(1 for _, capturing in calls if capturing),
        "warmups_on_caller_stream": sum(1 for on_caller, c in calls if on_caller and not c),
        "last_is_capture": bool(calls) and calls[-1][1],
        "caller_current_after": torch.cuda.current_stream() == caller,
        "replay_called_fn": len(calls) != before_replay,
    }


@probe
def capture_streams(mod, simulated: bool):
    """Two captures (the second into the first's pool) and the stream each call of fn ran on:
    ``coursekit.cudasim.trace_capture_streams``, with torch.cuda's streams simulated on a CPU or
    on the GPU itself."""
    return trace_capture_streams(lambda *a, **kw: call(mod.capture, *a, **kw), simulated=simulated)


@probe
def capture_waits_for_current_stream(mod):
    x = torch.full((4096,), -1.0, device="cuda")
    new = rows(1, 4096, seed=3, device="cuda")[0]
    snapshot = torch.empty_like(x)
    torch.cuda.synchronize()
    torch.cuda._sleep(50_000_000)
    x.copy_(new)
    calls = []

    def fn(t):
        if not calls:
            snapshot.copy_(t)
        calls.append(1)
        return t + 1.0

    call(mod.capture, fn, x, warmup_iters=1)
    torch.cuda.synchronize()
    return bool(torch.equal(snapshot, new))


@probe
def capture_pools(mod):
    x, y = rows(1, 128, seed=4, device="cuda")[0], rows(1, 128, seed=5, device="cuda")[0]
    first = call(mod.capture, lambda t: t * 2.0, x)
    second = call(mod.capture, lambda t: t + 3.0, y, pool=first.graph.pool())
    alone = call(mod.capture, lambda t: t - 1.0, y)
    x.copy_(rows(1, 128, seed=6, device="cuda")[0])
    y.copy_(rows(1, 128, seed=7, device="cuda")[0])
    call(first.replay)
    call(second.replay)
    return {
        "shared": second.graph.pool() == first.graph.pool(),
        "fresh_when_none": alone.graph.pool() != first.graph.pool(),
        "results_right": bool(
            torch.equal(first.static_outputs, x * 2.0) and torch.equal(second.static_outputs, y + 3.0)
        ),
    }


@probe
def capture_failure(mod, kind: str):
    """Capture a function that cannot be captured, then a good one, as the public test does
    (``exercises/tests/test_capture.py``): the failed capture's error, and with its traceback the
    failed ``CUDAGraph``, is held until the good graph has replayed (``pytest.raises`` holds it so;
    freed at once, torch 2.11 let a capture that skipped ``end_failed_capture`` pass here while the
    public test caught it)."""
    before = torch.cuda.current_stream()
    x = rows(1, 4, seed=8, device="cuda")[0]
    bad = {
        "item": lambda t: t * t.sum().item(),
        "cpu_copy": lambda t: t + torch.tensor([1.0, 2.0, 3.0, 4.0], device="cuda"),
    }[kind]
    error, held = None, None
    try:
        call(mod.capture, bad, x)
    except NotImplementedError:
        raise
    except BaseException as exc:  # noqa: BLE001 - we report whatever came
        held = exc
        error = {
            "types": [c.__name__ for c in type(exc).__mro__],
            "message": str(exc)[:2000],
            "chained": exc.__cause__ is not None or (exc.__context__ is not None and not exc.__suppress_context__),
        }
    restored = torch.cuda.current_stream() == before
    good_x = rows(1, 16, seed=9, device="cuda")[0]
    graph = call(mod.capture, lambda t: t * 4.0, good_x)
    good_x.copy_(rows(1, 16, seed=10, device="cuda")[0])
    call(graph.replay)
    good = bool(torch.equal(graph.static_outputs, good_x * 4.0))
    del held  # only now: the failed capture lived as long as the good one took
    return {"error": error, "stream_restored": restored, "good_capture_after": good}


# ------------------------------------------------------------------------- checks


def checks(draw: Draw) -> list[Check]:
    def failure(kind: str, words: tuple[str, ...]) -> Compare:
        def compare(probe: Probe, got: Answer, expected: Answer) -> str | None:
            import re

            if not got.ok:
                return f"{probe.label} {raised(got)}"
            v, error = got.value, got.value["error"]
            if error is None or "RuntimeError" not in error["types"] or "NotImplementedError" in error["types"]:
                return f"{probe.label}: expected a RuntimeError, got {error and error['types'][0]}"
            if not any(re.search(rf"\b{w}", error["message"], re.IGNORECASE) for w in words):
                return f"{probe.label}: the error must name the cause ({kind}); got {error['message'][:200]!r}"
            if not error["chained"]:
                return f"{probe.label}: chain the original error (raise ... from exc)"
            if not v["stream_restored"]:
                return f"{probe.label}: the caller's stream must be current again after a failed capture"
            if not v["good_capture_after"]:
                return (
                    f"{probe.label}: capturing a good function afterwards must still work (after "
                    f"restoring the stream, call end_failed_capture(pool) with the failed "
                    f"capture's pool)"
                )
            return None

        return compare

    def one_stream(probe: Probe, got: Answer, expected: Answer) -> str | None:
        if not got.ok:
            return f"{probe.label} {raised(got)}"
        problem = capture_stream_problem(got.value)
        return None if problem is None else f"{probe.label}: {problem}"

    r = draw.rng("ex3.gpu_replay_equals_eager")
    seeds = r.sample(range(1, 10_000), 3)
    r = draw.rng("ex3.gpu_warmup_on_a_side_stream")
    warm = sorted({1, r.randint(2, 6)})
    return [
        Check(
            "ex3",
            "gpu_replay_equals_eager",
            "replay() returns static_outputs holding fn of what the static inputs hold now",
            [P("capture_replays", "capture(mlp, x, w); copy_ fresh inputs; replay()", seeds=seeds)],
            compare=_replay_exact,
            gpu=True,
            points=3,
        ),
        Check(
            "ex3",
            "gpu_warmup_on_a_side_stream",
            "exactly warmup_iters warm-up calls (3 when left out) on a side stream, then one "
            "captured call; the caller's stream is current afterwards",
            [P("capture_warmup", f"capture(fn, x, warmup_iters={w})", warmup_iters=w) for w in warm]
            + [P("capture_warmup", "capture(fn, x) (warmup_iters left out: 3)", warmup_iters=None)],
            gpu=True,
            points=1,
        ),
        Check(
            "ex3",
            "capture_on_the_warmup_stream",
            "the warm-up and the capture run on one side stream, the same for every capture on a "
            "device (torch.cuda's streams simulated on a CPU)",
            [P("capture_streams", "two captures sharing a pool, streams simulated", simulated=True)],
            compare=one_stream,
            points=1,
        ),
        Check(
            "ex3",
            "gpu_capture_on_the_warmup_stream",
            "the warm-up and the capture run on one side stream, the same for every capture on the GPU",
            [P("capture_streams", "two captures sharing a pool", simulated=False)],
            compare=one_stream,
            gpu=True,
            points=1,
        ),
        Check(
            "ex3",
            "gpu_warmup_waits_for_the_current_stream",
            "the side stream waits on the current stream before warming up",
            [P("capture_waits_for_current_stream", "capture after a copy queued behind GPU work")],
            gpu=True,
            points=1,
        ),
        Check(
            "ex3",
            "gpu_capture_into_a_pool",
            "pool= is passed to the capture; None starts a new pool",
            [P("capture_pools", "capture(..., pool=first.graph.pool())")],
            gpu=True,
            points=1,
        ),
        Check(
            "ex3",
            "gpu_failed_capture",
            "a capture that fails names the cause, chains the error, restores the stream, and a "
            "good capture works afterwards",
            [P("capture_failure", "capture(fn calling .item())", kind="item", last=True)],
            compare=failure(".item() / host sync", ("item", "sync", "host", "wait")),
            gpu=True,
            points=1,
        ),
        Check(
            "ex3",
            "gpu_failed_capture_cpu_copy",
            "a capture that copies a CPU tensor to the GPU fails with a RuntimeError naming the "
            "cause, chained, the stream restored, a good capture working afterwards",
            [P("capture_failure", "capture(fn copying a CPU tensor)", kind="cpu_copy", last=True)],
            compare=failure("a CPU -> GPU copy", ("cpu", "host", "copy")),
            gpu=True,
            points=1,
        ),
    ]


def _replay_exact(probe: Probe, got: Answer, expected: Answer) -> str | None:
    if not got.ok:
        return f"{probe.label} {raised(got)}"
    v = got.value
    if not v["static_inputs_are_the_inputs"]:
        return f"{probe.label}: static_inputs must be the tensors passed to capture, as a tuple"
    for i, r in enumerate(v["replays"]):
        if not r["is_static"]:
            return f"{probe.label}: replay() must return static_outputs"
        if r["max_error"] > 1e-5 + 1e-5 * r["scale"]:
            return f"{probe.label}: replay {i} differs from eager by {r['max_error']:.3g}"
    return None
