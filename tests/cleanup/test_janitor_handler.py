"""The janitor's Delete flow against moto (SageMaker, ELBv2, ACM, CloudFormation) and a fake Kubernetes API."""

from __future__ import annotations

import datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from janitor_fakes import CLUSTER, DEPLOYMENT, OPERATOR_TAGS, OURS, REGION, FakeClock, FakeKubeApi
from stack_fakes import DELETE_STATUSES, UPDATE_STATUSES, set_stack_status

from aws_faults import fail_first
from hyperpod_constructs.endpoint_janitor_handler import index
from hyperpod_runtime.cleanup import THROTTLING_CODES, Janitor
from hyperpod_runtime.eks.kube import KubeClient, Response
from hyperpod_runtime.stack_status import StackStatusRefused

WAIT_SECONDS = 1500
PROPS = {"ClusterName": CLUSTER, "ClusterArn": f"arn:aws:eks:us-west-2:123456789012:cluster/{CLUSTER}",
         "WaitSeconds": str(WAIT_SECONDS), "DeploymentTagKey": "deployment", "DeploymentTagValue": DEPLOYMENT}


# -- helpers ----------------------------------------------------------------------------------------

def make_endpoint(sm: Any, name: str, tags: list[dict[str, str]]) -> str:
    sm.create_model(ModelName=f"{name}-model", ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
                    PrimaryContainer={"Image": "image"})
    sm.create_endpoint_config(EndpointConfigName=f"{name}-config", ProductionVariants=[{
        "VariantName": "v", "ModelName": f"{name}-model", "InitialInstanceCount": 1,
        "InstanceType": "ml.m5.large"}])
    return sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config", Tags=tags)["EndpointArn"]


def make_alb(aws: dict[str, Any], name: str, cluster: str) -> tuple[str, str]:
    elb, vpc, subnets = aws["elbv2"], aws["vpc_id"], aws["subnet_ids"]
    tags = [{"Key": "elbv2.k8s.aws/cluster", "Value": cluster}, {"Key": "ingress.k8s.aws/stack", "Value": name}]
    lb = elb.create_load_balancer(Name=name, Subnets=subnets, Tags=tags)["LoadBalancers"][0]["LoadBalancerArn"]
    tg = elb.create_target_group(Name=f"{name}-tg", Protocol="HTTP", Port=8080, VpcId=vpc, TargetType="ip",
                                 Tags=tags)["TargetGroups"][0]["TargetGroupArn"]
    return lb, tg


def make_certificate(acm: Any, domain: str, tags: list[dict[str, str]]) -> str:
    return acm.request_certificate(DomainName=domain, Tags=tags)["CertificateArn"]


def janitor_factory(kube_api: FakeKubeApi | None, aws: dict[str, Any], clock: FakeClock,
                    wrap: dict[str, Any] | None = None, *, kube: KubeClient | None = None):
    """Janitors on ``aws``'s clients (those of ``wrap`` instead, where given) and on ``kube``, else a
    :class:`KubeClient` straight on ``kube_api`` (no HTTP, no retries)."""
    def factory(props: dict[str, Any]) -> Janitor:
        client = kube or (KubeClient(kube_api) if kube_api is not None else None)
        clients = {**{k: aws[k] for k in ("sagemaker", "elbv2", "acm", "ec2")}, **(wrap or {})}
        return Janitor(cluster_name=props["ClusterName"], cluster_arn=props["ClusterArn"], kube=client,
                       deployment_tag=index.deployment_tag(props), **clients)
    return factory


LOGICAL_ID = "EndpointJanitor4EF4A0F0"


def delete_event(stack_id: str) -> dict[str, Any]:
    return {"RequestType": "Delete", "PhysicalResourceId": f"endpoint-janitor-{CLUSTER}",
            "StackId": stack_id, "LogicalResourceId": LOGICAL_ID, "ResourceProperties": dict(PROPS)}


def run_delete(factory, clock: FakeClock, stack_id: str) -> dict[str, Any]:
    """on_event, then the framework's merge of its result into the event is_complete receives. ``stack_id``:
    the stack holding the janitor (moto; ``aws["stack_id"]`` is being deleted)."""
    result = index.on_event(delete_event(stack_id), factory=factory, clock=clock)
    return {**delete_event(stack_id), **result}


