"""The rollout planner's pure functions (:mod:`hyperpod_dpd.rollout.plan`) and the revision store
(:mod:`hyperpod_dpd.rollout.store`), one rule per test, on small dicts."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hyperpod_analysis.plan.coldstart import cold_start
from hyperpod_core.errors import UsageError
from hyperpod_core.models import MODELS
from hyperpod_core.names import EndpointNames
from hyperpod_dpd.rollout import capacity as c
from hyperpod_dpd.rollout import plan as p
from hyperpod_dpd.rollout.store import Record, Revision, RevisionStore

POOL = "hyperpod-dpd/pool"
SELECTORS: dict[Any, dict[str, str]] = {"prefill": {POOL: "prefill"}, "decode": {POOL: "decode"}}


def spec(*, model: str = "/opt/ml/model/m/r1", location: str = "models/m/r1", image: str = "img:1", gpus: int = 8,
         replicas: int = 1, l2: bool = False) -> dict[str, Any]:
    role = {"replicas": replicas, "args": ["--max-num-seqs", "16"],
            "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}}
    return {"modelName": "m", "instanceType": "ml.p5.48xlarge",
            "modelSourceConfig": {"modelSourceType": "s3", "modelLocation": location,
                                  "s3Storage": {"bucketName": "b", "region": "us-west-2"}},
            "worker": {"image": image, "args": ["--model", model, "--tensor-parallel-size", str(gpus)]},
            "kvCacheSpec": {"enableL1Cache": True, "enableL2Cache": l2, **(
                {"l2CacheSpec": {"l2CacheBackend": "redis"}} if l2 else {})},
            "pdSpec": {"prefillSpec": {**copy.deepcopy(role), "nodeSelector": {POOL: "prefill"}},
                       "decodingSpec": {**copy.deepcopy(role), "nodeSelector": {POOL: "decode"}}}}


def node(name: str, pool: str, *, held: int = 0, owner: str = "default/x", allocatable: int = 8,
         schedulable: bool = True) -> c.NodeRoom:
    return c.NodeRoom(name=name, labels={POOL: pool}, allocatable=allocatable,
                      held={owner: held} if held else {}, schedulable=schedulable)


def full_pools(per_pool: int = 1) -> list[c.NodeRoom]:
    """The live endpoint's two 8-GPU pods, one on the first node of each pool; ``per_pool`` nodes in each."""
    return [node(f"{pool}-{i}", pool, held=8 if i == 0 else 0, owner=f"default/{pool}-e") for pool in
            ("prefill", "decode") for i in range(per_pool)]


def rolling(role: str, surge: int | str | None = 1, unavailable: int | str | None = 0,
            replicas: int = 1) -> c.Strategy:
    return c.Strategy(deployment=f"{role}-e", type="RollingUpdate", replicas=replicas, max_surge=surge,
                      max_unavailable=unavailable)


def recreate(role: str) -> c.Strategy:
    return c.Strategy(deployment=f"{role}-e", type="Recreate", replicas=1)


# --- Kubernetes' rounding of the strategy --------------------------------------------------------------------------

@pytest.mark.parametrize(("surge", "unavailable", "replicas", "expected"), [
    (None, None, 1, (1, 0)),  # the 25 % defaults at one replica (Kubernetes docs, "Deployments": surge up, down)
    ("25%", "25%", 4, (1, 1)),
    ("50%", "50%", 3, (2, 1)),
    (2, 1, 1, (2, 1)),
    ("3", "0", 1, (3, 0)),
    # Both resolve to 0 (surge 0, 25 % of one replica rounded down): the Deployment controller sets maxUnavailable to 1
    # (kubernetes/kubernetes pkg/controller/deployment/util/deployment_util.go, ResolveFenceposts)
    (0, "25%", 1, (0, 1)),
    ("0%", "10%", 3, (0, 1)),
])
def test_strategy_rounds_surge_up_and_unavailable_down(surge: Any, unavailable: Any, replicas: int,
                                                       expected: tuple[int, int]) -> None:
    s = c.Strategy(deployment="d", type="RollingUpdate", replicas=replicas, max_surge=surge,
                   max_unavailable=unavailable)
    assert (s.surge(), s.unavailable()) == expected


# --- placing pods ---------------------------------------------------------------------------------------------------

