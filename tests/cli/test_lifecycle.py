"""synth / diff / deploy / destroy / init act on the files of the config named, and nothing else.

The main job runs for real once per session (``hyperpod-dpd synth --env``); the real CDK CLI then reads the
assembly it wrote (``cdk ls --app <cdk.out>``), which is what ``cdk deploy --app`` deploys. Deploy/diff/
destroy cannot run without an AWS account, so they run against a fake ``npx`` on PATH that records its argv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: These tests run the entry points in the repository itself (its cdk.out/ and dist/, scripts/setup): one
#: xdist worker runs them all, one after another (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("repository-root")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT = REPO_ROOT / "config" / "default.yaml"


def _cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "HYPERPOD_CONFIG"} | env
    return subprocess.run([sys.executable, "-m", "hyperpod_dpd", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL)


def _one_line_exit(result: subprocess.CompletedProcess[str], code: int, starts: str) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``hyperpod-dpd init demo`` then ``hyperpod-dpd synth --env demo`` (temp folder: ``<cwd>/temp``), once per
    session."""
    cwd = tmp_path_factory.mktemp("ops")
    init = _cli("init", "demo", cwd=cwd)
    assert init.returncode == 0, init.stderr
    (cwd / "temp").mkdir()
    result = _cli("synth", "--env", "demo", cwd=cwd, TMPDIR=str(cwd / "temp"))
    assert result.returncode == 0, result.stderr[-3000:]
    return cwd, result


@pytest.fixture
def fake_npx(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A fake ``npx`` first on PATH that records its argv (one per line) and exits ``$FAKE_NPX_RC`` (0)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "npx-argv.txt"
    bin_dir.mkdir()
    script = bin_dir / "npx"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}"\nexit ${{FAKE_NPX_RC:-0}}\n')
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, log


#: The rule and parameter ``hyperpod_constructs.chart_assets.refuse_deploy_without`` adds to a stack whose Helm chart
#: set-up could not fetch: CloudFormation then refuses every create and update of it.
CHART_RULE, CHART_PARAMETER = "HyperPodChartsFetchedRule", "HyperPodChartsFetched"


def _copy_env(cwd: Path, name: str, *, charts_fetched: bool) -> Path:
    """A copy of the demo environment as set-up with (or without) access to the charts' sources leaves it: the
    Cluster template without (or with) the rule that refuses the deploy."""
    target = cwd / "envs" / name
    if not target.exists():
        shutil.copytree(cwd / "envs" / "demo", target)
    path = target / "cdk.out" / "Cluster.template.json"
    template = json.loads(path.read_text())
    if charts_fetched:
        template.get("Rules", {}).pop(CHART_RULE, None)
        template.get("Parameters", {}).pop(CHART_PARAMETER, None)
    else:
        template.setdefault("Parameters", {})[CHART_PARAMETER] = {"Type": "String", "Default": "no",
                                                                  "AllowedValues": ["no"]}
        template.setdefault("Rules", {})[CHART_RULE] = {"Assertions": [{
            "Assert": {"Fn::Equals": [{"Ref": CHART_PARAMETER}, "yes"]},
            "AssertDescription": "Helm charts nvidia-device-plugin (NVIDIA/k8s-device-plugin@cb6e45e) were not "
                                 "fetched when this template was synthesized; run ./scripts/setup with access to "
                                 "raw.githubusercontent.com (or set HYPERPOD_CHART_CACHE), synthesize again, then "
                                 "deploy"}]}
    path.write_text(json.dumps(template))
    return target


def test_init_names_the_environment_and_points_at_the_schema(synthesized) -> None:
    cwd, _ = synthesized
    text = (cwd / "envs" / "demo" / "config.yaml").read_text()
    assert text.splitlines()[0].startswith("# yaml-language-server: $schema=")
    assert "\nname: demo\n" in text