@pytest.fixture
def deployed(kube_api: FakeKubeApi, aws: dict[str, Any]) -> dict[str, str]:
    """What one DPD endpoint leaves behind: two objects, an endpoint, an ALB + target group, a certificate.
    The endpoint carries this deployment's tags (spec.tags propagated); the certificate only the operator's,
    and the IEC's status names it (status.tlsCertificate.certificateARN, CRD)."""
    cert = make_certificate(aws["acm"], "llama.example.com", OPERATOR_TAGS)
    kube_api.add("inferenceendpointconfigs", "default", "llama-dpd", spec={"endpointName": "llama-dpd-ep"},
                 status={"tlsCertificate": {"certificateARN": cert}})
    kube_api.add("inferenceendpointconfigs", "team-a", "qwen", spec={"endpointName": ""})
    kube_api.add("jumpstartmodels", "default", "mistral", spec={"sageMakerEndpoint": {"name": "mistral-ep"}})
    lb, tg = make_alb(aws, "k8s-default-llamadpd", CLUSTER)
    return {
        "endpoint": make_endpoint(aws["sagemaker"], "llama-dpd-ep", OURS),
        # Declared by the JumpStartModel; counted as ours by name even without the operator tag.
        "js_endpoint": make_endpoint(aws["sagemaker"], "mistral-ep", []),
        "lb": lb, "tg": tg, "cert": cert,
    }


def operator_cleans_up(kube_api: FakeKubeApi, aws: dict[str, Any], resources: dict[str, str]) -> None:
    """What the operator's finalizers do once the objects are deleted."""
    kube_api.finalize()
    aws["sagemaker"].delete_endpoint(EndpointName="llama-dpd-ep")
    aws["sagemaker"].delete_endpoint(EndpointName="mistral-ep")
    aws["elbv2"].delete_load_balancer(LoadBalancerArn=resources["lb"])
    aws["elbv2"].delete_target_group(TargetGroupArn=resources["tg"])
    aws["acm"].delete_certificate(CertificateArn=resources["cert"])


# -- Create / Update ----------------------------------------------------------------------------------

def test_create_returns_a_physical_id_and_touches_nothing(kube_api: FakeKubeApi, clock: FakeClock) -> None:
    kube_api.add("inferenceendpointconfigs", "default", "llama")

    def factory(_: dict[str, Any]) -> Janitor:
        raise AssertionError("Create must not build clients")

    result = index.on_event({"RequestType": "Create", "ResourceProperties": dict(PROPS)},
                            factory=factory, clock=clock)
    assert result == {"PhysicalResourceId": f"endpoint-janitor-{CLUSTER}"}
    assert index.is_complete({"RequestType": "Create", **result}, factory=factory) == {"IsComplete": True}
    assert kube_api.calls == []


def test_update_keeps_the_physical_id_so_it_never_triggers_a_cleanup(clock: FakeClock) -> None:
    event = {"RequestType": "Update", "PhysicalResourceId": "endpoint-janitor-old-name",
             "ResourceProperties": {**PROPS, "ClusterName": "renamed"}}
    assert index.on_event(event, clock=clock) == {"PhysicalResourceId": "endpoint-janitor-old-name"}


# -- a Delete during an update deletes nothing ------------------------------------------------------------
# CloudFormation sends Delete to a custom resource when the stack is deleted, and also during an update: when the
# resource leaves the template or is replaced (its old self is deleted in UPDATE_COMPLETE_CLEANUP_IN_PROGRESS, "Monitor
# the progress of a stack update") and when a failed update that created it rolls back (User Guide, "Delete"
# custom resource request type; "Stack status codes"). The stack's status is set on moto's backend (stack_fakes).

#: The review's run (review-4 lifecycle #1): two live InferenceEndpointConfigs of the cluster.
LIVE_IECS = (("default", "llama-3-3-70b"), ("team-x", "prod-model"))


@pytest.fixture
def live_endpoints(kube_api: FakeKubeApi, aws: dict[str, Any]) -> list[str]:
    """Two live IECs and the SageMaker endpoint of one of them; the API paths a deletion of the IECs DELETEs."""
    for namespace, name in LIVE_IECS:
        kube_api.add("inferenceendpointconfigs", namespace, name, spec={"endpointName": f"{name}-ep"})
    make_endpoint(aws["sagemaker"], "llama-3-3-70b-ep", OURS)
    return [f"/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/{ns}/inferenceendpointconfigs/{name}"
            for ns, name in LIVE_IECS]


def _deletes(kube_api: FakeKubeApi) -> list[str]:
    return sorted(path.split("?")[0] for method, path in kube_api.calls if method == "DELETE")


def _endpoints(aws: dict[str, Any]) -> set[str]:
    return {e["EndpointName"] for e in aws["sagemaker"].list_endpoints()["Endpoints"]}


