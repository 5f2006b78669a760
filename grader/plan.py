"""What one exercise's worker is asked: its checks in phases (the public checks, then the hidden
ones, sent only once the public answers are in), each phase one request frame, and where each
probe's answer lies in that phase's answer frame."""

from __future__ import annotations

from dataclasses import dataclass

from coursekit.course import MODULE_OF
from grader.runtime import wire
from grader.checks import Check


@dataclass
class Phase:
    checks: list[Check]
    request: wire.Request
    index: dict  # a probe's key: where its answer lies in the phase's answer frame
    count: int  # how many answers the frame holds


def plan(exercise: str, checks: list[Check], gpu_jobs: int = 1) -> list[Phase]:
    """The phases of ``exercise``'s worker: public checks, then hidden ones (no empty phase)."""
    phases = [[c for c in checks if not c.hidden], [c for c in checks if c.hidden]]
    if not phases[1]:
        phases.pop()
    planned = []
    for phase in phases:
        probes, index = [], {}
        for check in phase:
            for probe in sorted(check.probes, key=lambda p: p.last):
                if probe.key() not in index:
                    index[probe.key()] = len(probes)
                    probes.append(probe)
        probes.sort(key=lambda p: p.last)  # a failing capture disturbs what follows it
        index = {p.key(): i for i, p in enumerate(probes)}
        request = wire.Request(
            module=MODULE_OF[exercise],
            gpu_fraction=round(0.9 / gpu_jobs, 4),
            probes=[{"probe": p.probe, "args": wire.encode(p.args)} for p in probes],
        )
        planned.append(Phase(phase, request, index, len(probes)))
    return planned
