"""Given code for exercise 2 (measuring the launch tax): the workload and the record of one
measurement. Exercise 2, its tests and the lab share these, so they live here once."""

from __future__ import annotations

from dataclasses import dataclass

import torch


def tiny_op_chain(x: torch.Tensor, n_ops: int) -> torch.Tensor:
    """``n_ops`` tiny elementwise kernels, one after another: ``x + 1.0`` repeated (the lesson's
    Part A). Each op launches its own kernel and does almost no work, so eagerly the chain costs
    about ``n_ops`` launches; captured, it replays with one. ``x`` itself is never modified."""
    for _ in range(n_ops):
        x = x + 1.0
    return x


@dataclass(frozen=True)
class LaunchTax:
    """One measurement of a chain of ``n_ops`` tiny kernels on ``numel`` floats.

    ``eager_us`` and ``graph_us`` are microseconds per run of the whole chain (eager: ``n_ops``
    launches; graph: one ``replay()``); ``replay_matches_eager`` says whether the graph's output
    equals the eager result bit for bit."""

    n_ops: int
    numel: int
    eager_us: float
    graph_us: float
    replay_matches_eager: bool

    @property
    def speedup(self) -> float:
        """``eager_us / graph_us``: how many times faster the replay is."""
        return self.eager_us / self.graph_us
