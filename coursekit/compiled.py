"""Compile, then capture: the compiler the decode engine's ``compiler=`` option takes (exercise 8).

vLLM 0.26.0 never captures the model as written. Its compilation backend traces the model, lets
inductor fuse it (elementwise chains, norms, the residual adds: hundreds of kernels fewer), splits
it at attention (``splitting_ops``) and only then captures: each compiled piece in a PIECEWISE
graph (``CUDAGraphWrapper`` per piece), the whole compiled model in a FULL one. A graph replays
whatever kernels it recorded, so capturing the compiled pieces replays the fused kernels:
fewer graph nodes (each still costs the GPU about a microsecond) and fewer round trips to HBM.

``compile_piece(fn)`` is that first half for the course's engine: ``torch.compile(fn,
dynamic=False, fullgraph=True)`` (one static shape per capture size, as a graph has; a graph break
is an error, not a silent split), in a frame of its own. The frame matters: dynamo keeps its
compiled variants per code object, at most ``torch._dynamo.config.recompile_limit`` (8) of them,
and every PIECEWISE segment runs the same ``segment`` code with another index and every capture
size another shape, so a model of 28 layers compiled piece by piece through one code object hits
the limit (``FailOnRecompileLimitHit``) where a fresh frame per piece does not.

``compile_problem(device)`` says in one line why ``torch.compile`` cannot build kernels for a
device here (CUDA: Triton's needs, ``coursekit.platform.triton_problem``; CPU: inductor's C++
compiler and ``Python.h``, ``coursekit.platform.cpu_compile_problem``), or None.
"""

from __future__ import annotations

from typing import Callable

import torch

from coursekit.platform import cpu_compile_problem, triton_problem


def compile_piece(fn: Callable, *, backend: str | Callable = "inductor") -> Callable:
    """``fn`` compiled by inductor for the shapes it is first called with (``dynamic=False``,
    ``fullgraph=True``), in a frame of its own (see the module docstring). Compilation happens at
    the first call: in the engine, the first warm-up run, before the capture records the kernels;
    the capture's own call must find that compiled variant again (dynamo's guards still hold), or
    the graph would record a compile. ``backend``: torch.compile's (a test counts compiles with
    one of its own)."""
    if not callable(fn):
        raise TypeError(f"fn: expected a callable piece of the model, got {type(fn).__name__}")

    def piece(*args):
        return fn(*args)

    # A new code object: dynamo's cache of compiled variants (and its recompile limit) is per code
    # object, so each piece gets its own instead of sharing one with every other piece.
    piece.__code__ = piece.__code__.replace()
    piece.__qualname__ = f"compiled({getattr(fn, '__qualname__', type(fn).__qualname__)})"
    return torch.compile(piece, backend=backend, dynamic=False, fullgraph=True)


def compile_problem(device: str | torch.device, **checks) -> str | None:
    """One line saying why ``torch.compile`` cannot build kernels for ``device`` here, or None.
    ``checks`` go to ``triton_problem`` (CUDA) or ``cpu_compile_problem`` (CPU: ``env``,
    ``include_dir``)."""
    kind = torch.device(device).type
    if kind == "cuda":
        return triton_problem(cuda=True, **checks)
    if kind == "cpu":
        return cpu_compile_problem(**checks)
    return f"torch.compile: the course does not compile for {kind} devices"
