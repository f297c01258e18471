"""The typed config: the default loads, and every validation rule fails with its one-line message.

Each case mutates a copy of config/default.yaml at one path and expects a ConfigError whose single line
names the field and what is allowed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from hyperpod_core import fit, instances
from hyperpod_core.config import (
    Config,
    ConfigError,
    az_id_prefix,
    default_control_plane_az_ids,
    load_config,
    parse_config,
)


def _set(data: dict, path: str, value: Any) -> None:
    keys = path.replace("]", "").replace("[", ".").split(".")
    node: Any = data
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    last = keys[-1]
    node[int(last) if last.isdigit() else last] = value


def _mutated(base: dict, **changes: Any) -> dict:
    data = copy.deepcopy(base)
    for path, value in changes.items():
        _set(data, path.replace("__", "."), value)
    return data


def test_default_config_is_the_aws_dpd_walkthrough(default_config: Config) -> None:
    c = default_config
    assert [g.instance_type for g in c.hyperpod.instance_groups] == ["ml.p5.48xlarge"] * 2
    assert [(g.pool, g.instance_count) for g in c.hyperpod.instance_groups] == [("prefill", 1), ("decode", 1)]
    e = c.spec().endpoint
    assert e.tensor_parallel_size == 8 and e.max_model_len == 16384
    assert e.routing_threshold_tokens == 4096
    assert e.image == "lmcache/vllm-openai:v0.4.3"
    assert c.model_bucket.delete_on_destroy is False and c.model_bucket.existing_name is None
    assert c.spec().model.s3_prefix == "models/Llama-3.3-70B-Instruct/"


def test_config_is_frozen(default_config: Config) -> None:
    with pytest.raises(Exception, match="frozen"):
        default_config.region = "eu-west-1"  # type: ignore[misc]


@pytest.mark.parametrize(("region", "prefix"), [
    ("us-west-2", "usw2"), ("us-east-1", "use1"), ("ap-northeast-1", "apne1"), ("eu-central-1", "euc1"),
    ("ap-southeast-2", "apse2"), ("sa-east-1", "sae1"), ("ap-south-1", "aps1"), ("eu-north-1", "eun1"),
])
def test_az_id_prefix(region: str, prefix: str) -> None:
    assert az_id_prefix(region) == prefix


#: A key ARN of the config's region, as the KMS Developer Guide writes one ("Key identifiers (KeyId)").
KEY_ARN = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

# (case id, {path: value}, fragment expected in the one-line message)
FAILING_CASES = [
    # naming rules (Kubernetes, SageMaker, EKS, S3)
    ("name_is_invalid", {"name": "1bad name"}, "name must start with a letter"),
    ("eks_cluster_name_is_invalid", {"eks.cluster_name": "-eks"}, "eks.cluster_name must match"),
    ("hyperpod_cluster_name_is_invalid", {"hyperpod.cluster_name": "hp_cluster"}, "hyperpod.cluster_name must be"),
    ("model_name_is_invalid", {"model.name": "llama.70b"}, "model.name must be"),
    ("endpoint_name_is_not_a_dns_label", {"endpoint.name": "Llama70B"}, "endpoint.name must be a Kubernetes DNS"),
    ("namespace_is_not_a_dns_label", {"endpoint.namespace": "my_ns"}, "endpoint.namespace must be a Kubernetes"),
    # hyperpod-dpd rollout names a blue/green revision <endpoint>-r<N> (issue 36)
    ("endpoint_name_is_a_revision_name", {"endpoint.name": "llama-r2"}, "endpoint.name must not end in -r<N>"),
    ("router_service_name_is_too_long", {"endpoint.name": "a" * 40, "endpoint.namespace": "b" * 20},
     "'<name>-<namespace>-routing-service'"),
    ("instance_group_name_is_invalid", {"hyperpod.instance_groups[1].name": "decode_1"},
     "hyperpod.instance_groups[1].name must be"),
    ("instance_group_names_repeat", {"hyperpod.instance_groups[1].name": "prefill"},
     "hyperpod.instance_groups[1].name must be unique"),
    ("bucket_name_is_invalid", {"model_bucket.existing_name": "My_Bucket"}, "model_bucket.existing_name must be"),
    ("s3_prefix_has_leading_slash", {"model.s3_prefix": "/models/x/"}, "model.s3_prefix must be"),
    ("existing_bucket_would_be_deleted", {"model_bucket.existing_name": "my-models",
                                          "model_bucket.delete_on_destroy": True},
     "model_bucket.delete_on_destroy cannot be true for an existing bucket we did not create"),
    # model_bucket: the key of an existing bucket (issue 30, item 3)
    ("bucket_key_without_an_existing_bucket", {"model_bucket.existing_kms_key_arn": KEY_ARN},
     "model_bucket.existing_kms_key_arn must be left out unless model_bucket.existing_name is set"),
    # KMS Developer Guide, "Specifying KMS keys in IAM policy statements": a key ARN, never an alias
    ("bucket_key_is_an_alias", {"model_bucket.existing_name": "kept-models",
                                "model_bucket.existing_kms_key_arn": "arn:aws:kms:us-west-2:111122223333:alias/models"},
     "model_bucket.existing_kms_key_arn must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>; not an "
     "alias"),
    ("bucket_key_is_in_another_region",
     {"model_bucket.existing_name": "kept-models",
      "model_bucket.existing_kms_key_arn": KEY_ARN.replace("us-west-2", "us-east-1")},
     "model_bucket.existing_kms_key_arn must be a key in region us-west-2 (arn:aws:kms:us-west-2:<account>:key/"),
    ("bucket_key_is_in_another_partition", {"model_bucket.existing_name": "kept-models",
                                            "model_bucket.existing_kms_key_arn": KEY_ARN.replace("aws:", "aws-cn:", 1)},
     "model_bucket.existing_kms_key_arn must be a key in region us-west-2 (arn:aws:kms:us-west-2:<account>:key/"),
    # the deprecated keys are read into model_bucket; setting an old key and its new one is refused
    ("old_and_new_bucket_name", {"model.existing_bucket_name": "old-models",
                                 "model_bucket.existing_name": "new-models"},
     "model.existing_bucket_name must be left out when model_bucket.existing_name is set (it is that key's "
     "deprecated name: keep model_bucket.existing_name only), got 'old-models'"),
    ("old_and_new_delete_on_destroy", {"model.delete_on_destroy": True, "model_bucket.delete_on_destroy": False},
     "model.delete_on_destroy must be left out when model_bucket.delete_on_destroy is set"),
    # region and the single AZ
    ("region_is_invalid", {"region": "uswest2"}, "region must be an AWS region code"),
    ("az_id_is_of_another_region", {"network.gpu_availability_zone_id": "use1-az4"},
     "network.gpu_availability_zone_id must be an AZ ID of us-west-2"),
    ("az_given_as_name_not_id", {"network.gpu_availability_zone_id": "us-west-2a"}, "must be an AZ ID"),
    ("gpu_groups_span_two_azs", {"hyperpod.instance_groups[1].availability_zone_id": "usw2-az1"},
     "must resolve to exactly one AZ ID"),
    ("gpu_subnet_az_differs_from_groups", {"hyperpod.instance_groups[0].availability_zone_id": "usw2-az1",
                                           "hyperpod.instance_groups[1].availability_zone_id": "usw2-az1"},
     "network.gpu_availability_zone_id must be the AZ ID of the GPU instance groups"),
    # instance types: DPD needs EFA RDMA
    ("instance_type_has_no_efa_rdma", {"hyperpod.instance_groups[0].instance_type": "ml.g5.48xlarge"},
     "hyperpod.instance_groups[0].instance_type must be an EFA RDMA instance type"),
    ("endpoint_instance_type_has_no_efa_rdma", {"endpoint.instance_type": "ml.p4d.24xlarge"},
     "endpoint.instance_type must be an EFA RDMA"),
    ("endpoint_instance_type_is_not_in_any_group", {"endpoint.instance_type": "ml.p5en.48xlarge"},
     "must be the instance type of at least one"),
    ("training_plan_arn_is_invalid", {"hyperpod.instance_groups[0].training_plan_arn": "plan-1"},
     "training_plan_arn must be a SageMaker training plan ARN"),
    ("deep_health_check_repeats", {"hyperpod.instance_groups[0].deep_health_checks": ["InstanceStress"] * 2},
     "must not repeat a check"),
    # parallelism and capacity
    ("tp_does_not_divide_gpus_per_node", {"endpoint.tensor_parallel_size": 3, "endpoint.prefill.gpus": 3,
                                          "endpoint.decode.gpus": 3},
     "endpoint.tensor_parallel_size must divide the 8 GPUs"),
    ("tp_exceeds_gpus_per_node", {"endpoint.tensor_parallel_size": 16}, "endpoint.tensor_parallel_size"),
    ("role_gpus_differ_from_tp", {"endpoint.decode.gpus": 4}, "endpoint.decode.gpus must equal"),
    ("role_gpus_exceed_the_instance_type", {"endpoint.decode.gpus": 16}, "endpoint.decode.gpus:"),
    ("prefill_does_not_fit_its_pool", {"endpoint.prefill.replicas": 2},
     "endpoint.prefill.replicas needs 16 GPUs at peak but instance groups for the prefill pool"),
    ("autoscaled_prefill_does_not_fit", {"endpoint.autoscaling.enabled": True,
                                         "endpoint.autoscaling.prefill.max_replicas": 3},
     "endpoint.prefill.replicas needs 24 GPUs at peak"),
    ("prefill_and_decode_exceed_all_gpus", {"hyperpod.instance_groups[0].pool": "shared",
                                            "hyperpod.instance_groups[1].pool": "shared",
                                            "hyperpod.instance_groups[1].instance_count": 0},
     "prefill + decode must fit the 8 GPUs"),
    # routing and the operator's v3.2 limits
    ("threshold_not_below_max_model_len", {"endpoint.routing_threshold_tokens": 16384},
     "endpoint.routing_threshold_tokens must be below endpoint.max_model_len (16384)"),
    ("kvaware_with_chat_path", {"endpoint.routing_strategy": "kvaware"}, "'kvaware' needs endpoint.invocation_path"),
    ("invocation_path_has_leading_slash", {"endpoint.invocation_path": "/v1/completions"},
     "endpoint.invocation_path must be a URL path"),
    # RFC 3986 section 5.2.4: a client or proxy resolves dot segments, so the path the router calls differs
    ("invocation_path_climbs_up", {"endpoint.invocation_path": "v1/../completions"},
     "endpoint.invocation_path must be a URL path without a leading '/' and without '.' or '..' segments"),
    ("more_than_one_decode_replica", {"endpoint.decode.replicas": 2,
                                      "hyperpod.instance_groups[1].instance_count": 2},
     "endpoint.decode.replicas must be <= 1"),
    ("l2_cache_without_backend", {"endpoint.kv_cache.enable_l2_cache": True},
     "endpoint.kv_cache.l2_cache_backend must be"),
    # cold start and the load balancer (operator v3.3 CRD: idleTimeoutSeconds minimum 1, maximum 4000;
    # weightsCache.hostPath 1-255 characters, default /opt/dlami/nvme)
    ("idle_timeout_above_the_crd_maximum", {"endpoint.load_balancer_idle_timeout_seconds": 4001},
     "endpoint.load_balancer_idle_timeout_seconds: Input should be less than or equal to 4000, got 4001"),
    ("idle_timeout_is_zero", {"endpoint.load_balancer_idle_timeout_seconds": 0},
     "endpoint.load_balancer_idle_timeout_seconds: Input should be greater than or equal to 1, got 0"),
    ("idle_timeout_cuts_before_the_first_token", {"endpoint.load_balancer_idle_timeout_seconds": 1},
     "endpoint.load_balancer_idle_timeout_seconds must be at least observability.slo.ttft_p95_seconds (2.5)"),
    ("weights_cache_on_the_ebs_volume", {"endpoint.model_cache.weights_cache_host_path": "/opt/sagemaker/cache"},
     "endpoint.model_cache.weights_cache_host_path must be /opt/dlami/nvme or a directory below it"),
    ("weights_cache_path_climbs_out", {"endpoint.model_cache.weights_cache_host_path": "/opt/dlami/nvme/../x"},
     "endpoint.model_cache.weights_cache_host_path must be /opt/dlami/nvme or a directory below it"),
    ("weights_cache_path_too_long", {"endpoint.model_cache.weights_cache_host_path": "/opt/dlami/nvme/" + "a" * 240},
     "at most 255 characters, got '/opt/dlami/nvme/aaaa"),
    ("weights_cache_is_not_a_boolean", {"endpoint.model_cache.weights_cache": "yes"},
     "endpoint.model_cache.weights_cache: Input should be a valid boolean"),
    ("image_is_not_pinned", {"endpoint.image": "lmcache/vllm-openai"}, "endpoint.image must be an image reference"),
    ("autoscaling_min_above_max", {"endpoint.autoscaling.prefill.min_replicas": 2},
     "endpoint.autoscaling.prefill.min_replicas must be <="),
    ("prefill_can_scale_past_what_the_decoder_admits",
     {"hyperpod.instance_groups[0].instance_count": 3, "endpoint.autoscaling.enabled": True,
      "endpoint.autoscaling.prefill.max_replicas": 3},
     "endpoint.autoscaling.prefill.max_replicas x endpoint.prefill.max_num_seqs (48 sequences) must not exceed"),
    ("decode_autoscaling_above_one", {"endpoint.autoscaling.decode.max_replicas": 2},
     "endpoint.autoscaling.decode.max_replicas must be <= 1"),
    ("decode_target_is_not_a_ratio", {"endpoint.autoscaling.decode.target_value": 80},
     "endpoint.autoscaling.decode.target_value is a KV-cache usage ratio"),
    ("autoscaling_without_observability", {"endpoint.autoscaling.enabled": True, "observability.enabled": False},
     "endpoint.autoscaling.enabled needs observability.enabled"),
    # EKS
    ("kubernetes_version_is_unsupported", {"eks.kubernetes_version": "1.27"}, "eks.kubernetes_version must be one of"),
    ("admin_principal_is_not_an_iam_arn", {"eks.admin_principal_arn": "admin"}, "eks.admin_principal_arn must be"),
    ("system_node_type_is_invalid", {"eks.system_node_group.instance_type": "big"},
     "eks.system_node_group.instance_type must be"),
    # control-plane AZ IDs (EKS user guide: no control planes in use1-az3, usw1-az2, cac1-az3)
    ("control_plane_az_of_another_region", {"network.control_plane_availability_zone_ids": ["use1-az1", "use1-az2"]},
     "network.control_plane_availability_zone_ids[0] must be an AZ ID of us-west-2"),
    ("control_plane_az_eks_does_not_support", {"region": "us-east-1", "network.gpu_availability_zone_id": "use1-az2",
                                               "network.control_plane_availability_zone_ids": ["use1-az1", "use1-az3"]},
     "network.control_plane_availability_zone_ids[1] must be an AZ ID where EKS creates control planes"),
    ("control_plane_azs_repeat", {"network.control_plane_availability_zone_ids": ["usw2-az1", "usw2-az1"]},
     "network.control_plane_availability_zone_ids must name two different AZ IDs"),
    # worker requests leave headroom: at most 90 % of the node (issue 20 item 4: ml.p5.48xlarge with ThreadsPerCore 1
    # has 96 CPUs and 2048 GiB, so at most 86 CPUs and 1843 GiB); the line names both numbers
    ("prefill_cpu_exceeds_the_node", {"endpoint.prefill.cpu": 96},
     "endpoint.prefill.cpu must be <= 86: one ml.p5.48xlarge (threads_per_core 1) leaves each of its 1 worker(s) "
     "86 CPUs (90 % of the node"),
    ("prefill_cpu_one_above_the_share", {"endpoint.prefill.cpu": 87},
     "router and sidecars), got 87"),
    ("decode_memory_exceeds_the_node", {"endpoint.decode.memory_gib": 2048},
     "endpoint.decode.memory_gib must be <= 1843: one ml.p5.48xlarge (threads_per_core 1) leaves each of its 1 "
     "worker(s) 1843 GiB"),
    ("decode_memory_one_above_the_share", {"endpoint.decode.memory_gib": 1844},
     "router and sidecars), got 1844"),
    # GPU memory adds up (issue 20 item 5; lifecycle-facts.md: on an 80 GB H100 at 0.75 a 32 GiB PD buffer does not
    # fit unless utilization drops to about 0.55). The H100's memory is what its driver reports: 81,559 MiB = 79.6 GiB
    # (PUBLISHED_DRIVER_MEMORY_MIB below): 0.75 x 79.6 = 59.7 GiB, + 32 + 3 = 94.7 GiB; a 16.9 GiB buffer is the most
    # beside 59.7 GiB and the margin, so 16 whole GiB.
    ("pd_buffer_does_not_fit_beside_vllm", {"endpoint.pd_buffer_size_bytes": 32 << 30},
     "endpoint.pd_buffer_size_bytes (32 GiB per rank) plus prefill's vLLM share (0.75 x 79.6 GiB H100 = 59.7 GiB) "
     "and the 3 GiB CUDA-graph/runtime margin must fit the GPU (94.7 GiB > 79.6 GiB): lower "
     "endpoint.gpu_memory_utilization to <= 0.56 or the buffer to <= 16 GiB, got 34359738368"),
    ("decode_utilization_override_leaves_no_room",
     {"endpoint.pd_buffer_size_bytes": 16 << 30, "endpoint.decode.extra_args": ["--gpu-memory-utilization", "0.8"]},
     "lower endpoint.decode.extra_args --gpu-memory-utilization to <= 0.76 or the buffer to <= 12 GiB"),
    ("weights_do_not_fit_the_share", {"endpoint.gpu_memory_utilization": 0.2},
     "endpoint.gpu_memory_utilization gives prefill 15.9 GiB per H100 (79.6 GiB), which must hold 16.4 GiB of "
     "meta-llama/Llama-3.3-70B-Instruct weights per GPU (tensor_parallel_size 8) and 0.6 GiB of KV cache for one "
     "endpoint.max_model_len (16384) sequence: raise it to >= 0.22"),
    ("long_context_does_not_fit_the_share",
     {"endpoint.max_model_len": 1_048_576, "endpoint.gpu_memory_utilization": 0.5},
     "40.0 GiB of KV cache for one endpoint.max_model_len (1048576) sequence: raise it to >= 0.71"),
    ("model_size_without_kv", {"model.parameters_billion": 32.0},
     "model.kv_cache_kib_per_token must be set with model.parameters_billion"),
    ("model_kv_without_size", {"model.kv_cache_kib_per_token": 256.0},
     "model.parameters_billion must be set with model.kv_cache_kib_per_token"),
    ("described_model_does_not_fit", {"model.name": "my-405b", "model.s3_prefix": "models/my-405b/",
                                      "model.parameters_billion": 405.0, "model.kv_cache_kib_per_token": 504.0},
     "must hold 94.3 GiB of my-405b weights per GPU"),
    # CIDRs
    ("vpc_cidr_is_invalid", {"network.vpc_cidr": "10.0.0.1/16"}, "network.vpc_cidr must be an IPv4 CIDR"),
    ("gpu_cidr_prefix_out_of_range", {"network.gpu_cidr": "10.0.0.0/8"}, "between /16 and /28"),
    ("cidr_is_public", {"network.gpu_cidr": "54.0.0.0/16"}, "network.gpu_cidr must be a private range"),
    ("vpc_cidr_too_small_for_subnets", {"network.vpc_cidr": "10.0.0.0/24"}, "network.vpc_cidr must be /20 or larger"),
    ("cidrs_overlap", {"network.gpu_cidr": "10.0.128.0/17"}, "network.gpu_cidr must not overlap"),
    # Amazon VPC User Guide, "IPv4 CIDR block association restrictions": 10.0.0.0/8 primary, 192.168.0.0/16 refused
    ("gpu_cidr_from_another_rfc1918_range", {"network.gpu_cidr": "192.168.0.0/16"},
     "network.gpu_cidr must be in the RFC 1918 range of network.vpc_cidr (10.0.0.0/8) or in 100.64.0.0/10"),
    ("gpu_subnet_too_small_for_nodes", {"network.gpu_cidr": "10.1.0.0/24",
                                        "hyperpod.instance_groups[0].instance_count": 2},
     "must hold 486 IPs for 3 GPU nodes"),
    ("public_access_cidr_is_invalid", {"eks.endpoint_public_access_cidrs": ["1.2.3.4/8"]},
     "eks.endpoint_public_access_cidrs[0] must be an IPv4 CIDR"),
    # schema-level (pydantic) errors get the same one-line treatment
    ("setting_is_unknown", {"endpoint.routing_treshold": 10}, "endpoint.routing_treshold is not a known setting"),
    ("value_has_wrong_type", {"endpoint.max_model_len": "long"}, "endpoint.max_model_len:"),
    ("count_is_negative", {"hyperpod.instance_groups[0].instance_count": -1},
     "hyperpod.instance_groups[0].instance_count:"),
    ("enum_value_is_unknown", {"endpoint.routing_strategy": "random"}, "endpoint.routing_strategy:"),
    ("instance_groups_are_empty", {"hyperpod.instance_groups": []}, "hyperpod.instance_groups:"),
    # strict types: no coercion (issue 11: "yes" was true, `true` a replica count, .inf a threshold)
    ("yes_is_not_a_boolean", {"model_bucket.delete_on_destroy": "yes"},
     "model_bucket.delete_on_destroy: Input should be a valid boolean"),
    ("true_is_not_a_replica_count", {"endpoint.prefill.replicas": True},
     "endpoint.prefill.replicas: Input should be a valid integer"),
    ("numeric_string_is_not_a_number", {"endpoint.max_model_len": "16384"}, "endpoint.max_model_len: Input should be"),
    ("threshold_is_infinite", {"observability.slo.ttft_p95_seconds": float("inf")},
     "observability.slo.ttft_p95_seconds: Input should be a finite number"),
    # latency objectives are bucket boundaries of the histograms their alerts count (vllm-0.19.0.json: TTFT
    # ... 1.0, 2.5 ...; E2E request_latency_buckets ... 1.0, 1.5, 2.0, 2.5 ...; TPOT ... 0.1, 0.15 ...)
    ("ttft_objective_lies_inside_a_bucket", {"observability.slo.ttft_p95_seconds": 2.0},
     "observability.slo.ttft_p95_seconds must be a bucket boundary of vllm:time_to_first_token_seconds and "
     "vllm:e2e_request_latency_seconds (the alerts count the requests within it), got 2.0; the nearest are 1 and 2.5"),
    ("tpot_objective_lies_inside_a_bucket", {"observability.slo.tpot_p95_seconds": 0.12},
     "observability.slo.tpot_p95_seconds must be a bucket boundary of vllm:request_time_per_output_token_seconds "
     "(the alerts count the requests within it), got 0.12; the nearest are 0.1 and 0.15"),
    ("ttft_objective_past_the_last_common_bucket", {"observability.slo.ttft_p95_seconds": 100.0},
     "got 100.0; the nearest is 40"),
    # ASCII-only identifiers, real regions, regional ARNs
    ("az_id_has_unicode_digit", {"network.gpu_availability_zone_id": "usw2-az\u0662"},
     "network.gpu_availability_zone_id must be an AZ ID"),
    ("region_is_misspelt", {"region": "us-west-9", "network.gpu_availability_zone_id": "usw9-az2"},
     "region must be an AWS region code"),
    ("training_plan_is_in_another_region",
     {"hyperpod.instance_groups[0].training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5"},
     "hyperpod.instance_groups[0].training_plan_arn must be a training plan in region us-west-2"),
    # AMP user guide, "Alert Manager": it routes only to SNS topics in the same account
    ("alert_topic_is_in_another_account",
     {"eks.admin_principal_arn": "arn:aws:iam::123456789012:role/admin",
      "observability.alerts": {"topic_arn": "arn:aws:sns:us-west-2:444455556666:pager"}},
     "observability.alerts.topic_arn must be a topic of account 123456789012, the one eks.admin_principal_arn"),
    # the model prefix becomes an IAM resource and s3:prefix condition: no wildcards, no path tricks
    ("s3_prefix_has_wildcard", {"model.s3_prefix": "models/*/"}, "model.s3_prefix must hold only S3 safe"),
    ("s3_prefix_climbs_up", {"model.s3_prefix": "models/../other/"}, "model.s3_prefix must hold only S3 safe"),
    # values that become Kubernetes labels
    ("name_is_not_a_label_value", {"name": "hyperpod-"}, "name must start with a letter, end with a letter"),
    ("sidecar_label_is_not_a_label_key", {"observability.grafana_sidecar_label": "grafana dashboard"},
     "observability.grafana_sidecar_label must be a Kubernetes label key"),
    # names AWS limits in length (IAM quotas; SageMaker CreateTrainingPlan)
    ("admin_role_name_too_long_for_iam", {"eks.admin_principal_arn": "arn:aws:iam::123456789012:role/" + "r" * 65},
     "eks.admin_principal_arn must name a role or user of at most 64 characters"),
    ("training_plan_name_too_long",
     {"hyperpod.instance_groups[0].training_plan_arn": "arn:aws:sagemaker:us-west-2:123456789012:training-plan/"
      + "p" * 65}, "must name a training plan of at most 64 characters"),
]


@pytest.mark.parametrize("changes", [
    {"observability.alerts": {"topic_arn": "arn:aws:sns:us-west-2:444455556666:pager"}},  # account not known
    {"eks.admin_principal_arn": "arn:aws:iam::444455556666:role/admin",
     "observability.alerts": {"topic_arn": "arn:aws:sns:us-west-2:444455556666:pager"}},  # the same account
], ids=["account_unknown", "same_account"])
def test_an_alert_topic_of_the_deployments_account_or_an_unknown_one_is_accepted(default_config_dict: dict,
                                                                                   changes: dict) -> None:
    data = copy.deepcopy(default_config_dict)
    for path, value in changes.items():
        _set(data, path, value)
    assert parse_config(data).observability.alerts.topic_arn == "arn:aws:sns:us-west-2:444455556666:pager"


@pytest.mark.parametrize(("changes", "fragment"), [(c, f) for _, c, f in FAILING_CASES],
                         ids=[i for i, _, _ in FAILING_CASES])
def test_fails_when(default_config_dict: dict, changes: dict, fragment: str) -> None:
    data = copy.deepcopy(default_config_dict)
    for path, value in changes.items():
        _set(data, path, value)
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


_DEFAULT_PATH = Path(__file__).resolve().parents[2] / "config" / "default.yaml"


def _with_model_bucket(block: str, *, model_lines: str = "") -> str:
    """config/default.yaml with ``block`` in place of its ``model_bucket`` block and ``model_lines`` added to
    ``model``."""
    text = _DEFAULT_PATH.read_text()
    text = text.replace(text[text.index("\nmodel_bucket:\n"):text.index("\nendpoint:\n")], "\n" + block)
    return text.replace("  s3_prefix: models/Llama-3.3-70B-Instruct/\n",
                        "  s3_prefix: models/Llama-3.3-70B-Instruct/\n" + model_lines, 1)


_KEPT = f"model_bucket:\n  existing_name: kept-models\n  existing_kms_key_arn: {KEY_ARN}\n"


@pytest.mark.parametrize(("model_lines", "old_block", "new_block"), [
    ("  existing_bucket_name: kept-models\n", "", "model_bucket:\n  existing_name: kept-models\n"),
    ("  delete_on_destroy: true\n", "", "model_bucket:\n  delete_on_destroy: true\n"),
    # the old default.yaml's two lines (null, false) beside the lines destroy prints: null is "not set"
    ("  existing_bucket_name: null\n  delete_on_destroy: false\n", _KEPT, _KEPT),
], ids=["existing_bucket_name", "delete_on_destroy", "old_defaults_beside_the_new_block"])
def test_a_file_with_the_deprecated_model_keys_loads_to_the_same_config(tmp_path, model_lines: str, old_block: str,
                                                                        new_block: str) -> None:
    """``model.existing_bucket_name`` and ``model.delete_on_destroy`` (deprecated) still load, into ``model_bucket``."""
    (tmp_path / "old.yaml").write_text(_with_model_bucket(old_block, model_lines=model_lines))
    (tmp_path / "new.yaml").write_text(_with_model_bucket(new_block))
    old_config, new_config = load_config(tmp_path / "old.yaml"), load_config(tmp_path / "new.yaml")
    assert old_config == new_config
    assert old_config.model_bucket != Config.model_fields["model_bucket"].default


def test_fails_when_required_setting_is_missing(default_config_dict: dict) -> None:
    data = copy.deepcopy(default_config_dict)
    del data["hyperpod"]
    with pytest.raises(ConfigError, match=r"^hyperpod is required$"):
        parse_config(data)


def test_fails_when_file_is_missing(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path / "nope.yaml")


def test_fails_when_file_is_not_yaml(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML at line"):
        load_config(bad)


def test_fails_when_file_is_not_a_mapping(tmp_path) -> None:
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_config(bad)


# (case id, file bytes, fragment expected in the one-line message): the loading rules, on real files
_GROUPS = b"hyperpod:\n  instance_groups: [{name: prefill, pool: prefill}, {name: decode, pool: decode}]\n"
_BOMB = b"a: &a [x, x, x, x, x, x, x, x, x]\n" + b"".join(
    b"%c: &%c [%s]\n" % (97 + i, 97 + i, b", ".join([b"*%c" % (96 + i)] * 9)) for i in range(1, 10)) + b"name: *j\n"
FAILING_FILES = [
    ("duplicate_key_names_both_lines", _GROUPS + b"model_bucket:\n  delete_on_destroy: false\n"
     b"  existing_name: my-models\n  delete_on_destroy: true\n",
     "model_bucket.delete_on_destroy must appear once, got it at lines 4 and 6"),
    ("unquoted_yes_is_not_a_boolean", _GROUPS + b"model_bucket:\n  delete_on_destroy: yes\n",
     "model_bucket.delete_on_destroy: Input should be a valid boolean, got 'yes'"),
    ("unquoted_on_is_not_a_boolean", _GROUPS + b"network:\n  fsx_lustre: on\n", "network.fsx_lustre: Input should"),
    ("tagged_yes_is_not_a_boolean", _GROUPS + b"model_bucket:\n  delete_on_destroy: !!bool yes\n",
     "is not true or false"),
    ("alias_bomb_is_refused", _GROUPS + _BOMB, "config must expand to at most 20000 YAML nodes"),
    ("file_is_latin1", _GROUPS + b"name: caf\xe9\n", "must be UTF-8 text, got byte 0xe9"),
    ("file_is_utf16", "name: x\n".encode("utf-16"), "must be UTF-8 text"),
    ("nesting_is_too_deep", b"name: " + b"[" * 5000 + b"]" * 5000 + b"\n", "levels deep"),
    ("file_is_too_big", b"# " + b"x" * (1 << 20) + b"\n", "must be at most 1048576 bytes"),
]


@pytest.mark.parametrize(("content", "fragment"), [(c, f) for _, c, f in FAILING_FILES],
                         ids=[i for i, _, _ in FAILING_FILES])
def test_file_fails_when(tmp_path, content: bytes, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message and len(message) < 500


def test_yaml_1_2_scalars_still_load(tmp_path) -> None:
    """The strict loader keeps what YAML 1.2 core defines: true/false, 0x/0o integers, exponent floats."""
    path = tmp_path / "ok.yaml"
    path.write_bytes(_GROUPS + b"network:\n  fsx_lustre: True\n  nat_gateways: 0o2\n"
                     b"observability:\n  slo:\n    ttft_p95_seconds: 2.5e0\n")
    c = load_config(path)
    assert c.network.fsx_lustre is True and c.network.nat_gateways == 2
    assert c.observability.slo.ttft_p95_seconds == 2.5


def test_region_list_is_botocore_s() -> None:
    """Source: botocore's endpoints.json (partitions aws, aws-cn, aws-us-gov) is the list the config pins."""
    import json
    from pathlib import Path

    import botocore

    from hyperpod_core.config import AWS_REGIONS

    data = json.loads((Path(botocore.__file__).parent / "data" / "endpoints.json").read_text())
    botocore_regions = {r for p in data["partitions"] if p["partition"] in ("aws", "aws-cn", "aws-us-gov")
                        for r in p["regions"]}
    assert botocore_regions == AWS_REGIONS


