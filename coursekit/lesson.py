"""Facts taken from the lesson (../shared/seed/), kept once for exercises, solutions and tests."""

#: The lesson's two decode steps: (label, GiB of weights read per step).
SEED_WEIGHTS = (
    ("AWQ  权重 (~5.5 GiB)", 5.5),
    ("BF16 权重 (~14.2 GiB)", 14.2),
)

#: What ``report(SEED_ROWS)`` prints, byte for byte (the lesson's "expected output" block).
SEED_REPORT = """\
AWQ  权重 (~5.5 GiB): 430 个 kernel | 计算   5.9 ms | 启动 2.15 ms
   eager   8.1 ms -> 124.1 tok/s | graph   5.9 ms -> 169.2 tok/s | 加速比 1.36x
BF16 权重 (~14.2 GiB): 430 个 kernel | 计算  15.2 ms | 启动 2.15 ms
   eager  17.4 ms ->  57.5 tok/s | graph  15.3 ms ->  65.6 tok/s | 加速比 1.14x"""

#: Reference sweep measured on an H200 (../shared/reference/): kernels in the chain ->
#: (eager ms, graph ms) per iteration of a chain of tiny ``x + 1`` kernels.
H200_SWEEP = {
    25: (0.22183807373046874, 0.028559999465942384),
    50: (0.5574278259277343, 0.05604032039642334),
    100: (0.7770086669921875, 0.11148480415344238),
    200: (1.5854194641113282, 0.2205356788635254),
    400: (3.1170880126953127, 0.4411238479614258),
    800: (6.477432861328125, 0.8796044921875),
}

#: The lesson's Part A measured on the same H200: 200 tiny kernels on 1024 floats, µs per
#: iteration, eager and as one graph replay (about 10x).
H200_PART_A = (1851.64794921875, 185.4217529296875)

#: Slopes fitted through ``H200_SWEEP`` (µs per kernel): eager launch cost and graph node cost.
H200_TAU_EAGER_US = 7.991419324624089
H200_TAU_GRAPH_US = 1.0981677102127563
