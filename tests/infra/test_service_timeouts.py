"""Every custom resource in every stack carries a ServiceTimeout below CloudFormation's hour.

Source: a custom resource without ``ServiceTimeout`` waits 3600 s for a response that never comes when its
handler dies (aws/aws-cdk#33837; CloudFormation user guide, ``AWS::CloudFormation::CustomResource``:
``ServiceTimeout`` 1-3600 seconds, default 3600). Fails on main: no custom resource had one.
"""

from __future__ import annotations

import pytest

from hyperpod_constructs.service_timeouts import set_service_timeout

CLOUDFORMATION_DEFAULT_SECONDS = 3600


def _custom_resources(template) -> dict[str, dict]:
    return {k: v for k, v in template.to_json()["Resources"].items()
            if v["Type"].startswith("Custom::") or v["Type"] == "AWS::CloudFormation::CustomResource"}


def test_every_custom_resource_in_every_stack_has_a_service_timeout_below_an_hour(templates) -> None:
    """The default app (the aspect is the app's). A waiter keeps its own wait plus margin, not the aspect's default:
    the janitor's 30 minutes + 5 (its construct sets it: tests/cleanup/test_endpoint_janitor_construct.py)."""
    found = {f"{stack}/{k}": v for stack, t in templates.items() for k, v in _custom_resources(t).items()}
    assert len(found) >= 10  # kubectl manifests and charts, bucket deployment, auto-delete, janitor, ...
    missing = sorted(k for k, v in found.items() if "ServiceTimeout" not in v["Properties"])
    assert missing == []
    too_long = {k: v["Properties"]["ServiceTimeout"] for k, v in found.items()
                if not 60 <= int(v["Properties"]["ServiceTimeout"]) < CLOUDFORMATION_DEFAULT_SECONDS}
    assert too_long == {}
    (janitor,) = [v for v in found.values() if v["Type"] == "Custom::HyperPodEndpointJanitor"]
    assert janitor["Properties"]["ServiceTimeout"] == str((30 + 5) * 60)


def test_fails_when_a_service_timeout_reaches_the_hour() -> None:
    import aws_cdk as cdk

    resource = cdk.CfnResource(cdk.Stack(cdk.App(), "Probe"), "Probe", type="Custom::Probe")
    with pytest.raises(ValueError, match="ServiceTimeout must be between 60 s and below 3600 s, got 3600 s"):
        set_service_timeout(resource, cdk.Duration.hours(1))


def test_the_aspect_keeps_an_explicit_value_and_fills_the_others() -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from hyperpod_constructs.service_timeouts import ServiceTimeouts

    stack = cdk.Stack(cdk.App(), "Probe")
    set_service_timeout(cdk.CfnResource(stack, "Waiter", type="Custom::Waiter"), cdk.Duration.minutes(35))
    cdk.CfnResource(stack, "Plain", type="AWS::CloudFormation::CustomResource", properties={"ServiceToken": "x"})
    cdk.Aspects.of(stack).add(ServiceTimeouts())
    resources = Template.from_stack(stack).to_json()["Resources"]
    assert resources["Waiter"]["Properties"]["ServiceTimeout"] == "2100"
    assert resources["Plain"]["Properties"]["ServiceTimeout"] == "1200"
