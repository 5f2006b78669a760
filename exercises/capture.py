"""Exercise 3 · capture with warm-up.

A CUDA graph records the kernels one call of ``fn`` launches, with the addresses they read and
write, and replays them later with a single launch. Three things make a capture right:

* **Warm up first.** The first calls of a function allocate memory, pick algorithms and fill
  caches; capturing that cold work would record it. Run ``fn`` a few times before capturing.
* **Warm up on a side stream** that waits for the current stream (so it sees the inputs the
  caller just wrote) and that the current stream then waits for (so nothing after it races the
  warm-up). That is the pattern in PyTorch's CUDA graphs documentation.
* **Share memory pools** between graphs that never run at the same time: pass ``pool`` to
  ``torch.cuda.graph`` (``other_graph.pool()`` is such a handle).

Check your work with ``python -m pytest exercises -m ex3`` (most checks need a GPU:
``python -m pytest exercises -m "ex3 and gpu"``).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from coursekit.allocator import end_failed_capture  # noqa: F401  (given: see step 5)
from coursekit.standin import CapturedGraph  # noqa: F401  (given: what capture returns)


def capture(
    fn: Callable[..., Any], *static_inputs: torch.Tensor, warmup_iters: int = 3, pool: Any = None
) -> CapturedGraph:
    """Warm up ``fn(*static_inputs)`` and capture one call of it into a CUDA graph.

    1. ``warmup_iters < 1`` -> ValueError naming ``warmup_iters`` (capturing cold work records
       allocator and autotune side effects), checked first, so on any machine. No CUDA ->
       RuntimeError saying a CUDA device is needed. An input that is not a CUDA tensor (a CPU
       tensor, or no tensor at all) -> ValueError naming it (``static_inputs[i]``): a CPU tensor
       has no place in a captured graph.
    2. Warm-up: on a new ``torch.cuda.Stream()`` that first waits on the current stream
       (``side.wait_stream(torch.cuda.current_stream())``), run ``fn(*static_inputs)`` exactly
       ``warmup_iters`` times (3 when left out); then make the current stream wait on the side
       stream.
    3. Capture into a pool you name: ``pool``, or when it is None a new one,
       ``torch.cuda.graph_pool_handle()`` (step 5 needs its id). ``g = torch.cuda.CUDAGraph()``;
       inside ``with torch.cuda.graph(g, pool=pool):`` call ``fn(*static_inputs)`` once more and
       keep what it returns.
    4. Return ``CapturedGraph(g, static_inputs, outputs)``: ``replay()`` replays ``g`` and returns
       those same output tensors, now holding the new results.
    5. Some functions cannot be captured: ``.item()``, ``.cpu()`` or ``print(tensor)`` make the
       CPU wait for the GPU, and ``torch.tensor(..., device="cuda")`` copies from CPU memory; a
       graph can do neither. Then ``torch.cuda.graph`` raises, and may leave the stream it
       captured on as the current stream (when ending the failed capture raises too). Catch the
       error and clean up after it: make the stream that was current before the capture current
       again (``torch.cuda.set_stream``), and call ``end_failed_capture(pool)`` (given: torch
       2.4 to 2.13 leave the allocator sending allocations to the failed capture's pool, and the
       next capture then fails; ``coursekit/allocator.py`` says why). Then raise a RuntimeError
       that says which of these causes it looks like, chained to the original error
       (``raise ... from exc``). After that, capturing a good function must still work.
    """
    raise NotImplementedError("exercise 3: capture")
