"""A chaos soak with an independent invariant checker (`python -m bench.soak`, docs/reliability.md)."""