@pytest.mark.parametrize("status", UPDATE_STATUSES)
def test_a_delete_during_an_update_deletes_no_endpoint(
        status: str, kube_api: FakeKubeApi, aws: dict[str, Any], live_endpoints: list[str], clock: FakeClock,
        caplog: pytest.LogCaptureFixture) -> None:
    """Fails on main: a Delete sent during an update rollback put both live IECs into deletion (their finalizers
    then remove the endpoints). Now on_event and is_complete read the stack's status, log the skip and succeed."""
    set_stack_status(aws["stack_id"], status)
    factory = janitor_factory(kube_api, aws, clock)
    with caplog.at_level("INFO"):
        event = run_delete(factory, clock, aws["stack_id"])
        clock.now += 30
        assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": True}

    assert _deletes(kube_api) == []
    assert not any(o["metadata"].get("deletionTimestamp") for o in kube_api.objects.values())
    assert _endpoints(aws) == {"llama-3-3-70b-ep"}
    assert f"is {status}, not being deleted" in caplog.text and "left as it is" in caplog.text


@pytest.mark.parametrize("status", DELETE_STATUSES)
def test_the_stacks_deletion_deletes_every_endpoint(
        status: str, kube_api: FakeKubeApi, aws: dict[str, Any], live_endpoints: list[str], clock: FakeClock) -> None:
    """``cdk destroy`` (DELETE_IN_PROGRESS), and the rollback of a failed first create (ROLLBACK_IN_PROGRESS: the
    whole stack goes)."""
    set_stack_status(aws["stack_id"], status)
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])
    assert _deletes(kube_api) == live_endpoints

    kube_api.finalize()  # the operator's finalizers: objects gone, and their endpoint (moto) with them
    aws["sagemaker"].delete_endpoint(EndpointName="llama-3-3-70b-ep")
    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": True}


def _stubbed_cloudformation() -> tuple[Any, Stubber]:
    """CloudFormation with botocore's Stubber on the real service model (moto does not enforce IAM)."""
    client = boto3.client("cloudformation", region_name=REGION)
    return client, Stubber(client)


def test_a_refused_status_read_deletes_nothing_and_fails_the_delete_at_once(
        kube_api: FakeKubeApi, aws: dict[str, Any], live_endpoints: list[str], clock: FakeClock) -> None:
    """Fail safe and loud: without the status nothing may be deleted (it could be an update), and a stack deletion
    must not go on without the cleanup (what the operator made would then block the network's deletion). A stack
    that does not exist (``ValidationError``) will not appear later: the Delete fails at once. The message says
    what helps."""
    cloudformation, stubber = _stubbed_cloudformation()
    stubber.add_client_error(
        "describe_stacks", service_error_code="ValidationError", http_status_code=400,
        service_message=f"Stack with id {aws['stack_id']} does not exist",
        expected_params={"StackName": aws["stack_id"]})
    with stubber, pytest.raises(StackStatusRefused) as failure:
        index.on_event(delete_event(aws["stack_id"]), factory=janitor_factory(kube_api, aws, clock), clock=clock,
                       cloudformation=cloudformation)

    assert _deletes(kube_api) == []
    message = str(failure.value)
    assert "ValidationError" in message and "Nothing was deleted" in message
    assert "Grant cloudformation:DescribeStacks on the stack" in message
    assert (f"if this is a stack deletion, it can also be finished keeping what this resource would have deleted: "
            f"aws cloudformation delete-stack --stack-name {aws['stack_id']} --retain-resources "
            f"{LOGICAL_ID}") in message


def test_a_denied_status_read_is_retried_until_half_the_deadline(
        kube_api: FakeKubeApi, aws: dict[str, Any], live_endpoints: list[str], clock: FakeClock) -> None:
    """``AccessDenied`` may be a policy created seconds before (a failed first create rolls back at once) that IAM
    does not show yet (IAM User Guide, "Troubleshoot IAM": "Changes that I make are not always immediately
    visible"): the janitor tries again on each poll, deleting nothing, and fails with the refusal's message only
    once half its deadline has passed. Fails on main, which failed the Delete at the first denial."""
    cloudformation, stubber = _stubbed_cloudformation()
    for _ in range(3):
        stubber.add_client_error(
            "describe_stacks", service_error_code="AccessDenied", http_status_code=403,
            service_message="User: arn:aws:sts::123456789012:assumed-role/janitor/x is not authorized to perform: "
                            "cloudformation:DescribeStacks", expected_params={"StackName": aws["stack_id"]})
    factory = janitor_factory(kube_api, aws, clock)
    with stubber:
        event = {**delete_event(aws["stack_id"]), **index.on_event(
            delete_event(aws["stack_id"]), factory=factory, clock=clock, cloudformation=cloudformation)}
        started, deadline = float(event["Data"]["StartedAt"]), float(event["Data"]["Deadline"])
        clock.now = started + (deadline - started) / 2 - 1
        assert index.is_complete(event, factory=factory, clock=clock, cloudformation=cloudformation) == {
            "IsComplete": False}
        clock.now += 1
        with pytest.raises(StackStatusRefused) as failure:
            index.is_complete(event, factory=factory, clock=clock, cloudformation=cloudformation)

    assert _deletes(kube_api) == []
    assert "AccessDenied" in str(failure.value) and "Nothing was deleted" in str(failure.value)
    assert f"--retain-resources {LOGICAL_ID}" in str(failure.value)


