"""Lambda code of :class:`hyperpod_constructs.lambda_eni_waiter.LambdaEniWaiter` (this folder is the asset)."""
