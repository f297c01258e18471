"""Lambda code of :class:`hyperpod_constructs.endpoint_janitor.EndpointJanitor` (this folder is the asset).

Standard library and boto3 only: the Lambda runtime provides both, so the asset needs no build step.
``index`` is the entry point; ``eks_token``, ``kube`` and ``janitor`` hold the testable logic.
"""
