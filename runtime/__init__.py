"""Execution: cluster model and snapshot, kernels, actions and plugins, the scheduling cycle,
connectors (embedded simulator, Kubernetes), hot reload, metrics."""
