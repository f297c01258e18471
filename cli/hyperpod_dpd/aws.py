"""AWS clients for the command line, and the one place botocore errors become one-line failures with a fix.

Only commands import this module; synthesis code never calls AWS.

:func:`explain` reduces any botocore failure to its code, one line of message (an HTML page that a proxy or a
load balancer answered with is cut to its title) and the fix that code calls for, chosen here and nowhere else:

=============================================  ========================================================
code (``Error.Code``, or the botocore class)   fix
=============================================  ========================================================
no credentials, profile not found              set ``AWS_PROFILE`` / ``aws configure`` / ``aws sso login``
``ExpiredToken``, SSO token errors             ``aws sso login`` (or refresh the profile's credentials)
``InvalidClientTokenId``, ``AuthFailure``, ... the credentials are not valid here: ``aws sts get-caller-identity``
``AccessDenied``, ``UnauthorizedOperation``    allow the action the message names for the caller
``NoSuchEntity``, ``ResourceNotFound``, ...    the caller's ``missing`` fix (what creates it), else check name/region
``EndpointConnectionError``, timeouts          network access to the endpoint (proxy, ``AWS_ENDPOINT_URL``)
``Throttling``, ``TooManyRequestsException``   retry later (the client already retried)
5xx, ``InternalError``, ``ServiceUnavailable`` retry; the AWS Health Dashboard of the region
=============================================  ========================================================

Error codes are those of the services' models (botocore ``data/<service>/*/service-2.json`` ``errors`` and the
AWS API references' "Common Errors").
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hyperpod_core.errors import CommandFailed

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config as BotoConfig
    from botocore.exceptions import ClientError


def _retries() -> BotoConfig:
    from botocore.config import Config as BotoConfig

    return BotoConfig(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10, read_timeout=60)


#: Standard retry mode with a bounded number of attempts: throttling is retried, a dead endpoint is not
#: waited on for minutes. ``None``: built on first use (botocore loads when a command calls AWS).
RETRIES: BotoConfig | None = None

Kind = Literal["credentials", "expired", "invalid-credentials", "denied", "missing", "unreachable", "throttled",
               "service", "other"]

EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"})
INVALID_CREDENTIAL_CODES = frozenset({"InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch",
                                      "AuthFailure", "InvalidAccessKeyId", "IncompleteSignature",
                                      "InvalidSignatureException", "MissingAuthenticationToken"})
DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "Forbidden", "403",
                          "AuthorizationError", "UnauthorizedException", "AllAccessDisabled"})
MISSING_CODES = frozenset({"NoSuchEntity", "NoSuchBucket", "NoSuchKey", "NotFound", "404", "ResourceNotFound",
                           "ResourceNotFoundException", "ParameterNotFound", "NoSuchResourceException",
                           "NoSuchUpload"})
THROTTLED_CODES = frozenset({"Throttling", "ThrottlingException", "ThrottledException", "TooManyRequestsException",
                             "RequestLimitExceeded", "SlowDown", "RequestThrottled", "RequestThrottledException"})
SERVICE_CODES = frozenset({"InternalFailure", "InternalError", "InternalServerError", "InternalServerException",
                           "ServiceUnavailable", "ServiceUnavailableException", "InternalServiceError"})
#: ``ValidationException`` messages that mean "no such resource" (SageMaker's DescribeCluster answers so in some
#: regions and in moto; EKS says "No cluster found").
_MISSING_MESSAGE = re.compile(r"not found|could not find|does not exist|no [a-z ]+ found", re.IGNORECASE)
_HTML = re.compile(r"<\s*(!doctype|html|head|body|title|h1|center)\b", re.IGNORECASE)
MAX_MESSAGE = 200


@dataclass(frozen=True, kw_only=True)
class Explained:
    """One botocore failure, reduced: what a person needs to act on it."""

    code: str
    message: str
    """One line; an HTML body is reduced to its title."""
    fix: str
    kind: Kind
    html: bool = False
    """The message was an HTML page: a proxy or a load balancer answered, not AWS."""


class AwsFailure(CommandFailed):
    """A failed AWS call as one line: ``<action>: <code>: <message>; fix: <fix>`` (exit 1)."""

    def __init__(self, action: str, explained: Explained) -> None:
        self.action, self.explained = action, explained
        text = f"{action}: {explained.code}: {explained.message}".rstrip(": ")
        self.summary = text
        """The failure without its fix (a status row shows the fix in its own column)."""
        super().__init__(text + (f"; fix: {explained.fix}" if explained.fix else ""))

    @property
    def code(self) -> str:
        return self.explained.code

    @property
    def fix(self) -> str:
        return self.explained.fix

    @property
    def kind(self) -> Kind:
        return self.explained.kind


def one_line(text: str, limit: int = MAX_MESSAGE) -> tuple[str, bool]:
    """``text`` as one line of at most ``limit`` characters, and whether it was an HTML page (reduced to its
    ``<title>`` or first heading, else its text without tags)."""
    raw = str(text or "")
    is_html = bool(_HTML.search(raw))
    if is_html:
        found = re.search(r"<title[^>]*>(.*?)</title>", raw, re.IGNORECASE | re.DOTALL) or re.search(
            r"<h1[^>]*>(.*?)</h1>", raw, re.IGNORECASE | re.DOTALL)
        raw = found[1] if found else re.sub(r"<[^>]+>", " ", raw)
        raw = html.unescape(re.sub(r"<[^>]+>", " ", raw))
    line = " ".join(raw.split())
    return (line if len(line) <= limit else line[: limit - 3] + "..."), is_html


def _credential_fix() -> str:
    return "set AWS_PROFILE (aws configure, or aws sso login for an SSO profile) or AWS_ACCESS_KEY_ID/" \
           "AWS_SECRET_ACCESS_KEY"


def explain(exc: BaseException, *, missing: str = "") -> Explained:
    """The code, one line of message and the fix of a botocore failure. ``missing``: the fix when the resource does
    not exist (what creates it); default: check its name and region."""
    from botocore import exceptions as bx

    not_found_fix = missing or "check the name and the region (the config's region)"
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.ProfileNotFound)):
        return Explained(code=type(exc).__name__, message=one_line(str(exc))[0], fix=_credential_fix(),
                         kind="credentials")
    if isinstance(exc, (bx.TokenRetrievalError, bx.SSOError, bx.CredentialRetrievalError)):
        return Explained(code=type(exc).__name__, message=one_line(str(exc))[0], kind="expired",
                         fix="aws sso login (or refresh the credentials of AWS_PROFILE), then run it again")
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError,
                        bx.ConnectionClosedError, bx.ProxyConnectionError, bx.SSLError)):
        url = getattr(exc, "kwargs", {}).get("endpoint_url", "")
        return Explained(code=type(exc).__name__, message=one_line(str(exc))[0], kind="unreachable",
                         fix=f"check network access to {url or 'the AWS endpoint'} (HTTPS_PROXY, firewall, "
                             "AWS_ENDPOINT_URL if set) and the region, then run it again")
    if isinstance(exc, bx.NoRegionError):
        return Explained(code="NoRegionError", message="no AWS region", kind="other",
                         fix="set the config's region (or AWS_DEFAULT_REGION)")
    if isinstance(exc, bx.ClientError):
        return _client_error(exc, not_found_fix)
    if isinstance(exc, bx.BotoCoreError):
        return Explained(code=type(exc).__name__, message=one_line(str(exc))[0], kind="other", fix="")
    return Explained(code=type(exc).__name__, message=one_line(str(exc) or type(exc).__name__)[0], kind="other",
                     fix="")


def _client_error(exc: ClientError, not_found_fix: str) -> Explained:
    """:func:`explain` of an error the service answered: by its code, else its HTTP status."""
    err = exc.response.get("Error") or {}
    status = int((exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
    code = str(err.get("Code") or "") or (str(status) if status else "Unknown")
    if code == "Unknown" and status:
        code = str(status)
    message, is_html = one_line(str(err.get("Message") or ""))
    if is_html:
        return Explained(code=code, message=f"an HTML page answered: {message}", html=True, kind="unreachable",
                         fix="a proxy or load balancer answered instead of AWS: check HTTPS_PROXY, "
                             "AWS_ENDPOINT_URL and the network path to AWS")
    if code in EXPIRED_CODES:
        return Explained(code=code, message=message, kind="expired",
                         fix="the session expired: aws sso login (or refresh the credentials of AWS_PROFILE)")
    if code in INVALID_CREDENTIAL_CODES:
        return Explained(code=code, message=message, kind="invalid-credentials",
                         fix="these credentials are not valid here: check AWS_PROFILE/AWS_ACCESS_KEY_ID and "
                             "the region's partition (aws sts get-caller-identity)")
    if code in DENIED_CODES or status == 403:
        action = re.search(r"perform:? ([a-z0-9-]+:[A-Za-z0-9*]+)", message)
        what = action[1] if action else f"the IAM action of {exc.operation_name}"
        return Explained(code=code, message=message, kind="denied",
                         fix=f"allow {what} for your IAM principal (or use a role that has it)")
    if code in MISSING_CODES or status == 404 or (
            code == "ValidationException" and _MISSING_MESSAGE.search(message)):
        return Explained(code=code, message=message, kind="missing", fix=not_found_fix)
    if code in THROTTLED_CODES or status == 429:
        return Explained(code=code, message=message, kind="throttled",
                         fix="AWS throttled the calls after 5 attempts: run it again in a minute")
    if code in SERVICE_CODES or status >= 500:
        return Explained(code=code, message=message or f"HTTP {status}", kind="service",
                         fix="an AWS-side error: run it again; if it persists, check the AWS Health Dashboard")
    if code == "OptInRequired":
        return Explained(code=code, message=message, kind="denied",
                         fix="enable the region (or subscribe to the service) for the account first")
    return Explained(code=code, message=message, kind="other", fix="")


def client(service: str, region: str, session: boto3.Session | None = None) -> Any:
    """A boto3 client for ``service`` in ``region`` with bounded retries (a missing profile: one line)."""
    import boto3
    from botocore.exceptions import BotoCoreError

    global RETRIES
    if RETRIES is None:
        RETRIES = _retries()
    try:
        return (session or boto3.Session()).client(service, region_name=region, config=RETRIES)
    except BotoCoreError as exc:
        raise AwsFailure(f"creating the {service} client", explain(exc)) from None


def is_aws_error(exc: BaseException) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    return isinstance(exc, (BotoCoreError, ClientError))


@contextmanager
def aws_errors(action: str, *, missing: str = "") -> Iterator[None]:
    """Turn botocore errors raised while doing ``action`` into :class:`AwsFailure` (code, one line, fix).
    ``missing``: the fix when the resource does not exist."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (BotoCoreError, ClientError) as exc:
        raise AwsFailure(action, explain(exc, missing=missing)) from None
