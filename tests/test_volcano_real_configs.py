"""Every complete scheduler configuration in Volcano v1.14.1's repository, imported, linted and
exported back (issue 31, "Proof": the real configurations).

tests/fixtures/volcano/real/ holds one file per config found in volcano-sh/volcano at v1.14.1
(the Helm chart's .conf files, the installer manifests' ConfigMaps, the benchmark config, and
the fenced blocks of docs/user-guide and docs/design that have both `actions` and `tiers`),
each with a first line naming its source. A config that is refused, or that comes back without
one of its actions, tiers, plugins, flags or arguments, fails here, unless a table below says
why: either Volcano v1.14.1 cannot load it either, or it is a deliberate difference that
runtime/README.md documents (the line cited is checked to be there).

The comparison reads the input and the export with plain YAML, independently of the importer,
in the normal form compiler/volcano/model.py documents and Volcano itself treats as equal:
actions split on commas; an absent enable* flag is Volcano's default (true, except
enableHierarchy and EnabledClusterOrder, which Volcano leaves off: framework/util.go isEnabled);
numbers compare as numbers (`"2"` = `2` = `2.0`, as Volcano's GetFloat64 takes an int); key
order does not matter; `binpack.resources` is its list of names, each weighing 1 unless given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from compiler.pipeline import compile_text
from compiler.volcano.exporter import export_volcano_text
from compiler.volcano.importer import import_volcano

REAL = Path(__file__).parent / "fixtures" / "volcano" / "real"
README = Path(__file__).resolve().parent.parent / "runtime" / "README.md"
SOURCE_PREFIX = "# Source: volcano-sh/volcano v1.14.1 "

# Blocks of Volcano's docs that look like configs but that Volcano v1.14.1 would not load either
# (it falls back to its default config): file -> (the import's error codes, why).
NOT_LOADABLE_BY_VOLCANO: dict[str, tuple[frozenset[str], str]] = {
    "plugin_conf_block1.yaml": (
        frozenset({"PD603", "PD604"}),
        "a schema sketch: `actions: list_of_action_in_order`, plugins `plugin_1`..`plugin_3`"),
    "how_to_use_vnpu_block2_volcano_scheduler_conf.yaml": (
        frozenset({"PD602"}),
        "an excerpt with `...` standing for omitted lines: not YAML"),
    "job_resource_reservation_design_block1.yaml": (
        frozenset({"PD603", "PD607"}),
        "a design proposal: actions `elect` and `reserve` never shipped, and its tiers' plugins "
        "are outside their `plugins` lists"),
    "usage_based_scheduling_block2.yaml": (
        frozenset({"PD607"}),
        "`metrics` with nested `tls:` and `elasticsearch:` mappings: Volcano reads a flat map of strings "
        "(MetricsConfiguration map[string]string) and yaml.v2 refuses a mapping there"),
    "usage_based_scheduling_block6.yaml": (
        frozenset({"PD607"}),
        "`metrics` with nested `tls:` and `elasticsearch:` mappings, as block2"),
}

# Configs Volcano v1.14.1 runs that the import refuses on purpose: file -> (the import's error
# codes, why, the runtime/README.md text that documents it).
ACTION_ORDER_README = "- Actions run in one order"
DELIBERATE: dict[str, tuple[frozenset[str], str, str]] = {
    "custom_plugin_block11_volcano_scheduler_conf.yaml": (
        frozenset({"PD604"}), "`magic`, the doc's example of a plugin built into a custom scheduler",
        "- a plugin Volcano does not ship (a custom build's"),
    "pdb_plugin_block1.yaml": (
        frozenset({"PD612"}), "shuffle whose only victim plugin is pdb: Volcano's pdb names every running pod "
        "its budgets allow (all evicted each cycle); ours answers no victims there (lint PD304)",
        "- `shuffle` with no enabled plugin that answers `victim`"),
    "how_to_use_vnpu_block6_volcano_scheduler_conf.yaml": (
        frozenset({"PD614"}), "Ascend vNPU through HAMi and vGPU MIG geometries are not evaluated",
        "Not evaluated yet, so refused (lint PD413, import PD614 at the key)"),
    "resource_strategy_fit_scheduling_block5.yaml": (
        frozenset({"PD612"}), "preempt/reclaim with no plugin choosing victims (lint PD304)",
        "- `preempt` or `reclaim` with no enabled plugin that chooses victims"),
    "resource_strategy_fit_scheduling_block1.yaml": (
        frozenset({"PD612"}), "preempt/reclaim with no plugin choosing victims (lint PD304)",
        "- `preempt` or `reclaim` with no enabled plugin that chooses victims"),
    "resource_strategy_fit_scheduling_block3.yaml": (
        frozenset({"PD612"}), "preempt/reclaim with no plugin choosing victims (lint PD304)",
        "- `preempt` or `reclaim` with no enabled plugin that chooses victims"),
    "resource_strategy_fit_scheduling_block7.yaml": (
        frozenset({"PD612"}), "preempt/reclaim with no plugin choosing victims (lint PD304)",
        "- `preempt` or `reclaim` with no enabled plugin that chooses victims"),
}

ALL = sorted(p.name for p in REAL.glob("*.yaml"))
CLEAN = [name for name in ALL if name not in DELIBERATE and name not in NOT_LOADABLE_BY_VOLCANO]

# Volcano's enable* flags that stay off when absent (framework/util.go isEnabled on a nil that
# plugins/defaults.go ApplyPluginConfDefaults does not set); every other flag defaults to true.
OFF_WHEN_ABSENT = frozenset({"enableHierarchy", "EnabledClusterOrder"})
FLAGS_DEFAULT_TRUE = frozenset({
    "enableJobOrder", "enableJobReady", "enableJobPipelined", "enableJobEnqueued", "enableTaskOrder",
    "enablePreemptable", "enableReclaimable", "enablePreemptive", "enableQueueOrder", "enablePredicate",
    "enableBestNode", "enableNodeOrder", "enableTargetJob", "enableReservedNodes", "enabledVictim",
    "enableJobStarving", "enabledOverused", "enabledAllocatable", "enabledHyperNodeOrder",
    "enabledSubJobReady", "enabledSubJobPipelined", "enabledSubJobOrder", "enabledHyperNodeGradient",
})


def _value(value: Any) -> Any:
    """A value as Volcano compares it: numbers as numbers, maps by key, lists in order."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_value(v) for v in value]
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def _arguments(args: dict | None) -> dict:
    out: dict = {}
    for key, value in (args or {}).items():
        if key == "binpack.resources" and isinstance(value, str):
            names = [n.strip() for n in value.split(",") if n.strip()]
            out[key] = names
            for name in names:
                out.setdefault(f"{key}.{name}", 1.0)
        else:
            out[key] = _value(value)
    return out


