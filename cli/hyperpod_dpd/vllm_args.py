"""What a vLLM container serves, read from its command line: the model path and the name clients send."""

from __future__ import annotations

import shlex
from typing import Any


def _argv(container: Any) -> list[str]:
    """The container's command line, ``command`` then ``args``. Whether the operator passes ``worker.args`` as the
    container's ``args`` or inside a shell line is unpublished [I]: an element with blanks is split as a shell
    would."""
    argv: list[str] = []
    for item in [*(container.command or []), *(container.args or [])]:
        try:
            argv += shlex.split(item) if any(c.isspace() for c in item) else [item]
        except ValueError:  # unbalanced quotes: not a shell line after all
            argv.append(item)
    return argv


def model_arg(container: Any) -> str:
    """The model vLLM serves, from a container's command line; "" when it cannot be read.

    vLLM's ``serve`` subcommand takes the model as a positional ``model_tag`` that wins over ``--model``
    (``vllm/entrypoints/cli/serve.py``, ``ServeSubcommand.cmd``: "If model is specified in CLI (as positional arg), it
    takes precedence", ``args.model = args.model_tag``): the token right after ``serve`` when it is not an option.
    Else the last ``--model`` (argparse keeps the last of a repeated option). A positional placed after options is
    not told apart from an option's value without vLLM's parser [I]: the operator's command line is unpublished."""
    return model_of_argv(_argv(container))


def model_of_argv(argv: list[str]) -> str:
    """:func:`model_arg` of a command line given as a list (a container's, or ``worker.args`` of a manifest)."""
    for i, arg in enumerate(argv[:-1]):
        if arg == "serve" and not argv[i + 1].startswith("-"):
            return argv[i + 1]
    found = ""
    for i, arg in enumerate(argv):
        if arg == "--model" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--model="):
            found = arg.split("=", 1)[1]
    return found


def served_name_arg(container: Any) -> str:
    """The first value of vLLM's ``--served-model-name`` (the name clients send; vLLM 0.19 ``ModelConfig.
    served_model_name``: "the model name(s) used in the API"), "" when the command line has none."""
    argv = _argv(container)
    found = ""
    for i, arg in enumerate(argv):
        if arg == "--served-model-name" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            found = argv[i + 1]
        elif arg.startswith("--served-model-name="):
            found = arg.split("=", 1)[1]
    return found
