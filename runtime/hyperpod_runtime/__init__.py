"""Code that runs inside a Lambda function or a pod, not on the operator's machine: the endpoint janitor's logic
(:mod:`.cleanup`), the stack-status check of the destructive handlers (:mod:`.stack_status`), a small EKS client
(:mod:`.eks`) and the benchmark Jobs' runner (:mod:`.bench_runner`).

Standard library and boto3/botocore (and urllib3, which botocore requires) only, and nothing of ours outside this
package: the Lambda assets bundle these modules beside their handlers at synth (``hyperpod_infra.bundle``) and the
benchmark chart ships the runner's source in a ConfigMap, so each must run where only the Python runtime (and boto3)
is installed."""
