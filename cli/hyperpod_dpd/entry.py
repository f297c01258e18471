"""The console script ``hyperpod-dpd``: a cached ``--help`` page is printed before Typer is even imported.

Everything else goes to :func:`hyperpod_dpd.app.main`.
"""

from __future__ import annotations

import shutil
import sys

from hyperpod_dpd import help_cache


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    path = help_cache.help_path(args)
    if path is not None:
        text = help_cache.load(path, shutil.get_terminal_size().columns)
        if text is not None:
            sys.stdout.write(text)
            return
    from hyperpod_dpd.app import main as run

    run(args)
