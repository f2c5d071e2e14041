"""Volcano compatibility: import a Volcano scheduler config and Queue objects as a policy
(`importer`), and export a policy as a Volcano config and Queues (`exporter`).

Both read names from compiler.catalog (`Flag.volcano`, `Argument.volcano`,
`PluginSpec.weight_volcano`) and report through the diagnostic codes in `codes` (PD6xx).
"""
