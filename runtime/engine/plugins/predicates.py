"""predicates: node selector and required node affinity (matchExpressions, matchFields on
metadata.name), taints and tolerations (NoSchedule, NoExecute) as static filters, each
answering for a whole task class at once over the label and taint bitsets; inter-pod affinity,
topology spread and host ports as stateful ones (runtime.engine.rules), each switchable (Volcano's
predicate.PodAffinityEnable, PodTopologySpreadEnable, NodePortsEnable). Resource fit and the
pod-count limit (the `pods` resource) are checked by the fit kernel for every plan;
unschedulable (cordoned) nodes are always filtered."""

from __future__ import annotations


from runtime.engine.nodemasks import AFFINITY_MESSAGE, affinity_mask, untolerated_taint_checks
from runtime.engine.plugins.base import Plugin
from runtime.engine.rules.podaffinity import PodAffinityRule
from runtime.engine.rules.ports import NodePortsRule
from runtime.engine.rules.spread import TopologySpreadRule
from runtime.engine.extension import Check
from runtime.engine.snapshot import TaskClass




def pod_affinity_state(ssn) -> PodAffinityRule:
    return ssn.rule_state("podaffinity", lambda: PodAffinityRule(ssn))


def spread_state(ssn) -> TopologySpreadRule:
    return ssn.rule_state("podtopologyspread", lambda: TopologySpreadRule(ssn))


class PredicatesPlugin(Plugin):
    name = "predicates"
    answers = frozenset({"predicate"})

    def on_session_open(self, ssn) -> None:
        snap = ssn.snap
        use_affinity = self.args.get("node_affinity", True)
        use_taints = self.args.get("taint_toleration", True)
        # Each inter-pod rule only where some pod carries its kind (a rule no pod carries passes
        # every node and counts nothing: opened, it would be asked about every class for nothing).
        carried = snap.rule_kinds() if snap.rule_pods else frozenset()
        if "podaffinity" in carried and self.args.get("pod_affinity", True):
            rule = pod_affinity_state(ssn)
            rule.filter_on = True
            self.register(ssn, "predicate", rule)
        if "podtopologyspread" in carried and self.args.get("pod_topology_spread", True):
            rule = spread_state(ssn)
            rule.filter_on = True
            self.register(ssn, "predicate", rule)
        if "nodeports" in carried and self.args.get("node_ports", True):
            self.register(ssn, "predicate", NodePortsRule(ssn))

        # Classes are many (one per rule group) and their node selectors and tolerations few:
        # each distinct one's masks are made once a session (a Check's mask is only read).
        affinity_checks: dict[tuple, Check] = {}
        taint_checks: dict[tuple, list[Check]] = {}

        def predicate(cls: TaskClass) -> list[Check]:
            checks = []
            if use_affinity and (cls.node_selector or cls.required_terms):
                key = (cls.node_selector, cls.required_terms)
                check = affinity_checks.get(key)
                if check is None:
                    check = affinity_checks[key] = Check(AFFINITY_MESSAGE, affinity_mask(snap, cls))
                checks.append(check)
            if use_taints and snap.taints:
                untolerated = taint_checks.get(cls.tolerations)
                if untolerated is None:
                    untolerated = taint_checks[cls.tolerations] = untolerated_taint_checks(snap, cls.tolerations)
                checks.extend(untolerated)
            return checks

        self.register(ssn, "predicate", predicate)


PLUGIN = PredicatesPlugin
