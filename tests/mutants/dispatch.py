"""Exercise 6 (dispatch): plausible wrong versions of ``solutions/dispatch.py``.

Not here, because no answer changes (equivalent mutants): leaving out the early NONE return for
``valid_modes={NONE}`` (the lookups that follow allow neither graph mode either), and the
``max_num_seqs`` cap on a decode key's ``num_reqs`` (decode keys stop at ``q * max_num_seqs``, so
``s // q`` never passes it). vLLM has both; the reference keeps them as vLLM does."""

from tests.mutants import K, M

MUTANTS = [
    # The course's rules before they were checked against vLLM 0.26.0 itself.
    M("dispatch", "integer-mode-values", "FULL_DECODE_ONLY = 3 and FULL_AND_PIECEWISE = 4 (not vLLM's pairs)",
      ("    FULL_DECODE_ONLY = (FULL, NONE)\n    FULL_AND_PIECEWISE = (FULL, PIECEWISE)\n",
       "    FULL_DECODE_ONLY = 3\n    FULL_AND_PIECEWISE = 4\n"),
      ("        return isinstance(self.value, tuple)", "        return self.value > 2"),
      ("        return CUDAGraphMode(self.value[0]) if self.separate_routine() else self",
       "        return CUDAGraphMode.FULL if self.separate_routine() else self"),
      ("        return CUDAGraphMode(self.value[1]) if self.separate_routine() else self",
       "        return CUDAGraphMode({3: 0, 4: 1}[self.value]) if self.separate_routine() else self")),
    M("dispatch", "none-truthy", "NONE is truthy (no __bool__)",
      ("    def __bool__(self) -> bool:\n        return self is not CUDAGraphMode.NONE\n", ""),
      ("        if mode and not sizes:", "        if mode is not CUDAGraphMode.NONE and not sizes:"),
      ("        if mixed:\n", "        if mixed is not CUDAGraphMode.NONE:\n"),
      ("        if not self.mode or num_tokens", "        if self.mode is CUDAGraphMode.NONE or num_tokens")),
    M("dispatch", "decode-keys-every-size", "FULL decode keys for every size, not only up to q * max_num_seqs",
      ("                if q <= s <= q * self.max_num_seqs:", "                if True:")),
    M("dispatch", "decode-num-reqs-ignores-q", "a decode key counts tokens as requests (num_reqs = s, not s // q)",
      ("BatchDescriptor(s, min(s // q, self.max_num_seqs), True))", "BatchDescriptor(s, min(s, self.max_num_seqs), True))"),
      ("key = BatchDescriptor(p, min(p // self.q, self.max_num_seqs), True)", "key = BatchDescriptor(p, min(p, self.max_num_seqs), True)")),
    M("dispatch", "mixed-full-keys-no-num-reqs", "FULL mixed keys without num_reqs",
      ("else BatchDescriptor(s, min(s, self.max_num_seqs), False))", "else BatchDescriptor(s))"),
      ("            key = BatchDescriptor(p, min(p, self.max_num_seqs), False)", "            key = BatchDescriptor(p)")),
    M("dispatch", "no-spec-rounding", "sizes not rounded to multiples of q",
      ("        if mode.decode_mode() is CUDAGraphMode.FULL and q > 1:", "        if False:")),
    M("dispatch", "spec-rounding-keeps-larger", "rounded sizes above the largest kept",
      (" if r <= sizes[-1]})", "})")),
    M("dispatch", "ignores-invalid-modes", "invalid_modes ignored (cascade attention would replay FULL)",
      ("allowed = set(valid_modes or RUNTIME_MODES) - set(invalid_modes or ())",
       "allowed = set(valid_modes or RUNTIME_MODES)\n        if invalid_modes and not allowed - set(invalid_modes):\n"
       "            allowed = set()")),
    M("dispatch", "none-keeps-uniform", "an eager batch carries BD(n, None, uniform_decode)",
      ("        eager = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens))",
       "        eager = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens, None, bool(uniform_decode)))")),
    M("dispatch", "uniform-in-single-routine", "a uniform batch looked up as uniform in FULL mode too",
      ("        if uniform_decode and self.mode.separate_routine():", "        if uniform_decode:")),
    M("dispatch", "helpers-full-only-decode", "has_full_cudagraphs looks at the decode mode only",
      ("        return CUDAGraphMode.FULL in (self.decode_mode(), self.mixed_mode())",
       "        return self.decode_mode() is CUDAGraphMode.FULL and not self.separate_routine()")),
    M("dispatch", "descs-full-first", "FULL keys listed before PIECEWISE keys",
      ("for m in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL)", "for m in (CUDAGraphMode.FULL, CUDAGraphMode.PIECEWISE)")),
    M("dispatch", "descs-smallest-first", "captures smallest first",
      ("key=lambda d: d.num_tokens, reverse=True)", "key=lambda d: d.num_tokens)")),
    M("dispatch", "dispatch-no-padding", "looks up the unpadded size",
      ("        p = padded_size(num_tokens, self.capture_sizes)", "        p = num_tokens")),
    M("dispatch", "dispatch-piecewise-before-full", "PIECEWISE preferred to FULL",
      ("        if CUDAGraphMode.FULL in allowed and key in self._keys[CUDAGraphMode.FULL]:\n"
       "            return CUDAGraphMode.FULL, key\n", ""),
      ("            return CUDAGraphMode.PIECEWISE, BatchDescriptor(p)\n",
       "            return CUDAGraphMode.PIECEWISE, BatchDescriptor(p)\n"
       "        if CUDAGraphMode.FULL in allowed and key in self._keys[CUDAGraphMode.FULL]:\n"
       "            return CUDAGraphMode.FULL, key\n")),
    M("dispatch", "dispatch-trusts-key", "returns FULL without checking the key was captured",
      ("        if CUDAGraphMode.FULL in allowed and key in self._keys[CUDAGraphMode.FULL]:",
       "        if CUDAGraphMode.FULL in allowed and self.mode.has_full_cudagraphs():")),
    M("dispatch", "dispatch-clamps-large-batches", "a batch above every bucket gets the largest graph",
      (" or num_tokens > self.capture_sizes[-1] or", " or"),
      ("        p = padded_size(num_tokens, self.capture_sizes)",
       "        p = padded_size(num_tokens, self.capture_sizes) or self.capture_sizes[-1]")),
    M("dispatch", "dispatch-off-by-one", "pads n + 1 tokens",
      ("        p = padded_size(num_tokens, self.capture_sizes)", "        p = padded_size(num_tokens + 1, self.capture_sizes) or self.capture_sizes[-1]")),
    # The gap corpus: mistakes each of which one kind of test could miss.
    K("non-default", "dispatch", "uniform-default-true", "a batch is uniform decode unless told otherwise",
      ("        self, num_tokens: int, uniform_decode: bool = False,", "        self, num_tokens: int, uniform_decode: bool = True,")),
    K("container", "dispatch", "capture-descs-tuple", "capture_descs returns a tuple",
      ("        return [(m, d) for m in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL)",
       "        return tuple((m, d) for m in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL)"),
      ("                for d in sorted(self._keys[m], key=lambda d: d.num_tokens, reverse=True)]",
       "                for d in sorted(self._keys[m], key=lambda d: d.num_tokens, reverse=True))")),
    # Issue 23: every stated default, container, error and limit, at it and one past it.
    K("issue23", "dispatch", "eager-flag-zero", "an eager batch carries BD(n, None, 0): a 0 where the "
      "flag is the bool False (equal under ==, not the same descriptor)",
      ("        eager = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens))",
       "        eager = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens, None, 0))")),
    K("issue23", "dispatch", "empty-valid-modes-allow-nothing", "valid_modes=set() read as no mode "
      "allowed (a ValueError), not as every runtime mode",
      ("allowed = set(valid_modes or RUNTIME_MODES)", "allowed = set(RUNTIME_MODES if valid_modes is None else valid_modes)")),
    K("issue23", "dispatch", "query-len-default-2", "uniform_decode_query_len defaults to 2 (one "
      "speculative token), not 1",
      ("                 uniform_decode_query_len: int = 1):", "                 uniform_decode_query_len: int = 2):")),
    K("issue23", "dispatch", "capture-sizes-tuple", "capture_sizes kept as a tuple, not a list",
      ("        self.mode, self.capture_sizes = mode, sizes", "        self.mode, self.capture_sizes = mode, tuple(sizes)")),
    K("issue23", "dispatch", "keys-as-lists", "keys() holds sorted lists, not sets",
      ("        return {m: set(k) for m, k in self._keys.items()}",
       "        return {m: sorted(k, key=lambda d: d.num_tokens) for m, k in self._keys.items()}")),
    K("issue23", "dispatch", "capture-descs-pairs-as-lists", "capture_descs holds [mode, desc] lists, not tuples",
      ("        return [(m, d) for m in", "        return [[m, d] for m in")),
    K("issue23", "dispatch", "dispatch-returns-a-list", "dispatch returns [mode, desc], a list, not the tuple",
      ("        eager = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens))",
       "        eager = [CUDAGraphMode.NONE, BatchDescriptor(num_tokens)]"),
      ("            return CUDAGraphMode.FULL, key", "            return [CUDAGraphMode.FULL, key]"),
      ("            return CUDAGraphMode.PIECEWISE, BatchDescriptor(p)",
       "            return [CUDAGraphMode.PIECEWISE, BatchDescriptor(p)]")),
    # Issue 33: the refusals that are the dispatcher's own (the argument checks are given).
    K("issue33", "dispatch", "no-sizes-accepted", "a mode other than NONE without sizes accepted (it "
      "captures nothing, and dispatch reads a size that is not there)",
      ("        if mode and not sizes:", "        if False:")),
    K("issue33", "dispatch", "no-mode-left-only-if-all-invalid", "refused only when invalid_modes names "
      "every runtime mode: valid_modes={FULL} with invalid_modes={FULL} runs eagerly instead",
      ("        if not allowed:\n", "        if set(invalid_modes or ()) >= RUNTIME_MODES:\n")),
    K("issue33", "dispatch", "no-mode-left-checked-after-eager", "the restriction is checked only after "
      "the eager return: no mode allowed answers (NONE, BD(n))",
      ("        if not allowed:\n            raise ValueError(f\"invalid_modes: {invalid_modes} leaves none of "
       "valid_modes {valid_modes}\")\n        eager = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens))\n"
       "        if not self.mode or num_tokens > self.capture_sizes[-1] or allowed <= {CUDAGraphMode.NONE}:\n"
       "            return eager\n",
       "        eager = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens))\n"
       "        if not self.mode or num_tokens > self.capture_sizes[-1] or allowed <= {CUDAGraphMode.NONE}:\n"
       "            return eager\n        if not allowed:\n            raise ValueError(f\"invalid_modes: "
       "{invalid_modes} leaves none of valid_modes {valid_modes}\")\n")),
    K("issue23", "dispatch", "none-needs-sizes", "mode NONE without sizes refused too",
      ("        if mode and not sizes:", "        if not sizes:")),
    K("issue23", "dispatch", "no-fallback-to-q", "sizes that all round past the largest are refused, "
      "not replaced by [q]",
      ("            if not rounded and q <= sizes[-1]:\n                rounded = [q]\n", "")),
    K("issue23", "dispatch", "q-above-sizes-accepted", "a q above every size still gives [q]",
      ("            if not rounded and q <= sizes[-1]:", "            if not rounded:")),
    K("issue23", "dispatch", "decode-keys-stop-below-limit", "no decode key at exactly q * max_num_seqs tokens",
      ("                if q <= s <= q * self.max_num_seqs:", "                if q <= s < q * self.max_num_seqs:")),
    K("issue23-mutmut", "dispatch", "fallback-against-second-size",
      "cosmic-ray G7: the [q] fallback compares q with sizes[1], not the largest (IndexError on one size)",
      ("not rounded and q <= sizes[-1]", "not rounded and q <= sizes[1]")),
    K("issue23-mutmut", "dispatch", "fallback-against-next-to-largest",
      "cosmic-ray G7: the [q] fallback compares q with sizes[-2], not the largest (IndexError on one size)",
      ("not rounded and q <= sizes[-1]", "not rounded and q <= sizes[-2]")),
    K("issue23-indep", "dispatch", "capture-sizes-as-given", "capture_sizes kept as given: in their order, repeats and all",
      ("        self.mode, self.capture_sizes = mode, sizes",
       "        self.mode, self.capture_sizes = mode, sizes if q > 1 else list(capture_sizes)")),
    # Issue 34: the V2 runner's CudaGraphManager, and the V1 habits that break it.
    K("issue34", "dispatch", "v2-moves-to-a-larger-size", "a batch no candidate fits tries the larger "
      "token counts (V2 runs it eagerly)",
      ("        for d in self.candidates(num_tokens):",
       "        for d in [d for t in self._sizes if t >= num_tokens for d in self._by_size[t]]:")),
    K("issue34", "dispatch", "v2-ignores-num-reqs", "a graph replayed for more requests than it was captured for",
      ("                    and (d.num_reqs is None or d.num_reqs >= num_reqs)):", "                    ):")),
    K("issue34", "dispatch", "v2-ignores-uniform-count", "a decode graph replayed for a batch that is not uniform",
      ("            if (d.uniform_token_count in (None, uniform_token_count)", "            if (True")),
    K("issue34", "dispatch", "v2-decode-not-rounded", "decode graphs at the sizes themselves, not rounded up to q",
      ("                r = -(-s // q) * q\n", "                r = s\n")),
    K("issue34", "dispatch", "v2-rounds-the-sizes-like-v1", "the shared sizes rounded to multiples of q "
      "first, as V1 does (V2 keeps them for mixed batches)",
      ("        decode, mixed_mode = mode.decode_mode(), mode.mixed_mode()\n",
       "        decode, mixed_mode = mode.decode_mode(), mode.mixed_mode()\n"
       "        if decode is CUDAGraphMode.FULL and q > 1 and sizes:\n"
       "            sizes = sorted({r for r in (-(-s // q) * q for s in sizes) if r <= sizes[-1]}) or [q]\n")),
    K("issue34", "dispatch", "v2-mixed-before-decode", "at one token count the mixed graph is tried before the decode graph",
      ("        return list(self._by_size[self._sizes[i]]) if i < len(self._sizes) else []",
       "        return list(reversed(self._by_size[self._sizes[i]])) if i < len(self._sizes) else []")),
    K("issue34", "dispatch", "v2-candidates-exact-size", "candidates only at exactly num_tokens (no padding up)",
      ("        return list(self._by_size[self._sizes[i]]) if i < len(self._sizes) else []",
       "        return list(self._by_size.get(num_tokens, []))")),
    K("issue34", "dispatch", "v2-piecewise-counts-requests", "PIECEWISE graphs captured for min(s, max_num_seqs) requests",
      ("min(s, max_num_seqs) if mixed_mode is CUDAGraphMode.FULL else None))", "min(s, max_num_seqs)))")),
    K("issue34", "dispatch", "v2-full-mixed-any-requests", "mixed FULL graphs with num_reqs None (any number of requests)",
      ("min(s, max_num_seqs) if mixed_mode is CUDAGraphMode.FULL else None))", "None))")),
    K("issue34", "dispatch", "v2-decode-past-max-num-seqs", "decode graphs beyond q * max_num_seqs tokens",
      ("                if r <= min(q * max_num_seqs, sizes[-1]) and", "                if r <= sizes[-1] and")),
    K("issue34", "dispatch", "v2-decode-past-largest", "decode graphs rounded past the largest size kept",
      ("                if r <= min(q * max_num_seqs, sizes[-1]) and", "                if r <= q * max_num_seqs and")),
    K("issue34", "dispatch", "v2-decode-twice", "two sizes rounding to one r capture that decode graph twice",
      (" and d not in self._descs[decode]:", ":")),
    K("issue34", "dispatch", "v2-capture-full-first", "capture_descs lists the FULL graphs first",
      ("        return [d for descs in self._descs.values() for",
       "        return [d for descs in reversed(self._descs.values()) for")),
    K("issue34", "dispatch", "v2-eager-without-requests", "the eager answer drops the batch's num_reqs",
      ("        return BatchExecutionDescriptor(CUDAGraphMode.NONE, num_tokens, num_reqs)",
       "        return BatchExecutionDescriptor(CUDAGraphMode.NONE, num_tokens, None)")),
    K("issue34", "dispatch", "v2-uniform-any-even-split", "any even split counts as uniform, whatever max_query_len",
      ("    return max_query_len if num_tokens == max_query_len * num_reqs else None",
       "    return num_tokens // num_reqs if num_tokens % num_reqs == 0 else None")),
]
