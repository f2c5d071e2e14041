"""The dashboard's device view and GET /api/v1/devices (runtime/service/devices.py): each shared
card's memory, cores and split used and free with the pods holding it (Volcano GPU share, HAMi
vGPU), the nodes whose free card memory is split so that no waiting pod uses it, DRA devices per
DeviceClass and node with the cycle's own allocations; what a caller may not list is hidden or
counted. Every figure below is worked out by hand from the objects, in each test's docstring."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from compiler.pipeline import compile_text
from runtime.cluster.objects import load_path
from runtime.kube.metrics import Metrics
from runtime.service.auth import Gate, User, Viewer
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime.service.views import LiveView
from runtime.service.webapi import routes
from sim_helpers import node, pod, write_objects

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from dra_docs import (  # noqa: E402 - the DRA builders live beside the DRA tests
    allocation, claim_doc, device_class, gpu, node_doc, pod_doc, request, slice_doc, template_doc,
)

NUMBER, MEMORY = "volcano.sh/gpu-number", "volcano.sh/gpu-memory"
VGPU = "volcano.sh/vgpu-number"
TIERS = "tier {\n  plugin priority\n  plugin gang\n}\ntier {\n  plugin predicates\n  plugin nodeorder\n%s}\n"


def policy(extra: str = ""):
    text = 'policy "devices" version 1\nactions [enqueue, allocate, backfill]\n' + TIERS % extra
    compiled = compile_text(text, "devices.policy")
    assert compiled.plan is not None, [str(d) for d in compiled.diagnostics]
    return compiled.plan


def live(tmp_path: Path, objects: list[dict], plan) -> LiveView:
    state = load_path(write_objects(tmp_path / "cluster.yaml", objects))
    view = LiveView()
    Scheduler(plan, EmbeddedCluster(state), metrics=Metrics(), view=view, facts_every=0.0).run_once()
    return view


def get(view: LiveView, path: str, viewer: Viewer | None = None) -> tuple[int, dict | str]:
    table = routes(view)
    prefix = max((p for p in table if path == p or (p.endswith("/") and path.startswith(p))), key=len)
    status, body, content_type = table[prefix](path, "") if viewer is None else table[prefix](path, "", viewer)
    return status, json.loads(body) if content_type == "application/json" else body.decode()


def share_holder(name: str, card: int, gib: int, ns: str = "ns") -> dict:
    doc = pod(name, ns=ns, node_name="g3", **{MEMORY: str(gib * 1024)})
    doc["metadata"]["annotations"]["volcano.sh/gpu-index"] = str(card)
    return doc


def share_objects() -> list[dict]:
    """g3: four 16Gi cards (volcano.sh/gpu-memory 64Gi over gpu-number 4) holding 8Gi (a, team-a),
    10Gi (b, team-b), 12Gi (c, team-a), 16Gi (d, team-b): free 8, 6, 4, 0. `late` (10Gi) fits no
    card; 18Gi would hold it: g3's 18Gi are split."""
    return [node("g3", cpu="32", memory="64Gi", **{NUMBER: "4", MEMORY: str(64 * 1024)}),
            share_holder("a", 0, 8, ns="team-a"), share_holder("b", 1, 10, ns="team-b"),
            share_holder("c", 2, 12, ns="team-a"), share_holder("d", 3, 16, ns="team-b"),
            pod("late", ns="team-a", **{MEMORY: str(10 * 1024)})]


SHARE = "  plugin deviceshare {\n    gpu_sharing = true\n  }\n"


def test_each_shared_card_with_its_figures_and_holders(tmp_path: Path) -> None:
    view = live(tmp_path, share_objects(), policy(SHARE))
    status, document = get(view, "/api/v1/devices")
    assert status == 200
    cards = {(c["node"], c["card"]): c for c in document["cards"]}
    assert sorted(cards) == [("g3", 0), ("g3", 1), ("g3", 2), ("g3", 3)]
    expected = {0: ("8Gi", "8Gi", ["team-a/a"]), 1: ("10Gi", "6Gi", ["team-b/b"]),
                2: ("12Gi", "4Gi", ["team-a/c"]), 3: ("16Gi", "0", ["team-b/d"])}
    for i, (used, free, pods) in expected.items():
        c = cards[("g3", i)]
        assert (c["memory"], c["usedMemory"], c["freeMemory"], c["pods"], c["tasks"]) == ("16Gi", used, free, pods, 1)
        assert c["device"] == NUMBER and c["usedCores"] is None and c["healthy"] and not c["whole"]
    (split,) = document["splitCardMemory"]
    assert (split["node"], split["free"], split["ask"]) == ("g3", 18 * 2**30, 10 * 2**30)
    assert split["text"] == "pod needs 10Gi of card memory; node g3's cards have 8Gi, 6Gi, 4Gi and 0 free"
    page = get(view, "/ui")[1]
    table = page[page.index('id="device-cards"'):page.index("</table>", page.index('id="device-cards"'))]
    row = table[table.index('data-card="1"'):]
    row = row[:row.index("</tr>")]
    assert "<td class=\"num\">10Gi / 16Gi</td><td class=\"num\">6Gi</td>" in row and "team-b/b" in row
    assert "node g3&#x27;s cards have 8Gi, 6Gi, 4Gi and 0 free" in page