def test_error_message_never_reprs_a_huge_value(default_config_dict: dict) -> None:
    data = _mutated(default_config_dict, name="x" * 100_000)
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert len(str(info.value)) < 300


def test_realistic_variants_are_accepted(default_config_dict: dict) -> None:
    """Valid neighbours of the default: p5en, two prefill replicas on a shared pool, autoscaling, L2 cache."""
    data = _mutated(default_config_dict)
    for g in data["hyperpod"]["instance_groups"]:
        g["instance_type"] = "ml.p5en.48xlarge"
    data["hyperpod"]["instance_groups"][0]["instance_count"] = 2
    data["endpoint"].update(instance_type="ml.p5en.48xlarge", routing_strategy="roundrobin")
    data["endpoint"]["prefill"]["replicas"] = 2
    data["endpoint"]["autoscaling"] = {"enabled": True, "prefill": {"min_replicas": 1, "max_replicas": 2,
                                                                     "target_value": 8}}
    data["endpoint"]["kv_cache"] = {"enable_l2_cache": True, "l2_cache_backend": "redis"}
    c = parse_config(data)
    assert c.hyperpod.pool_gpus("prefill") == 16


#: Rows of the Amazon VPC User Guide's table "IPv4 CIDR block association restrictions" (VPC CIDR blocks):
#: (primary, secondary, EC2 associates it). 100.64.0.0/10 is permitted next to every RFC 1918 primary (the
#: usual EKS secondary range); another RFC 1918 range, 198.19.0.0/16, 10.0.0.0/16 next to a primary in
#: 10.0.0.0/15, and 172.31.0.0/16 next to a 172.16.0.0/12 primary are restricted.
CIDR_ASSOCIATIONS = [
    ("10.0.0.0/16", "10.1.0.0/16", True), ("10.0.0.0/16", "100.64.0.0/16", True),
    ("172.16.0.0/16", "172.20.0.0/16", True), ("192.168.0.0/16", "100.64.0.0/16", True),
    ("100.64.0.0/16", "100.65.0.0/16", True),
    ("10.0.0.0/16", "172.16.0.0/16", False), ("172.16.0.0/16", "10.1.0.0/16", False),
    ("192.168.0.0/16", "10.1.0.0/16", False), ("10.1.0.0/16", "10.0.0.0/16", False),
    ("172.16.0.0/16", "172.31.0.0/16", False), ("10.0.0.0/16", "198.19.0.0/16", False),
    ("100.64.0.0/16", "10.1.0.0/16", False),
]


