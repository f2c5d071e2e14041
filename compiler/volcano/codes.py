"""Diagnostic codes of the Volcano import and export (PD6xx), in the one registry.

The rule for import severities: an **error** when the policy printed cannot mean what the
Volcano config means (a plugin or action we do not have, a value of the wrong type, a Queue
whose parent is missing), so the exit is non-zero; a **warning** when Volcano itself ignores the
input (a misspelt flag, a flag of a plugin without that extension point, an argument we do not
know) and the policy is still equivalent for everything we can see. Export warns for every
policy setting Volcano has no place for.
"""

from policydsl.diagnostics import CodeInfo, Severity, register_code

UNREADABLE = register_code(CodeInfo(
    "PD601", "volcano-unreadable", Severity.ERROR, "a Volcano config or Queue file cannot be read",
    fix="Check the path and permissions.",
))
BAD_YAML = register_code(CodeInfo(
    "PD602", "volcano-bad-yaml", Severity.ERROR, "malformed YAML, or YAML of the wrong shape for a Volcano config",
    why="Volcano refuses to start on a config it cannot parse; so does the import.",
    fix="Fix the YAML at the position given; the config is a mapping with `actions`, `tiers` and "
        "optionally `configurations`, or a ConfigMap holding `volcano-scheduler.conf`.",
))
UNKNOWN_ACTION = register_code(CodeInfo(
    "PD603", "volcano-unknown-action", Severity.ERROR, "a Volcano action policydsl does not have",
    why="Volcano refuses an unknown action; a known Volcano action we lack (reserve, elect) "
        "would silently change the cycle.",
    fix="Use enqueue, allocate, preempt, reclaim, backfill, gangpreempt, gangreclaim, shuffle (Volcano's names are "
        "case-sensitive: `gangPreempt` is refused).",
))
UNKNOWN_PLUGIN = register_code(CodeInfo(
    "PD604", "volcano-unknown-plugin", Severity.ERROR, "a Volcano plugin policydsl does not have",
    why="The imported policy would run without it, so jobs would be scheduled differently (sla, tdm, ...).",
    fix="Remove the plugin from the Volcano config, or accept the different behaviour by hand.",
))
UNKNOWN_ARGUMENT = register_code(CodeInfo(
    "PD605", "volcano-unknown-argument", Severity.WARNING, "a plugin or action argument policydsl does not know",
    why="Volcano ignores arguments it does not read, so a typo does nothing there; a real Volcano "
        "argument we lack is a behaviour we do not reproduce.",
    fix="Check the spelling against the catalog (docs/language.md); drop arguments of old Volcano versions.",
))
IGNORED_FLAG = register_code(CodeInfo(
    "PD606", "volcano-ignored-flag", Severity.WARNING,
    "a plugin flag Volcano ignores: misspelt, or for an extension point the plugin does not have",
    why="Volcano reads only the flags it knows, and a plugin without an extension point never asks "
        "its flag; the setting has no effect there and is left out of the policy.",
    fix="Remove the flag, or spell it as Volcano does (note `enabledOverused`, `enabledVictim`, ...).",
))
BAD_VALUE = register_code(CodeInfo(
    "PD607", "volcano-bad-value", Severity.ERROR, "a Volcano setting with a value of the wrong type or range",
    why="Volcano would reject or misread it; the policy cannot guess what was meant.",
    fix="Write the value the message asks for.",
))
BAD_QUEUE = register_code(CodeInfo(
    "PD608", "volcano-bad-queue", Severity.ERROR,
    "a Queue that cannot be placed: missing name, unknown or cyclic parent, duplicate",
    why="A queue tree needs every parent to exist exactly once; Volcano's admission rejects the rest.",
    fix="Create the parent Queue too (or fix `spec.parent`), and give every Queue a unique name.",
))
NOT_IMPORTED = register_code(CodeInfo(
    "PD609", "volcano-not-imported", Severity.WARNING, "part of the Volcano input the policy has no place for",
    why="Fields such as a Queue's `affinity` or a config's `metrics` section are outside what a "
        "policy declares; they are listed so nothing is dropped silently.",
    fix="Keep those settings in their Kubernetes objects or scheduler flags.",
))
NOT_EXPRESSIBLE = register_code(CodeInfo(
    "PD610", "volcano-not-expressible", Severity.WARNING, "a policy setting Volcano's config cannot express",
    why="Export prints what Volcano can run; device rules, borrowing limits and a few weights exist "
        "only in policydsl, so the exported config behaves differently there.",
    fix="Accept the difference, or keep running policydsl for those features.",
))
ACTION_ORDER = register_code(CodeInfo(
    "PD611", "volcano-action-order", Severity.WARNING, "Volcano actions listed out of the order policydsl runs them in",
    why="Volcano runs actions in any order listed; a policy must list them as enqueue, allocate, preempt, "
        "reclaim, backfill (lint PD302), so the import reorders them. Within one cycle that moves, e.g., "
        "reclaim before backfill; the next cycle (1s later) runs everything again, so little changes.",
    fix="Nothing to do, unless the order mattered to you; then review the imported `actions`.",
))
POLICY_REJECTED = register_code(CodeInfo(
    "PD612", "volcano-policy-rejected", Severity.ERROR, "the imported policy fails policydsl's own checks",
    why="Volcano accepts some configs policydsl refuses to run, e.g. `preempt` with no plugin that picks "
        "victims; the imported policy says the same thing and fails `policydsl lint`.",
    fix="Fix the Volcano config (or the imported policy) as the quoted check says.",
))
POLICY_WARNED = register_code(CodeInfo(
    "PD613", "volcano-policy-warned", Severity.WARNING, "the imported policy gets a warning of policydsl's checks",
    why="Volcano runs some configs that are likely mistakes, e.g. no `allocate` at all, or proportion and "
        "capacity together; policydsl runs them too, and says so on the config they come from.",
    fix="Fix the Volcano config (or the imported policy) as the quoted check says, or keep it if it is meant.",
))
DROPPED = register_code(CodeInfo(
    "PD614", "volcano-dropped", Severity.ERROR, "a Volcano argument that changes decisions and policydsl does not import",
    why="Volcano reads it and schedules differently with it (e.g. capacity's `ancestorReclaimLevel`); the policy "
        "without it would decide otherwise, so the import fails unless told to drop it. The list is "
        "`DECISION_ARGUMENTS` in compiler/volcano/config_reader.py; arguments Volcano ignores stay warnings (PD605).",
    fix="Remove the argument from the Volcano config, or pass `--allow-dropped` to write the policy anyway, "
        "each dropped argument kept as a `# not imported:` comment.",
))
MEASURES_DIFFERENTLY = register_code(CodeInfo(
    "PD615", "volcano-measures-differently", Severity.WARNING,
    "a Volcano setting imported as it is meant, where Volcano itself measures otherwise",
    why="rescheduling's lowNodeUtilization reads measured load in Volcano v1.14.1 (its `metrics` source, averaged "
        "over `metricsPeriod`; the cache keeps only 10-minute averages, so the default 5m reads 0% on every node "
        "and nothing moves); policydsl compares the pods' requests. A config that moved nothing in Volcano may "
        "move pods here (runtime/README.md).",
    fix="Check the thresholds against requested (not measured) utilization; nothing to change if they are meant.",
))