def test_a_pod_needs_its_gpus_on_one_node() -> None:
    """Two nodes with 4 free GPUs each do not hold one 8-GPU pod (a pod never spans nodes)."""
    nodes = [node("a", "prefill", held=4), node("b", "prefill", held=4)]
    short = c.place(nodes, [c.Demand(role="prefill", selector={POOL: "prefill"}, gpus=8, pods=1)])
    assert short == ["prefill: a pod of 8 GPUs fits no node of hyperpod-dpd/pool=prefill (free: a: 4, b: 4)"]
    assert c.place(nodes, [c.Demand(role="prefill", selector={POOL: "prefill"}, gpus=4, pods=2)]) == []


def test_only_nodes_the_selector_selects_count() -> None:
    nodes = [node("a", "decode"), node("b", "prefill", held=8)]
    assert c.place(nodes, [c.Demand(role="prefill", selector={POOL: "prefill"}, gpus=8, pods=1)])


def test_an_unschedulable_node_has_no_room() -> None:
    nodes = [node("a", "prefill", schedulable=False)]
    assert c.place(nodes, [c.Demand(role="prefill", selector={POOL: "prefill"}, gpus=1, pods=1)])


def test_both_roles_share_a_pool_they_both_select() -> None:
    shared = {POOL: "shared"}
    nodes = [node("a", "shared")]
    demand = [c.Demand(role=r, selector=shared, gpus=8, pods=1) for r in ("prefill", "decode")]
    assert len(c.place(nodes, demand)) == 1
    assert c.place([*nodes, node("b", "shared")], demand) == []


# --- in place ---------------------------------------------------------------------------------------------------------

def test_in_place_with_rolling_update_deadlocks_on_full_nodes() -> None:
    verdict = c.in_place(spec(), spec(model="/opt/ml/model/m/r2"), {r: rolling(r) for r in ("prefill", "decode")},
                         full_pools(), SELECTORS, "default")
    assert not verdict.fits and "would deadlock" in verdict.lines[-1]


def test_in_place_needs_both_roles_surge_room() -> None:
    """A spare prefill node alone (the p5en example after a prefill scale-down) does not make in place safe: the
    decode role would stay on the old spec (k8s-review defect 1, the mixed window)."""
    nodes = [*full_pools(), node("prefill-1", "prefill")]
    verdict = c.in_place(spec(), spec(image="img:2"), {r: rolling(r) for r in ("prefill", "decode")}, nodes,
                         SELECTORS, "default")
    assert not verdict.fits and "decode: a pod of 8 GPUs" in verdict.lines[-1]


def test_in_place_with_surge_room_for_both_roles_fits_without_downtime() -> None:
    verdict = c.in_place(spec(), spec(image="img:2"), {r: rolling(r) for r in ("prefill", "decode")},
                         full_pools(2), SELECTORS, "default")
    assert verdict.fits and not verdict.downtime


def test_in_place_with_recreate_fits_on_what_the_old_pods_release_with_downtime() -> None:
    verdict = c.in_place(spec(), spec(image="img:2"), {r: recreate(r) for r in ("prefill", "decode")},
                         full_pools(), SELECTORS, "default")
    assert verdict.fits and verdict.downtime


def test_recreate_with_more_gpus_than_the_old_pods_release_does_not_fit() -> None:
    nodes = [node(f"{pool}-0", pool, held=4, owner=f"default/{pool}-e") for pool in ("prefill", "decode")]
    verdict = c.in_place(spec(gpus=4), spec(gpus=8, model="/opt/ml/model/m/r1"),
                         {r: recreate(r) for r in ("prefill", "decode")},
                         [*nodes, node("x", "other", held=4)], SELECTORS, "default")
    assert verdict.fits  # 4 free + 4 released
    busy = [node(f"{pool}-0", pool, held=4, owner=f"default/{pool}-e") for pool in ("prefill", "decode")]
    busy = [c.NodeRoom(name=n.name, labels=n.labels, allocatable=8, held={**n.held, "default/other": 4})
            for n in busy]
    assert not c.in_place(spec(gpus=4), spec(gpus=8), {r: recreate(r) for r in ("prefill", "decode")}, busy,
                          SELECTORS, "default").fits


def test_rolling_update_that_may_stop_its_only_pod_first_goes_with_downtime() -> None:
    verdict = c.in_place(spec(), spec(image="img:2"), {r: rolling(r, surge=0, unavailable=1)
                                                       for r in ("prefill", "decode")}, full_pools(), SELECTORS,
                         "default")
    assert verdict.fits and verdict.downtime


