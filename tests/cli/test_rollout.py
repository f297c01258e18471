"""``hyperpod-dpd rollout`` against the fake scheduler (tests/cli/fake_scheduler.py): the config's instance groups as
nodes with 8 GPUs each, the operator's Deployments with the strategy each test gives, pods bound only where their GPUs
fit.

The endpoint manifests are the default config's synthesized one (tests/k8s/snapshots/default, no synth here) with its
placeholders resolved: the live endpoint runs the weights of revision :data:`OLD`, the environment's last synth wrote
revision :data:`NEW` (a new ``--model`` path: the weekly fine-tune, issue 36's "Why").
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from day2_fakes import DecoderBehaviour, FakeCluster, deployed_at, one_line_error
from fake_scheduler import RECREATE, ROLLING, Operator, nodes_of, revision_server, scheduler_server

from hyperpod_core import environment
from hyperpod_core.config import load_config
from hyperpod_core.errors import CommandFailed
from hyperpod_dpd.commands import rollout as rollout_cmd
from hyperpod_dpd.commands import smoke as smoke_cmd
from hyperpod_dpd.rollout import cluster as cluster_mod

pytest_plugins = ("day2_fixtures",)

REPO_ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = REPO_ROOT / "tests" / "k8s" / "snapshots" / "default" / "llama-3-3-70b-dpd.k8s.yaml"
NAME, NS = "llama-3-3-70b", "default"
OLD, NEW = "sha256-1f6441a8da688874", "sha256-2b7c9e0d4f1a3e55"
ROUTER_DOMAIN = "hyperpod-inference-system.svc.cluster.local"


def manifest(revision: str = NEW) -> dict[str, Any]:
    """The default config's synthesized DPD endpoint with the weights of ``revision`` and the deploy outputs filled
    in (the snapshot's ``UNRESOLVED-*`` placeholders)."""
    text = (SNAPSHOT.read_text().replace("UNRESOLVED-ModelRevision", revision)
            .replace("UNRESOLVED-ModelBucketName", "model-bucket")
            .replace("UNRESOLVED-EksClusterArn", "arn:aws:eks:us-west-2:123456789012:cluster/hyperpod-dpd-eks"))
    doc: dict[str, Any] = yaml.safe_load(text)
    return doc


@dataclass
class Fleet:
    operator: Operator
    config: Path
    kubeconfig: Path
    workdir: Path

    @property
    def store(self) -> Path:
        return self.workdir / "rollouts" / f"{NAME}.json"

    def record(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.store.read_text())
        return data

    def args(self, *extra: str) -> list[str]:
        return ["rollout", "--config", str(self.config), "--kubeconfig", str(self.kubeconfig), *extra]

    def service(self) -> str | None:
        svc = self.operator.services.get((NS, NAME))
        return svc["spec"]["externalName"] if svc else None

    @property
    def endpoints(self) -> list[str]:
        return sorted(name for _, name in self.operator.cluster.endpoints)


@pytest.fixture
def fleet(tmp_path: Path, config_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Fleet]]:
    """``fleet(nodes_per_pool=1, strategy=ROLLING, live=manifest(OLD), synthesized=manifest(NEW), running=True)``: the
    default config (``nodes_per_pool`` nodes in each of its two groups), the synthesized manifest in its folder's
    ``dist/``, and the fake cluster running ``live`` (nothing when not ``running``), served until the test ends."""
    monkeypatch.setattr(rollout_cmd, "POLL_SECONDS", 0.0)
    monkeypatch.setattr(rollout_cmd, "SMOKE_LOG_WAIT_SECONDS", 0.0)
    stack = ExitStack()

    def make(*, nodes_per_pool: int = 1, strategy: dict[str, Any] = ROLLING, live: dict[str, Any] | None = None,
             synthesized: dict[str, Any] | None = None, running: bool = True) -> Fleet:
        text = config_file.read_text()
        assert text.count("      instance_count: 1\n") == 2  # config/default.yaml: one p5 per pool
        config_file.write_text(text.replace("      instance_count: 1\n", f"      instance_count: {nodes_per_pool}\n"))
        config = load_config(config_file)
        workdir = config_file.with_suffix(".out")
        (workdir / "cdk.out").mkdir(parents=True, exist_ok=True)
        environment.stamp(workdir / "cdk.out", config_file, config)  # the synth below is of this config
        dist = workdir / "dist" / NAME / "endpoint" / f"{NAME}-dpd.k8s.yaml"
        dist.parent.mkdir(parents=True, exist_ok=True)
        dist.write_text(yaml.safe_dump(synthesized or manifest(NEW)))
        operator = Operator(cluster=FakeCluster(), strategy=copy.deepcopy(strategy))
        operator.cluster.nodes = nodes_of(config)
        if running:
            operator.create(live or manifest(OLD))
        kubeconfig = tmp_path / "kubeconfig"
        url = stack.enter_context(scheduler_server(operator, kubeconfig))
        deployed_at(config_file, url)
        operator.events.clear()
        return Fleet(operator=operator, config=config_file, kubeconfig=kubeconfig, workdir=workdir)

    yield make
    stack.close()


