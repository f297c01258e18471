"""Several endpoints on one cluster (issue 34): where each role may land, whether the fleet fits its instance groups,
and the one-endpoint shape's messages. The cases of the review of issue 34 (defects 1, 2, 6, 7, 9), as small dicts.

Every node is an ml.p5.48xlarge: 8 GPUs (AWS's P5 instance type page; ``hyperpod_core.instances``). A role's pods
take ``tensor_parallel_size`` GPUs of one node each (the CRD's per-role ``resources``; one vLLM engine per pod).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hyperpod_core import fit
from hyperpod_core.config import Config, ConfigError, parse_config
from hyperpod_core.config import placement as pl
from hyperpod_core.config.placement import RolePlacement

P5 = "ml.p5.48xlarge"


def _group(name: str, pool: str, count: int = 1, instance_type: str = P5) -> dict[str, Any]:
    return {"name": name, "instance_type": instance_type, "instance_count": count, "pool": pool}


def _endpoint(name: str, **keys: Any) -> dict[str, Any]:
    return {"name": name, "model": {"name": name, "s3_prefix": f"models/{name}/"}, **keys}


def _small(name: str, group: str) -> dict[str, Any]:
    """A tensor-parallel-1 endpoint with both roles (one GPU each) on ``group``."""
    return _endpoint(name, tensor_parallel_size=1, prefill={"gpus": 1, "instance_group": group},
                     decode={"gpus": 1, "instance_group": group})


def _fleet(groups: list[dict[str, Any]], endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "fleet", "region": "us-west-2", "network": {"gpu_availability_zone_id": "usw2-az2"},
            "hyperpod": {"instance_groups": groups}, "endpoints": endpoints}


#: config/examples/two-models.yaml: the 70B's roles on groups prefill and decode, the 8B's both on small.
TWO_MODELS = _fleet([_group("prefill", "prefill"), _group("decode", "decode"), _group("small", "shared")],
                    [_endpoint("big", prefill={"instance_group": "prefill"}, decode={"instance_group": "decode"}),
                     _small("small", "small")])


def _without_pins(data: dict[str, Any], index: int) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for role in ("prefill", "decode"):
        out["endpoints"][index].pop(role)
    return out


#: The review's mixed.yaml: two-models with the 70B's role blocks removed.
MIXED = _without_pins(TWO_MODELS, 0)


def _tuples(value: Any) -> Any:
    """Lists as tuples, as the loader hands them to the strict model."""
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return tuple(map(_tuples, value)) if isinstance(value, list) else value


def _refused(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- defect 1: where a role without a selector may land ----------------------------------------------------------

def test_a_role_without_a_node_selector_may_land_on_every_group_of_its_instance_type() -> None:
    """The 70B's prefill has no nodeSelector (its pool's groups include the shared 'small'): Kubernetes may put it
    on any p5 node, 'decode' included, so that is where it may land. Fails before: ('prefill', 'small')."""
    big = Config.model_validate(_tuples(MIXED)).specs()[0]  # the model alone: the rules refuse the file
    assert big.node_selector("prefill") == {}
    assert [g.name for g in big.role_groups("prefill")] == ["prefill", "decode", "small"]


def test_fails_when_a_role_without_a_group_may_take_the_group_another_role_names() -> None:
    """Fails before: mixed.yaml validated, and the 70B's 8-GPU prefill could take the 8B's node (8B Pending)."""
    assert _refused(MIXED) == (
        "endpoints[0].prefill.instance_group must be set: without it the role may take group 'small', which "
        "endpoints[1].prefill names (the scheduler may give that group's nodes to this role first); it may land on "
        "prefill, decode, small, got None")


def test_fails_when_a_role_may_take_the_group_its_own_endpoints_other_role_names() -> None:
    data = _fleet([_group("decode", "decode"), _group("small", "shared", count=2)],
                  [_endpoint("one", prefill={"instance_group": "small"})])
    assert _refused(data).startswith("endpoints[0].decode.instance_group must be set: without it the role may take "
                                     "group 'small', which endpoints[0].prefill names")


def test_a_role_whose_only_group_another_role_names_is_accepted() -> None:
    """Pool-selected onto 'prefill' alone, as the other endpoint's pinned prefill: both confined to it, counted
    together by the capacity rule (2 nodes: 8 + 8 GPUs)."""
    data = _fleet([_group("prefill", "prefill", count=2), _group("decode", "decode", count=2)],
                  [_endpoint("one"),
                   _endpoint("two", prefill={"instance_group": "prefill"}, decode={"instance_group": "decode"})])
    assert [g.name for g in parse_config(data).specs()[0].role_groups("prefill")] == ["prefill"]


# --- defect 2: the fleet's capacity, every union of groups, pod by pod --------------------------------------------

#: The review's hall.yaml: a and c unpinned on p/d/s (the shared s: no selector), b on its own p5en group x.
HALL = _fleet([_group("p", "prefill"), _group("d", "decode"), _group("s", "shared"),
               _group("x", "shared", count=2, instance_type="ml.p5en.48xlarge")],
              [_endpoint("a"), _endpoint("c"),
               _endpoint("b", instance_type="ml.p5en.48xlarge", tensor_parallel_size=4, prefill={"gpus": 4},
                         decode={"gpus": 4})])


def test_fails_when_the_unpinned_roles_of_two_endpoints_overflow_their_groups() -> None:
    """a and c need 4 x 8 = 32 GPUs on the three p5 nodes (24). Fails before: validate exited 0 (each role's own
    groups and all groups together were checked, never p+d+s)."""
    assert _refused(HALL) == (
        "instance groups p, d, s must hold every endpoint's roles that run only there (a prefill 8, a decode 8, "
        "c prefill 8, c decode 8) in 24 GPUs: add nodes, lower replicas or autoscaling maxima, or pin a role to "
        "another group (endpoints[0].prefill.instance_group), got '32 GPUs at peak'")


def test_plans_fleet_table_shows_the_groups_the_rule_finds_short() -> None:
    """``hyperpod-dpd plan``'s fleet table reads the rule's placement code: for hall.yaml's roles (the model alone:
    the rules refuse the file) its row for p, d and s is 8 GPUs short."""
    from hyperpod_analysis.plan.fleet import fleet_peaks

    rows = {row.groups: row for row in fleet_peaks(Config.model_validate(_tuples(HALL)).specs())}
    assert (rows[("p", "d", "s")].gpus, rows[("p", "d", "s")].free_gpus) == (24, -8)
    assert list(rows) == [("x",), ("p", "d", "s"), ("p", "d", "s", "x")]


def _role(name: str, groups: str, pods: int, gpus: int) -> RolePlacement:
    endpoint, role = name.split()
    return RolePlacement(endpoint=endpoint, role=role, field=f"{endpoint}.{role}",  # type: ignore[arg-type]
                         groups=tuple(groups), pods=pods, gpus_per_pod=gpus)


def test_the_total_check_covers_a_union_of_some_role_groups() -> None:
    """Hall's condition over the union p+d+s of {p, s} and {d, s}, neither of which overflows alone (16 GPUs of 16),
    beside a group x that makes all groups together fit (48 of 40 would not, 32 + 8 of 40 does): the maximum flow
    leaves p, d and s short. The check before compared only each role's groups and all groups."""
    gpus = {"p": 8, "d": 8, "s": 8, "x": 16}
    roles = [_role("a prefill", "ps", 1, 8), _role("a decode", "ds", 1, 8), _role("c prefill", "ps", 1, 8),
             _role("c decode", "ds", 1, 8), _role("b prefill", "x", 1, 4), _role("b decode", "x", 1, 4)]
    assert pl.short_groups(roles, gpus) == ("p", "d", "s")
    assert pl.short_groups([*roles[:3], *roles[4:]], gpus) == ()  # 24 of 24: fits once c's decode goes


