"""The DPD endpoint component and its colocated baseline (InferenceEndpointConfig, operator v3.3)."""
