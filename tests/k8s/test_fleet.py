"""Several endpoints on one cluster (issue 34, item 4): config/examples/two-models.yaml through the cdk8s app (the
matrix's one synthesis of it, ``two_models``), and the per-endpoint props without a synthesis.

Expected values come from the example itself (its endpoints, models, instance groups and the 8B's own SLO), from
``hyperpod_core.names.INSTANCE_GROUP_NODE_LABEL`` (the label the platform stack puts on every instance group a role
names, ``KubernetesConfig.Labels`` of the SageMaker CreateCluster API), from the CRD of the pinned operator and from
Kubernetes 1.33's schema.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from tests.k8s.endpoint_props import props_of

from hyperpod_core import staged_model
from hyperpod_core.config import parse_config
from hyperpod_core.dist_layout import PLACEHOLDERS, PLACEHOLDERS_README
from hyperpod_core.inputs import resolve_inputs
from hyperpod_core.names import INSTANCE_GROUP_NODE_LABEL

REPO = Path(__file__).resolve().parents[2]
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ROLES = ("prefill", "decode")


def _docs(folder: Path) -> list[dict]:
    """What ``kubectl apply -f <folder>`` applies: every document of its files (not recursive)."""
    return [d for p in sorted(folder.iterdir()) if p.suffix == ".yaml"
            for d in yaml.load_all(p.read_text(encoding="utf-8"), Loader=_LOADER) if d]


def _endpoints(folder: Path) -> list[dict]:
    """The InferenceEndpointConfigs ``kubectl apply -f <folder>`` applies."""
    return [d for d in _docs(folder) if d["kind"] == "InferenceEndpointConfig"]


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def example() -> dict:
    """The example as the user wrote it."""
    return yaml.safe_load((REPO / "config" / "examples" / "two-models.yaml").read_text(encoding="utf-8"))


def test_each_endpoint_has_a_folder_of_its_own(two_models, example) -> None:
    """``dist/<endpoint>/`` per endpoint, the dashboards at the root; without the deploy outputs each endpoint's
    manifests are under its own ``placeholders/`` with its README, every file named after its endpoint."""
    dist = two_models.dist
    names = [e["name"] for e in example["endpoints"]]
    assert sorted(p.name for p in dist.iterdir()) == sorted(["dashboards", *names])
    for name in names:
        files = _tree(dist / name)
        assert PLACEHOLDERS_README in {Path(f).name for f in files}
        assert {f.split("/")[1] for f in files if f.endswith(".k8s.yaml")} == {"endpoint", "alternate", "reference",
                                                                               "benchmark"}
        assert all(f.startswith(f"{PLACEHOLDERS}/") for f in files)
        assert all(Path(f).name.startswith(f"{name}-") for f in files if f.endswith(".k8s.yaml"))
        applied = sorted((d["kind"], d["metadata"]["name"]) for d in _docs(dist / name / PLACEHOLDERS / "endpoint"))
        assert applied == [("InferenceEndpointConfig", name), ("Service", name)]  # the endpoint, its stable address
        readme = (dist / name / PLACEHOLDERS / PLACEHOLDERS_README).read_text(encoding="utf-8")
        assert f"dist/{name}/endpoint/" in readme


def test_each_role_runs_on_the_instance_group_it_names(two_models, example) -> None:
    """The 70B's prefill on group ``prefill``, its decode on ``decode``, both 8B roles on ``small``: the 70B never
    lands on the 8B's node."""
    for e in example["endpoints"]:
        (dpd,) = _endpoints(two_models.dist / e["name"] / PLACEHOLDERS / "endpoint")
        pd = dpd["spec"]["pdSpec"]
        for role, spec_key in (("prefill", "prefillSpec"), ("decode", "decodingSpec")):
            assert pd[spec_key]["nodeSelector"] == {INSTANCE_GROUP_NODE_LABEL: e[role]["instance_group"]}, (e, role)