def test_a_pod_bound_this_cycle_holds_its_card(tmp_path: Path) -> None:
    """`tiny` asks 2Gi: a card with room takes it this cycle; that card lists it beside its holder
    and its used memory grows by 2Gi; nothing is split then (`late` is gone, `tiny` placed)."""
    objects = [o for o in share_objects() if o["metadata"]["name"] != "late"]
    objects.append(pod("tiny", ns="team-a", **{MEMORY: str(2 * 1024)}))
    view = live(tmp_path, objects, policy(SHARE))
    (binding,) = view.last.decisions.bindings
    (card,) = binding.devices[NUMBER]
    document = get(view, "/api/v1/devices")[1]
    c = next(c for c in document["cards"] if c["card"] == card)
    before = {0: 8, 1: 10, 2: 12, 3: 16}[card]
    assert c["pods"][-1] == "team-a/tiny" and len(c["pods"]) == 2 and c["tasks"] == 2
    assert c["usedMemory"] == f"{before + 2}Gi"
    assert document["splitCardMemory"] == []


REGISTER = "GPU-aaa,4,16384,NVIDIA-A100,true,hami-core:GPU-bbb,4,16384,NVIDIA-A100,true,hami-core:"


def test_vgpu_cards_with_memory_cores_split_and_holders(tmp_path: Path) -> None:
    """Two vGPU cards of 16Gi, split 4. `old` holds 8Gi and 50 cores of GPU-bbb (vgpu-ids-new).
    `new` asks one vGPU of 4Gi and 30 cores: binpack takes the card with most memory used, GPU-bbb:
    12Gi and 80 cores used there, 4Gi and 20 cores free, 2 of 4 tasks; GPU-aaa untouched."""
    n = node("v1", cpu="32", memory="64Gi", **{VGPU: "8", "volcano.sh/vgpu-memory": "32768",
                                                 "volcano.sh/vgpu-cores": "200"})
    n["metadata"]["annotations"] = {"volcano.sh/node-vgpu-register": REGISTER}
    old = pod("old", node_name="v1", **{VGPU: "1", "volcano.sh/vgpu-memory": "8192", "volcano.sh/vgpu-cores": "50"})
    old["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"] = "GPU-bbb,NVIDIA,8192,50:"
    new = pod("new", **{VGPU: "1", "volcano.sh/vgpu-memory": "4096", "volcano.sh/vgpu-cores": "30"})
    view = live(tmp_path, [n, old, new], policy("  plugin deviceshare {\n    vgpu = true\n  }\n"))
    assert [(b.pod, b.devices) for b in view.last.decisions.bindings] == [("ns/new", {VGPU: (1,)})]
    cards = {c["uuid"]: c for c in get(view, "/api/v1/devices")[1]["cards"]}
    assert set(cards) == {"GPU-aaa", "GPU-bbb"}
    b, a = cards["GPU-bbb"], cards["GPU-aaa"]
    assert (b["usedMemory"], b["freeMemory"], b["usedCores"], b["freeCores"], b["tasks"], b["split"]) == \
        ("12Gi", "4Gi", 80, 20, 2, 4)
    assert b["pods"] == ["ns/old", "ns/new"]
    assert (a["usedMemory"], a["freeMemory"], a["usedCores"], a["freeCores"], a["tasks"], a["pods"]) == \
        ("0", "16Gi", 0, 100, 0, [])


