"""Hostile strings (issue 30): markup, quotes, newlines, bidi controls and very long text put in
every field that reaches the dashboard and the JSON API (namespace, pod, PodGroup and node names,
annotations, node labels turned HyperNodes, a PodGroup's queue, its condition message, the policy's
file name, a reload's errors), then the HTML is parsed: only the dashboard's own tags and
attributes, no event handler, no script, no raw bidi control; every JSON answer parses, holds no raw
`<`, `>` or bidi control, and gives the strings back intact."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

from compiler.pipeline import compile_text
from runtime.cluster.objects import load_path
from runtime.cluster.topology_labels import read_topology_labels
from runtime.kube.metrics import Metrics
from runtime.service.embedded import EmbeddedCluster
from runtime.service.loop import Scheduler
from runtime.service.views import LiveView
from runtime.service.webapi import routes
from sim_helpers import node, pod, podgroup, policy_text, write_objects

SCRIPT = '<script>alert("x")</script>'
HOSTILE = [
    SCRIPT,
    '"><img src=x onerror=alert(1)>',
    "'; onmouseover='alert(1)",
    "line one\nINFO fake log line\r\n<b>bold</b>",
    "admin\u202etxt.exe\u2066\u2069",
    "</style><svg onload=alert(1)>",
    "&lt;already&gt; &amp; <!-- comment --> <![CDATA[x]]>",
    "<" * 3000 + "long" + ">" * 3000,
]
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "b", "i", "code", "table", "tr",
        "th", "td", "span", "svg", "rect", "line", "text", "polyline", "path", "circle", "g", "a", "div", "ul",
        "li", "small", "br", "details", "summary", "pre", "em", "strong", "abbr", "tspan", "figure", "figcaption"}


class Markup(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)
        for name, value in attrs:
            if name == "href":
                assert value is not None and value.startswith("/") and not value.startswith("//"), value

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def hostile_objects() -> list[dict]:
    objects: list[dict] = []
    for i, text in enumerate(HOSTILE):
        ns = f"ns{i}{text[:40]}"
        n = node(f"n{i}{text[:60]}", cpu="2", labels={"rack": f"r{i}{text[:50]}", "kubernetes.io/hostname": f"h{i}"})
        objects.append(n)
        group = podgroup(f"g{i}{text}", ns=ns, queue="default", min_member=2)
        group["metadata"]["annotations"] = {"note": text, f"k{i}": text}
        group["status"] = {"phase": "Pending", "conditions": [{"type": "Unschedulable", "status": "True",
                                                              "reason": text[:100], "message": text}]}
        objects.append(group)
        for j in range(2):
            p = pod(f"p{i}-{j}{text}", ns=ns, group=f"g{i}{text}", cpu="3")    # 3 cpu > any node: waits
            p["metadata"]["annotations"]["note"] = text
            p["metadata"]["labels"] = {"app": "x"}
            objects.append(p)
        # A PodGroup of a queue nobody declared: its name in a reason.
        objects.append(podgroup(f"q{i}", ns=ns, queue=f"queue{text[:200]}"))
        objects.append(pod(f"qp{i}", ns=ns, group=f"q{i}", cpu="1"))
    # Running gangs for the topology spans.
    objects.append(podgroup("running", ns="plain", queue="default", min_member=1))
    objects.append(pod("running-0", ns="plain", group="running", cpu="1", node_name=f"n0{HOSTILE[0][:60]}"))
    objects += hostile_devices()
    return objects


def hostile_devices() -> list[dict]:
    """The device view's strings (runtime/service/devices.py): GPU-share nodes, the pods holding
    their cards, the split-memory sentence naming the node, DRA DeviceClass, slice, device and node
    names (vGPU's, one device mode at a time: test_vgpu_card_uuids_and_holders_are_text)."""
    objects: list[dict] = []
    for i, text in enumerate(HOSTILE):
        ns = f"ns{i}{text[:40]}"
        share = node(f"c{i}{text[:60]}", cpu="2", **{"volcano.sh/gpu-number": "2", "volcano.sh/gpu-memory": "32768"})
        objects.append(share)
        for card, mib in ((0, 10240), (1, 12288)):    # 6Gi and 4Gi free: a 8Gi ask waits, the memory split
            holder = pod(f"h{i}-{card}{text}", ns=ns, cpu="0", node_name=share["metadata"]["name"],
                         **{"volcano.sh/gpu-memory": str(mib)})
            holder["metadata"]["annotations"]["volcano.sh/gpu-index"] = str(card)
            objects.append(holder)
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"dc{i}{text}"},
                        "spec": {"selectors": []}})
        objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"s{i}{text}"},
                        "spec": {"driver": "gpu.example.com", "nodeName": share["metadata"]["name"],
                                 "pool": {"name": f"p{i}{text}", "generation": 1, "resourceSliceCount": 1},
                                 "devices": [{"name": f"d{i}{text[:50]}"}]}})
    objects.append(pod("split-ask", ns="plain", cpu="0", **{"volcano.sh/gpu-memory": "8192"}))
    return objects


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    state = load_path(write_objects(tmp / "cluster.yaml", hostile_objects()))
    state.label_topology = read_topology_labels("rack,kubernetes.io/hostname")
    folder = tmp / 'pol<script>alert(1)<\\script>"\n\u202e'   # no slash: one folder
    folder.mkdir()
    policy_file = folder / "<img src=x onerror=alert(1)>.policy"
    text = policy_text("hostile", "enqueue, allocate", "  plugin predicates\n  plugin proportion\n"
                       "  plugin deviceshare {\n    gpu_sharing = true\n  }",
                       "# <script>alert('comment')</script>\n")
    policy_file.write_text(text)
    compiled = compile_text(text, str(policy_file))
    assert compiled.plan is not None, [str(d) for d in compiled.diagnostics]
    view = LiveView()
    scheduler = Scheduler(compiled.plan, EmbeddedCluster(state), metrics=Metrics(), view=view)
    scheduler.run_once()
    scheduler.run_once()
    described = {"name": "hostile", "version": 1, "revision": "r1", "main": str(policy_file),
                 "sources": [str(policy_file), str(folder / HOSTILE[1])], "watching": [str(folder)],
                 "loaded_at": HOSTILE[3],
                 "last_reload": {"result": HOSTILE[1], "trigger": HOSTILE[2], "at": HOSTILE[4],
                                 "errors": [f"{policy_file}:3:1: {h}" for h in HOSTILE]}}
    return routes(view, lambda: described), state


