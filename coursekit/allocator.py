"""PyTorch's CUDA caching allocator after a failed graph capture (given to exercise 3).

``torch.cuda.graph`` starts a capture by telling the caching allocator "serve the capturing
stream from this graph's memory pool" (``beginAllocateToPool``) and ends it by telling it to stop
(``endAllocateToPool``). In the torch releases this course supports, ``CUDAGraph::capture_end``
checks ``cudaStreamEndCapture``'s error *before* it tells the allocator to stop, so when a capture
fails (``.item()``, a copy from CPU memory...) the allocator goes on believing a capture is under
way. Nothing goes wrong until the next ``torch.cuda.empty_cache()``, and ``torch.cuda.graph``
calls it on entry: it fails torch's internal assert ``captures_underway.empty()``, so no later
capture in that process can start. PyTorch's newer code ends the allocation before it checks
the error (and keeps a ``capturing_to_pool_`` flag in ``ATen/cuda/CUDAGraph.h``); no release up
to 2.13 has that flag in its header.

``end_failed_capture(pool)`` tells the allocator what the failed capture could not: stop
serving ``pool``. It needs the pool's id, so capture into a pool you named
(``torch.cuda.graph_pool_handle()`` when the caller gave none). Where torch already ended it,
the allocator says "not currently recording to mempool_id" and nothing is left to do.

The call is private and was renamed: ``torch._C._cuda_endAllocateCurrentStreamToPool`` up to
torch 2.7, ``torch._C._cuda_endAllocateToPool`` from 2.8 (both ``(device, mempool_id)``), as the
bindings in each release's ``libtorch_python.so`` show (read from the wheels of 2.4.1 to 2.12.0,
and pinned by the course's own tests). ``end_pool_call(version)`` picks it from the version; the
other name is tried where a build (a nightly, a vendor's) has only that one.
"""

from __future__ import annotations

import re
from typing import Any

import torch

#: The binding that ends allocation to a pool, by the first release that has it.
RENAMED_IN = (2, 8)
OLD_CALL = "_cuda_endAllocateCurrentStreamToPool"
NEW_CALL = "_cuda_endAllocateToPool"
#: What the allocator says when no capture is recording to that pool (torch ended it already).
NOT_RECORDING = "not currently recording to mempool_id"


def torch_release(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a torch version string: ``"2.4.1+cu121"`` -> ``(2, 4)``,
    ``"2.6.0a0+git1234"`` -> ``(2, 6)``. A string that does not start with two numbers is a
    ValueError naming ``version``."""
    found = re.match(r"\s*(\d+)\.(\d+)", version or "")
    if not found:
        raise ValueError(f"version: expected a torch version such as '2.4.1+cu121', got {version!r}")
    return int(found[1]), int(found[2])


def end_pool_call(version: str) -> str:
    """The name of the ``torch._C`` call that ends allocation to a pool in torch ``version``."""
    return NEW_CALL if torch_release(version) >= RENAMED_IN else OLD_CALL


def end_failed_capture(pool: Any, device: int | None = None, *, bindings: Any = None) -> str:
    """After ``torch.cuda.graph(g, pool=pool)`` raised: stop the allocator serving ``pool``.

    ``pool`` is the id the capture was given (``torch.cuda.graph_pool_handle()`` or
    ``other_graph.pool()``); ``device`` defaults to the current CUDA device. Returns what was
    done: ``"ended"`` (the allocator still believed the capture was under way),
    ``"already ended"`` (torch had ended it) or ``"no CUDA"`` (nothing can have been captured).
    ``bindings`` stands in for ``torch._C`` in tests.
    """
    if bindings is None:
        if not torch.cuda.is_available():
            return "no CUDA"
        bindings = torch._C
    if pool is None:
        raise ValueError(
            "pool: expected the id of the pool the failed capture used "
            "(capture into torch.cuda.graph_pool_handle() when none is given), got None"
        )
    chosen = end_pool_call(torch.__version__)
    other = OLD_CALL if chosen == NEW_CALL else NEW_CALL
    end = getattr(bindings, chosen, None) or getattr(bindings, other, None)
    if end is None:
        raise RuntimeError(
            f"end_failed_capture: this torch ({torch.__version__}) has neither "
            f"torch._C.{NEW_CALL} nor torch._C.{OLD_CALL}"
        )
    if device is None:
        device = torch.cuda.current_device()
    try:
        end(device, tuple(pool))
    except RuntimeError as exc:
        if NOT_RECORDING in str(exc):
            return "already ended"
        raise
    return "ended"
