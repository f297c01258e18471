"""The revision store: ``<environment folder>/rollouts/<endpoint>.json``, one file per endpoint.

It holds what ``rollout --undo`` returns to and what an interrupted rollout resumes:

* ``current``: the revision that serves (its number, the InferenceEndpointConfig's name, the manifest applied);
* ``previous``: the one before it (``--undo`` returns to it);
* ``last``: the highest revision number given out (the next blue/green revision is ``<endpoint>-r<last + 1>``;
  numbers are never reused, so two revisions never share a name);
* ``operation``: the rollout under way: its kind, the revision it leaves (``source``) and the one it makes
  (``target``), its steps and how many of them are finished. Each finished step is written at once (atomically:
  :func:`hyperpod_core.atomic.write_text_atomic`), so Ctrl-C leaves the store at the last finished step.

The first rollout of an endpoint applied by hand (``kubectl apply -f dist/.../endpoint/``) records the live object as
revision 0 under its own name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from hyperpod_core.atomic import write_text_atomic
from hyperpod_core.errors import UsageError

if TYPE_CHECKING:
    from hyperpod_core.config.spec import EndpointSpec
    from hyperpod_core.environment import Environment

#: The store's folder in the environment folder.
STORE_DIR: Final = "rollouts"
SCHEMA_VERSION: Final = 1


@dataclass(frozen=True, kw_only=True)
class Revision:
    number: int
    name: str
    """The InferenceEndpointConfig's name: ``<endpoint>`` or ``<endpoint>-r<N>``."""
    manifest: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "name": self.name, "manifest": self.manifest}

    @classmethod
    def from_json(cls, data: Any) -> Revision | None:
        if data is None:
            return None
        return cls(number=int(data["number"]), name=str(data["name"]), manifest=dict(data["manifest"]))


@dataclass(frozen=True, kw_only=True)
class Operation:
    kind: str
    """A plan's kind (``create``, ``blue-green``, ``in-place``, ``replace``, ``none``) or ``discard`` (undoing an
    unfinished blue/green: the Service back to the source, the new revision deleted)."""
    undo: bool
    source: Revision | None
    target: Revision
    steps: tuple[str, ...]
    """``<action> <name>`` (:mod:`hyperpod_dpd.rollout.executor`)."""
    done: int = 0
    """How many of :attr:`steps` are finished."""
    keep_previous: bool = False
    """Finishing it leaves the record's previous revision as it is: an operation that undoes an unfinished one, whose
    source (the failed target) never served and is nothing to return to."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "undo": self.undo, "source": self.source.to_json() if self.source else None,
                "target": self.target.to_json(), "steps": list(self.steps), "done": self.done,
                "keep_previous": self.keep_previous}

    @classmethod
    def from_json(cls, data: Any) -> Operation | None:
        if data is None:
            return None
        target = Revision.from_json(data["target"])
        assert target is not None
        return cls(kind=str(data["kind"]), undo=bool(data["undo"]), source=Revision.from_json(data["source"]),
                   target=target, steps=tuple(str(s) for s in data["steps"]), done=int(data["done"]),
                   keep_previous=bool(data.get("keep_previous", False)))


@dataclass(frozen=True, kw_only=True)
class Record:
    endpoint: str
    namespace: str
    last: int = 0
    current: Revision | None = None
    previous: Revision | None = None
    operation: Operation | None = None

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "endpoint": self.endpoint, "namespace": self.namespace,
                "last": self.last, "current": self.current.to_json() if self.current else None,
                "previous": self.previous.to_json() if self.previous else None,
                "operation": self.operation.to_json() if self.operation else None}

    @classmethod
    def from_json(cls, data: Any) -> Record:
        return cls(endpoint=str(data["endpoint"]), namespace=str(data["namespace"]), last=int(data["last"]),
                   current=Revision.from_json(data.get("current")), previous=Revision.from_json(data.get("previous")),
                   operation=Operation.from_json(data.get("operation")))

    def step_done(self) -> Record:
        """The operation's next step finished."""
        assert self.operation is not None
        return replace(self, operation=replace(self.operation, done=self.operation.done + 1))

    def finished(self) -> Record:
        """The record once the operation's last step is done: the target serves, the source is the previous
        revision (a ``discard`` and a ``none`` leave both as they were; :attr:`Operation.keep_previous` keeps the
        previous one)."""
        op = self.operation
        assert op is not None
        if op.kind in ("discard", "none"):
            return replace(self, operation=None)
        previous = self.previous if op.keep_previous else op.source or self.previous
        return replace(self, current=op.target, previous=previous, operation=None)


@dataclass(frozen=True)
class RevisionStore:
    path: Path

    @classmethod
    def of(cls, workdir: Path, endpoint: str) -> RevisionStore:
        return cls(workdir / STORE_DIR / f"{endpoint}.json")

    def read(self) -> Record | None:
        """The record, ``None`` when there is none yet; a file that is not one is bad input (one line)."""
        if not self.path.is_file():
            return None
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("schema_version") != SCHEMA_VERSION:
                raise ValueError(f"schema_version {data.get('schema_version')!r}")
            return Record.from_json(data)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(f"{self.path} is not a revision store of hyperpod-dpd rollout "
                             f"(schema_version {SCHEMA_VERSION}): {exc}; move it aside to start over") from None

    def write(self, record: Record) -> None:
        write_text_atomic(self.path, json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")


def live_name(env: Environment, spec: EndpointSpec) -> str:
    """The InferenceEndpointConfig that serves ``spec``'s endpoint: the revision store's current revision
    (``<endpoint>-r<N>`` after a blue/green), else the endpoint's own name (nothing rolled out yet). What ``status``,
    ``smoke``, ``logs`` and ``bench`` read and act on; an unfinished rollout's current revision is the one it leaves,
    until its last step is done (``status`` shows the rollout's row)."""
    record = RevisionStore.of(env.workdir, spec.name).read()
    return record.current.name if record is not None and record.current is not None else spec.name