def answer(table, path: str) -> tuple[int, bytes, str]:
    prefix = max((p for p in table if path == p or (p.endswith("/") and path.startswith(p))), key=len)
    return table[prefix](path, "")


def test_the_dashboard_holds_only_its_own_markup(served) -> None:
    table, state = served
    status, body, content_type = answer(table, "/ui")
    page = body.decode()
    assert status == 200 and content_type.startswith("text/html")
    parser = Markup()
    parser.feed(page)
    assert parser.tags <= TAGS, parser.tags - TAGS
    assert not any(a.startswith("on") for a in parser.attributes), parser.attributes
    assert "<script" not in page.lower() and "<img" not in page.lower() and "<svg onload" not in page.lower()
    assert not set(BIDI) & set(page), "a raw bidi control on the page"
    shown = "".join(parser.text)
    # The hostile names are there, as text: escaped, not dropped.
    assert "g0" + SCRIPT in shown or "p0-0" + SCRIPT in shown, "the hostile job is not listed"
    assert "\\u202e" in page   # the bidi control shown as its code point


@pytest.mark.parametrize("path", ["/api/v1/queues", "/api/v1/queues/default", "/api/v1/queues/default/pending",
                                  "/api/v1/topology", "/api/v1/devices", "/api/v1/queues/" + quote(SCRIPT),
                                  "/api/v1/explain/" + quote(SCRIPT) + "/" + quote(SCRIPT)])
def test_json_answers_hold_no_markup_and_give_the_strings_back(served, path) -> None:
    table, _ = served
    status, body, content_type = answer(table, path)
    assert content_type == "application/json"
    text = body.decode()
    assert "<" not in text and ">" not in text and not set(BIDI) & set(text)
    json.loads(text)   # and it is JSON
    assert status in (200, 400, 404), text