@contextmanager
def answering(f: Fleet, monkeypatch: pytest.MonkeyPatch, name: str,
              behaviour: DecoderBehaviour | None = None) -> Iterator[str]:
    """A streaming server playing endpoint revision ``name`` (by default its decoder logs the KV transfer of a long
    prompt), reached as the revision's load balancer would be."""
    with revision_server(f.operator, name, NS, behaviour or DecoderBehaviour()) as url:
        monkeypatch.setattr(smoke_cmd, "_load_balancer_url", lambda dep, spec, names, kube, tmp: (url, None))
        yield url


def host(name: str) -> str:
    return f"{name}-{NS}-routing-service.{ROUTER_DOMAIN}"


# --- the scheduler: why an in-place change deadlocks on the default layout -----------------------------------------

def _apply_in_place(op: Operator, doc: dict[str, Any]) -> None:
    """``kubectl apply`` of ``doc`` over the live endpoint (a replace with its resourceVersion)."""
    live = op.cluster.endpoints[(NS, NAME)]
    body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]}}
    assert isinstance(op.replace((NS, NAME), body), dict)
    for _ in range(5):  # the controllers get time: nothing changes any more
        op.reconcile()


def test_in_place_on_one_full_node_per_pool_with_rolling_update_deadlocks(fleet: Callable[..., Fleet]) -> None:
    """Seed (a): each role holds all 8 GPUs of its pool's only node; with RollingUpdate maxSurge 1 /
    maxUnavailable 0 (what Kubernetes' 25 % defaults give at one replica) the new spec's surge pod never binds, and
    the old pod keeps serving the old weights (k8s-review defect 1)."""
    f = fleet()
    _apply_in_place(f.operator, manifest(NEW))
    for role in ("prefill", "decode"):
        pods = f.operator.role_pods(NAME, role)
        running = [p for p in pods if p["status"]["phase"] == "Running"]
        pending = [p for p in pods if p["status"]["phase"] == "Pending"]
        assert len(running) == len(pending) == 1
        assert OLD in running[0]["spec"]["containers"][1]["args"][1]  # the old pod serves the old --model
        assert NEW in pending[0]["spec"]["containers"][1]["args"][1]
        scheduled = next(c for c in pending[0]["status"]["conditions"] if c["type"] == "PodScheduled")
        assert scheduled["reason"] == "Unschedulable" and "Insufficient nvidia.com/gpu" in scheduled["message"]
    assert f.operator.cluster.endpoints[(NS, NAME)]["status"]["state"] == "DeploymentInProgress"


