"""EKS bearer tokens: a presigned STS GetCallerIdentity URL bound to one cluster name.

This is the scheme ``aws eks get-token`` and aws-iam-authenticator use: the API server's authenticator
replays the presigned request against STS and maps the caller to an access entry. The signed
``x-k8s-aws-id`` header stops a token for one cluster from being replayed against another.
"""

from __future__ import annotations

import base64
from typing import Any

import boto3

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
#: Lifetime of the presigned URL. EKS accepts the token for 15 minutes after signing regardless.
URL_EXPIRES_SECONDS = 60


def _sts_endpoint(region: str) -> str:
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://sts.{region}.{suffix}"


def get_token(cluster_name: str, *, region: str, session: boto3.session.Session | None = None) -> str:
    """Return ``k8s-aws-v1.<base64url(presigned URL), unpadded>`` for ``cluster_name``."""
    session = session or boto3.session.Session()
    # Regional endpoint: the EKS authenticator accepts it and it keeps working inside a VPC with an
    # sts interface endpoint, where the global endpoint is unreachable.
    sts = session.client("sts", region_name=region, endpoint_url=_sts_endpoint(region))

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = cluster_name

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", add_cluster_header)
    url = sts.generate_presigned_url(
        "get_caller_identity", Params={}, ExpiresIn=URL_EXPIRES_SECONDS, HttpMethod="GET")
    encoded = base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")
    return TOKEN_PREFIX + encoded