def test_synth_writes_only_into_the_environment_folder(synthesized) -> None:
    cwd, result = synthesized
    env = cwd / "envs" / "demo"
    assert sorted(p.name for p in env.iterdir()) == ["cdk.out", "config.yaml", "dist"]
    assert {p.name for p in (env / "cdk.out").glob("*.template.json")} == {
        "Network.template.json", "Cluster.template.json", "HyperPod.template.json",
        "Observability.template.json", "Platform.template.json", "ObservabilityAddon.template.json"}
    manifest = json.loads((env / "cdk.out" / "manifest.json").read_text())
    names = {a["properties"]["stackName"] for a in manifest["artifacts"].values()
             if a["type"] == "aws:cloudformation:stack"}
    assert names == {f"demo-{s}" for s in ("network", "cluster", "hyperpod", "observability", "platform",
                                           "observability-addon")}
    # No outputs file yet: the manifests hold placeholders, so they are kept out of dist/endpoint/.
    assert (env / "dist" / "placeholders" / "endpoint" / "llama-3-3-70b-dpd.k8s.yaml").is_file()
    assert not (env / "dist" / "endpoint").exists()
    assert not list(cwd.glob("**/.*.tmp-*")), "no temp folders left behind"
    assert sorted(p.name for p in (cwd / "temp").iterdir()) == [], "nothing left in the temp folder"
    assert "hyperpod-dpd deploy --env demo" in result.stdout


def test_synth_prints_a_progress_line_for_every_step(synthesized) -> None:
    _, result = synthesized
    lines = result.stderr.splitlines()
    starts = [line for line in lines if line.startswith("[")]
    assert [s.split("]")[0] for s in starts] == ["[1/3", "[2/3", "[3/3"]
    assert sum("done in" in line for line in lines) == 3


