"""A corpus of plausible wrong implementations (mutants) of the exercise modules.

Each mutant is the reference module with one mistake that students really make, written as text
replacements on ``solutions/<module>.py``. ``tests/test_corpus.py`` builds each one into a
submission folder and runs the public tests of its exercise against it: every mutant must lose
points. A replacement that no longer matches the reference exactly once fails loudly, so the
corpus cannot rot silently when the reference changes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    module: str
    name: str
    why: str
    edits: tuple[tuple[str, str], ...]

    @property
    def id(self) -> str:
        return f"{self.module}:{self.name}"


def M(module, name, why, *edits):
    return Mutant(module, name, why, tuple(edits))


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

ALL = LAUNCH_MODEL + BUCKETS + DISPATCH

#: The pytest marker of each module's exercise.
MARKERS = {"launch_model": "ex1", "buckets": "ex5", "dispatch": "ex6"}


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
