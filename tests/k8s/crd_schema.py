"""Validate custom resources against a CRD's ``openAPIV3Schema`` the way the API server would (a test helper).

The typed bindings (``cdk8s import``) check field names and required fields when a manifest is built, not
``pattern``, ``enum``, ``minimum`` or list-map keys; this checks the synthesized manifests for those. It lives with
the tests because no existing validator takes a CRD: kubernetes-validate reads only the Kubernetes schemas it
bundles (``kubernetes_validate.utils.validate``: ``kubernetes-json-schema/v<version>-local[-strict]/``).

``jsonschema`` knows JSON Schema, not the Kubernetes dialect. :func:`to_json_schema` translates the
structural-schema extensions so that a plain Draft 7 validator gives the API server's verdict:

* ``nullable: true`` -> the type also admits ``null``;
* ``x-kubernetes-int-or-string`` -> integer or string (a ``pattern`` then applies to strings only);
* objects with ``properties`` reject unknown fields (``kubectl --validate=strict``), unless
  ``x-kubernetes-preserve-unknown-fields`` is set;
* ``format: int32`` / ``int64`` -> integer bounds;
* ``x-kubernetes-list-type: set`` -> unique items; ``map`` with ``x-kubernetes-list-map-keys`` -> unique
  keys (checked by :func:`validate`, JSON Schema cannot say it);
* ``metadata.name`` / ``namespace`` must be DNS names.

CEL rules (``x-kubernetes-validations``) cannot be evaluated here: :func:`crd_schemas` refuses a CRD that
has them, so a pin update that adds them fails loudly instead of silently passing.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

#: libyaml's safe loader when PyYAML has it (same documents, ~10x faster on the operator's 0.5 MB CRD files).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": _DNS_SUBDOMAIN},
        "namespace": {"type": "string", "maxLength": 63, "pattern": _DNS_LABEL},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

Key = tuple[str, str]
"""``(apiVersion, kind)``."""


def _walk(node: dict[str, Any]) -> None:
    if "x-kubernetes-validations" in node:
        raise ValueError("CEL rules (x-kubernetes-validations) are not supported by this validator")
    if node.get("x-kubernetes-int-or-string"):
        node.pop("type", None)
        node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in node:
        node["type"] = [node["type"], "null"]
    if node.get("format") in _INT_BOUNDS:
        low, high = _INT_BOUNDS[node["format"]]
        node.setdefault("minimum", low)
        node.setdefault("maximum", high)
    if node.get("x-kubernetes-list-type") == "set":
        node["uniqueItems"] = True
    if (node.get("type") == "object" and "properties" in node
            and not node.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in node):
        node["additionalProperties"] = False
    for key in ("properties", "patternProperties"):
        for child in node.get(key, {}).values():
            _walk(child)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            _walk(node[key])
    for key in ("allOf", "anyOf", "oneOf"):
        for child in node.get(key, []):
            _walk(child)


def to_json_schema(open_api_v3_schema: dict[str, Any]) -> dict[str, Any]:
    """A Draft 7 JSON Schema equivalent to a CRD version's structural ``openAPIV3Schema``."""
    schema = copy.deepcopy(open_api_v3_schema)
    _walk(schema)
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    props["metadata"] = _METADATA
    schema["additionalProperties"] = False
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    return schema


def crd_schemas(path: str | Path) -> dict[Key, dict[str, Any]]:
    """``{(apiVersion, kind): openAPIV3Schema}`` for every served version of every CRD in a file."""
    out: dict[Key, dict[str, Any]] = {}
    for doc in yaml.load_all(Path(path).read_text(encoding="utf-8"), Loader=_YAML_LOADER):
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        for version in spec["versions"]:
            if version.get("served", True):
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                out[key] = version["schema"]["openAPIV3Schema"]
    return out


def _list_map_errors(node: dict[str, Any], value: Any, path: str) -> Iterator[str]:
    """Duplicate keys in ``x-kubernetes-list-type: map`` lists (e.g. two env vars with one name)."""
    if isinstance(value, dict):
        for name, child in node.get("properties", {}).items():
            if name in value:
                yield from _list_map_errors(child, value[name], f"{path}.{name}" if path else name)
    elif isinstance(value, list):
        keys = node.get("x-kubernetes-list-map-keys")
        if node.get("x-kubernetes-list-type") == "map" and keys:
            seen: set[tuple[Any, ...]] = set()
            for item in value:
                k = tuple(item.get(key) for key in keys) if isinstance(item, dict) else (item,)
                if k in seen:
                    yield f"{path}: duplicate entry with {dict(zip(keys, k, strict=True))}"
                seen.add(k)
        if isinstance(node.get("items"), dict):
            for i, item in enumerate(value):
                yield from _list_map_errors(node["items"], item, f"{path}[{i}]")


class CrdValidator:
    """Validates objects whose ``(apiVersion, kind)`` one of the loaded CRDs defines."""

    def __init__(self, schemas: dict[Key, dict[str, Any]]) -> None:
        self._raw = schemas
        self._validators = {
            key: jsonschema.Draft7Validator(to_json_schema(schema)) for key, schema in schemas.items()
        }

    @classmethod
    def from_file(cls, path: str | Path) -> CrdValidator:
        return cls(crd_schemas(path))

    def knows(self, obj: dict[str, Any]) -> bool:
        return (obj.get("apiVersion"), obj.get("kind")) in self._validators

    def errors(self, obj: dict[str, Any]) -> list[str]:
        """Every problem as ``<path>: <message>``; empty when the object is valid."""
        key = (obj.get("apiVersion"), obj.get("kind"))
        validator = self._validators.get(key)  # type: ignore[arg-type]
        if validator is None:
            return [f"no CRD schema for apiVersion={key[0]!r} kind={key[1]!r}"]
        found = [
            f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
        ]
        found.extend(_list_map_errors(self._raw[key], obj, ""))  # type: ignore[index]
        return found
