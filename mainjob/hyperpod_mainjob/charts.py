"""``python -m hyperpod_mainjob.charts [--fetch]``: the pinned HyperPod chart artifacts
(:mod:`hyperpod_core.artifacts`), checked, or fetched when missing (``./scripts/setup`` runs it with ``--fetch``
before every main job).

Prints the folder of each chart found. With ``--fetch``, a chart that cannot be fetched is named in one warning
line on stderr (exit 0: synth still works, CloudFormation refuses to deploy until the charts are there); without
it, a missing or altered chart is one error line, exit 2.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from hyperpod_core import pins
from hyperpod_core.artifacts import CHART_CACHE_ENV, chart_cache_dir, fetch_chart, verified_chart_dir
from hyperpod_core.errors import ConfigError, guarded, run_app

PROG = "python -m hyperpod_mainjob.charts"
app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help="Fetch (or check) the pinned HyperPod chart artifacts.")
def _charts(fetch: Annotated[bool, typer.Option("--fetch", help="download what is missing (set-up only)")] = False
            ) -> None:
    missing, first_error = [], None
    for chart in pins.CHART_ARTIFACTS:
        try:
            path = fetch_chart(chart) if fetch else verified_chart_dir(chart)
        except ConfigError as exc:
            if not fetch:
                raise
            first_error = first_error or str(exc)
            path = None
        if path is None:
            missing.append(chart.name)
        else:
            print(path)
    if missing:
        # One line (set-up runs before every main job): what is missing, why, and what it means.
        why = f" ({first_error})" if first_error else ""
        print(f"[setup] warning: Helm charts not in {chart_cache_dir()}: {', '.join(missing)}{why}. Synth still "
              "works, but CloudFormation will refuse to deploy until ./scripts/setup has fetched them "
              f"(or {CHART_CACHE_ENV} points at a directory holding them).", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    run_app(app, argv, PROG)


if __name__ == "__main__":
    guarded(main)
