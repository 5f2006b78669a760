"""Exercise 3 (capture): plausible wrong versions of ``solutions/capture.py``."""

from tests.mutants import G, K, Mutant

MUTANTS = [
    # Caught on a CPU since issue 43 (torch.cuda's streams simulated): no longer GPU-only.
    Mutant("capture", "warmup-on-current-stream", "warm-up on the caller's (default) stream", (
      ("    with torch.cuda.stream(side):\n        for _ in range(warmup_iters):\n            fn(*static_inputs)\n",
       "    for _ in range(warmup_iters):\n        fn(*static_inputs)\n"),)),
    Mutant("capture", "no-warmup", "captures cold: no warm-up at all",
           (("        for _ in range(warmup_iters):\n            fn(*static_inputs)\n", "        pass\n"),)),
    G("capture", "warmup-one-too-many", "warms up warmup_iters + 1 times",
      ("for _ in range(warmup_iters):", "for _ in range(warmup_iters + 1):")),
    G("capture", "side-stream-does-not-wait", "the side stream races work queued on the caller's",
      ("    side.wait_stream(caller)\n", "")),
    G("capture", "ignores-pool", "every graph gets a new memory pool",
      ("torch.cuda.graph(graph, pool=pool, stream=side)", "torch.cuda.graph(graph, stream=side)")),
    G("capture", "raw-capture-error", "lets torch's capture error through without naming the cause",
      ('raise RuntimeError(f"capture: fn cannot be captured into a CUDA graph: {_cause(exc)}") from exc',
       "raise")),
    G("capture", "unchained-capture-error", "hides the original error (from None)",
      ("{_cause(exc)}\") from exc", "{_cause(exc)}\") from None")),
    G("capture", "stream-not-restored", "leaves the capture stream current after a failure",
      ("        torch.cuda.set_stream(caller)\n", "")),
    Mutant("capture", "failed-capture-pool-not-ended",
           "forgets end_failed_capture: the next capture fails (torch <= 2.13: capture_end checks the "
           "capture's error before it ends allocation to the pool)",
           (("        end_failed_capture(pool)\n", ""),), gpu=True, torch_below=(2, 14)),
    G("capture", "outputs-from-warmup", "returns a warm-up call's outputs, which replay never writes",
      ("            fn(*static_inputs)\n    caller.wait_stream", "            outputs = fn(*static_inputs)\n    caller.wait_stream"),
      ("            outputs = fn(*static_inputs)\n    except", "            fn(*static_inputs)\n    except")),
    # Issue 43: warm up on the stream you capture on, one stream per device for every capture.
    # Caught on a CPU too (torch.cuda's streams simulated: coursekit/cudasim.py).
    K("issue43", "capture", "captures-on-graphs-own-stream",
      "warms up on a side stream, then records on torch.cuda.graph's own stream (the PyTorch docs' "
      "example), whose per-stream caches the warm-up never filled",
      ("torch.cuda.graph(graph, pool=pool, stream=side)", "torch.cuda.graph(graph, pool=pool)")),
    K("issue43", "capture", "new-stream-per-capture",
      "a new side stream for every capture: graphs that share a pool cannot share its memory",
      ("    if device not in _CAPTURE_STREAMS:\n", "    if True:\n")),
    # Issue 23: every stated default.
    Mutant("capture", "default-warmup-iters-1", "warmup_iters defaults to 1, not the stated 3",
           (("*static_inputs: torch.Tensor, warmup_iters: int = 3,", "*static_inputs: torch.Tensor, warmup_iters: int = 1,"),),
           gpu=True, kind="issue23"),
]
