"""``torch.cuda``'s streams and graph capture, simulated on a CPU (given code).

A capture's streams are a choreography: the warm-up runs on a side stream that first waits for
the caller's work, the caller then waits for it, and the capture records on that same stream,
the same one for every capture that shares a pool. None of it shows in a result, and a CPU has
no streams; so ``SimulatedCuda`` stands in for the parts of ``torch.cuda`` a capture routine calls
and remembers which stream was current at each call, and ``trace_capture_streams`` runs a capture
routine (exercise 3's ``capture``) under it, or on a real GPU, and reports the streams it used.
``capture_stream_problem`` says which rule a trace breaks; the public test and the grader's check
both ask it.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any, Callable

import torch

from coursekit.standin import StandInPool

_simulation: "SimulatedCuda | None" = None
_simulations = itertools.count(1)


_stream_ids = itertools.count(1)  # across simulations: a stream kept from one is never mistaken in the next


class PlaysCuda(torch.Tensor):
    """A CPU tensor that reports itself on the simulated CUDA device (``is_cuda``, ``device``), so
    that code checking its inputs' device goes the way it goes on a GPU. Its arithmetic runs on
    the CPU, as a tensor's does."""

    @property
    def is_cuda(self) -> bool:
        return True

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", _active().device)


class SimulatedStream:
    """``torch.cuda.Stream`` under ``SimulatedCuda``: a name (``cuda_stream``, a number, as a real
    stream's handle is) and the waits it was asked for, in ``SimulatedCuda.events``."""

    def __new__(cls, device=None, priority=0, **kwargs):
        _active()  # a stream is made only inside a simulation
        stream = super().__new__(cls)
        stream.cuda_stream, stream.device = next(_stream_ids), device
        stream.label = kwargs.pop("_label", f"side stream {stream.cuda_stream}")
        return stream

    def wait_stream(self, stream) -> None:
        _active().events.append(("wait", self.label, stream.label))

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<{self.label}>"


class _StreamContext:
    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            sim = _active()
            self.before, sim.current = sim.current, self.stream
        return self.stream

    def __exit__(self, *exc) -> None:
        if self.stream is not None:
            _active().current = self.before


class SimulatedGraph:
    """``torch.cuda.CUDAGraph`` under ``SimulatedCuda``: it remembers the pool and the stream it
    was captured on. It records no kernels, so it cannot replay (``capture_on_cpu`` can)."""

    def __new__(cls, keep_graph=False):
        graph = super().__new__(cls)
        graph._pool, graph.stream = None, None
        return graph

    def capture_begin(self, pool=None, capture_error_mode="global", check_input_liveness=False) -> None:
        sim = _active()
        self._pool, self.stream = pool if pool is not None else StandInPool(), sim.current
        sim.capturing = self
        sim.events.append(("capture", sim.current.label, ""))

    def capture_end(self) -> None:
        _active().capturing = None

    def pool(self):
        return self._pool

    def replay(self) -> None:
        raise RuntimeError(
            "a graph captured under coursekit.standin.SimulatedCuda records streams, not kernels: "
            "it cannot replay (coursekit.standin.capture_on_cpu's graphs can)"
        )


class _GraphContext:
    """``torch.cuda.graph``: ``stream`` current during the capture, else the class's own stream
    (torch/cuda/graphs.py: "If not supplied, ``graph`` sets its own internal side stream as the
    current stream in the context")."""

    def __init__(
        self,
        cuda_graph,
        pool=None,
        stream=None,
        capture_error_mode="global",
        enable_annotations=False,
        check_input_liveness=False,
    ):
        sim = _active()
        if stream is None and sim.graph_stream is None:
            sim.graph_stream = SimulatedStream(_label="torch.cuda.graph's own stream")
        self.graph, self.pool = cuda_graph, pool
        self.stream_ctx = _StreamContext(stream if stream is not None else sim.graph_stream)

    def __enter__(self) -> None:
        self.stream_ctx.__enter__()
        self.graph.capture_begin(self.pool)

    def __exit__(self, *exc) -> None:
        self.graph.capture_end()
        self.stream_ctx.__exit__(*exc)