def test_a_rolling_update_whose_fenceposts_both_resolve_to_zero_stops_the_old_pod_first() -> None:
    """maxSurge 0 and maxUnavailable 25 % at one replica: Kubernetes stops the only pod first (ResolveFenceposts), so
    the change goes in place with one cold start of downtime, not as a rollout without downtime."""
    verdict = c.in_place(spec(), spec(image="img:2"), {r: rolling(r, surge=0, unavailable="25%")
                                                       for r in ("prefill", "decode")}, full_pools(), SELECTORS,
                         "default")
    assert verdict.fits and verdict.downtime


def test_roles_sharing_nodes_move_in_the_order_the_controllers_free_the_gpus() -> None:
    """Both roles on one pool: prefill's 4-GPU surge pod takes half of node b; decode (maxSurge 0) stops its 4-GPU
    pod on node a first, and its new 8-GPU pod finds 4 free on a and 4 on b; it binds on a only once prefill's old
    pod is gone (after prefill's new pod is Ready). It finishes, and decode is down meanwhile."""
    shared = {"prefill": {POOL: "shared"}, "decode": {POOL: "shared"}}
    a = c.NodeRoom(name="a", labels={POOL: "shared"}, allocatable=8, held={"default/prefill-e": 4,
                                                                            "default/decode-e": 4})
    b = c.NodeRoom(name="b", labels={POOL: "shared"}, allocatable=8)

    def on_shared(s: dict[str, Any]) -> dict[str, Any]:
        for role in ("prefillSpec", "decodingSpec"):
            s["pdSpec"][role]["nodeSelector"] = {POOL: "shared"}
        return s

    live, target = on_shared(spec(gpus=4)), on_shared(spec(gpus=4))
    target["pdSpec"]["decodingSpec"]["resources"] = {"requests": {"nvidia.com/gpu": 8},
                                                     "limits": {"nvidia.com/gpu": 8}}
    verdict = c.in_place(live, target, {"prefill": rolling("prefill", surge=1, unavailable=0),
                                        "decode": rolling("decode", surge=0, unavailable=1)}, [a, b], shared,
                         "default")
    assert verdict.fits and verdict.downtime
    assert "the decode pods all stop before new ones serve" in verdict.lines[-1]


def test_in_place_with_more_replicas_than_the_spare_nodes_hold_deadlocks() -> None:
    """Prefill 1 -> 2 replicas with one spare node per pool (maxSurge 1, maxUnavailable 0 at two replicas): the new
    ReplicaSet grows to 2 at once, one pod binds, one stays Pending, and the old pod never goes (all 3 - min available
    2 - new unavailable 1 = 0: kubernetes/kubernetes pkg/controller/deployment/rolling.go, reconcileOldReplicaSets):
    the old prefill pod would serve beside the new decoders for good."""
    target = spec(image="img:2")
    target["pdSpec"]["prefillSpec"]["replicas"] = 2
    verdict = c.in_place(spec(), target, {r: rolling(r, surge=None, unavailable=None) for r in ("prefill", "decode")},
                         full_pools(2), SELECTORS, "default")
    assert not verdict.fits
    assert "in place: would deadlock: prefill: a pod of 8 GPUs fits no node" in verdict.lines[-1]


def test_a_surging_role_whose_max_unavailable_covers_every_replica_goes_down() -> None:
    """maxSurge 1 and maxUnavailable 1 at one replica: the old pod is scaled down as the rollout starts (min available
    0), before the new pod is Ready (API reference, RollingUpdateDeployment.maxUnavailable: "the old ReplicaSet can be
    scaled down ... immediately when the rolling update starts")."""
    verdict = c.in_place(spec(), spec(image="img:2"), {r: rolling(r, surge=1, unavailable=1)
                                                       for r in ("prefill", "decode")}, full_pools(2), SELECTORS,
                         "default")
    assert verdict.fits and verdict.downtime


