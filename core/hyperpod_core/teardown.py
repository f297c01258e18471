"""How the synthesizing entry points end: their clean-ups run, the interpreter's teardown does not.

``app.py``, the main job (``./scripts/synth``, ``hyperpod-dpd synth``) and the cdk8s app end with
:func:`fast_exit`. Freeing aws-cdk-lib's thousands of module objects takes ~0.4 s of a synth (measured:
``python -O app.py`` from its last write to the exit its parent sees, 0.40 s with the interpreter's teardown,
0.04 s with this one). Leaving with a bare ``os._exit`` skipped more than that: the exit handlers, among them
the one jsii registers to stop its kernel and remove the folder it unpacks its runtime into (2.2 MB under the
temp folder, ``jsii/_kernel/providers/process.py``: ``atexit.register(self.stop)``), so every synth left that
folder behind. Here the exit handlers run (jsii's, and the Lambda staging folder's of
:mod:`hyperpod_constructs.lambda_provider`), then the process ends: the same clean-ups as a normal exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from hyperpod_core.errors import guarded


def fast_exit(fn: Callable[[], object]) -> NoReturn:
    """Run ``fn`` under :func:`hyperpod_core.errors.guarded`, then :func:`exit_now` with its exit code.

    A ``SystemExit`` maps as the interpreter maps it: an int or ``None`` is the code, anything else is printed
    on stderr and exits 1."""
    try:
        guarded(fn)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    exit_now(code)


def exit_now(code: int) -> NoReturn:
    """Flush the standard streams, run the exit handlers (``atexit``), end the process with ``code``.

    What a normal exit does, minus freeing every object: jsii's handler stops its node kernel (it ends when its
    stdin closes and removes its own ``jsii-kernel-*`` folder; ~20 ms) and removes jsii's runtime folder."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (``| head``): nothing more to write there
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(code)
