"""NodePorts (kube-scheduler's plugin, which Volcano's predicates wraps): a pod's host ports
(regular containers' and sidecars') must be free on the node, by port and protocol; a
specific hostIP conflicts with the same IP and with 0.0.0.0, 0.0.0.0 with every IP. A pod that
is leaving still holds its ports: a node they would free is a future fit (pipelined)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections import Counter

import numpy as np

from runtime.cluster.model import HostPort
from runtime.engine.rules.pods import CountingRule, placed_groups
from runtime.engine.extension import MASK_FAIL, MASK_LATER, MASK_PASS, Check

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.session import Session

PORTS_MESSAGE = "node(s) didn't have free ports for the requested pod ports"


class NodePortsRule(CountingRule):
    name = "nodeports"

    def __init__(self, ssn: Session):
        self.ssn = ssn
        self.snap = ssn.snap
        # (protocol, port) -> node -> Counter of (IP, leaving)
        self._used: dict[tuple[str, int], dict[int, Counter]] = {}
        for alike in placed_groups(ssn):
            if alike.rules is not None and alike.rules.host_ports:    # None or a non-empty rules object
                for port in alike.rules.host_ports:
                    for leaving, rows in ((False, alike.live), (True, alike.leaving)):
                        for row in rows.tolist():
                            self._take(port, row, 1, leaving)

    def _ports(self, cid: int) -> tuple[HostPort, ...]:
        rules = self.snap.pods[self.snap.classes[cid].head].rules
        return rules.host_ports if rules else ()

    def _take(self, port: HostPort, node: int, step: int, leaving: bool) -> None:
        on_node = self._used.setdefault((port.protocol, port.port), {}).setdefault(node, Counter())
        on_node[(port.ip, leaving)] += step
        if on_node[(port.ip, leaving)] <= 0:
            del on_node[(port.ip, leaving)]

    def filters(self, cid: int) -> bool:
        return bool(self._ports(cid))

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        all_codes = np.full(self.snap.n_nodes, MASK_PASS, dtype=np.uint8)
        for wanted in self._ports(cid):
            for node, holders in self._used.get((wanted.protocol, wanted.port), {}).items():
                for (ip, leaving), count in holders.items():
                    if count > 0 and wanted.conflicts(HostPort(wanted.port, wanted.protocol, ip)):
                        if not leaving:
                            all_codes[node] = MASK_FAIL
                        elif all_codes[node] != MASK_FAIL:
                            all_codes[node] = MASK_LATER
        return all_codes if nodes is None else all_codes[nodes]

    def checks(self, cid: int) -> list[Check]:
        failing = self.codes(cid, None) == MASK_FAIL
        return [Check(PORTS_MESSAGE, ~failing)] if failing.any() else []

    def listens(self, cid: int) -> bool:
        return bool(self._ports(cid))

    def _move(self, t: int, node: int, step: int, leaving: bool) -> None:
        rules = self.snap.pods[t].rules
        if rules and rules.host_ports:
            for port in rules.host_ports:
                self._take(port, node, step, leaving)
            self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)