def test_in_place_with_a_spare_node_per_pool_finishes(fleet: Callable[..., Fleet]) -> None:
    """The same apply with a second node per pool: the surge pods bind, the old pods go, the endpoint completes."""
    f = fleet(nodes_per_pool=2)
    _apply_in_place(f.operator, manifest(NEW))
    for role in ("prefill", "decode"):
        pods = f.operator.role_pods(NAME, role)
        assert [p["status"]["phase"] for p in pods] == ["Running"]
        assert NEW in pods[0]["spec"]["containers"][1]["args"][1]
    assert f.operator.cluster.endpoints[(NS, NAME)]["status"]["state"] == "DeploymentComplete"


# --- the three plans ----------------------------------------------------------------------------------------------

def test_plan_a_one_full_node_per_pool_with_rolling_update_is_replace(cli, fleet: Callable[..., Fleet]) -> None:
    f = fleet()
    result = cli(*f.args("--dry-run"))
    assert result.code == 0, result.err
    out = result.out
    assert "plan: REPLACE" in out
    assert "blue/green: a second copy does not fit" in out
    assert "in place: would deadlock: prefill: a pod of 8 GPUs fits no node of hyperpod-dpd/pool=prefill" in out
    # The planner's cold start (analysis/hyperpod_analysis/plan/coldstart.py): AWS's 5-10 min for a 70B model
    # from cold S3, scaled by weight bytes; new weights are not in the NVMe weights cache yet.
    assert "planned downtime: one cold start: 5.0-10.0 min from S3" in out
    assert f"model: --model: /opt/ml/model/llama-3-3-70b-instruct/{OLD} -> " in out
    assert out.rstrip().endswith("dry run: nothing changed")
    assert f.operator.events == [] and not f.store.exists()


def test_plan_b_recreate_is_in_place_with_the_cold_start(cli, fleet: Callable[..., Fleet]) -> None:
    f = fleet(strategy=RECREATE)
    result = cli(*f.args("--dry-run"))
    assert result.code == 0, result.err
    assert "plan: IN PLACE" in result.out
    assert "in place: fits (the prefill and decode pods all stop before new ones serve: downtime of one cold start)" \
        in result.out
    assert "planned downtime: one cold start: 5.0-10.0 min from S3" in result.out
    assert f.operator.events == []


def test_plan_c_two_nodes_per_pool_is_blue_green(cli, fleet: Callable[..., Fleet]) -> None:
    f = fleet(nodes_per_pool=2)
    result = cli(*f.args("--dry-run"))
    assert result.code == 0, result.err
    assert f"plan: BLUE/GREEN as {NAME}-r1" in result.out
    assert "planned downtime: none" in result.out
    assert f.operator.events == []


# --- runs -----------------------------------------------------------------------------------------------------------

