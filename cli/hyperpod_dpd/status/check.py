"""One row of ``hyperpod-dpd status``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

State = Literal["ok", "warn", "fail"]


@dataclass(frozen=True, kw_only=True)
class Check:
    section: str
    name: str
    state: State
    detail: str
    next_step: str = ""
    blocks_serving: bool = True
    """A failed check with this flag means the endpoint cannot serve."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What the row is about, as data for ``--json`` (the skew rows: each role's image, model path and revision)."""
    endpoint: str | None = None
    """The endpoint (``endpoints[].name``) the row is about; ``None`` for the cluster's and the deployment's rows."""
