"""Exercise 6, solved another way: a table of routines, vLLM's precomputed padding array, keys kept
as dicts from descriptor to mode, and no use of exercise 5's padded_size; part B (V2) with vLLM's
precomputed candidate list for every token count instead of a search."""

import enum
from dataclasses import dataclass


class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (FULL, NONE)
    FULL_AND_PIECEWISE = (FULL, PIECEWISE)

    def __bool__(self):
        return self.value != 0

    def _pair(self):
        if type(self.value) is tuple:
            return tuple(CUDAGraphMode(v) for v in self.value)
        return (self, self)

    def separate_routine(self):
        return self.name in ("FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")

    def decode_mode(self):
        return self._pair()[0]

    def mixed_mode(self):
        return self._pair()[1]

    def has_full_cudagraphs(self):
        return any(m.name == "FULL" for m in self._pair())

    def has_piecewise_cudagraphs(self):
        return any(m.name == "PIECEWISE" for m in self._pair())


RUNTIME_MODES = frozenset({CUDAGraphMode.NONE, CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL})


@dataclass(frozen=True)
class BatchDescriptor:
    num_tokens: int
    num_reqs: "int | None" = None
    uniform: bool = False


def _check(name, value):
    if type(value) is not int or value <= 0:
        raise ValueError(f"{name}={value!r} must be a positive int")
    return value