def test_a_throttled_status_read_deletes_nothing_until_the_status_is_known(
        kube_api: FakeKubeApi, aws: dict[str, Any], live_endpoints: list[str], clock: FakeClock) -> None:
    """Throttling (after botocore's retries) is retried on the next poll; once the status says the stack is being
    deleted the cleanup starts, and throttling that lasts past the deadline fails naming DescribeStacks."""
    cloudformation, stubber = _stubbed_cloudformation()
    stack = {"StackName": "dpd-platform", "StackId": aws["stack_id"], "StackStatus": "DELETE_IN_PROGRESS",
             "CreationTime": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)}
    for _ in range(2):
        stubber.add_client_error("describe_stacks", service_error_code="Throttling", service_message="Rate exceeded",
                                 http_status_code=400)
    stubber.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": aws["stack_id"]})
    stubber.add_client_error("describe_stacks", service_error_code="Throttling", service_message="Rate exceeded",
                             http_status_code=400)
    factory = janitor_factory(kube_api, aws, clock)
    with stubber:
        event = {**delete_event(aws["stack_id"]), **index.on_event(
            delete_event(aws["stack_id"]), factory=factory, clock=clock, cloudformation=cloudformation)}
        assert _deletes(kube_api) == []
        assert index.is_complete(event, factory=factory, clock=clock, cloudformation=cloudformation) == {
            "IsComplete": False}
        assert _deletes(kube_api) == []

        assert index.is_complete(event, factory=factory, clock=clock, cloudformation=cloudformation) == {
            "IsComplete": False}
        assert _deletes(kube_api) == live_endpoints

        clock.now = float(event["Data"]["Deadline"])
        with pytest.raises(RuntimeError, match=r"(?s)Last error: DescribeStacks .* Throttling Rate exceeded"):
            index.is_complete(event, factory=factory, clock=clock, cloudformation=cloudformation)


# -- Delete: success ----------------------------------------------------------------------------------

def test_delete_requests_deletion_of_every_object_in_all_namespaces(
        kube_api: FakeKubeApi, aws: dict[str, Any], deployed: dict[str, str], clock: FakeClock) -> None:
    event = run_delete(janitor_factory(kube_api, aws, clock), clock, aws["stack_id"])

    deletes = sorted(path.split("?")[0] for method, path in kube_api.calls if method == "DELETE")
    assert deletes == [
        "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs/llama-dpd",
        "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/jumpstartmodels/mistral",
        "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/team-a/inferenceendpointconfigs/qwen",
    ]
    assert event["Data"]["EndpointNames"] == "llama-dpd-ep,mistral-ep"
    assert float(event["Data"]["Deadline"]) == clock.now + WAIT_SECONDS


def test_delete_completes_once_finalizers_have_removed_everything(
        kube_api: FakeKubeApi, aws: dict[str, Any], deployed: dict[str, str], clock: FakeClock) -> None:
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])

    clock.now += 30
    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": False}
    assert all(o["metadata"].get("deletionTimestamp") for o in kube_api.objects.values())

    operator_cleans_up(kube_api, aws, deployed)
    clock.now += 30
    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": True}


def test_a_pending_endpoint_of_this_deployment_alone_keeps_the_janitor_waiting(
        kube_api: FakeKubeApi, aws: dict[str, Any], deployed: dict[str, str], clock: FakeClock) -> None:
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])
    operator_cleans_up(kube_api, aws, deployed)
    make_endpoint(aws["sagemaker"], "late-ep", OURS)

    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": False}


