"""``hyperpod-dpd``: the operator command line (an edge, like ``app.py``).

Synthesis code lives in ``hyperpod_infra``/``hyperpod_constructs``/``hyperpod_k8s`` and never calls AWS; the
commands here are the only code that talks to AWS or a Kubernetes API. Each command module registers itself
on the Typer app in :mod:`hyperpod_dpd.app`.
"""
