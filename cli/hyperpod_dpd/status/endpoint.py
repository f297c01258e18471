"""The endpoint's rows: the InferenceEndpointConfig's state, the role, router or colocated pods, the load balancer,
the TLS certificate, the applied revision against the synthesized one, and the prefill/decode skew.

They read the InferenceEndpointConfig that serves the endpoint: ``<endpoint>-r<N>`` after a blue/green rollout (the
revision store's current revision, :func:`hyperpod_dpd.rollout.store.live_name`), else the endpoint's own name. A
rollout that stopped half-way (Ctrl-C, a failed step) is one more row saying where it stopped and how to go on
(:func:`rollout_check`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperpod_core.config.spec import EndpointSpec
from hyperpod_core.dist_layout import PLACEHOLDERS_README
from hyperpod_core.errors import CommandFailed
from hyperpod_core.names import OPERATOR_NAMESPACE, PD_SPEC_KEYS, ROLES, EndpointNames, Role, certificate_pem_location
from hyperpod_dpd import skew
from hyperpod_dpd.deployment import Deployment, before_apply, deployable, rollout_command
from hyperpod_dpd.status.check import Check, State
from hyperpod_dpd.status.cold_start import cache_checks
from hyperpod_dpd.status.kv_path import efa_checks

if TYPE_CHECKING:  # the Kubernetes client loads in the checks that call it, not for --help
    from hyperpod_dpd.kube import PodTarget, RoleWorkers



def endpoint_checks(dep: Deployment, spec: EndpointSpec, kubeconfig: str | None, context: str | None) -> list[Check]:
    """The rows of ``spec``'s endpoint on ``dep``'s cluster: an unfinished rollout's row first, then those of the
    InferenceEndpointConfig that serves it (module docstring)."""
    from hyperpod_dpd.kube import kube_errors
    from hyperpod_dpd.rollout.store import live_name

    names = EndpointNames(name=live_name(dep.env, spec), namespace=spec.namespace)
    unfinished = rollout_check(dep, spec)
    kube = dep.kube(kubeconfig, context)
    with kube_errors(f"reading InferenceEndpointConfig {names.namespace}/{names.name}"):
        obj = kube.endpoint(names)
        if obj is None:
            layout = dep.layout(spec)
            return [*unfinished, Check(
                section="endpoint", name=f"{names.namespace}/{names.name}", state="fail",
                detail="InferenceEndpointConfig not found",
                next_step=unfinished[0].next_step if unfinished else
                f"{before_apply(layout)}kubectl apply -f {deployable(layout).endpoint_dir}/")]
        dpd = (obj.get("spec") or {}).get("pdSpec") is not None
        workers = {role: kube.role_workers(names, role) for role in ROLES} if dpd else {}
        routers = kube.router_pods(names)
        app_pods = [] if dpd else kube.app_pods(names)
        hosts = kube.load_balancer_hosts(names)
    status_ = obj.get("status") or {}
    live = obj.get("spec") or {}
    state = status_.get("state") or "unset"
    conditions = "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}"
                           for c in status_.get("conditions") or [])
    next_state = {
        "DeploymentComplete": "",
        "DeploymentPending": "the operator has not started; 'hyperpod-dpd logs operator'",
        "DeploymentInProgress": "pods load the weights from S3 (5-10 minutes, 2/3 containers Ready); "
                                "'hyperpod-dpd status --watch'",
        "DeploymentFailed": "read the conditions and 'hyperpod-dpd logs operator'; fix, then re-apply",
    }.get(state, "the endpoint is being deleted or in an unknown state; 'hyperpod-dpd logs operator'")
    revision = f"{names.name}: " if names.name != spec.name else ""  # a blue/green revision serves
    checks = [*unfinished, Check(section="endpoint", name="state", state="ok" if state == "DeploymentComplete" else
                                 "fail", detail=revision + state + (f" ({conditions})" if conditions else ""),
                                 next_step=next_state)]
    pd_spec = live.get("pdSpec")
    pods = {role: w.pods for role, w in workers.items()}
    if pd_spec is None:
        checks += _colocated_checks(dep, spec, names, live, app_pods)
    else:
        checks += _dpd_checks(spec, names, pd_spec, pods, routers)
        checks += skew_checks(dep, spec, names, workers)
    checks += revision_check(dep, spec, live)
    checks.append(load_balancer_check(dep, names, hosts))
    pem = certificate_pem_location(status_)
    health = (status_.get("tlsCertificate") or {}).get("certificateHealth")
    where = f"s3://{pem[0]}/{pem[1]}" if pem else "not written yet"
    tls_state: State = "fail" if health == "Expired" else ("warn" if health == "Expiring" or not pem else "ok")
    checks.append(Check(section="endpoint", name="TLS certificate", state=tls_state,
                        detail=where + (f" ({health})" if health else ""), blocks_serving=False,
                        next_step={"fail": "the certificate expired: re-apply the endpoint to re-issue it",
                                   "warn": "wait for the operator to write the PEM / renew the certificate",
                                   "ok": ""}[tls_state]))
    checks += cache_checks(names, kube, live, status_)
    if pd_spec is not None:
        model_skew = any(f.kind == "model" for f in skew.findings(workers))
        checks += efa_checks(spec.endpoint.pd_buffer_size_bytes, kube, pods, model_skew=model_skew,
                             endpoint_dir=deployable(dep.layout(spec)).endpoint_dir)
    return checks


def rollout_check(dep: Deployment, spec: EndpointSpec) -> list[Check]:
    """One row when a rollout of ``spec``'s endpoint stopped half-way (its revision store holds an operation, written
    step by step: :mod:`hyperpod_dpd.rollout.store`): which rollout, how far, the next step, and the two ways on
    (``rollout`` resumes it, ``rollout --undo`` undoes it); none otherwise."""
    from hyperpod_dpd.rollout.plan import step_text
    from hyperpod_dpd.rollout.store import RevisionStore

    record = RevisionStore.of(dep.env.workdir, spec.name).read()
    op = record.operation if record is not None else None
    if op is None:
        return []
    kind = {"blue-green": "blue/green", "discard": "undo (discard)"}.get(op.kind, op.kind)
    left = op.steps[op.done] if op.done < len(op.steps) else ""
    again = rollout_command(dep.env, spec)
    source = op.source.name if op.source else "no endpoint"
    return [Check(section="endpoint", name="rollout", state="warn", blocks_serving=False,
                  detail=f"unfinished {kind}{' (undo)' if op.undo and op.kind != 'discard' else ''} {source} -> "
                         f"{op.target.name} (revision {op.target.number}): {op.done} of {len(op.steps)} steps done"
                         + (f"; next: {step_text(left, spec.name, spec.namespace)}" if left else ""),
                  next_step=(f"'{again}' resumes it" + ("" if op.kind == "discard" else
                                                        f", '{again} --undo' returns to {source}")),
                  facts={"kind": op.kind, "undo": op.undo, "source": op.source.name if op.source else None,
                         "target": op.target.name, "done": op.done, "steps": list(op.steps)})]


def revision_check(dep: Deployment, spec: EndpointSpec, live: dict[str, Any]) -> list[Check]:
    """The applied endpoint's weights (``--model`` of its ``worker.args``, which carries the revision) against the
    manifest of the same mode the environment's last synth wrote (``dist/``); none without that manifest. A new
    revision is not applied until both roles' pods run it, and applying it in place changes both pod templates: with
    no free GPU in a pool the new pods stay Pending (docs/endpoint.md, Model identity)."""
    import yaml

    from hyperpod_core.dist_layout import Mode
    from hyperpod_dpd.vllm_args import model_of_argv

    mode: Mode = "dpd" if live.get("pdSpec") is not None else "colocated"
    layout = dep.layout(spec)
    path = layout.endpoint_file(mode)
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except (OSError, yaml.YAMLError):
        return []
    synthesized = model_of_argv([str(a) for a in ((docs[0].get("spec") or {}).get("worker") or {}).get("args") or []]
                                ) if docs else ""
    applied = model_of_argv([str(a) for a in (live.get("worker") or {}).get("args") or []])
    if not synthesized:
        return []
    facts = {"applied": applied, "synthesized": synthesized}
    if applied == synthesized:
        return [Check(section="endpoint", name="revision", state="ok", blocks_serving=False,
                      detail=f"{applied}, as synthesized ({path})", facts=facts)]
    if layout.unresolved:
        fix = f"the synth left placeholders ({layout.base / PLACEHOLDERS_README}): resolve them, synthesize again"
    else:
        fix = (f"apply the new revision: {rollout_command(dep.env, spec)} (blue/green when a second copy fits, else in "
               "place or replace, the downtime said first; --dry-run shows the plan)")
    return [Check(section="endpoint", name="revision", state="warn", blocks_serving=False,
                  detail=f"applied {applied or '(model unknown)'}; synthesized {synthesized} ({path})",
                  next_step=fix, facts=facts)]


def load_balancer_check(dep: Deployment, names: EndpointNames, hosts: list[str]) -> Check:
    """The ALB behind the Ingress hostname and its ELBv2 state (``active``, ``provisioning``, ``failed``)."""
    from hyperpod_dpd import aws

    if not hosts:
        return Check(section="endpoint", name="load balancer", state="warn", blocks_serving=False,
                     detail="no ALB hostname on the Ingress yet",
                     next_step="the AWS Load Balancer Controller provisions it after the pods; meanwhile use "
                               "'kubectl port-forward' to the router")
    try:
        elbv2 = aws.client("elbv2", dep.region)
        with aws.aws_errors("describing the load balancers"):
            states = {lb["DNSName"].lower(): lb.get("State", {}).get("Code", "unknown")
                      for page in elbv2.get_paginator("describe_load_balancers").paginate()
                      for lb in page.get("LoadBalancers", [])}
    except CommandFailed as exc:
        return Check(section="endpoint", name="load balancer", state="warn", blocks_serving=False,
                     detail=f"{', '.join(hosts)} (state unknown: {exc})")
    state = states.get(hosts[0].lower(), "not found in ELBv2")
    ok = state == "active"
    return Check(section="endpoint", name="load balancer", state="ok" if ok else "warn", blocks_serving=False,
                 detail=f"{', '.join(hosts)} ({state})",
                 next_step="" if ok else ("provisioning takes a few minutes" if state == "provisioning" else
                                          f"read the Ingress events: 'kubectl describe ingress {names.ingress} "
                                          f"-n {OPERATOR_NAMESPACE}' and the controller's log"))


def _dpd_checks(spec: EndpointSpec, names: EndpointNames, pd_spec: dict[str, Any], pods: dict[Role, list[PodTarget]],
                routers: list[PodTarget]) -> list[Check]:
    checks: list[Check] = []
    for role in ROLES:
        role_cfg = spec.endpoint.prefill if role == "prefill" else spec.endpoint.decode
        desired = int((pd_spec.get(PD_SPEC_KEYS[role]) or {}).get("replicas", role_cfg.replicas))
        ready = sum(1 for p in pods[role] if p.ready)
        ok = ready >= desired
        checks.append(Check(
            section="endpoint", name=f"{role} pods", state="ok" if ok else "fail",
            detail=f"Ready {ready}/{desired}" + (f" ({', '.join(p.pod for p in pods[role])})" if pods[role] else ""),
            next_step="" if ok else (f"no pod yet: check GPU nodes labelled {_selector(spec, role)} and free GPUs"
                                     if not pods[role] else
                                     f"'kubectl describe pod -n {names.namespace} {pods[role][0].pod}' and "
                                     f"'hyperpod-dpd logs {role}'")))
    ready_routers = sum(1 for p in routers if p.ready)
    checks.append(Check(section="endpoint", name="router", state="ok" if ready_routers else "fail",
                        detail=f"Ready {ready_routers}/{len(routers)} ({names.router_service}:443)",
                        next_step="" if ready_routers else "the operator creates the router with pdSpec; "
                                                           "'hyperpod-dpd logs router' / 'hyperpod-dpd logs operator'"))
    return checks


def skew_checks(dep: Deployment, spec: EndpointSpec, names: EndpointNames, workers: dict[Role, RoleWorkers]
                ) -> list[Check]:
    """One row per role with what it runs (image, ``--model``, pod templates and revisions), then one row that
    compares them (:func:`hyperpod_dpd.skew.findings`). A different image or model path between the serving pods
    means the endpoint cannot serve correctly (the decoder recomputes what prefill sent, and prefill's transfers
    stall once the decoder's PD buffer is full of KV it never reads); a rollout alone is a warning (``smoke`` refuses
    to certify the endpoint until it is over), and so is what cannot be compared (:func:`hyperpod_dpd.skew.
    uncompared`): a role whose Deployment is not found, without a Ready pod, or whose model cannot be read."""
    ns = spec.namespace
    found = skew.findings(workers)
    checks = []
    for role in ROLES:
        w = workers[role]
        rolling = [f for f in found if f.role == role]
        checks.append(Check(section="endpoint", name=f"{role} revision", state="warn" if rolling or not w.found
                            else "ok", detail=skew.describe(w), blocks_serving=False, facts=skew.summary(w),
                            next_step=f"kubectl rollout status deployment/{w.deployment} -n {ns}"
                            if rolling else "" if w.found else
                            f"kubectl get deployments -n {ns} -l "
                            f"inference.sagemaker.aws.amazon.com/dpd-role={role} (the operator's name for it)"))
    rollout = " and ".join(f"'kubectl rollout status deployment/{workers[r].deployment} -n {ns}'"
                           for r in ROLES)
    differ = [f for f in found if f.kind != "rollout"]
    facts = {"skewed": bool(found), "findings": [{"kind": f.kind, "role": f.role, "message": f.message}
                                                 for f in found]}
    if differ:
        return [*checks, Check(
            section="endpoint", name="prefill/decode skew", state="fail", facts=facts,
            detail="; ".join(f.message for f in found),
            next_step=f"the decoder recomputes what prefill sends and transfers stall once its PD buffer is full: "
                      f"let both roles finish their rollouts ({rollout}), or replace the endpoint so both start on one "
                      f"revision: kubectl delete inferenceendpointconfig -n {ns} {names.name}, then "
                      f"{rollout_command(dep.env, spec)} (nothing live: it applies the synthesized endpoint; one cold "
                      "start); a new pod Pending for GPUs never finishes a rollout (docs/operations.md#skew-guard)")]
    if found:
        return [*checks, Check(
            section="endpoint", name="prefill/decode skew", state="warn", blocks_serving=False, facts=facts,
            detail="; ".join(f.message for f in found),
            next_step=f"wait for the rollout ({rollout}); smoke refuses to certify the endpoint until it is over")]
    unknown = skew.uncompared(workers)
    if unknown:
        return [*checks, Check(section="endpoint", name="prefill/decode skew", state="warn", blocks_serving=False,
                               facts={**facts, "uncompared": unknown}, detail=f"not compared: {'; '.join(unknown)}")]
    return [*checks, Check(section="endpoint", name="prefill/decode skew", state="ok", facts=facts,
                           detail="none: both roles serve one image and one model path, each from one pod template")]


def _colocated_checks(dep: Deployment, spec: EndpointSpec, names: EndpointNames, live: dict[str, Any],
                      pods: list[PodTarget]) -> list[Check]:
    """The colocated baseline (same name, no pdSpec; docs/endpoint.md): its pods carry ``app=<iec>`` (the
    HyperPod SDK lists an endpoint's pods by that label, operator.md section (e)); no DPD router."""
    desired = int(live.get("replicas", 1))
    ready = sum(1 for p in pods if p.ready)
    ok = ready >= desired
    how = (f"{rollout_command(dep.env, spec)} (endpoint.apply is dpd)" if spec.endpoint.apply == "dpd" else
           f"set {spec.field('apply')}: dpd, synthesize, then {rollout_command(dep.env, spec)}")
    return [
        Check(section="endpoint", name="mode", state="warn", blocks_serving=False,
              detail="colocated (no pdSpec): the baseline manifest is applied",
              next_step=f"to serve disaggregated: {before_apply(dep.layout(spec))}{how}"),
        Check(section="endpoint", name="pods", state="ok" if ok else "fail",
              detail=f"Ready {ready}/{desired}" + (f" ({', '.join(p.pod for p in pods)})" if pods else ""),
              next_step="" if ok else f"'kubectl describe pods -n {names.namespace} -l app={names.name}'"),
    ]


def _selector(spec: EndpointSpec, role: Role) -> str:
    """The node label ``role``'s pods are pinned by (:meth:`hyperpod_core.config.EndpointSpec.node_selector`), for a
    message; ``instance type <type>`` when none pins them."""
    selector = spec.node_selector(role)
    return ", ".join(f"{k}={v}" for k, v in selector.items()) or f"with instance type {spec.endpoint.instance_type}"