def test_an_operator_endpoint_of_unknown_owner_is_reported_not_waited_for(
        kube_api: FakeKubeApi, aws: dict[str, Any], deployed: dict[str, str], clock: FakeClock,
        caplog: pytest.LogCaptureFixture) -> None:
    """Fails on main, which waited for (and after half the budget deleted) every CreatedBy=HyperPodInference
    endpoint in the region: another deployment's included."""
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])
    operator_cleans_up(kube_api, aws, deployed)
    make_endpoint(aws["sagemaker"], "someone-elses-ep", OPERATOR_TAGS)

    with caplog.at_level("INFO"):
        assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": True}
    assert [e["EndpointName"] for e in aws["sagemaker"].list_endpoints()["Endpoints"]] == ["someone-elses-ep"]
    assert "left alone (not this deployment's): SageMaker endpoint someone-elses-ep" in caplog.text
    assert "owner unknown" in caplog.text


def test_resources_of_other_clusters_and_untagged_ones_are_ignored(
        kube_api: FakeKubeApi, aws: dict[str, Any], clock: FakeClock) -> None:
    make_endpoint(aws["sagemaker"], "other-cluster-ep",
                  [*OPERATOR_TAGS, {"Key": "sagemaker.amazonaws.com/cluster-name", "Value": "other"}])
    make_endpoint(aws["sagemaker"], "hand-made-ep", [{"Key": "team", "Value": "x"}])
    make_alb(aws, "k8s-other-alb", "other")
    make_certificate(aws["acm"], "mine.example.com", [{"Key": "CreatedBy", "Value": "me"}])
    factory = janitor_factory(kube_api, aws, clock)

    event = run_delete(factory, clock, aws["stack_id"])
    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": True}


def test_our_cluster_tag_by_arn_counts_as_ours(aws: dict[str, Any], clock: FakeClock) -> None:
    make_endpoint(aws["sagemaker"], "tagged-ep", [*OPERATOR_TAGS, {"Key": "HyperPodCluster",
                                                                   "Value": PROPS["ClusterArn"]}])
    janitor = janitor_factory(None, aws, clock)(PROPS)
    # The endpoint and the endpoint config and model make_endpoint created for it (untagged: not the operator's).
    assert [x.name for x in janitor.leftovers()] == ["tagged-ep"]


# -- Delete: timeout ----------------------------------------------------------------------------------

def test_timeout_fails_with_one_message_naming_every_leftover(
        kube_api: FakeKubeApi, aws: dict[str, Any], deployed: dict[str, str], clock: FakeClock) -> None:
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])
    clock.now += WAIT_SECONDS

    with pytest.raises(RuntimeError) as failure:
        index.is_complete(event, factory=factory, clock=clock)

    message = str(failure.value)
    assert message.startswith("EndpointJanitor: after 25 min, 7 resource(s)")
    for expected in ("InferenceEndpointConfig default/llama-dpd", "InferenceEndpointConfig team-a/qwen",
                     "JumpStartModel default/mistral", "finalizers inference.sagemaker.aws.amazon.com/finalizer",
                     "SageMaker endpoint llama-dpd-ep", deployed["endpoint"],
                     "Load balancer k8s-default-llamadpd", deployed["lb"], deployed["tg"],
                     f"ACM certificate llama.example.com ({deployed['cert']})",
                     "kubectl -n hyperpod-inference-system logs", "run cdk destroy again"):
        assert expected in message, expected
    # Declared by the JumpStartModel only (untagged): reported in the log, not a leftover of this deployment.
    assert "SageMaker endpoint mistral-ep" not in message and "Left alone: 1 resource(s)" in message


def test_timeout_message_offers_what_helps_not_kubectl_delete(
        kube_api: FakeKubeApi, aws: dict[str, Any], deployed: dict[str, str], clock: FakeClock) -> None:
    """The objects are already being deleted (the janitor asked), so ``kubectl delete`` changes nothing:
    removing the finalizer or retaining the janitor (``DeleteStack --retain-resources``, valid on a stack in
    DELETE_FAILED: CloudFormation DeleteStack API reference) does. Fails on main (it suggested kubectl delete)."""
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])
    clock.now += WAIT_SECONDS

    with pytest.raises(RuntimeError) as failure:
        index.is_complete(event, factory=factory, clock=clock)
    message = str(failure.value)
    assert "kubectl delete" not in message
    assert "kubectl patch <kind> -n <ns> <name> --type=merge" in message and '"finalizers":null' in message
    assert f"aws cloudformation delete-stack --stack-name {aws['stack_id']} --retain-resources {LOGICAL_ID}" in message


def test_timeout_message_stays_short_with_many_leftovers(
        kube_api: FakeKubeApi, aws: dict[str, Any], clock: FakeClock) -> None:
    for i in range(40):
        kube_api.add("inferenceendpointconfigs", "default", f"model-{i:02d}")
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])
    clock.now += WAIT_SECONDS + 1

    with pytest.raises(RuntimeError, match=r"and 25 more") as failure:
        index.is_complete(event, factory=factory, clock=clock)
    assert len(str(failure.value)) < 3000


