"""The EKS API from a Lambda function: a bearer token (:mod:`.token`) and a small Kubernetes REST client
(:mod:`.kube`). Standard library, boto3 and urllib3 (botocore's HTTP library) only, so it runs on the Lambda runtime
as bundled, with no build step; the endpoint janitor and the node-readiness wait both use it
(:mod:`hyperpod_infra.bundle`)."""
