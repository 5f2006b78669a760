"""Exercise 3, solved another way: inputs checked before CUDA, the stream restored in a
``finally`` (and the failed capture's pool ended there too, on success a no-op), a one-line
cause chosen with plain ``in`` tests, each device's capture stream kept by ``functools.cache``."""

import functools

import torch

from coursekit.allocator import end_failed_capture
from coursekit.standin import CapturedGraph


@functools.cache
def _stream_of(device):
    return torch.cuda.Stream()


def capture(fn, *static_inputs, warmup_iters=3, pool=None):
    if warmup_iters < 1:
        raise ValueError(f"warmup_iters must be >= 1, got {warmup_iters}")
    bad = [i for i, t in enumerate(static_inputs) if not (torch.is_tensor(t) and t.is_cuda)]
    if bad:
        raise ValueError(f"static_inputs[{bad[0]}] is not a CUDA tensor")
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: capturing a graph needs a CUDA device")
    before = torch.cuda.current_stream()
    warm = _stream_of(torch.cuda.current_device())
    warm.wait_stream(before)
    with torch.cuda.stream(warm):
        for _ in range(warmup_iters):
            fn(*static_inputs)
    before.wait_stream(warm)
    pool = pool or torch.cuda.graph_pool_handle()
    g = torch.cuda.CUDAGraph()
    ok = False
    try:
        with torch.cuda.graph(g, pool=pool, stream=warm):
            out = fn(*static_inputs)
        ok = True
    except RuntimeError as exc:
        text = str(exc) + str(exc.__context__)
        if "CPU" in text or "pinned" in text:
            why = "fn copies a CPU tensor to the GPU while capturing"
        else:
            why = "fn synchronizes with the host (e.g. .item()) while capturing"
        raise RuntimeError(f"graph capture failed: {why}") from exc
    finally:
        torch.cuda.set_stream(before)
        if not ok:
            end_failed_capture(pool)
    return CapturedGraph(graph=g, static_inputs=static_inputs, static_outputs=out)
