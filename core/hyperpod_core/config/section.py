"""The base of every section of the config, and the merge that keeps a section's defaults where a file names
only some of its fields."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    # strict: no coercion, so `true` is not a replica count, "8" not a number, "yes" not a boolean; no inf/nan
    # in any float. Sequences arrive as tuples (parse_config): declare sequence fields as tuple[...], not list.
    # validate_default: a default passes the same field rules as a value from the file.
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True, strict=True,
                              allow_inf_nan=False, validate_default=True, use_attribute_docstrings=True)


def merge_defaults(model: type[BaseModel], data: Any, fields: tuple[str, ...]) -> Any:
    """Fill the keys a user left out of the sub-mappings ``fields`` from the model's default instances.

    Without this, ``endpoint.prefill: {max_num_seqs: 8}`` would build a fresh ``RoleConfig`` and silently drop
    the role's default ``extra_args`` (``--enforce-eager``). Unknown keys still reach the model and fail there.
    """
    if not isinstance(data, dict):
        return data
    merged = dict(data)
    for name in fields:
        given = merged.get(name)
        default = model.model_fields[name].default
        if isinstance(given, dict) and isinstance(default, BaseModel):
            merged[name] = {**default.model_dump(exclude_unset=True), **given}
    return merged
