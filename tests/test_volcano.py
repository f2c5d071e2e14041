"""Volcano import and export, on the config shapes Volcano documents (tests/fixtures/volcano).

The expected meaning of a Volcano config is worked out here from the raw YAML and the
catalog's Volcano names (an oracle independent of the importer), then compared with the Plan
the imported policy compiles to. Round trips compare parsed YAML, under the normalization
documented in compiler/volcano/model.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import catalog as cat
from compiler.pipeline import compile_text
from compiler.quantities import to_base_units
from compiler.volcano import policy_text as pt
from compiler.volcano.exporter import export_volcano_text
from compiler.volcano.config_reader import ConfigReader
from compiler.volcano.importer import import_volcano, import_volcano_text
from compiler.volcano.located_yaml import YamlText
from policydsl.cli import main
from policydsl.diagnostics import Severity

FIXTURES = Path(__file__).parent / "fixtures" / "volcano"

# (scheduler config, Queue file) in the shapes Volcano's docs and chart use.
DOCUMENTED = [
    ("default.conf", None),
    ("preempt-reclaim.conf", None),
    ("binpack-gpu.conf", None),
    ("nodeorder-weights.conf", None),
    ("drf-hierarchy.conf", None),
    ("overcommit.conf", None),
    ("proportion.conf", "proportion-queues.yaml"),
    ("deviceshare-gpu-sharing.yaml", None),
    ("capacity-hierarchy.yaml", "capacity-queues.yaml"),
    ("network-topology-aware.yaml", None),
]
IDS = [config for config, _ in DOCUMENTED]


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def imported(config: str, queues: str | None = None):
    return import_volcano(fixture(config), fixture(queues) if queues else None)


def raw_config(name: str) -> dict:
    """The scheduler config as plain YAML data, unwrapped from its ConfigMap."""
    data = yaml.safe_load((FIXTURES / name).read_text())
    if data.get("kind") == "ConfigMap":
        data = yaml.safe_load(data["data"]["volcano-scheduler.conf"])
    return data


def raw_queues(name: str) -> list[dict]:
    objects = []
    for doc in yaml.safe_load_all((FIXTURES / name).read_text()):
        objects.extend(doc["items"] if doc.get("kind") == "List" else [doc])
    return objects


def codes_at(result) -> set[tuple[str, int]]:
    return {(d.code, d.span.line) for d in result.diagnostics}


# --- an oracle: what a Volcano config means, from the raw YAML and the catalog's names -----

def _as_number(value) -> float:
    return float(value)


def expected_plugin(entry: dict) -> tuple[str, float | None, dict, dict]:
    """(name, score weight, flags, arguments) by catalog names, values as Volcano reads them."""
    spec = cat.PLUGINS[entry["name"]]
    flags = {cat.FLAGS_BY_VOLCANO[k].name: v for k, v in entry.items() if k in cat.FLAGS_BY_VOLCANO}
    weight = None
    arguments: dict = {}
    args = entry.get("arguments") or {}
    # Resource-weight lists (`binpack.resources`, `hypernode.binpack.resources`) and their `<key>.<resource>`.
    lists = {a.volcano: a for a in spec.arguments if a.kind == cat.RESOURCE_WEIGHTS and a.volcano}
    for key, value in args.items():
        if key == spec.weight_volcano:
            weight = _as_number(value)
        elif key in lists:
            names = [n.strip() for n in value.split(",") if n.strip()]
            arguments[lists[key].name] = {n: _as_number(args.get(f"{key}.{n}", 1)) for n in names}
        elif any(key.startswith(k + ".") for k in lists):
            continue
        else:
            arg = next(a for a in spec.arguments if a.volcano == key)
            arguments[arg.name] = _as_number(value) if arg.kind in (cat.NUMBER, cat.INT) else value
    return entry["name"], weight, flags, arguments


def canonical_actions(text: str) -> list[str]:
    names = [a.strip() for a in text.split(",") if a.strip()]
    return sorted(names, key=cat.CANONICAL_ACTION_ORDER.index)


@pytest.mark.parametrize("config, queues", DOCUMENTED, ids=IDS)
def test_documented_config_imports_to_an_equivalent_policy(config, queues):
    result = imported(config, queues)
    assert result.exit_code == 0, [d.message for d in result.errors]
    compiled = compile_text(result.text, "imported.policy")
    assert compiled.ok, [d.message for d in compiled.errors]
    plan = compiled.plan
    raw = raw_config(config)

    assert list(plan.actions) == canonical_actions(raw["actions"])
    assert [[p.name for p in t.plugins] for t in plan.tiers] == [[p["name"] for p in t["plugins"]] for t in raw["tiers"]]
    for tier, raw_tier in zip(plan.tiers, raw["tiers"]):
        for plugin, entry in zip(tier.plugins, raw_tier["plugins"]):
            name, weight, flags, arguments = expected_plugin(entry)
            if weight is not None:
                assert plugin.weight == weight, name
            for flag, value in flags.items():
                assert plugin.flags[flag] is value, (name, flag)
            for arg, value in arguments.items():
                assert plugin.arguments[arg] == value, (name, arg)
    for configuration in raw.get("configurations", []):
        spec = cat.ACTIONS[configuration["name"]]
        for key, value in configuration["arguments"].items():
            arg = next(a for a in spec.arguments if a.volcano == key)
            got = plan.action_arguments[configuration["name"]][arg.name]
            assert got == (_as_number(value) if arg.kind in (cat.NUMBER, cat.INT, cat.PERCENT) else value)


@pytest.mark.parametrize("config, queues", DOCUMENTED, ids=IDS)
def test_imported_policy_is_in_fmt_layout(config, queues):
    formatter = pytest.importorskip("policydsl.formatter")
    text = imported(config, queues).text
    formatted = formatter.format_text(text, "imported.policy")
    assert formatted.text == text


# --- round trip: volcano -> policy -> volcano ---------------------------------------------

def normalized_arguments(args: dict | None) -> dict:
    """Numbers compare as numbers ("2" == 2), `binpack.resources` as its list of names, and a
    listed resource without a weight weighs 1 (see compiler/volcano/model.py)."""
    out: dict = {}
    for key, value in (args or {}).items():
        if key == "binpack.resources":
            names = tuple(n.strip() for n in value.split(",") if n.strip())
            out[key] = names
            for name in names:
                out.setdefault(f"{key}.{name}", 1.0)
        elif isinstance(value, bool):
            out[key] = value
        else:
            try:
                out[key] = float(value)
            except (TypeError, ValueError):
                out[key] = value
    return out


def split_plugin(entry: dict) -> tuple[str, dict, dict]:
    flags = {k: v for k, v in entry.items() if k not in ("name", "arguments")}
    return entry["name"], flags, normalized_arguments(entry.get("arguments"))


@pytest.mark.parametrize("config, queues", DOCUMENTED, ids=IDS)
def test_round_trip_keeps_actions_tiers_flags_and_arguments(config, queues):
    policy = imported(config, queues).text
    exported = export_volcano_text(policy, "imported.policy")
    assert exported.exit_code == 0 and not [d for d in exported.diagnostics if d.code == "PD610"]
    again = yaml.safe_load(exported.text)
    raw = raw_config(config)

    assert canonical_actions(again["actions"]) == canonical_actions(raw["actions"])
    assert [a.strip() for a in again["actions"].split(",")] == canonical_actions(raw["actions"])
    assert [[split_plugin(p) for p in t["plugins"]] for t in again["tiers"]] == \
           [[split_plugin(p) for p in t["plugins"]] for t in raw["tiers"]]
    assert {c["name"]: normalized_arguments(c["arguments"]) for c in again.get("configurations", [])} == \
           {c["name"]: normalized_arguments(c["arguments"]) for c in raw.get("configurations", [])}
    # The same, in the importer's normal form.
    first = ConfigReader().read(YamlText(fixture(config), (FIXTURES / config).read_text()))
    second = ConfigReader().read(YamlText("exported.conf", exported.text))
    assert first == second


def test_export_quotes_actions_like_volcano_does():
    text = export_volcano_text(imported("default.conf").text).text
    assert 'actions: "enqueue, allocate, backfill"\n' in text


def _base_units(resources: dict | None) -> dict | None:
    return {k: to_base_units(k, str(v)) for k, v in resources.items()} if resources else None


def _queue_meaning(obj: dict) -> dict:
    spec = obj.get("spec", {})
    state = spec.get("state") or obj.get("status", {}).get("state") or "Open"
    return {
        "parent": spec.get("parent") or "root",
        "weight": spec.get("weight"),
        "priority": spec.get("priority"),
        "reclaimable": spec.get("reclaimable"),
        "capability": _base_units(spec.get("capability")),
        "deserved": _base_units(spec.get("deserved")),
        "guarantee": _base_units(spec.get("guarantee", {}).get("resource")),
        "closed": state in ("Closed", "Closing"),
    }


@pytest.mark.parametrize("config, queues", [d for d in DOCUMENTED if d[1]], ids=[d[1] for d in DOCUMENTED if d[1]])
def test_queue_round_trip_keeps_every_setting(config, queues):
    policy = imported(config, queues).text
    exported = export_volcano_text(policy, "imported.policy", queues=True)
    docs = list(yaml.safe_load_all(exported.text))
    assert all(d["apiVersion"] == "scheduling.volcano.sh/v1beta1" and d["kind"] == "Queue" for d in docs[1:])
    again = {d["metadata"]["name"]: _queue_meaning(d) for d in docs[1:]}
    original = {q["metadata"]["name"]: _queue_meaning(q) for q in raw_queues(queues)}
    assert again == original


def test_hierarchical_queues_nest_by_parent_whatever_the_file_order():
    plan = compile_text(imported("capacity-hierarchy.yaml", "capacity-queues.yaml").text).plan
    assert plan.queue("subchild-queue-a1").parent == "child-queue-a"
    assert plan.queue("subchild-queue-a2").parent == "child-queue-a"
    assert plan.queue("child-queue-a").parent == "root"
    assert plan.queue("child-queue-b").parent == "root"
    assert plan.queue("child-queue-a").guarantee == {"cpu": 16_000, "memory": 32 * 2**30}
    assert plan.queue("subchild-queue-a2").reclaimable is False
    assert plan.plugin("capacity").flags["hierarchy"] is True


def test_queues_keep_quantities_as_written():
    text = imported("proportion.conf", "proportion-queues.yaml").text
    assert "capability = { cpu: 2500m, memory: 8096Mi }" in text
    assert '"nvidia.com/gpu": 8' in text
    assert "state = closed" in text


def test_declared_root_queue_holds_the_top_level_queues():
    queues = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team}
spec: {weight: 2}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: root}
spec: {capability: {cpu: 100}}
"""
    result = import_volcano_text((FIXTURES / "capacity-hierarchy.yaml").read_text(), "c.yaml", queues, "q.yaml")
    plan = compile_text(result.text).plan
    assert plan.queue("root").capability == {"cpu": 100_000}
    assert plan.queue("team").parent == "root"
    assert result.text.index("queue root {") < result.text.index("queue team {")


