"""The config's field types say each single-field rule twice: as the model's check (our one-line wording) and as
JSON Schema keywords for editors (config/schema.json). These tests hold the two together on values near the
edge of each rule: whatever the model accepts passes the schema, and where the schema says the whole rule, whatever
the schema accepts passes the model. The wording of the model's messages is in tests/infra/test_config.py."""

from __future__ import annotations

import string

import jsonschema
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ConfigDict, TypeAdapter, ValidationError

from hyperpod_core import pins
from hyperpod_core.config import types

_PLAN = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/"
_DIGEST = "@sha256:" + "0123456789abcdef" * 4
_KEY = "arn:aws:kms:us-west-2:111122223333:key/"
# (type name, whether the schema says the whole rule, values at or near its edges to start from)
CASES = [
    ("DeploymentName", True, ["hyperpod-dpd", "a", "a" * 40, "a" * 41, "a-1"]),
    ("EksClusterName", True, ["hyperpod-dpd-eks", "0_a-b", "e" * 100, "e" * 101]),
    ("SageMakerName", True, ["llama-3-3-70b-instruct", "a--b", "h" * 63, "h" * 64]),
    ("ModelRevision", True, ["r1", "sha256-1f6441a8da688874", "v1.2_rc-3", "m" * 64, "m" * 65]),
    ("DnsLabel", True, ["default", "llama-3-3-70b", "n" * 63, "n" * 64]),
    ("ScenarioName", True, ["aws-reference", "x", "s" * 24, "s" * 25]),
    ("LabelKey", True, ["grafana_dashboard", "example.com/name", "a.b-c/x_y", "p" * 253 + "/n", "p" * 254 + "/n"]),
    ("AzId", True, ["usw2-az1", "apne1-az4", "usgw1-az12"]),
    ("AzIdOrEmpty", True, ["", "usw2-az1"]),
    ("ControlPlaneAzId", True, ["usw2-az1", "use1-az3", "usw1-az2"]),
    ("Region", True, ["us-west-2", "us-gov-west-1", "cn-north-1"]),
    ("DpdInstanceType", True, ["ml.p5.48xlarge", "ml.p6-b300.48xlarge"]),
    ("Ec2InstanceType", True, ["m7i.xlarge", "c6gn.16xlarge"]),
    ("BucketName", True, ["my-models", "a.b.c", "1.2.3.4", "xn--ab", "ab-s3alias", "b" * 63, "b" * 64]),
    ("S3Prefix", True, ["models/Llama-3.3-70B-Instruct/", "a/./b/", "p/" * 256, "p/" * 255 + "pp/"]),
    ("S3Uri", True, ["s3://bucket/prefix/", "s3://b.c", "s3://bkt/a b"]),
    ("PinnedImage", True, ["lmcache/vllm-openai:v0.4.3", "a" + _DIGEST, "a/b:t" + _DIGEST]),
    ("DigestPinnedImage", True, [pins.BENCHMARK_CLIENT_IMAGE, "a" + _DIGEST]),
    ("InvocationPath", True, ["v1/chat/completions", "/v1", "p" * 200, "p" * 201]),
    ("NvmeHostPath", True, ["/opt/dlami/nvme", "/opt/dlami/nvme/llama", "/opt/dlami/nvme/..", "/opt/dlami/nvme/.a",
                            "/opt/dlami/nvme/" + "a" * 239, "/opt/dlami/nvme/" + "a" * 240]),
    ("EmailAddress", True, ["oncall@example.com", "a.b+c@sub.example.org", "no-at.example.com", "a@b", "a@b.c."]),
    ("SnsTopicArn", True, ["arn:aws:sns:us-west-2:123456789012:dpd-alerts", "arn:aws-cn:sns:cn-north-1:123456789012:a",
                           "arn:aws:sns:us-west-2:123456789012:alerts.fifo", "arn:aws:sns:us-west-2:123456789012:"
                           + "t" * 256, "arn:aws:sns:us-west-2:12345678901:t"]),
    ("TrainingPlanArn", True, [_PLAN + "p5", _PLAN + "p" * 64, _PLAN + "p" * 65]),
    ("KmsKeyArn", True, [_KEY + "1234abcd-12ab-34cd-56ef-1234567890ab", _KEY + "mrk-1234abcd12ab34cd56ef1234567890ab",
                         _KEY.replace(":aws:", ":aws-cn:") + "1234abcd-12ab-34cd-56ef-1234567890ab",
                         _KEY + "1234ABCD-12ab-34cd-56ef-1234567890ab", _KEY + "mrk-1234abcd12ab34cd56ef1234567890a",
                         _KEY.replace("key/", "alias/") + "models"]),
    ("IamPrincipalArn", True, ["arn:aws:iam::123456789012:role/Admin", "arn:aws:iam::123456789012:user/p/" + "u" * 64,
                               "arn:aws:iam::123456789012:user/p/" + "u" * 65,
                               "arn:aws-cn:iam::123456789012:role/"]),
    # the schema cannot say host bits, private ranges, U's min <= max or the add-on table: it says less
    ("Cidr", False, ["10.0.0.0/16", "1.2.3.4", "10.0.0.0/255.255.0.0", "0.0.0.0/0"]),
    ("PrimaryVpcCidr", False, ["10.0.0.0/16", "100.64.0.0/20", "10.0.0.0/016"]),
    ("VpcCidrBlock", False, ["10.1.0.0/16", "192.168.0.0/28"]),
    ("TrafficScenario", False, ["D(4096,256)", "N(6000, 100)/(256,10)", "U(100,900)/(10,50)"]),
    ("KubernetesVersion", False, ["1.33"]),
]
_ALPHABET = string.ascii_letters + string.digits + "-._/:@*?()!'=+, " + "\u0662\u00e9"