def test_pods_that_fit_in_total_may_still_find_no_node() -> None:
    """The review's frag.yaml: totals fit (24 GPUs of 24) but a's 8-GPU pods need two empty nodes, and b's 4-GPU
    pods pinned to p and s leave only d empty (the config rule refuses the file earlier: a's roles may take the
    groups b's name)."""
    groups = parse_config(TWO_MODELS).hyperpod.instance_groups  # three p5 nodes: prefill, decode, small
    roles = [_role("a prefill", ["prefill", "small"], 1, 8), _role("a decode", ["decode", "small"], 1, 8),
             _role("b prefill", ["prefill"], 1, 4), _role("b decode", ["small"], 1, 4)]
    assert pl.short_groups(roles, {g.name: 8 for g in groups}) == ()
    assert pl.unplaced(roles, groups) == roles[2]
    assert pl.unplaced([*roles[:2], _role("b both", ["small"], 2, 4)], groups) is None  # b's two pods on small


# --- defect 9: messages name the keys as the file writes them ------------------------------------------------------

def test_the_capacity_message_names_a_roles_key_as_a_one_endpoint_file_writes_it(default_config_dict: dict) -> None:
    """The review's legacy-fleetrule.yaml: one endpoint, the decode group shared, two prefill replicas: 24 GPUs on
    the two p5 nodes. Fails before: the message suggested endpoints[].<role>.instance_group in a file without
    endpoints."""
    data = copy.deepcopy(default_config_dict)
    data["hyperpod"]["instance_groups"][1]["pool"] = "shared"
    data["hyperpod"]["instance_groups"].append(_group("x", "shared", count=2, instance_type="ml.p5en.48xlarge"))
    data["endpoint"]["prefill"]["replicas"] = 2
    data["endpoint"]["routing_strategy"] = "roundrobin"
    assert _refused(data).endswith("or pin a role to another group (endpoint.prefill.instance_group), got "
                                   "'24 GPUs at peak'")


