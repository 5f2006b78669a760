"""Exercise 9, solved another way: itertools.accumulate, a closed-form CPU-bound test, math.prod,
a table of what each runner takes out of the KV cache."""

import itertools
import math
import numbers


def _time(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0 or value == math.inf:
        raise ValueError(f"{name} must be a finite time >= 0 (got {value!r})")
    return value


def _whole(name, value, least):
    if type(value) is not int or value < least:
        raise ValueError(f"{name} must be an int >= {least} (got {value!r})")
    return value


def eager_timeline(kernel_us, launch_us):
    launch_us = _time("launch_us", launch_us)
    rows = []
    gpu_free = 0.0
    for k, t in enumerate(kernel_us, 1):
        t = _time("kernel_us", t)
        start = k * launch_us if k * launch_us > gpu_free else gpu_free
        gpu_free = start + t
        rows.append((float(k * launch_us), float(start), float(gpu_free)))
    return rows


def cpu_bound_launch_us(kernel_us):
    times = [_time("kernel_us", t) for t in kernel_us]
    running = itertools.accumulate(times[:-1])
    return min((total / m for m, total in enumerate(running, 1)), default=math.inf)


def implied_launch_us(eager_ms, compute_ms, n_kernels):
    _time("eager_ms", eager_ms)
    _time("compute_ms", compute_ms)
    _whole("n_kernels", n_kernels, 1)
    if compute_ms > eager_ms:
        raise ValueError("compute_ms must not exceed eager_ms")
    per_kernel_us = 1e3 / n_kernels
    return (eager_ms - compute_ms) * per_kernel_us, eager_ms * per_kernel_us


def kv_bytes_per_token(n_layers, n_kv_heads, head_dim, dtype_bytes=2):
    named = {"n_layers": n_layers, "n_kv_heads": n_kv_heads, "head_dim": head_dim, "dtype_bytes": dtype_bytes}
    return 2 * math.prod(_whole(name, v, 1) for name, v in named.items())


def graph_memory_bytes(per_graph_bytes, shared_pool=True):
    if shared_pool is not True and shared_pool is not False:
        raise ValueError(f"shared_pool must be True or False (got {shared_pool!r})")
    total = largest = 0
    for b in per_graph_bytes:
        _whole("per_graph_bytes", b, 0)
        total, largest = total + b, max(largest, b)
    return largest if shared_pool else total


#: The share of the graphs' memory each vLLM runner takes out of the KV cache: V1 its whole
#: estimate, V2 none (it sizes the cache before it captures).
KV_SHARE = {"v1": 1, "v2": 0}


def kv_tokens_forgone(graph_bytes, bytes_per_token, runner="v1"):
    tokens, _ = divmod(_whole("graph_bytes", graph_bytes, 0), _whole("bytes_per_token", bytes_per_token, 1))
    if not isinstance(runner, str) or runner not in KV_SHARE:
        raise ValueError(f"runner must be 'v1' or 'v2' (got {runner!r})")
    return KV_SHARE[runner] * tokens


if __name__ == "__main__":
    from coursekit.lesson import tradeoff_figures

    print(tradeoff_figures(implied_launch_us, cpu_bound_launch_us, kv_bytes_per_token, kv_tokens_forgone))
