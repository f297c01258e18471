"""Builds the platform test app: a stand-in cluster stack (minimal aws_eks_v2 cluster, OIDC provider,
pod identity agent, a stand-in HyperPod execution role), then the observability, observability add-on and platform
stacks as ``build()`` wires them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlatformApp:
    app: object
    cluster_stack: object
    observability: object
    observability_addon: object
    platform: object
    templates: dict


def make_platform_app(*, observability: bool = True, existing_bucket_name: str | None = None,
                      delete_on_destroy: bool = False, bucket_name: str | None = None,
                      with_hyperpod_role: bool = True, outdir: str | None = None, nag: bool = False) -> PlatformApp:
    import aws_cdk as cdk
    from aws_cdk import aws_eks_v2 as eks
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    from hyperpod_constructs.model_bucket import ModelBucketProps
    from hyperpod_infra.nag import acknowledge, add_nag
    from hyperpod_infra.stacks.observability_addon_stack import ObservabilityAddonStack, ObservabilityAddonStackProps
    from hyperpod_infra.stacks.observability_stack import ObservabilityStack, ObservabilityStackProps
    from hyperpod_infra.stacks.platform_stack import PlatformStack, PlatformStackProps

    app = cdk.App(outdir=outdir, context={"aws:cdk:disable-asset-staging": True})
    env = cdk.Environment(region="us-west-2")
    cluster_stack = cdk.Stack(app, "TestCluster", env=env)
    from aws_cdk.lambda_layer_kubectl_v33 import KubectlV33Layer

    # A kubectl provider, as the real cluster stack has: the endpoint janitor applies its RBAC through it.
    cluster = eks.Cluster(cluster_stack, "Eks", version=eks.KubernetesVersion.V1_33,
                          default_capacity_type=eks.DefaultCapacityType.NODEGROUP, default_capacity=0,
                          kubectl_provider_options=eks.KubectlProviderOptions(
                              kubectl_layer=KubectlV33Layer(cluster_stack, "Kubectl")))
    _acknowledge_kubectl_provider(cluster_stack, cluster)
    pod_identity = eks.CfnAddon(cluster_stack, "PodIdentityAgent", addon_name="eks-pod-identity-agent",
                                cluster_name=cluster.cluster_name)
    acknowledge(cluster_stack, "AwsSolutions-VPC7", "Test-only stand-in for the cluster stack")
    acknowledge(cluster_stack, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy]",
                "Test-only stand-in for the cluster stack")
    oidc = eks.OidcProviderNative(cluster_stack, "Oidc", url=cluster.cluster_open_id_connect_issuer_url)
    hyperpod_role = (iam.Role(cluster_stack, "HyperPodRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
                     if with_hyperpod_role else None)  # stands in for the HyperPod execution role
    obs = addon = None
    if observability:
        from hyperpod_core.telemetry.collection import metrics_provider

        obs = ObservabilityStack(app, "Observability", env=env,
                                 props=ObservabilityStackProps(workspace_alias="test-dpd"))
        addon = ObservabilityAddonStack(app, "ObservabilityAddon", env=env, props=ObservabilityAddonStackProps(
            cluster=cluster, prometheus=obs.prometheus, metrics_provider=metrics_provider(30),
            addon_depends_on=(pod_identity,)))
    platform = PlatformStack(app, "Platform", env=env, props=PlatformStackProps(
        cluster=cluster, oidc_provider=oidc, model_key_prefix="models/m/",
        hyperpod_cluster_arn="arn:aws:sagemaker:us-west-2:111122223333:cluster/abc123",
        model_bucket=ModelBucketProps(existing_bucket_name=existing_bucket_name, bucket_name=bucket_name,
                                      delete_on_destroy=delete_on_destroy),
        hyperpod_execution_role=hyperpod_role, prometheus=obs.prometheus if obs else None))
    if nag:
        add_nag(app)
        return PlatformApp(app, cluster_stack, obs, addon, platform, {})
    templates = {"Platform": Template.from_stack(platform)}
    if obs is not None and addon is not None:
        templates["Observability"] = Template.from_stack(obs)
        templates["ObservabilityAddon"] = Template.from_stack(addon)
    return PlatformApp(app, cluster_stack, obs, addon, platform, templates)




def _acknowledge_kubectl_provider(stack, cluster) -> None:
    """The stand-in's kubectl provider is aws-cdk-lib's own (the real cluster stack acknowledges the same)."""
    from hyperpod_infra.nag import acknowledge

    handler = cluster.node.find_child("KubectlProvider").node.find_child("Handler")
    has_ecr = stack.get_logical_id(handler.node.find_child("HasEcrPublic"))
    handler_id = stack.get_logical_id(handler.node.default_child)
    findings = [f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{p}]" for p in (
        "service-role/AWSLambdaBasicExecutionRole", "service-role/AWSLambdaVPCAccessExecutionRole",
        "AmazonEC2ContainerRegistryReadOnly")]
    findings += ["AwsSolutions-IAM4[Policy::" + '{"Fn::If":["' + has_ecr + '",{"Fn::Join":["",["arn:",{"Ref":'
                 '"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},'
                 '{"Ref":"AWS::NoValue"}]}]', "AwsSolutions-L1", f"AwsSolutions-IAM5[Resource::<{handler_id}.Arn>:*]"]
    for finding in findings:
        acknowledge(cluster, finding, "Test-only stand-in for the cluster stack: aws-cdk-lib's kubectl provider")
