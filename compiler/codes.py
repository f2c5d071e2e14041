"""Diagnostic codes the compiler reports while resolving names and lowering to IR.

Registered into the one registry in policydsl.diagnostics. Lint rules (compiler.lint)
register theirs the same way. Each entry documents what, why, fix and examples; the
examples are checked by tests and rendered into docs/lint-rules.md.
"""

from policydsl.diagnostics import CodeInfo, Severity, register_code

_HEAD = 'policy "example" version 1\n'

UNKNOWN_ACTION = register_code(CodeInfo(
    "PD101", "unknown-action", Severity.ERROR, "an action name that does not exist",
    why="A cycle runs only the actions the scheduler knows; a typo would silently drop one.",
    fix="Use one of enqueue, allocate, preempt, reclaim, backfill.",
    bad=_HEAD + "actions [enqueue, alocate]\n",
    good=_HEAD + "actions [enqueue, allocate]\n",
))
UNKNOWN_PLUGIN = register_code(CodeInfo(
    "PD102", "unknown-plugin", Severity.ERROR, "a plugin name that does not exist",
    why="An unknown plugin would be ignored, and with it the behaviour the author expected.",
    fix="Use a plugin from the catalog (see docs/language.md).",
    bad=_HEAD + "actions [allocate]\ntier {\n  plugin binpak\n}\n",
    good=_HEAD + "actions [allocate]\ntier {\n  plugin binpack\n}\n",
))
UNKNOWN_ARGUMENT = register_code(CodeInfo(
    "PD103", "unknown-argument", Severity.ERROR, "an argument the plugin or action does not take",
    why="A misspelt argument leaves the default in force without anyone noticing.",
    fix="Use an argument the catalog lists for this plugin or action, or an `enable_*` flag.",
    bad=_HEAD + "actions [allocate]\ntier {\n  plugin binpack { cpus = 2 }\n}\n",
    good=_HEAD + "actions [allocate]\ntier {\n  plugin binpack { cpu = 2 }\n}\n",
))
UNKNOWN_SETTING = register_code(CodeInfo(
    "PD104", "unknown-setting", Severity.ERROR, "a queue or device setting that does not exist",
    why="A misspelt queue or device setting is silently not applied.",
    fix="Use a setting listed in docs/language.md.",
    bad=_HEAD + "actions [allocate]\nqueue a { wieght = 2 }\n",
    good=_HEAD + "actions [allocate]\nqueue a { weight = 2 }\n",
))
WRONG_TYPE = register_code(CodeInfo(
    "PD105", "wrong-type", Severity.ERROR, "a value of the wrong type",
    why="The scheduler cannot guess what `weight = \"high\"` means.",
    fix="Write a value of the type the setting takes (the message says which).",
    bad=_HEAD + "actions [allocate]\nqueue a { weight = \"high\" }\n",
    good=_HEAD + "actions [allocate]\nqueue a { weight = 3 }\n",
))
BAD_QUANTITY = register_code(CodeInfo(
    "PD106", "bad-quantity", Severity.ERROR, "a malformed or out-of-range quantity",
    why="Resource amounts must be Kubernetes quantities to compare with node capacity.",
    fix="Write a quantity such as 500m, 4, 8Gi.",
    bad=_HEAD + "actions [allocate]\nqueue a { capability = { memory: \"lots\" } }\n",
    good=_HEAD + "actions [allocate]\nqueue a { capability = { memory: 64Gi } }\n",
))
UNKNOWN_CONSTANT = register_code(CodeInfo(
    "PD107", "unknown-constant", Severity.ERROR, "a name used as a value that no `const` defines",
    why="A bare name is a constant reference; an undefined one has no value.",
    fix="Define it with `const NAME = value`, or quote a string.",
    bad=_HEAD + "actions [allocate]\nqueue a { capability = { memory: BIG } }\n",
    good=_HEAD + "const BIG = 64Gi\nactions [allocate]\nqueue a { capability = { memory: BIG } }\n",
))
OUT_OF_RANGE = register_code(CodeInfo(
    "PD108", "invalid-value", Severity.ERROR, "a value outside what the setting allows",
    why="Values outside their range (negative weights, unknown symbols) have no meaning.",
    fix="Use a value within the range the message gives.",
    bad=_HEAD + "actions [allocate]\ndevice \"nvidia.com/gpu\" { topology = ring }\n",
    good=_HEAD + "actions [allocate]\ndevice \"nvidia.com/gpu\" { topology = nvlink }\n",
))
WEIGHT_NOT_SCORING = register_code(CodeInfo(
    "PD109", "weight-on-non-scoring-plugin", Severity.ERROR, "a score weight on a plugin that does not score nodes",
    why="Only scoring plugins (binpack, nodeorder, deviceshare) add to node scores; a weight elsewhere does nothing.",
    fix="Remove `weight N` from the plugin.",
    bad=_HEAD + "actions [allocate]\ntier {\n  plugin gang weight 2\n}\n",
    good=_HEAD + "actions [allocate]\ntier {\n  plugin gang\n  plugin binpack weight 2\n}\n",
))
MISSING_ACTIONS = register_code(CodeInfo(
    "PD110", "missing-actions", Severity.ERROR, "the policy declares no `actions` list",
    why="Without an action order the scheduler would do nothing each cycle.",
    fix="Add `actions [enqueue, allocate, backfill]` (Volcano's default).",
    bad=_HEAD + "tier {\n  plugin gang\n}\n",
    good=_HEAD + "actions [enqueue, allocate, backfill]\ntier {\n  plugin gang\n}\n",
))
