"""Exercise 2 (launch_tax): plausible wrong versions of ``solutions/launch_tax.py``."""

from tests.mutants import G, K, M

MUTANTS = [
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
    G("launch_tax", "time-cpu-clock-on-cuda", "times CUDA work with a CPU clock and no synchronize",
      ("    if torch.cuda.is_available():\n        torch.cuda.synchronize()", "    if False:\n        torch.cuda.synchronize()")),
    M("launch_tax", "sweep-sorted", "measures the lengths sorted, not in the order given",
      ("for n in n_ops_list]", "for n in sorted(n_ops_list)]")),
    # The gap corpus: mistakes each of which one kind of test could miss.
    K("non-default", "launch_tax", "default-iters-10", "times 10 calls by default, not 100",
      ("def time_ms(fn: Callable[[], object], iters: int = 100", "def time_ms(fn: Callable[[], object], iters: int = 10")),
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
    K("issue23", "launch_tax", "floor-divided-mean", "the CPU mean floored: total ms // iters",
      ("    return (time.perf_counter() - start_s) * 1e3 / iters", "    return (time.perf_counter() - start_s) * 1e3 // iters")),
    K("issue23", "launch_tax", "mean-over-every-call", "the CPU total divided by warmup + iters",
      ("    return (time.perf_counter() - start_s) * 1e3 / iters", "    return (time.perf_counter() - start_s) * 1e3 / (iters + warmup)")),
    K("issue23", "launch_tax", "warmup-timed", "the clock starts before the warm-up (CPU path)",
      ("    for _ in range(warmup):\n        fn()\n    if torch.cuda.is_available():",
       "    start_s = time.perf_counter()\n    for _ in range(warmup):\n        fn()\n    if torch.cuda.is_available():"),
      ("    start_s = time.perf_counter()\n    for _ in range(iters):", "    for _ in range(iters):")),
    K("issue23-indep", "launch_tax", "sweep-drops-numel", "the sweep measures at the default numel",
      ("measure_launch_tax(n, numel=numel, iters=iters)", "measure_launch_tax(n, iters=iters)")),
    K("issue23-indep", "launch_tax", "sweep-returns-tuple", "the sweep returns a tuple, not a list",
      ("    return [measure_launch_tax(n, numel=numel, iters=iters) for n in n_ops_list]",
       "    return tuple(measure_launch_tax(n, numel=numel, iters=iters) for n in n_ops_list)")),
]
