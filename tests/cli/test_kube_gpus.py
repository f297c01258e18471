"""The command line's one GPU count (:mod:`hyperpod_dpd.kube`): what a container, a pod template and a pod ask for
in ``nvidia.com/gpu``, the request, else the limit, as ``status``, ``rollout`` and ``bench`` read it."""

from __future__ import annotations

from kubernetes import client as k8s

from hyperpod_dpd.kube import GPU_RESOURCE, pod_gpus, pod_spec_gpus


def _container(name: str, *, requests: str | None = None, limits: str | None = None) -> k8s.V1Container:
    return k8s.V1Container(name=name, resources=k8s.V1ResourceRequirements(
        requests={GPU_RESOURCE: requests} if requests is not None else None,
        limits={GPU_RESOURCE: limits} if limits is not None else None))


def _pod(*containers: k8s.V1Container, init: tuple[k8s.V1Container, ...] = (), node: str | None = "node-1",
         phase: str = "Running") -> k8s.V1Pod:
    return k8s.V1Pod(spec=k8s.V1PodSpec(containers=list(containers), init_containers=list(init), node_name=node),
                     status=k8s.V1PodStatus(phase=phase))


def test_a_pod_holds_its_containers_requests_else_their_limits() -> None:
    """A request counts without a limit beside it. Fails before: ``hyperpod_dpd.kube.pod_gpus`` read the limits
    only and gave 12 (the rollout's copy read the request)."""
    pod = _pod(_container("a", requests="4"), _container("b", limits="4"), _container("c", requests="8", limits="8"),
               k8s.V1Container(name="sidecar"))
    assert pod_gpus(pod) == 16


def test_a_larger_init_container_sets_what_the_pod_asks_for() -> None:
    """The pod's effective request is the higher of its containers' sum and its largest init container's."""
    two = _container("a", limits="2")
    assert pod_gpus(_pod(two, init=(_container("i", limits="8"), _container("j", limits="1")))) == 8
    assert pod_gpus(_pod(two, _container("b", limits="2"), init=(_container("i", limits="3"),))) == 4


def test_a_pod_not_bound_or_finished_holds_no_gpus() -> None:
    assert pod_gpus(_pod(_container("a", limits="8"), node=None)) == 0
    for phase in ("Succeeded", "Failed"):
        assert pod_gpus(_pod(_container("a", limits="8"), phase=phase)) == 0
    assert pod_gpus(_pod(_container("a", limits="8"), phase="Pending")) == 8


def test_a_pod_template_asks_for_the_same_bound_or_not() -> None:
    """``bench`` reads a Deployment's pod template, which no scheduler binds."""
    template = _pod(_container("a", limits="8"), init=(_container("i", limits="1"),), node=None).spec
    assert pod_spec_gpus(template) == 8
