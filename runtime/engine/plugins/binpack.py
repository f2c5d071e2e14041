"""binpack: pack tasks onto the fullest nodes that fit (Volcano's formula, in the score kernel).

For each resource r the task requests and that has a weight: if used + request > allocatable
the node scores 0; else s_r = (used_r + request_r) × w_r / allocatable_r. Score = Σ s_r / Σ w_r ×
100 × the plugin's weight (`binpack weight N`, Volcano's binpack.weight; 0 turns it off)."""

from __future__ import annotations

from runtime.engine.plugins.base import Plugin
from runtime.engine.session import KernelScore


class BinpackPlugin(Plugin):
    name = "binpack"
    answers = frozenset({"node_order"})

    def on_session_open(self, ssn) -> None:
        if not self.spec.enabled("node_order"):
            return
        index = ssn.snap.resource_index
        weight = self.spec.weight if self.spec.weight is not None else 1.0
        weights = {"cpu": self.args.get("cpu", 1), "memory": self.args.get("memory", 1)}
        weights.update(self.args.get("resources") or {})
        self.register(ssn, "node_order", KernelScore(
            binpack=weight, binpack_resources={index[name]: w for name, w in weights.items() if name in index}))


PLUGIN = BinpackPlugin
