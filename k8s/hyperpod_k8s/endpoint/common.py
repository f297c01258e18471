"""Spec parts the DPD endpoint and the colocated baseline share, so the two cannot drift apart."""

from __future__ import annotations

from typing import Any

import cdk8s

from hyperpod_k8s.endpoint import defaults as d
from hyperpod_k8s.endpoint.props import EndpointProps, WorkerRequests
from hyperpod_k8s.imports.com.amazon.aws.sagemaker import inference as iec

_STRATEGY = iec.InferenceEndpointConfigSpecIntelligentRoutingSpecRoutingStrategy
#: ``intelligentRoutingSpec.routingStrategy``: the config's names -> the CRD enum [CRD].
ROUTING_STRATEGIES: dict[str, Any] = {"prefixaware": _STRATEGY.PREFIXAWARE, "kvaware": _STRATEGY.KVAWARE,
                                      "session": _STRATEGY.SESSION, "roundrobin": _STRATEGY.ROUNDROBIN}


def metadata(p: EndpointProps, mode: str) -> cdk8s.ApiObjectMetadata:
    return cdk8s.ApiObjectMetadata(
        name=p.name, namespace=p.namespace,
        labels={**p.labels, d.MODE_LABEL: mode},
        annotations={d.AZ_ID_ANNOTATION: p.availability_zone_id},
    )


def gpu_resources(gpus: int, requests: WorkerRequests) -> dict[str, Any]:
    """Requests and limits of one worker: ``gpus`` GPUs (extended resources need a limit equal to the request)
    and the CPU and memory derived from its node (:meth:`hyperpod_core.config.spec.EndpointSpec.worker_requests`)."""
    values = {"cpu": requests.cpu, "memory": f"{requests.memory_gib}Gi", d.GPU_RESOURCE: gpus}
    return {"requests": values, "limits": {d.GPU_RESOURCE: gpus}}


def model_source(p: EndpointProps) -> iec.InferenceEndpointConfigSpecModelSourceConfig:
    return iec.InferenceEndpointConfigSpecModelSourceConfig(
        model_source_type=iec.InferenceEndpointConfigSpecModelSourceConfigModelSourceType.S3,
        s3_storage=iec.InferenceEndpointConfigSpecModelSourceConfigS3Storage(
            bucket_name=p.bucket_name, region=p.region),
        model_location=p.model_location,
    )


def worker(p: EndpointProps, *, args: tuple[str, ...], env: tuple[tuple[str, str], ...]
           ) -> iec.InferenceEndpointConfigSpecWorker:
    """``worker``. For DPD its ``resources`` are ignored (each role's win) but the CRD requires them."""
    resources = gpu_resources(p.gpus_per_replica, p.worker_requests)
    return iec.InferenceEndpointConfigSpecWorker(
        image=p.image,
        args=list(args),
        environment_variables=[iec.InferenceEndpointConfigSpecWorkerEnvironmentVariables(name=k, value=v)
                               for k, v in env],
        model_invocation_port=iec.InferenceEndpointConfigSpecWorkerModelInvocationPort(
            container_port=p.container_port, name="http"),
        model_volume_mount=iec.InferenceEndpointConfigSpecWorkerModelVolumeMount(
            name=d.MODEL_VOLUME_NAME, mount_path=p.model_path),
        resources=iec.InferenceEndpointConfigSpecWorkerResources(
            requests=quantities(iec.InferenceEndpointConfigSpecWorkerResourcesRequests, resources["requests"]),
            limits=quantities(iec.InferenceEndpointConfigSpecWorkerResourcesLimits, resources["limits"]),
        ),
    )


def quantities(cls: Any, values: dict[str, int | str]) -> dict[str, Any]:
    """Typed int-or-string quantities (``from_number`` / ``from_string`` of the generated class)."""
    return {k: cls.from_number(v) if isinstance(v, int) else cls.from_string(v) for k, v in values.items()}


def load_balancer(p: EndpointProps) -> iec.InferenceEndpointConfigSpecLoadBalancer:
    """``loadBalancer``: vLLM's health path, and the idle timeout the workload needs (operator v3.3)."""
    return iec.InferenceEndpointConfigSpecLoadBalancer(
        health_check_path=d.HEALTH_CHECK_PATH, idle_timeout_seconds=p.load_balancer_idle_timeout_seconds)


def model_cache_config(p: EndpointProps) -> iec.InferenceEndpointConfigSpecModelCacheConfig:
    """``modelCacheConfig`` (operator v3.3): only what AWS's model-caching page has users write; the operator
    creates the ModelImageCache and the ModelWeightsCacheConfig itself. ``hostPath`` only with the cache on."""
    return iec.InferenceEndpointConfigSpecModelCacheConfig(
        image_cache=iec.InferenceEndpointConfigSpecModelCacheConfigImageCache(enabled=p.image_cache),
        weights_cache=iec.InferenceEndpointConfigSpecModelCacheConfigWeightsCache(
            enabled=p.weights_cache, host_path=p.weights_cache_host_path if p.weights_cache else None),
    )


def shared_spec(p: EndpointProps) -> dict[str, Any]:
    """Keyword arguments of ``InferenceEndpointConfigSpec`` common to both manifests (not ``instanceType``: the DPD
    manifest sets it, the colocated one places by ``nodeAffinity``, which the CRD makes "mutually exclusive with
    instanceType")."""
    kv_l2 = (iec.InferenceEndpointConfigSpecKvCacheSpecL2CacheSpec(
        l2_cache_backend=p.l2_cache_backend, l2_cache_local_url=p.l2_cache_local_url)
        if p.kv_cache_l2 else None)
    return {
        "model_name": p.model_name,
        "invocation_endpoint": p.invocation_path,
        "tags": [iec.InferenceEndpointConfigSpecTags(name=k, value=v) for k, v in p.tags],
        "model_source_config": model_source(p),
        "load_balancer": load_balancer(p),
        "model_cache_config": model_cache_config(p),
        "metrics": iec.InferenceEndpointConfigSpecMetrics(
            enabled=True, metrics_scrape_interval_seconds=p.scrape_interval_seconds,
            model_metrics=iec.InferenceEndpointConfigSpecMetricsModelMetrics(
                path=d.METRICS_PATH, port=p.container_port)),
        "kv_cache_spec": iec.InferenceEndpointConfigSpecKvCacheSpec(
            enable_l1_cache=p.kv_cache_l1, enable_l2_cache=p.kv_cache_l2, l2_cache_spec=kv_l2),
        "intelligent_routing_spec": iec.InferenceEndpointConfigSpecIntelligentRoutingSpec(
            enabled=True,
            routing_strategy=ROUTING_STRATEGIES[p.routing_strategy]),
    }
