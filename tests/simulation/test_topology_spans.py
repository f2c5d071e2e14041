"""Spans and free room per HyperNode where people look: the simulator (text, -o json, the HTML
report), the running scheduler's views (/api/v1/topology, the dashboard), `explain` of a gang that
waits on topology; and `--topology-labels` on simulate and run (HyperNodes derived from node labels).

Every figure is checked against a computation written here from the objects' labels and requests
(racks and blocks read off the nodes), not through runtime.cluster.topology.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compiler.pipeline import compile_text
from runtime.cluster.objects import load_path
from runtime.cluster.topology_labels import HOSTNAME_LABEL, parse_label_list
from runtime.engine.session import Options
from runtime.engine.explanation import explain
from runtime.kube.metrics import Metrics
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime.service.views import LiveView
from runtime.service.webapi import routes
from sim_helpers import node, pod, podgroup, policy_text, run_cli, write_objects

RACK, BLOCK = "example.com/rack", "example.com/block"
LABELS = f"{BLOCK},{RACK},{HOSTNAME_LABEL}"
POLICY = policy_text("topo", "enqueue, allocate, backfill", "  plugin predicates\n  plugin nodeorder")
CPU = 4            # per node, in cores
GANGS = {"pair": (2, 1), "quad": (4, 2), "trio": (3, 1), "loose": (3, None)}   # name: (pods, hard tier)


def cluster_objects() -> list[dict]:
    """Eight racks of two 4-cpu nodes, two racks a block; fillers take n0 and n2 (block b0), a
    one-pod PodGroup of 1 cpu runs on n1. pair (tier 1) fits a rack, quad (tier 2) a block, trio
    (tier 1, three pods) no rack, loose has no topology and a lower priority."""
    objects = [node(f"n{i}", cpu=str(CPU), labels={RACK: f"r{i // 2}", BLOCK: f"b{i // 4}", HOSTNAME_LABEL: f"n{i}"})
               for i in range(16)]
    objects += [pod("fill-0", cpu="4", node_name="n0"), pod("fill-2", cpu="4", node_name="n2")]
    objects += [podgroup("solo", min_member=1), pod("solo-0", group="solo", cpu="1", node_name="n1")]
    for name, (size, tier) in GANGS.items():
        spec = {} if tier is None else {"networkTopology": {"mode": "hard", "highestTierAllowed": tier}}
        objects.append(podgroup(name, min_member=size, **spec))
        # loose goes last (lower priority): spread first, it could leave no block whole for quad
        objects += [pod(f"{name}-{i}", group=name, cpu="4", priority=0 if tier is None else 10) for i in range(size)]
    return objects


def expected_span(nodes: set[str], labels: dict[str, dict[str, str]]) -> tuple[int | None, str | None]:
    """The tier and label (key=value) of the smallest rack or block holding all `nodes`, from labels."""
    for tier, key in ((1, RACK), (2, BLOCK)):
        values = {labels[n][key] for n in nodes}
        if len(values) == 1:
            return tier, f"{key}={values.pop()}"
    return None, None


def expected_free(objects: list[dict], bound: dict[str, str]) -> dict[str, int]:
    """key=value of each rack and block -> free cpu (millicores) after the pods placed or bound."""
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    free = {n: CPU * 1000 for n in nodes}
    for o in objects:
        if o["kind"] == "Pod":
            where = o["spec"].get("nodeName") or bound.get(f"ns/{o['metadata']['name']}")
            if where:
                free[where] -= int(o["spec"]["containers"][0]["resources"]["requests"]["cpu"]) * 1000
    out: dict[str, int] = {}
    for n, o in nodes.items():
        for key in (RACK, BLOCK):
            group = f"{key}={o['metadata']['labels'][key]}"
            out[group] = out.get(group, 0) + free[n]
    return out


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, list[dict]]:
    objects = cluster_objects()
    return write_objects(tmp_path / "cluster.yaml", objects), Path(tmp_path / "p.policy"), objects


def labels_of(objects: list[dict]) -> dict[str, dict[str, str]]:
    return {o["metadata"]["name"]: o["metadata"]["labels"] for o in objects if o["kind"] == "Node"}


def check_spans(spans: dict[str, tuple[int | None, str | None]], where: dict[str, set[str]],
                objects: list[dict]) -> None:
    """`spans`: PodGroup -> (tier, key=value of its HyperNode) as shown; `where`: PodGroup -> nodes."""
    labels = labels_of(objects)
    assert set(spans) == set(where)
    for group, nodes in where.items():
        assert spans[group] == expected_span(nodes, labels), group


# --- the simulator -------------------------------------------------------------------------------

def test_simulate_json_and_report_show_spans_and_free_room_from_derived_topology(files, capsys) -> None:
    snapshot, policy, objects = files
    policy.write_text(POLICY)
    report = policy.parent / "report"
    code, out, err = run_cli(capsys, "simulate", policy, "--snapshot", snapshot, "--cycles", "1",
                             "--topology-labels", LABELS, "-o", "json", "--report", report)
    assert code == 0, err
    [cycle] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    bound = {b["pod"]: b["node"] for b in cycle["bindings"]}
    assert {k.split("/")[1].rsplit("-", 1)[0] for k in bound} == {"pair", "quad", "loose"}   # trio waits
    where: dict[str, set[str]] = {}
    for key, node_name in bound.items():
        where.setdefault(f"ns/{key.split('/')[1].rsplit('-', 1)[0]}", set()).add(node_name)
    where["ns/solo"] = {"n1"}

    # With --cycles, -o json prints the cycles; the summary document comes without --cycles.
    code, out, err = run_cli(capsys, "simulate", policy, "--snapshot", snapshot, "--topology-labels", LABELS,
                             "-o", "json", "--until", "1s")
    assert code == 0, err
    document = json.loads(out)
    topology = document["topology"]
    assert topology["derivedFrom"] and "example.com/rack" in topology["derivedFrom"]
    label_of = {hn["name"]: hn["labels"] for hn in topology["hyperNodes"]}
    shown = {key: (s["tier"], label_of.get(s["hyperNode"])) for key, s in topology["spans"].items()}
    check_spans(shown, where, objects)
    per_tier: dict[str, int] = {}
    for tier, _ in shown.values():
        per_tier["cluster" if tier is None else str(tier)] = per_tier.get("cluster" if tier is None else str(tier), 0) + 1
    assert topology["gangsPerTier"] == dict(sorted(per_tier.items()))
    assert shown["ns/pair"][0] == 1 and shown["ns/quad"][0] == 2 and shown["ns/solo"][0] == 1
    # free room at the end (the run stops at 1s: nothing finished)
    expected = expected_free(objects, {k: n for k, n in bound.items()})
    free = {hn["labels"]: hn["free"]["cpu"] for hn in topology["hyperNodes"]}
    assert free == {k: str(v // 1000) for k, v in expected.items()}

    page = (report / "index.html").read_text()
    for key, (tier, _) in shown.items():
        assert f'data-podgroup="{key}" data-tier="{"-" if tier is None else tier}"' in page
    assert page.count('class="hypernode"') == 8 + 4


def test_simulate_text_summary_lists_spans_and_hypernodes(files, capsys) -> None:
    snapshot, policy, _ = files
    policy.write_text(POLICY)
    code, out, err = run_cli(capsys, "simulate", policy, "--snapshot", snapshot, "--until", "1s",
                             "--topology-labels", LABELS)
    assert code == 0, err
    assert "network topology: HyperNodes derived from node labels" in out
    assert re.search(r"gangs by the tier they spanned: tier 1: [23]", out)
    assert "free room per HyperNode at the end" in out and f"{RACK}=r7" in out


@pytest.mark.parametrize("value, words", [
    ("example.com/rack", "needs at least one label above"), (f"{RACK},zone", f"end the list with {HOSTNAME_LABEL}"),
])
def test_a_bad_topology_label_flag_is_exit_2_with_the_reason(files, capsys, value, words) -> None:
    snapshot, policy, _ = files
    policy.write_text(POLICY)
    for command in (("simulate", policy, "--snapshot", snapshot), ("run", "--policy", policy, "--cluster",
                                                                   f"embedded:{snapshot}")):
        code, out, err = run_cli(capsys, *command, "--topology-labels", value)
        assert code == 2 and words in err and "Traceback" not in err


def test_a_bad_discovery_file_is_exit_2_located(files, capsys) -> None:
    snapshot, policy, _ = files
    policy.write_text(POLICY)
    conf = policy.parent / "volcano-controller.conf"
    conf.write_text("networkTopologyDiscovery:\n  - source: label\n    enabled: true\n    config:\n"
                    "      networkTopologyTypes:\n        gpu:\n          - nodeLabel: rack\n"
                    "          - nodeLabel: zone\n")
    code, out, err = run_cli(capsys, "simulate", policy, "--snapshot", snapshot, "--topology-labels", conf)
    assert code == 2 and f"{conf}:6:9: type `gpu` ends with `zone`" in err


def test_without_the_flag_nothing_is_derived(files, capsys) -> None:
    snapshot, policy, _ = files
    policy.write_text(POLICY)
    code, out, err = run_cli(capsys, "simulate", policy, "--snapshot", snapshot, "--until", "1s", "-o", "json")
    assert code == 0 and "topology" not in json.loads(out)


# --- the running scheduler: run's embedded cluster, /api/v1/topology, the dashboard, explain ----------

def plan():
    compiled = compile_text(POLICY, "topo.policy")
    assert compiled.plan is not None
    return compiled.plan


def test_run_embedded_with_topology_labels_places_within_racks_and_serves_spans(files) -> None:
    # imported here: the command module's helper, as `run --cluster embedded:... --topology-labels` calls it
    from policydsl.cli.commands.run import _embedded

    snapshot, _, objects = files
    cluster = _embedded(f"embedded:{snapshot}", plan(), parse_label_list(LABELS))
    assert isinstance(cluster, EmbeddedCluster) and cluster.state.label_topology is not None
    view = LiveView()
    scheduler = Scheduler(plan(), cluster, metrics=Metrics(), view=view, facts_every=0.0)
    scheduler.run_once()
    state = cluster.state
    where: dict[str, set[str]] = {}
    for p in state.pods.values():
        if p.node_name and p.group:
            where.setdefault(f"ns/{p.group}", set()).add(p.node_name)
    assert "ns/trio" not in where and len(where["ns/pair"]) == 2

    facts = view.last.topology()
    shown = {g.podgroup: (g.span.tier, facts.topology.hypernodes[g.span.hypernode].label_text
                          if g.span.hypernode else None) for g in facts.spans}
    check_spans(shown, where, objects)
    bound = {p.key: p.node_name for p in state.pods.values() if p.node_name}
    expected = expected_free(objects, bound)
    assert {hn.labels: hn.free["cpu"] for hn in facts.hypernodes} == expected

    table = routes(view)
    status, body, _ = table["/api/v1/topology"]("/api/v1/topology", "")
    document = json.loads(body)
    assert status == 200 and document["runningGangs"] == 4 and len(document["hyperNodes"]) == 12
    assert {s["podGroup"] for s in document["spans"]} == set(where)
    status, body, _ = table["/ui"]("/ui", "")
    page = body.decode()
    assert page.count('class="hypernode"') == 12 and page.count('class="span"') == 4
    for key, (tier, _) in shown.items():
        assert f'data-podgroup="{key}" data-tier="{"-" if tier is None else tier}"' in page
    assert "derived from node labels" in page


def test_explain_gives_the_free_room_per_tier_of_a_gang_waiting_on_topology(files) -> None:
    snapshot, _, objects = files
    state = load_path(snapshot)
    state.label_topology = parse_label_list(LABELS)
    explanation = explain(plan(), state, "ns/trio", Options())
    lines = explanation.lines()
    text = "\n".join(lines)
    assert "asks: hard mode, tier <= 1" in text and "waiting pods ask: 12 cpu" in text
    [tier1] = [line for line in lines if "free in tier 1" in line]
    assert "tier 2" not in " ".join(line for line in lines if line.strip().startswith("free in"))
    # The snapshot's free room (explain's figures are the cluster's before the cycle it runs), roomiest first.
    expected = expected_free(objects, {})
    assert "(8 HyperNodes)" in tier1
    shown = re.findall(r"\((example\.com/rack=r\d)\) (\d+) cpu", tier1)
    assert len(shown) == 5 and all(int(v) * 1000 == expected[k] for k, v in shown)
    assert [int(v) for _, v in shown] == sorted((v // 1000 for k, v in expected.items() if k.startswith(RACK)),
                                                reverse=True)[:5]
    assert explanation.to_dict()["topology"] == list(explanation.topology)

    pair = explain(plan(), state, "ns/pair", Options())
    [runs] = [line for line in pair.lines() if "runs within" in line]
    assert "tier 1" in runs and "example.com/rack=" in runs


def test_explain_and_diff_take_the_flag_too(files, capsys) -> None:
    snapshot, policy, _ = files
    policy.write_text(POLICY)
    code, out, err = run_cli(capsys, "explain", "ns/trio", "--snapshot", snapshot, "--policy", policy,
                             "--topology-labels", LABELS)
    assert code == 0, err
    assert "network topology:" in out and "free in tier 1 (8 HyperNodes)" in out
    code, out, err = run_cli(capsys, "explain", "ns/trio", "--snapshot", snapshot, "--policy", policy)
    assert code == 0 and "network topology:" not in out            # no HyperNodes without the flag
    code, out, err = run_cli(capsys, "explain", "ns/trio", "--topology-labels", LABELS)
    assert code == 2 and "goes with --snapshot" in err
    other = policy.parent / "other.policy"
    other.write_text(POLICY.replace("plugin nodeorder", "plugin nodeorder\n  plugin binpack"))
    code, out, err = run_cli(capsys, "diff", policy, other, "--snapshot", snapshot, "--cycles", "1",
                             "--topology-labels", LABELS, "-o", "json")
    assert code in (0, 1), err
    assert all("trio" not in p["pod"] or p["new"] is None for p in json.loads(out)["placements"])


def test_a_policy_test_derives_topology_and_asserts_spans(files, capsys) -> None:
    snapshot, policy, _ = files
    policy.write_text(POLICY)
    test = policy.parent / "topo.policytest.yaml"
    test.write_text(f"""policy: p.policy
