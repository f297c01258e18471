"""The alert manager definition of the Amazon Managed Service for Prometheus workspace: where our alerts go.

AMP evaluates the rule groups (``alerts.py``) and hands firing alerts to the workspace's alert manager, whose
only receiver is Amazon SNS (AMP user guide, "Managing and forwarding alerts ... with alert manager" and
"Configure alert manager to send messages to your Amazon SNS topic"). Without a definition, alerts fire and
reach no one. The definition is Alertmanager's own configuration (AMP takes the ``alertmanager_config`` text
as is; ``amtool check-config`` validates it in the tests) with AMP's restrictions: every ``sns_configs`` entry
names ``sigv4.region``; ``api_url`` and ``http_config`` are not allowed.

* **route**: every alert of the workspace (it holds only this deployment's rule groups) to the SNS receiver,
  grouped per alert, namespace and endpoint (the cluster-wide alerts name neither: one group each); the heartbeat
  on its own route, repeated every :data:`HEARTBEAT_REPEAT`, so the topic sees a message at least that often while
  the path works.
* **inhibit_rules**: while :data:`~.alerts.ENDPOINT_DOWN` fires for an endpoint, its ``alert_kind="pd"``
  warnings (latency, queue, KV, aborted requests) are muted: the endpoint being down explains them. Critical
  alerts are never targets: Alertmanager keeps inhibiting while the source fires even when a silence mutes the
  source (a silence mutes notifications, not the alert), so a silenced ``DpdEndpointDown`` must not hide the
  error ratio. The source fires only when kube-state-metrics reports the cluster's pods (``queries.not_ready``):
  missing data is ``DpdClusterMetricsAbsent``, which inhibits nothing.
* **message attributes**: ``alert_kind`` and ``alertname`` ride along as SNS message attributes, so a
  subscriber (a pager's dead man's switch, a chat integration) can filter on them.

Pure Python; the topic ARNs come in as strings (CDK tokens on the CDK side).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import yaml

from hyperpod_core.telemetry.alerts import ENDPOINT_DOWN, HEARTBEAT, KIND_LABEL

RECEIVER: Final = "dpd-sns"
SEVERITY_LABEL: Final = "severity"
#: The only severity the endpoint-down inhibition mutes: a critical alert always reaches people.
INHIBITED_SEVERITY: Final = "warning"
GROUP_BY: Final = ("alertname", "namespace", "endpoint")
#: Alertmanager's defaults for a page-worthy route (prometheus.io, configuration, <route>), stated explicitly.
GROUP_WAIT: Final = "30s"
GROUP_INTERVAL: Final = "5m"
REPEAT_INTERVAL: Final = "4h"
#: How often the always-firing heartbeat is re-sent: one message a day. The topic's alarm (``alert_topic.py``)
#: fires after two whole days without any message, so the drift of ``group_interval`` never trips it.
HEARTBEAT_REPEAT: Final = "24h"
#: SNS subjects are at most 100 characters (SNS Publish API); AMP truncates longer ones.
SUBJECT: Final = "[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }} {{ .CommonLabels.endpoint }}"
#: SNS message attributes (templated per notification); subscription filter policies match on them.
ATTRIBUTES: Final = {KIND_LABEL: "{{ .CommonLabels." + KIND_LABEL + " }}",
                     "alertname": "{{ .CommonLabels.alertname }}"}


def topic_region(topic_arn: str, default: str) -> str:
    """The region field of an SNS topic ARN (``arn:aws:sns:<region>:...``), else ``default`` (a CDK token)."""
    parts = topic_arn.split(":")
    return parts[3] if len(parts) >= 6 and parts[2] == "sns" and parts[3] else default


def alertmanager_config(region: str, topic_arns: Sequence[str]) -> dict[str, Any]:
    """Alertmanager's configuration: route, inhibit rules and one SNS receiver publishing to ``topic_arns`` (each
    signed for its own region, ``region``, the deployment's, when its ARN names none: a CDK token)."""
    if not topic_arns:
        raise ValueError("topic_arns must name at least one SNS topic, got none")
    sns = [{"topic_arn": arn, "sigv4": {"region": topic_region(arn, region)}, "subject": SUBJECT,
            "attributes": dict(ATTRIBUTES)} for arn in topic_arns]
    return {
        "route": {
            "receiver": RECEIVER, "group_by": list(GROUP_BY), "group_wait": GROUP_WAIT,
            "group_interval": GROUP_INTERVAL, "repeat_interval": REPEAT_INTERVAL,
            "routes": [{"receiver": RECEIVER, "matchers": [f'alertname="{HEARTBEAT}"'], "group_wait": "0s",
                        "repeat_interval": HEARTBEAT_REPEAT}],
        },
        "inhibit_rules": [{"source_matchers": [f'alertname="{ENDPOINT_DOWN}"'],
                           "target_matchers": [f'{KIND_LABEL}="pd"', f'{SEVERITY_LABEL}="{INHIBITED_SEVERITY}"'],
                           "equal": ["namespace", "endpoint"]}],
        "receivers": [{"name": RECEIVER, "sns_configs": sns}],
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as literal blocks (``|``), the form AMP's user guide shows."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _dump(value: Any) -> str:
    # No line wrapping: a CDK token inside a long string must stay in one piece.
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, width=1 << 30, default_flow_style=False)


def alertmanager_text(region: str, topic_arns: Sequence[str]) -> str:
    """The Alertmanager configuration file itself (what ``amtool check-config`` reads)."""
    return _dump(alertmanager_config(region, topic_arns))


def alert_manager_definition(region: str, topic_arns: Sequence[str]) -> str:
    """The workspace's alert manager definition: ``alertmanager_config`` holding the configuration text (AMP
    user guide, "Upload your alert manager configuration file": the definition is YAML with that key)."""
    return _dump({"alertmanager_config": alertmanager_text(region, topic_arns)})