def test_each_endpoint_reads_its_own_model(two_models, example) -> None:
    """The 70B from the deployment's bucket (no outputs: not deployable), the 8B from its own ``model.bucket``."""
    assert [e["model"].get("bucket") is not None for e in example["endpoints"]] == [False, True]
    for e in example["endpoints"]:
        (dpd,) = _endpoints(two_models.dist / e["name"] / PLACEHOLDERS / "endpoint")
        source = dpd["spec"]["modelSourceConfig"]
        assert source["s3Storage"]["bucketName"] == e["model"].get("bucket", "UNRESOLVED-ModelBucketName")
        assert source["modelLocation"].startswith(e["model"]["s3_prefix"])
        args = dpd["spec"]["worker"]["args"]
        assert args[args.index("--served-model-name") + 1] == e["model"]["name"]


def test_each_endpoint_benchmarks_as_its_own_service_account_against_its_own_router(two_models, example) -> None:
    """``<endpoint>-benchmark`` per endpoint (the platform stack gives each its Pod Identity association), in the
    endpoint's folder; its Jobs run as it, against the endpoint's router Service."""
    for e in example["endpoints"]:
        name = e["name"]
        docs = _docs(two_models.dist / name / PLACEHOLDERS / "benchmark")
        (account,) = [d for d in docs if d["kind"] == "ServiceAccount"]
        assert account["metadata"]["name"] == f"{name}-benchmark"
        jobs = [d for d in docs if d["kind"] == "Job"]
        assert jobs and all(j["metadata"]["name"].startswith(f"{name}-bench-") for j in jobs)
        assert {j["spec"]["template"]["spec"]["serviceAccountName"] for j in jobs} == {f"{name}-benchmark"}
        env = [{v["name"]: v["value"] for v in j["spec"]["template"]["spec"]["containers"][0]["env"]} for j in jobs]
        assert {x["BENCH_ENDPOINT"] for x in env} == {f"default/{name}"}
        assert {x["BENCH_API_BASE"] for x in env} == {
            f"http://{name}-default-routing-service.hyperpod-inference-system.svc.cluster.local:443"}


def test_the_dashboards_of_every_endpoint_are_written(two_models, example) -> None:
    names = sorted(p.name for p in (two_models.dist / "dashboards").iterdir())
    assert names == sorted(f"two-models_{e['name']}_{kind}.json" for e in example["endpoints"]
                           for kind in ("overview", "vs-colocated"))


def test_the_manifests_pass_the_crd_schema_and_kubernetes_1_33(two_models, crd_validator) -> None:
    """What the default config's manifests pass (test_endpoint_schema.py). A benchmark chart's Jobs are one template
    (BenchmarkChart) that differ in their environment and labels only: the first Job of each endpoint stands for the
    others."""
    import kubernetes_validate

    custom, seen_job = 0, set()
    for doc in two_models.manifests:
        if crd_validator.knows(doc):
            assert crd_validator.errors(doc) == [], doc["metadata"]["name"]
            custom += 1
            continue
        if doc["kind"] == "Job":
            owner = doc["metadata"]["labels"]["hyperpod-dpd/benchmark-endpoint"]
            if owner in seen_job:
                continue
            seen_job.add(owner)
        kubernetes_validate.validate(doc, "1.33", strict=True)
    # Per endpoint: DPD, colocated, the two aws-reference layouts and the pinned equal-gpu layout.
    assert custom == 2 * 5 and seen_job == {"llama-3-3-70b", "llama-3-1-8b"}


# --- per endpoint, without a synthesis -----------------------------------------------------------------------


