"""pkg/scheduler/plugins/conformance/conformance_test.go (Volcano v1.14.1), TestConformancePlugin.

The Go test asks ssn.Preemptable(preemptor, [kube-system pod, other pod]) with conformance as the
only victim plugin; our equivalent is Session.victims("preemptable", ...), asked directly."""

from __future__ import annotations

import pytest

from vcase import Case, Expect, node, params, plugin, pod, res, run_and_check


def victims_are(want: list[str]):
    def probe(ssn, decisions):
        keys = ssn.snap.task_keys
        index = {k: i for i, k in enumerate(keys)}
        candidates = [index["kube-system/test-pod"], index["test-namespace/test-pod"]]
        got = [keys[t] for t in ssn.victims("preemptable", index["test-namespace/preemptor"], candidates)]
        assert got == want, got
    return probe


CASES = [
    # TestConformancePlugin / "conformance plugin": the kube-system pod is never a victim.
    # (The Go pods name a PodGroup pg1 that does not exist; ours are lone pods.)
    Case("TestConformancePlugin / conformance plugin", [[plugin("conformance", "preemptable")]], (),
         nodes=[node("test-node", res("4", "8Gi", {"pods": "10"}))],
         pods=[pod("kube-system", "test-pod", "test-node", "Running", res("1", "1Gi"), ""),
               pod("test-namespace", "test-pod", "test-node", "Running", res("1", "1Gi"), ""),
               pod("test-namespace", "preemptor", "", "Pending", res("1", "1Gi"), "")],
         expect=Expect(binds=None, evicted=None), probe=victims_are(["test-namespace/test-pod"]),
         also_listed=("preempt",)),
]


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def pure(request):
    return request.param


@pytest.mark.parametrize("case", params(CASES))
def test_conformance_case(case, pure):
    run_and_check(case, pure)
