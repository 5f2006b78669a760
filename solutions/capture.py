"""Exercise 3 reference: capture with warm-up. Rules: exercises/capture.py."""

from __future__ import annotations

from typing import Any, Callable

import torch

from coursekit import argcheck
from coursekit.allocator import end_failed_capture
from coursekit.standin import CapturedGraph

#: Phrases in PyTorch / CUDA errors -> what the function did that a graph cannot record.
_CAUSES = (
    (("between cpu and cuda", "pinned"),
     "fn copies between CPU and GPU memory during capture (a CPU tensor moved to the GPU, or "
     "torch.tensor(..., device='cuda')); make such tensors before capturing and pass them in"),
    (("not permitted when stream is capturing", "captureunsupported", "synchroniz"),
     "fn makes the CPU wait for the GPU or copies from CPU memory during capture (.item(), "
     ".cpu(), .tolist(), print(tensor), `if tensor:`, torch.cuda.synchronize(), or "
     "torch.tensor(..., device='cuda')); a graph can do neither: keep values on the GPU"),
    (("unjoined",),
     "fn starts work on another stream and does not join it back into the capturing stream"),
    (("invalidated",),
     "an operation during capture was not allowed (often a host sync such as .item() or a "
     "copy from CPU memory), which invalidated the capture"),
)


#: Each device's capture stream, made on first use (keyed by torch.cuda.current_device()).
_CAPTURE_STREAMS: dict[int, Any] = {}


def capture(
    fn: Callable[..., Any], *static_inputs: torch.Tensor, warmup_iters: int = 3, pool: Any = None
) -> CapturedGraph:
    fn = argcheck.function("fn", fn)  # given: a TypeError, on any machine
    warmup_iters = argcheck.count("warmup_iters", warmup_iters, at_least=1)  # given: on any machine
    argcheck.need_cuda("capture")  # given: a plain RuntimeError
    static_inputs = argcheck.tensors("static_inputs", static_inputs, cuda=True)  # given: a tuple now

    caller = torch.cuda.current_stream()
    device = torch.cuda.current_device()
    if device not in _CAPTURE_STREAMS:
        _CAPTURE_STREAMS[device] = torch.cuda.Stream()
    side = _CAPTURE_STREAMS[device]
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        for _ in range(warmup_iters):
            fn(*static_inputs)
    caller.wait_stream(side)

    if pool is None:
        pool = torch.cuda.graph_pool_handle()  # named, so a failed capture can be ended
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, pool=pool, stream=side):
            outputs = fn(*static_inputs)
    except Exception as exc:
        # torch.cuda.graph skips restoring the caller's stream when ending the capture fails.
        torch.cuda.set_stream(caller)
        end_failed_capture(pool)
        raise RuntimeError(f"capture: fn cannot be captured into a CUDA graph: {_cause(exc)}") from exc
    return CapturedGraph(graph, static_inputs, outputs)


def _cause(exc: BaseException) -> str:
    """The likeliest cause of a failed capture, from the messages along the exception chain."""
    chain = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    text = " ".join(str(e) for e in chain).lower()
    root = chain[-1]
    lines = str(root).strip().splitlines()
    original = f"{type(root).__name__}: {lines[0] if lines else ''}"
    for phrases, cause in _CAUSES:
        if any(p in text for p in phrases):
            return f"{cause} (original error: {original})"
    return f"fn raised {original}"