def dra_objects() -> list[dict]:
    """n0 publishes 4 GPUs (2 A100, 2 H100), n1 2 A100. Class gpu matches all 6, a100 the 4 A100s.
    `held` (allocated before: n0's gpu-0) and `new` (a template's one H100, allocated this cycle on
    n0: gpu-2 or gpu-3). gpu: n0 2 of 4, n1 0 of 2; a100: n0 1 of 2, n1 0 of 2."""
    h100 = 'device.attributes["gpu.example.com"].model == "H100"'
    return [
        node_doc("n0"), node_doc("n1"),
        device_class("gpu"), device_class("a100", 'device.attributes["gpu.example.com"].model == "A100"'),
        slice_doc("n0-gpus", [gpu("gpu-0", model="A100"), gpu("gpu-1", model="A100"),
                              gpu("gpu-2", model="H100"), gpu("gpu-3", model="H100")], node="n0"),
        slice_doc("n1-gpus", [gpu("gpu-0", model="A100"), gpu("gpu-1", model="A100")], node="n1"),
        claim_doc("held", request(cls="a100"), allocation=allocation("n0", ("gpu", "gpu-0")),
                  reserved_for=["uid-held"]),
        pod_doc("held", claims={"gpu": "held"}, node="n0"),
        template_doc("one-h100", request(selectors=(h100,))),
        pod_doc("new", templates={"gpu": "one-h100"}),
    ]


def test_dra_devices_per_class_and_node_with_this_cycles_allocations(tmp_path: Path) -> None:
    view = live(tmp_path, dra_objects(), policy())
    assert [b.pod for b in view.last.decisions.bindings] == ["ns/new"]
    rows = {(r["deviceClass"], r["node"]): (r["allocated"], r["published"], r["free"])
            for r in get(view, "/api/v1/devices")[1]["deviceClasses"]}
    assert rows == {("gpu", "n0"): (2, 4, 2), ("gpu", "n1"): (0, 2, 2),
                    ("a100", "n0"): (1, 2, 1), ("a100", "n1"): (0, 2, 2)}
    page = get(view, "/ui")[1]
    table = page[page.index('id="device-classes"'):page.index("</table>", page.index('id="device-classes"'))]
    assert '<tr class="device-class" data-class="gpu" data-node="n0"><td>gpu</td><td>n0</td>' \
           '<td class="num">2</td><td class="num">4</td><td class="num">2</td></tr>' in table


# --- who sees what -----------------------------------------------------------------------------------

class Rbac:
    """A stand-in API server answering SubjectAccessReviews from a set of allowed (verb, resource,
    namespace) triples ("" namespace: cluster-wide)."""

    def __init__(self, allowed: set[tuple[str, str, str]]) -> None:
        self.allowed = allowed

    def post(self, path: str, body: dict) -> dict:
        attributes = body["spec"].get("resourceAttributes")
        if attributes is None:
            return {"status": {"allowed": False}}
        key = (attributes["verb"], attributes["resource"], attributes.get("namespace", ""))
        return {"status": {"allowed": key in self.allowed}}


def viewer(*allowed: tuple[str, str, str]) -> Viewer:
    return Viewer(Gate(Rbac(set(allowed))), User("tenant"))


def test_holders_of_other_namespaces_are_counted_not_named(tmp_path: Path) -> None:
    view = live(tmp_path, share_objects(), policy(SHARE))
    tenant = viewer(("list", "nodes", ""), ("list", "pods", "team-a"))
    status, document = get(view, "/api/v1/devices", tenant)
    assert status == 200
    pods = {c["card"]: (c["pods"], c["hiddenPods"]) for c in document["cards"]}
    assert pods == {0: (["team-a/a"], 0), 1: ([], 1), 2: (["team-a/c"], 0), 3: ([], 1)}
    assert document["deviceClasses"] == [] and document["deviceClassesHidden"] is True
    page = get(view, "/ui", tenant)[1]
    assert "team-b/" not in page and "team-a/a" in page
    assert page.count('class="muted hidden-pods">+1 hidden') == 2


def test_devices_need_list_nodes_and_dra_rows_list_resourceslices(tmp_path: Path) -> None:
    from runtime.service.auth import Denied

    view = live(tmp_path, dra_objects(), policy())
    try:
        get(view, "/api/v1/devices", viewer(("list", "pods", "")))
        raise AssertionError("answered without list nodes")
    except Denied as refused:
        assert refused.status == 403
    nodes_only = viewer(("list", "nodes", ""), ("list", "pods", ""))
    assert get(view, "/api/v1/devices", nodes_only)[1]["deviceClasses"] == []
    assert 'id="device-classes"' not in get(view, "/ui", nodes_only)[1]
    both = viewer(("list", "nodes", ""), ("list", "pods", ""), ("list", "resourceslices", ""))
    assert len(get(view, "/api/v1/devices", both)[1]["deviceClasses"]) == 4
    assert 'id="device-classes"' in get(view, "/ui", both)[1]
