"""Volcano compatibility: import a Volcano scheduler config and Queue objects as a policy,
and export a policy as a Volcano config and Queues.

- `importer`: the import front door; lays the model out as policy text (`policy_text`).
- `config_reader`, `queue_reader`: located YAML (`located_yaml`) into the model (`model`),
  values converted by `reading`; `model` also defines how two Volcano configs compare.
- `exporter`: a compiled policy's IR as Volcano YAML.
- `codes`: the PD6xx diagnostics both report.

Names come from compiler.catalog (`Flag.volcano`, `Argument.volcano`, `PluginSpec.weight_volcano`).
"""