# --- what cannot be expressed: located diagnostics ------------------------------------------

def test_unknown_action_is_a_located_error():
    result = imported("unknown-action.conf")
    unknown = [d for d in result.diagnostics if d.code == "PD603"]
    assert sorted(d.span.column for d in unknown) == [20, 29]   # `alocate`, `reserve`
    assert unknown[0].hint == "did you mean `allocate`?"
    # Without them the policy has no `allocate`: policydsl runs that, as Volcano does, and warns.
    assert codes_at(result) == {("PD603", 1), ("PD613", 1)}
    assert result.exit_code == 1
    assert "actions [enqueue, backfill]" in result.text
    assert "not imported: action `alocate`, `reserve`" in result.text


def test_configs_policydsl_refuses_are_errors_on_the_config():
    # Volcano runs preempt even when no plugin may pick victims; policydsl's lint refuses it.
    result = import_volcano_text("# no victim pickers\nactions: \"enqueue, allocate, preempt\"\ntiers:\n"
                                 "- plugins:\n  - name: gang\n    enablePreemptable: false\n  - name: predicates\n",
                                 "p.conf")
    [diag] = result.diagnostics
    assert (diag.code, diag.span.line, diag.span.column) == ("PD612", 2, 1)
    assert "PD304" in diag.message and result.exit_code == 1