@pytest.mark.parametrize(("primary", "secondary", "accepted"), CIDR_ASSOCIATIONS)
def test_gpu_cidr_follows_the_vpc_association_table(default_config_dict: dict, primary: str, secondary: str,
                                                   accepted: bool) -> None:
    data = _mutated(default_config_dict, network__vpc_cidr=primary, network__gpu_cidr=secondary)
    if accepted:
        assert parse_config(data).network.gpu_cidr == secondary
    else:
        with pytest.raises(ConfigError, match=r"^network\.gpu_cidr must .* \(Amazon VPC User Guide, IPv4 CIDR block "
                                               r"association restrictions\), got "):
            parse_config(data)


def test_cluster_names_derive_from_name_when_left_out(default_config_dict: dict) -> None:
    """Issue 9 item 10: two deployments that differ only in ``name`` get different cluster names."""
    assert default_config_dict["eks"]["cluster_name"] is None
    assert default_config_dict["hyperpod"]["cluster_name"] is None
    c = parse_config(_mutated(default_config_dict, name="team-b"))
    assert (c.eks.cluster_name, c.hyperpod.cluster_name) == ("team-b-eks", "team-b")
    data = _mutated(default_config_dict, name="team-b")
    del data["eks"]
    assert parse_config(data).eks.cluster_name == "team-b-eks"
    explicit = parse_config(_mutated(default_config_dict, eks__cluster_name="mine", hyperpod__cluster_name="hp"))
    assert (explicit.eks.cluster_name, explicit.hyperpod.cluster_name) == ("mine", "hp")


