"""An Amazon Managed Service for Prometheus workspace: where the HyperPod observability add-on writes and
where KEDA's Prometheus triggers read."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_aps as aps
from constructs import Construct


@dataclass(frozen=True, kw_only=True)
class ManagedPrometheusProps:
    """Props of :class:`ManagedPrometheus`."""

    alias: str
    """Workspace alias shown in the console (1-100 characters)."""


class ManagedPrometheus(Construct):
    """The workspace. Deleted on ``cdk destroy`` with its metrics: they are operational, not data to keep."""

    workspace: aps.CfnWorkspace
    workspace_arn: str
    workspace_id: str
    prometheus_endpoint: str
    """``https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-.../`` (with the trailing slash)."""
    remote_write_base: str
    """The same URL without the trailing slash, the form the observability add-on's configuration takes."""

    def __init__(self, scope: Construct, construct_id: str, *, props: ManagedPrometheusProps) -> None:
        super().__init__(scope, construct_id)
        if not 1 <= len(props.alias) <= 100:
            raise ValueError(f"alias must be 1-100 characters, got {props.alias!r}")
        self.workspace = aps.CfnWorkspace(self, "Workspace", alias=props.alias)
        self.workspace.apply_removal_policy(RemovalPolicy.DESTROY)
        self.workspace_arn = self.workspace.attr_arn
        self.workspace_id = self.workspace.attr_workspace_id
        self.prometheus_endpoint = self.workspace.attr_prometheus_endpoint
        self.remote_write_base = (
            f"https://aps-workspaces.{Aws.REGION}.{Aws.URL_SUFFIX}/workspaces/{self.workspace_id}")

    def set_alert_manager_definition(self, definition: str) -> None:
        """The workspace's alert manager definition (``AWS::APS::Workspace.AlertManagerDefinition``): YAML with an
        ``alertmanager_config`` key. Without one, AMP evaluates the rules and notifies no one."""
        if "alertmanager_config" not in definition:
            raise ValueError("definition must be alert manager YAML with an 'alertmanager_config' key")
        self.workspace.alert_manager_definition = definition
