"""The KV path over EFA, from the workers' logs: each worker's start-up and recent lines
(:func:`hyperpod_dpd.dpd_logs.efa_findings`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hyperpod_core.errors import CommandFailed
from hyperpod_core.names import ROLES, Role
from hyperpod_dpd.status.check import Check, State

if TYPE_CHECKING:  # the Kubernetes client loads in the checks that call it, not for --help
    from hyperpod_dpd.kube import Kube, PodTarget

#: The first bytes of a worker's log hold its start-up lines (the LMCache set-up of every rank) [I: a few hundred
#: KiB in a vLLM 0.19 start-up; 4 MiB leaves room]; the last lines its recent transfers.
STARTUP_LOG_BYTES = 4 << 20
RECENT_LOG_LINES = 2000


def efa_checks(pd_buffer_size_bytes: int, kube: Kube, pods: dict[Role, list[PodTarget]], *,
               model_skew: bool = False) -> list[Check]:
    """One row per role: each pod's ``pd_role``, NIXL transport and per-rank transfer rates, proven or refuted
    (:func:`hyperpod_dpd.dpd_logs.efa_findings`). A refuted path still serves (the decoder recomputes), so the
    row does not block serving, but the endpoint is then not disaggregated in any useful sense. ``model_skew``: the
    roles run different ``--model`` values (the skew row), which is what a full receive buffer then means;
    ``pd_buffer_size_bytes``: the endpoint's ``pd_buffer_size_bytes``, named in the fix of a full buffer."""
    from hyperpod_dpd import dpd_logs
    from hyperpod_dpd.kube import kube_errors

    checks: list[Check] = []
    buffer = pd_buffer_size_bytes
    for role in ROLES:
        if not pods[role]:
            continue
        parts, verdicts, fixes = [], [], []
        try:
            with kube_errors(f"reading the {role} logs"):
                for target in pods[role]:
                    lines = (kube.read_log(target, limit_bytes=STARTUP_LOG_BYTES)
                             + kube.read_log(target, tail_lines=RECENT_LOG_LINES))
                    findings = dpd_logs.efa_findings(role, lines, pd_buffer_size_bytes=buffer, model_skew=model_skew)
                    verdicts.append(dpd_logs.efa_verdict(findings))
                    parts.append(f"{target.pod}: " + ", ".join(
                        f.signature for f in findings if f.severity in ("ok", "error", "warn")))
                    fixes += [f.fix for f in findings if f.severity in ("error", "warn") and f.fix]
        except CommandFailed as exc:
            checks.append(Check(section="endpoint", name=f"KV path ({role})", state="warn", detail=str(exc),
                                blocks_serving=False))
            continue
        state: State = ("fail" if "refuted" in verdicts else "warn" if "unproven" in verdicts else "ok")
        verdict = {"fail": "refuted", "warn": "not proven", "ok": "over EFA"}[state]
        checks.append(Check(section="endpoint", name=f"KV path ({role})", state=state, blocks_serving=False,
                            detail=f"{verdict}: " + "; ".join(parts), next_step=fixes[0] if fixes else ""))
    return checks
