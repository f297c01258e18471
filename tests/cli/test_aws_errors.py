"""botocore failures become one line with the fix their code calls for (hyperpod_dpd.aws.explain).

Each case is a real botocore error: raised by moto, by a client whose responses are stubbed with the real service
model (``Stubber`` checks the operation and its parameters against it), by a client pointed at a port nothing
listens on, or by a local server answering with an HTML page (what a proxy or load balancer sends).
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from lifecycle_fixtures import no_aws_credentials
from moto import mock_aws

from fake_http import QuietHandler, free_port, local_url, serving
from hyperpod_core.errors import CommandFailed
from hyperpod_dpd.aws import AwsFailure, aws_errors, client, explain, one_line

CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-west-2"}


def _raised(call: Any) -> BaseException:
    try:
        call()
    except Exception as exc:  # the botocore error under test
        return exc
    raise AssertionError("no error raised")


def _stubbed(service: str, operation: str, code: str, message: str, status: int, **params: Any) -> BaseException:
    c = boto3.client(service, **CREDS)
    with Stubber(c) as stub:
        stub.add_client_error(operation, service_error_code=code, service_message=message, http_status_code=status,
                              expected_params=params or None)
        return _raised(lambda: getattr(c, operation)(**params))


def test_a_missing_iam_role_is_missing_not_denied() -> None:
    """IAM GetRole of a role that does not exist: ``NoSuchEntity`` (IAM API reference, GetRole errors)."""
    with mock_aws():
        iam = boto3.client("iam", **CREDS)
        exc = _raised(lambda: iam.get_role(RoleName="nobody"))
    e = explain(exc, missing="create it, or fix eks.admin_principal_arn")
    assert (e.code, e.kind, e.fix) == ("NoSuchEntity", "missing", "create it, or fix eks.admin_principal_arn")


def test_access_denied_names_the_action_from_the_message() -> None:
    exc = _stubbed("iam", "get_role", "AccessDenied",
                   "User: arn:aws:iam::123456789012:user/alice is not authorized to perform: iam:GetRole on "
                   "resource: role Admin because no identity-based policy allows the iam:GetRole action", 403,
                   RoleName="Admin")
    e = explain(exc)
    assert (e.code, e.kind) == ("AccessDenied", "denied")
    assert e.fix == "allow iam:GetRole for your IAM principal (or use a role that has it)"


def test_sagemaker_access_denied_without_an_action_names_the_operation() -> None:
    exc = _stubbed("sagemaker", "describe_cluster", "AccessDeniedException", "denied", 400, ClusterName="x")
    e = explain(exc)
    assert e.kind == "denied" and "DescribeCluster" in e.fix


def test_a_hyperpod_cluster_that_does_not_exist_is_missing() -> None:
    """``ResourceNotFound`` is DescribeCluster's error shape in the SageMaker service model."""
    sm = boto3.client("sagemaker", **CREDS)
    shapes = {s.name for s in sm.meta.service_model.operation_model("DescribeCluster").error_shapes}
    assert "ResourceNotFound" in shapes
    exc = _stubbed("sagemaker", "describe_cluster", "ResourceNotFound", "Cluster hyperpod-dpd not found", 400,
                   ClusterName="hyperpod-dpd")
    e = explain(exc, missing="deploy it: hyperpod-dpd deploy --env prod")
    assert (e.kind, e.fix) == ("missing", "deploy it: hyperpod-dpd deploy --env prod")


def test_moto_s_validation_exception_for_a_missing_cluster_is_missing_too() -> None:
    with mock_aws():
        sm = boto3.client("sagemaker", **CREDS)
        exc = _raised(lambda: sm.describe_cluster(ClusterName="nowhere"))
    assert explain(exc).kind == "missing", exc


def test_an_expired_session_says_sso_login() -> None:
    """``ExpiredToken``: the AWS STS / common-errors code of an expired session token."""
    exc = _stubbed("sts", "get_caller_identity", "ExpiredToken", "The security token included in the request is "
                   "expired", 400)
    e = explain(exc)
    assert (e.code, e.kind) == ("ExpiredToken", "expired") and "aws sso login" in e.fix


def test_invalid_credentials_are_not_reported_as_expired() -> None:
    exc = _stubbed("sts", "get_caller_identity", "InvalidClientTokenId", "The security token included in the "
                   "request is invalid.", 403)
    e = explain(exc)
    assert e.kind == "invalid-credentials" and "aws sso login" not in e.fix


def test_a_connection_failure_is_about_the_network_not_credentials() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    sm = boto3.client("sagemaker", endpoint_url=url, config=Config(retries={"max_attempts": 1}, connect_timeout=2),
                      **CREDS)
    exc = _raised(lambda: sm.describe_cluster(ClusterName="x"))
    e = explain(exc)
    assert (e.code, e.kind) == ("EndpointConnectionError", "unreachable")
    assert url in e.fix and "sso" not in e.fix and "IAM" not in e.fix


def test_throttling_says_retry() -> None:
    e = explain(_stubbed("service-quotas", "get_service_quota", "TooManyRequestsException", "Rate exceeded", 400,
                         ServiceCode="sagemaker", QuotaCode="L-1"))
    assert e.kind == "throttled" and "again" in e.fix


@pytest.fixture
def html_server() -> Iterator[str]:
    """Answers every request with a 403 and nginx's HTML error page, as a proxy in front of AWS would."""
    page = ("<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n<center><h1>403 Forbidden</h1>"
            "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n" + "<!-- padding -->\r\n" * 6)

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_body(403, page, "text/html")

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        yield local_url(server)


def test_an_html_error_page_becomes_its_title(html_server: str) -> None:
    sq = boto3.client("service-quotas", endpoint_url=html_server, config=Config(retries={"max_attempts": 1}),
                      **CREDS)
    exc = _raised(lambda: sq.list_aws_default_service_quotas(ServiceCode="sagemaker"))
    assert "<html>" in str(exc)  # botocore hands the raw page on (JSON protocol)
    e = explain(exc)
    assert e.html and e.message == "an HTML page answered: 403 Forbidden"
    assert e.kind == "unreachable" and "proxy" in e.fix
    with pytest.raises(AwsFailure) as failure, aws_errors("listing the SageMaker quotas"):
        sq.list_aws_default_service_quotas(ServiceCode="sagemaker")
    assert "\n" not in str(failure.value) and "<" not in str(failure.value)


def test_one_line_cuts_long_text() -> None:
    line, was_html = one_line("word " * 100)
    assert not was_html and len(line) == 200 and line.endswith("...")


def test_client_error_keeps_code_and_message() -> None:
    with mock_aws():
        s3 = client("s3", "us-west-2", boto3.Session(aws_access_key_id="a", aws_secret_access_key="b"))
        with pytest.raises(CommandFailed) as exc, aws_errors("reading the model bucket"):
            s3.head_bucket(Bucket="does-not-exist-bucket")
    assert str(exc.value).startswith("reading the model bucket: 404")
    assert exc.value.kind == "missing"  # type: ignore[attr-defined]


def test_missing_credentials_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    no_aws_credentials(monkeypatch, tmp_path)
    sts = client("sts", "us-west-2", boto3.Session())
    with pytest.raises(CommandFailed, match="NoCredentialsError: Unable to locate credentials; fix: set AWS_PROFILE"), \
            aws_errors("checking the account"):
        sts.get_caller_identity()


def test_a_profile_that_does_not_exist_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_PROFILE", "nope")
    with pytest.raises(AwsFailure, match="ProfileNotFound: The config profile \\(nope\\) could not be found"):
        client("sts", "us-west-2")

