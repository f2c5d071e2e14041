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
    return objects


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    state = load_path(write_objects(tmp / "cluster.yaml", hostile_objects()))
    state.label_topology = read_topology_labels("rack,kubernetes.io/hostname")
    folder = tmp / 'pol<script>alert(1)<\\script>"\n\u202e'   # no slash: one folder
    folder.mkdir()
    policy_file = folder / "<img src=x onerror=alert(1)>.policy"
    text = policy_text("hostile", "enqueue, allocate", "  plugin predicates\n  plugin proportion",
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
                                  "/api/v1/topology", "/api/v1/queues/" + quote(SCRIPT),
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


def test_a_reflected_path_is_escaped(served) -> None:
    table, _ = served
    status, body, _ = answer(table, "/api/v1/queues/" + quote(HOSTILE[1]) + "/" + quote(HOSTILE[2]))
    assert status == 404 and b"<" not in body
    assert HOSTILE[1] in json.loads(body)["error"]