def test_malformed_yaml_is_a_located_error_and_no_policy():
    result = imported("malformed.conf")
    [diag] = result.diagnostics
    assert (diag.code, diag.span.line, diag.span.column) == ("PD602", 5, 4)
    assert result.text is None and result.exit_code == 1


def test_unreadable_file_exits_2(tmp_path):
    result = import_volcano(str(tmp_path / "missing.conf"))
    assert result.exit_code == 2
    assert [d.code for d in result.diagnostics] == ["PD601"]


def test_unsupported_plugins_flags_and_arguments_are_each_reported():
    result = imported("unsupported.conf")
    assert codes_at(result) == {
        ("PD609", 3),    # metrics section
        ("PD606", 10),   # enableHierarchy on gang: no such extension point
        ("PD604", 11),   # magic: no Volcano plugin (a custom build's)
        ("PD606", 21),   # enableOverused: Volcano spells it enabledOverused
        ("PD607", 24),   # binpack.weight: "ten"
        ("PD606", 26),   # weight of a resource binpack.resources does not list
        ("PD604", 27),   # wizardry: likewise
    }
    by_line = {d.span.line: d for d in result.diagnostics}
    assert by_line[21].hint == "did you mean `enabledOverused`?"
    assert 19 not in by_line    # predicate.GPUSharingEnable (old Volcano): imported as deviceshare's gpu_sharing
    assert result.exit_code == 1
    plan = compile_text(result.text).plan
    assert [p.name for p in plan.tiers[0].plugins] == ["priority", "gang", "conformance"]
    assert plan.plugin("deviceshare").arguments["gpu_sharing"] is True
    assert plan.plugin("binpack").arguments["resources"] == {"nvidia.com/gpu": 1}
    assert plan.plugin("gang").flags["preemptable"] is False
    assert "# not imported: plugin `magic`" in result.text and "# not imported: plugin `wizardry`" in result.text


