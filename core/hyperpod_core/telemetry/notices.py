"""One-line notices about where alerts and dashboards go, printed by synth and ``hyperpod-dpd status``.

An alert that fires in the workspace but reaches no one, or a dashboard that is only a JSON file, is a
deployment that looks observed and is not: both entry points say so in one line each.
"""

from __future__ import annotations

from hyperpod_core.config.observability import ObservabilityConfig


def receivers(observability: ObservabilityConfig) -> list[str]:
    """Who the alerts reach: the e-mail addresses and the existing topic of ``observability.alerts``."""
    a = observability.alerts
    return [*a.email_addresses, *([a.topic_arn] if a.topic_arn else [])]


def alerts_notice(observability: ObservabilityConfig) -> str | None:
    """``None`` when the alerts reach someone; else one line saying they do not, and what to set."""
    if not observability.enabled:
        return "alerts reach no one: observability.enabled is false (no workspace, no rules, no alert manager)"
    if not receivers(observability):
        return ("alerts reach no one: observability.alerts names no email_addresses and no topic_arn (the alert "
                "manager publishes to the alert topic, which nobody subscribes to)")
    return None


def dashboards_notice(observability: ObservabilityConfig) -> str | None:
    """``None`` when the dashboards are deployed into Amazon Managed Grafana; else one line on how to import."""
    if not observability.enabled or observability.grafana_workspace is not None:
        return None
    return ("dashboards are not deployed to Grafana: observability.grafana_workspace is not set; import "
            "dist/dashboards/*.json (docs/observability.md, \"Import the dashboards\")")


def notices(observability: ObservabilityConfig) -> list[str]:
    """The deployment's notices (its ``observability`` section decides both)."""
    return [n for n in (alerts_notice(observability), dashboards_notice(observability)) if n]
