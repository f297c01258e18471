"""The rows of ``hyperpod-dpd status`` (:mod:`hyperpod_dpd.commands.status`), one module per area: the cluster
(HyperPod, EKS add-ons, GPU nodes), the endpoint (state, pods, router, load balancer, TLS, revision, skew), its cold
start caches and its KV path over EFA."""
