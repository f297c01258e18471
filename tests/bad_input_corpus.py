"""The malformed-input corpus: every kind of bad config or CDK outputs file an entry point must reject with one
line naming the field (or, for a file that is not YAML/JSON at all, the file and line), exit 2, and nothing
written. Used by ``tests/test_bad_input.py`` against every entry point.

Each case is ``Case(id, kind, content, fragment)``: ``kind`` is ``config`` or ``outputs`` (a
``cdk deploy --outputs-file`` file, read only by the cdk8s app, next to the default config); ``content`` is the
file's bytes (``None`` for a case that is about the path itself: ``DIRECTORY``, ``MISSING``); ``fragment`` must
appear in the one-line message.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TEXT = (REPO_ROOT / "config" / "default.yaml").read_text(encoding="utf-8")
DEFAULT = yaml.safe_load(DEFAULT_TEXT)
DIRECTORY = b"<directory>"
MISSING = b"<missing>"


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    content: bytes
    fragment: str


def _sub(old: str, new: str) -> bytes:
    """Replace ``old`` where it first occurs outside a comment (the default's comments quote values too)."""
    at = 0
    while (at := DEFAULT_TEXT.find(old, at)) >= 0:
        line_start = DEFAULT_TEXT.rfind("\n", 0, at + (1 if old.startswith("\n") else 0)) + 1
        if "#" not in DEFAULT_TEXT[line_start:at + (1 if old.startswith("\n") else 0)]:
            return (DEFAULT_TEXT[:at] + new + DEFAULT_TEXT[at + len(old):]).encode()
        at += 1
    raise AssertionError(f"{old!r} is not in config/default.yaml outside a comment")


def _set(**changes: Any) -> bytes:
    data = copy.deepcopy(DEFAULT)
    for dotted, value in changes.items():
        keys = dotted.replace("__", ".").split(".")
        node: Any = data
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        node[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    # libyaml's emitter when PyYAML has it: the same documents, built at collection in every xdist worker.
    return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                     allow_unicode=True).encode()


_BOMB = b"a: &a [x, x, x, x, x, x, x, x, x]\n" + b"".join(
    b"%c: &%c [%s]\n" % (97 + i, 97 + i, b", ".join([b"*%c" % (96 + i)] * 9)) for i in range(1, 10)) + b"name: *j\n"
_PLAN = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/"

CONFIG_CASES = [
    # --- encodings and files --------------------------------------------------------------------------------
    Case("latin1_byte", "config", _sub("\nname: hyperpod-dpd", "\nname: caf\xe9").decode().encode("latin-1",
                                                                                                  "replace"),
         "must be UTF-8 text"),
    Case("utf16_with_bom", "config", DEFAULT_TEXT.encode("utf-16"), "must be UTF-8 text"),
    Case("utf32", "config", DEFAULT_TEXT.encode("utf-32"), "must be UTF-8 text"),
    Case("binary_garbage", "config", bytes(range(256)) * 4, "must be UTF-8 text"),
    Case("nul_byte", "config", DEFAULT_TEXT.replace("name: hyperpod-dpd", "name: hyper\0pod").encode(),
         "is not valid YAML"),
    Case("empty_file", "config", b"", "hyperpod is required"),
    Case("only_comments", "config", b"# nothing here\n", "hyperpod is required"),
    Case("file_too_big", "config", DEFAULT_TEXT.encode() + b"#" * (1 << 20), "must be at most"),
    Case("path_is_a_directory", "config", DIRECTORY, "cannot be read"),
    Case("path_is_missing", "config", MISSING, "cannot be read"),
    # --- YAML tricks ----------------------------------------------------------------------------------------
    Case("duplicate_top_level_key", "config", DEFAULT_TEXT.encode() + b"region: us-east-1\n",
         "region must appear once"),
    Case("duplicate_delete_on_destroy", "config",
         _sub("  delete_on_destroy: false", "  delete_on_destroy: false\n  delete_on_destroy: true"),
         "model_bucket.delete_on_destroy must appear once"),
    Case("alias_bomb", "config", _BOMB, "YAML nodes"),
    Case("deep_nesting", "config", b"name: " + b"[" * 3000 + b"]" * 3000 + b"\n", "levels deep"),
    Case("two_documents", "config", DEFAULT_TEXT.encode() + b"---\nname: other\n", "is not valid YAML"),
    Case("tab_indentation", "config", _sub("  vpc_cidr: 10.0.0.0/16", "\tvpc_cidr: 10.0.0.0/16"),
         "is not valid YAML"),
    Case("unclosed_flow", "config", _sub("interface_endpoints: []", "interface_endpoints: [ecr.api"),
         "is not valid YAML"),
    Case("python_object_tag", "config", b"name: !!python/object/apply:os.system [true]\n", "is not valid YAML"),
    Case("unquoted_yes", "config", _sub("  delete_on_destroy: false", "  delete_on_destroy: yes"),
         "model_bucket.delete_on_destroy"),
    Case("unquoted_on", "config", _sub("  flow_logs_retention_days: 30", "  flow_logs_retention_days: 30\n"
                                       "  fsx_lustre: on"), "network.fsx_lustre"),
    Case("tagged_bool_yes", "config", _sub("  delete_on_destroy: false", "  delete_on_destroy: !!bool yes"),
         "at line"),
    Case("top_level_list", "config", b"- name: x\n", "config must be a YAML mapping"),
    Case("top_level_scalar", "config", b"hyperpod-dpd\n", "config must be a YAML mapping"),
    Case("non_string_key", "config", DEFAULT_TEXT.encode() + b"1: one\n", "[1]: Keys should be strings"),
    Case("sexagesimal_number", "config", _sub("max_model_len: 16384", "max_model_len: 4:33:04"),
         "endpoint.max_model_len"),
    Case("timestamp_scalar", "config", _sub("routing_threshold_tokens: 4096", "routing_threshold_tokens: 2024-01-01"),
         "endpoint.routing_threshold_tokens"),
    Case("binary_tag", "config", _sub("\nname: hyperpod-dpd", "\nname: !!binary aGk="), "name"),
    # --- types ----------------------------------------------------------------------------------------------
    Case("true_as_replica_count", "config", _set(endpoint__prefill__replicas=True), "endpoint.prefill.replicas"),
    Case("numeric_string", "config", _set(endpoint__tensor_parallel_size="8"), "endpoint.tensor_parallel_size"),
    Case("float_for_int", "config", _set(endpoint__max_model_len=16384.5), "endpoint.max_model_len"),
    Case("list_for_string", "config", _set(name=["a"]), "name"),
    Case("mapping_for_list", "config", _set(hyperpod__instance_groups={"a": "b"}), "hyperpod.instance_groups"),
    Case("null_for_required", "config", _set(hyperpod=None), "hyperpod"),
    Case("quoted_true_for_bool", "config", _set(model_bucket__delete_on_destroy="true"),
         "model_bucket.delete_on_destroy"),
    Case("misspelt_setting", "config", _set(endpoint__routing_treshold=10), "endpoint.routing_treshold"),
    Case("unknown_section", "config", _set(extras={"a": 1}), "extras is not a known setting"),
    Case("null_for_name", "config", _set(name=None), "name"),
    # --- ranges ---------------------------------------------------------------------------------------------
    Case("infinite_threshold", "config", _sub("ttft_p95_seconds: 2.5", "ttft_p95_seconds: .inf"),
         "observability.slo.ttft_p95_seconds"),
    Case("slo_between_buckets", "config", _sub("ttft_p95_seconds: 2.5", "ttft_p95_seconds: 2.0"),
         "observability.slo.ttft_p95_seconds must be a bucket boundary"),
    Case("nan_ratio", "config", _sub("gpu_memory_utilization: 0.75", "gpu_memory_utilization: .nan"),
         "endpoint.gpu_memory_utilization"),
    Case("negative_count", "config", _set(**{"hyperpod.instance_groups.0.instance_count": -1}),
         "hyperpod.instance_groups[0].instance_count"),
    Case("utilization_above_one", "config", _set(endpoint__gpu_memory_utilization=1.5),
         "endpoint.gpu_memory_utilization"),
    Case("max_model_len_too_small", "config", _set(endpoint__max_model_len=100), "endpoint.max_model_len"),
    Case("three_nat_gateways", "config", _set(network__nat_gateways=3), "network.nat_gateways"),
    Case("retention_not_a_cloudwatch_value", "config", _set(network__flow_logs_retention_days=31),
         "network.flow_logs_retention_days"),
    Case("huge_integer", "config", _sub("max_model_len: 16384", "max_model_len: " + "9" * 40),
         "endpoint.max_model_len"),
    Case("pd_buffer_too_small", "config", _set(endpoint__pd_buffer_size_bytes=1024), "endpoint.pd_buffer_size_bytes"),
    Case("port_privileged", "config", _set(endpoint__container_port=80), "endpoint.container_port"),
    # --- cold start and the load balancer (operator v3.3 CRD bounds; the instance store's mount) ---------------
    Case("idle_timeout_past_the_alb_maximum", "config", _set(endpoint__load_balancer_idle_timeout_seconds=4001),
         "endpoint.load_balancer_idle_timeout_seconds"),
    Case("idle_timeout_below_the_first_token", "config", _set(endpoint__load_balancer_idle_timeout_seconds=1),
         "endpoint.load_balancer_idle_timeout_seconds must be at least observability.slo.ttft_p95_seconds"),
    Case("weights_cache_on_the_ebs_volume", "config",
         _set(endpoint__model_cache__weights_cache_host_path="/opt/sagemaker/weights"),
         "endpoint.model_cache.weights_cache_host_path must be /opt/dlami/nvme or a directory below it"),
    # --- names too long for AWS or Kubernetes ---------------------------------------------------------------
    Case("name_41_chars", "config", _set(name="a" * 41), "name"),
    Case("eks_cluster_name_101", "config", _set(eks__cluster_name="e" * 101), "eks.cluster_name"),
    Case("hyperpod_cluster_name_64", "config", _set(hyperpod__cluster_name="h" * 64), "hyperpod.cluster_name"),
    Case("model_name_64", "config", _set(model__name="m" * 64), "model.name"),
    Case("endpoint_name_64", "config", _set(endpoint__name="n" * 64), "endpoint.name"),
    Case("instance_group_name_64", "config", _set(**{"hyperpod.instance_groups.0.name": "g" * 64}),
         "hyperpod.instance_groups[0].name"),
    Case("bucket_name_64", "config", _set(model_bucket__existing_name="b" * 64), "model_bucket.existing_name"),
    Case("iam_role_name_65", "config", _set(eks__admin_principal_arn="arn:aws:iam::123456789012:role/" + "r" * 65),
         "eks.admin_principal_arn"),
    Case("training_plan_name_65", "config", _set(**{"hyperpod.instance_groups.0.training_plan_arn": _PLAN + "p" * 65}),
         "hyperpod.instance_groups[0].training_plan_arn"),
    Case("s3_prefix_513", "config", _set(model__s3_prefix="p/" * 257), "model.s3_prefix"),
    # --- identifiers: ASCII only, real regions, regional ARNs, label syntax ---------------------------------
    Case("unicode_digit_az_id", "config",
         _sub("gpu_availability_zone_id: usw2-az2", "gpu_availability_zone_id: usw2-az\u0662"),
         "network.gpu_availability_zone_id"),
    Case("misspelt_region", "config", _set(region="us-west-9", network__gpu_availability_zone_id="usw9-az2"),
         "region"),
    Case("accented_region", "config", _set(region="us-w\u00e9st-2"), "region"),
    Case("az_name_not_id", "config", _set(network__gpu_availability_zone_id="us-west-2b"),
         "network.gpu_availability_zone_id"),
    Case("az_id_that_does_not_exist", "config", _set(network__gpu_availability_zone_id="usw2-az9"),
         "network.gpu_availability_zone_id must be an AZ ID of us-west-2 (usw2-az1, usw2-az2, usw2-az3, usw2-az4)"),
    Case("training_plan_other_region", "config",
         _set(**{"hyperpod.instance_groups.0.training_plan_arn": _PLAN.replace("us-west-2", "eu-west-1") + "p"}),
         "hyperpod.instance_groups[0].training_plan_arn"),
    Case("label_key_with_space", "config", _set(observability={"grafana_sidecar_label": "grafana dashboard"}),
         "observability.grafana_sidecar_label"),
    Case("name_ends_with_dash", "config", _set(name="hyperpod-"), "name"),
    Case("fullwidth_digits_in_cidr", "config", _set(network__vpc_cidr="10.0.0.0/\uff11\uff16"), "network.vpc_cidr"),
    Case("image_not_pinned", "config", _set(endpoint__image="lmcache/vllm-openai"), "endpoint.image"),
    Case("namespace_upper_case", "config", _set(endpoint__namespace="Default"), "endpoint.namespace"),
    # --- paths: the model prefix becomes an IAM resource -----------------------------------------------------
    Case("s3_prefix_wildcard", "config", _set(model__s3_prefix="models/*/"), "model.s3_prefix"),
    Case("s3_prefix_parent", "config", _set(model__s3_prefix="models/../secrets/"), "model.s3_prefix"),
    Case("s3_prefix_leading_slash", "config", _set(model__s3_prefix="/models/x/"), "model.s3_prefix"),
    Case("s3_prefix_question_mark", "config", _set(model__s3_prefix="models/x?/"), "model.s3_prefix"),
    Case("s3_prefix_policy_variable", "config", _set(model__s3_prefix="${aws:username}/"), "model.s3_prefix"),
    Case("s3_prefix_no_trailing_slash", "config", _set(model__s3_prefix="models/x"), "model.s3_prefix"),
    # --- cross-field contradictions -------------------------------------------------------------------------
    Case("threshold_not_below_max_len", "config", _set(endpoint__routing_threshold_tokens=16384),
         "endpoint.routing_threshold_tokens"),
    Case("delete_existing_bucket", "config", _set(model_bucket__existing_name="my-models",
                                                  model_bucket__delete_on_destroy=True),
         "model_bucket.delete_on_destroy"),
    Case("old_and_new_bucket_keys", "config", _set(model__existing_bucket_name="old-models",
                                                   model_bucket__existing_name="new-models"),
         "model.existing_bucket_name must be left out when model_bucket.existing_name is set"),
    Case("groups_in_two_azs", "config", _set(**{"hyperpod.instance_groups.1.availability_zone_id": "usw2-az1"}),
         "availability_zone_id"),
    Case("kvaware_with_chat", "config", _set(endpoint__routing_strategy="kvaware"), "endpoint.routing_strategy"),
    Case("autoscaling_without_observability", "config",
         _set(endpoint__autoscaling__enabled=True, observability={"enabled": False}), "endpoint.autoscaling.enabled"),
    Case("two_decode_replicas", "config", _set(endpoint__decode__replicas=2,
                                               **{"hyperpod.instance_groups.1.instance_count": 2}),
         "endpoint.decode.replicas"),
    Case("cidrs_overlap", "config", _set(network__gpu_cidr="10.0.128.0/17"), "network.gpu_cidr"),
]


def _outputs(**stacks: dict[str, Any]) -> bytes:
    """An outputs file of the default config's deployment: ``platform=`` becomes ``hyperpod-dpd-platform``
    (the cdk8s app refuses stacks of another deployment before it reads a value)."""
    return json.dumps({f"hyperpod-dpd-{name}": outputs for name, outputs in stacks.items()}).encode()


OUTPUTS_CASES = [
    Case("outputs_not_json", "outputs", b"{not json", "is not valid JSON"),
    Case("outputs_latin1", "outputs", '{"S": {"ModelBucketName": "caf\xe9"}}'.encode("latin-1"), "must be UTF-8"),
    Case("outputs_empty", "outputs", b"", "is not valid JSON"),
    Case("outputs_top_level_list", "outputs", b"[]", "must map stack names"),
    Case("outputs_stack_not_object", "outputs", _outputs(platform="x"), "must map stack names"),  # type: ignore[arg-type]
    Case("outputs_bucket_invalid", "outputs", _outputs(platform={"ModelBucketName": "My_Bucket"}), "ModelBucketName"),
    Case("outputs_bucket_too_long", "outputs", _outputs(platform={"ModelBucketName": "b" * 64}), "ModelBucketName"),
    Case("outputs_bucket_unicode", "outputs", _outputs(platform={"ModelBucketName": "bucket-\u00f6"}),
         "ModelBucketName"),
    Case("outputs_bucket_huge", "outputs", _outputs(platform={"ModelBucketName": "b" * 100_000}), "ModelBucketName"),
    Case("outputs_of_another_deployment", "outputs", json.dumps({"other-platform": {}}).encode(),
         "does not belong"),
    Case("outputs_other_region", "outputs", _outputs(cluster={"Region": "us-east-1"}), "Region"),
    Case("outputs_amp_not_workspace", "outputs", _outputs(platform={"AmpWorkspaceEndpoint": "http://prom:9090"}),
         "AmpWorkspaceEndpoint"),
    Case("outputs_az_of_other_region", "outputs", _outputs(platform={"GpuAvailabilityZone": "us-east-1a"}),
         "GpuAvailabilityZone"),
    Case("outputs_role_not_arn", "outputs", _outputs(platform={"KedaRoleArn": "keda"}), "KedaRoleArn"),
    Case("outputs_stacks_disagree", "outputs", _outputs(cluster={"ModelBucketName": "b-one"},
                                                       platform={"ModelBucketName": "b-two"}), "ModelBucketName"),
]

CASES = CONFIG_CASES + OUTPUTS_CASES


def write_case(case: Case, folder: Path) -> Path:
    """Write the case's file into ``folder`` and return its path (a directory or nothing for path cases)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (f"{case.id}.json" if case.kind == "outputs" else f"{case.id}.yaml")
    if case.content == DIRECTORY:
        path.mkdir(exist_ok=True)
    elif case.content != MISSING:
        path.write_bytes(case.content)
    return path
