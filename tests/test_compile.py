"""The compiler front half: lowering AST to IR, schema errors mapped to source, defaults, the
Plan and its JSON, and `policydsl compile`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler import catalog as cat
from compiler.lower import lower
from compiler.pipeline import compile_file, compile_text
from compiler.plan import Plan, plan_from_json
from policydsl.cli import main
from policydsl.diagnostics import Severity
from policydsl.formatter import format_text
from policydsl.loader import load_text

ROOT = Path(__file__).resolve().parent.parent
HEAD = 'policy "t" version 1\nactions [enqueue, allocate]\n'
GIB = 2**30


def plan_of(body: str, head: str = HEAD) -> Plan:
    """The plan of a policy, without lint (these tests are about lowering and the schema)."""
    result = compile_text(head + body, "t.policy", run_lint=False)
    assert result.plan is not None, [(str(d.span), d.message) for d in result.diagnostics]
    return result.plan


def errors_of(body: str, head: str = HEAD) -> list:
    result = compile_text(head + body, "t.policy", run_lint=False)
    assert result.plan is None
    return [d for d in result.diagnostics if d.severity >= Severity.ERROR]


# --- lowering -----------------------------------------------------------------------------------

def test_constants_resolve_through_other_constants():
    plan = plan_of("const BASE = 3\nconst W = BASE\nconst MEM = 8Gi\n"
                   "queue a { weight = W capability = { cpu: BASE, memory: MEM } }\n")
    queue = plan.queue("a")
    assert queue.weight == 3
    assert queue.capability == {"cpu": 3000, "memory": 8 * GIB}


def test_lowering_records_used_constants_and_their_spans():
    loaded = load_text(HEAD + "const USED = 2\nconst UNUSED = 3\nqueue a { weight = USED }\n", "t.policy")
    lowered = lower(loaded)
    assert lowered.used_constants == {"USED"}
    assert set(lowered.constants) == {"USED", "UNUSED"}
    # the IR path of the setting maps back to the value as written (the constant's use)
    assert lowered.spans[("queues", 0, "weight")].line == 5


def test_constants_from_an_included_file(tmp_path):
    (tmp_path / "lib.policy").write_text('policy "lib" version 1\nconst SLICE = 10Gi\n')
    main_path = tmp_path / "main.policy"
    main_path.write_text(HEAD + 'include "lib.policy"\ndevice "nvidia.com/gpu" { slice = SLICE }\n')
    result = compile_file(main_path, run_lint=False)
    assert result.plan is not None
    assert result.plan.device("nvidia.com/gpu").slice == 10 * GIB


@pytest.mark.parametrize("body, field, expected", [
    ("device \"nvidia.com/gpu\" { topology = nvlink }", "topology", "nvlink"),
    ("device \"nvidia.com/gpu\" { topology = \"numa\" }", "topology", "numa"),       # quoted symbol
    ("const T = nvlink\ndevice \"nvidia.com/gpu\" { topology = T }", "topology", "nvlink"),  # via a constant
    ("device \"nvidia.com/gpu\" { sharing = memory }", "sharing", "memory"),
])
def test_symbol_values(body, field, expected):
    assert getattr(plan_of(body + "\n").devices[0], field) == expected


def test_a_constant_wins_over_a_symbol_of_the_same_name():
    plan = plan_of("const closed = open\nqueue a { state = closed }\n")
    assert plan.queue("a").state == "open"


@pytest.mark.parametrize("resource, written, base_units", [
    ("cpu", "500m", 500),
    ("cpu", "2", 2000),
    ("cpu", "1.5", 1500),
    ("cpu", "0.1", 100),
    ("memory", "8Gi", 8 * GIB),
    ("memory", "1G", 10**9),
    ("memory", "1024", 1024),
    ("memory", "1.5Ki", 1536),
    ('"nvidia.com/gpu"', "4", 4),
    ("pods", "110", 110),
])
def test_quantities_in_base_units(resource, written, base_units):
    plan = plan_of(f"queue a {{ capability = {{ {resource}: {written} }} }}\n")
    assert plan.queue("a").capability == {resource.strip('"'): base_units}


def test_device_quantities_use_memory_units():
    device = plan_of('device "nvidia.com/gpu" { card_memory = 80Gi slice = 10240Mi }\n').devices[0]
    assert (device.card_memory, device.slice) == (80 * GIB, 10 * GIB)


def test_nested_queues_get_parent_names_parents_first():
    plan = plan_of("queue eng { queue train { queue big {} } queue serve {} }\nqueue ops {}\n")
    assert [(q.name, q.parent) for q in plan.queues] == [
        ("eng", "root"), ("train", "eng"), ("big", "train"), ("serve", "eng"), ("ops", "root"),
        ("default", "root")]


def test_a_declared_root_queue_has_no_parent():
    plan = plan_of("queue root { queue a {} }\n")
    assert [(q.name, q.parent) for q in plan.queues if q.declared] == [("root", None), ("a", "root")]


def test_implicit_default_queue():
    plan = plan_of("queue a {}\n")
    default = plan.queue("default")
    assert default is not None and not default.declared and default.parent == "root"
    assert plan.queue("a").declared


def test_declared_default_queue_is_not_duplicated():
    plan = plan_of("queue default { weight = 4 }\n")
    assert [q.name for q in plan.queues] == ["default"]
    assert plan.queue("default").declared and plan.queue("default").weight == 4


def test_tiers_plugins_weights_and_flags():
    plan = plan_of('tier { plugin gang { enable_preemptable = false } }\n'
                   'tier "score" { plugin binpack weight 10 { cpu = 2 } plugin nodeorder }\n')
    assert [t.label for t in plan.tiers] == [None, "score"]
    gang = plan.plugin("gang")
    assert gang.flags["preemptable"] is False
    assert gang.enabled("job_order") and not gang.enabled("preemptable")
    assert not gang.enabled("node_order")   # not a point gang implements
    binpack = plan.plugin("binpack")
    assert binpack.weight == 10 and binpack.arguments["cpu"] == 2
    assert plan.plugin("nodeorder").weight == cat.PLUGINS["nodeorder"].default_weight
    assert gang.weight is None
    assert [[p.name for p in tier] for tier in plan.tiers_at("preemptable")] == []
    assert [[p.name for p in tier] for tier in plan.tiers_at("node_order")] == [["binpack", "nodeorder"]]


def test_action_arguments_only_for_listed_actions():
    plan = plan_of("action enqueue { overcommit_factor = 1.5 }\naction preempt { topology_aware = true }\n")
    assert set(plan.action_arguments) == {"enqueue", "allocate"}
    assert plan.action_arguments["enqueue"]["overcommit_factor"] == 1.5


def test_the_last_actions_list_wins():
    plan = plan_of("actions [allocate, backfill]\n")
    assert plan.actions == ("allocate", "backfill")


# --- errors mapped to source ------------------------------------------------------------------

@pytest.mark.parametrize("body, code, line, column, message", [
    ("queue a { weight = -1 }", "PD108", 3, 20, "`weight` is -1, below the minimum 0"),
    ("queue a { weight = 70000 }", "PD108", 3, 20, "above the maximum 65535"),
    ('device "nvidia.com/gpu" { topology = ring }', "PD108", 3, 38, "`topology` cannot be `ring`"),
    ("queue a { state = paused }", "PD108", 3, 19, "`state` cannot be `paused`"),
    ("action enqueue { overcommit_factor = -1 }", "PD108", 3, 38, "below the minimum 0"),
    ("tier { plugin binpack { cpu = -1 } }", "PD108", 3, 31, "`cpu` is -1"),
    ('queue a { weight = "x" }', "PD105", 3, 20, "expected an integer, got a string"),
    ("queue a { reclaimable = 1 }", "PD105", 3, 25, "expected true or false"),
    ("queue a { capability = [1] }", "PD105", 3, 24, "expected a resource map"),
    ("queue a { capability = { cpu: -1 } }", "PD106", 3, 31, "`-1` is negative"),
    ("queue a { capability = { memory: 1.5m } }", None, None, None, None),  # fractional bytes round up
    ("tier { plugin binpak }", "PD102", 3, 15, "unknown plugin `binpak`"),
    ("actions [enqueue, alocate]", "PD101", 3, 19, "unknown action `alocate`"),
    ("action alocate {}", "PD101", 3, 8, "unknown action `alocate`"),
    ("queue a { wieght = 2 }", "PD104", 3, 11, "queue `a` has no setting `wieght`"),
    ('device "nvidia.com/gpu" { slices = 1 }', "PD104", 3, 27, "has no setting `slices`"),
    ("tier { plugin binpack { cpus = 2 } }", "PD103", 3, 25, "plugin `binpack` has no setting `cpus`"),
    ("tier { plugin gang { enable_node_order = false } }", "PD103", 3, 22, "no extension point `node_order`"),
    ("tier { plugin gang weight 2 }", "PD109", 3, 27, "does not score nodes"),
    ("queue a { weight = W }", "PD107", 3, 20, "`W` is not a defined constant"),
    ("const A = B\nconst B = A\nqueue a { weight = A }", "PD107", 4, 11, "refers to itself"),
])
def test_errors_point_at_the_source(body, code, line, column, message):
    result = compile_text(HEAD + body + "\n", "t.policy", run_lint=False)
    errors = [d for d in result.diagnostics if d.severity >= Severity.ERROR]
    if code is None:
        assert errors == [] and result.plan is not None
        return
    assert result.plan is None
    assert [d.code for d in errors] == [code]
    (diag,) = errors
    assert (diag.span.path, diag.span.line, diag.span.column) == ("t.policy", line, column)
    assert message in diag.message


@pytest.mark.parametrize("body, hint", [
    ("tier { plugin binpak }", "did you mean `binpack`?"),
    ("queue a { wieght = 2 }", "did you mean `weight`?"),
    ("const LIMIT = 1\nqueue a { weight = LIMT }", "did you mean `LIMIT`?"),
])
def test_did_you_mean_hints(body, hint):
    (diag,) = errors_of(body + "\n")
    assert diag.hint == hint


def test_missing_actions_is_reported_at_the_header():
    (diag,) = errors_of("queue a {}\n", head='policy "t" version 1\n')
    assert diag.code == "PD110"
    assert (diag.span.line, diag.span.column) == (1, 1)


def test_lowering_and_schema_errors_come_together():
    errors = errors_of("queue a { weight = -1 wieght = 1 }\ntier { plugin binpak }\n")
    assert sorted((d.code, d.span.line) for d in errors) == [("PD102", 4), ("PD104", 3), ("PD108", 3)]


# --- defaults ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(cat.PLUGINS))
def test_plugin_defaults_come_from_the_catalog(name):
    spec = cat.PLUGINS[name]
    plugin = plan_of(f"tier {{ plugin {name} }}\n").plugin(name)
    assert dict(plugin.arguments) == {a.name: a.default for a in spec.arguments}
    assert dict(plugin.flags) == {f.name: f.default for f in cat.FLAGS if f.name in spec.points}
    assert plugin.weight == (spec.default_weight if spec.scores else None)


@pytest.mark.parametrize("name", sorted(cat.ACTIONS))
def test_action_defaults_come_from_the_catalog(name):
    plan = plan_of("", head=f'policy "t" version 1\nactions [{name}]\n')
    assert dict(plan.action_arguments[name]) == {a.name: a.default for a in cat.ACTIONS[name].arguments}


def test_queue_and_device_defaults_come_from_the_catalog():
    plan = plan_of('queue a {}\ndevice "nvidia.com/gpu" {}\n')
    queue, device = plan.queue("a"), plan.devices[0]
    for setting in cat.QUEUE_SETTINGS:
        expected = tuple(setting.default) if isinstance(setting.default, list) else setting.default
        assert getattr(queue, setting.name) == expected, setting.name
    for setting in cat.DEVICE_SETTINGS:
        expected = tuple(setting.default) if isinstance(setting.default, list) else setting.default
        assert getattr(device, setting.name) == expected, setting.name


@pytest.mark.parametrize("where, argument, volcano_default", [
    # Volcano's documented defaults, so the catalog cannot drift from them unnoticed.
    (("plugin", "binpack"), "cpu", 1),
    (("plugin", "binpack"), "memory", 1),
    (("plugin", "overcommit"), "factor", 1.2),
    (("plugin", "nodeorder"), "leastrequested", 1),
    (("plugin", "nodeorder"), "tainttoleration", 3),
    (("plugin", "predicates"), "taint_toleration", True),
    (("action", "preempt"), "min_candidate_nodes_percentage", 10),
])
def test_catalog_defaults_match_volcano(where, argument, volcano_default):
    kind, name = where
    spec = cat.PLUGINS[name] if kind == "plugin" else cat.ACTIONS[name]
    assert next(a for a in spec.arguments if a.name == argument).default == volcano_default


def test_explicit_settings_override_defaults_and_keep_the_rest():
    plugin = plan_of("tier { plugin binpack { memory = 3 } }\n").plugin("binpack")
    assert dict(plugin.arguments) == {"cpu": 1, "memory": 3, "resources": {}}


# --- plan JSON ----------------------------------------------------------------------------------

POLICY = '''policy "json" version 1
const GPU = "nvidia.com/gpu"
actions [enqueue, allocate, backfill]
tier { plugin priority plugin gang }
tier { plugin predicates plugin proportion plugin binpack weight 5 { resources = { "nvidia.com/gpu": 2 } } }
queue team { weight = 2 capability = { cpu: 64, memory: 256Gi } queue sub { guarantee = { cpu: 500m } } }
device "nvidia.com/gpu" { sharing = memory card_memory = 80Gi slice = 10Gi }
'''


def _assert_sorted_keys(pairs):
    keys = [k for k, _ in pairs]
    assert keys == sorted(keys)
    return dict(pairs)


def test_plan_json_has_sorted_keys_at_every_level():
    text = plan_of("", head=POLICY).to_json()
    json.loads(text, object_pairs_hook=_assert_sorted_keys)
    assert text.endswith("\n")


def test_plan_json_is_stable_across_runs():
    assert plan_of("", head=POLICY).to_json() == plan_of("", head=POLICY).to_json()


def test_revision_ignores_layout_and_comments():
    plan = plan_of("", head=POLICY)
    formatted = format_text(POLICY).text
    commented = "# a comment\n" + POLICY.replace("queue team {", "# the team\nqueue team { # trailing\n")
    squeezed = " ".join(POLICY.split())
    for variant in (formatted, commented, squeezed):
        other = plan_of("", head=variant)
        assert other.to_json() == plan.to_json()
        assert other.revision == plan.revision


def test_revision_ignores_how_equal_quantities_are_written():
    a = plan_of("queue a { capability = { cpu: 0.5, memory: 1Gi } }\n")
    b = plan_of("queue a { capability = { cpu: 500m, memory: 1024Mi } }\n")
    assert a.revision == b.revision


@pytest.mark.parametrize("old, new", [
    ("weight = 2", "weight = 3"),
    ("256Gi", "257Gi"),
    ("plugin priority plugin gang", "plugin gang plugin priority"),
    ('policy "json"', 'policy "json2"'),
])
def test_revision_changes_with_meaning(old, new):
    assert plan_of("", head=POLICY).revision != plan_of("", head=POLICY.replace(old, new)).revision


def test_plan_round_trips_through_json():
    plan = plan_of("", head=POLICY)
    again = plan_from_json(plan.to_json())
    assert again == plan
    assert again.revision == plan.revision
    assert again.to_json() == plan.to_json()


def test_plan_json_has_base_units():
    data = json.loads(plan_of("", head=POLICY).to_json())
    team = next(q for q in data["queues"] if q["name"] == "team")
    assert team["capability"] == {"cpu": 64000, "memory": 256 * GIB}
    assert data["devices"][0]["slice"] == 10 * GIB


# --- the compile command ----------------------------------------------------------------------

def test_cli_compile_writes_the_plan(tmp_path, capsys):
    source = tmp_path / "p.policy"
    source.write_text(POLICY)
    out = tmp_path / "plan.json"
    assert main(["compile", str(source), "--output-file", str(out)]) == 0
    assert out.read_text() == compile_file(source).plan.to_json()
    assert capsys.readouterr().out == ""


def test_cli_compile_prints_to_stdout(tmp_path, capsys):
    source = tmp_path / "p.policy"
    source.write_text(POLICY)
    assert main(["compile", str(source)]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "json"


def test_cli_compile_folder_means_main_policy(tmp_path, capsys):
    (tmp_path / "main.policy").write_text(POLICY)
    assert main(["compile", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "json"


def test_cli_compile_errors_are_located_and_nothing_is_written(tmp_path, capsys):
    source = tmp_path / "bad.policy"
    source.write_text(HEAD + "queue a { weight = -1 }\n")
    out = tmp_path / "plan.json"
    assert main(["compile", str(source), "--output-file", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{source}:3:20: error[PD108]" in err
    assert not out.exists()


def test_cli_compile_missing_file_is_an_io_error(tmp_path, capsys):
    assert main(["compile", str(tmp_path / "none.policy")]) == 2
    assert "error[PD001]" in capsys.readouterr().err


def test_cli_compile_unwritable_output_is_an_io_error(tmp_path, capsys):
    source = tmp_path / "p.policy"
    source.write_text(POLICY)
    assert main(["compile", str(source), "--output-file", str(tmp_path / "no" / "such" / "plan.json")]) == 2
    assert f"argument --output-file: `{tmp_path}/no/such/plan.json`: no folder" in capsys.readouterr().err
    # A folder that exists but takes no files: found only when writing.
    assert main(["compile", str(source), "--output-file", "/proc/plan.json"]) == 2
    assert "cannot write /proc/plan.json" in capsys.readouterr().err


# --- examples ---------------------------------------------------------------------------------

def _example_entry_points() -> list[Path]:
    """Every example, except files only meant to be included by another."""
    files = sorted((ROOT / "examples").rglob("*.policy"))
    included = set()
    for path in files:
        loaded = load_text(path.read_text(encoding="utf-8"), str(path))
        for policy in loaded.files[:-1]:
            included.add(Path(policy.path).resolve())
    return [p for p in files if p.resolve() not in included]


def test_examples_exist_for_each_feature():
    names = {p.name for p in _example_entry_points()}
    assert {"constants.policy", "main.policy", "queue-hierarchy.policy", "device-sharing.policy",
            "tiers-and-weights.policy"} <= names


@pytest.mark.parametrize("path", _example_entry_points(), ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_compile_clean(path):
    result = compile_file(path)
    assert result.plan is not None
    assert [(str(d.span), d.code, d.message) for d in result.diagnostics] == []


def test_examples_readme_lists_every_example():
    readme = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "examples").rglob("*.policy")):
        assert f"({path.relative_to(ROOT / 'examples')})" in readme, path


def test_policies_compiled_at_once_in_several_threads_compile_as_alone():
    # A hot reload compiles beside requests that compile (lint, explain of a draft): the schema
    # validators keep the document they validated, and a shared one handed a plugin another
    # thread's document.
    import threading  # only this test runs threads

    texts = [path.read_text() for path in sorted((Path(__file__).parent.parent / "policies").glob("*.policy"))]
    alone = [json.dumps(compile_text(text, "p.policy").plan.to_json(), sort_keys=True) for text in texts]
    wrong: list[str] = []

    def compile_each(start: int) -> None:
        for k in range(40):
            i = (start + k) % len(texts)
            try:
                result = compile_text(texts[i], "p.policy")
                got = json.dumps(result.plan.to_json(), sort_keys=True) if result.ok else str(result.diagnostics)
            except Exception as error:  # noqa: BLE001 - a thread's error is the finding
                got = repr(error)
            if got != alone[i]:
                wrong.append(f"policy {i}: {got[:200]}")

    threads = [threading.Thread(target=compile_each, args=(s,)) for s in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong, wrong[:3]
