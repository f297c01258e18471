"""What the numbers say, before and after deploying: the sizing planner (:mod:`.plan`, ``hyperpod-dpd plan``)
and the colocated-vs-DPD benchmark report (:mod:`.report`, ``hyperpod-dpd report``).

Plain Python on top of :mod:`hyperpod_core`; it calls neither AWS nor Kubernetes (the command line fetches
what it reads) and imports no CDK or cdk8s.
"""
