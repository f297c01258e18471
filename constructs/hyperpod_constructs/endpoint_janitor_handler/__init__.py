"""Lambda entry point of :class:`hyperpod_constructs.endpoint_janitor.EndpointJanitor` (``index``).

The logic it runs (``hyperpod_runtime.cleanup``, ``hyperpod_runtime.eks``) is copied beside it into the asset at
synth (``EndpointJanitorProps.bundled_modules``). Standard library and boto3 only: what the runtime has.
"""