def test_each_endpoints_autoscaling_queries_read_its_own_pods(example) -> None:
    """KEDA's Prometheus triggers of one endpoint read that endpoint's pods only (queries.py: ``<role>-<endpoint>-``
    then exactly two pod-hash segments)."""
    data = copy.deepcopy(example)
    for e in data["endpoints"]:  # one replica at most: each group holds one node (the capacity rule)
        e["autoscaling"] = {"enabled": True, "prefill": {"max_replicas": 1}, "decode": {"max_replicas": 1}}
    config = parse_config(data)
    for spec in config.specs():
        props = props_of(config, name=spec.name)
        for role in ROLES:
            scaling = getattr(props, role).scaling
            assert scaling is not None and f"{role}-{spec.name}-[a-z0-9]+-[a-z0-9]+" in scaling.query
            others = [s.name for s in config.specs() if s.name != spec.name]
            assert not any(f"-{other}-" in scaling.query for other in others)


def test_the_colocated_baseline_runs_where_its_roles_run_within_every_nodes_budget(example, crd_validator) -> None:
    """The review's tpc.yaml: the 70B's decode group runs 2 threads per core (192 CPUs), its prefill group 1 (96).
    The baseline replaces both roles, so it may land on either group: it requests what the 96-CPU node leaves one
    worker (86 CPUs: 90 % of it, docs/cluster.md) and its node affinity selects the instance type and the two groups
    by their instance-group label (the CRD's ``nodeAffinity``, "mutually exclusive with instanceType"). The 8B's
    baseline selects its one group. Fails before: 172 CPUs (decode's group alone) and only ``instanceType``, so both
    replicas could go nowhere but the one 192-CPU node."""
    import cdk8s

    from hyperpod_k8s.endpoint.endpoint_chart import EndpointChart
    from hyperpod_k8s.endpoint.props import EndpointChartProps

    data = copy.deepcopy(example)
    data["hyperpod"]["instance_groups"][1]["threads_per_core"] = 2
    config = parse_config(data)
    app = cdk8s.App()
    for e, groups in zip(data["endpoints"], (["prefill", "decode"], ["small"]), strict=True):
        props = props_of(config, name=e["name"])
        chart = EndpointChart(app, e["name"], props=EndpointChartProps(mode="colocated", endpoint=props))
        (doc,) = chart.to_json()
        assert crd_validator.errors(doc) == []
        assert "instanceType" not in doc["spec"]
        assert doc["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["ml.p5.48xlarge"]},
                {"key": INSTANCE_GROUP_NODE_LABEL, "operator": "In", "values": groups}]}]}
    big = props_of(config, name="llama-3-3-70b")
    assert (big.prefill.requests.cpu, big.decode.requests.cpu, big.worker_requests.cpu) == (86, 172, 86)


def test_each_endpoints_benchmark_writes_its_results_below_its_own_folder(example) -> None:
    """The review's results.yaml: one ``benchmark.results_s3_uri`` for both endpoints. The runner uploads to
    ``BENCH_RESULTS_S3/<mode>/<run>/`` (``hyperpod_runtime.bench_runner.publish``) and both endpoints run the same
    scenarios at the same concurrency, so each endpoint's Jobs write below ``<uri>/<endpoint>`` and its Pod Identity
    role may write there only. Fails before: both wrote to s3://my-results/bench and could write each other's
    files."""
    from hyperpod_infra.app_builder import _benchmark_client
    from hyperpod_k8s.benchmark.props import benchmark_props

    data = copy.deepcopy(example)
    data["benchmark"] = {"results_s3_uri": "s3://my-results/bench/"}
    config = parse_config(data)
    for spec in config.specs():
        jobs = benchmark_props(spec, props_of(config, name=spec.name)).jobs
        assert {dict(j.environment)["BENCH_RESULTS_S3"] for j in jobs} == {f"s3://my-results/bench/{spec.name}"}
        client = _benchmark_client(spec)
        assert (client.results_bucket, client.results_prefix) == ("my-results", f"bench/{spec.name}")