def test_bad_queues_are_reported_at_their_fields():
    result = imported("default.conf", "bad-queues.yaml")
    assert codes_at(result) == {("PD608", 7), ("PD607", 9), ("PD609", 12), ("PD607", 21), ("PD609", 22)}
    missing = next(d for d in result.diagnostics if d.code == "PD608")
    assert missing.span.path.endswith("bad-queues.yaml") and missing.hint == "did you mean `department`?"
    assert result.exit_code == 1
    plan = compile_text(result.text).plan
    assert plan.queue("team-a").parent == "root"    # placed at the top, with a comment saying why
    assert "parent `departmnt` was not found" in result.text


def test_queue_cycles_and_duplicates_are_errors():
    queues = "\n---\n".join(
        f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {{parent: {parent}}}"
        for name, parent in (("a", "b"), ("b", "a"), ("c", "root"), ("c", "root")))
    result = import_volcano_text((FIXTURES / "drf-hierarchy.conf").read_text(), "c.conf", queues, "q.yaml")
    messages = [d.message for d in result.diagnostics if d.code == "PD608"]
    assert any("its own ancestor" in m for m in messages)
    assert any("defined twice" in m for m in messages)
    assert compile_text(result.text).ok


def test_configmap_positions_point_into_the_configmap_file():
    text = (FIXTURES / "deviceshare-gpu-sharing.yaml").read_text().replace("- name: predicates", "- name: magic")
    result = import_volcano_text(text, "cm.yaml")
    [diag] = result.diagnostics
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "name: magic" in l)
    assert (diag.code, diag.span.line, diag.span.column) == ("PD604", line, text.splitlines()[line - 1].index("magic") + 1)


def test_configmap_keys_besides_the_config_are_reported():
    text = (FIXTURES / "deviceshare-gpu-sharing.yaml").read_text() + "  notes.txt: hello\n"
    result = import_volcano_text(text, "cm.yaml")
    assert codes_at(result) == {("PD609", len(text.splitlines()))}
    assert result.exit_code == 0


def test_configmap_without_the_config_key_is_an_error():
    text = "kind: ConfigMap\napiVersion: v1\nmetadata: {name: cm}\ndata:\n  a.txt: x\n  b.txt: y\n"
    result = import_volcano_text(text, "cm.yaml")
    [diag] = result.diagnostics
    assert diag.code == "PD602" and diag.span.line == 4 and "a.txt, b.txt" in diag.hint
    assert result.text is None


def test_actions_list_form_and_unknown_configuration_argument():
    # The list form of `actions` used by some Volcano configs, with per-action arguments.
    result = import_volcano_text(
        "actions:\n- name: enqueue\n  arguments:\n    enqueue-action-idleres-mul: 1.2\n    overcommit-factor: 1.3\n"
        "- name: allocate\n- backfill\ntiers:\n- plugins:\n  - name: gang\n", "ci.conf")
    assert codes_at(result) == {("PD605", 4)}
    plan = compile_text(result.text).plan
    assert plan.actions == ("enqueue", "allocate", "backfill")
    assert plan.action_arguments["enqueue"]["overcommit_factor"] == 1.3


def test_unknown_action_in_the_list_form_is_a_located_error():
    result = import_volcano_text("actions:\n- name: elect\n  arguments: {x: 1}\n- allocate\ntiers: []\n", "ci.conf")
    assert codes_at(result) == {("PD603", 2)} and result.exit_code == 1
    assert compile_text(result.text).plan.actions == ("allocate",)


@pytest.mark.parametrize("entry, expected", [
    ("binpack.weight: \"10\"", 10),          # numbers written as strings are numbers
    ("binpack.weight: 2.5", 2.5),
    ("binpack.weight: 0", 0),
])
def test_argument_values_normalize(entry, expected):
    result = import_volcano_text(f"actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n"
                                 f"      {entry}\n", "b.conf")
    assert result.exit_code == 0
    assert compile_text(result.text).plan.plugin("binpack").weight == expected


