"""Exercise 3 · capture with warm-up.

A CUDA graph records the kernels one call of ``fn`` launches, with the addresses they read and
write, and replays them later with a single launch. A right capture warms ``fn`` up first (its
first calls allocate memory, pick algorithms and fill caches; capturing that cold work would
record it) on the very stream it then captures on, a side stream ordered after the caller's
work (as vLLM and PyTorch's ``make_graphed_callables`` do: part of that first-call work is kept
per stream), lets graphs that never run at the same time share one memory pool, and leaves the
GPU usable when a function cannot be captured.

The lines marked ``# given`` check the arguments (``coursekit/argcheck.py``) and look for a CUDA
device; keep them, and write the rest. Check your work with ``python -m pytest exercises -m ex3``
(most checks need a GPU: ``python -m pytest exercises -m "ex3 and gpu"``; the order of streams is
checked on a CPU too, with ``torch.cuda``'s streams simulated: ``coursekit.standin.SimulatedCuda``).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from coursekit import argcheck
from coursekit.allocator import end_failed_capture  # noqa: F401 - given: see step 6
from coursekit.standin import CapturedGraph  # given: what capture returns


def capture(
    fn: Callable[..., Any], *static_inputs: torch.Tensor, warmup_iters: int = 3, pool: Any = None
) -> CapturedGraph:
    """Warm up ``fn(*static_inputs)`` and capture one call of it into a CUDA graph.

    1. Arguments (the given lines check them): ``fn`` not callable -> TypeError naming ``fn``;
       ``warmup_iters`` not an int (a bool is not) or ``< 1`` -> ValueError naming
       ``warmup_iters`` (capturing cold work records allocator and autotune side effects); both
       checked first, so on any machine. No CUDA -> a plain RuntimeError
       (not a ValueError: no argument is wrong) saying a CUDA device is needed. An input that is
       not a CUDA tensor on the current device (a CPU tensor, a tensor on another GPU, or no
       tensor at all) -> ValueError naming it (``static_inputs[i]``): a CPU tensor has no place in
       a captured graph, and a capture records the current device's streams.
    2. The capture stream: one side stream per device, made with ``torch.cuda.Stream()`` the first
       time ``capture`` runs on that device (``torch.cuda.current_device()``) and kept for every
       capture after (graphs that share a pool share its memory only when they are captured on
       one stream: the allocator reuses a freed block only on the stream it was allocated for).
    3. Warm-up: exactly ``warmup_iters`` calls of ``fn(*static_inputs)`` (3 when left out), none
       on the caller's current stream: they run on the capture stream, which first waits for the
       work already queued on the current stream (the inputs the caller just wrote); the current
       stream then waits for the capture stream.
    4. Capture: then exactly one more call of ``fn(*static_inputs)``, captured into a
       ``torch.cuda.CUDAGraph`` by ``torch.cuda.graph(..., stream=...)`` on the same capture
       stream the warm-up ran on (left out, ``torch.cuda.graph`` records on a stream of its own,
       which the warm-up never touched), in the memory pool ``pool`` (a handle such as another
       graph's ``graph.pool()``: the new graph shares that pool); ``pool=None`` -> a new pool of
       its own. The caller's stream is current again when ``capture`` returns. Write these calls
       as ``torch.cuda.<name>`` (a CPU check runs ``capture`` with ``torch.cuda``'s streams
       simulated in their place).
    5. Return ``CapturedGraph(graph, static_inputs, outputs)``: ``static_inputs`` the tensors
       passed in, as a tuple; ``outputs`` what the captured call returned (the same structure);
       ``replay()`` replays the graph (it does not call ``fn``) and returns those same output
       tensors, now holding ``fn`` of what the static inputs hold.
    6. Some functions cannot be captured: ``.item()``, ``.cpu()`` or ``print(tensor)`` make the
       CPU wait for the GPU (a host sync), and ``torch.tensor(..., device="cuda")`` copies from
       CPU memory; a graph can do neither, and ``torch.cuda.graph`` raises. Then ``capture`` raises
       a RuntimeError chained to the original error (``raise ... from exc``) whose message names
       the cause it looks like, told by the messages along the exception chain: "synchroniz" or
       "not permitted when stream is capturing" is a host sync, "pinned" or "between cpu and
       cuda" a copy from the CPU. The message names a host sync with a word starting with
       "item", "sync", "host" or "wait" (".item()", "host sync"), a copy with one starting with
       "cpu", "host" or "copy" ("copy from the CPU"). The stream that was current before the
       capture is current again, and capturing a good function afterwards must still work.
       (torch 2.4.1 to 2.12.0, the releases whose bindings ``coursekit/allocator.py`` read,
       leave the allocator sending allocations to the failed capture's pool until
       ``end_failed_capture(pool)``, given, is called: that file says why.)
    """
    fn = argcheck.function("fn", fn)  # given: a TypeError, on any machine
    warmup_iters = argcheck.count("warmup_iters", warmup_iters, at_least=1)  # given: on any machine
    argcheck.need_cuda("capture")  # given: a plain RuntimeError
    static_inputs = argcheck.tensors("static_inputs", static_inputs, cuda=True)  # given: a tuple now
    raise NotImplementedError("exercise 3: capture")
