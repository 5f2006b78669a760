"""Exercise 6, solved another way: a table of routines, vLLM's precomputed padding array, keys kept
as dicts from descriptor to mode, and no use of exercise 5's padded_size."""

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