def test_the_default_strategy_at_four_replicas_rolls_one_whole_pod_at_a_time() -> None:
    """Four full nodes per pool, four replicas, Kubernetes' 25 % defaults (surge 1, unavailable 1): one old pod stops
    (8 GPUs on one node, not 2 on each), the surge pod binds there, and so on: in place without downtime."""
    verdict = c.in_place(spec(replicas=4), spec(replicas=4, image="img:2"),
                         {r: rolling(r, surge=None, unavailable=None, replicas=4) for r in ("prefill", "decode")},
                         [node(f"{pool}-{i}", pool, held=8, owner=f"default/{pool}-e") for pool in ("prefill", "decode")
                          for i in range(4)], SELECTORS, "default")
    assert verdict.fits and not verdict.downtime


def test_a_role_whose_template_does_not_change_only_scales() -> None:
    """Prefill 1 -> 2 replicas and nothing else: both Deployments keep their templates, so nothing rolls (a scaling
    event); the extra prefill pod needs a free node, the serving pods stay: in place, no downtime, even with Recreate
    (which acts only on a rollout)."""
    target = spec()
    target["pdSpec"]["prefillSpec"]["replicas"] = 2
    rolling_roles = p.rolling_roles(p.changes(spec(), target))
    assert rolling_roles == set()
    for strategy in (rolling, recreate):
        verdict = c.in_place(spec(), target, {r: strategy(r) for r in ("prefill", "decode")}, full_pools(2),
                             SELECTORS, "default", rolling=rolling_roles)
        assert verdict.fits and not verdict.downtime
    short = c.in_place(spec(), target, {r: rolling(r) for r in ("prefill", "decode")}, full_pools(1), SELECTORS,
                       "default", rolling=rolling_roles)
    assert not short.fits and "in place: no: the added pods do not fit: prefill: a pod of 8 GPUs" in short.lines[-1]


def test_a_change_under_one_role_rolls_that_role_only() -> None:
    """New decode args: decode's template changes, prefill's does not; a change of the worker reaches both."""
    target = spec()
    target["pdSpec"]["decodingSpec"]["args"] = ["--max-num-seqs", "48"]
    assert p.rolling_roles(p.changes(spec(), target)) == {"decode"}
    assert p.rolling_roles(p.changes(spec(), spec(image="img:2"))) == {"prefill", "decode"}
    nodes = [node("prefill-0", "prefill", held=8, owner="default/prefill-e"),
             *[node(f"decode-{i}", "decode", held=8 if i == 0 else 0, owner="default/decode-e") for i in range(2)]]
    verdict = c.in_place(spec(), target, {r: rolling(r) for r in ("prefill", "decode")}, nodes, SELECTORS, "default",
                         rolling={"decode"})
    assert verdict.fits and not verdict.downtime


@pytest.mark.parametrize(("field", "value"), [("replicas", None), ("replicas", "2"), ("gpus", "8")])
def test_counts_written_as_strings_or_left_out_are_read(field: str, value: Any) -> None:
    s = spec()
    if field == "replicas":
        s["pdSpec"]["prefillSpec"]["replicas"] = value
    else:
        s["pdSpec"]["prefillSpec"]["resources"]["requests"]["nvidia.com/gpu"] = value
    prefill = next(d for d in c.demands(s, SELECTORS) if d.role == "prefill")
    assert (prefill.pods, prefill.gpus) == ({None: 1, "2": 2}.get(value, 1), 8)


@pytest.mark.parametrize("value", ["two", "1.5", "-1", "nan", "inf", "1e999", float("nan")])
def test_a_count_that_is_not_a_whole_number_is_one_line_of_bad_input(value: Any) -> None:
    s = spec()
    s["pdSpec"]["decodingSpec"]["replicas"] = value
    with pytest.raises(UsageError, match=r"^pdSpec.decodingSpec.replicas is .*, not a whole number$"):
        c.demands(s, SELECTORS)


def test_a_new_template_and_a_new_replica_count_scale_the_old_pods_first() -> None:
    """Prefill 1 -> 2 replicas and 8 -> 4 GPUs in one apply, one spare prefill node: Kubernetes first syncs the
    scaling event (deployment_controller.go syncDeployment: isScalingEvent -> sync -> scale the old ReplicaSet to 2),
    so an old-template 8-GPU pod takes the spare node; then the rollout's new 4-GPU pod finds no room and no old pod
    may stop (3 - 2 - 1 = 0): a deadlock, not an in-place change."""
    target = spec()
    target["pdSpec"]["prefillSpec"].update(replicas=2, resources={"requests": {"nvidia.com/gpu": 4},
                                                                  "limits": {"nvidia.com/gpu": 4}})
    nodes = [node("prefill-0", "prefill", held=8, owner="default/prefill-e"), node("prefill-1", "prefill"),
             node("decode-0", "decode", held=8, owner="default/decode-e")]
    verdict = c.in_place(spec(), target, {r: rolling(r) for r in ("prefill", "decode")}, nodes, SELECTORS, "default",
                         rolling={"prefill"})
    assert not verdict.fits and "would deadlock: prefill: a pod of 4 GPUs" in verdict.lines[-1]


