"""A fork server for mutation runs: pay for importing torch, pytest and hypothesis once per lane,
not once per mutant.

    python forkserver.py serve SOCKET            # in the tree under test (cwd), left running
    python forkserver.py run SOCKET [PYTEST ARGS...]   # cosmic-ray's test command: one pytest run

``serve`` imports the heavy packages and the repository's support code (coursekit, grader), never
the implementation under test, then forks one child per request; the child runs
``pytest.main(ARGS)`` in a fresh pytest session, so it imports the (mutated) module files from disk
as a separate ``python -m pytest`` would. Bytecode is never written (as cosmic-ray's own runner
sets PYTHONDONTWRITEBYTECODE), so a mutant is never run from a stale .pyc. ``run`` prints the
child's output and exits with pytest's exit status (124 if the child ran past --timeout).
"""

import json
import os
import socket
import sys

MARK = b"\n__forkserver_rc__ "


def run(sock_path, args):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    env = {k: v for k, v in os.environ.items() if k.startswith(("HYPOTHESIS", "OMP_", "CI"))}
    s.sendall(json.dumps({"args": args, "env": env}).encode() + b"\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    out, _, rc = data.rpartition(MARK)
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    return int(rc) if rc.strip().lstrip(b"-").isdigit() else 1


def serve(sock_path, timeout_s):
    import importlib
    import pkgutil
    import time

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    root = os.getcwd()
    sys.path.insert(0, root)
    import torch

    torch.set_num_threads(1)
    import numpy  # noqa: F401 - imported once, before the fork: every child starts warm
    import pytest  # noqa: F401 - imported once, before the fork: every child starts warm
    import hypothesis  # noqa: F401 - imported once, before the fork: every child starts warm
    import _pytest.python  # noqa: F401 - imported once, before the fork: every child starts warm

    for pkg in ("coursekit", "grader"):
        mod = importlib.import_module(pkg)
        for info in pkgutil.walk_packages(mod.__path__, pkg + "."):
            if info.name.startswith("grader.hidden") or info.name.endswith("__main__"):
                continue
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 - a module that needs more (a GPU, nbgrader) stays out
                pass
    import coursekit.impl

    assert os.path.realpath(coursekit.impl.REPO_ROOT) == os.path.realpath(root), coursekit.impl.REPO_ROOT
    under_test = sorted(
        k
        for k in sys.modules
        if k.split(".")[0] in ("solutions", "exercises", "mutant") or k.startswith("_launch_tax_impl_")
    )
    assert not under_test, f"the server imported code under test: {under_test}"
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(4)
    print(f"forkserver: ready on {sock_path} in {root}", flush=True)
    while True:
        conn, _ = srv.accept()
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            buf += chunk
        req = json.loads(buf)
        pid = os.fork()
        if pid == 0:
            srv.close()
            fd = conn.fileno()
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.environ.update(req["env"])
            importlib.invalidate_caches()
            rc = 3
            try:
                import pytest as _pytest_mod

                rc = int(_pytest_mod.main(req["args"]))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc)
        deadline = time.monotonic() + timeout_s
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                rc = 124
                break
            time.sleep(0.02)
        try:
            conn.sendall(MARK + str(rc).encode())
        except OSError:
            pass
        conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], float(os.environ.get("FORKSERVER_TIMEOUT", "110")))
    else:
        sys.exit(run(sys.argv[2], sys.argv[3:]))
