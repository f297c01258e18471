"""``hyperpod-dpd rollout``: change a live endpoint to what the last synth wrote, the safe way that fits.

It compares the synthesized endpoint (``dist/``: :mod:`hyperpod_core.dist_layout`) with the live
InferenceEndpointConfig, reads the free GPUs of the live nodes and the strategy of the operator's live Deployments, and
prints a plan before it acts (:mod:`hyperpod_dpd.rollout.plan`): blue/green when a second copy fits, in place when
the strategy lets both roles move, else replace with the downtime stated. ``--dry-run`` stops after the plan; without
``--yes`` it asks (and without a terminal it refuses, as ``deploy`` does). ``--undo`` returns to the previous
revision of the revision store (:mod:`hyperpod_dpd.rollout.store`), with the same planner. An interrupted rollout
(Ctrl-C, a failed step) is offered for resuming the next time, or undone with ``--undo``.

The blue/green revision's smoke test is ``smoke``'s own: its skew guard, the short and the long prompt through the
revision's load balancer, the KV transfer of each read from the decoders' log (:mod:`hyperpod_dpd.commands.smoke`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.errors import CommandFailed, UsageError
from hyperpod_core.names import (
    INSTANCE_TYPE_NODE_LABEL,
    MANAGED_BY_LABEL,
    ROLES,
    STABLE_SERVICE_MANAGER,
    EndpointNames,
    Role,
)
from hyperpod_dpd.commands.options import (
    ConfigOption,
    EndpointOption,
    EnvOption,
    OutputsFileOption,
    ProfileOption,
    ReadyTimeoutOption,
)
from hyperpod_dpd.confirm import DryRunOption, YesOption, confirm
from hyperpod_dpd.deployment import (
    ContextOption,
    Deployment,
    KubeconfigOption,
    endpoint_selector,
    load,
    rollout_command,
)

if TYPE_CHECKING:  # the Kubernetes client loads when the command runs, not for --help
    from hyperpod_dpd.kube import Kube
    from hyperpod_dpd.rollout.cluster import Cluster
    from hyperpod_dpd.rollout.executor import Executor
    from hyperpod_dpd.rollout.plan import Plan
    from hyperpod_dpd.rollout.store import Record, Revision, RevisionStore

UndoOption = Annotated[bool, typer.Option(
    "--undo", help="Return to the previous revision (the revision store's), or undo an unfinished rollout.")]
KvFlushedOption = Annotated[bool, typer.Option(
    "--kv-flushed", help="The L2 KV cache was flushed: allow a model change that keeps vLLM's --model.")]
#: Seconds between two reads while waiting for an endpoint.
POLL_SECONDS = 10.0
#: Seconds the decoders get to flush their log before the smoke test reads it (``smoke --log-wait``'s default).
SMOKE_LOG_WAIT_SECONDS = 3.0
#: Output tokens of each smoke request (``smoke --max-tokens``'s default) and its timeout.
SMOKE_MAX_TOKENS, SMOKE_TIMEOUT_SECONDS = 64, 300.0


def register(app: typer.Typer) -> None:
    app.command("rollout")(rollout)


def rollout(endpoint: EndpointOption = None, config: ConfigOption = None, env: EnvOption = None,
            dry_run: DryRunOption = False, yes: YesOption = False, undo: UndoOption = False,
            kv_flushed: KvFlushedOption = False, ready_timeout: ReadyTimeoutOption = 3600.0,
            kubeconfig: KubeconfigOption = None, context: ContextOption = None, profile: ProfileOption = None,
            outputs_file: OutputsFileOption = None) -> None:
    """Change a live endpoint to what synth wrote: blue/green when a second copy fits, else in place or
    delete-then-apply (downtime stated first); --undo returns to the previous revision.

    Prints the plan first (--dry-run stops there) and asks (--yes does not). An interrupted rollout is resumed by
    running rollout again, or undone with --undo.
    """
    from hyperpod_dpd.rollout.cluster import Cluster
    from hyperpod_dpd.rollout.store import RevisionStore

    dep = load(config, env, outputs_file=outputs_file)
    spec = dep.endpoint(endpoint, "rollout")
    store = RevisionStore.of(dep.env.workdir, spec.name)
    record = store.read()
    target_doc = None if undo or (record and record.operation) else synthesized(dep, spec)
    kube = dep.kube(kubeconfig, context)
    cluster = Cluster(kube, poll_seconds=POLL_SECONDS)
    if record is not None and record.operation is not None:
        _unfinished(dep, spec, kube, cluster, store, record, undo=undo, dry_run=dry_run, yes=yes,
                    timeout_s=ready_timeout)
        return
    if undo:
        if record is None or record.previous is None:
            raise UsageError(f"nothing to undo: {store.path} holds no previous revision of {spec.name}")
        target_doc = record.previous.manifest
    assert target_doc is not None
    plan, source, target = _plan(dep, spec, cluster, record, target_doc, kv_flushed=kv_flushed)
    from hyperpod_dpd.rollout.plan import render

    for line in render(plan):
        print(line)
    if plan.refusal:
        raise UsageError(plan.refusal)
    if plan.kind == "none" and not plan.service_change:
        return
    if dry_run:
        print("dry run: nothing changed")
        return
    confirm(_question(plan), yes=yes, command="hyperpod-dpd rollout", cancelled="nothing changed")
    from hyperpod_dpd.rollout.executor import start
    from hyperpod_dpd.rollout.store import Record

    base = record or Record(endpoint=spec.name, namespace=spec.namespace)
    if base.current is None and source is not None:
        base = replace(base, current=source)
    _executor(dep, spec, kube, cluster, store, ready_timeout).run(
        start(base, kind=plan.kind, undo=undo, source=source, target=target))
    print(f"done: {spec.namespace}/{spec.name} serves revision {target.number} ({target.name}); "
          f"undo: {rollout_command(dep.env, spec)} --undo" if plan.kind != "none" else
          f"done: Service {spec.namespace}/{spec.name} points at {target.name}")


def synthesized(dep: Deployment, spec: EndpointSpec) -> dict[str, Any]:
    """The InferenceEndpointConfig the environment's last synth wrote for ``spec`` (``endpoint/`` of its layout);
    refused while the synth is older than the config or left placeholders."""
    import yaml

    from hyperpod_core.dist_layout import PLACEHOLDERS_README, DistLayout

    e = dep.env
    e.require_stamp()
    layout = DistLayout.found(e.dist, spec.name, spec.endpoint.apply)
    path = layout.endpoint_file(spec.endpoint.apply)
    if layout.unresolved:
        raise UsageError(f"{path} holds placeholders ({layout.base / PLACEHOLDERS_README} says which): resolve "
                         f"them, then hyperpod-dpd synth {e.selector}")
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
    except OSError:
        raise UsageError(f"{path} does not exist; run: hyperpod-dpd synth {e.selector}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not YAML ({str(exc).splitlines()[0]}); run: hyperpod-dpd synth "
                         f"{e.selector}") from None
    found = [d for d in docs if d.get("kind") == "InferenceEndpointConfig"
             and (d.get("metadata") or {}).get("name") == spec.name]
    if len(found) != 1:
        raise UsageError(f"{path} holds {len(found)} InferenceEndpointConfig named {spec.name}, expected 1; run: "
                         f"hyperpod-dpd synth {e.selector}")
    return found[0]


def _selectors(spec: EndpointSpec) -> dict[Role, dict[str, str]]:
    """Each role's nodes: its nodeSelector (:meth:`EndpointSpec.node_selector`), else every node of the endpoint's
    instance type."""
    return {role: spec.node_selector(role) or {INSTANCE_TYPE_NODE_LABEL: spec.endpoint.instance_type} for role in ROLES}


def _cold_starts(spec: EndpointSpec, target_spec: dict[str, Any]) -> tuple[str, str]:
    """The planner's cold start of the target (:func:`hyperpod_dpd.rollout.plan.downtime`): new weights, and the
    same weights (found in the NVMe weights cache when it is on)."""
    from hyperpod_analysis.plan.coldstart import cold_start
    from hyperpod_core.models import known_model
    from hyperpod_dpd.rollout.plan import downtime

    shape = known_model(spec.model.name, spec.model.s3_prefix)
    figures = cold_start(shape) if shape is not None else None
    source = str((target_spec.get("modelSourceConfig") or {}).get("modelSourceType") or "s3")
    weights = spec.resolved_model_cache().weights_cache
    return (downtime(figures, source_type=source, weights_cache=weights, model_changes=True),
            downtime(figures, source_type=source, weights_cache=weights, model_changes=False))


def _plan(dep: Deployment, spec: EndpointSpec, cluster: Cluster, record: Record | None, target_doc: dict[str, Any],
          *, kv_flushed: bool) -> tuple[Plan, Revision | None, Revision]:
    """The plan, the revision that serves now (``None``: nothing live) and the one the plan makes."""
    from hyperpod_core.names import REVISION_LABEL, revision_name, revision_of
    from hyperpod_dpd.rollout import address
    from hyperpod_dpd.rollout.plan import as_manifest, decide, revision_manifest, revision_name_problem
    from hyperpod_dpd.rollout.store import Revision, RevisionStore

    ns = spec.namespace
    service = cluster.service(ns, spec.name)
    if service is not None and not address.ours(service):
        raise CommandFailed(f"Service {ns}/{spec.name} exists and is not ours (no label "
                            f"{MANAGED_BY_LABEL}={STABLE_SERVICE_MANAGER}): rollout keeps the endpoint's stable "
                            "address there; rename or delete that Service")
    current = record.current if record else None
    live_name = current.name if current else spec.name
    live = cluster.endpoint(ns, live_name)
    adopted = 0
    pointed = address.pointed_at(service)
    if current is None and live is None and pointed is not None and pointed[0] != spec.name:
        found = cluster.endpoint(ns, pointed[0])  # the revision store was lost; the Service knows what serves
        label = (((found or {}).get("metadata") or {}).get("labels") or {}).get(REVISION_LABEL)
        # a revision keeps its name across an in-place change or a replace, its label carries the new number
        if found is not None and (revision_of(pointed[0], spec.name) is None or label != str(pointed[1])):
            raise CommandFailed(f"Service {ns}/{spec.name} points at InferenceEndpointConfig {pointed[0]} (revision "
                                f"{pointed[1]}), which is not revision {pointed[1]} of {spec.name} (its name or "
                                f"{REVISION_LABEL} label say otherwise), and the revision store has no record: "
                                f"check what serves, then delete or repoint that Service")
        if found is not None:
            live_name, live, adopted = pointed[0], found, pointed[1]
            print(f"note: the revision store ({RevisionStore.of(dep.env.workdir, spec.name).path}) records no "
                  f"revision, and Service {ns}/{spec.name} points at {live_name} (revision {adopted}), which is "
                  "live: the rollout goes on from it")
    number = max(record.last if record else 0, adopted) + 1
    blue_green = revision_name(spec.name, number)
    problem = revision_name_problem(blue_green, ns, {
        s.name: s.names for s in dep.env.config.specs() if s.name != spec.name})
    want = revision_manifest(target_doc, live_name, number)
    nodes = cluster.rooms()
    strategies = cluster.strategies(EndpointNames(name=live_name, namespace=ns)) if live else {}
    fast, same = _cold_starts(spec, want["spec"])
    plan = decide(endpoint=spec.name, namespace=ns, live_name=live_name if live else None,
                  live_spec=(live or {}).get("spec") if live else None, target_spec=want["spec"],
                  blue_green_name=blue_green, nodes=nodes, strategies=strategies, selectors=_selectors(spec),
                  cold_start=fast, cold_start_unchanged=same, live_owners=_owners(live) if live else (),
                  blue_green_problem=problem, kv_flushed=kv_flushed)
    if plan.kind == "create":
        plan = replace(plan, target=live_name)
    line, change = address.state(service, spec.name, ns, EndpointNames(name=plan.target, namespace=ns))
    plan = replace(plan, service=line, service_change=change if plan.kind == "none" else True)
    source = None
    if live is not None:
        source = current if current is not None and current.name == live_name else Revision(
            number=adopted, name=live_name, manifest=as_manifest(live))
    if plan.kind == "none":
        assert source is not None
        return plan, source, source
    name = plan.target
    return plan, source, Revision(number=number, name=name, manifest=revision_manifest(target_doc, name, number))


def _owners(live: dict[str, Any]) -> list[str]:
    """The owners (``<namespace>/<Deployment>``: :func:`hyperpod_dpd.rollout.cluster.pod_owner`) of a live endpoint's
    pods (:func:`hyperpod_dpd.rollout.cluster.endpoint_deployments`)."""
    from hyperpod_dpd.rollout.cluster import endpoint_deployments

    meta = live.get("metadata") or {}
    ns = str(meta.get("namespace"))
    return [f"{ns}/{d}" for d in endpoint_deployments(ns, str(meta.get("name")), live)]


def _question(plan: Plan) -> str:
    where = f"{plan.namespace}/{plan.endpoint}"
    if plan.kind == "blue-green":
        return f"roll {where} out blue/green as {plan.target} (no downtime)?"
    if plan.kind == "replace":
        return f"replace {where}: delete {plan.live}, then apply (downtime: {plan.downtime})?"
    if plan.kind == "in-place":
        return f"change {where} in place (downtime: {plan.downtime or 'none'})?"
    if plan.kind == "create":
        return f"create {where} as {plan.target}?"
    return f"point Service {where} at {plan.target}?"


def _unfinished(dep: Deployment, spec: EndpointSpec, kube: Kube, cluster: Cluster, store: RevisionStore,
                record: Record, *,
                undo: bool, dry_run: bool, yes: bool, timeout_s: float) -> None:
    """Resume the unfinished operation (asked), or undo it (``--undo``, asked)."""
    from hyperpod_dpd.rollout.executor import describe, undo_operation

    op = record.operation
    assert op is not None
    for line in describe(op, spec.name, spec.namespace):
        print(line)
    if undo:
        record = undo_operation(record, source_intact=_intact(cluster, spec.namespace, op.source, op.target))
        if record.operation is None:
            print("nothing to undo: the unfinished step only pointed the Service" if op.kind == "none" else
                  f"nothing to undo: {op.source.name if op.source else spec.name} still runs its own spec, untouched; "
                  "the unfinished rollout is dropped")
            if not dry_run:
                store.write(record)
            return
        print("undo:")
        for line in describe(record.operation, spec.name, spec.namespace)[1:]:
            print(line)
        question = f"undo the unfinished rollout of {spec.namespace}/{spec.name}?"
    else:
        print(f"resume: the remaining steps run (the recorded revision {op.target.number}, not a newer synth); or "
              f"--undo returns to {op.source.name if op.source else 'no endpoint'}")
        question = f"resume the rollout of {spec.namespace}/{spec.name}?"
    if dry_run:
        print("dry run: nothing changed")
        return
    confirm(question, yes=yes, command="hyperpod-dpd rollout", cancelled="nothing changed")
    done = _executor(dep, spec, kube, cluster, store, timeout_s).run(record)
    current = done.current
    print(f"done: {spec.namespace}/{spec.name} serves "
          + (f"revision {current.number} ({current.name})" if current else "nothing"))


def _intact(cluster: Cluster, namespace: str, source: Revision | None, target: Revision) -> bool:
    """The source revision runs its own spec, not the target's, and is not being deleted (an unfinished change left
    it untouched)."""
    from hyperpod_dpd.rollout.plan import changes

    if source is None:
        return False
    live = cluster.endpoint(namespace, source.name)
    if live is None or (live.get("metadata") or {}).get("deletionTimestamp"):
        return False
    spec = live.get("spec") or {}
    return not changes(spec, source.manifest.get("spec") or {}) and bool(changes(spec, target.manifest.get("spec")
                                                                                  or {}))


def _executor(dep: Deployment, spec: EndpointSpec, kube: Kube, cluster: Cluster, store: RevisionStore,
              timeout_s: float) -> Executor:
    from hyperpod_dpd.rollout.executor import Executor

    return Executor(cluster=cluster, store=store, endpoint=spec.name, namespace=spec.namespace,
                    part_of=dep.env.config.name, smoke=lambda name: smoke_revision(dep, spec, kube, name),
                    timeout_s=timeout_s, selector=endpoint_selector(dep.env, spec))


def smoke_revision(dep: Deployment, spec: EndpointSpec, kube: Kube, name: str) -> None:
    """``smoke``'s checks on the revision ``name``: its skew guard, the short and the long prompt through the
    revision's load balancer, the KV transfer of each from the decoders' log; a failure or a check not made stops
    the rollout before the Service moves."""
    from hyperpod_dpd.commands.smoke import probe

    checked = probe(dep, spec, EndpointNames(name=name, namespace=spec.namespace), kube, max_tokens=SMOKE_MAX_TOKENS,
                    timeout=SMOKE_TIMEOUT_SECONDS, log_wait=SMOKE_LOG_WAIT_SECONDS)
    sent, unchecked = checked.sent, checked.unchecked
    for r in sent.reports:
        kv = (f", KV {r.transfers[0]['retrieved_tokens']}/{r.transfers[0]['required_tokens']} tokens"
              if r.transfers else "")
        print(f"      smoke {r.name} prompt ({r.estimated_input_tokens} tokens): "
              + (f"TTFT {r.ttft_seconds:.3f} s{kv}: ok" if r.ok else "FAILED"))
    failed = [f"{r.name}: " + (r.error or "; ".join(f["signature"] for f in r.findings if f["severity"] == "error"))
              for r in sent.reports if not r.ok]
    failed += [f"not checked: {u['check']} ({u['reason']})" for u in unchecked]
    if failed:
        raise CommandFailed(f"smoke test of {name} failed ({'; '.join(failed)}); the old revision still serves and "
                            "the Service was not moved")
