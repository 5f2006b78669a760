"""The GPUs GPU workers run on: which devices there are and how much memory they have
(``nvidia-smi``), a pool that lends each device to ``jobs`` workers at a time, each held to its
share of the device's memory, and the look after a worker that frees its device only once the
worker's own processes hold none of it.

``nvidia-smi``'s memory figures are the whole device's, whoever holds them: a worker is charged
only with what its own processes hold (``--query-compute-apps``), never the device's total.
Where nvidia-smi cannot show this machine's processes' memory (a container, MIG, vGPU: the
pool's ``check_visibility``, once per grading), neither the cap nor the look after a worker can
work: both are off, and the judge's report says so."""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import replace
from pathlib import Path

from grader import nvidia_smi, sandbox
from grader.nvidia_smi import Visibility, gpu_bytes_of, gpu_memory
from grader.procfs import process_start

#: Of a device's memory, what its GPU workers may hold together (the rest: the driver, the
#: judge's reference).
SHARED_FRACTION = 0.9


class DevicePool:
    """Each of ``ids`` lent to ``jobs`` GPU workers at a time (``CUDA_VISIBLE_DEVICES`` per
    worker); ``share_bytes``: what each may hold, from the smallest device's ``total`` in
    ``memory`` (``gpu_memory()``'s answer; None: not watched)."""

    def __init__(self, ids: list[str], jobs: int = 1, memory: dict[str, dict] | None = None):
        if jobs < 1:
            raise ValueError(f"--gpu-jobs: expected at least 1 worker per GPU, got {jobs}")
        self.jobs, self.leases = jobs, len(ids) * jobs
        self._free: queue.Queue[str] = queue.Queue()
        for device in ids:
            for _ in range(jobs):
                self._free.put(device)
        totals = [m["total"] for m in (memory or {}).values()]
        self.share_bytes = int(SHARED_FRACTION * min(totals) / jobs) if totals else None
        #: Whether nvidia-smi shows this machine's processes' GPU memory (``check_visibility``);
        #: None: not asked, the cap and the look after a worker as nvidia-smi answers.
        self.visibility: Visibility | None = None
        self._asked = threading.Lock()

    @classmethod
    def of_this_machine(cls, jobs: int) -> "DevicePool":
        return cls(visible_ids(), jobs, gpu_memory())

    def check_visibility(self) -> Visibility:
        """Once: whether nvidia-smi shows the GPU memory a process of this machine holds
        (``nvidia_smi.memory_visibility``); where it does not, every later worker runs without
        the cap and without the look after it."""
        with self._asked:
            if self.visibility is None:
                self.visibility = nvidia_smi.memory_visibility()
            return self.visibility

    @property
    def watched(self) -> bool:
        """Whether the workers' GPU memory is watched: not where it was found invisible."""
        return self.visibility is None or self.visibility.visible

    def run(
        self, box: Path, limits: sandbox.Limits, frames: list[bytes], *, hide: tuple[Path, ...], slot: int
    ) -> sandbox.Run:
        """A GPU worker on a device of its own (or its share of one), then a look at the device:
        the worker's own processes must hold none of its memory once the worker is gone (both
        only where that memory can be seen: ``watched``)."""
        device = self._free.get() if self.leases else None  # no GPU seen here: no device to share
        try:
            limits = replace(limits, gpu_bytes=self.share_bytes if self.watched else None)
            run = sandbox.run(box, limits, frames, gpu=True, hide=hide, slot=slot, device=device)
            if device is not None and self.watched:
                # The device goes to the next worker once this one's processes hold none of it.
                left = settle_gpu(run, device)
                if left:
                    run.leftovers.append(left)
            return run
        finally:
            if device is not None:
                self._free.put(device)


def visible_ids() -> list[str]:
    """The GPUs workers may use: CUDA_VISIBLE_DEVICES's list where it is set, else all."""
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip():
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(max(1, torch.cuda.device_count()))]


def settle_gpu(run: sandbox.Run, device: str, smi: str | None = None, wait_s: float = 5.0) -> str | None:
    """After a GPU worker: wait up to ``wait_s`` for its own processes (``run.pids``, those still
    running as the same processes) to hold no memory on the GPUs; return what they still hold,
    as a line for the report, or None. Memory other processes hold (the judge's reference, a
    grader beside this one, a TA's notebook) is theirs: ``nvidia-smi``'s per-process list, never
    the device's total, decides."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = {pid for pid, started in run.pids.items() if process_start(pid) == started}
        held = gpu_bytes_of(alive, smi) if alive else 0
        if not held:  # nothing held, or None: nothing seen (check_visibility tells which, once)
            return None
        if time.monotonic() > deadline:
            return (
                f"GPU {device}: the worker's own processes ({', '.join(map(str, sorted(alive)))}) "
                f"still hold {held >> 20} MiB after it ended"
            )
        time.sleep(0.1)
