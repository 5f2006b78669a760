"""A corpus of plausible wrong implementations (mutants) of the exercise modules.

Each mutant is the reference module with one mistake that students really make, written as text
replacements on ``solutions/<module>.py``. ``tests/test_corpus.py`` builds each one into a
submission folder and runs the public tests of its exercise against it: every mutant must lose
points. A replacement that no longer matches the reference exactly once fails loudly, so the
corpus cannot rot silently when the reference changes.

Mutants made with ``G`` can only be caught on a real GPU (a wrong stream, a lost pool, a failed
capture): their corpus tests carry the ``gpu`` marker and are skipped, with a reason, on a CPU.
The others are caught by the CPU tests, the runners' through the stand-in for a captured graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from coursekit import course


@dataclass(frozen=True)
class Mutant:
    module: str
    name: str
    why: str
    edits: tuple[tuple[str, str], ...]
    gpu: bool = False  # caught only by the GPU tests
    kind: str = ""  # for the gap corpus (issue 14): which kind of test gap it probes
    #: The mistake costs points only on torch releases older than this (None: on every release).
    torch_below: tuple[int, int] | None = None

    @property
    def id(self) -> str:
        return f"{self.module}:{self.name}"


def M(module, name, why, *edits):
    return Mutant(module, name, why, tuple(edits))


def G(module, name, why, *edits):
    return Mutant(module, name, why, tuple(edits), gpu=True)


LAUNCH_MODEL = [
    M("launch_model", "gb-not-gib", "bytes as 1e9 per GiB instead of 1024**3",
      ("self.weight_gib * 1024**3", "self.weight_gib * 1e9")),
    M("launch_model", "1000-cubed", "1000**3 instead of 1024**3",
      ("self.weight_gib * 1024**3", "self.weight_gib * 1000**3")),
    M("launch_model", "forgets-the-ten", "n_kernels without embedding / final norm / lm_head",
      ("self.n_layers * self.kernels_per_layer + OTHER_KERNELS", "self.n_layers * self.kernels_per_layer")),
    M("launch_model", "n-kernels-float", "n_kernels returned as a float",
      ("return int(self.n_layers * self.kernels_per_layer + OTHER_KERNELS)",
       "return float(self.n_layers * self.kernels_per_layer + OTHER_KERNELS)")),
    M("launch_model", "launch-in-us", "launch_ms left in microseconds",
      ("return self.n_kernels * self.launch_us / 1e3", "return self.n_kernels * self.launch_us")),
    M("launch_model", "graph-ignores-node-cost", "graph_ms without the per-node GPU cost",
      (" + self.n_kernels * self.gpu_node_us / 1e3", "")),
    M("launch_model", "graph-without-submission", "graph_ms without the one launch",
      ("return self.compute_ms + self.launch_us / 1e3 + ", "return self.compute_ms + ")),
    M("launch_model", "speedup-inverted", "graph over eager",
      ("return self.eager_ms() / self.graph_ms()", "return self.graph_ms() / self.eager_ms()")),
    M("launch_model", "no-validation", "accepts negative fields",
      ("    def __post_init__(self) -> None:\n", "    def __post_init__(self) -> None:\n        return\n")),
    M("launch_model", "zero-bandwidth-ok", "bandwidth 0 accepted (division by zero later)",
      ("if self.bandwidth_bps <= 0:", "if self.bandwidth_bps < 0:")),
    M("launch_model", "report-format", "compute printed with 2 decimals",
      ("计算 {step.compute_ms:5.1f} ms", "计算 {step.compute_ms:5.2f} ms")),
    M("launch_model", "report-tok-per-ms", "tokens per ms instead of per second",
      ("{1000 / eager:5.1f} tok/s", "{1 / eager:5.1f} tok/s")),
    M("launch_model", "simulate-off-by-one", "kernel k launched at (k-1) * launch_us",
      ("end_us = max(k * launch_us, end_us) + t", "end_us = max((k - 1) * launch_us, end_us) + t")),
    M("launch_model", "simulate-additive", "no overlap: every launch adds to the step",
      ("end_us = max(k * launch_us, end_us) + t", "end_us = end_us + launch_us + t")),
    M("launch_model", "simulate-max-of-ends", "compares ends instead of starts",
      ("end_us = max(k * launch_us, end_us) + t", "end_us = max(k * launch_us + t, end_us)")),
    M("launch_model", "simulate-in-us", "result left in microseconds",
      ("return end_us / 1e3", "return end_us")),
    M("launch_model", "fit-slope-in-ms", "slope returned in ms per kernel",
      ("return slope_ms * 1e3, mean_y - slope_ms * mean_x", "return slope_ms, mean_y - slope_ms * mean_x")),
    M("launch_model", "fit-through-origin", "no intercept: the line forced through 0",
      ("slope_ms = sxy / sxx\n",
       "slope_ms = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)\n"
       "    mean_y = slope_ms * mean_x\n")),
    M("launch_model", "fit-two-points", "slope from the first and last points only",
      ("slope_ms = sxy / sxx\n", "slope_ms = (ys[-1] - ys[0]) / (xs[-1] - xs[0])\n")),
    M("launch_model", "fit-no-distinct-check", "one distinct kernel count divides by zero",
      ("if len(set(xs)) < 2:", "if len(xs) < 2:")),
]

BUCKETS = [
    M("buckets", "sizes-miss-max", "the last multiple of 16 dropped (range end off by one)",
      ("range(256, max_size + 1, 16)", "range(256, max_size, 16)")),
    M("buckets", "sizes-miss-4", "starts [1, 2] instead of [1, 2, 4]",
      ("sizes = [1, 2, 4] +", "sizes = [1, 2] +")),
    M("buckets", "sizes-8-to-256", "multiples of 8 up to and including 256 (256 twice)",
      ("range(8, 256, 8)", "range(8, 257, 8)")),
    M("buckets", "sizes-accept-zero", "max_size 0 gives an empty list instead of an error",
      ("or max_size < 1:", "or max_size < 0:")),
    M("buckets", "padded-strict", "off-by-one bucket: the smallest size > n",
      ("fitting = [s for s in sizes if s >= n]", "fitting = [s for s in sizes if s > n]")),
    M("buckets", "padded-assumes-sorted", "first fitting size in the given order",
      ("return min(fitting) if fitting else None", "return fitting[0] if fitting else None")),
    M("buckets", "padded-clamps", "the largest bucket instead of None for big batches",
      ("return min(fitting) if fitting else None", "return min(fitting) if fitting else max(sizes)")),
    M("buckets", "pad-ignores-value", "always pads with zeros",
      ("out = x.new_full((size, *x.shape[1:]), value)", "out = x.new_zeros((size, *x.shape[1:]))")),
    M("buckets", "pad-returns-x", "returns x itself when no padding is needed",
      ("    out = x.new_full(", "    if size == len(x):\n        return x\n    out = x.new_full(")),
    M("buckets", "runner-returns-padded-rows", "returns every row of the bucket",
      ("return out[:n].clone()", "return out.clone()")),
    M("buckets", "runner-returns-static-view", "returns a view of the static output",
      ("return out[:n].clone()", "return out[:n]")),
    M("buckets", "runner-rebinds-buffer", "rebinds the static buffer instead of copy_",
      ("self.buffer[:n].copy_(x)", "self.buffer = pad_rows(x, len(self.buffer), self.pad_value)")),
    M("buckets", "runner-stale-padding", "leaves old rows in the padding",
      ("        self.buffer[n:size].fill_(self.pad_value)\n", "")),
    M("buckets", "runner-smallest-first", "captures the smallest bucket first",
      ("for size in sorted(self.capture_sizes, reverse=True):", "for size in sorted(self.capture_sizes):")),
    M("buckets", "runner-pool-per-graph", "a new memory pool for every bucket",
      ("pool = graph.graph.pool()", "pool = None")),
    M("buckets", "runner-captures-every-call", "captures again on every call",
      ("self.fn = fn\n", "self.fn = fn\n        self._capture = capture\n"),
      ("out = self.graphs[size].replay()",
       "self.graphs[size] = self._capture(self.fn, self.buffer[:size], warmup_iters=1)\n"
       "        out = self.graphs[size].replay()")),
    M("buckets", "runner-borrows-buffer", "uses the caller's max_example as the static buffer",
      ("self.buffer = max_example.clone()", "self.buffer = max_example")),
    M("buckets", "runner-off-by-one-bucket", "looks up the bucket for n + 1 rows",
      ("size = padded_size(n, self.capture_sizes)", "size = padded_size(n + 1, self.capture_sizes)")),
    M("buckets", "runner-fixed-warmup", "ignores warmup_iters",
      ("warmup_iters=warmup_iters, pool=pool)", "warmup_iters=3, pool=pool)")),
    M("buckets", "runner-no-eager-count", "eager fallbacks not counted",
      ('            self.stats["eager"] += 1\n', "")),
    M("buckets", "runner-accepts-oversized-bucket", "a bucket larger than the buffer is accepted",
      ("or not 1 <= s <= max_rows:", "or s < 1:")),
]

DISPATCH = [
    M("dispatch", "decode-only-is-full", "FULL_DECODE_ONLY treated as FULL for mixed batches",
      ("CUDAGraphMode.FULL_DECODE_ONLY: (CUDAGraphMode.FULL, CUDAGraphMode.NONE)",
       "CUDAGraphMode.FULL_DECODE_ONLY: (CUDAGraphMode.FULL, CUDAGraphMode.FULL)")),
    M("dispatch", "full-and-piecewise-swapped", "(PIECEWISE, FULL) instead of (FULL, PIECEWISE)",
      ("CUDAGraphMode.FULL_AND_PIECEWISE: (CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE)",
       "CUDAGraphMode.FULL_AND_PIECEWISE: (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL)")),
    M("dispatch", "descs-smallest-first", "captures smallest first",
      ("self.capture_sizes = sorted(set(sizes), reverse=True)", "self.capture_sizes = sorted(set(sizes))")),
    M("dispatch", "descs-uniform-always", "uniform-decode graphs captured in FULL mode too",
      (" and mode.mixed_mode() is not CUDAGraphMode.FULL:", ":")),
    M("dispatch", "descs-uniform-group-first", "uniform-decode group listed before the mixed one",
      ("        self._descs = descs\n", "        descs.sort(key=lambda d: not d[1].uniform_decode)\n        self._descs = descs\n")),
    M("dispatch", "dispatch-no-padding", "looks up the unpadded size",
      ("candidates = [(self.mode.mixed_mode(), BatchDescriptor(size, False))]",
       "candidates = [(self.mode.mixed_mode(), BatchDescriptor(num_tokens, False))]")),
    M("dispatch", "dispatch-ignores-uniform", "never uses the uniform-decode graphs",
      ("        if uniform_decode:\n            candidates.insert", "        if False:\n            candidates.insert")),
    M("dispatch", "dispatch-trusts-first-candidate", "returns a key without checking it was captured",
      ("            if candidate in self._captured:\n                return candidate",
       "            if candidate[0] is not CUDAGraphMode.NONE:\n                return candidate")),
    M("dispatch", "dispatch-clamps-large-batches", "a batch above every bucket gets the largest graph",
      ("        if size is None:\n            return unpadded", "        if size is None:\n            size = self.capture_sizes[0]")),
    M("dispatch", "dispatch-none-padded", "eager batches reported with the padded size",
      ("                return candidate\n        return unpadded",
       "                return candidate\n        return (CUDAGraphMode.NONE, BatchDescriptor(size, False))")),
    M("dispatch", "dispatch-off-by-one", "pads n + 1 tokens",
      ("size = padded_size(num_tokens, self.capture_sizes)", "size = padded_size(num_tokens + 1, self.capture_sizes)")),
    M("dispatch", "dispatch-accepts-zero", "no check on num_tokens",
      ("or num_tokens < 1:", "or num_tokens < -1:")),
]

LAUNCH_TAX = [
    M("launch_tax", "time-total-not-mean", "returns the total time of the timed calls",
      ("return (time.perf_counter() - start_s) * 1e3 / iters", "return (time.perf_counter() - start_s) * 1e3")),
    M("launch_tax", "time-in-seconds", "returns seconds, not milliseconds",
      ("return (time.perf_counter() - start_s) * 1e3 / iters", "return (time.perf_counter() - start_s) / iters")),
    M("launch_tax", "time-includes-warmup", "starts the clock before the warm-up",
      ("    for _ in range(warmup):\n        fn()\n",
       "    start_s = time.perf_counter()\n    for _ in range(warmup):\n        fn()\n"),
      ("    start_s = time.perf_counter()\n    for _ in range(iters):\n", "    for _ in range(iters):\n")),
    M("launch_tax", "time-one-call-too-many", "times iters + 1 calls",
      ("    for _ in range(iters):\n        fn()\n    return (time.perf_counter()",
       "    for _ in range(iters + 1):\n        fn()\n    return (time.perf_counter()")),
    M("launch_tax", "time-skips-warmup", "ignores warmup",
      ("    for _ in range(warmup):\n        fn()\n", "")),
    M("launch_tax", "time-accepts-zero-iters", "iters = 0 divides by zero",
      ('_check_count("iters", iters, minimum=1)', '_check_count("iters", iters, minimum=0)')),
    M("launch_tax", "time-accepts-negative-warmup", "warmup = -1 silently means none",
      ('    _check_count("warmup", warmup, minimum=0)\n', "")),
    M("launch_tax", "measure-no-cuda-check", "no clear error without CUDA",
      ("    if not torch.cuda.is_available():\n        raise RuntimeError(\n            \"measure_launch_tax:",
       "    if False:\n        raise RuntimeError(\n            \"measure_launch_tax:")),
    G("launch_tax", "time-cpu-clock-on-cuda", "times CUDA work with a CPU clock and no synchronize",
      ("    if torch.cuda.is_available():\n        torch.cuda.synchronize()", "    if False:\n        torch.cuda.synchronize()")),
    G("launch_tax", "sweep-sorted", "measures the lengths sorted, not in the order given",
      ("for n in n_ops_list]", "for n in sorted(n_ops_list)]")),
    G("launch_tax", "sweep-accepts-empty", "an empty sweep returns []",
      ("    if not n_ops_list:\n        raise", "    if False:\n        raise")),
    G("launch_tax", "measure-accepts-zero-ops", "n_ops = 0 measures nothing",
      ('("n_ops", n_ops), ', "")),
]

CAPTURE = [
    G("capture", "warmup-on-current-stream", "warm-up on the caller's (default) stream",
      ("    with torch.cuda.stream(side):\n        for _ in range(warmup_iters):\n            fn(*static_inputs)\n",
       "    for _ in range(warmup_iters):\n        fn(*static_inputs)\n")),
    G("capture", "no-warmup", "captures cold: no warm-up at all",
      ("        for _ in range(warmup_iters):\n            fn(*static_inputs)\n", "        pass\n")),
    G("capture", "warmup-one-too-many", "warms up warmup_iters + 1 times",
      ("for _ in range(warmup_iters):", "for _ in range(warmup_iters + 1):")),
    G("capture", "side-stream-does-not-wait", "the side stream races work queued on the caller's",
      ("    side.wait_stream(caller)\n", "")),
    G("capture", "ignores-pool", "every graph gets a new memory pool",
      ("torch.cuda.graph(graph, pool=pool)", "torch.cuda.graph(graph)")),
    G("capture", "accepts-zero-warmup", "warmup_iters = 0 accepted",
      ("or warmup_iters < 1:", "or warmup_iters < 0:")),
    G("capture", "accepts-cpu-inputs", "a CPU static input accepted",
      ("if not isinstance(t, torch.Tensor) or not t.is_cuda:", "if not isinstance(t, torch.Tensor):")),
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
]

STATIC_RUNNER = [
    M("static_runner", "rebinds-buffers", "rebinds the static inputs instead of copy_",
      ("        for x, buffer in zip(inputs, self.static_inputs):\n            buffer.copy_(x)\n",
       "        self.static_inputs = tuple(inputs)\n")),
    M("static_runner", "borrows-example-inputs", "captures over the caller's tensors",
      ("self.static_inputs = tuple(x.clone() for x in example_inputs)", "self.static_inputs = tuple(example_inputs)")),
    M("static_runner", "static-output-when-clone-asked", "returns the static outputs although clone_outputs=True",
      ("return _clone(outputs) if self.clone_outputs else outputs", "return outputs")),
    M("static_runner", "clones-when-not-asked", "clones although clone_outputs=False",
      ("return _clone(outputs) if self.clone_outputs else outputs", "return _clone(outputs)")),
    M("static_runner", "captures-every-call", "captures again on every call",
      ("        self.num_captures = 1\n", "        self.num_captures = 1\n        self._capture = capture\n        self._warmup_iters = warmup_iters\n"),
      ("        outputs = self.graph.replay()",
       "        self.graph = self._capture(self.fn, *self.static_inputs, warmup_iters=self._warmup_iters)\n"
       "        outputs = self.graph.replay()")),
    M("static_runner", "fixed-warmup", "ignores warmup_iters",
      ("warmup_iters=warmup_iters)", "warmup_iters=3)")),
    M("static_runner", "no-arity-check", "zip silently drops or ignores inputs",
      ("        if len(inputs) != len(self.static_inputs):\n            raise",
       "        if False:\n            raise")),
    M("static_runner", "no-dtype-check", "copy_ silently converts dtypes",
      ("                or x.dtype != buffer.dtype\n", "")),
    M("static_runner", "no-device-check", "copies from any device",
      ("                or x.device != buffer.device\n", "")),
    M("static_runner", "no-shape-check", "lets copy_ broadcast or fail deep inside torch",
      ("                or x.shape != buffer.shape\n", "")),
    M("static_runner", "clone-loses-structure", "turns a tuple of outputs into a list",
      ("return type(obj)(_clone(item) for item in obj)", "return [_clone(item) for item in obj]")),
    M("static_runner", "replay-before-copy", "replays, then copies in: returns the previous call's result",
      ("        for x, buffer in zip(inputs, self.static_inputs):\n            buffer.copy_(x)\n        outputs = self.graph.replay()\n",
       "        outputs = self.graph.replay()\n        for x, buffer in zip(inputs, self.static_inputs):\n            buffer.copy_(x)\n")),
    M("static_runner", "error-names-one-based-position", "names inputs[i + 1]",
      ('f"inputs[{i}]: expected', 'f"inputs[{i + 1}]: expected')),
]

FUSION = [
    M("fusion", "fused-counts-every-op", "the fused chain still moves the tensor once per op",
      ("passes = 1 if fused else n_ops", "passes = n_ops")),
    M("fusion", "one-way-traffic", "counts only the reads",
      ("return 2 * passes * numel * dtype_bytes", "return passes * numel * dtype_bytes")),
    M("fusion", "zero-ops-move-a-tensor", "a fused chain of no ops still reads and writes",
      ("    if n_ops == 0:\n        return 0\n", "")),
    M("fusion", "accepts-zero-dtype-bytes", "dtype_bytes 0 accepted",
      ('("dtype_bytes", dtype_bytes, 1)', '("dtype_bytes", dtype_bytes, 0)')),
    M("fusion", "norm-without-residual", "normalizes x instead of x + residual",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    out, new_residual = add_rms_norm_reference(x, torch.zeros_like(residual), weight, eps)\n"
       "    return out, x + residual\n")),
    M("fusion", "norm-over-rows", "normalizes over the first dimension",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    h = x + residual\n    f = h.float()\n"
       "    return (f * torch.rsqrt(f.pow(2).mean(0, keepdim=True) + eps)).to(x.dtype) * weight, h\n")),
    M("fusion", "in-place-residual", "adds into residual in place (vLLM's op does; this API returns new tensors)",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    residual.add_(x)\n    return add_rms_norm_reference(torch.zeros_like(x), residual, weight, eps)\n")),
    M("fusion", "no-weight-check", "a wrong-sized weight fails deep inside torch",
      ("    if not isinstance(weight, torch.Tensor) or weight.shape != x.shape[-1:] or weight.device != x.device:",
       "    if not isinstance(weight, torch.Tensor):")),
    M("fusion", "count-without-cuda-check", "profiles on a machine without CUDA",
      ("    if not torch.cuda.is_available():\n        raise", "    if False:\n        raise")),
    G("fusion", "eager-on-cuda", "never fuses: returns the eager version on CUDA",
      ("    if x.is_cuda:\n", "    if False:\n")),
    G("fusion", "counts-copies", "counts memcpy and memset as kernels",
      ('and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]', "]")),
    G("fusion", "counts-the-warm-up", "profiles the warm-up call too",
      ("    fn(*args)\n    torch.cuda.synchronize()\n    with profile(activities=[ProfilerActivity.CUDA]) as prof:\n",
       "    with profile(activities=[ProfilerActivity.CUDA]) as prof:\n        fn(*args)\n")),
]

ENGINE = [
    M("engine", "padding-into-slot-0", "pads with slot 0 instead of the padding slot",
      ("self.slots[n:s].fill_(self.model.padding_slot)", "self.slots[n:s].fill_(0)")),
    M("engine", "stale-positions", "never copies the positions into their static buffer",
      ("        self.positions[:n].copy_(positions)\n", "")),
    M("engine", "piecewise-captures-attention", "PIECEWISE captures the whole forward pass",
      ("            if mode is CUDAGraphMode.FULL:\n                graph = self.capture(",
       "            if True:\n                graph = self.capture("),
      ("        if mode is CUDAGraphMode.FULL:\n            logits = graph.replay()",
       "        if not isinstance(graph, list):\n            logits = graph.replay()")),
    M("engine", "returns-padded-rows", "returns every row of the bucket",
      ("return logits[:n].clone()", "return logits.clone()")),
    M("engine", "returns-the-static-output", "returns the graph's output tensor, overwritten by the next step",
      ("return logits[:n].clone()", "return logits[:n]")),
    M("engine", "smallest-first", "captures the smallest size first",
      ("for mode, desc in self.dispatcher.capture_descs():",
       "for mode, desc in sorted(self.dispatcher.capture_descs(), key=lambda d: d[1].num_tokens):")),
    M("engine", "pool-per-graph", "a new memory pool for every graph",
      ("                pool = pool or graph.graph.pool()\n", ""),
      ("                    pool = pool or piece.graph.pool()\n", "")),
    M("engine", "rebinds-tokens", "rebinds the token buffer instead of copy_",
      ("        self.tokens[:n].copy_(tokens)\n", "        self.tokens = tokens\n")),
    M("engine", "batch-never-shrinks", "keeps finished sequences in the batch",
      ("            active = [i for i in range(len(prompts)) if len(new[i]) < wanted[i]]\n            if not active:\n                return new\n",
       "            if all(len(new[i]) >= wanted[i] for i in range(len(prompts))):\n                return new\n"
       "            active = list(range(len(prompts)))\n")),
    M("engine", "decode-position-off-by-one", "feeds the new token at the position after its own",
      ("positions = torch.tensor([len(prompts[i]) + len(new[i]) - 1 for i in active],",
       "positions = torch.tensor([len(prompts[i]) + len(new[i]) for i in active],")),
    M("engine", "fixed-warmup", "ignores warmup_iters",
      ("self.warmup_iters = warmup_iters", "self.warmup_iters = 1")),
    M("engine", "piecewise-never-replays", "captures piecewise graphs but runs every PIECEWISE step eagerly",
      ("        graph = self.graphs.get((mode, desc))\n",
       "        graph = None if mode is CUDAGraphMode.PIECEWISE else self.graphs.get((mode, desc))\n")),
    M("engine", "stale-padding-rows", "never refills the padding rows: they keep an old real slot",
      ("        self.tokens[n:s].zero_()\n        self.positions[n:s].zero_()\n"
       "        self.slots[n:s].fill_(self.model.padding_slot)\n", "")),
    M("engine", "always-uniform", "treats a prompt step (several rows per sequence) as uniform decode",
      ("uniform_decode=all(len(p) == 1 for p in prompts))", "uniform_decode=True)")),
    M("engine", "padding-slot-accepted", "lets a request use the reserved padding slot",
      ('_check_rows("slots", slots, n, 0, c.max_seqs - 1, self.model.device)',
       '_check_rows("slots", slots, n, 0, c.max_seqs, self.model.device)')),
]


def K(kind, module, name, why, *edits):
    return Mutant(module, name, why, tuple(edits), kind=kind)


#: Wrong answers by kind of test gap: each kind is a way tests commonly miss a mistake.
GAPS = [
    # One kind of mismatch checked, not the others (dtype, width, the type of an argument).
    K("mismatch", "buckets", "runner-no-dtype-check", "accepts a batch of another dtype",
      ("            or x.dtype != self.buffer.dtype\n", "")),
    K("mismatch", "buckets", "runner-no-width-check", "accepts rows of another width",
      ("            or x.shape[1:] != self.buffer.shape[1:]\n", "")),
    K("mismatch", "fusion", "residual-dtype-unchecked", "accepts a residual of another dtype",
      ("            or residual.dtype != x.dtype or residual.device != x.device):",
       "            or residual.device != x.device):")),
    K("mismatch", "fusion", "weight-type-unchecked", "a weight that is not a tensor crashes with AttributeError",
      ("    if not isinstance(weight, torch.Tensor) or weight.shape", "    if weight.shape")),
    K("mismatch", "static_runner", "example-type-unchecked", "a non-tensor example input crashes later",
      ("            if not isinstance(x, torch.Tensor):\n                raise ValueError(f\"example_inputs",
       "            if False:\n                raise ValueError(f\"example_inputs")),
    K("mismatch", "engine", "step-dtype-unchecked", "accepts int32 token ids",
      ("x.dim() != 1 or x.dtype != torch.long or len(x) < 1", "x.dim() != 1 or len(x) < 1")),
    # A keyword never used with a non-default value.
    K("non-default", "fusion", "eps-ignored", "always uses eps=1e-6",
      ("    return add_rms_norm_reference(x, residual, weight, eps)\n",
       "    return add_rms_norm_reference(x, residual, weight, 1e-6)\n")),
    K("non-default", "dispatch", "uniform-default-true", "a batch is uniform decode unless told otherwise",
      ("        self, num_tokens: int, uniform_decode: bool = False", "        self, num_tokens: int, uniform_decode: bool = True")),
    K("non-default", "launch_tax", "default-iters-10", "times 10 calls by default, not 100",
      ("def time_ms(fn: Callable[[], object], iters: int = 100", "def time_ms(fn: Callable[[], object], iters: int = 10")),
    K("non-default", "buckets", "default-max-size-256", "default_capture_sizes() stops at 256",
      ("def default_capture_sizes(max_size: int = 512)", "def default_capture_sizes(max_size: int = 256)")),
    # The largest accepted value rejected.
    K("boundary", "launch_tax", "rejects-zero-warmup", "warmup=0 (no warm-up) is refused",
      ('_check_count("warmup", warmup, minimum=0)', '_check_count("warmup", warmup, minimum=1)')),
    K("boundary", "fusion", "rejects-zero-numel", "an empty tensor's traffic (numel=0) is refused",
      ('("numel", numel, 0)', '("numel", numel, 1)')),
    K("boundary", "engine", "rejects-last-position", "the last position of the cache is refused",
      ('_check_rows("positions", positions, n, 0, c.max_seq_len - 1, self.model.device)',
       '_check_rows("positions", positions, n, 0, c.max_seq_len - 2, self.model.device)')),
    K("boundary", "buckets", "runner-rejects-full-size", "a capture size of len(max_example) is refused",
      ("not 1 <= s <= max_rows:", "not 1 <= s < max_rows:")),
    # Before set-up: stepping before capture_model().
    K("before-set-up", "engine", "step-before-capture-crashes", "step() before capture_model() raises KeyError",
      ("        graph = self.graphs.get((mode, desc))\n        if graph is None:\n",
       "        graph = self.graphs[(mode, desc)] if mode is not CUDAGraphMode.NONE else None\n"
       "        if graph is None:\n")),
    K("before-set-up", "engine", "step-before-capture-refuses", "step() before capture_model() raises",
      ("        graph = self.graphs.get((mode, desc))\n",
       "        if not self.graphs and mode is not CUDAGraphMode.NONE:\n"
       "            raise RuntimeError('call capture_model() first')\n"
       "        graph = self.graphs.get((mode, desc))\n")),
    K("before-set-up", "engine", "step-captures-lazily", "the first step captures the model itself",
      ("        graph = self.graphs.get((mode, desc))\n",
       "        if not self.graphs:\n            self.capture_model()\n"
       "        graph = self.graphs.get((mode, desc))\n")),
    # A flag worked out when not given, where two plausible rules disagree.
    K("worked-out-flag", "engine", "uniform-from-row-count", "uniform when at most max_seqs rows",
      ("            uniform_decode = len(torch.unique(slots)) == n\n",
       "            uniform_decode = n <= c.max_seqs\n")),
    K("worked-out-flag", "engine", "uniform-from-first-slot", "uniform when the first two slots differ",
      ("            uniform_decode = len(torch.unique(slots)) == n\n",
       "            uniform_decode = n == 1 or bool(slots[0] != slots[1])\n")),
    K("worked-out-flag", "engine", "uniform-from-sorted-slots", "uniform when the slots ascend",
      ("            uniform_decode = len(torch.unique(slots)) == n\n",
       "            uniform_decode = bool((slots[1:] > slots[:-1]).all())\n")),
    # Container types of outputs.
    K("container", "buckets", "default-sizes-tuple", "default_capture_sizes returns a tuple",
      ("    return [s for s in sizes if s <= max_size]", "    return tuple(s for s in sizes if s <= max_size)")),
    K("container", "dispatch", "capture-descs-tuple", "capture_descs returns a tuple",
      ("        return list(self._descs)", "        return tuple(self._descs)")),
    K("container", "static_runner", "clone-list-to-tuple", "a list of outputs comes back a tuple",
      ("        return type(obj)(_clone(item) for item in obj)", "        return tuple(_clone(item) for item in obj)")),
    # State the docstring names that no test looked at.
    K("named-state", "engine", "padding-positions-stale", "padding rows keep their old positions",
      ("        self.positions[n:s].zero_()\n", "")),
    K("named-state", "engine", "padding-tokens-stale", "padding rows keep their old tokens",
      ("        self.tokens[n:s].zero_()\n", "")),
    K("named-state", "buckets", "runner-pads-zeros", "pads with 0, not with its pad_value",
      ("        self.buffer[n:size].fill_(self.pad_value)\n", "        self.buffer[n:size].fill_(0)\n")),
    # The clock the docstring prescribes.
    K("clock", "launch_tax", "time-process-time", "CPU time instead of a wall clock",
      ("    start_s = time.perf_counter()\n    for _ in range(iters):\n        fn()\n"
       "    return (time.perf_counter() - start_s)",
       "    start_s = time.process_time()\n    for _ in range(iters):\n        fn()\n"
       "    return (time.process_time() - start_s)")),
    K("clock", "launch_tax", "time-wall-clock", "time.time (not monotonic)",
      ("    start_s = time.perf_counter()\n    for _ in range(iters):\n        fn()\n"
       "    return (time.perf_counter() - start_s)",
       "    start_s = time.time()\n    for _ in range(iters):\n        fn()\n"
       "    return (time.time() - start_s)")),
    K("clock", "launch_tax", "time-thread-time", "the thread's CPU time instead of a wall clock",
      ("    start_s = time.perf_counter()\n    for _ in range(iters):\n        fn()\n"
       "    return (time.perf_counter() - start_s)",
       "    start_s = time.thread_time()\n    for _ in range(iters):\n        fn()\n"
       "    return (time.thread_time() - start_s)")),
    # Empty inputs, rules that need no GPU.
    K("empty", "buckets", "runner-accepts-empty-batch", "a batch of 0 rows is replayed",
      ("            or len(x) < 1\n", "")),
    K("empty", "fusion", "norm-accepts-0-d", "a 0-d x is accepted",
      ("    if not isinstance(x, torch.Tensor) or x.dim() < 1:\n        raise ValueError(f\"x: expected a tensor with at least one",
       "    if not isinstance(x, torch.Tensor):\n        raise ValueError(f\"x: expected a tensor with at least one")),
    K("empty", "engine", "step-accepts-empty", "a step of 0 tokens is accepted",
      ("x.dim() != 1 or x.dtype != torch.long or len(x) < 1", "x.dim() != 1 or x.dtype != torch.long")),
    K("empty", "launch_tax", "measure-checks-only-on-a-gpu", "n_ops=0 on a laptop says CUDA is needed",
      ("    for name, value in ((\"n_ops\", n_ops), (\"numel\", numel), (\"iters\", iters)):\n"
       "        _check_count(name, value, minimum=1)\n    if not torch.cuda.is_available():\n",
       "    if not torch.cuda.is_available():\n")),
    K("empty", "launch_tax", "sweep-empty-unchecked", "an empty sweep returns []",
      ("    if not n_ops_list:\n        raise ValueError", "    if False:\n        raise ValueError")),
    # A configuration rule that the outcome does not show.
    K("configuration", "engine", "default-sizes-1-2-4-8", "captures [1, 2, 4, 8] by default",
      ("sizes = default_capture_sizes(model.config.max_seqs) if capture_sizes is None",
       "sizes = [1, 2, 4, 8] if capture_sizes is None")),
    K("configuration", "engine", "default-sizes-powers-of-two", "captures powers of two by default",
      ("sizes = default_capture_sizes(model.config.max_seqs) if capture_sizes is None",
       "sizes = [2 ** i for i in range(model.config.max_seqs.bit_length()) if 2 ** i <= model.config.max_seqs] if capture_sizes is None")),
    K("configuration", "buckets", "runner-default-sizes-all", "captures every size 1..max by default",
      ("sizes = default_capture_sizes(max_rows) if capture_sizes is None",
       "sizes = list(range(1, max_rows + 1)) if capture_sizes is None")),
]

ALL = LAUNCH_MODEL + LAUNCH_TAX + CAPTURE + STATIC_RUNNER + BUCKETS + DISPATCH + FUSION + ENGINE + GAPS

#: The pytest marker of each module's exercise.
MARKERS = course.MARKERS


def apply(mutant: Mutant, source: str) -> str:
    """The reference source with the mutant's edits; each edit must match exactly once."""
    for old, new in mutant.edits:
        count = source.count(old)
        if count != 1:
            raise AssertionError(
                f"mutant {mutant.id}: expected the text {old!r} exactly once in "
                f"solutions/{mutant.module}.py, found it {count} times; update the mutant"
            )
        source = source.replace(old, new)
    return source
