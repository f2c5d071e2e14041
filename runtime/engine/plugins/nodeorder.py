"""nodeorder: kube-scheduler style scorers (0–100 each) times their weights, times the
plugin's weight. least-requested, most-requested and balanced-allocation (over cpu and memory)
are the score kernel's terms; preferred node affinity and PreferNoSchedule taint toleration
are static per-class arrays, and so is image locality (`imagelocality`: kube-scheduler's
ImageLocality over the nodes' status.images, runtime.engine.images); inter-pod affinity
(`podaffinity`) and topology spread (`podtopologyspread`) are stateful scorers (runtime.engine.rules)."""

from __future__ import annotations

import numpy as np

from runtime.engine.images import image_locality, node_images
from runtime.engine.plugins.base import Plugin
from runtime.engine.session import KernelScore
from runtime.engine.plugins.predicates import pod_affinity_state, spread_state
from runtime.engine.nodemasks import bit_column, terms_mask
from runtime.engine.snapshot import TaskClass

NODEORDER_RESOURCES = ("cpu", "memory")


class NodeOrderPlugin(Plugin):
    name = "nodeorder"
    answers = frozenset({"node_order"})

    def on_session_open(self, ssn) -> None:
        if not self.spec.enabled("node_order"):
            return
        snap = ssn.snap
        weight = self.spec.weight if self.spec.weight is not None else 1.0
        self.register(ssn, "node_order", KernelScore(
            least_requested=float(self.args.get("leastrequested", 1)) * weight,
            most_requested=float(self.args.get("mostrequested", 0)) * weight,
            balanced=float(self.args.get("balancedresource", 1)) * weight,
            requested_resources=tuple(snap.resource_index[name] for name in NODEORDER_RESOURCES)))
        affinity_w = float(self.args.get("nodeaffinity", 2)) * weight
        taint_w = float(self.args.get("tainttoleration", 3)) * weight
        image_w = float(self.args.get("imagelocality", 1)) * weight
        images = node_images(snap.node_objects) if image_w else None

        def static(cls: TaskClass):
            out = None
            if affinity_w and cls.preferred_terms:
                raw = np.zeros(snap.n_nodes, dtype=np.float64)
                for w, term in cls.preferred_terms:
                    raw += w * terms_mask(snap, (term,))
                top = raw.max()
                if top > 0:
                    out = raw * (100.0 / top) * affinity_w
            if taint_w and snap.prefer_taints:
                bad = np.zeros(snap.n_nodes, dtype=np.float64)
                for b, taint in enumerate(snap.prefer_taints):
                    if not any(t.tolerates(taint) for t in cls.tolerations):
                        bad += bit_column(snap.prefer_taint_bits, b)
                top = bad.max()
                score = (100.0 * (top - bad) / top) if top > 0 else np.full(snap.n_nodes, 100.0)
                out = score * taint_w if out is None else out + score * taint_w
            if images is not None and images.any:
                local = image_locality(images, snap.pods[cls.head])
                if local is not None:
                    out = local * image_w if out is None else out + local * image_w
            return out

        self.register(ssn, "node_order", static)
        if snap.rule_pods:   # inter-pod scores only where some pod carries the rule's kind
            carried = snap.rule_kinds()
            for name, state in (("podaffinity", pod_affinity_state), ("podtopologyspread", spread_state)):
                w = float(self.args.get(name, 2)) * weight
                if w > 0 and name in carried:
                    rule = state(ssn)
                    rule.weight = w
                    self.register(ssn, "node_order", rule)


PLUGIN = NodeOrderPlugin
