"""``coursekit.cudasim``: torch.cuda's streams and graph capture simulated on a CPU, for exercise 3's
stream rule. Its stand-ins take torch's own parameters, its graph context behaves as
``torch.cuda.graph`` does where the rule depends on it, and the rule's verdicts come out as the
reference, the alternative and the two stream mutants deserve."""

from __future__ import annotations

import inspect
import types

import pytest
import torch

from coursekit import cudasim
from coursekit.cudasim import GRAPHS_OWN, SimulatedCuda, capture_stream_problem, trace_capture_streams
from coursekit.impl import REPO_ROOT, Implementation
from tests import doubles


#: Parameters torch added after 2.11 (the GPU image's release) and has in 2.13 (the README's pin):
#: the stand-ins take them, and drop them where the installed torch does not have them yet.
NEWER = {"enable_annotations", "check_input_liveness"}


def as_installed(stand_in, real):
    """``stand_in``'s signature less the ``NEWER`` parameters ``real`` lacks (torch 2.11)."""
    has = set(inspect.signature(real).parameters)
    signature = inspect.signature(stand_in)
    kept = [p for p in signature.parameters.values() if p.name in has or p.name not in NEWER]

    def double(*args, **kwargs):
        raise AssertionError("never called")

    double.__signature__ = signature.replace(parameters=kept)
    double.__qualname__ = stand_in.__qualname__
    double.__module__ = stand_in.__module__
    return double


def test_the_simulation_takes_torch_cudas_parameters():
    real_torch = {name: getattr(torch.cuda, name) for name in SimulatedCuda.STAND_INS}
    for name, stand_in in SimulatedCuda.STAND_INS.items():
        real = real_torch[name]
        if inspect.isclass(real) and inspect.isclass(stand_in):
            made = "__new__" if "__new__" in vars(stand_in) else "__init__"
            assert (
                doubles.differs(as_installed(getattr(stand_in, made), getattr(real, made)), getattr(real, made)) is None
            ), name
            for method in ("wait_stream", "synchronize", "query", "capture_begin", "capture_end", "pool", "replay"):
                if hasattr(stand_in, method) and hasattr(real, method):
                    problem = doubles.differs(
                        as_installed(getattr(stand_in, method), getattr(real, method)), getattr(real, method)
                    )
                    assert problem is None, f"{name}.{method}: {problem}"
        else:
            assert doubles.differs(stand_in, real) is None, name


def test_the_simulation_puts_torch_cuda_back():
    before = {name: getattr(torch.cuda, name) for name in SimulatedCuda.STAND_INS}
    with SimulatedCuda():
        assert torch.cuda.is_available() and torch.cuda.Stream is cudasim.SimulatedStream
    assert {name: getattr(torch.cuda, name) for name in SimulatedCuda.STAND_INS} == before
    with pytest.raises(RuntimeError, match="outside SimulatedCuda"):
        cudasim.SimulatedStream()


def test_the_graph_records_on_its_own_stream_unless_given_one():
    """torch.cuda.graph: "If not supplied, ``graph`` sets its own internal side stream as the
    current stream in the context" (torch/cuda/graphs.py), one for every capture."""
    with SimulatedCuda() as sim:
        side = torch.cuda.Stream()
        seen = []
        for stream in (None, side, None):
            with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=stream):
                seen.append((torch.cuda.current_stream(), torch.cuda.is_current_stream_capturing()))
            assert torch.cuda.current_stream() is sim.caller and not torch.cuda.is_current_stream_capturing()
    assert seen[0] == (sim.graph_stream, True) and seen[1] == (side, True) and seen[2][0] is seen[0][0]
    assert sim.graph_stream.label == GRAPHS_OWN


def test_tensors_play_cuda_tensors_on_the_simulated_device():
    from coursekit import argcheck

    with SimulatedCuda() as sim:
        x = torch.ones(3).as_subclass(cudasim.PlaysCuda)
        assert x.is_cuda and x.device == torch.device("cuda", sim.device)
        assert argcheck.tensors("static_inputs", [x], cuda=True)[0] is x
        assert torch.equal(x * 2.0, torch.full((3,), 2.0))


def module_from(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)
    return module


REFERENCE = (REPO_ROOT / "solutions" / "capture.py").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "edit, problem",
    [
        (None, None),
        (
            ("torch.cuda.graph(graph, pool=pool, stream=side)", "torch.cuda.graph(graph, pool=pool)"),
            "recorded on " + GRAPHS_OWN,
        ),
        (("    if device not in _CAPTURE_STREAMS:\n", "    if True:\n"), "share a pool, ran on side stream"),
        (("    with torch.cuda.stream(side):\n", "    if True:\n"), "warmed up on the caller's stream"),
    ],
)
def test_the_rule_tells_the_reference_from_the_stream_mistakes(edit, problem):
    source = REFERENCE if edit is None else REFERENCE.replace(*edit)
    assert source != REFERENCE or edit is None, "the edit no longer applies to the reference"
    found = capture_stream_problem(trace_capture_streams(module_from(source, "under_test").capture, simulated=True))
    assert (found is None) if problem is None else (found and problem in found), found


def test_the_alternative_keeps_the_rule():
    alternative = module_from((REPO_ROOT / "tests" / "alternatives" / "capture.py").read_text(), "alternative")
    assert capture_stream_problem(trace_capture_streams(alternative.capture, simulated=True)) is None


@pytest.mark.parametrize(
    "answer",
    [
        None,
        1,
        "x",
        {},
        {"captures": "x"},
        {"captures": [[], []]},
        {"captures": [[["a", 1]], [["a", True]]]},
        {"captures": [[[0, False], [0, True]]] * 2},
        {"captures": [[1]] * 2, "caller_current_after": True},
    ],
)
def test_a_malformed_trace_is_a_problem_never_an_exception(answer):
    assert isinstance(capture_stream_problem(answer), str)


def test_the_stub_is_not_judged_by_the_trace():
    with pytest.raises(NotImplementedError):
        trace_capture_streams(Implementation("exercises").module("capture").capture, simulated=True)


@pytest.mark.gpu
def test_the_engines_captures_warm_up_and_record_on_one_stream():
    """On a GPU the engine captures with exercise 3's ``capture``: every warm-up and every capture
    of FULL_AND_PIECEWISE's graphs (all sizes, one pool) runs on one side stream, so that the
    pool's memory is shared among them (exercise 9's model; H200: 46 MiB for sizes 1-8 in one
    pool, the largest alone)."""
    from coursekit.toymodel import ToyModel

    reference = Implementation("solutions")
    capture, engine = reference.module("capture").capture, reference.module("engine")
    seen = []

    def traced(fn, *static_inputs, warmup_iters=3, pool=None):
        def watched(*args):
            seen.append((torch.cuda.current_stream().cuda_stream, torch.cuda.is_current_stream_capturing()))
            return fn(*args)

        return capture(watched, *static_inputs, warmup_iters=warmup_iters, pool=pool)

    runner = engine.DecodeEngine(
        ToyModel(device="cuda"), mode=engine.CUDAGraphMode.FULL_AND_PIECEWISE, capture_sizes=[1, 2, 4], capture=traced
    )
    runner.capture_model()
    caller = torch.cuda.current_stream().cuda_stream
    streams = {stream for stream, _ in seen}
    assert any(capturing for _, capturing in seen) and len(streams) == 1 and caller not in streams, (
        f"the engine's warm-ups and captures ran on streams {sorted(streams)} (the caller's: {caller}); "
        "expected one side stream for all of them"
    )