@st.composite
def _near(draw: st.DrawFn, examples: list[str]) -> str:
    """An example with up to three characters inserted, deleted or replaced: half of them one of its own."""
    value = draw(st.sampled_from(examples))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(value)))
        op = draw(st.sampled_from(("insert", "delete", "replace")))
        char = draw(st.sampled_from(value or _ALPHABET) if draw(st.booleans()) else st.sampled_from(_ALPHABET))
        value = (value[:at] + char + value[at:] if op == "insert"
                 else value[:at] + value[at + 1:] if op == "delete" else value[:at] + char + value[at + 1:])
    return value


def _model_accepts(adapter: TypeAdapter, value: str) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(("name", "exact", "examples"), CASES, ids=[c[0] for c in CASES])
def test_the_schema_says_what_the_model_checks(name: str, exact: bool, examples: list[str]) -> None:
    adapter = TypeAdapter(getattr(types, name), config=ConfigDict(strict=True, str_strip_whitespace=True))
    schema = jsonschema.Draft202012Validator(adapter.json_schema())
    assert all(_model_accepts(adapter, e) == schema.is_valid(e) for e in examples if exact)

    @settings(max_examples=100, deadline=None, database=None)
    @given(st.one_of(_near(examples), _near(examples), _near(examples), st.text(_ALPHABET, max_size=20)))
    def check(value: str) -> None:
        assume(value == value.strip())  # the model strips white space before any rule; the schema cannot
        model, editor = _model_accepts(adapter, value), schema.is_valid(value)
        assert editor or not model, f"the schema refuses {value!r}, which the model accepts"
        assert model or not editor or not exact, f"the schema accepts {value!r}, which the model refuses"

    check()


def test_every_single_field_rule_has_a_case() -> None:
    """A new field type gets its row above."""
    ruled = {name for name, value in vars(types).items()
             if any(isinstance(m, types.FieldRule) for m in getattr(value, "__metadata__", ()))}
    assert ruled == {c[0] for c in CASES}


def test_a_broken_field_rule_is_one_line_with_the_field_value_and_what_is_allowed(default_config_dict: dict) -> None:
    """The loader turns a field type's error into the cross-field rules' shape: dotted path with indices."""
    import copy

    from hyperpod_core.config import ConfigError, parse_config

    data = copy.deepcopy(default_config_dict)
    data["hyperpod"]["instance_groups"][1]["availability_zone_id"] = "us-west-2a"
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert str(info.value) == ("hyperpod.instance_groups[1].availability_zone_id must be an AZ ID such as usw2-az1 "
                               "(<region prefix>-az<n>; not an AZ name such as us-west-2a), got 'us-west-2a'")
