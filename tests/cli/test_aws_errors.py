"""botocore failures become one-line :class:`CommandFailed` messages (moto for the real service calls)."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from hyperpod_core.errors import CommandFailed
from hyperpod_dpd.aws import aws_errors, client


@mock_aws
def test_client_error_keeps_code_and_message() -> None:
    s3 = client("s3", "us-west-2", boto3.Session(aws_access_key_id="a", aws_secret_access_key="b"))
    with pytest.raises(CommandFailed) as exc, aws_errors("reading the model bucket"):
        s3.head_bucket(Bucket="does-not-exist-bucket")
    assert str(exc.value).startswith("reading the model bucket: 404")


def test_missing_credentials_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    sts = client("sts", "us-west-2", boto3.Session())
    with pytest.raises(CommandFailed, match="no AWS credentials"), aws_errors("checking the account"):
        sts.get_caller_identity()
