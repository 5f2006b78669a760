"""A CPU stand-in for a captured CUDA graph, with the same call signature as exercise 3's
``capture`` (``capture(fn, *static_inputs, warmup_iters=3, pool=None) -> CapturedGraph``).

What it keeps of a real graph, so CPU tests can check graph runners:

* Replay reads the *same* static input tensors that were captured. Refill them with ``copy_``;
  rebinding a Python name to a new tensor leaves the graph reading the old one.
* Replay writes into the *same* output tensors every time, so an output you hold on to is
  overwritten by the next replay.
* Outputs keep their captured shapes; a function whose output shape changes between calls cannot
  be a graph, and replay says so.
* Each capture belongs to a memory pool; ``graph.pool()`` returns it, and captures that are handed
  the same ``pool`` share it (as ``torch.cuda.graph(pool=...)`` does).

What it refuses by hand: code that reads a tensor's values on the host inside a graph asks
``inside_standin_graph()`` and raises, as a CUDA capture would (``coursekit.toymodel``'s varlen
attention does). What it cannot keep: a real replay does not run Python, so values a function reads from Python
state (a counter, ``.item()``, a branch) are frozen at capture on a GPU but re-read here. Capture
here also runs ``fn`` once for real (a GPU capture only records), so a function with side effects
sees one extra call.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

_pool_ids = itertools.count(1)
_graph_depth = 0  # > 0 while a stand-in graph is being captured or replayed


def inside_graph() -> bool:
    """True while code runs as part of a graph: inside a stand-in capture or replay here, inside a
    CUDA stream capture on a GPU. (Warm-up calls are eager, as on a GPU.) Tests use it to see
    which work a runner captured and which it ran eagerly."""
    if inside_standin_graph():
        return True
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def inside_standin_graph() -> bool:
    """True inside a stand-in capture or replay: where the stand-in must refuse, by hand, what a
    CUDA capture refuses by itself (a host sync such as ``int(tensor)``)."""
    return _graph_depth > 0


def _as_graph(fn: Callable, *args: Any) -> Any:
    global _graph_depth
    _graph_depth += 1
    try:
        return fn(*args)
    finally:
        _graph_depth -= 1


class StandInPool:
    """A memory-pool handle; only its identity matters."""

    def __init__(self) -> None:
        self.id = next(_pool_ids)

    def __repr__(self) -> str:
        return f"StandInPool({self.id})"


@dataclass(eq=False)
class CapturedGraph:
    """What a capture returns: the graph, the tensors it reads and the tensors it writes.

    ``replay()`` re-runs the recorded work on whatever ``static_inputs`` hold now and returns
    ``static_outputs`` (the same objects every time)."""

    graph: Any
    static_inputs: tuple
    static_outputs: Any

    def replay(self) -> Any:
        self.graph.replay()
        return self.static_outputs


def tensors_in(obj: Any) -> Iterator[torch.Tensor]:
    """The tensors inside a function's result (a tensor, or tuples, lists and dicts of them)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from tensors_in(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from tensors_in(item)


class StandInGraph:
    """Replays ``fn`` on the captured inputs and copies the result into the captured outputs."""

    def __init__(self, fn: Callable, static_inputs: tuple, static_outputs: Any, pool: Any):
        self._fn = fn
        self._static_inputs = static_inputs
        self._static_outputs = list(tensors_in(static_outputs))
        self._pool = pool
        self.replays = 0

    def pool(self) -> Any:
        return self._pool

    def replay(self) -> None:
        fresh = list(tensors_in(_as_graph(self._fn, *self._static_inputs)))
        if len(fresh) != len(self._static_outputs):
            raise RuntimeError(
                f"graph replay: the function returned {len(fresh)} tensors, but "
                f"{len(self._static_outputs)} were captured; a graph's outputs are fixed at capture"
            )
        for i, (static, new) in enumerate(zip(self._static_outputs, fresh)):
            if new.shape != static.shape or new.dtype != static.dtype:
                raise RuntimeError(
                    f"graph replay: output {i} is {tuple(new.shape)} {new.dtype} but was captured "
                    f"as {tuple(static.shape)} {static.dtype}; a graph's shapes are fixed at capture"
                )
            if new is not static:
                static.copy_(new)
        self.replays += 1


def capture_on_cpu(
    fn: Callable, *static_inputs: torch.Tensor, warmup_iters: int = 3, pool: Any = None
) -> CapturedGraph:
    """Warm up ``fn`` ``warmup_iters`` times on ``static_inputs``, then 'capture' one call.

    Same rules as exercise 3's ``capture`` on a GPU: ``warmup_iters >= 1``; every input is a
    tensor (here: a CPU tensor); ``pool=None`` starts a new memory pool."""
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    if isinstance(warmup_iters, bool) or not isinstance(warmup_iters, int) or warmup_iters < 1:
        raise ValueError(
            f"warmup_iters: expected an int >= 1 (capturing cold work records allocator and "
            f"autotune side effects), got {warmup_iters!r}"
        )
    for i, t in enumerate(static_inputs):
        if not isinstance(t, torch.Tensor) or t.device.type != "cpu":
            got = f"a tensor on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"static_inputs[{i}]: expected a CPU tensor, got {got}")
    for _ in range(warmup_iters):
        fn(*static_inputs)
    outputs = _as_graph(fn, *static_inputs)
    graph = StandInGraph(fn, static_inputs, outputs, StandInPool() if pool is None else pool)
    return CapturedGraph(graph, static_inputs, outputs)


class RecordingCapture:
    """A capture routine (``capture_on_cpu`` by default) that records every capture asked of it:
    ``calls`` holds one dict per capture with the function captured (``fn``), its ``inputs``,
    ``warmup_iters``, ``pool`` and the returned ``graph``. Tests and the grader use it to see what
    a runner captured, and how."""

    def __init__(self, capture: Callable = capture_on_cpu):
        self.capture = capture
        self.calls: list[dict] = []

    def __call__(
        self, fn: Callable, *static_inputs: torch.Tensor, warmup_iters: int = 3, pool: Any = None
    ) -> CapturedGraph:
        graph = self.capture(fn, *static_inputs, warmup_iters=warmup_iters, pool=pool)
        self.calls.append(dict(fn=fn, inputs=static_inputs, warmup_iters=warmup_iters, pool=pool, graph=graph))
        return graph


class RecordingCompiler:
    """A stand-in for ``torch.compile``, as fast as no compiler (a decode engine's ``compiler=``):
    each piece comes back wrapped in a function of its own that runs it unchanged, kept in
    ``made``, so that what a runner captured can be told apart from the piece as written."""

    def __init__(self) -> None:
        self.made: list[Callable] = []

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"fn: expected a callable piece of the model, got {type(fn).__name__}")

        def compiled(*args: Any) -> Any:
            return fn(*args)

        self.made.append(compiled)
        return compiled

    def captured(self, capture: RecordingCapture) -> list[str]:
        """For each capture ``capture`` recorded, in order: "compiled" when it captured a function
        this compiler returned, "as written" otherwise."""
        return ["compiled" if any(call["fn"] is made for made in self.made) else "as written" for call in capture.calls]
