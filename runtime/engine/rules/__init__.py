"""Stateful placement rules (runtime.engine.extension.StatefulRule): filters and scorers whose answer
depends on where other pods are, kept exact as the cycle places, undoes and evicts.

| module | rule (kube-scheduler plugin) | registered by |
|---|---|---|
| `podaffinity.py` | InterPodAffinity: required and preferred (anti-)affinity, symmetric | predicates (`pod_affinity`), nodeorder (`podaffinity`) |
| `spread.py` | PodTopologySpread: DoNotSchedule filters, ScheduleAnyway scores | predicates (`pod_topology_spread`), nodeorder (`podtopologyspread`) |
| `ports.py` | NodePorts: host port conflicts | predicates (`node_ports`) |
| `pods.py` | what they share: the pods they count, each pod's label profile | — |

Counting follows kube-scheduler: pods this cycle placed (allocated or pipelined) count like
bound ones; a pod that is leaving (evicted, terminating) still holds its node's ports and
repels by anti-affinity until it is gone — a placement that only its leaving frees is a
future fit, pipelined (MASK_LATER) — but no longer counts for spread or as an affinity target.
"""