def test_a_role_at_zero_replicas_has_no_scaling_event_before_its_rollout() -> None:
    """Live prefill at 0 replicas, the target 1 with a new image: an old ReplicaSet at 0 is not active
    (controller_utils.go FilterActiveReplicaSets), so Kubernetes makes no old-template pod first; the new pod binds
    on the free node."""
    live = spec()
    live["pdSpec"]["prefillSpec"]["replicas"] = 0
    nodes = [node("prefill-0", "prefill"), node("decode-0", "decode", held=8, owner="default/decode-e"),
             node("decode-1", "decode")]
    strategies = {"prefill": rolling("prefill", replicas=0), "decode": rolling("decode")}
    verdict = c.in_place(live, spec(image="img:2"), strategies, nodes, SELECTORS, "default")
    assert verdict.fits, verdict.lines


def test_a_colocated_endpoint_places_on_the_nodes_its_node_affinity_selects() -> None:
    """The synthesized colocated baseline carries no instanceType, only a required nodeAffinity: the instance type
    and the roles' pools (tests/k8s/snapshots/default/llama-3-3-70b-colocated.k8s.yaml): a node of another type, or
    of another pool, is no room for it."""
    import yaml

    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "k8s" / "snapshots" / "default"
                          / "llama-3-3-70b-colocated.k8s.yaml").read_text())
    assert "instanceType" not in doc["spec"]
    (worker,) = c.demands(doc["spec"], SELECTORS)
    p5 = c.NodeRoom(name="a", labels={"node.kubernetes.io/instance-type": "ml.p5.48xlarge", POOL: "decode"},
                    allocatable=8)
    g5 = c.NodeRoom(name="b", labels={"node.kubernetes.io/instance-type": "ml.g5.48xlarge", POOL: "decode"},
                    allocatable=8)
    spare = c.NodeRoom(name="c", labels={"node.kubernetes.io/instance-type": "ml.p5.48xlarge", POOL: "spare"},
                       allocatable=8)
    assert worker.selects(p5) and not worker.selects(g5) and not worker.selects(spare)
    where = "node.kubernetes.io/instance-type In ml.p5.48xlarge, hyperpod-dpd/pool In prefill|decode"
    assert c.place([g5, spare], [worker]) == [f"worker: a pod of 8 GPUs fits no node of {where} (free: no node)"]
    assert c.free_by_selector([p5, g5, spare], [worker]) == [f"worker ({where}): 8 of 8 GPUs free on 1 node (a: 8)"]


def test_a_colocated_change_is_not_called_a_mode_change() -> None:
    live = {k: v for k, v in spec().items() if k != "pdSpec"}
    target = {**copy.deepcopy(live), "worker": {**live["worker"], "image": "img:2"}}
    verdict = c.in_place(live, target, {"prefill": None, "decode": None}, [], SELECTORS, "default")
    assert not verdict.fits and "a colocated endpoint changes by blue/green or replace" in verdict.lines[0]


def test_a_mode_change_is_never_in_place() -> None:
    colocated = {k: v for k, v in spec().items() if k != "pdSpec"}
    verdict = c.in_place(spec(), colocated, {r: recreate(r) for r in ("prefill", "decode")}, full_pools(2),
                         SELECTORS, "default")
    assert not verdict.fits and "[I]" in verdict.lines[0]


def test_an_unknown_strategy_is_never_in_place() -> None:
    verdict = c.in_place(spec(), spec(image="img:2"), {"prefill": recreate("prefill"), "decode": None},
                         full_pools(2), SELECTORS, "default")
    assert not verdict.fits and "decode Deployment is not found" in verdict.lines[0]


# --- the decision -----------------------------------------------------------------------------------------------

