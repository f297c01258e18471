"""What an entry point run in the test process must show to look like its own process on stderr.

pytest keeps two things a real process prints on stderr to itself: warnings (recorded per test) and log records
(its handlers on the root logger, so ``logging``'s last-resort handler never writes). A test that asserts "stderr
holds our one line" in process must see both, or it proves less than the same assertion on a subprocess.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import logging
import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

#: Hidden in a process started without -W (Python's default warning filters, ``sys.warnoptions`` empty).
_HIDDEN_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def _reaches_last_resort(record: logging.LogRecord) -> bool:
    """Whether a process of its own would print ``record`` through ``logging.lastResort``: no logger between it
    and the root has a handler (urllib3, for one, gives its logger a NullHandler). The root's handlers are
    pytest's here; our code configures no logging, so in its own process the root has none."""
    logger = logging.getLogger(record.name)
    while logger is not logging.root:
        if logger.handlers:
            return False
        if not logger.propagate or logger.parent is None:
            return True
        logger = logger.parent
    return True


@contextlib.contextmanager
def shown_warnings(stream: TextIO) -> Iterator[None]:
    """Warnings and log records of WARNING and above are written to ``stream`` as a plain process prints them
    (``warnings.formatwarning``; ``logging.lastResort``'s bare message)."""
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(_reaches_last_resort)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        root.removeHandler(handler)
    for w in caught:
        if not issubclass(w.category, _HIDDEN_BY_DEFAULT):
            stream.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line))


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """A hang prints every thread's stack and ends the test process after ``seconds`` (what a subprocess's
    ``timeout=`` bounded before)."""
    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.__stderr__)  # not the redirected stream
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def run_entry_point(fn: Callable[[], object], argv: list[str], *, cwd: Path,
                    env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``fn`` as its process would run it, in this process: ``sys.argv`` and ``env`` set, from ``cwd``, stdin not a
    terminal (like ``stdin=DEVNULL``), stdout and stderr captured with :func:`shown_warnings`, bounded by
    :func:`time_limit`. The exit code as the interpreter makes it from ``SystemExit``; any other exception is the
    traceback a process would print, exit 1. One at a time: argv, env, cwd and the streams are the process's."""
    out, err, code = io.StringIO(), io.StringIO(), 0
    saved_argv, saved_stdin = sys.argv, sys.stdin
    saved_env = {k: os.environ.get(k) for k in (env or {})}
    sys.argv, sys.stdin = argv, io.StringIO("")
    os.environ.update(env or {})
    try:
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                shown_warnings(err), time_limit(180):
            try:
                fn()
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:  # the interpreter prints any other code, exit 1
                    print(exc.code, file=err)
                    code = 1
            except BaseException:  # what the process would print as a traceback
                err.write(traceback.format_exc())
                code = 1
    finally:
        sys.argv, sys.stdin = saved_argv, saved_stdin
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
