"""What a submission did that reaches into the grader, for the instructor: flagged, never scored.

The worker runs the submission in its own process, so code written against the grader (its
frames, its modules, its pipes, the machine's shared folders, other processes) can try to read
hidden inputs, forge the yes/no facts a probe reports, or leave something for the next worker.
The sandbox contains what it can; this module says who tried, the way a plagiarism tool says
who copied, with the lines that did it, and changes no score:

* ``scan``: the submission's module files, line by line, against ``PATTERNS`` (comments are
  skipped; a line may be flagged for several reasons). Nothing an exercise needs matches them;
  a match is a reason to read the code, not a verdict.
* what the sandbox observed (``grader/judge.py`` gathers it): processes or files a worker left
  behind in the machine's shared places, System V IPC objects, removed before the next worker.

The flags go to ``results.json``'s ``extra_data["flags"]`` (not shown to students) and to
``summary.md``'s "Submissions that reach into the grader".
"""

from __future__ import annotations

import re

#: (pattern, what it does). Word boundaries keep ``stack`` or ``modules`` in a name from matching.
PATTERNS = (
    (
        r"\bsys\._getframe\b|\binspect\.(stack|currentframe|getouterframes|getframeinfo)\b|"
        r"\.f_back\b|\.f_locals\b|\.f_globals\b|\btb_frame\b",
        "walks the call stack (the worker's frames)",
    ),
    (r"\bgc\.(get_objects|get_referrers|get_referents)\b", "walks the garbage collector's objects"),
    (r"\bsys\.modules\b", "reads or changes sys.modules"),
    (r"/proc/", "reads /proc"),
    (r"/dev/shm|/dev/mqueue|['\"]/tmp\b|['\"]/var/tmp\b", "uses the machine's shared folders"),
    (r"\bctypes\b|\bcffi\b", "calls C directly (ctypes)"),
    (r"\bsignal\.(signal|setitimer|alarm|pthread_kill|pthread_sigmask|sigwait)\b", "handles or sends signals"),
    (
        r"\bos\.(fork|forkpty|exec\w*|spawn\w*|posix_spawn\w*|setsid|setpgid|kill|killpg|_exit)\b|"
        r"\bsubprocess\b|\bmultiprocessing\b|\bpty\b",
        "starts, leaves or signals processes",
    ),
    (
        r"\b(import|from)\s+(grader|probes|wire|worker)\b|\b(probes|wire|worker)\.(call|bind|PROBES|"
        r"_restore|dumps|loads|_Pipe|_serve)\b",
        "names the grader's own modules",
    ),
    (r"\bos\.(write|dup2?|fdopen)\(\s*\d|/proc/self/fd", "writes to a file descriptor it was not given"),
    (r"\bsocket\b|\bmmap\b|\bsysv_ipc\b|\bposix_ipc\b|\bshm_open\b", "opens sockets or shared memory"),
    (r"\bbuiltins\.\w+\s*=|__builtins__\[", "replaces Python's builtins"),
)
_COMPILED = [(re.compile(p), what) for p, what in PATTERNS]
MAX_FLAGS = 50


def scan(files: dict[str, bytes]) -> list[dict]:
    """``[{"module", "line", "text", "what"}]`` for every line of ``files`` that matches."""
    found = []
    for module, data in sorted(files.items()):
        text = data.decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            for pattern, what in _COMPILED:
                if pattern.search(line):
                    found.append({"module": module, "line": number, "text": line.strip()[:200], "what": what})
                    if len(found) >= MAX_FLAGS:
                        return found
    return found


def describe(flag: dict) -> str:
    if "module" in flag:
        return f"{flag['module']}.py:{flag['line']}: {flag['what']}: {flag['text']}"
    return f"the sandbox observed: {flag['observed']}"