# Arguments Volcano v1.14.1 reads only to go faster (predicates.go: an equivalence cache of
# predicate results; the same nodes pass): the import warns (PD605) and leaves them out.
SPEED_ONLY = frozenset({("predicates", "predicate.CacheEnable")})
# Volcano <= 1.8 predicates arguments that today are deviceshare's (docs/language.md: imported
# onto the config's deviceshare, or one added right after predicates). v1.14.1's predicates no
# longer reads them; the docs still show them there.
MOVED = {("predicates", "predicate.GPUSharingEnable"): ("deviceshare", "deviceshare.GPUSharingEnable"),
         ("predicates", "predicate.GPUNumberEnable"): ("deviceshare", "deviceshare.GPUNumberEnable")}


def _plugin(entry: dict) -> tuple[str, dict, dict]:
    flags = {name: True for name in FLAGS_DEFAULT_TRUE}
    flags.update({name: False for name in OFF_WHEN_ABSENT})
    for key, value in entry.items():
        if key in flags:  # any other key is no field of Volcano's PluginOption: it ignores it
            flags[key] = _value(value)
    arguments = {key: value for key, value in _arguments(entry.get("arguments")).items()
                 if (entry["name"], key) not in SPEED_ONLY}
    return entry["name"], flags, arguments


def _move_old_arguments(tiers: list[list[tuple[str, dict, dict]]]) -> None:
    default_flags = _plugin({"name": "-"})[1]
    for tier in tiers:
        for index, (name, _flags, arguments) in enumerate(list(tier)):
            for key in [k for k in arguments if (name, k) in MOVED]:
                target, new_key = MOVED[name, key]
                value = arguments.pop(key)
                holder = next((p for t in tiers for p in t if p[0] == target), None)
                if holder is None:
                    holder = (target, dict(default_flags), {})
                    tier.insert(tier.index(tier[index]) + 1, holder)
                holder[2][new_key] = value