def _decide(live: dict[str, Any] | None, target: dict[str, Any], nodes: list[c.NodeRoom],
            strategy: Any = rolling, **extra: Any) -> p.Plan:
    return p.decide(endpoint="e", namespace="default", live_name="e" if live else None, live_spec=live,
                    target_spec=target, blue_green_name="e-r1", nodes=nodes,
                    strategies={r: strategy(r) for r in ("prefill", "decode")}, selectors=SELECTORS,
                    cold_start="one cold start: new", cold_start_unchanged="one cold start: cached",
                    live_owners=("default/prefill-e", "default/decode-e"), **extra)


def test_blue_green_comes_first_when_a_second_copy_fits() -> None:
    plan = _decide(spec(), spec(image="img:2"), full_pools(2), recreate)
    assert (plan.kind, plan.target, plan.downtime) == ("blue-green", "e-r1", None)


def test_replace_states_the_cold_start_of_the_new_weights() -> None:
    plan = _decide(spec(), spec(model="/opt/ml/model/m/r2", location="models/m/r2"), full_pools())
    assert (plan.kind, plan.target, plan.downtime) == ("replace", "e", "one cold start: new")


def test_replace_without_new_weights_states_the_cached_cold_start() -> None:
    plan = _decide(spec(), spec(image="img:2"), full_pools())
    assert (plan.kind, plan.downtime) == ("replace", "one cold start: cached")


def test_recreate_plans_in_place_with_the_cold_start() -> None:
    plan = _decide(spec(), spec(image="img:2"), full_pools(), recreate)
    assert (plan.kind, plan.target, plan.downtime) == ("in-place", "e", "one cold start: cached")


def test_a_replace_that_would_not_fit_even_on_what_the_live_endpoint_releases_is_refused() -> None:
    """Decode 1 -> 2 replicas with one full node per pool: deleting the live endpoint frees one node per pool, the
    second decoder fits nowhere, so a replace would take the endpoint down for good: refused in one line."""
    target = spec(image="img:2")
    target["pdSpec"]["decodingSpec"]["replicas"] = 2
    plan = _decide(spec(), target, full_pools())
    assert plan.kind == "replace" and plan.refusal is not None
    assert "even with e deleted" in plan.refusal
    assert "decode: a pod of 8 GPUs fits no node of hyperpod-dpd/pool=decode (free: decode-0: 0)" in plan.refusal
    assert "\n" not in plan.refusal


def test_a_replace_that_fits_on_what_the_live_endpoint_releases_is_not_refused() -> None:
    plan = _decide(spec(), spec(image="img:2"), full_pools())
    assert (plan.kind, plan.refusal) == ("replace", None)


def test_a_blue_green_name_the_fleet_refuses_falls_back_to_the_next_safe_way() -> None:
    """A second copy fits, but its revision name may not be used: the plan goes on to in place (here: Recreate)
    and says why, instead of refusing the whole rollout."""
    plan = _decide(spec(), spec(image="img:2"), full_pools(2), recreate,
                   blue_green_problem="revision e-r1 would derive the Service 'x', which endpoint 'f' derives too")
    assert plan.kind == "in-place" and plan.refusal is None
    assert any("blue/green: not possible: revision e-r1 would derive" in line for line in plan.reasons)


def test_no_change_when_the_live_spec_holds_the_target() -> None:
    live = {**spec(), "maxDeployTimeInSeconds": 3600, "replicas": 1}  # defaults the API server adds
    live["pdSpec"]["prefillSpec"]["resources"]["requests"]["nvidia.com/gpu"] = "8"  # a quantity as a string
    assert _decide(live, spec(), full_pools()).kind == "none"


def test_nothing_live_is_a_create() -> None:
    assert _decide(None, spec(), full_pools()).kind == "create"


# --- what changes -----------------------------------------------------------------------------------------------

def test_changes_are_grouped_by_category() -> None:
    target = spec(model="/opt/ml/model/m/r2", image="img:2", replicas=2)
    target["pdSpec"]["decodingSpec"]["args"] = ["--max-num-seqs", "64"]
    target["kvCacheSpec"]["enableL2Cache"] = True
    found = {(c.category, c.path) for c in p.changes(spec(), target)}
    assert found == {("image", "worker.image"), ("model", "--model"), ("args", "pdSpec.decodingSpec.args"),
                     ("parallelism", "pdSpec.prefillSpec.replicas"), ("parallelism", "pdSpec.decodingSpec.replicas"),
                     ("caches", "kvCacheSpec.enableL2Cache")}


