"""What runs inside the sandbox, beside the submission: the worker (``worker.py``), the only
request and answer format between it and the judge (``wire.py``: ``Request`` and the framer) and
what is removed between two exercises' processes (``cleanup.py``). Of the grader outside this
folder they import only what the exercises' probes import (``grader/probes.py``,
``grader/checks.py``, ``grader/exercises/``; besides that, the standard library and torch): the
judge copies this folder whole into every worker's box (``grader.workers.runtime_files``)."""

#: Where the worker lies in a box's ``runtime/`` folder (``python -I -B runtime/WORKER``).
WORKER = "grader/runtime/worker.py"