snapshot: cluster.yaml
cycles: 1
topology_labels: {LABELS}
tests:
  - name: gangs stay within their tiers
    expect:
      - {{podgroup: ns/pair, span_tier: 1}}
      - {{podgroup: ns/quad, span_tier: "<= 2"}}
      - {{podgroup: ns/trio, unschedulable: "within one HyperNode of tier <= 1"}}
  - name: a span too wide for the assertion fails
    expect:
      - {{podgroup: ns/quad, span_tier: "< 2"}}
  - name: racks alone cannot hold quad
    topology_labels: {RACK},{HOSTNAME_LABEL}
    expect:
      - {{podgroup: ns/quad, span_tier: 1}}
""")
    code, out, err = run_cli(capsys, "test", test, "-o", "json")
    results = {t["name"]: t for t in json.loads(out)["tests"]}
    assert results["gangs stay within their tiers"]["outcome"] == "passed", results
    failed = results["a span too wide for the assertion fails"]
    assert failed["outcome"] == "failed" and "spanned tier 2" in " ".join(failed["failures"])
    # a test's own topology_labels: racks only, so quad's four pods cannot share one tier-1 HyperNode
    assert results["racks alone cannot hold quad"]["outcome"] == "failed"
    bad = policy.parent / "bad.policytest.yaml"
    bad.write_text(test.read_text().replace(f"topology_labels: {LABELS}", "topology_labels: rack"))
    code, out, err = run_cli(capsys, "test", bad)
    assert code == 2 and f"{bad}:4:" in out + err and "needs at least one label above" in out + err
