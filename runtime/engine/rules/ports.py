"""NodePorts (kube-scheduler's plugin, which Volcano's predicates wraps): a pod's host ports
(regular containers' and sidecars') must be free on the node, by port and protocol; a
specific hostIP conflicts with the same IP and with 0.0.0.0, 0.0.0.0 with every IP. A pod that
is leaving still holds its ports: a node they would free is a future fit (pipelined)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from runtime.cluster.model import HostPort
from runtime.engine.rules.pods import CountingRule, PlacedGroup, count_changes, keep_counts, kept_counts, placed_groups
from runtime.engine.extension import MASK_FAIL, MASK_LATER, MASK_PASS, Check

if TYPE_CHECKING:  # pragma: no cover
    from runtime.engine.session import Session

PORTS_MESSAGE = "node(s) didn't have free ports for the requested pod ports"
KEPT_COUNTS = "nodeports-counts"       # its Snapshot.rule_tables key for the placed pods' ports


class NodePortsRule(CountingRule):
    name = "nodeports"

    def __init__(self, ssn: Session):
        self.ssn = ssn
        self.snap = ssn.snap
        # (protocol, port) -> (node, IP, leaving) -> pods: flat, so that the placed pods' counts
        # kept across cycles (pods.KeptCounts) are copied a dict per port, not one per node.
        self._used: dict[tuple[str, int], dict[tuple[int, str, bool], int]] = {}
        placed = placed_groups(ssn)
        kept = kept_counts(self.snap, KEPT_COUNTS, [])
        if kept is None:
            for alike in placed:
                self._tally(alike, 1)
            keep_counts(self.snap, KEPT_COUNTS, [], {port: dict(used) for port, used in self._used.items()}, placed)
            return
        # The kept counts brought up to date by the placed groups that changed; a session takes
        # its placements on copies.
        self._used = kept.tables
        count_changes(kept, self.snap, placed, self._tally)
        self._used = {port: dict(used) for port, used in kept.tables.items()}

    def _tally(self, alike: PlacedGroup, step: int) -> None:
        """Takes (step 1) or frees (-1) the host ports of a group of placed pods."""
        if alike.rules is not None and alike.rules.host_ports:    # None or a non-empty rules object
            for port in alike.rules.host_ports:
                for leaving, rows in ((False, alike.live), (True, alike.leaving)):
                    for row in rows.tolist():
                        self._take(port, row, step, leaving)

    def _ports(self, cid: int) -> tuple[HostPort, ...]:
        rules = self.snap.pods[self.snap.classes[cid].head].rules
        return rules.host_ports if rules is not None else ()

    def _take(self, port: HostPort, node: int, step: int, leaving: bool) -> None:
        used = self._used.setdefault((port.protocol, port.port), {})
        key = (node, port.ip, leaving)
        left = used.get(key, 0) + step
        if left > 0:
            used[key] = left
        else:
            used.pop(key, None)

    def filters(self, cid: int) -> bool:
        return bool(self._ports(cid))

    def codes(self, cid: int, nodes: np.ndarray | None) -> np.ndarray:
        all_codes = np.full(self.snap.n_nodes, MASK_PASS, dtype=np.uint8)
        for wanted in self._ports(cid):
            for (node, ip, leaving), count in self._used.get((wanted.protocol, wanted.port), {}).items():
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

    def _move(self, t: int, node: int, step: int = 1, leaving: bool = False) -> None:
        rules = self.snap.pods[t].rules
        if rules is not None and rules.host_ports:
            for port in rules.host_ports:
                self._take(port, node, step, leaving)
            self.ssn.mark_all_dirty(np.array([node], dtype=np.int64), self)
