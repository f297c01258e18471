"""The console script ``hyperpod-dpd`` (pyproject.toml ``[project.scripts]``): :func:`hyperpod_dpd.app.main`."""

from hyperpod_dpd.app import main

__all__ = ["main"]