@pytest.mark.parametrize("value", [[1], "x"], ids=["list", "string"])
def test_fails_when_the_one_endpoint_shapes_endpoint_is_not_a_mapping(default_config_dict: dict, value: Any) -> None:
    """Fails before: 'model is not a known setting' (the top-level model stayed unfolded)."""
    data = {**default_config_dict, "endpoint": value}
    assert _refused(data).startswith("endpoint: Input should be a valid dictionary or instance of EndpointConfig")


# --- defect 6: endpoint.model in the one-endpoint shape ------------------------------------------------------------

@pytest.mark.parametrize("model", [
    {"name": "llama-3-3-70b-instruct", "s3_prefix": "models/Llama-3.3-70B-Instruct/",
     "existing_bucket_name": "my-existing-weights"},
    {"name": "llama-3-3-70b-instruct", "s3_prefix": "/bad"},
], ids=["drops_the_bucket", "names_model_s3_prefix"])
def test_fails_when_the_one_endpoint_shape_nests_the_model_in_endpoint(default_config_dict: dict,
                                                                      model: dict) -> None:
    """The review's legacy-nested-bucket.yaml (loaded with the bucket silently dropped) and legacy-nested-prefix.yaml
    (the message named model.s3_prefix). Fails before on both."""
    data = copy.deepcopy(default_config_dict)
    del data["model"]
    data["endpoint"]["model"] = model
    assert _refused(data).startswith(
        "endpoint.model must be the top-level model: in the one-endpoint shape (model: and endpoint:) write the "
        "model's keys under model:, or write endpoints: (each entry with its own model), got {'name': ")


def test_a_null_endpoint_model_counts_as_not_set(default_config_dict: dict) -> None:
    data = copy.deepcopy(default_config_dict)
    data["endpoint"]["model"] = None
    assert parse_config(data).spec().model.s3_prefix == default_config_dict["model"]["s3_prefix"]


# --- defect 7: the router and image-cache pods of every endpoint that may run on a node ----------------------------

def test_endpoints_that_share_groups_each_reserve_their_router_and_image_cache() -> None:
    """Two endpoints on the same pool groups: each brings its router pod and its image cache's DaemonSet pod onto
    those nodes (one per endpoint: the operator creates both per InferenceEndpointConfig), so each worker's budget
    loses the second endpoint's share of them. With tiered storage at 20 % memory is what binds (1573 GiB alone:
    tests/infra/test_config.py), so the worker loses their 2 + 1 GiB. Fails before: the same 1573 GiB for both."""
    groups = [_group("prefill", "prefill", count=2), _group("decode", "decode", count=2)]
    alone = _fleet(groups, [_endpoint("one")])
    shared = _fleet(groups, [_endpoint("one"), _endpoint("two")])
    for data in (alone, shared):
        data["hyperpod"]["tiered_storage_memory_percent"] = 20
    per_endpoint_mib = sum(r.memory_mib for r in fit.RESERVATIONS if r.name.startswith(("router", "operator v3.3")))
    assert per_endpoint_mib == 3 * 1024
    one = parse_config(alone).specs()[0]
    assert one.worker_requests("prefill") == fit.PodRequests(cpu=86, memory_gib=1573)
    for spec in parse_config(shared).specs():
        for role in ("prefill", "decode", "colocated"):
            assert spec.worker_requests(role) == fit.PodRequests(cpu=86, memory_gib=1573 - 3), (spec.name, role)
        assert spec.endpoints_on("prefill") == spec.endpoints_on("decode") == 2