def _current_stream(device=None):
    return _active().current


def _set_stream(stream) -> None:
    _active().current = stream


def _stream(stream):
    return _StreamContext(stream)


def _is_current_stream_capturing() -> bool:
    sim = _active()
    return sim.capturing is not None and sim.capturing.stream is sim.current


def _graph_pool_handle():
    return StandInPool()


def _synchronize(device=None) -> None:
    pass


def _is_available() -> bool:
    return True


def _current_device() -> int:
    return _active().device


class _Device:
    def __init__(self, device):
        self.device = device

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def _active() -> "SimulatedCuda":
    if _simulation is None:
        raise RuntimeError("coursekit.standin's simulated streams are used outside SimulatedCuda")
    return _simulation


class SimulatedCuda:
    """``torch.cuda``'s streams and graph capture, simulated on a CPU, so that a capture routine
    (exercise 3's ``capture``) runs here as it would on a GPU and the streams it used can be read
    off: which stream was current at each call of the captured function, and whether a capture
    was under way. CPU tensors play CUDA tensors; work runs at once (no stream orders anything),
    and a captured graph records no kernels, so it cannot replay: this checks the choreography of
    streams, ``capture_on_cpu`` checks replays.

    Inside ``with SimulatedCuda() as sim:`` the names in ``STAND_INS`` of ``torch.cuda`` are the
    simulation's (each takes the parameters of torch's own, as a test of the course checks); the caller's
    stream is ``sim.caller``; ``sim.events`` lists the waits and captures in order. One simulation
    at a time, as one CUDA device has one current stream per thread."""

    STAND_INS = {
        "is_available": _is_available,
        "current_device": _current_device,
        "device": _Device,
        "synchronize": _synchronize,
        "Stream": SimulatedStream,
        "current_stream": _current_stream,
        "set_stream": _set_stream,
        "stream": _stream,
        "CUDAGraph": SimulatedGraph,
        "graph": _GraphContext,
        "graph_pool_handle": _graph_pool_handle,
        "is_current_stream_capturing": _is_current_stream_capturing,
    }

    def __init__(self) -> None:
        # A device index a GPU box hardly has (64..127; torch keeps an index in 8 bits), another for
        # each simulation: a stream a capture routine keeps per device (exercise 3 does) is not
        # found again by real CUDA work on device 0, 1, ...
        self.device = 64 + next(_simulations) % 64
        self.events: list[tuple[str, str, str]] = []
        self.capturing: SimulatedGraph | None = None
        self.graph_stream: SimulatedStream | None = None
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> "SimulatedCuda":
        global _simulation
        if _simulation is not None:
            raise RuntimeError("SimulatedCuda: one simulation at a time")
        _simulation = self
        self.caller = self.current = SimulatedStream(_label="the caller's stream")
        for name, stand_in in self.STAND_INS.items():
            self._saved[name] = getattr(torch.cuda, name)
            setattr(torch.cuda, name, stand_in)
        return self

    def __exit__(self, *exc) -> None:
        global _simulation
        for name, real in self._saved.items():
            setattr(torch.cuda, name, real)
        _simulation = None


# --------------------------------------------------------------- the streams a capture used

CALLER = "the caller's stream"
GRAPHS_OWN = "torch.cuda.graph's own stream"