class CudagraphDispatcher:
    def __init__(self, mode, capture_sizes, max_num_seqs, uniform_decode_query_len=1):
        if type(mode) is not CUDAGraphMode:
            raise ValueError(f"mode={mode!r} is not a CUDAGraphMode")
        given = sorted(set(_check("capture_sizes", s) for s in capture_sizes))
        self.max_num_seqs = _check("max_num_seqs", max_num_seqs)
        self.q = q = _check("uniform_decode_query_len", uniform_decode_query_len)
        if mode != CUDAGraphMode.NONE and len(given) == 0:
            raise ValueError("capture_sizes is empty")
        if mode.decode_mode() == CUDAGraphMode.FULL and q > 1:
            top = given[-1]
            given = sorted(set(((s + q - 1) // q) * q for s in given) - set(range(top + 1, top + q)))
            if not given:
                if q > top:
                    raise ValueError(f"capture_sizes: none fits a multiple of {q} below {top}")
                given = [q]
        self.mode, self.capture_sizes = mode, given
        # vLLM's table: padded size for every batch size up to the largest
        self.pad = {}
        for s in reversed(given):
            for n in range(1, s + 1):
                self.pad[n] = s
        self.table = {}  # descriptor -> runtime mode
        mixed = mode.mixed_mode()
        for s in given:
            if mixed == CUDAGraphMode.PIECEWISE:
                self.table[BatchDescriptor(s)] = mixed
            elif mixed == CUDAGraphMode.FULL:
                self.table[BatchDescriptor(s, min(s, self.max_num_seqs))] = mixed
        if mode.separate_routine() and mode.decode_mode() == CUDAGraphMode.FULL:
            for s in given:
                if q <= s and s <= q * self.max_num_seqs:
                    self.table[BatchDescriptor(s, min(s // q, self.max_num_seqs), True)] = CUDAGraphMode.FULL

    def keys(self):
        out = {CUDAGraphMode.PIECEWISE: set(), CUDAGraphMode.FULL: set()}
        for d, m in self.table.items():
            out[m].add(d)
        return out

    def capture_descs(self):
        order = sorted(self.table.items(), key=lambda kv: (kv[1] == CUDAGraphMode.FULL, -kv[0].num_tokens))
        return [(m, d) for d, m in order]

    def dispatch(self, num_tokens, uniform_decode=False, valid_modes=None, invalid_modes=None):
        _check("num_tokens", num_tokens)
        allowed = set(valid_modes) if valid_modes else set(RUNTIME_MODES)
        allowed -= set(invalid_modes or ())
        if not allowed:
            raise ValueError("invalid_modes excludes every allowed mode")
        none = (CUDAGraphMode.NONE, BatchDescriptor(num_tokens))
        if not self.mode or num_tokens not in self.pad or not (allowed - {CUDAGraphMode.NONE}):
            return none
        p = self.pad[num_tokens]
        uniform = bool(uniform_decode) and self.mode.separate_routine()
        key = BatchDescriptor(p, min(p // self.q if uniform else p, self.max_num_seqs), uniform)
        if CUDAGraphMode.FULL in allowed and self.table.get(key) == CUDAGraphMode.FULL:
            return CUDAGraphMode.FULL, key
        if CUDAGraphMode.PIECEWISE in allowed and self.table.get(BatchDescriptor(p)) == CUDAGraphMode.PIECEWISE:
            return CUDAGraphMode.PIECEWISE, BatchDescriptor(p)
        return none


# The V2 manager the way vLLM writes it: a candidate list precomputed for every token count, and
# descriptors kept per token count in a dict of lists built by (rounded) size.


@dataclass(frozen=True)
class BatchExecutionDescriptor:
    cg_mode: CUDAGraphMode
    num_tokens: int
    num_reqs: object
    uniform_token_count: object = None


def get_uniform_token_count(num_reqs, num_tokens, max_query_len):
    _check("num_reqs", num_reqs)
    if type(num_tokens) is not int or num_tokens < num_reqs:
        raise ValueError(f"num_tokens={num_tokens!r} must be an int of at least num_reqs")
    _check("max_query_len", max_query_len)
    if max_query_len == num_tokens // num_reqs and num_tokens == max_query_len * num_reqs:
        return max_query_len
    return None


class CudaGraphManager:
    def __init__(self, mode, capture_sizes, max_num_seqs, decode_query_len=1):
        if type(mode) is not CUDAGraphMode:
            raise ValueError(f"mode={mode!r} must be a CUDAGraphMode")
        sizes = sorted({_check("capture_sizes", s) for s in capture_sizes})
        _check("max_num_seqs", max_num_seqs)
        q = _check("decode_query_len", decode_query_len)
        by_token, by_mode = {}, {}
        if mode and sizes:
            for s in sizes:
                if mode.separate_routine() and mode.decode_mode():
                    r = (s + q - 1) // q * q
                    if not (r > max_num_seqs * q or r > sizes[-1] or r // q > max_num_seqs):
                        d = BatchExecutionDescriptor(mode.decode_mode(), r, r // q, q)
                        if d not in by_mode.get(d.cg_mode, []):
                            by_mode.setdefault(d.cg_mode, []).append(d)
                            by_token.setdefault(r, []).append(d)
                if mode.mixed_mode():
                    m = mode.mixed_mode()
                    d = BatchExecutionDescriptor(m, s, min(s, max_num_seqs) if m == CUDAGraphMode.FULL else None)
                    by_mode.setdefault(m, []).append(d)
                    by_token.setdefault(s, []).append(d)
        self._candidates, start = {}, 0
        for t in sorted(by_token):
            for i in range(start, t + 1):
                self._candidates[i] = by_token[t]
            start = t + 1
        self._by_mode = {m: sorted(ds, key=lambda d: -d.num_tokens) for m, ds in by_mode.items()}

    def capture_descs(self):
        out = []
        for m in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL):
            out.extend(self._by_mode.get(m, ()))
        return out

    def candidates(self, num_tokens):
        return list(self._candidates.get(_check("num_tokens", num_tokens), ()))

    def dispatch(self, num_reqs, num_tokens, uniform_token_count=None):
        _check("num_reqs", num_reqs)
        if type(num_tokens) is not int or num_tokens < num_reqs:
            raise ValueError(f"num_tokens={num_tokens!r} must be an int of at least num_reqs")
        if uniform_token_count is not None:
            _check("uniform_token_count", uniform_token_count)
        for d in self._candidates.get(num_tokens, ()):
            if ((d.uniform_token_count is None or d.uniform_token_count == uniform_token_count)
                    and (d.num_reqs is None or d.num_reqs >= num_reqs) and d.num_tokens >= num_tokens):
                return d
        return BatchExecutionDescriptor(CUDAGraphMode.NONE, num_tokens, num_reqs)
