"""The main job: one config -> CloudFormation templates (CDK app, cdk-nag) -> cfn-lint || Kubernetes manifests
(cdk8s app) -> summary, in one process. An edge like ``app.py``: ``python -O -m hyperpod_mainjob``
(``scripts/synth``, ``hyperpod-dpd synth``). See :mod:`hyperpod_mainjob.job`."""