# -- Delete: already gone -----------------------------------------------------------------------------

def test_objects_already_gone_or_crds_uninstalled_count_as_done(
        kube_api: FakeKubeApi, aws: dict[str, Any], clock: FakeClock) -> None:
    kube_api.served_crds.clear()  # the operator (and its CRDs) are already uninstalled: list returns 404
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])

    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": True}


def test_delete_of_an_object_that_vanished_after_listing_is_success(kube_api: FakeKubeApi) -> None:
    kube_api.script.append(Response(404, b'{"message":"not found"}'))
    assert KubeClient(kube_api).delete("jumpstartmodels", "default", "gone") is False


def test_deleted_eks_cluster_means_nothing_to_delete_in_kubernetes(aws: dict[str, Any], clock: FakeClock) -> None:
    janitor = index.make_janitor(PROPS)  # moto has no such EKS cluster: DescribeCluster -> NotFound

    assert janitor.request_deletion().requested == ()
    assert janitor.leftovers() == []


def test_objects_without_finalizers_disappear_at_once(
        kube_api: FakeKubeApi, aws: dict[str, Any], clock: FakeClock) -> None:
    kube_api.add("inferenceendpointconfigs", "default", "plain", finalizers=())
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])

    assert kube_api.objects == {}
    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": True}


# -- throttling ---------------------------------------------------------------------------------------

def test_kubernetes_429_is_retried_honouring_retry_after(
        kube_api: FakeKubeApi, https_kube: KubeClient, aws: dict[str, Any], deployed: dict[str, str],
        clock: FakeClock) -> None:
    kube_api.script += [Response(429, headers={"Retry-After": "3"}), Response(429)]
    run_delete(janitor_factory(kube_api, aws, clock, kube=https_kube), clock, aws["stack_id"])

    assert clock.sleeps[:2] == [3.0, 2.0]  # Retry-After first, then urllib3's backoff (1 s * 2**1)
    assert all(o["metadata"].get("deletionTimestamp") for o in kube_api.objects.values())


def test_kubernetes_throttling_that_persists_is_retried_on_the_next_poll(
        kube_api: FakeKubeApi, https_kube: KubeClient, aws: dict[str, Any], deployed: dict[str, str],
        clock: FakeClock) -> None:
    factory = janitor_factory(kube_api, aws, clock, kube=https_kube)
    kube_api.script += [Response(429)] * 6  # every attempt of the first list call
    event = run_delete(factory, clock, aws["stack_id"])      # not fatal: is_complete re-requests the deletions
    assert not any(o["metadata"].get("deletionTimestamp") for o in kube_api.objects.values())
    assert len(clock.sleeps) == 4 and max(clock.sleeps) <= 20.0  # urllib3: no wait before the first retry

    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": False}
    assert all(o["metadata"].get("deletionTimestamp") for o in kube_api.objects.values())


def test_the_throttling_codes_are_those_botocore_retries() -> None:
    """What the janitor leaves for the next poll is what botocore's retry modes retry first (botocore
    ``retries/standard.py``: its throttling codes)."""
    from botocore.retries.standard import ThrottledRetryableChecker

    assert set(ThrottledRetryableChecker._THROTTLED_ERROR_CODES) >= THROTTLING_CODES


def test_aws_throttling_is_retried_by_botocore_with_bounded_backoff(
        kube_api: FakeKubeApi, aws: dict[str, Any], janitor_clients: dict[str, Any], clock: FakeClock,
        slept: list[float]) -> None:
    listed = fail_first(janitor_clients["sagemaker"], "ListEndpoints", times=2)
    described = fail_first(janitor_clients["elbv2"], "DescribeLoadBalancers", times=1, code="Throttling")
    factory = janitor_factory(kube_api, aws, clock, wrap=janitor_clients)

    event = run_delete(factory, clock, aws["stack_id"])
    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": True}
    assert (len(listed), len(described)) == (2, 1)
    # Standard mode: a random wait up to 2 ** (attempt - 1) s, at most 20 s (Boto3 guide, "Retries").
    assert len(slept) == 3 and all(0 <= s <= 2 for s in slept)


def test_throttling_past_the_deadline_fails_clearly(
        kube_api: FakeKubeApi, aws: dict[str, Any], janitor_clients: dict[str, Any], clock: FakeClock,
        slept: list[float]) -> None:
    throttled = fail_first(janitor_clients["sagemaker"], "ListEndpoints", times=100)
    factory = janitor_factory(kube_api, aws, clock, wrap=janitor_clients)
    event = run_delete(factory, clock, aws["stack_id"])

    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": False}
    assert len(throttled) == 8 and len(slept) == 7 and max(slept) <= 20  # index.BOTO_CONFIG: 8 attempts
    clock.now = float(event["Data"]["Deadline"])
    with pytest.raises(RuntimeError, match=r"(?s)could not confirm .* ListEndpoints still throttled after 8 attempts"):
        index.is_complete(event, factory=factory, clock=clock)


