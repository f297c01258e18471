"""AWS error answers injected into a real boto3 client, so that botocore parses and retries them as it would AWS's.

botocore's Stubber answers before the retry handler runs, so it cannot show what a retry mode does; moto answers
at the ``before-send`` event, after it. :func:`fail_first` answers there, ahead of moto.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

from botocore.awsrequest import AWSResponse


class _Body(io.BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.getvalue()


def fail_first(client: Any, operation: str, times: int, code: str = "ThrottlingException") -> list[str]:
    """Makes the first ``times`` requests ``client`` sends for ``operation`` (its API name: ``ListEndpoints``) come
    back as AWS error ``code`` (HTTP 400, in the service's protocol) before moto sees them; botocore parses and
    retries them as it would AWS's answer. Returns the list of the failed requests (one entry each)."""
    model = client.meta.service_model
    if model.protocol in ("json", "rest-json"):
        body = json.dumps({"__type": code, "message": "Rate exceeded"}).encode()
    elif model.protocol == "ec2":
        body = (f"<Response><Errors><Error><Code>{code}</Code><Message>Rate exceeded</Message></Error></Errors>"
                "<RequestID>r</RequestID></Response>").encode()
    else:  # query
        body = (f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>Rate exceeded</Message>"
                "</Error><RequestId>r</RequestId></ErrorResponse>").encode()
    failed: list[str] = []

    def answer(request: Any, **_: Any) -> AWSResponse | None:
        if len(failed) >= times:
            return None
        failed.append(operation)
        return AWSResponse(request.url, 400, {"x-amzn-RequestId": "r"}, _Body(body))

    client.meta.events.register_first(f"before-send.{model.service_id.hyphenize()}.{operation}", answer)
    return failed
