"""CDK constructs of the lakeloader deployment: one module per concern, composed by infra.stack."""