def test_a_dropped_block_is_a_change() -> None:
    live = spec()
    live["pdSpec"]["autoScalingSpec"] = {"prefillAutoScaling": {"minReplicaCount": 1}}
    assert [(c.category, c.path, c.after) for c in p.changes(live, spec())] == [
        ("roles", "pdSpec.autoScalingSpec", None)]


def test_a_role_that_loses_its_node_selector_is_a_change() -> None:
    """A role moved onto a group it shares: synth writes no nodeSelector; the live object keeps its old one, which has
    no server default (CRD v3.3, pdSpec.prefillSpec.nodeSelector), so this is a change, not 'nothing to do'."""
    target = spec()
    del target["pdSpec"]["prefillSpec"]["nodeSelector"]
    assert [ch.line() for ch in p.changes(spec(), target)] == [
        "roles: pdSpec.prefillSpec.nodeSelector: {'hyperpod-dpd/pool': 'prefill'} -> (none)"]


def test_parallelism_is_read_from_the_flag() -> None:
    target = spec()
    target["worker"]["args"] = ["--model", "/opt/ml/model/m/r1", "--tensor-parallel-size", "4"]
    assert [(c.category, c.path, c.before, c.after) for c in p.changes(spec(), target)] == [
        ("parallelism", "--tensor-parallel-size", "8", "4")]


# --- the revision's manifest --------------------------------------------------------------------------------------

def test_a_revision_reanchors_the_autoscaling_queries_on_its_own_pods() -> None:
    """The KEDA queries select the role pods by name (``prefill-<iec>-<hash>-<suffix>``): a revision under another
    name would scale on nothing."""
    doc = {"apiVersion": "v1", "kind": "InferenceEndpointConfig",
           "metadata": {"name": "e", "namespace": "default", "labels": {"app.kubernetes.io/name": "e"},
                        "resourceVersion": "7", "uid": "u"},
           "spec": {"pdSpec": {"autoScalingSpec": {"prefillAutoScaling": {"prometheusTrigger": {
               "query": 'sum(vllm:num_requests_waiting{namespace="default", '
                        'pod_name=~"prefill-e-[a-z0-9]+-[a-z0-9]+"}) + x{pod_name=~"prefill-ex-[a-z0-9]+-[a-z0-9]+"}'
           }}}}}}
    before = copy.deepcopy(doc)
    out = p.revision_manifest(doc, "e-r3", 3)
    query = out["spec"]["pdSpec"]["autoScalingSpec"]["prefillAutoScaling"]["prometheusTrigger"]["query"]
    assert 'pod_name=~"prefill-e-r3-[a-z0-9]+-[a-z0-9]+"' in query and "prefill-ex-[a-z0-9]" in query
    assert out["metadata"] == {"name": "e-r3", "namespace": "default",
                               "labels": {"app.kubernetes.io/name": "e", "hyperpod-dpd/revision": "3"}}
    assert doc == before


def test_a_revision_name_may_not_derive_another_endpoints_names() -> None:
    others = {"e-r1": EndpointNames(name="e-r1", namespace="default")}
    assert "endpoint 'e-r1' derives too" in (p.revision_name_problem("e-r1", "default", others) or "")
    assert p.revision_name_problem("e-r2", "default", others) is None
    assert "longer than 63" in (p.revision_name_problem("x" * 30 + "-r1", "n" * 20, {}) or "")


# --- KV safety and downtime ---------------------------------------------------------------------------------------

def test_kv_a_model_change_under_the_same_model_path_with_l2_is_refused() -> None:
    refusal, _ = p.kv_safety(spec(l2=True), spec(l2=True, location="models/m/other"))
    assert refusal is not None and "model.revision" in refusal and "--kv-flushed" in refusal
    assert p.kv_safety(spec(l2=True), spec(l2=True, location="models/m/other"), flushed=True)[0] is None


def test_kv_keys_differ_when_the_model_path_changes() -> None:
    refusal, note = p.kv_safety(spec(l2=True), spec(l2=True, model="/opt/ml/model/m/r2", location="models/m/r2"))
    assert refusal is None and "LMCache keys" in note


def test_kv_without_l2_a_same_path_model_change_is_noted() -> None:
    refusal, note = p.kv_safety(spec(), spec(location="models/m/other"))
    assert refusal is None and "no L2 cache" in note