@pytest.mark.parametrize(("region", "expected"), [
    ("us-west-2", ("usw2-az1", "usw2-az2")),
    ("us-east-1", ("use1-az1", "use1-az2")),
    ("us-west-1", ("usw1-az1", "usw1-az3")),  # usw1-az2: no EKS control planes
    ("ca-central-1", ("cac1-az1", "cac1-az2")),
])
def test_control_plane_az_ids_default_to_the_first_two_eks_supports(region: str, expected: tuple) -> None:
    assert default_control_plane_az_ids(region) == expected


def test_worker_requests_come_from_the_node_not_a_constant(default_config_dict: dict) -> None:
    """The workers of a node request at most 90 % of it (issue 20 item 4: ml.p5.48xlarge with ThreadsPerCore 1 has
    96 CPUs and 2048 GiB, EC2 specifications and CPU options: 86 CPUs and 1843 GiB); ThreadsPerCore 2 doubles the
    CPUs (192 -> 172); TP 4 puts two workers on a node, which share the 86."""
    c = parse_config(default_config_dict)
    assert c.spec().worker_requests("prefill") == fit.PodRequests(cpu=86, memory_gib=1843)
    assert c.spec().worker_requests("decode") == fit.PodRequests(cpu=86, memory_gib=1843)
    two = _mutated(default_config_dict, **{"hyperpod.instance_groups[0].threads_per_core": 2,
                                           "hyperpod.instance_groups[1].threads_per_core": 2})
    assert parse_config(two).spec().worker_requests("prefill").cpu == 172
    tp4 = _mutated(default_config_dict, **{"endpoint.tensor_parallel_size": 4, "endpoint.prefill.gpus": 4,
                                           "endpoint.decode.gpus": 4})
    assert parse_config(tp4).spec().worker_requests("decode") == fit.PodRequests(cpu=43, memory_gib=921)
    smaller = parse_config(_mutated(default_config_dict, **{"endpoint.prefill.cpu": 64,
                                                           "endpoint.prefill.memory_gib": 512}))
    requests = smaller.spec().worker_requests("prefill")
    assert (requests.cpu, requests.memory_gib) == (64, 512)


