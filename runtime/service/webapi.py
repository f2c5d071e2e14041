"""The read-only views the scheduler serves on its metrics port (runtime.service.server.MetricsServer
routes), all from the last cycle (runtime/service/views.py LiveView):

    GET /api/v1/explain/NS/NAME          why a pod or PodGroup waits: the text `policydsl explain` prints
    GET /api/v1/queues                   every queue with its figures
    GET /api/v1/queues/NAME              one queue
    GET /api/v1/queues/NAME/pending      its pending jobs in the order the next cycle considers them
    GET /api/v1/topology                 HyperNodes by tier with their free room; each running gang's span
    GET /api/v1/devices                  shared cards one by one (used, free, holders), card memory split
                                         over cards, DRA devices per DeviceClass and node (runtime/service/devices.py)
    GET /ui                              the dashboard (runtime/service/dashboard.py), server-rendered HTML

JSON answers carry the cycle they describe (`cycle`, `revision`, `at`). 503 before the first
cycle (a standby that does not lead runs none: ask the leader), 404 for an unknown object.

With secure serving each route gets the caller (auth.Viewer) and asks the API server, before
looking anything up (a refusal tells nothing of what exists): explain NS/NAME needs `get pods`
in NS; the queue list `list queues.scheduling.volcano.sh`, one queue and its pending jobs `get`
on that Queue; a pending job is listed only where the caller may `list pods` in its namespace
(the others counted in `hidden`); topology needs `list hypernodes.topology.volcano.sh`, each
gang's span shown only where its namespace is visible; devices need `list nodes`, a card's
holders named only where their namespace is visible (the rest counted in `hiddenPods`), the DRA
rows only for those who may `list resourceslices.resource.k8s.io`; the dashboard renders what the
caller may see (runtime/service/dashboard.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import unquote

from runtime.engine.explanation import UnknownTarget
from runtime.service.auth import HYPERNODES, QUEUES, Resource, Viewer, namespaces_visible_to
from runtime.service.dashboard import render
from runtime.service.devices import RESOURCE_API, devices_document
from runtime.service.server import Route
from runtime.service.views import (LiveView, explain_document, pending_document, queues_document,
                                   topology_document)

JSON = "application/json"
HTML = "text/html; charset=utf-8"
API = "/api/v1"


_JSON_HTML_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})
ERROR_PREFIX = "policydsl: "   # `message` of our errors: told apart from the API server's own through its proxy


def _json(status: int, document: dict) -> tuple[int, bytes, str]:
    if "error" in document:
        hint = f"; did you mean {document['suggestion']}?" if document.get("suggestion") else ""
        document = {**document, "message": ERROR_PREFIX + document["error"] + hint}
    # As Go's encoding/json: <, > and & written \u-escaped (json.dumps already escapes every
    # non-ASCII character, bidi controls included), so no JSON answer holds markup a browser
    # sniffing it, or a page embedding it, could take for HTML.
    text = json.dumps(document, indent=2, sort_keys=True).translate(_JSON_HTML_SAFE)
    return status, (text + "\n").encode(), JSON


def _no_cycle(view: LiveView) -> tuple[int, bytes, str]:
    return _json(503, {"error": "no cycle yet: the scheduler has not run one (still syncing its cache, or a "
                                "standby that does not lead)"})


def routes(view: LiveView, policy: Callable[[], object] | None = None) -> dict[str, Route]:
    def explain(path: str, query: str, viewer: Viewer | None = None) -> tuple[int, bytes, str]:
        target = unquote(path[len(f"{API}/explain/"):]).strip("/")
        if not target or target.count("/") > 1:
            return _json(400, {"error": f"expected {API}/explain/NAMESPACE/NAME, got {path}"})
        if viewer is not None:
            if "/" not in target:   # a bare name may resolve in any namespace: not for a viewer to probe
                return _json(400, {"error": f"expected {API}/explain/NAMESPACE/NAME, got {path}"})
            viewer.require(Resource("get", "pods", target.partition("/")[0]))
        last = view.last
        if last is None:
            return _no_cycle(view)
        try:
            return _json(200, explain_document(last, target))
        except UnknownTarget as err:
            return _json(404, {"error": f"no pod or PodGroup `{err.target}` in the last cycle's snapshot (a pod "
                                        "bound and settled is counted, not listed, when the policy neither "
                                        "preempts nor reclaims)", "suggestion": err.suggestion})

    def queues(path: str, query: str, viewer: Viewer | None = None) -> tuple[int, bytes, str]:
        rest = unquote(path[len(f"{API}/queues"):]).strip("/")
        name, _, sub = rest.partition("/")
        if viewer is not None:
            viewer.require(Resource("get", "queues", group=QUEUES, name=name) if name
                           else Resource("list", "queues", group=QUEUES))
        last = view.last
        if last is None:
            return _no_cycle(view)
        if not rest:
            return _json(200, queues_document(last))
        row = last.queue(name)
        if row is None:
            # Not the list of every queue: that is what GET /api/v1/queues is for.
            return _json(404, {"error": f"no queue `{name}` in the last cycle (GET {API}/queues lists them)"})
        if sub == "pending":
            document = pending_document(last, name)
            if viewer is not None and document is not None:
                visible = namespaces_visible_to(viewer)
                shown = [j for j in document["jobs"] if visible(_namespace_of(j["name"]))]
                document = {**document, "jobs": shown, "listed": len(shown),
                            "hidden": len(document["jobs"]) - len(shown)}
            return _json(200, document)
        if sub:
            return _json(404, {"error": f"unknown view `{sub}` of queue {name}: try {API}/queues/{name}/pending"})
        document = queues_document(last)
        document["queues"] = [q for q in document["queues"] if q["name"] == name]
        return _json(200, document)

    def topology(path: str, query: str, viewer: Viewer | None = None) -> tuple[int, bytes, str]:
        if viewer is not None:
            viewer.require(Resource("list", "hypernodes", group=HYPERNODES))
        last = view.last
        if last is None:
            return _no_cycle(view)
        if path.rstrip("/") != f"{API}/topology":
            return _json(404, {"error": f"unknown view {path}: try {API}/topology"})
        document = topology_document(last)
        if viewer is not None:
            visible = namespaces_visible_to(viewer)
            spans = [g for g in document.get("spans", []) if visible(_namespace_of(str(g.get("podGroup", ""))))]
            document = {**document, "spans": spans, "hiddenSpans": len(document.get("spans", [])) - len(spans)}
        return _json(200, document)

    def devices(path: str, query: str, viewer: Viewer | None = None) -> tuple[int, bytes, str]:
        if viewer is not None:
            viewer.require(Resource("list", "nodes"))
        last = view.last
        if last is None:
            return _no_cycle(view)
        if path.rstrip("/") != f"{API}/devices":
            return _json(404, {"error": f"unknown view {path}: try {API}/devices"})
        if viewer is None:
            return _json(200, devices_document(last))
        return _json(200, devices_document(last, namespaces_visible_to(viewer),
                                           viewer.may(Resource("list", "resourceslices", group=RESOURCE_API))))

    def dashboard(path: str, query: str, viewer: Viewer | None = None) -> tuple[int, bytes, str]:
        return 200, render(view, policy() if policy is not None else None, viewer=viewer), HTML

    return {f"{API}/explain/": explain, f"{API}/queues": queues, f"{API}/queues/": queues,
            f"{API}/topology": topology, f"{API}/topology/": topology, f"{API}/devices": devices,
            f"{API}/devices/": devices, "/ui": dashboard, "/ui/": dashboard}


def _namespace_of(key: str) -> str:
    return key.partition("/")[0] if "/" in key else "default"

