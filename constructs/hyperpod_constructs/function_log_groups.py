"""Every Lambda function logs into a log group of its stack, with a retention, deleted after the function.

Our own handlers get theirs from :mod:`hyperpod_constructs.lambda_provider`. aws-cdk-lib's internal functions
(the EKS kubectl handler and its Provider framework function, the ``BucketDeployment`` handler, the
``autoDeleteObjects`` and ``CfnJson`` providers' handlers) log to ``/aws/lambda/<function name>``, a group the
Lambda service creates on the first invocation, outside CloudFormation, that never expires and outlives
``cdk destroy``. :class:`FunctionLogGroups` gives each such function a ``AWS::Logs::LogGroup`` (generated name,
the retention given, ``DeletionPolicy: Delete``) through ``LoggingConfig.LogGroup``: CloudFormation creates it
before the function and deletes it after.

Why not aws-cdk-lib's ``@aws-cdk/aws-lambda:useCdkManagedLogGroup`` (2.275.0, ``cx-api/lib/features.js`` and
``aws-lambda/lib/function.js``): it creates ``/aws/lambda/<function name>`` with ``LogGroup``'s defaults (two
years, ``RemovalPolicy.RETAIN``), for ``lambda.Function`` only (the providers' handlers are ``CfnResource``
functions), and its own text says not to enable it on an app whose functions have run: the group already
exists under that fixed name and the deploy fails, the redeploy failure this project removes elsewhere.
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct


@jsii.implements(IAspect)
class FunctionLogGroups:
    """Aspect: a log group for every ``AWS::Lambda::Function`` whose ``LoggingConfig`` names none."""

    def __init__(self, retention: logs.RetentionDays) -> None:
        self._retention = retention

    def visit(self, node: IConstruct) -> None:
        if not isinstance(node, CfnResource) or node.cfn_resource_type != "AWS::Lambda::Function":
            return
        if isinstance(node, lambda_.CfnFunction):
            config = node.logging_config
            if isinstance(config, lambda_.CfnFunction.LoggingConfigProperty) and config.log_group is not None:
                return
        # aws-cdk-lib's CustomResourceProvider handlers are plain CfnResources that set no LoggingConfig (2.275).
        scope = node.node.scope
        assert isinstance(scope, Construct), node.node.path
        construct_id = "LogGroup" if node.node.id == "Resource" else f"{node.node.id}LogGroup"
        if scope.node.try_find_child(construct_id) is not None:  # visited before
            return
        group = logs.LogGroup(scope, construct_id, retention=self._retention, removal_policy=RemovalPolicy.DESTROY)
        node.add_property_override("LoggingConfig.LogGroup", group.log_group_name)
