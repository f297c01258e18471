"""Reading a config file: a hardened YAML loader, then the model; every failure is one line.

The loader refuses what YAML 1.1 would silently turn into something else (``yes`` as a boolean, sexagesimal
numbers, timestamps), duplicate keys, alias bombs, deep nesting and huge or non-UTF-8 files; pydantic's errors
become one line naming the field (dotted path with indices), what is allowed and the bad value.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from hyperpod_core.config import rules
from hyperpod_core.config.model import Config
from hyperpod_core.config.types import RULE_ERROR
from hyperpod_core.errors import ConfigError, shown

#: Largest config file read (the default is ~3 KB); anything bigger is not a config.
MAX_CONFIG_BYTES = 1 << 20
#: Most YAML nodes a config may expand to, aliases followed (the default has ~150). Stops alias bombs
#: ("billion laughs") before anything walks the expanded document.
MAX_YAML_NODES = 20_000
#: Deepest nesting a config may have (the default has 5 levels).
MAX_YAML_DEPTH = 64


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with YAML 1.2 core-schema scalars: only ``true``/``false`` are booleans (not
    ``yes``, ``on``, ``y``), no sexagesimal or legacy-octal integers, no timestamps (strings stay strings)."""

    yaml_implicit_resolvers: dict = {}  # PyYAML's class-level registry, filled below
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        """Refuse nesting deeper than :data:`MAX_YAML_DEPTH` as soon as the parser reaches it."""
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise ConfigError(f"config must nest at most {MAX_YAML_DEPTH} levels deep, got more "
                                  f"(line {self.peek_event().start_mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
     "-+0123456789."),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:merge", r"^(?:<<)$", "<"),
):
    _ConfigLoader.add_implicit_resolver(_tag, re.compile(_pattern, re.ASCII), list(_first))


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text[:2] in ("0o", "0x"):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


def _construct_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    text = str(loader.construct_scalar(node))
    if text.lower() not in ("true", "false"):  # an explicit !!bool tag on "yes"
        raise yaml.constructor.ConstructorError(None, None, f"{shown(text)} is not true or false", node.start_mark)
    return text.lower() == "true"


_ConfigLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_ConfigLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)


def _key_path(path: tuple[Any, ...]) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")


def _check_nodes(root: yaml.Node) -> None:
    """Refuse duplicate keys (naming the key and both lines) and documents that expand past
    :data:`MAX_YAML_NODES`. Iterative, so it costs at most that many steps whatever the input."""
    stack: list[tuple[yaml.Node, tuple[Any, ...]]] = [(root, ())]
    count = 0
    while stack:
        node, path = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise ConfigError(f"config must expand to at most {MAX_YAML_NODES} YAML nodes (aliases followed), "
                              "got more (an alias bomb?)")
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                line = key_node.start_mark.line + 1
                if key is not None and key != "<<" and key in seen:
                    raise ConfigError(f"{_key_path((*path, key))} must appear once, got it at lines "
                                      f"{seen[key]} and {line} (YAML keeps only the last one)")
                if key is not None:
                    seen[key] = line
                stack.append((value_node, (*path, key if key is not None else "?")))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((child, (*path, i)) for i, child in enumerate(node.value))


def _freeze(value: Any) -> Any:
    """Lists become tuples (the strict model takes sequences as tuples); mappings are copied."""
    if isinstance(value, dict):
        return {k: _freeze(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _one_line(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    loc = _key_path(tuple(err["loc"]))
    if err["type"] == "extra_forbidden":
        return f"{shown(loc, 120)[1:-1]} is not a known setting (check the spelling; see docs/config.md)"
    if err["type"] == "missing":
        return f"{loc} is required"
    if err["type"] == RULE_ERROR:  # a field type's rule (config/types.py): our wording, as the cross-field rules
        ctx = err["ctx"]
        return f"{loc} {ctx['allowed']}, got {shown(ctx['value'])}{ctx['detail']}"
    msg = err["msg"].removeprefix("Value error, ")
    return f"{loc or 'config'}: {msg}, got {shown(err.get('input'))}"


def parse_config(data: Any) -> Config:
    """Validate a mapping into a :class:`Config`: every field against its type, then the rules that compare fields
    (:func:`hyperpod_core.config.rules.check`); raises :class:`ConfigError` with one line."""
    if not isinstance(data, dict):
        raise ConfigError(f"config must be a YAML mapping, got {type(data).__name__}")
    try:
        config = Config.model_validate(_freeze(data))
        rules.check(config)
        return config
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None
    except RecursionError:
        raise ConfigError("config is nested too deeply") from None


def load_yaml(text: str, source: str) -> Any:
    """Parse config YAML strictly (see :class:`_ConfigLoader`, :func:`_check_nodes`); one-line errors."""
    loader: _ConfigLoader | None = None
    try:
        loader = _ConfigLoader(text)  # the reader already rejects control characters here
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None)
        raise ConfigError(f"config file {source} is not valid YAML{where}"
                          + (f": {shown(str(problem), 120)[1:-1]}" if problem else "")) from None
    except RecursionError:
        raise ConfigError(f"config file {source} is nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file (UTF-8, at most :data:`MAX_CONFIG_BYTES`)."""
    p = Path(path)
    source = shown(str(p), 200)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"config file {source} cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {source} must be at most {MAX_CONFIG_BYTES} bytes, got more")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {source} must be UTF-8 text, got byte 0x{raw[exc.start]:02x} at offset "
                          f"{exc.start}") from None
    data = load_yaml(text, source)
    return parse_config(data if data is not None else {})
