"""Run a rollout's steps (:func:`hyperpod_dpd.rollout.plan.steps_of`) one after the other, each recorded in the
revision store as soon as it is finished.

Every step prints ``[i/n] <what>`` when it starts and ``[i/n] done`` when it is finished; a wait prints each new state
it sees. Each step can run again after an interruption: ``apply`` keeps an InferenceEndpointConfig of this revision
that exists already, ``remove`` is done when the object is gone, ``service`` sets what the Service points at. When a
step fails or is interrupted (Ctrl-C), the store keeps the steps finished before it, and one line says how to resume
or undo (:func:`undo_operation`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_core.names import EndpointNames
from hyperpod_dpd.rollout.address import stable_service
from hyperpod_dpd.rollout.cluster import Cluster
from hyperpod_dpd.rollout.plan import revision_manifest, step_text, steps_of
from hyperpod_dpd.rollout.store import Operation, Record, Revision, RevisionStore


@dataclass(frozen=True, kw_only=True)
class Executor:
    cluster: Cluster
    store: RevisionStore
    endpoint: str
    namespace: str
    part_of: str
    """The deployment's name (the Service's ``app.kubernetes.io/part-of``)."""
    smoke: Callable[[str], None]
    """Smoke-test the InferenceEndpointConfig of that name (raises :class:`CommandFailed` when it fails)."""
    timeout_s: float
    selector: str
    """How to name the config again (``--env NAME``), for the resume line."""
    out: Callable[[str], None] = print

    def run(self, record: Record) -> Record:
        """Run the operation's steps from the first unfinished one; the finished record."""
        op = record.operation
        assert op is not None
        n = len(op.steps)
        self.store.write(record)
        for i in range(op.done, n):
            step = op.steps[i]
            text = step_text(step, self.endpoint, self.namespace)
            self.out(f"[{i + 1}/{n}] {text}")
            start = time.monotonic()
            try:
                self._do(step, op)
            except (CommandFailed, UsageError, KeyboardInterrupt) as exc:
                where = (f"rollout stopped in step {i + 1}/{n} ({text}), {i} done: 'hyperpod-dpd rollout "
                         f"{self.selector}' resumes, --undo returns to {op.source.name if op.source else 'nothing'}")
                if isinstance(exc, KeyboardInterrupt):
                    print(where, file=sys.stderr)
                    raise
                raise type(exc)(f"{exc}; {where}") from None
            record = record.step_done()
            self.store.write(record)
            self.out(f"[{i + 1}/{n}] done ({time.monotonic() - start:.0f} s)")
        record = record.finished()
        self.store.write(record)
        return record

    def _do(self, step: str, op: Operation) -> None:
        action, which, name = step.split(" ", 2)
        revision = op.target if which == "target" else op.source
        assert revision is not None and revision.name == name
        ns = self.namespace

        def waiting(state: str) -> None:
            self.out(f"      {name}: {state}")

        if action == "apply":
            self.cluster.create(revision.manifest)
        elif action == "update":
            self.cluster.update(revision.manifest)
        elif action == "ready":
            self.cluster.wait_ready(ns, name, self.timeout_s, waiting)
        elif action == "rolled":
            self.cluster.wait_ready(ns, name, self.timeout_s, waiting, rolled=revision.manifest["spec"])
        elif action == "smoke":
            self.smoke(name)
        elif action == "service":
            self.cluster.put_service(stable_service(self.endpoint, ns, EndpointNames(name=name, namespace=ns),
                                                    revision.number, self.part_of))
        elif action == "remove":
            self.cluster.delete(ns, name)
            self.cluster.wait_gone(ns, name, self.timeout_s, waiting)
        else:  # a store written by another version
            raise UsageError(f"{self.store.path}: unknown step {step!r}")


def start(record: Record, *, kind: str, undo: bool, source: Revision | None, target: Revision,
          keep_previous: bool = False) -> Record:
    """The record with a new operation (its target's number taken)."""
    steps = steps_of(kind, source.name if source else None, target.name)
    return replace(record, last=max(record.last, target.number), operation=Operation(
        kind=kind, undo=undo, source=source, target=target, steps=steps, keep_previous=keep_previous))


def undo_operation(record: Record, *, source_intact: bool = False) -> Record:
    """The record with the operation that undoes the unfinished one: a blue/green or a create is discarded (the
    Service back to the source, the new revision deleted) until the Service has moved; after that the new revision
    serves and the old one may be deleting, so the undo is refused (finish, then ``--undo`` brings the old spec back
    as a new revision). An in-place change goes back in place (the Deployments scale their old ReplicaSets up
    again); a replace replaces back (the source manifest applied again under its name, as a new revision number).
    Either keeps the record's previous revision: the failed target never served. ``source_intact``: the source
    still runs its own spec, not deleting (read from the cluster): an in-place change or replace with no finished
    step is then dropped, never undone by deleting what serves."""
    op = record.operation
    assert op is not None
    if op.kind == "discard":
        raise UsageError("an undo is under way already: run rollout without --undo to finish it")
    moved = next((i + 1 for i, s in enumerate(op.steps) if s.startswith("service ")), len(op.steps) + 1)
    if op.kind == "blue-green" and op.source is not None and op.done >= moved:
        raise UsageError(f"{op.target.name} serves already (the Service points at it) and {op.source.name} is being "
                         f"removed: run rollout without --undo to finish, then rollout --undo brings "
                         f"{op.source.name}'s spec back as a new revision")
    if op.kind in ("replace", "in-place") and op.done == 0 and source_intact:
        return replace(record, operation=None)
    if op.kind in ("blue-green", "create", "none") or op.source is None:
        if op.kind == "none":
            return replace(record, operation=None)
        return replace(record, operation=Operation(kind="discard", undo=True, source=op.source, target=op.target,
                                                   steps=steps_of("discard", op.source.name if op.source else None,
                                                                  op.target.name)))
    number = record.last + 1
    back = Revision(number=number, name=op.source.name,
                    manifest=revision_manifest(op.source.manifest, op.source.name, number))
    return start(replace(record, operation=None), kind="in-place" if op.kind == "in-place" else "replace", undo=True,
                 source=op.target, target=back, keep_previous=True)


def describe(op: Operation, endpoint: str, namespace: str) -> list[str]:
    """An unfinished operation: what it does, which steps are done, which are left."""
    kind = {"blue-green": "blue/green", "discard": "undo (discard)"}.get(op.kind, op.kind)
    head = (f"unfinished rollout{' (undo)' if op.undo and op.kind != 'discard' else ''} of {namespace}/{endpoint}: "
            f"{kind} {op.source.name if op.source else '(nothing)'} -> {op.target.name} (revision {op.target.number}),"
            f" {op.done} of {len(op.steps)} steps done")
    return [head, *(f"  {i}. {'done ' if i <= op.done else ''}{step_text(s, endpoint, namespace)}"
                    for i, s in enumerate(op.steps, 1))]