def test_pending_and_explain_give_hostile_names_back_intact(served) -> None:
    table, state = served
    status, body, _ = answer(table, "/api/v1/queues/default/pending")
    names = {j["name"] for j in json.loads(body)["jobs"]}
    for i, text in enumerate(HOSTILE):
        assert f"ns{i}{text[:40]}/g{i}{text}" in names, (i, sorted(names)[:3])
    key = f"ns1{HOSTILE[1][:40]}/p1-0{HOSTILE[1]}"   # no slash in it: addressable
    assert key in state.pods
    status, body, _ = answer(table, "/api/v1/explain/" + quote(key))
    document = json.loads(body)
    assert status == 200, document
    assert any(HOSTILE[1] in line for line in document["text"])


def test_the_device_view_gives_hostile_names_back_intact_and_shows_them_as_text(served) -> None:
    table, state = served
    status, body, _ = answer(table, "/api/v1/devices")
    document = json.loads(body)
    assert status == 200
    holders = {p for c in document["cards"] for p in c["pods"]}
    classes = {r["deviceClass"] for r in document["deviceClasses"]}
    splits = {s["node"]: s["text"] for s in document["splitCardMemory"]}
    page = answer(table, "/ui")[1].decode()
    parser = Markup()
    parser.feed(page)
    shown = "".join(parser.text)
    for i, text in enumerate(HOSTILE):
        ns, share = f"ns{i}{text[:40]}", f"c{i}{text[:60]}"
        assert {f"{ns}/h{i}-0{text}", f"{ns}/h{i}-1{text}"} <= holders
        assert f"dc{i}{text}" in classes
        assert splits[share] == f"pod needs 8Gi of card memory; node {share}'s cards have 6Gi and 4Gi free"
        if not set(BIDI) & set(text) and "\r" not in text and "\n" not in text:   # those are shown as marks
            assert f"dc{i}{text}" in shown and f"{ns}/h{i}-0{text}" in shown, i
    assert 'id="device-cards"' in page and 'id="split-cards"' in page and 'id="device-classes"' in page


def test_vgpu_card_uuids_and_holders_are_text(tmp_path: Path) -> None:
    objects = []
    for i, text in enumerate(HOSTILE):
        uuid = "".join(c for c in f"GPU-{i}{text[:80]}" if c not in ",:;")   # the annotations' separators
        vgpu = node(f"v{i}{text[:60]}", cpu="2", **{"volcano.sh/vgpu-number": "4", "volcano.sh/vgpu-memory": "16384",
                                                      "volcano.sh/vgpu-cores": "100"})
        vgpu["metadata"]["annotations"] = {"volcano.sh/node-vgpu-register": f"{uuid},4,16384,NVIDIA-A100,true,hami-core:"}
        held = pod(f"vh{i}{text}", ns=f"ns{i}{text[:40]}", cpu="0", node_name=vgpu["metadata"]["name"],
                   **{"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "1024"})
        held["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"] = f"{uuid},NVIDIA,1024,10:"
        objects += [vgpu, held]
    state = load_path(write_objects(tmp_path / "vgpu.yaml", objects))
    text = policy_text("vgpu", "enqueue, allocate", "  plugin predicates\n  plugin deviceshare {\n    vgpu = true\n  }")
    compiled = compile_text(text, "vgpu.policy")
    assert compiled.plan is not None, [str(d) for d in compiled.diagnostics]
    view = LiveView()
    Scheduler(compiled.plan, EmbeddedCluster(state), metrics=Metrics(), view=view).run_once()
    table = routes(view)
    body = answer(table, "/api/v1/devices")[1].decode()
    assert "<" not in body and ">" not in body and not set(BIDI) & set(body)
    cards = {c["uuid"]: c["pods"] for c in json.loads(body)["cards"]}
    page = answer(table, "/ui")[1].decode()
    parser = Markup()
    parser.feed(page)
    assert parser.tags <= TAGS and not any(a.startswith("on") for a in parser.attributes)
    assert "<script" not in page.lower() and not set(BIDI) & set(page)
    for i, text in enumerate(HOSTILE):
        uuid = "".join(c for c in f"GPU-{i}{text[:80]}" if c not in ",:;")
        assert cards[uuid] == [f"ns{i}{text[:40]}/vh{i}{text}"]


def test_a_reflected_path_is_escaped(served) -> None:
    table, _ = served
    status, body, _ = answer(table, "/api/v1/queues/" + quote(HOSTILE[1]) + "/" + quote(HOSTILE[2]))
    assert status == 404 and b"<" not in body
    assert HOSTILE[1] in json.loads(body)["error"]
