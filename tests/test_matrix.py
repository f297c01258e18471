"""The config matrix itself (tests/matrix.py): the example configs are users' files that cover the documented
options, each goes through the real entry points without a traceback, and the matrix tests share one worker.

The checks that read each config's synthesis run elsewhere, once per config: cdk-nag, cfn-lint and checkov in
tests/infra/test_validation.py, the deployment facts in tests/test_deploy_facts.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.matrix import MATRIX_CONFIGS, MATRIX_GROUP, MATRIX_NAMES, REPO_ROOT

from hyperpod_core import instances
from hyperpod_core.config import Config, load_config
from hyperpod_core.config.types import default_control_plane_az_ids

EXAMPLES = [p for p in MATRIX_CONFIGS if p.parent.name == "examples"]
SCHEMA_LINE = "# yaml-language-server: $schema=../schema.json"
GIB = 1 << 30


@pytest.fixture(scope="module")
def configs() -> dict[str, Config]:
    return {p.name: load_config(p) for p in MATRIX_CONFIGS}


# --- the examples are documentation ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_a_commented_users_file(path: Path) -> None:
    """The schema line first (editors complete and check the file), then comments that say what the example
    shows and how it differs from config/default.yaml, before the first key."""
    lines = path.read_text().splitlines()
    assert lines[0] == SCHEMA_LINE
    head = [line for line in lines[1:] if not line.strip() or line.startswith("#")]
    first_key = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert first_key > 3 and len(head) >= 3, f"{path.name}: say what it shows before the first key"
    assert "config/default.yaml" in "\n".join(lines[:first_key]), f"{path.name}: name the differences from the default"


def test_every_example_is_listed_in_the_readme() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    missing = [p.name for p in EXAMPLES if f"config/examples/{p.name}" not in readme]
    assert missing == [], f"README.md lists no line for {missing}"


def test_every_matrix_config_deploys_beside_the_others(configs: dict[str, Config]) -> None:
    """Every account-unique name derives from ``name`` (tests/test_deploy_facts.py): distinct names let every
    example be deployed next to the default and to each other, as the README says."""
    names = [c.name for c in configs.values()]
    assert len(set(names)) == len(names), sorted(names)


#: The options the README and docs/config.md document off the default path, each with how a config shows it.
#: Every one must hold for at least one matrix config, so the matrix cannot silently lose an option.
COVERAGE: dict[str, Callable[[Config], bool]] = {
    "private cluster: interface endpoints with aps-workspaces":
        lambda c: {"ecr.api", "ecr.dkr", "sts", "eks-auth", "sagemaker.api", "logs", "aps-workspaces"}
        <= set(c.network.interface_endpoints),
    "restricted API endpoint CIDRs": lambda c: "0.0.0.0/0" not in c.eks.endpoint_public_access_cidrs,
    "configured admin principal": lambda c: c.eks.admin_principal_arn is not None,
    "two NAT gateways": lambda c: c.network.nat_gateways == 2,
    "FSx for Lustre ports": lambda c: c.network.fsx_lustre,
    "an existing model bucket with its KMS key": lambda c: c.model_bucket.existing_name is not None
        and c.model_bucket.existing_kms_key_arn is not None,
    "delete the model bucket on destroy": lambda c: c.model_bucket.delete_on_destroy,
    "an endpoint's own model bucket with its KMS key": lambda c: any(
        e.model.bucket is not None and e.model.kms_key_arn is not None for e in c.endpoints),
    "autoscaling": lambda c: any(e.autoscaling.enabled for e in c.endpoints),
    "a model revision named in the config": lambda c: any(e.model.revision is not None for e in c.endpoints),
    "observability off": lambda c: not c.observability.enabled,
    "an Amazon Managed Grafana workspace": lambda c: c.observability.grafana_workspace is not None,
    "another region": lambda c: c.region != "us-west-2",
    "control-plane AZ IDs chosen": lambda c: c.network.control_plane_availability_zone_ids
        != default_control_plane_az_ids(c.region),
    "ml.p5en.48xlarge": lambda c: any(e.instance_type == "ml.p5en.48xlarge" for e in c.endpoints),
    "ml.p6-b200.48xlarge": lambda c: any(e.instance_type == "ml.p6-b200.48xlarge" for e in c.endpoints),
    "kvaware routing on v1/completions": lambda c: any(
        e.routing_strategy == "kvaware" and e.invocation_path == "v1/completions" for e in c.endpoints),
    "roundrobin routing": lambda c: any(e.routing_strategy == "roundrobin" for e in c.endpoints),
    "L2 cache in Redis": lambda c: any(e.kv_cache.enable_l2_cache and e.kv_cache.l2_cache_backend == "redis"
                                       and e.kv_cache.l2_cache_local_url is not None for e in c.endpoints),
    "L2 cache on tiered storage": lambda c: any(
        e.kv_cache.enable_l2_cache and e.kv_cache.l2_cache_backend == "tieredstorage" for e in c.endpoints),
    "a larger PD buffer with the utilization lowered": lambda c: any(
        e.pd_buffer_size_bytes > 16 * GIB and e.gpu_memory_utilization < 0.75 for e in c.endpoints),
    "a training plan": lambda c: any(g.training_plan_arn for g in c.hyperpod.instance_groups),
    "threads_per_core 2": lambda c: any(g.threads_per_core == 2 for g in c.hyperpod.instance_groups),
    "a shared pool": lambda c: any(g.pool == "shared" for g in c.hyperpod.instance_groups),
    "several workers per node (tensor parallel below 8)": lambda c: any(e.tensor_parallel_size < 8
                                                                        for e in c.endpoints),
    "explicit worker requests": lambda c: any(e.prefill.cpu is not None and e.decode.memory_gib is not None
                                              for e in c.endpoints),
    "several prefill nodes": lambda c: sum(g.instance_count for g in c.hyperpod.instance_groups
                                           if g.pool == "prefill") > 1,
    "benchmark results in S3, with a node-hour price":
        lambda c: c.benchmark.results_s3_uri is not None and c.benchmark.instance_hour_usd is not None,
    "alerts to e-mail and an existing SNS topic":
        lambda c: bool(c.observability.alerts.email_addresses) and c.observability.alerts.topic_arn is not None,
    "the colocated endpoint applied": lambda c: any(e.apply == "colocated" for e in c.endpoints),
    "in-cluster observability manifests": lambda c: c.observability.in_cluster_manifests,
    "the weights cache off": lambda c: any(e.model_cache.weights_cache is False for e in c.endpoints),
    "an explicit load balancer idle timeout": lambda c: any(e.load_balancer_idle_timeout_seconds is not None
                                                            for e in c.endpoints),
    "tiered storage without the tieredstorage L2 cache": lambda c: c.hyperpod.tiered_storage_memory_percent
        is not None and all(e.kv_cache.l2_cache_backend != "tieredstorage" for e in c.endpoints),
    "longer log retention": lambda c: c.eks.log_retention_days > 30 and c.network.flow_logs_retention_days > 30,
    # Several endpoints on one cluster (issue 34): each role pinned to its instance group, an endpoint's own SLO.
    "several endpoints": lambda c: len(c.endpoints) > 1,
    "roles pinned to an instance group": lambda c: any(r.instance_group is not None for e in c.endpoints
                                                       for r in (e.prefill, e.decode)),
    "an endpoint's own SLO": lambda c: any(e.slo is not None for e in c.endpoints),
}


@pytest.mark.parametrize("option", COVERAGE)
def test_the_matrix_covers_every_documented_option(option: str, configs: dict[str, Config]) -> None:
    assert any(COVERAGE[option](c) for c in configs.values()), f"no config under config/ shows {option!r}"


# --- every matrix config through the real entry points ---------------------------------------------------------

def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", **env}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.mark.parametrize("name", MATRIX_NAMES)
def test_the_config_entry_point_accepts_every_matrix_config(name: str) -> None:
    """``python -m hyperpod_core.config <file>``: one ``ok`` line naming what it deploys, nothing on stderr."""
    path = MATRIX_CONFIGS[MATRIX_NAMES.index(name)]
    result = _run(["-m", "hyperpod_core.config", str(path)], REPO_ROOT)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert re.fullmatch(rf"config {re.escape(str(path))}: ok \(.+\)\n", result.stdout), result.stdout


#: The main job (./scripts/synth, hyperpod-dpd synth) on the config furthest off the default path: another region
#: (cfn-lint runs for it), four stacks (no observability), an existing bucket, a shared pool of tensor-parallel-4
#: workers. It takes ~10 s of CPU, so it runs on one config; the in-process matrix synthesis (tests/matrix.py)
#: takes every config through the same synth path.
MAIN_JOB_CONFIGS = ["reserved-b200-us-east-1.yaml"]


@pytest.mark.parametrize("name", MAIN_JOB_CONFIGS)
def test_the_main_job_ends_in_its_summary(name: str, tmp_path: Path) -> None:
    path = MATRIX_CONFIGS[MATRIX_NAMES.index(name)]
    temp = tmp_path / "temp"
    temp.mkdir()
    result = _run(["-O", "-m", "hyperpod_mainjob", "--config", str(path), "--workdir", str(tmp_path)], REPO_ROOT,
                  HYPERPOD_CFN_LINT_CACHE="off", TMPDIR=str(temp))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    # Nothing left in the temp folder (Python's tempfile, node's os.tmpdir() and the children read $TMPDIR): not
    # jsii's runtime folder, not the Lambda code staged for the assets.
    assert sorted(p.name for p in temp.iterdir()) == []
    out = result.stdout
    for section in ("== CloudFormation", "== Kubernetes", "== Validation", "\nNext:\n"):
        assert section in out, out
    assert "cfn-lint: clean on 4 templates" in out and " 0 unacknowledged findings" in out, out
    steps = [line.strip() for line in out.split("\nNext:\n", 1)[1].strip().splitlines()]
    assert any(s.startswith(f"npx cdk deploy --app {tmp_path}/cdk.out --all") for s in steps), out
    # no outputs file yet: the manifests are placeholders, and the last step synthesizes again with the outputs
    assert steps[-1].startswith("./scripts/synth ")
    assert f"{tmp_path}/dist/llama-3-3-70b-b200/placeholders/ is not deployable" in steps[-1]


# --- the matrix shares one worker ------------------------------------------------------------------------------

def test_matrix_tests_share_one_worker(synthesize_matrix, request: pytest.FixtureRequest) -> None:
    """Every test that reads a matrix synthesis joins the xdist group (tests/conftest.py), so each config is
    synthesized on one worker, once (pytest-dev/pytest-xdist#1386 as in tests/test_entry_points.py)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not running under xdist --dist loadgroup")
    assert request.node.nodeid.endswith(f"@{MATRIX_GROUP}")


# --- instance types the config accepts --------------------------------------------------------------------------

def _hyperpod_offers() -> dict[str, list[str]]:
    """cfn-lint's E3644 data: the instance types of SageMaker HyperPod clusters per region, from the pricing
    API (``cfnlint/data/schemas/extensions/aws_sagemaker_cluster/instancetype_enum.json``)."""
    import cfnlint

    data = Path(cfnlint.__file__).parent / "data/schemas/extensions/aws_sagemaker_cluster/instancetype_enum.json"
    found: dict[str, list[str]] = {}
    for region, schema in json.loads(data.read_text()).items():
        for instance_type in json.dumps(schema).split('"'):
            if instance_type in instances.DPD_INSTANCE_TYPES:
                found.setdefault(instance_type, []).append(region)
    return found


@pytest.mark.parametrize("instance_type", instances.DPD_INSTANCE_TYPES)
def test_every_dpd_instance_type_is_offered_on_demand_or_needs_a_training_plan(instance_type: str) -> None:
    """The config accepts ``instances.DPD_INSTANCE_TYPES``. AWS's price list (cfn-lint's E3644 data) offers each for
    HyperPod clusters on demand in some region, except the reserved-only ones (``RESERVED_ONLY_INSTANCE_TYPES``:
    no on-demand offer anywhere, while the SageMaker API's ClusterInstanceType and ReservedCapacityInstanceType
    enums list them), which the config accepts only with a training plan."""
    offered = bool(_hyperpod_offers().get(instance_type))
    assert offered != (instance_type in instances.RESERVED_ONLY_INSTANCE_TYPES), (instance_type, offered)


def test_a_reserved_only_type_needs_a_training_plan_and_then_lints_clean(default_config_dict: dict,
                                                                          tmp_path: Path) -> None:
    """ml.p5e.48xlarge without a plan: one line naming the field. With one, the HyperPod template passes cfn-lint
    as ./scripts/synth runs it: its E3644 (no price-list offer) is ignored on that resource only, and is the only
    finding it hides."""
    import copy

    import aws_cdk as cdk
    from aws_cdk.assertions import Template
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner import Runner

    from hyperpod_core.config import ConfigError, parse_config
    from hyperpod_infra.app_builder import build

    data = copy.deepcopy(default_config_dict)
    data["endpoint"]["instance_type"] = "ml.p5e.48xlarge"
    for g in data["hyperpod"]["instance_groups"]:
        g["instance_type"] = "ml.p5e.48xlarge"
    with pytest.raises(ConfigError, match=r"^hyperpod\.instance_groups\[0\]\.training_plan_arn must name a SageMaker "
                                          r"training plan for ml\.p5e\.48xlarge"):
        parse_config(data)
    for i, g in enumerate(data["hyperpod"]["instance_groups"]):
        g["training_plan_arn"] = f"arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5e-{i}"
    app = cdk.App(context={"aws:cdk:disable-asset-staging": True})
    template = Template.from_stack(build(app, parse_config(data)).hyperpod).to_json()

    def lint(t: dict) -> list[str]:
        path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps(t))
        config = ConfigMixIn(["--config-file", str(REPO_ROOT / ".cfnlintrc.yaml"), "--regions", "us-west-2", "--",
                              str(path)])
        return sorted({m.rule.id for m in Runner(config).run()})

    assert lint(template) == []
    for r in template["Resources"].values():
        if r["Type"] == "AWS::SageMaker::Cluster":
            assert r["Metadata"]["cfn-lint"] == {"config": {"ignore_checks": ["E3644"]}}
            del r["Metadata"]["cfn-lint"]
    assert lint(template) == ["E3644"]