@pytest.mark.parametrize("entry, code, message", [
    ("enablePreemptable: \"false\"", "PD607", "expected true or false"),
    ("arguments: {deviceshare.SchedulePolicy: pack}", "PD607", "not one of binpack, spread"),
    ("arguments: {binpack.cpu: -1}", "PD607", "below the minimum 0"),
    ("arguments: [a]", "PD607", "must be a mapping"),
])
def test_bad_values_are_errors(entry, code, message):
    name = "binpack" if "binpack" in entry else "deviceshare" if "device" in entry else "gang"
    result = import_volcano_text(f"actions: allocate\ntiers:\n- plugins:\n  - name: {name}\n    {entry}\n", "x.conf")
    [diag] = result.diagnostics
    assert (diag.code, diag.span.line) == (code, 5) and message in diag.message
    assert result.exit_code == 1


def test_duplicate_yaml_keys_are_warned():
    result = import_volcano_text("actions: allocate\nactions: \"enqueue, allocate\"\ntiers: []\n", "d.conf")
    assert codes_at(result) == {("PD602", 2)}
    assert result.diagnostics[0].severity == Severity.WARNING
    assert compile_text(result.text).plan.actions == ("enqueue", "allocate")


def test_out_of_order_actions_are_reordered_with_a_warning():
    result = imported("capacity-hierarchy.yaml")
    [diag] = result.diagnostics
    assert diag.code == "PD611" and diag.span.line == 9 and diag.severity == Severity.WARNING
    assert "actions [enqueue, allocate, reclaim, backfill]" in result.text


# --- export: what Volcano cannot express -----------------------------------------------------

EXPORT_POLICY = """policy "x" version 1
actions [enqueue, allocate, backfill]
tier "ordering" {
  plugin gang
}
tier {
  plugin proportion
  plugin predicates
  plugin nodeorder weight 2 {
    leastrequested = 3
  }
  plugin binpack weight 5
}
queue a {
  weight = 2
  borrow = false
}
queue b {
  borrow_limit = { cpu: 4 }
  state = closed
}
device "nvidia.com/gpu" {
  sharing = memory
  card_memory = 80Gi
  slice = 10Gi
}
"""


def test_export_warns_for_each_setting_volcano_cannot_express():
    result = export_volcano_text(EXPORT_POLICY, "x.policy", queues=True)
    assert result.exit_code == 0
    warned = {(d.code, d.span.line) for d in result.diagnostics if d.code == "PD610"}
    assert warned == {("PD610", 9), ("PD610", 16), ("PD610", 19), ("PD610", 20), ("PD610", 22)}
    docs = list(yaml.safe_load_all(result.text))
    config = docs[0]
    nodeorder, binpack = config["tiers"][1]["plugins"][2:]
    assert nodeorder == {"name": "nodeorder", "arguments": {"leastrequested.weight": 3}}
    assert binpack == {"name": "binpack", "arguments": {"binpack.weight": 5}}
    queues = {d["metadata"]["name"]: d for d in docs[1:]}
    assert queues["a"]["spec"] == {"weight": 2}
    assert queues["b"]["status"] == {"state": "Closed"}
    assert '# Tiers, labelled in the policy: 1 "ordering".' in result.text


def test_export_configmap_round_trips_through_import():
    policy = imported("binpack-gpu.conf").text
    exported = export_volcano_text(policy, "b.policy", configmap=True)
    configmap = yaml.safe_load(exported.text)
    assert configmap["kind"] == "ConfigMap" and configmap["metadata"]["namespace"] == "volcano-system"
    again = import_volcano_text(exported.text, "cm.yaml")
    assert again.exit_code == 0
    assert again.config == imported("binpack-gpu.conf").config


def test_export_of_a_policy_with_errors_prints_nothing():
    result = export_volcano_text('policy "x" version 1\nactions [enqueue, alocate]\n', "x.policy")
    assert result.text is None and result.exit_code == 1


# --- the CLI ----------------------------------------------------------------------------------