def trace_capture_streams(capture: Callable, *, simulated: bool) -> dict:
    """Two captures by ``capture`` (``capture(fn, x, warmup_iters=2)``, then another function into
    the first graph's pool), each of a function that notes the stream current at each of its calls
    and whether a capture was under way: under ``SimulatedCuda`` with CPU tensors that play CUDA
    tensors (``PlaysCuda``) when ``simulated``, else on this machine's GPU. Returns
    ``{"captures": [[[stream, capturing], ...], [...]], "caller_current_after": bool}``; streams
    are named ``CALLER``, ``GRAPHS_OWN`` (the stream ``torch.cuda.graph`` records on when it is
    given none) or ``side stream N``, in order of first use."""
    with SimulatedCuda() if simulated else contextlib.nullcontext() as sim:
        device = "cpu" if simulated else "cuda"
        caller = torch.cuda.current_stream()
        names = {caller.cuda_stream: CALLER}

        def name(stream) -> str:
            if stream.cuda_stream not in names:
                own = sim.graph_stream if simulated else getattr(torch.cuda.graph, "default_capture_stream", None)
                is_own = own is not None and own.cuda_stream == stream.cuda_stream
                names[stream.cuda_stream] = GRAPHS_OWN if is_own else f"side stream {len(names)}"
            return names[stream.cuda_stream]

        calls: list[list] = [[], []]

        def traced(k: int, scale: float) -> Callable:
            def fn(x):
                calls[k].append([name(torch.cuda.current_stream()), bool(torch.cuda.is_current_stream_capturing())])
                return x * scale

            return fn

        def tensor(value: float) -> torch.Tensor:
            x = torch.full((4, 16), value, device=device)
            return x.as_subclass(PlaysCuda) if simulated else x

        first = capture(traced(0, 2.0), tensor(1.5), warmup_iters=2)
        capture(traced(1, 3.0), tensor(2.5), warmup_iters=2, pool=first.graph.pool())
        after = torch.cuda.current_stream().cuda_stream == caller.cuda_stream
    return {"captures": calls, "caller_current_after": after}


def capture_stream_problem(trace: object) -> str | None:
    """Which rule of exercise 3's streams ``trace`` (``trace_capture_streams``'s answer) breaks,
    or None: each capture warms up on one stream that is not the caller's and records its one
    captured call on that same stream; both captures use the same stream; the caller's stream is
    current afterwards. An answer of another shape is a problem too, never an exception."""
    if not isinstance(trace, dict) or not isinstance(trace.get("captures"), list) or len(trace["captures"]) != 2:
        return "malformed answer: expected two captures' calls"
    used = []
    for k, calls in enumerate(trace["captures"], start=1):
        if not isinstance(calls, list) or not all(
            isinstance(c, list) and len(c) == 2 and isinstance(c[0], str) and isinstance(c[1], bool) for c in calls
        ):
            return f"malformed answer: capture {k}'s calls"
        warm = [stream for stream, capturing in calls if not capturing]
        took = [stream for stream, capturing in calls if capturing]
        if not warm or len(took) != 1:
            return (
                f"capture {k} called fn {len(warm)} time(s) outside a capture and {len(took)} inside one; "
                "expected the warm-up calls, then one captured call"
            )
        if CALLER in warm:
            return f"capture {k} warmed up on {CALLER}; warm up on the capture stream, a side stream"
        if len(set(warm)) != 1:
            return f"capture {k} warmed up on several streams ({', '.join(sorted(set(warm)))}); use one"
        if took[0] != warm[0]:
            return (
                f"capture {k} warmed up on {warm[0]} but recorded on {took[0]}\n  rule: capture on the "
                "stream the warm-up ran on, torch.cuda.graph(graph, pool=pool, stream=side) (left out, "
                "torch.cuda.graph records on a stream of its own, whose per-stream caches the warm-up "
                "never filled)"
            )
        used.append(warm[0])
    if used[0] != used[1]:
        return (
            f"the two captures, which share a pool, ran on {used[0]} and {used[1]}\n  rule: one capture "
            "stream per device, made on first use and kept (a pool's freed memory is reused only on "
            "the stream it was allocated for)"
        )
    if trace.get("caller_current_after") is not True:
        return "after capture returns, the caller's stream must be current again"
    return None