def test_tiered_storage_takes_its_share_of_node_memory_from_the_workers(default_config_dict: dict) -> None:
    """HyperPod's tiered storage (the ``tieredstorage`` L2 KV cache) allocates
    ``InstanceMemoryAllocationPercentage`` of each node's memory to its daemon (SageMaker API
    ClusterTieredStorageConfig), outside any pod's requests; AWS's managed-KV-cache example uses 20. On a p5
    (MemTotal ~1986.6 GiB) 20 % is ~397 GiB, so a worker's memory drops from 1843 GiB (the 90 % cap) to what the
    node has left after every reservation and that share: 1573 GiB."""
    assert parse_config(default_config_dict).tiered_storage_percent() is None
    tiered = parse_config(_mutated(default_config_dict, **{
        "endpoint.kv_cache.enable_l2_cache": True, "endpoint.kv_cache.l2_cache_backend": "tieredstorage",
        }))
    assert tiered.tiered_storage_percent() == 20
    assert tiered.spec().worker_requests("decode") == fit.PodRequests(cpu=86, memory_gib=1573)
    ten = parse_config(_mutated(default_config_dict, **{"hyperpod.tiered_storage_memory_percent": 10}))
    assert ten.tiered_storage_percent() == 10  # set on its own, it turns tiered storage on
    assert ten.spec().worker_requests("decode").memory_gib == 1771  # min(1843, (2017820 - 203423) MiB / 1024)
    with pytest.raises(ConfigError, match=r"endpoint\.decode\.memory_gib must be <= 1573"):
        parse_config(_mutated(default_config_dict, **{
            "endpoint.kv_cache.enable_l2_cache": True, "endpoint.kv_cache.l2_cache_backend": "tieredstorage",
            "endpoint.decode.memory_gib": 1843}))