def test_blue_green_applies_a_revision_repoints_the_service_and_deletes_the_old_one(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    f = fleet(nodes_per_pool=2)
    with answering(f, monkeypatch, f"{NAME}-r1"):
        result = cli(*f.args("--yes"))
    assert result.code == 0, result.err
    assert f.endpoints == [f"{NAME}-r1"]
    assert f.service() == host(f"{NAME}-r1")
    assert f.operator.events == [f"create InferenceEndpointConfig {NAME}-r1",
                                 f"create Service {NAME} -> {host(NAME + '-r1')}",
                                 f"delete InferenceEndpointConfig {NAME}"]
    live = f.operator.cluster.endpoints[(NS, f"{NAME}-r1")]
    assert live["metadata"]["labels"]["hyperpod-dpd/revision"] == "1"
    assert NEW in live["spec"]["worker"]["args"][1]
    for step in ("[1/5] apply", "[3/5] smoke test", "[4/5] point Service default/llama-3-3-70b at", "[5/5] delete"):
        assert step in result.out
    # smoke's own checks ran on the revision: the long prompt was prefilled remotely, its KV arrived in full
    assert "smoke short prompt" in result.out and "KV 8203/8203 tokens: ok" in result.out
    record = f.record()
    assert (record["current"]["name"], record["previous"]["name"], record["operation"]) == (
        f"{NAME}-r1", NAME, None)


def test_a_failed_smoke_test_stops_before_the_service_moves(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    """The new revision answers, but no KV arrives at its decoder for the long prompt: the old revision keeps
    serving, the Service is not created, and the store keeps the two finished steps for a resume or --undo."""
    f = fleet(nodes_per_pool=2)
    with answering(f, monkeypatch, f"{NAME}-r1", DecoderBehaviour(log_transfer=False)):
        result = cli(*f.args("--yes"))
    assert result.code == 1
    line = one_line_error(result)
    assert "smoke test of llama-3-3-70b-r1 failed (long: no 'Retrieved N out of N required tokens')" in line
    assert "stopped in step 3/5" in line and "--undo returns to llama-3-3-70b" in line
    assert f.endpoints == [NAME, f"{NAME}-r1"] and f.service() is None
    assert f.record()["operation"]["done"] == 2


def test_replace_deletes_waits_and_applies(cli, fleet: Callable[..., Fleet]) -> None:
    f = fleet()
    result = cli(*f.args("--yes"))
    assert result.code == 0, result.err
    assert f.operator.events == [f"delete InferenceEndpointConfig {NAME}", f"create InferenceEndpointConfig {NAME}",
                                 f"create Service {NAME} -> {host(NAME)}"]
    assert NEW in f.operator.cluster.endpoints[(NS, NAME)]["spec"]["worker"]["args"][1]
    assert f"{NAME}: DeletionInProgress" in result.out


def test_with_nothing_live_it_creates_the_endpoint_and_its_address(cli, fleet: Callable[..., Fleet]) -> None:
    f = fleet(running=False)
    result = cli(*f.args("--yes"))
    assert result.code == 0, result.err
    assert "plan: CREATE as llama-3-3-70b" in result.out and "nothing live: the endpoint is applied; it fits" in \
        result.out
    assert f.operator.events == [f"create InferenceEndpointConfig {NAME}", f"create Service {NAME} -> {host(NAME)}"]
    assert f.record()["current"]["name"] == NAME and f.record()["previous"] is None


def test_in_place_with_recreate_applies_both_roles_at_once(cli, fleet: Callable[..., Fleet]) -> None:
    f = fleet(strategy=RECREATE)
    result = cli(*f.args("--yes"))
    assert result.code == 0, result.err
    assert f.operator.events[0] == f"replace InferenceEndpointConfig {NAME}"
    for role in ("prefill", "decode"):
        assert [NEW in p["spec"]["containers"][1]["args"][1] for p in f.operator.role_pods(NAME, role)] == [True]


def test_undo_returns_to_the_previous_revision_with_the_same_planner(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    """(d): after the blue/green to r1, --undo plans blue/green again (a second copy still fits) and brings the old
    weights back as r2; a second --undo goes forward to r1's weights as r3."""
    f = fleet(nodes_per_pool=2)
    with answering(f, monkeypatch, f"{NAME}-r1"):
        assert cli(*f.args("--yes")).code == 0
    f.operator.events.clear()
    with answering(f, monkeypatch, f"{NAME}-r2"):
        result = cli(*f.args("--undo", "--yes"))
    assert result.code == 0, result.err
    assert f"plan: BLUE/GREEN as {NAME}-r2" in result.out
    assert f.endpoints == [f"{NAME}-r2"] and f.service() == host(f"{NAME}-r2")
    assert OLD in f.operator.cluster.endpoints[(NS, f"{NAME}-r2")]["spec"]["worker"]["args"][1]
    record = f.record()
    assert (record["current"]["number"], record["previous"]["name"], record["last"]) == (2, f"{NAME}-r1", 2)


def test_a_lost_revision_store_goes_on_from_the_revision_the_service_names(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    """After a blue/green to r1 the store is lost (deleted, another machine): rollout reads what serves from the
    stable Service's annotations instead of planning a second copy under the endpoint's own name."""
    f = fleet(nodes_per_pool=2)
    with answering(f, monkeypatch, f"{NAME}-r1"):
        assert cli(*f.args("--yes")).code == 0
    f.store.unlink()
    f.operator.events.clear()
    result = cli(*f.args("--yes"))
    assert result.code == 0, result.err
    assert f"Service {NS}/{NAME} points at {NAME}-r1 (revision 1), which is live" in result.out
    assert "plan: no change" in result.out and "plan: CREATE" not in result.out
    assert f.operator.events == [] and f.endpoints == [f"{NAME}-r1"]


def test_a_lost_store_after_a_blue_green_and_an_in_place_change_goes_on_from_the_serving_revision(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    """Blue/green to r1, then an in-place change keeps the name r1 and labels it revision 2; the store is lost: the
    Service names r1 with revision 2, and rollout goes on from it."""
    f = fleet(nodes_per_pool=2)
    with answering(f, monkeypatch, f"{NAME}-r1"):
        assert cli(*f.args("--yes")).code == 0
    f.operator.services[(NS, NAME)]["metadata"]["annotations"]["hyperpod-dpd/revision"] = "2"
    f.operator.cluster.endpoints[(NS, f"{NAME}-r1")]["metadata"]["labels"]["hyperpod-dpd/revision"] = "2"
    f.store.unlink()
    result = cli(*f.args("--dry-run"))
    assert result.code == 0, result.err
    assert f"points at {NAME}-r1 (revision 2), which is live" in result.out and "plan: no change" in result.out


def test_a_lost_store_never_adopts_an_object_that_is_not_a_revision_of_the_endpoint(
        cli, fleet: Callable[..., Fleet]) -> None:
    """Our Service (hand-edited, or stale) names another endpoint's InferenceEndpointConfig and the store is missing:
    rollout refuses in one line instead of deleting that object and applying this endpoint's spec under its name."""
    f = fleet(running=False)
    other = manifest(OLD)
    other["metadata"]["name"] = "other-endpoint"
    f.operator.create(other)
    from hyperpod_core.names import EndpointNames
    from hyperpod_dpd.rollout.address import stable_service

    f.operator.services[(NS, NAME)] = stable_service(NAME, NS, EndpointNames(name="other-endpoint", namespace=NS), 1,
                                                     "hyperpod-dpd")
    f.operator.events.clear()
    result = cli(*f.args("--yes"))
    assert result.code == 1
    assert "points at InferenceEndpointConfig other-endpoint (revision 1), which is not revision 1 of llama-3-3-70b" \
        in one_line_error(result)
    assert f.operator.events == [] and "other-endpoint" in f.endpoints


def test_a_replicas_only_change_scales_in_place_without_touching_the_serving_pods(
        cli, fleet: Callable[..., Fleet]) -> None:
    """Prefill 1 -> 2 replicas, nothing else (a P:D ratio change), one spare node per pool: no pod template changes,
    so the Deployments only scale (kubernetes/kubernetes pkg/controller/deployment: a scaling event is synced without
    a rollout); the plan is in place without downtime, and the serving prefill pod is never stopped."""
    target = manifest(OLD)
    target["spec"]["pdSpec"]["prefillSpec"]["replicas"] = 2
    f = fleet(nodes_per_pool=2, synthesized=target)
    before = [p["metadata"]["name"] for p in f.operator.role_pods(NAME, "prefill")]
    result = cli(*f.args("--yes"))
    assert result.code == 0, result.err
    assert "plan: IN PLACE" in result.out and "planned downtime: none" in result.out
    after = f.operator.role_pods(NAME, "prefill")
    assert [p["status"]["phase"] for p in after] == ["Running", "Running"]
    assert before[0] in [p["metadata"]["name"] for p in after]


def test_nothing_to_undo_without_a_previous_revision(cli, fleet: Callable[..., Fleet]) -> None:
    f = fleet()
    result = cli(*f.args("--undo", "--yes"))
    assert result.code == 2
    assert "nothing to undo" in one_line_error(result)
    assert f.operator.events == []


def test_interrupted_blue_green_resumes_at_the_step_it_stopped(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    """(e): Ctrl-C in step 4 (the Service) leaves the store at 3 finished steps; rollout shows the unfinished
    rollout, and --yes runs the two steps left."""
    f = fleet(nodes_per_pool=2)
    real = cluster_mod.Cluster.put_service

    def interrupted(self: Any, body: dict[str, Any]) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cluster_mod.Cluster, "put_service", interrupted)
    with answering(f, monkeypatch, f"{NAME}-r1"):
        stopped = cli(*f.args("--yes"))
    assert stopped.code == 130
    assert "rollout stopped in step 4/5 (point Service default/llama-3-3-70b at llama-3-3-70b-r1), 3 done" in \
        stopped.err
    assert f.record()["operation"]["done"] == 3
    assert f.endpoints == [NAME, f"{NAME}-r1"] and f.service() is None
    monkeypatch.setattr(cluster_mod.Cluster, "put_service", real)
    shown = cli(*f.args("--dry-run"))
    assert shown.code == 0 and "3 of 5 steps done" in shown.out and "dry run: nothing changed" in shown.out
    resumed = cli(*f.args("--yes"))
    assert resumed.code == 0, resumed.err
    assert "[4/5]" in resumed.out and "[1/5]" not in resumed.out
    assert f.endpoints == [f"{NAME}-r1"] and f.service() == host(f"{NAME}-r1")
    assert f.record()["operation"] is None


def test_undo_of_an_interrupted_blue_green_discards_the_new_revision(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    f = fleet(nodes_per_pool=2)

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(rollout_cmd, "smoke_revision", interrupted)
    assert cli(*f.args("--yes")).code == 130
    result = cli(*f.args("--undo", "--yes"))
    assert result.code == 0, result.err
    assert f.endpoints == [NAME] and f.service() == host(NAME)
    record = f.record()
    assert (record["current"]["name"], record["operation"]) == (NAME, None)


def test_undo_once_the_service_moved_is_refused_and_a_resume_finishes(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C as the old revision's delete starts (step 5): the new revision serves through the Service. --undo
    may not discard it (that would delete both revisions): it says so in one line and changes nothing; a resume
    finishes the removal."""
    f = fleet(nodes_per_pool=2)
    real = cluster_mod.Cluster.delete

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cluster_mod.Cluster, "delete", interrupted)
    with answering(f, monkeypatch, f"{NAME}-r1"):
        assert cli(*f.args("--yes")).code == 130
    monkeypatch.setattr(cluster_mod.Cluster, "delete", real)
    f.operator.events.clear()
    undo = cli(*f.args("--undo", "--yes"))
    assert undo.code == 2
    assert f"{NAME}-r1 serves already" in one_line_error(undo)
    assert f.operator.events == [] and f.endpoints == [NAME, f"{NAME}-r1"] and f.service() == host(f"{NAME}-r1")
    resumed = cli(*f.args("--yes"))
    assert resumed.code == 0, resumed.err
    assert f.endpoints == [f"{NAME}-r1"] and f.record()["previous"]["name"] == NAME


def test_undo_of_a_replace_whose_delete_was_refused_deletes_nothing(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    """The replace's delete is refused (403), so the endpoint still runs its old spec: --undo drops the unfinished
    rollout and deletes nothing."""
    f = fleet()
    real = cluster_mod.Cluster.delete

    def forbidden(self: Any, namespace: str, name: str) -> None:
        raise CommandFailed(f"deleting InferenceEndpointConfig {namespace}/{name}: 403 Forbidden")

    monkeypatch.setattr(cluster_mod.Cluster, "delete", forbidden)
    assert cli(*f.args("--yes")).code == 1 and f.record()["operation"]["done"] == 0
    monkeypatch.setattr(cluster_mod.Cluster, "delete", real)
    undo = cli(*f.args("--undo", "--yes"))
    assert undo.code == 0, undo.err
    assert "nothing to undo: llama-3-3-70b still runs its own spec, untouched" in undo.out
    assert f.operator.events == [] and f.record()["operation"] is None
    assert OLD in f.operator.cluster.endpoints[(NS, NAME)]["spec"]["worker"]["args"][1]


def test_in_place_of_a_new_template_and_replica_count_deadlocks_on_the_scaling_event_first(
        fleet: Callable[..., Fleet]) -> None:
    """Prefill 1 -> 2 replicas and 8 -> 4 GPUs in one apply, one spare node per pool: the scaling event gives the
    spare node to a second old-template pod, the new 4-GPU pod stays Pending and no old pod may stop: the rollout
    never finishes, as the planner says (test_rollout_plan, a new template and a new replica count)."""
    f = fleet(nodes_per_pool=2)
    target = manifest(NEW)
    target["spec"]["pdSpec"]["prefillSpec"].update(replicas=2, resources={"requests": {"nvidia.com/gpu": 4},
                                                                          "limits": {"nvidia.com/gpu": 4}})
    _apply_in_place(f.operator, target)
    pods = f.operator.role_pods(NAME, "prefill")
    old = [p for p in pods if OLD in p["spec"]["containers"][1]["args"][1]]
    assert [p["status"]["phase"] for p in old] == ["Running", "Running"]
    assert [p["status"]["phase"] for p in pods if p not in old] == ["Pending"]
    assert f.operator.cluster.endpoints[(NS, NAME)]["status"]["state"] == "DeploymentInProgress"


def test_undo_of_an_in_place_change_applied_but_not_recorded_goes_back_in_place(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C right after the in-place apply reached the API server (no step recorded): the live object runs the new
    spec, which only adds a field (so it still holds every field of the old one), and --undo may not drop the rollout
    as if nothing happened; it applies the old spec back in place."""
    target = manifest(OLD)
    target["spec"]["modelSourceConfig"]["prefetchEnabled"] = True
    f = fleet(strategy=RECREATE, synthesized=target)
    real = cluster_mod.Cluster.update

    def applied_then_interrupted(self: Any, doc: dict[str, Any]) -> None:
        real(self, doc)
        raise KeyboardInterrupt

    monkeypatch.setattr(cluster_mod.Cluster, "update", applied_then_interrupted)
    assert cli(*f.args("--yes")).code == 130 and f.record()["operation"]["done"] == 0
    monkeypatch.setattr(cluster_mod.Cluster, "update", real)
    undo = cli(*f.args("--undo", "--yes"))
    assert undo.code == 0, undo.err
    assert "nothing to undo" not in undo.out
    assert "prefetchEnabled" not in f.operator.cluster.endpoints[(NS, NAME)]["spec"]["modelSourceConfig"]
    record = f.record()
    assert (record["current"]["number"], record["current"]["name"], record["previous"]) == (2, NAME, None)


def test_in_place_with_one_more_prefill_than_the_spare_nodes_hold_is_not_planned(
        cli, fleet: Callable[..., Fleet]) -> None:
    """Two nodes per pool, prefill 1 -> 2 replicas: blue/green does not fit (3 prefill pods on 2 nodes), in place would
    leave one new prefill pod Pending beside the old one for good; the plan is a replace (both prefill pods fit once
    the live endpoint is gone)."""
    target = manifest(NEW)
    target["spec"]["pdSpec"]["prefillSpec"]["replicas"] = 2
    f = fleet(nodes_per_pool=2, synthesized=target)
    result = cli(*f.args("--dry-run"))
    assert result.code == 0, result.err
    assert "in place: would deadlock: prefill: a pod of 8 GPUs" in result.out and "plan: REPLACE" in result.out


# --- refusals -------------------------------------------------------------------------------------------------------

def test_a_replace_that_cannot_place_the_new_pods_is_refused_before_anything_is_deleted(
        cli, fleet: Callable[..., Fleet]) -> None:
    """Decode 1 -> 2 replicas on one p5 per pool: deleting the live endpoint frees one node per pool, the second
    decoder would wait Pending for good; rollout refuses in one line and deletes nothing."""
    target = manifest(NEW)
    target["spec"]["pdSpec"]["decodingSpec"]["replicas"] = 2
    f = fleet(synthesized=target)
    result = cli(*f.args("--yes"))
    assert result.code == 2
    line = one_line_error(result)
    assert f"even with {NAME} deleted, decode: a pod of 8 GPUs fits no node" in line
    assert f.operator.events == [] and f.endpoints == [NAME]


def test_a_blue_green_revision_name_the_fleet_refuses_does_not_block_a_replace(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    """The revision-name rule only concerns blue/green: with one p5 per pool the plan is a replace, which keeps the
    endpoint's own name, so a name problem of <endpoint>-r1 is no reason to refuse it."""
    from hyperpod_dpd.rollout import plan as plan_mod

    monkeypatch.setattr(plan_mod, "revision_name_problem", lambda name, ns, others: f"revision {name} is taken")
    f = fleet()
    result = cli(*f.args("--dry-run"))
    assert result.code == 0, result.err
    assert "plan: REPLACE" in result.out


def test_a_blue_green_that_fits_under_a_refused_revision_name_goes_in_place(
        cli, fleet: Callable[..., Fleet], monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.rollout import plan as plan_mod

    monkeypatch.setattr(plan_mod, "revision_name_problem", lambda name, ns, others: f"revision {name} is taken")
    f = fleet(nodes_per_pool=2)
    result = cli(*f.args("--dry-run"))
    assert result.code == 0, result.err
    assert "plan: IN PLACE" in result.out and f"blue/green: not possible: revision {NAME}-r1 is taken" in result.out


def test_without_a_terminal_and_without_yes_it_refuses_in_one_line(cli, fleet: Callable[..., Fleet]) -> None:
    f = fleet(nodes_per_pool=2)
    result = cli(*f.args())
    assert result.code == 2
    assert "stdin is not a terminal: pass --yes" in one_line_error(result)
    assert f.operator.events == [] and not f.store.exists()


def test_a_model_change_that_keeps_model_with_an_l2_cache_is_refused(cli, fleet: Callable[..., Fleet]) -> None:
    """Issue 33's keys carry --model only: new weights under the same --model with an L2 cache would read the old
    weights' KV. Here model.revision stays 'v1' while the weights move to another prefix."""
    def with_l2(doc: dict[str, Any], location: str) -> dict[str, Any]:
        doc = copy.deepcopy(doc)
        doc["spec"]["kvCacheSpec"] = {"enableL1Cache": True, "enableL2Cache": True,
                                      "l2CacheSpec": {"l2CacheBackend": "redis"}}
        doc["spec"]["modelSourceConfig"]["modelLocation"] = location
        return doc

    f = fleet(nodes_per_pool=2, live=with_l2(manifest("v1"), "models/a/"), synthesized=with_l2(manifest("v1"),
                                                                                                "models/b/"))
    result = cli(*f.args("--yes"))
    assert result.code == 2
    line = one_line_error(result)
    assert "--model stays '/opt/ml/model/llama-3-3-70b-instruct/v1'" in line and "model.revision" in line
    assert "--kv-flushed" in line
    assert f.operator.events == []


def test_a_service_of_that_name_that_is_not_ours_is_left_alone(cli, fleet: Callable[..., Fleet]) -> None:
    f = fleet(nodes_per_pool=2)
    f.operator.services[(NS, NAME)] = {"apiVersion": "v1", "kind": "Service",
                                       "metadata": {"name": NAME, "namespace": NS, "labels": {"app": "x"}},
                                       "spec": {"type": "ClusterIP", "ports": [{"port": 80}]}}
    result = cli(*f.args("--yes"))
    assert result.code == 1
    assert "is not ours" in one_line_error(result)
    assert f.operator.events == []
