"""Rule documentation from the code registry: `policydsl lint --explain CODE` and docs/lint-rules.md.

Both are rendered from `CODES`, so the docs cannot drift from the rules; a test compares the
committed docs/lint-rules.md with `rules_markdown()`.
"""

from __future__ import annotations

import importlib
import textwrap

from compiler.lint.registry import RULES, is_configurable
from policydsl.diagnostics import CODES, CodeInfo

# Modules that register codes besides the language and the lint rules; imported so the docs
# and `--explain` see every code whatever this process happened to import before.
CODE_MODULES = ("compiler.codes", "policydsl.formatter", "compiler.volcano.codes")

# Code ranges, as the docs group them.
SECTION_TITLES = {
    "PD0": "Reading and parsing (PD0xx)",
    "PD1": "Names, types and values (PD1xx)",
    "PD2": "Queues (PD2xx)",
    "PD3": "Actions (PD3xx)",
    "PD4": "Plugins (PD4xx)",
    "PD5": "Devices, resources, constants and structure (PD5xx)",
}


# The codes a policy file can get; their examples are policy text. Other ranges (PD6xx,
# Volcano import) belong to other commands: `--explain` covers them, the lint docs do not.
POLICY_PREFIXES = ("PD0", "PD1", "PD2", "PD3", "PD4", "PD5")


def policy_examples() -> list[CodeInfo]:
    """Every code with policy-text examples: what the example tests compile."""
    return [info for info in all_codes().values() if info.bad and info.code.startswith(POLICY_PREFIXES)]


def all_codes() -> dict[str, CodeInfo]:
    """The whole registry, in code order."""
    for module in CODE_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
    return dict(sorted(CODES.items()))


def explain(code: str) -> str:
    """The plain-text documentation of one code."""
    info = all_codes()[code]
    lines = [f"{info.code} {info.name} ({info.severity})", "", info.summary]
    if info.why:
        lines += ["", "Why:", *_wrap(info.why)]
    if info.fix:
        lines += ["", "Fix:", *_wrap(info.fix)]
    if info.bad:
        lines += ["", "Bad (the marked line gets the diagnostic):", textwrap.indent(info.bad.rstrip("\n"), "    ")]
    if info.good:
        lines += ["", "Good:", textwrap.indent(info.good.rstrip("\n"), "    ")]
    lines += ["", _configurability(info)]
    return "\n".join(lines) + "\n"


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, width=88, initial_indent="  ", subsequent_indent="  ")


def _configurability(info: CodeInfo) -> str:
    if is_configurable(info.code):
        scope = " Judged on the whole policy, so an included file linted alone skips it." \
            if info.code in RULES and RULES[info.code].whole_policy else ""
        return (f"Can be disabled (`# policydsl: disable={info.code}`, or `lint: disable:` in .policydsl.yaml) "
                f"or re-graded (`lint: severity:`).{scope}")
    if info.code < "PD2":
        return "Cannot be disabled: the policy does not compile until it is fixed."
    if info.code in RULES and RULES[info.code].structural:
        return ("Cannot be disabled or re-graded: it leaves the plan ambiguous or impossible, so the policy "
                "does not compile until it is fixed (a suppression comment naming it is itself reported, PD014).")
    return "Not a lint rule: lint configuration does not apply to it."


_INTRO = """\
# Lint rules

<!-- Generated from the code registry by `policydsl lint --rules-markdown > docs/lint-rules.md`.
     Do not edit by hand: tests/test_lint_cli.py fails when this file and the registry differ. -->

Every diagnostic `policydsl lint` and `policydsl compile` report has a stable code. PD0xx
and PD1xx mean the policy cannot be read or compiled; they cannot be turned off. PD2xx to
PD5xx are lint rules: each can be disabled or re-graded.

In the examples, the line ending in `# expect: CODE` is the line the diagnostic points at;
the tests check every bad example fires there and every good example is quiet. Examples
that `include "common.policy"` assume that file exists next to them.

## Configuring

`.policydsl.yaml`, found by walking up from each policy file (the nearest one wins):

```yaml
lint:
  disable: [PD305, unused-constant]   # codes or rule names
  select: [PD201, PD202]              # when given, only these rules run
  severity: {PD402: error}            # re-grade a rule: info, warning or error
  fail_level: warning                 # exit 1 on findings at or above this severity
```

`lint:` is the file's only section: any other key, at the top or under `lint:`, is a PD200
error at its line (Ruff's `ignore` and `extend-select` get a hint to `disable` and `select`).

Inline, in the policy (a reason may follow `--`):

```
queue a { weight = 2 }                 # policydsl: disable=PD201,PD305
# policydsl: disable-next-line=PD201
# policydsl: disable-file=PD530 -- constants shared with staging
```

On the command line: `--select`, `--ignore`, `--fail-level`, `--explain CODE`, `--list-rules`.
"""


def rules_markdown() -> str:
    """The reference of every code a policy can get (PD0xx-PD5xx); `--explain` covers the rest."""
    out = [_INTRO, "## Index", "", "| Code | Name | Severity | Summary |", "| --- | --- | --- | --- |"]
    ordered = [info for info in all_codes().values() if info.code.startswith(POLICY_PREFIXES)]
    for info in ordered:
        out.append(f"| [{info.code}](#{info.code.lower()}-{info.name}) | {info.name} | {info.severity} | "
                   f"{_cell(info.summary)} |")
    prefixes = sorted({info.code[:3] for info in ordered})
    for prefix in prefixes:
        section = [info for info in ordered if info.code.startswith(prefix)]
        out += ["", "## " + SECTION_TITLES.get(prefix, f"{prefix}xx")]
        for info in section:
            out += ["", f"### {info.code} {info.name}", "", f"**{info.severity}** — {info.summary}."]
            if info.why:
                out += ["", f"*Why:* {info.why}"]
            if info.fix:
                out += ["", f"*Fix:* {info.fix}"]
            if info.bad:
                out += ["", "Bad:", "", "```", info.bad.rstrip("\n"), "```"]
            if info.good:
                out += ["", "Good:", "", "```", info.good.rstrip("\n"), "```"]
            out += ["", _configurability(info)]
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
