"""How every command writes its output, so that it can be read by a person, a pipe and a program alike.

* Data go to stdout: a table (Rich) for a person, or with ``--output json|yaml`` (``--json``) one document that
  starts with ``schema_version`` (:data:`SCHEMA_VERSION`); progress and logs go to stderr.
* A console whose stream is not a terminal is as wide as its longest line (no truncation, nothing wrapped
  mid-word), whatever width the terminal beside it has or ``$COLUMNS`` says; on a terminal, the terminal's width.
* Colour follows Rich's rules: ``NO_COLOR`` (no-color.org) turns it off, ``FORCE_COLOR`` on; never on a pipe.

Imports no Rich and no YAML until something is rendered (``--help`` imports this module).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from hyperpod_core.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

#: Version of the JSON/YAML documents the commands print. Bumped when a field changes meaning or goes away
#: (adding a field does not bump it).
SCHEMA_VERSION = 1
#: Width of a console that does not write to a terminal: wide enough never to wrap a line of ours.
UNBOUNDED_WIDTH = 10_000


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"

    @property
    def data(self) -> bool:
        """A document for programs (JSON or YAML), not a table."""
        return self is not OutputFormat.table


def output_format(output: OutputFormat | None, as_json: bool = False) -> OutputFormat:
    """The format ``--output`` (or its alias ``--json``) asks for; ``table`` by default."""
    if as_json and output is not None and output is not OutputFormat.json:
        raise UsageError(f"--json means --output json, got --output {output.value} as well")
    return OutputFormat.json if as_json else (output or OutputFormat.table)


def document(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` as the printed document: ``schema_version`` first."""
    return {"schema_version": SCHEMA_VERSION, **data}


def emit(data: Mapping[str, Any], fmt: OutputFormat) -> None:
    """Print ``data`` on stdout as JSON or YAML (``fmt`` must not be ``table``)."""
    doc = document(data)
    if fmt is OutputFormat.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(json.loads(json.dumps(doc, default=str)), sort_keys=False,
                                        allow_unicode=True, width=UNBOUNDED_WIDTH))
    elif fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        raise ValueError(f"emit() prints data formats, got {fmt.value}")


def console(*, stderr: bool = False, **options: Any) -> Console:
    """A Rich console on stdout (or stderr): the terminal's width on a terminal, unbounded otherwise."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    try:
        terminal = stream.isatty()
    except ValueError:  # closed
        terminal = False
    width = options.pop("width", None) if terminal else UNBOUNDED_WIDTH
    return Console(stderr=stderr, width=width, **options)
