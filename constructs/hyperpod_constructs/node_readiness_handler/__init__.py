"""Lambda code of :class:`hyperpod_constructs.node_readiness.NodeReadiness` (this folder is the asset).

``eks_token.py`` and ``kube.py`` are links to the endpoint janitor's modules (one EKS token scheme, one
HTTPS transport); staging follows links, so the deployed asset holds real copies.
"""
