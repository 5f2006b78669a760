"""Exercise 4 · static buffers and copy-in.

A captured graph reads its inputs from the addresses it was captured with. To run it on new data
you do not pass new tensors: you copy the data into the captured tensors (``buffer.copy_(x)``)
and replay. Rebinding a name (``self.buffer = x``) changes nothing the graph sees. The outputs
are fixed too: every replay writes into the same output tensors.

The lines marked ``# given`` check the arguments (``coursekit/argcheck.py``); keep them, and write
the rest. Check your work with ``python -m pytest exercises -m ex4``. On a CPU the runner is
tested with the course's stand-in for a captured graph (``coursekit.standin.capture_on_cpu``),
which keeps these rules; ``python -m pytest exercises -m "ex4 and gpu"`` runs it on real CUDA
graphs.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from coursekit import argcheck
from coursekit.standin import capture_on_cpu  # noqa: F401 - the CPU default for `capture`


class GraphRunner:
    """Owns one static buffer per input, captures ``fn`` once, then copies in and replays.

    Construction ``GraphRunner(fn, *example_inputs, warmup_iters=3, clone_outputs=True,
    capture=None)`` (``warmup_iters`` defaults to 3, ``clone_outputs`` to True):
      * ``fn`` must be callable (TypeError naming ``fn``) and every example input a tensor
        (ValueError naming ``example_inputs[i]``); the given lines check both.
      * ``static_inputs``: a tuple (not a list) with one buffer per input, a copy the runner
        owns (``x.clone()``), never the caller's tensor: when ``fn`` is captured the buffers hold
        the example inputs' values (not zeros, not uninitialized memory: warm-up runs ``fn`` on
        them). Their ``data_ptr()`` never changes.
      * Capture once, at construction: ``self.graph = capture(fn, *static_inputs,
        warmup_iters=warmup_iters)`` over the runner's own buffers. ``capture`` defaults to exercise
        3's ``capture`` when the inputs are CUDA tensors, and to ``capture_on_cpu`` otherwise.
      * ``num_captures``: how many captures the runner has done; it stays 1.

    Calling ``runner(*inputs)`` (the given line checks the inputs against ``static_inputs``):
      * The number of inputs must match the example inputs: TypeError otherwise, naming
        ``inputs`` and how many the runner takes (``"expected 2 inputs, got 1"``).
      * Each input must be a tensor with its buffer's shape (the same shape: ``(3, 2)`` is not
        ``(2, 3)`` nor ``(6,)``, though they hold as many elements), dtype and device: ValueError
        naming the position as ``inputs[i]`` otherwise (a graph replays fixed shapes at fixed
        addresses).
      * Copy each input into its buffer (``copy_``: the buffers keep their addresses), replay
        once, and return the outputs:
        - ``clone_outputs=True``: fresh copies (``tensor.clone()`` of every tensor, keeping the
          structure: a tensor, or a tuple / list / dict of them), safe to keep;
        - ``clone_outputs=False``: the graph's static output tensors themselves: no copy, but the
          next call overwrites a result you are still holding, exactly as a real graph does.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *example_inputs: torch.Tensor,
        warmup_iters: int = 3,
        clone_outputs: bool = True,
        capture: Callable | None = None,
    ):
        fn = argcheck.function("fn", fn)  # given: a TypeError
        example_inputs = argcheck.tensors("example_inputs", example_inputs)  # given: a tuple of tensors
        raise NotImplementedError("exercise 4: GraphRunner.__init__")

    def __call__(self, *inputs: torch.Tensor) -> Any:
        inputs = argcheck.inputs_like("inputs", inputs, self.static_inputs)  # given: reads your static_inputs
        raise NotImplementedError("exercise 4: GraphRunner.__call__")
