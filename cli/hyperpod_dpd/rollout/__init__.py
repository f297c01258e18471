"""``hyperpod-dpd rollout``: change a live endpoint without a deadlocked rollout or a prefill/decode skew.

* :mod:`.plan`: what changes, whether a second copy fits, what the live Deployments' strategy does in place, and the
  decision (pure functions over what :mod:`.cluster` reads);
* :mod:`.store`: the revision store in the environment folder (``<folder>/rollouts/<endpoint>.json``): the current
  and the previous revision, and the operation under way with its finished steps;
* :mod:`.cluster`: the Kubernetes reads and writes (nodes, pods, the operator's Deployments, the
  InferenceEndpointConfig, the stable Service);
* :mod:`.executor`: the steps of each kind of change, each recorded in the store when it is done, so that an
  interrupted rollout resumes where it stopped or is undone.
"""
