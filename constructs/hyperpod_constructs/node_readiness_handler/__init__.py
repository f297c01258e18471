"""Lambda entry point of :class:`hyperpod_constructs.node_readiness.NodeReadiness` (``index``).

The EKS client it uses (``hyperpod_runtime.eks``) is copied beside it into the asset at synth
(``NodeReadinessProps.bundled_modules``). Standard library and boto3 only: what the runtime has.
"""