def test_errors_other_than_throttling_fail_at_once(kube_api: FakeKubeApi, aws: dict[str, Any],
                                                   janitor_clients: dict[str, Any], clock: FakeClock,
                                                   slept: list[float]) -> None:
    fail_first(janitor_clients["acm"], "ListCertificates", times=1, code="AccessDeniedException")
    factory = janitor_factory(kube_api, aws, clock, wrap=janitor_clients)

    with pytest.raises(ClientError, match="AccessDeniedException"):
        index.is_complete(run_delete(factory, clock, aws["stack_id"]), factory=factory, clock=clock)
    assert slept == []


def test_resources_vanishing_between_listing_and_tag_lookup_count_as_gone(
        aws: dict[str, Any], janitor_clients: dict[str, Any], clock: FakeClock) -> None:
    lb, _ = make_alb(aws, "k8s-default-racing", CLUSTER)
    make_endpoint(aws["sagemaker"], "racing-ep", OPERATOR_TAGS)
    fail_first(janitor_clients["elbv2"], "DescribeTags", times=1, code="LoadBalancerNotFound")
    fail_first(janitor_clients["sagemaker"], "ListTags", times=1, code="ValidationException")
    janitor = janitor_factory(None, aws, clock, wrap=janitor_clients)(PROPS)

    leftovers = janitor.leftovers()

    # The batch lookup failed, so each ARN was looked up alone; the endpoint's lookup said "not found".
    assert {x.arn for x in leftovers if x.kind == "Load balancer"} == {lb}
    assert not [x for x in leftovers if x.kind == "SageMaker endpoint"]


# -- start-up errors (DescribeCluster) -------------------------------------------------------------------

_REAL_SESSION = index.boto3.session.Session