def test_an_endpoints_own_bucket_is_its_weights_location(example) -> None:
    """``model.bucket`` of one endpoint (the 8B's weights in another bucket); the other keeps the deployment's."""
    config = parse_config(example)
    big, small = (props_of(config, name=e["name"]) for e in example["endpoints"])
    assert small.bucket_name == example["endpoints"][1]["model"]["bucket"]
    assert big.bucket_name == "UNRESOLVED-ModelBucketName"


def test_each_endpoint_resolves_its_own_revision(example, tmp_path: Path) -> None:
    """One staged-weights record holding both models (format 3: one entry per location): each endpoint takes the
    revision of its own prefix; an endpoint whose prefix has no entry stays a placeholder, and only its manifests go
    under placeholders/."""
    from hyperpod_k8s.main import layout

    outputs = tmp_path / "cdk-outputs.json"
    outputs.write_text('{"two-models-platform": {"ModelBucketName": "models-bucket"}, "two-models-cluster": '
                       '{"EksClusterArn": "arn:aws:eks:us-west-2:111122223333:cluster/two-models-eks"}}')
    record = tmp_path / "staged-model.json"
    big, small = example["endpoints"]
    staged = staged_model.write(record, bucket="models-bucket", s3_prefix=big["model"]["s3_prefix"],
                                manifest_bytes=b"70b", files=1)
    config = parse_config(example)
    inputs = resolve_inputs(config, outputs, record)
    assert inputs.endpoint(big["name"]).model_revision.value == staged.revision
    assert inputs.endpoint(small["name"]).model_revision.placeholder
    placed = {s.name: layout(s, tmp_path / "dist", inputs) for s in config.specs()}
    assert not placed[big["name"]].unresolved and placed[small["name"]].unresolved

    also = staged_model.write(record, bucket=small["model"]["bucket"], s3_prefix=small["model"]["s3_prefix"],
                              manifest_bytes=b"8b", files=1)  # the 8B's weights are staged in its own bucket
    inputs = resolve_inputs(config, outputs, record)
    assert [inputs.endpoint(e["name"]).model_revision.value for e in (big, small)] == [staged.revision, also.revision]
    assert any(line.startswith(f"input model_revision[{small['name']}] = {also.revision} ")
               for line in inputs.lines())


def test_the_main_jobs_next_steps_name_each_endpoints_folder_and_weights(two_models_config, tmp_path: Path) -> None:
    """With the deploy outputs and the 70B staged, the 8B's weights are what is missing: one stage-model line for it
    alone (``--endpoint``, and the key its revision would be set under), and an apply command per endpoint folder."""
    import json

    from hyperpod_core.environment import Environment
    from hyperpod_mainjob.job import next_steps

    (tmp_path / "cdk.out").mkdir()
    (tmp_path / "cdk.out" / "manifest.json").write_text(json.dumps({"artifacts": {}}))
    (tmp_path / "cdk-outputs.json").write_text(json.dumps({
        "two-models-platform": {"ModelBucketName": "models-bucket"},
        "two-models-cluster": {"EksClusterArn": "arn:aws:eks:us-west-2:111122223333:cluster/two-models-eks"}}))
    big, small = two_models_config.specs()
    staged_model.write(tmp_path / staged_model.RECORD_FILE, bucket="models-bucket", s3_prefix=big.model.s3_prefix,
                       manifest_bytes=b"70b", files=1)
    env = Environment(config_path=Path("c.yaml"), config=two_models_config, workdir=tmp_path)
    steps = next_steps(env, deployed=True, via_cli=True)
    (stage,) = [s for s in steps if "stage-model" in s]
    assert stage.startswith(f"hyperpod-dpd stage-model ./<model folder> --config c.yaml --endpoint {small.name}   #")
    assert "endpoints[1].model.revision" in stage
    applies = [s.split("   #")[0] for s in steps if s.startswith("kubectl apply -f ")]
    assert applies == [f"kubectl apply -f {tmp_path}/dist/{s.name}/endpoint/" for s in (big, small)]