def normal_form(config: dict) -> dict:
    """What a Volcano config means to Volcano, read from plain YAML; actions as a set (their
    order is checked separately)."""
    configurations: dict[str, dict] = {}
    for entry in config.get("configurations") or []:
        configurations.setdefault(entry["name"], {}).update(_arguments(entry.get("arguments")))
    tiers = [[_plugin(p) for p in (tier.get("plugins") or [])] for tier in config.get("tiers") or []]
    _move_old_arguments(tiers)
    return {
        "actions": sorted(_actions(config)),
        "tiers": tiers,
        "configurations": configurations,
        "metrics": config.get("metrics") or {},
    }


def _actions(config: dict) -> list[str]:
    return [a.strip() for a in str(config.get("actions", "")).split(",") if a.strip()]


def _codes(result) -> frozenset[str]:
    return frozenset(d.code for d in result.errors)


def test_every_fixture_names_its_source_and_is_classified():
    assert len(ALL) >= 30, "the real configs are missing"
    for name in ALL:
        first = (REAL / name).read_text().splitlines()[0]
        assert first.startswith(SOURCE_PREFIX), name
    for table in (DELIBERATE, NOT_LOADABLE_BY_VOLCANO):
        assert not set(table) - set(ALL), "a table names a fixture that is not there"


@pytest.mark.parametrize("name", CLEAN)
def test_real_config_imports_lints_and_exports_back_unchanged(name):
    path = REAL / name
    imported = import_volcano(str(path))
    assert imported.exit_code == 0 and imported.text is not None, [str(d.message) for d in imported.errors]
    compiled = compile_text(imported.text, f"{name}.policy")
    assert not compiled.errors, [d.message for d in compiled.errors]
    exported = export_volcano_text(imported.text, f"{name}.policy")
    assert exported.exit_code == 0 and exported.text is not None, [d.message for d in exported.errors]
    assert not [d for d in exported.diagnostics if d.code == "PD610"], "something is not expressible in Volcano"
    given, back = yaml.safe_load(path.read_text()), yaml.safe_load(exported.text)
    assert normal_form(back) == normal_form(given)
    warned = {d.code for d in imported.diagnostics}
    if _actions(back) != _actions(given):
        # A policy runs actions in one order (runtime/README.md, deliberate differences); the
        # import says it reordered them.
        assert "PD611" in warned and ACTION_ORDER_README in README.read_text()
    for tier in given.get("tiers") or []:
        for plugin in tier.get("plugins") or []:
            ignored = set(plugin) - {"name", "arguments"} - FLAGS_DEFAULT_TRUE - OFF_WHEN_ABSENT
            assert not ignored or "PD606" in warned, f"{ignored} left out without a warning"
            speed_only = {(plugin["name"], k) for k in plugin.get("arguments") or {}} & SPEED_ONLY
            assert not speed_only or any(d.code == "PD605" and "speed only" in d.message
                                         for d in imported.diagnostics), f"{speed_only}: no warning saying why"


@pytest.mark.parametrize("name", sorted(DELIBERATE))
def test_deliberate_difference_is_refused_loudly_and_documented(name):
    codes, _why, readme_text = DELIBERATE[name]
    imported = import_volcano(str(REAL / name))
    assert imported.exit_code == 1  # an error: no clean import, whatever comments it printed
    assert _codes(imported) == codes
    assert all(d.span is not None for d in imported.errors), "a refusal must say where"
    assert readme_text in README.read_text(), f"runtime/README.md does not document: {readme_text}"


@pytest.mark.parametrize("name", sorted(NOT_LOADABLE_BY_VOLCANO))
def test_config_volcano_cannot_load_is_refused_too(name):
    codes, _why = NOT_LOADABLE_BY_VOLCANO[name]
    imported = import_volcano(str(REAL / name))
    assert imported.exit_code == 1  # an error: no clean import, whatever comments it printed
    assert _codes(imported) == codes