def test_downtime_is_the_planners_s3_cold_start() -> None:
    figures = cold_start(MODELS["meta-llama/Llama-3.3-70B-Instruct"])
    text = p.downtime(figures, source_type="s3", weights_cache=False, model_changes=True)
    # AWS HyperPod inference troubleshooting: a 70B model takes 5-10 min from cold S3 (lifecycle-facts.md)
    assert text.startswith("one cold start: 5.0-10.0 min from S3")
    assert "holds these weights" in p.downtime(figures, source_type="s3", weights_cache=True, model_changes=False)
    assert "size is unknown" in p.downtime(None, source_type="s3", weights_cache=True, model_changes=True)


# --- the store --------------------------------------------------------------------------------------------------

def test_store_round_trip_and_finish(tmp_path: Path) -> None:
    store = RevisionStore.of(tmp_path, "e")
    old, new = (Revision(number=n, name=name, manifest={"spec": {"n": n}}) for n, name in ((0, "e"), (1, "e-r1")))
    from hyperpod_dpd.rollout.executor import start

    record = start(Record(endpoint="e", namespace="default", current=old), kind="blue-green", undo=False,
                   source=old, target=new)
    store.write(record)
    assert store.read() == record and record.last == 1
    done = record.step_done().finished()
    assert (done.current, done.previous, done.operation) == (new, old, None)


def test_undoing_an_unfinished_replace_keeps_the_previous_revision() -> None:
    """r1 serves (r0 before it); a replace to r2 stops after deleting r1. Undo re-applies r1's manifest as r3; once
    it finishes, r3 serves and the previous revision is still r0, never the failed r2."""
    from hyperpod_dpd.rollout.executor import start, undo_operation

    r0, r1, r2 = (Revision(number=n, name="e", manifest={"metadata": {"name": "e"}, "spec": {"n": n}})
                  for n in (0, 1, 2))
    record = start(Record(endpoint="e", namespace="default", current=r1, previous=r0, last=1), kind="replace",
                   undo=False, source=r1, target=r2).step_done()
    undone = undo_operation(record)
    assert undone.operation is not None and undone.operation.target.number == 3
    finished = undone.operation and replace(undone, operation=replace(
        undone.operation, done=len(undone.operation.steps))).finished()
    assert finished.current is not None and finished.current.manifest["spec"] == {"n": 1}
    assert finished.previous == r0


def test_an_interrupted_blue_green_is_not_discarded_once_the_service_moved() -> None:
    """Steps apply, ready, smoke, service are done and the old revision's removal was interrupted: a discard would
    point the Service back at a revision that may be deleting and delete the one that serves; --undo says how to
    go on instead."""
    from hyperpod_dpd.rollout.executor import start, undo_operation

    r0, r1 = (Revision(number=n, name=name, manifest={"spec": {}}) for n, name in ((0, "e"), (1, "e-r1")))
    record = start(Record(endpoint="e", namespace="default", current=r0), kind="blue-green", undo=False,
                   source=r0, target=r1)
    for _ in range(4):
        record = record.step_done()
    with pytest.raises(UsageError, match="e-r1 serves already") as caught:
        undo_operation(record)
    assert "run rollout without --undo to finish" in str(caught.value) and "\n" not in str(caught.value)


def test_an_unfinished_replace_that_left_the_live_endpoint_untouched_is_dropped_not_replaced_back() -> None:
    """The replace's delete failed (no step done) and the cluster still runs the old spec: undo drops the operation;
    it never deletes what serves. Without that knowledge (the delete may have been sent) it replaces back."""
    from hyperpod_dpd.rollout.executor import start, undo_operation

    old, new = (Revision(number=n, name="e", manifest={"spec": spec(image=f"img:{n}")}) for n in (0, 1))
    record = start(Record(endpoint="e", namespace="default", current=old), kind="replace", undo=False, source=old,
                   target=new)
    assert undo_operation(record, source_intact=True) == replace(record, operation=None)
    back = undo_operation(record).operation
    assert back is not None and back.steps[0] == "remove source e"


def test_a_store_that_is_not_one_is_bad_input(tmp_path: Path) -> None:
    store = RevisionStore.of(tmp_path, "e")
    store.path.parent.mkdir()
    store.path.write_text('{"schema_version": 99}')
    with pytest.raises(UsageError, match="is not a revision store"):
        store.read()