class _ThrottledEksSession(_REAL_SESSION):  # type: ignore[misc,valid-type]
    """A boto3 session whose EKS client is throttled on its first ``times`` DescribeCluster requests (moto behind
    it)."""

    def __init__(self, times: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._times = times

    def client(self, *args: Any, **kwargs: Any) -> Any:
        client = super().client(*args, **kwargs)
        if client.meta.service_model.service_name == "eks":
            fail_first(client, "DescribeCluster", self._times)
        return client


def test_a_describe_cluster_throttle_at_start_is_retried(
        aws: dict[str, Any], clock: FakeClock, slept: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on main: the first DescribeCluster throttle failed the whole deletion at once."""
    monkeypatch.setattr(index.boto3.session, "Session", lambda **kw: _ThrottledEksSession(2, **kw))
    janitor = index.make_janitor(PROPS)

    assert len(slept) == 2  # botocore's retries (index.BOTO_CONFIG)
    assert janitor.request_deletion().requested == ()  # moto: the cluster does not exist any more


def test_a_persistent_start_up_throttle_waits_for_the_next_poll_then_fails_clearly(
        aws: dict[str, Any], clock: FakeClock, slept: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index.boto3.session, "Session", lambda **kw: _ThrottledEksSession(100, **kw))
    factory = index.make_janitor

    event = run_delete(factory, clock, aws["stack_id"])  # on main: ClientError ThrottlingException, deletion FAILED
    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": False}
    clock.now = float(event["Data"]["Deadline"])
    with pytest.raises(RuntimeError, match=r"(?s)could not confirm.*DescribeCluster still throttled after 8 attempts"):
        index.is_complete(event, factory=factory, clock=clock)


# -- the janitor deletes what the operator left ------------------------------------------------------------

def test_operator_gone_the_janitor_deletes_the_tagged_leftovers_itself(
        kube_api: FakeKubeApi, aws: dict[str, Any], deployed: dict[str, str], clock: FakeClock) -> None:
    """Fails on main (the janitor only reported). The operator's finalizers were removed by hand and its
    AWS resources stayed: the janitor deletes those carrying the operator's or the controller's tag, and
    leaves the endpoint whose name the objects only declare (no tag: not provably ours, and its IAM policy
    does not allow it); that one is reported, and the Delete completes with it still there."""
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])
    kube_api.objects.clear()

    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": False}

    endpoints = {e["EndpointName"] for e in aws["sagemaker"].list_endpoints()["Endpoints"]}
    assert endpoints == {"mistral-ep"}
    assert aws["elbv2"].describe_load_balancers()["LoadBalancers"] == []
    assert aws["elbv2"].describe_target_groups()["TargetGroups"] == []
    assert aws["acm"].list_certificates()["CertificateSummaryList"] == []
    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": True}
    assert {e["EndpointName"] for e in aws["sagemaker"].list_endpoints()["Endpoints"]} == {"mistral-ep"}


def test_while_the_operator_works_the_janitor_only_waits(
        kube_api: FakeKubeApi, aws: dict[str, Any], deployed: dict[str, str], clock: FakeClock) -> None:
    factory = janitor_factory(kube_api, aws, clock)
    event = run_delete(factory, clock, aws["stack_id"])
    clock.now += WAIT_SECONDS / 2 - 30

    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": False}
    assert len(aws["elbv2"].describe_load_balancers()["LoadBalancers"]) == 1

    clock.now += 60  # past half the budget with the objects still stuck: delete what carries our tags
    assert index.is_complete(event, factory=factory, clock=clock) == {"IsComplete": False}
    assert aws["elbv2"].describe_load_balancers()["LoadBalancers"] == []


def test_the_controllers_security_groups_are_deleted_after_their_references(
        aws: dict[str, Any], clock: FakeClock) -> None:
    """The load balancer controller's shared backend group (tags from its docs: elbv2.k8s.aws/cluster,
    elbv2.k8s.aws/resource=backend-sg) and the node-group rule that references it; EC2 refuses to delete
    a referenced group (DependencyViolation), so the janitor revokes the rule first. Fails on main."""
    ec2 = aws["ec2"]
    backend = ec2.create_security_group(
        GroupName=f"k8s-traffic-{CLUSTER}-0a1b2c", Description="[k8s] Shared Backend SecurityGroup",
        VpcId=aws["vpc_id"], TagSpecifications=[{"ResourceType": "security-group", "Tags": [
            {"Key": "elbv2.k8s.aws/cluster", "Value": CLUSTER},
            {"Key": "elbv2.k8s.aws/resource", "Value": "backend-sg"}]}])["GroupId"]
    nodes = ec2.create_security_group(GroupName="nodes", Description="node group", VpcId=aws["vpc_id"])["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=nodes, IpPermissions=[{
        "IpProtocol": "tcp", "FromPort": 8080, "ToPort": 8080, "UserIdGroupPairs": [{"GroupId": backend}]}])
    other = ec2.create_security_group(
        GroupName="k8s-traffic-other-1", Description="other cluster", VpcId=aws["vpc_id"],
        TagSpecifications=[{"ResourceType": "security-group", "Tags": [
            {"Key": "elbv2.k8s.aws/cluster", "Value": "other"}]}])["GroupId"]
    janitor = janitor_factory(None, aws, clock)(PROPS)

    assert [(x.kind, x.arn) for x in janitor.leftovers()] == [("Security group", backend)]
    deleted, errors = janitor.delete(janitor.leftovers())

    assert (len(deleted), errors) == (1, [])
    remaining = {g["GroupId"]: g for g in ec2.describe_security_groups(GroupIds=[nodes, other])["SecurityGroups"]}
    assert set(remaining) == {nodes, other}
    assert remaining[nodes]["IpPermissions"] == []
    assert janitor.leftovers() == []
    ec2.delete_security_group(GroupId=nodes)
    ec2.delete_security_group(GroupId=other)


def test_what_the_objects_name_is_carried_whole_and_within_the_response_limit(
        kube_api: FakeKubeApi, aws: dict[str, Any], clock: FakeClock) -> None:
    """CloudFormation refuses a custom resource response above 4096 bytes (CloudFormation custom resource
    response objects); a name cut short could match another deployment's resource, so only whole ids go."""
    for i in range(60):
        kube_api.add("inferenceendpointconfigs", "default", f"m{i:02d}", spec={"endpointName": f"ep-{i:02d}" * 4},
                     status={"endpoints": {"sagemaker": {
                         "state": "InService", "modelArn": f"arn:aws:sagemaker:us-west-2:123456789012:model/m-{i:02d}"
                         + "x" * 40}}})
    data = run_delete(janitor_factory(kube_api, aws, clock), clock, aws["stack_id"])["Data"]

    assert len(data["EndpointNames"]) + len(data["Named"]) <= 2400
    assert set(data["Named"].split(",")) <= {f"model/m-{i:02d}" + "x" * 40 for i in range(60)}
    assert set(data["EndpointNames"].split(",")) <= {f"ep-{i:02d}" * 4 for i in range(60)}