@pytest.mark.parametrize(("buffer_gib", "utilization", "fits"), [
    (8, 0.75, True), (16, 0.75, True), (32, 0.75, False), (32, 0.55, True)])
def test_the_pd_buffer_anchors_on_an_80_gb_h100(default_config_dict: dict, buffer_gib: int, utilization: float,
                                                 fits: bool) -> None:
    """lifecycle-facts.md, "Node fit and GPU memory": vLLM reserves its share first, LMCache allocates the PD buffer
    after it; on an 80 GB H100 at 0.75, 8 GiB fits, 16 GiB leaves ~4 GiB, 32 GiB does not fit unless utilization
    drops to about 0.55 (AWS's tuning table: lower decode's utilization when raising the buffer)."""
    data = _mutated(default_config_dict, **{"endpoint.pd_buffer_size_bytes": buffer_gib << 30,
                                            "endpoint.gpu_memory_utilization": utilization})
    gpu = fit.gpu_memory_fit("ml.p5.48xlarge", utilization, buffer_gib << 30)
    if fits:
        parse_config(data)
    else:
        with pytest.raises(ConfigError, match=r"^endpoint.pd_buffer_size_bytes \(32 GiB per rank\)"):
            parse_config(data)
    assert gpu.fits is fits
    if buffer_gib == 16:
        assert 3.5 <= gpu.left_gib <= 4.5  # "16 GiB leaves ~4 GiB"
    if buffer_gib == 32:
        assert 0.53 <= gpu.max_utilization <= 0.58  # "unless utilization drops to about 0.55"


