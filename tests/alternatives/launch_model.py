"""Exercise 1, solved another way: closed forms, raw normal equations, str.format."""

import dataclasses

from coursekit.lesson import SEED_WEIGHTS

GIB = 1 << 30


@dataclasses.dataclass
class DecodeStep:
    weight_gib: float
    n_layers: int = 28
    kernels_per_layer: int = 15
    launch_us: float = 5.0
    bandwidth_bps: float = 1.0e12
    gpu_node_us: float = 0.0

    def __post_init__(self):
        for name, value in dataclasses.asdict(self).items():
            if type(value) not in (int, float) or not 0 <= value < float("inf"):
                raise ValueError("DecodeStep.%s must be non-negative (got %r)" % (name, value))
        if not self.bandwidth_bps > 0:
            raise ValueError("DecodeStep.bandwidth_bps must be positive (got %r)" % self.bandwidth_bps)

    @property
    def n_kernels(self):
        return int(self.kernels_per_layer * self.n_layers) + 10

    @property
    def compute_ms(self):
        return 1e3 * (self.weight_gib * GIB) / self.bandwidth_bps

    @property
    def launch_ms(self):
        return self.launch_us * self.n_kernels * 1e-3

    def eager_ms(self):
        return self.launch_ms + self.compute_ms + self.gpu_node_us * self.n_kernels / 1000

    def graph_ms(self):
        return self.compute_ms + (self.launch_us + self.gpu_node_us * self.n_kernels) / 1000

    def speedup(self):
        return self.eager_ms() / self.graph_ms()


SEED_ROWS = [(label, DecodeStep(weight_gib=w)) for label, w in SEED_WEIGHTS]

LINE1 = "{label}: {n} 个 kernel | 计算 {c:5.1f} ms | 启动 {l:4.2f} ms\n"
LINE2 = "   eager {e:5.1f} ms -> {et:5.1f} tok/s | graph {g:5.1f} ms -> {gt:5.1f} tok/s | 加速比 {s:.2f}x\n"


def report(rows):
    text = ""
    for label, s in rows:
        e, g = s.eager_ms(), s.graph_ms()
        text += LINE1.format(label=label, n=s.n_kernels, c=s.compute_ms, l=s.launch_ms)
        text += LINE2.format(e=e, et=1000 / e, g=g, gt=1000 / g, s=e / g)
    return text[:-1]  # the lines were built with their newlines: the last one goes


def simulate_eager_ms(kernel_us, launch_us):
    """Closed form: the last kernel ends at max over j of (j * launch + t_j + ... + t_N)."""
    if type(launch_us) not in (int, float) or not 0 <= launch_us < float("inf"):
        raise ValueError(f"launch_us={launch_us!r} is not a finite duration >= 0")
    times = list(kernel_us)
    if any(type(t) not in (int, float) or not 0 <= t < float("inf") for t in times):
        raise ValueError(f"kernel_us has a duration that is not finite and >= 0: {times}")
    best, tail = 0.0, 0.0
    for j in range(len(times), 0, -1):
        tail += times[j - 1]
        best = max(best, j * launch_us + tail)
    return best / 1000


def fit_launch_model(n_kernels, step_ms):
    if len(n_kernels) != len(step_ms):
        raise ValueError("n_kernels has %d points but step_ms has %d" % (len(n_kernels), len(step_ms)))
    if len(set(n_kernels)) < 2:
        raise ValueError("n_kernels needs two or more distinct values")
    # The textbook normal equations on raw sums (no centering): less stable, still right.
    n = len(n_kernels)
    sx, sy = float(sum(n_kernels)), float(sum(step_ms))
    sxx = float(sum(k * k for k in n_kernels))
    sxy = float(sum(k * t for k, t in zip(n_kernels, step_ms)))
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return slope * 1e3, (sy - slope * sx) / n

if __name__ == "__main__":
    print(report(SEED_ROWS))
