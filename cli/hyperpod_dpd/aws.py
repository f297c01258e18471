"""AWS clients for the command line, and the one place botocore errors become one-line failures.

Only commands import this module; synthesis code never calls AWS.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from hyperpod_core.errors import CommandFailed

#: Standard retry mode with a bounded number of attempts: throttling is retried, a dead endpoint is not
#: waited on for minutes.
RETRIES = BotoConfig(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10, read_timeout=60)


def client(service: str, region: str, session: boto3.Session | None = None) -> Any:
    """A boto3 client for ``service`` in ``region`` with bounded retries."""
    return (session or boto3.Session()).client(service, region_name=region, config=RETRIES)


@contextmanager
def aws_errors(action: str) -> Iterator[None]:
    """Turn botocore errors raised while doing ``action`` into :class:`CommandFailed` with one line."""
    try:
        yield
    except NoCredentialsError:
        raise CommandFailed(f"{action}: no AWS credentials (set AWS_PROFILE or run 'aws sso login')") from None
    except NoRegionError:
        raise CommandFailed(f"{action}: no AWS region") from None
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise CommandFailed(f"{action}: {err.get('Code', 'Error')}: {err.get('Message', str(exc))}") from None
    except BotoCoreError as exc:
        raise CommandFailed(f"{action}: {exc}") from None