#: GPU memory as the driver reports it (``nvidia-smi`` ``memory.total``, MiB), as published: H100 80GB HBM3 81,559
#: (NVIDIA/nccl#1264, 8 x H100 SXM, driver 550.54.15; modal-labs/modal-client#2797), H200 143,771
#: (NVIDIA/cuda-samples#311, driver 550.54.15), B200 183,359 (NVIDIA/TensorRT-LLM#10278, driver 580.95.05), B300 SXM6
#: AC 275,040 (NVIDIA AIConfigurator ``systems/b300_sxm.yaml``: "275040MiB reported by nvidia-smi").
PUBLISHED_DRIVER_MEMORY_MIB = {"ml.p5.48xlarge": 81_559, "ml.p5e.48xlarge": 143_771, "ml.p5en.48xlarge": 143_771,
                               "ml.p6-b200.48xlarge": 183_359, "ml.p6-b300.48xlarge": 275_040}
#: What the datasheets and EC2 print per GPU, in GB: EC2 P5 page (p5 640 GB HBM3 for 8 H100; p5e/p5en 1128 GB HBM3e
#: for 8 H200), EC2 P6 page (p6-b200 1440 GB for 8 B200), NVIDIA HGX B300 (288 GB HBM3e per GPU).
DATASHEET_GB = {"ml.p5.48xlarge": 640 / 8, "ml.p5e.48xlarge": 1128 / 8, "ml.p5en.48xlarge": 1128 / 8,
                "ml.p6-b200.48xlarge": 1440 / 8, "ml.p6-b300.48xlarge": 288}