@pytest.mark.slow
def test_the_real_cdk_cli_reads_the_assembly_deploy_uses(synthesized) -> None:
    """``cdk ls --app <cdk.out>`` (the pinned CLI, offline) lists the stacks by the IDs deploy selects."""
    cwd, _ = synthesized
    result = subprocess.run(["npx", "--no-install", "cdk", "ls", "--app", str(cwd / "envs/demo/cdk.out")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False,
                            env={**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true", "CDK_DISABLE_VERSION_CHECK": "1",
                                 "CI": "true"})  # CI mode: the CLI's messages go to stdout; none may appear
    assert result.returncode == 0, result.stderr
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert set(listed) == {"Network", "Observability", "Cluster", "HyperPod", "Platform", "ObservabilityAddon"}
    assert listed.index("HyperPod") < listed.index("Platform") and listed.index("HyperPod") < listed.index(
        "ObservabilityAddon")


def test_deploy_deploys_that_cdk_out_and_writes_outputs_beside_it(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    _copy_env(cwd, "fetched", charts_fetched=True)
    admin = "arn:aws:iam::123456789012:role/Admin"
    result = _cli("deploy", "--env", "fetched", "--yes", "--admin-principal-arn", admin, cwd=cwd, **env)
    assert result.returncode == 0, result.stderr
    demo = (cwd / "envs" / "fetched").resolve()
    # The cluster stack's required AdminPrincipalArn parameter is filled for the stack that declares it
    # (the CDK CLI keys --parameters by CloudFormation stack name).
    # --concurrency: independent stacks deploy side by side (issue 20 item 6; the CDK CLI's deploy option
    # "Maximum number of simultaneous deployments (dependency permitting) to execute", aws-cdk 2.1148 cli-config).
    assert log.read_text().splitlines() == [
        "--no-install", "cdk", "deploy", "--app", str(demo / "cdk.out"), "--all",
        "--outputs-file", str(demo / "cdk-outputs.json"), "--concurrency", "6",
        "--parameters", f"demo-cluster:AdminPrincipalArn={admin}", "--require-approval", "never"]
    assert "next: hyperpod-dpd synth --env fetched" in result.stdout
    assert result.stderr.splitlines()[0] == (
        "deploy: 6 stacks of demo (demo-network, demo-observability, demo-cluster, demo-hyperpod, "
        f"demo-observability-addon, demo-platform) from {demo / 'cdk.out'} to us-west-2; cluster admin {admin}; "
        "outputs to envs/fetched/cdk-outputs.json")


def test_deploy_asks_and_without_a_terminal_wants_yes(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    _copy_env(cwd, "fetched", charts_fetched=True)
    result = _cli("deploy", "--env", "fetched", "--admin-principal-arn", "arn:aws:iam::123456789012:role/Admin",
                  cwd=cwd, **env)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "error: hyperpod-dpd deploy asks before it changes anything and stdin is not a terminal: pass --yes to go "
        "ahead without asking (or --dry-run to see what it would do)")
    assert not log.exists(), "the CDK CLI must not run"


def test_deploy_refuses_templates_cloudformation_would_refuse(synthesized, fake_npx) -> None:
    """Set-up could not fetch a pinned Helm chart: the template's rule fails every create/update, so deploy stops
    before the CDK CLI runs, naming what to run."""
    cwd, _ = synthesized
    env, log = fake_npx
    _copy_env(cwd, "unfetched", charts_fetched=False)
    result = _cli("deploy", "--env", "unfetched", "--yes", "--admin-principal-arn",
                  "arn:aws:iam::123456789012:role/Admin", cwd=cwd, **env)
    _one_line_exit(result, 1, "error: stack demo-cluster cannot deploy yet: Helm charts nvidia-device-plugin")
    assert "hyperpod-dpd synth --env unfetched, then deploy" in result.stderr
    assert not log.exists()
    network_only = _cli("deploy", "Network", "--env", "unfetched", "--yes", cwd=cwd, **env)
    assert network_only.returncode == 0, network_only.stderr  # the network stack does not need the charts


def test_a_failed_deploy_does_not_claim_nothing_changed(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, _ = fake_npx
    _copy_env(cwd, "fetched", charts_fetched=True)
    result = _cli("deploy", "Network", "--env", "fetched", "--yes", cwd=cwd, **env, FAKE_NPX_RC="1")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith(
        "error: cdk deploy exited 1: its output above names the stack and the reason")
    assert "nothing else was changed" not in result.stderr
    assert "stacks deployed before it in this run stay deployed" in result.stderr


def test_diff_of_every_stack_passes_no_all(synthesized, fake_npx) -> None:
    """``cdk diff`` has no ``--all`` option (the pinned CLI's option table, node_modules/aws-cdk/lib/cli/
    cli-type-registry.json); with no stack named it compares every top-level stack."""
    cwd, _ = synthesized
    env, log = fake_npx
    registry = json.loads((REPO_ROOT / "node_modules" / "aws-cdk" / "lib" / "cli" / "cli-type-registry.json")
                          .read_text())
    assert "all" not in registry["commands"]["diff"]["options"]
    assert "all" in registry["commands"]["deploy"]["options"] and "all" in registry["commands"]["destroy"]["options"]
    from moto.server import ThreadedMotoServer

    from fake_http import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)  # SageMaker for the deep-health-check line
    server.start()
    try:
        result = _cli("diff", "--env", "demo", cwd=cwd, **env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
                      AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="us-west-2")
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines() == ["--no-install", "cdk", "diff", "--app",
                                            str((cwd / "envs/demo/cdk.out").resolve())]


def test_the_cdk_cli_takes_the_concurrency_option_deploy_passes() -> None:
    """The pinned CDK CLI's own option table (node_modules/aws-cdk/lib/cli/cli-config.js) lists ``concurrency`` for
    ``deploy``: a misspelt option would stop the real deploy with "Unknown argument"."""
    config = (REPO_ROOT / "node_modules" / "aws-cdk" / "lib" / "cli" / "cli-config.js").read_text()
    deploy = config[config.index("'deploy': {"):config.index("'validate': {")]
    assert "'concurrency': { type: 'number', desc: 'Maximum number of simultaneous deployments (dependency " \
           "permitting) to execute.'" in deploy


def test_diff_of_the_hyperpod_stack_says_when_deep_health_checks_refuse_the_update(synthesized, fake_npx) -> None:
    """HyperPod refuses UpdateCluster while deep health checks run (AWS HyperPod EKS deep health check page): with a
    node ``DeepHealthCheckInProgress`` (ListClusterNodes) and an instance-group change, ``diff`` says so. A moto
    server plays SageMaker (moto implements DescribeCluster and ListClusterNodes); the node status is set on its
    backend, to a value of the service model's ClusterInstanceStatus."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sagemaker.models import sagemaker_backends
    from moto.server import ThreadedMotoServer

    from fake_http import free_port

    cwd, _ = synthesized
    env, _ = fake_npx
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    aws = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": "us-west-2"}
    backend = sagemaker_backends[DEFAULT_ACCOUNT_ID]["us-west-2"]
    try:
        import boto3

        sm = boto3.client("sagemaker", region_name="us-west-2", endpoint_url=aws["AWS_ENDPOINT_URL"],
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        backend.clusters.pop("demo", None)
        sm.create_cluster(ClusterName="demo", VpcConfig={"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
                          InstanceGroups=[{"InstanceGroupName": g, "InstanceType": "ml.p5.48xlarge",
                                           "InstanceCount": count, "ThreadsPerCore": 1,
                                           "OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
                                           "ExecutionRole": "arn:aws:iam::123456789012:role/hp",
                                           "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/", "OnCreate": "x"}}
                                          for g, count in (("prefill", 1), ("decode", 2))])
        backend.clusters["demo"].nodes["decode-1"].status = "DeepHealthCheckInProgress"
        result = _cli("diff", "HyperPod", "--env", "demo", cwd=cwd, **env, **aws)
        assert result.returncode == 0, result.stderr
        assert ("FAIL: deep health checks: 1 node(s) in deep health checks (decode-1 (decode)), and the config "
                "changes decode: instance_count 2 -> 1: HyperPod refuses UpdateCluster") in result.stdout
        backend.clusters["demo"].nodes["decode-1"].status = "Running"
        calm = _cli("diff", "HyperPod", "--env", "demo", cwd=cwd, **env, **aws)
        assert "pass: deep health checks: no node of demo in deep health checks" in calm.stdout
    finally:
        backend.clusters.pop("demo", None)
        server.stop()


@pytest.mark.parametrize(("given", "selector"), [
    ("demo-network", "Network"), ("Cluster", "Cluster"), ("platform", "Platform")])
def test_stacks_are_selected_by_the_ids_the_cdk_cli_accepts(synthesized, fake_npx, given, selector) -> None:
    """The CDK CLI selects by construct path (``cdk diff Network``); a CloudFormation name is translated."""
    cwd, _ = synthesized
    env, log = fake_npx
    result = _cli("diff", given, "--env", "demo", cwd=cwd, **env)
    assert result.returncode == 0, result.stderr
    assert log.read_text().splitlines()[2:] == [
        "diff", "--app", str((cwd / "envs/demo/cdk.out").resolve()), selector]


def test_destroy_asks_and_without_a_terminal_wants_yes(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    result = _cli("destroy", "--env", "demo", cwd=cwd, **env)
    assert result.returncode == 2 and "pass --yes" in result.stderr
    assert not log.exists()
    dry = _cli("destroy", "--env", "demo", "--dry-run", cwd=cwd, **env)
    assert dry.returncode == 0 and dry.stdout.strip() == "dry run: nothing destroyed"
    # Reverse deploy order; the stacks of the selection and those that depend on them (what cdk destroy removes).
    assert dry.stderr.splitlines()[-1].startswith(
        "destroy: 6 stacks of demo in us-west-2, in this order: demo-platform, demo-observability-addon, "
        "demo-hyperpod, demo-cluster, demo-observability, demo-network; the model bucket is kept")
    partial = _cli("destroy", "HyperPod", "--env", "demo", "--dry-run", cwd=cwd, **env)
    assert "3 stacks of demo in us-west-2, in this order: demo-platform, demo-observability-addon, demo-hyperpod" \
        in partial.stderr
    assert not log.exists()


def test_destroy_yes_destroys_and_moves_the_outputs_aside(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    target = _copy_env(cwd, "gone", charts_fetched=True)
    outputs = {f"demo-{s}": {"X": s} for s in ("network", "cluster", "hyperpod", "platform")}
    (target / "cdk-outputs.json").write_text(json.dumps(outputs))
    partial = _cli("destroy", "Platform", "--env", "gone", "--yes", cwd=cwd, **env)
    assert partial.returncode == 0, partial.stderr
    assert log.read_text().splitlines()[2:] == ["destroy", "--app", str((target / "cdk.out").resolve()), "Platform",
                                                "--force"]
    aside = sorted(target.glob("cdk-outputs.destroyed-*.json"))
    assert len(aside) == 1 and json.loads(aside[0].read_text()) == outputs
    assert json.loads((target / "cdk-outputs.json").read_text()) == {
        k: v for k, v in outputs.items() if k != "demo-platform"}, "the remaining stacks' outputs stay"
    import time

    time.sleep(1.1)  # the stamp has one-second resolution
    full = _cli("destroy", "--env", "gone", "--yes", cwd=cwd, **env)
    assert full.returncode == 0, full.stderr
    assert not (target / "cdk-outputs.json").exists()
    assert len(list(target.glob("cdk-outputs.destroyed-*.json"))) == 2
    assert "no later command uses the destroyed stacks' names" in full.stdout


def test_a_failed_destroy_keeps_the_outputs(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, _ = fake_npx
    target = _copy_env(cwd, "stuck", charts_fetched=True)
    (target / "cdk-outputs.json").write_text("{}")
    result = _cli("destroy", "--env", "stuck", "--yes", cwd=cwd, **env, FAKE_NPX_RC="1")
    assert result.returncode == 1 and result.stderr.splitlines()[-1].startswith("error: cdk destroy exited 1")
    assert (target / "cdk-outputs.json").is_file() and not list(target.glob("cdk-outputs.destroyed-*"))


class _Terminal(__import__("io").StringIO):
    """stdin as a terminal that answers ``answer``."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "code"), [("n\n", 1), ("\n", 1), ("yes\n", 0)])
def test_a_destroy_the_user_declines_is_cancelled_not_failed(synthesized, fake_npx, monkeypatch, capsys, answer,
                                                             code) -> None:
    from hyperpod_dpd.app import main

    cwd, _ = synthesized
    env, log = fake_npx
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    with pytest.raises(SystemExit) as exit_:
        main(["destroy", "--env", "demo"])
        raise SystemExit(0)
    err = capsys.readouterr().err
    assert exit_.value.code == code
    assert "destroy 6 stacks of demo in us-west-2? [y/N]" in err
    if code:
        # The answer's line end is the terminal's echo; the question and the answer share a line.
        assert err.rstrip().endswith("[y/N] cancelled: nothing destroyed") and "error" not in err.lower()
        assert not log.exists()
    else:
        assert log.read_text().splitlines()[-1] == "--force"


def test_deploy_refuses_a_config_changed_since_synth(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    shutil.copytree(cwd / "envs" / "demo", cwd / "envs" / "edited")
    cfg = cwd / "envs" / "edited" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("max_model_len: 16384", "max_model_len: 8192"))
    result = _cli("deploy", "--env", "edited", cwd=cwd, **env)
    _one_line_exit(result, 2, "error: envs/edited/config.yaml changed since envs/edited/cdk.out was synthesized")
    assert not log.exists(), "the CDK CLI must not run"


@pytest.mark.parametrize("command", ["diff", "deploy", "destroy"])
def test_nothing_synthesized_is_one_line_and_exit_2(tmp_path, fake_npx, command) -> None:
    env, log = fake_npx
    (tmp_path / "envs" / "fresh").mkdir(parents=True)
    shutil.copy(DEFAULT, tmp_path / "envs" / "fresh" / "config.yaml")
    result = _cli(command, "--env", "fresh", cwd=tmp_path, **env)
    _one_line_exit(result, 2, "error: envs/fresh/cdk.out holds no synthesized templates")
    assert "run: hyperpod-dpd synth --env fresh" in result.stderr
    assert not log.exists()


def test_an_unknown_stack_is_one_line_and_exit_2(synthesized, fake_npx) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    result = _cli("deploy", "hyperpod-dpd-network", "--env", "demo", cwd=cwd, **env)
    _one_line_exit(result, 2, "error: stack must be one of Network (demo-network)")
    assert not log.exists()


@pytest.mark.parametrize(("args", "starts"), [
    (("synth",), "error: name the config"),
    (("synth", "--env", "demo", "--outputs-file", "nope.json"), "error: --outputs-file 'nope.json' does not exist"),
    (("init", "Bad_Name"), "error: environment name must be 1-31 lowercase letters"),
    (("init", "demo"), "error: environment 'demo' exists already"),
    (("init", "other", "--from", "missing.yaml"), "error: config file 'missing.yaml' cannot be read"),
])
def test_bad_input_is_one_line_and_exit_2(synthesized, args, starts) -> None:
    cwd, _ = synthesized
    _one_line_exit(_cli(*args, cwd=cwd), 2, starts)


def test_synth_of_a_bad_config_is_one_line_and_writes_nothing(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFAULT.read_text().replace("routing_threshold_tokens: 4096", "routing_threshold_tokens: 20000"))
    result = _cli("synth", "--config", str(bad), cwd=tmp_path)
    _one_line_exit(result, 2, "error: endpoint.routing_threshold_tokens must be below")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_synth_refuses_the_outputs_of_another_deployment(synthesized) -> None:
    cwd, _ = synthesized
    other = cwd / "other-outputs.json"
    other.write_text(json.dumps({"hyperpod-dpd-platform": {"ModelBucketName": "someone-elses"}}))
    before = sorted(p.name for p in (cwd / "envs/demo/dist").iterdir())
    result = _cli("synth", "--env", "demo", "--outputs-file", str(other), cwd=cwd)
    _one_line_exit(result, 2,
        f"error: outputs file {str(other)!r}: stack 'hyperpod-dpd-platform' does not belong to config name 'demo'")
    assert sorted(p.name for p in (cwd / "envs/demo/dist").iterdir()) == before


@pytest.mark.slow
def test_the_main_job_script_rejects_a_bad_config_in_one_line_and_keeps_its_outputs(tmp_path) -> None:
    """``./scripts/synth bad.yaml``: set-up, then one line and exit 2 before anything is replaced."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(DEFAULT.read_text().replace("routing_threshold_tokens: 4096", "routing_threshold_tokens: 20000"))
    marker = REPO_ROOT / "cdk.out" / "manifest.json"
    before = marker.read_bytes() if marker.is_file() else None
    result = subprocess.run([str(REPO_ROOT / "scripts" / "synth"), str(bad)], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if not line.startswith("[setup]")]
    assert len(errors) == 1 and errors[0].startswith("error: endpoint.routing_threshold_tokens must be below")
    assert (marker.read_bytes() if marker.is_file() else None) == before


def _with_parameters(cwd: Path, name: str, parameters: dict) -> None:
    """A copy of the demo environment whose Cluster template declares ``parameters`` (as main's does)."""
    shutil.copytree(cwd / "envs" / "demo", cwd / "envs" / name)
    template = cwd / "envs" / name / "cdk.out" / "Cluster.template.json"
    data = json.loads(template.read_text())
    data.setdefault("Parameters", {}).update(parameters)
    template.write_text(json.dumps(data))


def test_deploy_fills_the_admin_principal_parameter(synthesized, fake_npx) -> None:
    """A required ``AdminPrincipalArn`` gets the role of an assumed-role session (an access entry names roles)."""
    cwd, _ = synthesized
    env, log = fake_npx
    _with_parameters(cwd, "admin", {"AdminPrincipalArn": {"Type": "String"}})
    _copy_env(cwd, "admin", charts_fetched=True)
    result = _cli("deploy", "--env", "admin", "--yes", "--admin-principal-arn",
                  "arn:aws:sts::111122223333:assumed-role/Ops/alice", cwd=cwd, **env)
    assert result.returncode == 0, result.stderr
    argv = log.read_text().splitlines()
    assert argv[argv.index("--parameters") + 1] == "demo-cluster:AdminPrincipalArn=arn:aws:iam::111122223333:role/Ops"


@pytest.mark.parametrize(("parameters", "args", "starts"), [
    ({"AdminPrincipalArn": {"Type": "String"}}, ("--admin-principal-arn", "alice"),
     "error: admin principal must be an IAM user, IAM role or assumed-role session ARN, got 'alice'"),
    ({"Other": {"Type": "String"}}, (), "error: stack demo-cluster needs parameters Other that hyperpod-dpd does"),
])
def test_deploy_parameter_bad_input_is_one_line_and_exit_2(synthesized, fake_npx, parameters, args, starts) -> None:
    cwd, _ = synthesized
    env, log = fake_npx
    name = f"p{len(list((cwd / 'envs').iterdir()))}"
    _with_parameters(cwd, name, parameters)
    _one_line_exit(_cli("deploy", "--env", name, *args, cwd=cwd, **env), 2, starts)
    assert not log.exists()


@pytest.mark.parametrize(("caller", "principal"), [
    ("arn:aws:sts::111122223333:assumed-role/Admin/session-1", "arn:aws:iam::111122223333:role/Admin"),
    ("arn:aws:iam::111122223333:user/alice", "arn:aws:iam::111122223333:user/alice"),
    ("arn:aws:iam::111122223333:role/path/Ops", "arn:aws:iam::111122223333:role/path/Ops"),
])
def test_principal_arn_of_a_caller(caller: str, principal: str) -> None:
    """STS GetCallerIdentity ARN forms (IAM user guide, 'IAM identifiers')."""
    from hyperpod_dpd.commands.lifecycle import principal_arn

    assert principal_arn(caller) == principal


@pytest.mark.parametrize("fetched", [True, False])
def test_synth_says_plainly_when_the_templates_cannot_deploy_yet(synthesized, monkeypatch, fetched) -> None:
    """The summary's next steps start with what to run when CloudFormation would refuse the templates."""
    from hyperpod_core import environment
    from hyperpod_mainjob.job import next_steps

    cwd, _ = synthesized
    name = "steps-fetched" if fetched else "steps-unfetched"
    _copy_env(cwd, name, charts_fetched=fetched)
    monkeypatch.chdir(cwd)
    steps = next_steps(environment.resolve(env=name), deployed=False, via_cli=True)
    if fetched:
        assert steps == [f"hyperpod-dpd preflight --env {name}", f"hyperpod-dpd deploy --env {name}"]
        return
    assert steps[0].startswith("NOT DEPLOYABLE YET: stack demo-cluster cannot deploy yet: Helm charts "
                               "nvidia-device-plugin")
    assert steps[1].startswith("./scripts/setup   # with access to raw.githubusercontent.com")
    assert steps[2].startswith(f"hyperpod-dpd synth --env {name}")
    assert steps[-1] == f"hyperpod-dpd deploy --env {name}"
