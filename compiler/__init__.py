"""The meaning of a policy: name resolution, lint, lowering to IR, validation, the Plan."""