def test_gpu_memory_is_what_the_driver_reports_with_its_source() -> None:
    """The GPU-memory rules and the planner size vLLM's share from what a process can use, which is below the
    datasheet's "GB" read as GiB (an H200 reports 143,771 MiB, not 141 x 1024), each figure with its source."""
    for instance_type, mib in PUBLISHED_DRIVER_MEMORY_MIB.items():
        gpu = instances.INSTANCE_FACTS[instance_type].gpu
        assert gpu.memory_mib == mib, instance_type
        assert f"[SMI] {mib:,} MiB" in gpu.source, instance_type
        assert gpu.memory_gib < DATASHEET_GB[instance_type], instance_type


def test_kv_cache_per_token_is_derived_from_the_model_shape(default_config: Config) -> None:
    """Llama-3.3-70B at TP 8: about 40 KiB per rank (AWS DPD page), 320 KiB in total (lifecycle-facts.md)."""
    from hyperpod_core.models import MODELS

    shape = MODELS["meta-llama/Llama-3.3-70B-Instruct"]
    assert shape.kv_bytes_per_token == 320 * 1024
    assert shape.kv_bytes_per_token_per_rank(8) == 40 * 1024
    memory = default_config.spec().model.memory(8)
    assert memory is not None and memory.kv_bytes_per_token_per_rank == 40 * 1024
    assert memory.weight_bytes / 1e9 == pytest.approx(141.1, abs=0.1)  # 70.6B parameters in bf16


def test_a_model_the_table_does_not_know_is_checked_from_its_fields(default_config_dict: dict) -> None:
    """Unknown by name and folder: no weights check unless the config gives the size; then the fields count."""
    unknown = {"model.name": "my-finetune", "model.s3_prefix": "models/my-finetune/"}
    assert parse_config(_mutated(default_config_dict, **unknown)).spec().model.memory(8) is None
    sized = parse_config(_mutated(default_config_dict, **unknown, **{"model.parameters_billion": 70.6,
                                                                     "model.kv_cache_kib_per_token": 320.0}))
    memory = sized.spec().model.memory(8)
    assert memory is not None and memory.kv_bytes_per_token_per_rank == 40 * 1024


def test_fails_when_a_pinned_addon_is_not_offered_for_the_kubernetes_version(default_config_dict: dict,
                                                                               monkeypatch) -> None:
    """Synth refuses an add-on the compatibility table (pins.ADDONS) does not list for eks.kubernetes_version."""
    from dataclasses import replace

    from hyperpod_core import pins

    monkeypatch.setattr(pins, "ADDONS", (replace(pins.FSX_CSI, kubernetes_versions=("1.32",)),))
    with pytest.raises(ConfigError, match=r"^eks.kubernetes_version must be a version the pinned add-on "
                                          r"aws-fsx-csi-driver v1.6.0-eksbuild.1 is offered for \(1.32;"):
        parse_config(default_config_dict)


def test_every_pinned_addon_is_in_the_table_with_a_date() -> None:
    import datetime
    import inspect

    from hyperpod_core import pins

    pinned = {v for _, v in inspect.getmembers(pins) if isinstance(v, pins.AddonPin)}
    assert pinned == set(pins.ADDONS)
    for pin in pins.ADDONS:
        assert pin.kubernetes_versions and pin.source
        datetime.date.fromisoformat(pin.checked)


def test_fails_when_the_weights_cache_is_forced_on_a_type_without_instance_store(default_config_dict: dict,
                                                                                 monkeypatch) -> None:
    """Every DPD instance type has an instance store today (EC2 instance-store table); drop p5's entry to see
    the rule that guards a type without one."""
    monkeypatch.delitem(instances.INSTANCE_STORES, "ml.p5.48xlarge")
    forced = _mutated(default_config_dict, endpoint__model_cache__weights_cache=True)
    with pytest.raises(ConfigError, match=r"^endpoint\.model_cache\.weights_cache must be false or null: "
                                          r"ml\.p5\.48xlarge has no NVMe instance store \(EC2 instance-store "
                                          r"table\), got True$"):
        parse_config(forced)
    defaulted = parse_config(default_config_dict).spec().resolved_model_cache()
    assert defaulted.weights_cache is False
    assert defaulted.weights_cache_off_reason == "ml.p5.48xlarge has no NVMe instance store (EC2 instance-store table)"
