"""Benchmark result files from S3 (``benchmark.results_s3_uri``) into a local folder, for ``bench`` and ``report``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hyperpod_core.errors import UsageError


def download_s3(uri: str, dest: Path, region: str) -> Path:
    """Copy every object under ``s3://bucket/prefix`` to ``dest`` (keys relative to the prefix; s3transfer)."""
    from hyperpod_dpd.aws import aws_errors, client

    m = re.fullmatch(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/?(.*)", uri)
    if not m:
        raise UsageError(f"--results must be a folder or s3://<bucket>/<prefix>, got {uri!r}")
    bucket, prefix = m[1], m[2].strip("/")
    s3 = client("s3", region)
    count = 0
    with aws_errors(f"reading {uri}"):
        count = _download_all(s3, bucket, prefix, dest)
    if not count:
        raise UsageError(f"--results {uri} holds no object")
    return dest


def _download_all(s3: Any, bucket: str, prefix: str, dest: Path) -> int:
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix):].lstrip("/") if prefix else obj["Key"]
            if not rel or rel.endswith("/"):
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, obj["Key"], str(target))
            count += 1
    return count
