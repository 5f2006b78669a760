"""The grader's defences, and how to switch each one off in a copy of the repository.

A corpus case proves a defence only if it fails when that defence is gone: a case that passes
for another reason proves nothing. ``off(name, root)`` copies the repository to ``root`` with
the defence switched off by a small text edit of the grader (like a mutant of the grader), or
says how to grade without it (``no_secret``); the corpus tests grade the case again there and
expect it to fail. Each edit must match the grader's source exactly once, so a defence that
moves fails loudly here instead of passing silently.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from coursekit.impl import REPO_ROOT


@dataclass(frozen=True)
class Defence:
    name: str
    what: str
    edits: tuple[tuple[str, str, str], ...] = ()  # (file, old, new)
    no_secret: bool = False  # switched off by grading without the grading secret


DEFENCES = {
    d.name: d
    for d in [
        Defence("grading-secret", "every input drawn from the instructor's secret and the submission", no_secret=True),
        Defence(
            "hidden-second-frame",
            "hidden probes sent only after the public answers are in",
            (
                (
                    "grader/plan.py",
                    "phases = [[c for c in checks if not c.hidden], [c for c in checks if c.hidden]]",
                    "phases = [list(checks), []]",
                ),
            ),
        ),
        Defence(
            "hidden-reason-is-the-rule",
            "a hidden check's reason is its rule, never worker text",
            (
                (
                    "grader/verdict.py",
                    'reason = f"rule: {check.rule}" if check.hidden else f"{why}\\n  rule: {check.rule}"',
                    'reason = f"{why}\\n  rule: {check.rule}"',
                ),
            ),
        ),
        Defence(
            "valid-inputs-in-rejection-checks",
            "checks that expect errors carry valid inputs too",
            (
                (
                    "grader/judge.py",
                    "        return [c for c in checks if c.gpu] if self.gpu_only else checks",
                    "        checks = [c if all(p.needs_reference for p in c.probes) else "
                    "__import__('dataclasses').replace(c, probes=[p for p in c.probes if not p.needs_reference]) "
                    "for c in checks]\n"
                    "        return [c for c in checks if c.gpu] if self.gpu_only else checks",
                ),
            ),
        ),
        Defence(
            "restore-after-call",
            "the worker undoes a submission's patches right after each call",
            (("grader/probes.py", "    finally:\n        _restore()\n", "    finally:\n        pass\n"),),
        ),
        Defence(
            "escaped-text",
            "worker text escaped before it is printed or written",
            (
                (
                    "grader/text.py",
                    "    if not isinstance(text, str):\n        try:",
                    "    return str(text)\n    if not isinstance(text, str):\n        try:",
                ),
            ),
        ),
        Defence(
            "malformed-answers-caught",
            "whatever a worker sends, the judge goes on",
            (
                (
                    "grader/verdict.py",
                    "    except Exception as exc:  # noqa: BLE001 - whatever an untrusted worker sent, the judge goes on",
                    "    except ZeroDivisionError as exc:",
                ),
            ),
        ),
        Defence(
            "bounded-decoding",
            "answer frames capped in bytes and in values before parsing",
            (
                ("grader/runtime/wire.py", "MAX_FRAME_BYTES = 8 << 20", "MAX_FRAME_BYTES = 64 << 20"),
                ("grader/runtime/wire.py", "MAX_VALUES = 200_000", "MAX_VALUES = 10**12"),
            ),
        ),
        Defence(
            "ipc-namespace",
            "each worker in its own IPC namespace",
            (
                (
                    "grader/isolation.py",
                    "--pid --ipc --fork --kill-child",
                    "--pid --fork --kill-child",
                ),
            ),
        ),
        Defence(
            "keyring-filter",
            "the worker's seccomp filter refuses the keyring calls",
            (("grader/runtime/worker.py", "    keyrings = deny_keyrings()\n", "    keyrings = 'switched off'\n"),),
        ),
        Defence(
            "students-folder",
            "per-student outputs in students/, apart from class-level files",
            (
                ("grader/classbook.py", 'folder = staging / "students" / name', 'folder = staging / name'),
                ("grader/classbook.py", 'students = out / "students"', 'students = out'),
                (
                    "grader/classbook.py",
                    '    for folder in sorted((staging / "students").iterdir()) if (staging / "students").exists() else []:',
                    '    for folder in [f for f in sorted(staging.iterdir()) if f.is_dir()]:',
                ),
            ),
        ),
        Defence(
            "no-symlinks-followed",
            "symbolic links in a submission are refused, not followed",
            (
                (
                    "grader/lms.py",
                    "        if path.is_symlink():\n            entries.append(",
                    "        if False:\n            entries.append(",
                ),
                (
                    "grader/submission.py",
                    "            if sub.is_symlink():\n                _refuse",
                    "            if False:\n                _refuse",
                ),
            ),
        ),
        Defence(
            "regular-files-only",
            "only regular files are read; a FIFO is never opened for reading",
            (
                (
                    "grader/submission.py",
                    "os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC",
                    "os.O_RDONLY | os.O_CLOEXEC",
                ),
                (
                    "grader/submission.py",
                    "        elif not path.is_dir():\n            _refuse(submission, None, f\"{path.name} is not a regular file: refused\")",
                    "        elif not path.is_dir():\n            found.append(path)",
                ),
            ),
        ),
        Defence(
            "one-member-per-module",
            "a zip with two members for one module is refused",
            (
                (
                    "grader/submission.py",
                    "        doubled = {m: ms for m, ms in by_module.items() if len(ms) > 1}",
                    "        doubled = {}\n        by_module = {m: sorted(ms, key=lambda x: len(x.filename))[:1] for m, ms in by_module.items()}",
                ),
            ),
        ),
        Defence(
            "reference-first",
            "the reference answers before any worker starts; its failure stops the run",
            (
                (
                    "grader/reference.py",
                    "                raise ReferenceFailure(f\"the reference failed probe {exercise} {probe.label}: {message}\")",
                    "                pass",
                ),
                (
                    "grader/checks.py",
                    "        if not expected.ok:\n            raise RuntimeError(f\"the reference failed probe {probe.label}: {expected.error}\")",
                    "        if not expected.ok:\n            return f\"{probe.label}: the reference failed\"",
                ),
            ),
        ),
        Defence(
            "canary",
            "a bare worker must run before anyone is graded",
            (
                (
                    "grader/workers.py",
                    "            if not isinstance(facts, dict):\n                tail",
                    "            if not isinstance(facts, dict):\n                facts = {}\n            if False:\n                tail",
                ),
            ),
        ),
        Defence(
            "timeout-retry",
            "a worker that timed out gets a second try with twice the time",
            (("grader/workers.py", "            if not run.timed_out or attempt:", "            if True:"),),
        ),
        Defence(
            "load-scaled-limits",
            "time limits grow with the canary's and the reference's times",
            (
                (
                    "grader/workers.py",
                    "        timeout = max(self.timeout_s, 3 * canary.wall_s + 20 * reference_s)",
                    "        timeout = self.timeout_s",
                ),
            ),
        ),
        Defence(
            "grading-deadline",
            "one submission's grading ends within --deadline: every worker's limit is cut to what is left",
            (
                (
                    "grader/workers.py",
                    "        if self.total_s is None:\n            return limits\n",
                    "        if True:\n            return limits\n",
                ),
            ),
        ),
        Defence(
            "fresh-state-per-exercise",
            "each exercise's process of the shared worker starts from a "
            "state no earlier one could write (processes, shared folders, IPC)",
            (
                (
                    "grader/runtime/worker.py",
                    "            found = _fresh_state(work, places, isolated)\n",
                    "            found = []\n            _clear(work)\n",
                ),
                (
                    "grader/isolation.py",
                    "        return release_uid(uid, box) if uid is not None else []\n",
                    "        return []\n",
                ),
            ),
        ),
        Defence(
            "uid-free-only-when-empty",
            "without namespaces, a worker's uid is handed on only once "
            "it owns no process and no file in the shared places",
            (
                (
                    "grader/isolation.py",
                    "        return release_uid(uid, box) if uid is not None else []\n",
                    "        return []\n",
                ),
            ),
        ),
        Defence(
            "flag-code-that-reaches-in",
            "the instructor is told which lines reach into the grader",
            (
                (
                    "grader/flags.py",
                    "    found = []\n    for module, data in sorted(files.items()):",
                    "    return []\n    found = []\n    for module, data in sorted(files.items()):",
                ),
            ),
        ),
        Defence(
            "observed-timer-window",
            "a timer's mean is judged by the window the probe measured "
            "around the calls (durations drawn at the call), not by one derived from its inputs",
            (
                (
                    "grader/exercises/launch_tax.py",
                    '    low, high = v["lower_ms"], v["upper_ms"]\n',
                    '    low, high = probe.args["timed_ms"]\n',
                ),
            ),
        ),
        Defence(
            "class-needs-isolation",
            "grade-all refuses to run without isolation",
            (
                (
                    "grader/__main__.py",
                    "    if not isolation.current().complete and not args.allow_unisolated:",
                    "    if False:",
                ),
            ),
        ),
        # Issue 32: what the first GPU broke.
        Defence(
            "reference-sees-what-the-worker-sees",
            "a CPU check's reference answers are computed with "
            "CUDA hidden, as the CPU worker's are, where the judge sees a GPU",
            (
                (
                    "grader/judge.py",
                    "self.reference = Reference(cuda_visible=has_cuda)",
                    "self.reference = Reference(cuda_visible=False)",
                ),
            ),
        ),
        Defence(
            "reference-on-one-thread",
            "the reference's work stays on one thread whatever grade-all runs "
            "side by side (CUDA's profiler belongs to one thread)",
            (
                (
                    "grader/reference.py",
                    "        return self._thread.submit(compute, module_name, requests).result()",
                    "        return compute(module_name, requests)",
                ),
            ),
        ),
        Defence(
            "judge-ends-its-reference",
            "python -m grader grade ends its reference process before it ends",
            (
                (
                    "grader/__main__.py",
                    "        return NOT_GRADED\n    finally:\n        judge.close()",
                    "        return NOT_GRADED",
                ),
            ),
        ),
        Defence(
            "student-deadline",
            "a student whose grading never ends gets a timed-out row; the class goes on",
            (
                (
                    "grader/classbook.py",
                    "        finished, report, error = within(student_deadline_s, grade)",
                    "        finished, report, error = True, grade(), None",
                ),
            ),
        ),
        Defence(
            "gpu-memory-per-process",
            "a GPU worker is charged only with its own processes' device memory",
            (
                (
                    "grader/devices.py",
                    "        held = gpu_bytes_of(alive, smi) if alive else 0",
                    "        held = sum(m[\"used\"] for m in (gpu_memory(smi) or {}).values())",
                ),
            ),
        ),
        Defence(
            "notebook-needs-isolation",
            "a notebook's checks refuse to grade without isolation",
            (
                (
                    "grader/notebook_checks.py",
                    '        if not isolation.current().complete and os.environ.get("LAUNCH_TAX_ALLOW_UNISOLATED") != "1":',
                    "        if False:",
                ),
            ),
        ),
    ]
}


def off(name: str | None, root: Path) -> Path:
    """A copy of the repository at ``root`` with the defence ``name`` switched off (None: a
    plain copy, to break something else in it)."""
    defence = DEFENCES[name] if name else Defence("none", "nothing switched off")
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        source = REPO_ROOT / rel
        if rel.startswith(("course/", "tests/", ".ci/")) or not source.is_file() or source.is_symlink():
            continue
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    for rel, old, new in defence.edits:
        path = root / rel
        text = path.read_text(encoding="utf-8")
        assert text.count(old) == 1, f"defence {name}: {old!r} is not in {rel} exactly once; update it"
        path.write_text(text.replace(old, new), encoding="utf-8")
    return root
