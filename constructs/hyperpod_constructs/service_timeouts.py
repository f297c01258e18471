"""Give every custom resource a ``ServiceTimeout`` shorter than CloudFormation's default hour.

Without it, a custom resource whose handler dies without answering (Lambda crash, out of memory, a lost
response) holds the stack for one hour before CloudFormation gives up (aws/aws-cdk#33837; CloudFormation
``AWS::CloudFormation::CustomResource`` ``ServiceTimeout``: 1-3600 seconds, default 3600).

:class:`ServiceTimeouts` is an aspect: apply it to a stack (or the app) and it sets ``ServiceTimeout`` on
every custom resource that does not carry one yet, including the ones aws-cdk-lib creates for us (kubectl
provider, bucket deployment, auto-delete objects). Constructs of ours that wait longer than the default
(Provider-framework waiters) set their own value with :func:`set_service_timeout`, which the aspect keeps.
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, Duration, IAspect
from constructs import IConstruct

#: CloudFormation's own limit (and default) for ``ServiceTimeout``.
CLOUDFORMATION_MAX = Duration.hours(1)
#: The default for a single-Lambda handler: Lambda's 15-minute maximum plus 5 minutes of margin for the
#: Provider framework's own function and the response round trip.
DEFAULT_SERVICE_TIMEOUT = Duration.minutes(20)
_MARK = "hyperpod:serviceTimeoutSeconds"


def is_custom_resource(node: IConstruct) -> bool:
    return isinstance(node, CfnResource) and (
        node.cfn_resource_type.startswith("Custom::")
        or node.cfn_resource_type == "AWS::CloudFormation::CustomResource")


def set_service_timeout(resource: CfnResource, timeout: Duration) -> None:
    """Set ``ServiceTimeout`` on one custom resource; must stay below CloudFormation's hour."""
    seconds = int(timeout.to_seconds())
    if not 60 <= seconds < CLOUDFORMATION_MAX.to_seconds():
        raise ValueError(f"ServiceTimeout must be between 60 s and below 3600 s, got {seconds} s")
    resource.add_property_override("ServiceTimeout", str(seconds))
    resource.node.add_metadata(_MARK, seconds)


@jsii.implements(IAspect)
class ServiceTimeouts:
    """Sets ``ServiceTimeout`` (``default`` unless the resource already has one) on every custom resource."""

    def __init__(self, default: Duration = DEFAULT_SERVICE_TIMEOUT) -> None:
        self.default = default

    def visit(self, node: IConstruct) -> None:
        if not is_custom_resource(node):
            return
        if any(entry.type == _MARK for entry in node.node.metadata):
            return
        assert isinstance(node, CfnResource)
        set_service_timeout(node, self.default)