def test_cli_import_prints_the_policy(capsys):
    assert main(["import-volcano", fixture("default.conf")]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("# Imported from default.conf") and err == ""
    assert compile_text(out).ok


def test_cli_import_errors_exit_1_with_locations(capsys):
    assert main(["import-volcano", fixture("unknown-action.conf")]) == 1
    _, err = capsys.readouterr()
    assert "unknown-action.conf:1:20: error[PD603] unknown action `alocate`" in err


def test_cli_import_unreadable_exits_2(capsys, tmp_path):
    assert main(["import-volcano", fixture("default.conf"), "--queues", str(tmp_path / "nope.yaml")]) == 2
    _, err = capsys.readouterr()
    assert "argument --queues: `" in err and "nope.yaml`: no such file" in err


def test_cli_export_with_queues(capsys, tmp_path):
    path = tmp_path / "x.policy"
    path.write_text(EXPORT_POLICY)
    assert main(["export-volcano", str(path), "--queues"]) == 0
    out, err = capsys.readouterr()
    assert len(list(yaml.safe_load_all(out))) == 3
    assert "warning[PD610] device rules for `nvidia.com/gpu` have no Volcano equivalent" in err


# --- policy text ------------------------------------------------------------------------------

@pytest.mark.parametrize("value, text", [
    ({"nvidia.com/gpu": pt.quantity("8"), "cpu": pt.quantity("500m")}, '{ "nvidia.com/gpu": 8, cpu: 500m }'),
    (pt.quantity("1e3"), '"1e3"'),
    (pt.quantity("1.5"), "1.5"),
    (pt.symbol("binpack"), "binpack"),
    (pt.symbol("true"), '"true"'),
    (2.0, "2.0"),
    (1e-05, "0.00001"),
    ('say "hi"\n', '"say \\"hi\\"\\n"'),
    (False, "false"),
])
def test_policy_values_render_to_text_the_parser_reads_back(value, text):
    assert pt.render_value(value) == text


# --- any YAML: diagnostics, never a traceback; any policy printed parses and lowers --------

_WORDS = ["actions", "tiers", "plugins", "name", "arguments", "configurations", "enablePreemptable",
          "enableHierarchy", "enableOverused", "binpack.weight", "binpack.resources", "binpack.resources.a.b/c",
          "overcommit-factor", "deviceshare.SchedulePolicy", "leastrequested.weight", "kind", "data",
          "volcano-scheduler.conf", *cat.PLUGINS, *cat.ACTIONS, "sla"]
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 70000), st.floats(allow_nan=True, allow_infinity=True),
                     st.sampled_from(_WORDS), st.sampled_from(["enqueue, allocate", "a.b/c, cpu", "1.5", "ten", ""]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.sampled_from(_WORDS), inner, max_size=4)),
                       max_leaves=12)
_PLUGINS = st.lists(st.fixed_dictionaries({"name": st.sampled_from(_WORDS)},
                                          optional={"arguments": _VALUES, "enablePreemptable": _SCALARS,
                                                    "enabledOverused": _SCALARS}), max_size=4)
