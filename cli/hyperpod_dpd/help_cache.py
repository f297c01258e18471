"""Rendered ``--help`` pages, kept on disk until any code they were rendered from changes.

Rendering a subcommand's help means importing its module, which imports the config model (pydantic), Rich
and the rest: ~0.5 s. The page itself depends only on code, so it is cached, and validated the way Python
validates bytecode: each entry lists every module file that was loaded when it was rendered (ours, Typer,
pydantic, ...) with its modification time and size, and a single difference makes the entry stale. The key
holds what else shapes the page: the environment (``sys.prefix``), the Python version, the command path and
the terminal width.

Where: ``$HYPERPOD_DPD_HELP_CACHE`` (a folder, or ``off``), else ``$XDG_CACHE_HOME/hyperpod-dpd/help``, else
``~/.cache/hyperpod-dpd/help``. A folder that cannot be written is skipped silently: the cache only saves time.

Imports only the standard library, and only cheap modules: it runs before anything else on every ``--help``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Collection
from pathlib import Path

CACHE_ENV = "HYPERPOD_DPD_HELP_CACHE"
HELP_OPTIONS = ("-h", "--help")
#: Bump when the entry format changes.
FORMAT = 1


def help_path(args: list[str], known: Collection[str] | None = None) -> list[str] | None:
    """The command path whose help ``args`` ask for (``[]``: the top level), or ``None`` when they do not ask
    for help, or name a command that is not in ``known`` (the parser then says what is wrong)."""
    words = args[:args.index("--")] if "--" in args else args
    asked = next((i for i, w in enumerate(words) if w in HELP_OPTIONS), None)
    if asked is None:
        return None
    first = next((i for i, w in enumerate(words) if not w.startswith("-")), None)
    if first is None or first > asked:  # the top level's options take no values: --help before any command
        return []
    return [words[first]] if known is None or words[first] in known else None


def folder() -> Path | None:
    """The cache folder, or ``None`` when the cache is off."""
    given = os.environ.get(CACHE_ENV)
    if given == "off":
        return None
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hyperpod-dpd" / "help"


def _entry(path: list[str], width: int) -> Path | None:
    where = folder()
    if where is None:
        return None
    key = json.dumps([FORMAT, sys.prefix, sys.version, path, width])
    return where / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def _stamp(file: str) -> list[int] | None:
    try:
        st = os.stat(file)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def load(path: list[str], width: int) -> str | None:
    """The cached page for ``hyperpod-dpd <path> --help`` at ``width`` columns, or ``None`` (absent or stale)."""
    entry = _entry(path, width)
    if entry is None:
        return None
    try:
        data = json.loads(entry.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    sources = data.get("sources", {})
    if not sources or any(_stamp(file) != stamp for file, stamp in sources.items()):
        return None
    text: str = data["text"]
    return text


def save(path: list[str], width: int, text: str) -> None:
    """Keep ``text`` with the stamps of every module file loaded now (call right after rendering it)."""
    entry = _entry(path, width)
    if entry is None:
        return
    files = {f for m in list(sys.modules.values()) if isinstance(f := getattr(m, "__file__", None), str)}
    sources = {f: s for f in sorted(files) if (s := _stamp(f)) is not None}
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"sources": sources, "text": text}), encoding="utf-8")
        os.replace(tmp, entry)
    except OSError:
        pass
