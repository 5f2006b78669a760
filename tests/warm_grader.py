"""``python -m grader ...`` for many runs, fast: a warm process (torch and the grader imported)
forks a child per run, which runs ``grader.__main__.main(argv)`` in its own session with the
run's working folder, environment and output file, as a new ``python -m grader`` process would.

What differs from a fresh interpreter is only what the judge process had imported before it
started grading; everything it does from there (drawing inputs, the canary, the sandboxed
workers, the report) is the same code run the same way. Used by the adversarial corpus for the
runs of the repository's own grader (a copy of the repository with a defence switched off is
run as a real ``python -m grader``).
"""

from __future__ import annotations

import json
import subprocess
import sys

from coursekit.impl import REPO_ROOT

SERVER = r"""
import json, os, signal, sys, time, traceback
import torch  # noqa: F401 - warm for every child
import grader.__main__ as cli
import grader.judge, grader.checks, grader.exercises, grader.probes, grader.results  # noqa: F401

grader.exercises.load_probes()
if grader.exercises.has_hidden_checks():
    grader.exercises.hidden_checks()
import grader.sandbox, grader.submission, grader.secret, grader.text, grader.runtime.wire  # noqa: F401
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.chdir(job["cwd"])
            os.environ.clear()
            os.environ.update(job["env"])
            import tempfile
            tempfile.tempdir = None  # read TMPDIR again, as a new process would
            code = cli.main(job["argv"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code if isinstance(code, int) else 1)
    start, killed = time.monotonic(), False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > job["bound_s"]:
            killed = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            _, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.02)
    print(json.dumps({"returncode": "killed" if killed else os.waitstatus_to_exitcode(status),
                      "wall_s": time.monotonic() - start, "max_rss_mb": usage.ru_maxrss / 1024}),
          flush=True)
"""


class WarmGrader:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER], cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def run(self, argv: list[str], cwd: str, env: dict[str, str], log: str, bound_s: float) -> dict:
        """Like ``python -m grader *argv`` with that working folder and environment, its output
        in ``log``: its exit status (or ``"killed"`` past ``bound_s``), wall time and peak memory."""
        job = {"argv": argv, "cwd": cwd, "env": env, "log": log, "bound_s": bound_s}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"the warm grader died (exit code {self.proc.wait()})")
        return json.loads(reply)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