_CONFIGS = st.one_of(_VALUES, st.fixed_dictionaries(
    {"actions": st.one_of(_SCALARS, st.lists(st.sampled_from(list(cat.ACTIONS)), max_size=5).map(", ".join)),
     "tiers": st.lists(st.fixed_dictionaries({"plugins": _PLUGINS}), max_size=3)},
    optional={"configurations": _VALUES}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_CONFIGS)
def test_any_yaml_gives_diagnostics_and_a_policy_that_parses(data):
    result = import_volcano_text(yaml.safe_dump(data), "any.conf")
    assert result.exit_code in (0, 1)
    if result.text is not None:
        compiled = compile_text(result.text, "any.policy")
        assert [d for d in compiled.errors if d.code[:3] in ("PD0", "PD1")] == []
        assert result.exit_code == (1 if compiled.errors or result.errors else 0)


@pytest.mark.parametrize("config, check", [
    ('actions: "enqueue, backfill"\ntiers:\n- plugins:\n  - name: gang\n', "PD301"),
    ('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: proportion\n  - name: capacity\n', "PD401"),
])
def test_configs_volcano_runs_import_with_a_warning_and_compile(config, check):
    from compiler.pipeline import compile_text
    result = import_volcano_text(config)
    assert result.exit_code == 0
    assert [d.code for d in result.diagnostics] and {d.code for d in result.diagnostics} == {"PD613"}
    assert any(check in d.message for d in result.diagnostics)
    assert compile_text(result.text, "imported.policy").ok      # the scheduler runs it


DROPS_DECISIONS = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: predicates
    arguments:
      predicate.ProportionalEnable: true
      predicate.resources: nvidia.com/gpu
  - name: capacity
    arguments:
      ancestorReclaimLevel: 2
  - name: overcommit
    arguments:
      max-queue-overcommit-factor: 2
      overcommit-facter: 3
"""


def test_arguments_that_change_decisions_fail_the_import_located(capsys, tmp_path):
    path = tmp_path / "drops.conf"
    path.write_text(DROPS_DECISIONS)
    assert main(["import-volcano", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    for line, col, key in [(8, 7, "predicate.ProportionalEnable"), (9, 7, "predicate.resources"),
                           (12, 7, "ancestorReclaimLevel"), (15, 7, "max-queue-overcommit-factor")]:
        assert f"drops.conf:{line}:{col}: error[PD614]" in err and f"`{key}` changes decisions" in err
    # a typo Volcano ignores too stays a warning
    assert "drops.conf:16:7: warning[PD605]" in err
    # the hint names no key of a different meaning
    assert "did you mean `overcommit-factor`" not in err.split("drops.conf:16:7")[0]


def test_allow_dropped_writes_each_dropped_argument_as_a_comment_and_lints_clean(capsys, tmp_path):
    path = tmp_path / "drops.conf"
    path.write_text(DROPS_DECISIONS)
    assert main(["import-volcano", str(path), "--allow-dropped"]) == 0
    out, err = capsys.readouterr()
    assert "# not imported: ancestorReclaimLevel: 2 (" in out
    assert "# not imported: max-queue-overcommit-factor: 2 (" in out
    assert "# not imported: predicate.ProportionalEnable: true (" in out
    assert "# not imported: predicate.resources: nvidia.com/gpu (" in out
    assert "warning[PD614]" in err and "error" not in err
    policy = tmp_path / "drops.policy"
    policy.write_text(out)
    assert main(["lint", str(policy)]) == 0
    assert compile_text(out).ok


def test_decision_arguments_are_one_list_of_real_plugin_arguments():
    from compiler.volcano.config_reader import DECISION_ARGUMENTS
    for plugin, key in DECISION_ARGUMENTS:
        spec = cat.PLUGINS[plugin]
        assert all(a.volcano != key for a in spec.arguments)


OLD_GPU_FLAGS = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
    arguments:
      predicate.GPUNumberEnable: true
      predicate.GPUSharingEnable: false
  - name: nodeorder
"""


def test_old_gpu_flags_of_predicates_import_as_deviceshare_arguments():
    result = import_volcano_text(OLD_GPU_FLAGS)
    assert result.exit_code == 0 and not result.diagnostics, result.diagnostics
    plan = compile_text(result.text).plan
    assert [p.name for p in plan.tiers[1].plugins] == ["predicates", "deviceshare", "nodeorder"]
    assert plan.plugin("deviceshare").arguments["gpu_number"] is True
    assert plan.plugin("deviceshare").arguments["gpu_sharing"] is False
    assert "`predicate.GPUNumberEnable` of Volcano <= 1.8" in result.text


def test_old_gpu_flags_join_a_deviceshare_the_config_has_which_keeps_its_own_arguments():
    text = OLD_GPU_FLAGS.replace("predicate.GPUSharingEnable: false", "predicate.GPUSharingEnable: true") + (
        "  - name: deviceshare\n    arguments:\n      deviceshare.GPUNumberEnable: false\n")
    result = import_volcano_text(text)
    assert result.exit_code == 0, result.diagnostics
    plan = compile_text(result.text).plan
    assert [p.name for p in plan.tiers[1].plugins] == ["predicates", "nodeorder", "deviceshare"]
    assert plan.plugin("deviceshare").arguments["gpu_number"] is False   # its own argument wins
    assert plan.plugin("deviceshare").arguments["gpu_sharing"] is True


def test_hints_name_only_keys_of_the_same_meaning():
    text = OLD_GPU_FLAGS.replace("predicate.GPUSharingEnable: false", "predicate.VGPUEnable: true")
    result = import_volcano_text(text)
    (diag,) = [d for d in result.diagnostics if d.code == "PD605"]
    assert "deviceshare" not in (diag.hint or "")   # no plugin takes `VGPUEnable` in predicates' meaning


# Volcano's example/hierarchical-jobs/queues.yaml (github.com/volcano-sh/volcano), as it is there.
VOLCANO_HIERARCHICAL_QUEUES = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: root-eng-prod
  annotations:
    "volcano.sh/hierarchy": "root/eng/prod"
    "volcano.sh/hierarchy-weights": "1/2/8"
spec:
  weight: 1
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: root-eng-dev
  annotations:
    "volcano.sh/hierarchy": "root/eng/dev"
    "volcano.sh/hierarchy-weights": "1/2/2"
spec:
  weight: 1
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: root-sci-prod
  annotations:
    "volcano.sh/hierarchy": "root/sci/prod"
    "volcano.sh/hierarchy-weights": "1/8/8"
spec:
  weight: 1
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: root-sci-dev
  annotations:
    "volcano.sh/hierarchy": "root/sci/dev"
    "volcano.sh/hierarchy-weights": "1/8/2"
spec:
  weight: 1
"""


def test_queues_nest_by_hierarchy_annotations_weighted_by_hierarchy_weights():
    result = import_volcano_text(Path(fixture("default.conf")).read_text(), queues_text=VOLCANO_HIERARCHICAL_QUEUES)
    assert result.exit_code == 0, result.diagnostics
    plan = compile_text(result.text).plan
    by_name = {q.name: q for q in plan.queues}
    assert {(name, by_name[name].parent, by_name[name].weight) for name in
            ["eng", "sci", "root-eng-prod", "root-eng-dev", "root-sci-prod", "root-sci-dev"]} == {
        ("eng", "root", 2), ("sci", "root", 8), ("root-eng-prod", "eng", 8), ("root-eng-dev", "eng", 2),
        ("root-sci-prod", "sci", 8), ("root-sci-dev", "sci", 2)}


def test_bad_hierarchy_weights_are_located_errors():
    text = VOLCANO_HIERARCHICAL_QUEUES.replace('"1/2/8"', '"1/x/8"')
    result = import_volcano_text(Path(fixture("default.conf")).read_text(), queues_text=text)
    (diag,) = [d for d in result.diagnostics if d.code == "PD607"]
    assert diag.span.line == 7 and "hierarchy-weights" in diag.message


# --- deviceshare arguments: each does what it says or is refused, located ------------------

def test_vgpu_guide_config_imports_with_a_warning_for_the_key_volcano_never_read():
    """The vGPU user guide's config: `deviceshare.VGPUEnable: true` imports as `vgpu = true`;
    Volcano ignores `VGPUPodGroupDeviceSpread` (a key it never read: the spread is the pod
    annotation volcano.sh/vgpu-podgroup-policy), a warning whose hint says so."""
    result = imported("deviceshare-vgpu.yaml")
    text = (FIXTURES / "deviceshare-vgpu.yaml").read_text().splitlines()
    line = next(i for i, l in enumerate(text, 1) if "VGPUPodGroupDeviceSpread" in l)
    assert result.exit_code == 0
    assert codes_at(result) == {("PD605", line)}
    assert "volcano.sh/vgpu-podgroup-policy" in result.diagnostics[0].hint
    plan = compile_text(result.text).plan
    assert plan.plugin("deviceshare").arguments["vgpu"] is True
    assert plan.plugin("deviceshare").arguments["schedule_policy"] == "spread"


@pytest.mark.parametrize("key, value, refused", [
    ("deviceshare.VGPUEnable", "false", False),
    ("deviceshare.NodeLockEnable", "true", False),      # evaluated: runtime.kube.nodelock
    ("deviceshare.NodeLockEnable", "false", False),
    ("deviceshare.AscendHAMiVNPUEnable", "true", True),
    ("deviceshare.AscendHAMiVNPUEnable", "false", False),
    ("deviceshare.AscendMindClusterVNPUEnable", "true", True),
    ("deviceshare.KnownGeometriesCMName", "volcano-vgpu-device-config", True),
    ("deviceshare.KnownGeometriesCMNamespace", "kube-system", True),
    ("deviceshare.GPUExclusiveRules", "[{app: training}]", False),   # evaluated: devices_vgpu.is_exclusive
])
def test_deviceshare_arguments_not_evaluated_are_refused_at_their_key(key, value, refused):
    text = ("actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: predicates\n  - name: deviceshare\n"
            f"    arguments:\n      deviceshare.SchedulePolicy: spread\n      {key}: {value}\n")
    result = import_volcano_text(text, "ds.conf")
    if refused:
        assert result.exit_code == 1
        assert codes_at(result) == {("PD614", 8)}
    else:
        assert result.exit_code == 0 and not result.diagnostics
        assert compile_text(result.text).ok


def test_the_policy_refuses_deviceshare_switches_not_evaluated_and_the_retired_spread_argument():
    head = 'policy "p" version 1\nactions [enqueue, allocate]\ntier {\n  plugin predicates\n  plugin deviceshare {\n'
    for setting, code in [("vgpu_pod_group_spread = true", "PD103")]:
        compiled = compile_text(head + f"    {setting}\n  }}\n}}\n", "p.policy")
        [error] = compiled.errors
        assert (error.code, error.span.line, error.span.column) == (code, 6, 5), setting
    spread = compile_text(head + "    vgpu_pod_group_spread = true\n  }\n}\n", "p.policy").errors[0]
    assert "volcano.sh/vgpu-podgroup-policy" in spread.hint
    assert compile_text(head + "    vgpu = true\n    node_lock = false\n  }\n}\n", "p.policy").ok
    assert compile_text(head + "    vgpu = true\n    node_lock = true\n  }\n}\n", "p.policy").ok
